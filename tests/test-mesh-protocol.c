/* test-mesh-protocol.c: the peer wire codec (suite core).
 *
 * Round trips of every message shape and size class, then each malformed
 * input path the decoder has: each must be refused with an error, leave the
 * reader usable, and never crash.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>

#include "mesh/dc-mesh-error.h"
#include "mesh/dc-mesh-protocol.h"

static GBytes *
pattern_bytes (gsize size,
               guint seed)
{
  guint8 *data = g_malloc (MAX (size, 1));

  for (gsize i = 0; i < size; i++)
    data[i] = (guint8) ((i * 2654435761u + seed) >> 13);
  return g_bytes_new_take (data, size);
}

/* Feeds all pieces; returns the one message they form, asserting no error. */
static DcMeshMessage *
reassemble (DcMeshReader *reader,
            GPtrArray    *pieces)
{
  DcMeshMessage *message = NULL;

  for (guint i = 0; i < pieces->len; i++)
    {
      g_autoptr(GError) error = NULL;
      gsize size;
      const guint8 *data = g_bytes_get_data (g_ptr_array_index (pieces, i), &size);

      g_assert_null (message);
      g_assert_cmpuint (size, <=, DC_MESH_PIECE_SIZE);
      message = dc_mesh_reader_push (reader, data, size, &error);
      g_assert_no_error (error);
    }
  g_assert_nonnull (message);
  g_assert_true (dc_mesh_reader_is_idle (reader));
  return message;
}

static void
test_round_trip_sizes (void)
{
  const gsize sizes[] = { 0, 1, 65519, 65520, 65521, 65536, 3 * 65536 + 7, 16 * 1024 * 1024 };
  g_autoptr(DcMeshReader) reader = dc_mesh_reader_new ();

  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    {
      g_autoptr(GBytes) payload = pattern_bytes (sizes[i], i);
      g_autoptr(GError) error = NULL;
      g_autoptr(GPtrArray) pieces = NULL;
      g_autoptr(DcMeshMessage) message = NULL;
      gsize expected_pieces = sizes[i] <= 65520 ? 1 : 1 + (sizes[i] - 65520 + 65535) / 65536;

      pieces = dc_mesh_message_encode_pieces (DC_MESH_MSG_DATA, payload, &error);
      g_assert_no_error (error);
      g_assert_cmpuint (pieces->len, ==, expected_pieces);
      message = reassemble (reader, pieces);
      g_assert_cmpuint (message->type, ==, DC_MESH_MSG_DATA);
      g_assert_true (g_bytes_equal (message->payload, payload));
    }
}

static void
test_round_trip_typed (void)
{
  g_autoptr(DcMeshReader) reader = dc_mesh_reader_new ();
  g_autoptr(DcMeshHello) hello = dc_mesh_hello_new ("Ada’s laptop", "vulkan", "ab12cd", 7);
  g_autoptr(GBytes) hello_bytes = dc_mesh_hello_encode (hello);
  g_autoptr(GPtrArray) pieces = NULL;
  g_autoptr(DcMeshMessage) message = NULL;
  g_autoptr(DcMeshHello) back = NULL;
  g_autoptr(GError) error = NULL;
  DcMeshBulkHeader bulk = { 42, 1000, 5000, 3, 0 }, bulk_back;
  DcMeshStepReport report = { 99, 0x3f800000u, 7, { 0 } }, report_back;
  g_autoptr(GBytes) bulk_bytes = NULL, bulk_data = NULL, report_bytes = NULL;
  const guint8 data[5] = { 1, 2, 3, 4, 5 };
  char long_name[400];

  pieces = dc_mesh_message_encode_pieces (DC_MESH_MSG_HELLO, hello_bytes, &error);
  g_assert_no_error (error);
  message = reassemble (reader, pieces);
  back = dc_mesh_hello_decode (message->payload, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (back->name, ==, "Ada’s laptop");
  g_assert_cmpstr (back->backend, ==, "vulkan");
  g_assert_cmpstr (back->probe_hash, ==, "ab12cd");
  g_assert_cmpuint (back->numeric_rule_id, ==, 7);

  /* An over-long name is cut to 255 bytes and still decodes. */
  memset (long_name, 'x', sizeof long_name - 1);
  long_name[sizeof long_name - 1] = '\0';
  g_clear_pointer (&hello, dc_mesh_hello_free);
  g_clear_pointer (&back, dc_mesh_hello_free);
  g_clear_pointer (&hello_bytes, g_bytes_unref);
  hello = dc_mesh_hello_new (long_name, "cpu", "", 1);
  hello_bytes = dc_mesh_hello_encode (hello);
  back = dc_mesh_hello_decode (hello_bytes, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (strlen (back->name), ==, 255);

  bulk_bytes = dc_mesh_bulk_encode (&bulk, data, sizeof data);
  g_assert_true (dc_mesh_bulk_decode (bulk_bytes, &bulk_back, &bulk_data, &error));
  g_assert_no_error (error);
  g_assert_cmpmem (&bulk, sizeof bulk, &bulk_back, sizeof bulk_back);
  g_assert_cmpmem (g_bytes_get_data (bulk_data, NULL), g_bytes_get_size (bulk_data),
                   data, sizeof data);

  for (guint i = 0; i < 32; i++)
    report.weights_hash[i] = (guint8) (i * 7);
  report_bytes = dc_mesh_step_report_encode (&report);
  g_assert_true (dc_mesh_step_report_decode (report_bytes, &report_back, &error));
  g_assert_no_error (error);
  g_assert_cmpmem (&report, sizeof report, &report_back, sizeof report_back);
}

/* The header of a small DATA message, for corrupting. */
static GBytes *
small_frame (void)
{
  g_autoptr(GBytes) payload = pattern_bytes (100, 5);
  g_autoptr(GPtrArray) pieces = dc_mesh_message_encode_pieces (DC_MESH_MSG_DATA, payload, NULL);

  return g_bytes_ref (g_ptr_array_index (pieces, 0));
}

static void
expect_refused (DcMeshReader *reader,
                const guint8 *data,
                gsize         size,
                gint          code)
{
  g_autoptr(GError) error = NULL;
  DcMeshMessage *message = dc_mesh_reader_push (reader, data, size, &error);

  g_assert_null (message);
  g_assert_error (error, DC_MESH_ERROR, code);
  g_test_message ("refused as expected: %s", error->message);
}

/* After every refusal the reader must accept a good message again. */
static void
expect_recovers (DcMeshReader *reader)
{
  g_autoptr(GBytes) good = small_frame ();
  g_autoptr(GError) error = NULL;
  g_autoptr(DcMeshMessage) message = NULL;

  message = dc_mesh_reader_push (reader, g_bytes_get_data (good, NULL),
                                 g_bytes_get_size (good), &error);
  g_assert_no_error (error);
  g_assert_nonnull (message);
}

static void
put32 (guint8 *p, guint32 v)
{
  p[0] = v; p[1] = v >> 8; p[2] = v >> 16; p[3] = v >> 24;
}

static void
test_malformed_frames (void)
{
  g_autoptr(DcMeshReader) reader = dc_mesh_reader_new ();
  g_autoptr(GBytes) good = small_frame ();
  gsize size = g_bytes_get_size (good);
  g_autofree guint8 *frame = g_memdup2 (g_bytes_get_data (good, NULL), size);
  g_autofree guint8 *bad = g_malloc (DC_MESH_PIECE_SIZE + 1);

  /* Wrong magic. */
  memcpy (bad, frame, size);
  bad[0] ^= 0xff;
  expect_refused (reader, bad, size, DC_MESH_ERROR_MALFORMED);
  expect_recovers (reader);

  /* Wrong version. */
  memcpy (bad, frame, size);
  bad[4] = 2;
  expect_refused (reader, bad, size, DC_MESH_ERROR_UNSUPPORTED);
  expect_recovers (reader);

  /* Unknown type, type 0. */
  memcpy (bad, frame, size);
  bad[5] = 200;
  expect_refused (reader, bad, size, DC_MESH_ERROR_MALFORMED);
  bad[5] = 0;
  expect_refused (reader, bad, size, DC_MESH_ERROR_MALFORMED);
  expect_recovers (reader);

  /* Reserved flags set. */
  memcpy (bad, frame, size);
  bad[7] = 1;
  expect_refused (reader, bad, size, DC_MESH_ERROR_MALFORMED);

  /* Checksum wrong, payload byte flipped. */
  memcpy (bad, frame, size);
  bad[12] ^= 1;
  expect_refused (reader, bad, size, DC_MESH_ERROR_MALFORMED);
  memcpy (bad, frame, size);
  bad[size - 1] ^= 0x40;
  expect_refused (reader, bad, size, DC_MESH_ERROR_MALFORMED);
  expect_recovers (reader);

  /* Truncated header: every length below 16. */
  for (gsize n = 0; n < DC_MESH_HEADER_SIZE; n++)
    expect_refused (reader, frame, n, DC_MESH_ERROR_MALFORMED);
  expect_recovers (reader);

  /* Length larger than the limit: refused before any allocation. */
  memcpy (bad, frame, size);
  put32 (bad + 8, 0xffffffffu);
  expect_refused (reader, bad, size, DC_MESH_ERROR_TOO_LARGE);
  put32 (bad + 8, DC_MESH_MAX_PAYLOAD + 1);
  expect_refused (reader, bad, size, DC_MESH_ERROR_TOO_LARGE);

  /* Length smaller than the bytes in the piece. */
  memcpy (bad, frame, size);
  put32 (bad + 8, 10);
  expect_refused (reader, bad, size, DC_MESH_ERROR_MALFORMED);

  /* Length larger than one piece but a short first piece (truncated stream). */
  memcpy (bad, frame, size);
  put32 (bad + 8, 1000000);
  expect_refused (reader, bad, size, DC_MESH_ERROR_MALFORMED);
  expect_recovers (reader);

  /* Piece larger than the channel limit. */
  memset (bad, 0, DC_MESH_PIECE_SIZE + 1);
  expect_refused (reader, bad, DC_MESH_PIECE_SIZE + 1, DC_MESH_ERROR_TOO_LARGE);

  /* Truncated payload: header says 100, 60 arrive, then a new header comes
   * (too long for the remaining 40 bytes) and is refused. */
  memcpy (bad, frame, size);
  g_assert_null (dc_mesh_reader_push (reader, bad, DC_MESH_HEADER_SIZE + 60, NULL));
  expect_refused (reader, frame, size, DC_MESH_ERROR_MALFORMED);
  expect_recovers (reader);

  /* Fixed-size types with the wrong size: a heartbeat of 3 bytes. */
  memcpy (bad, frame, size);
  bad[5] = DC_MESH_MSG_HEARTBEAT;
  put32 (bad + 8, 3);
  expect_refused (reader, bad, DC_MESH_HEADER_SIZE + 3, DC_MESH_ERROR_MALFORMED);
  expect_recovers (reader);
}

static void
test_malformed_multi_piece (void)
{
  g_autoptr(DcMeshReader) reader = dc_mesh_reader_new ();
  g_autoptr(GBytes) payload = pattern_bytes (200000, 9);
  g_autoptr(GPtrArray) pieces = dc_mesh_message_encode_pieces (DC_MESH_MSG_DATA, payload, NULL);
  GBytes *first = g_ptr_array_index (pieces, 0);
  GBytes *second = g_ptr_array_index (pieces, 1);
  g_autofree guint8 *flipped = g_memdup2 (g_bytes_get_data (second, NULL),
                                          g_bytes_get_size (second));

  g_assert_cmpuint (pieces->len, ==, 4);

  /* A short middle piece. */
  g_assert_null (dc_mesh_reader_push (reader, g_bytes_get_data (first, NULL),
                                      g_bytes_get_size (first), NULL));
  expect_refused (reader, flipped, 1000, DC_MESH_ERROR_MALFORMED);
  expect_recovers (reader);

  /* A corrupted middle piece fails the checksum at the end. */
  flipped[500] ^= 1;
  g_assert_null (dc_mesh_reader_push (reader, g_bytes_get_data (first, NULL),
                                      g_bytes_get_size (first), NULL));
  g_assert_null (dc_mesh_reader_push (reader, flipped, g_bytes_get_size (second), NULL));
  for (guint i = 2; i + 1 < pieces->len; i++)
    g_assert_null (dc_mesh_reader_push (reader, g_bytes_get_data (pieces->pdata[i], NULL),
                                        g_bytes_get_size (pieces->pdata[i]), NULL));
  expect_refused (reader, g_bytes_get_data (pieces->pdata[pieces->len - 1], NULL),
                  g_bytes_get_size (pieces->pdata[pieces->len - 1]), DC_MESH_ERROR_MALFORMED);
  expect_recovers (reader);

  /* An empty continuation piece. */
  g_assert_null (dc_mesh_reader_push (reader, g_bytes_get_data (first, NULL),
                                      g_bytes_get_size (first), NULL));
  expect_refused (reader, flipped, 0, DC_MESH_ERROR_MALFORMED);
  expect_recovers (reader);
}

/* A credit is exactly 8 bytes: round trip through the reader, then one
 * byte short and one byte long refused before anything is allocated. */
static void
test_credit (void)
{
  const guint8 body[9] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
  g_autoptr(DcMeshReader) reader = dc_mesh_reader_new ();
  g_autoptr(GBytes) payload = g_bytes_new (body, DC_MESH_CREDIT_SIZE);
  g_autoptr(GPtrArray) pieces = dc_mesh_message_encode_pieces (DC_MESH_MSG_CREDIT, payload, NULL);
  g_autoptr(DcMeshMessage) message = NULL;
  g_autoptr(GError) error = NULL;
  GBytes *piece;

  g_assert_nonnull (pieces);
  g_assert_cmpuint (pieces->len, ==, 1);
  piece = g_ptr_array_index (pieces, 0);
  g_assert_cmpuint (g_bytes_get_size (piece), ==, DC_MESH_HEADER_SIZE + DC_MESH_CREDIT_SIZE);
  message = dc_mesh_reader_push (reader, g_bytes_get_data (piece, NULL), g_bytes_get_size (piece),
                                 &error);
  g_assert_no_error (error);
  g_assert_nonnull (message);
  g_assert_cmpuint (message->type, ==, DC_MESH_MSG_CREDIT);
  g_assert_cmpstr (dc_mesh_message_type_to_string (message->type), ==, "credit");
  g_assert_true (g_bytes_equal (message->payload, payload));

  g_assert_false (dc_mesh_message_check_payload (DC_MESH_MSG_CREDIT, 7, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
  g_clear_error (&error);
  g_assert_false (dc_mesh_message_check_payload (DC_MESH_MSG_CREDIT, 9, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_TOO_LARGE);
  g_clear_error (&error);
  g_clear_pointer (&payload, g_bytes_unref);
  payload = g_bytes_new (body, 9);
  g_assert_null (dc_mesh_message_encode_pieces (DC_MESH_MSG_CREDIT, payload, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_TOO_LARGE);
}

static void
test_malformed_bodies (void)
{
  g_autoptr(GError) error = NULL;
  DcMeshBulkHeader bulk = { 1, 10, 12, 0, 0 }, back;
  const guint8 data[5] = { 0 };
  g_autoptr(GBytes) bytes = NULL;
  GBytes *out = NULL;
  const guint8 bad_utf8[] = { 1, 0, 0, 0, 2, 0xc3, 0x28, 0, 0 };
  const guint8 overrun[] = { 1, 0, 0, 0, 200, 'a', 'b', 0, 0 };
  const guint8 trailing[] = { 1, 0, 0, 0, 1, 'a', 0, 0, 9 };
  const guint8 nul[] = { 1, 0, 0, 0, 2, 'a', 0, 0, 0 };
  const guint8 *cases[] = { bad_utf8, overrun, trailing, nul };
  DcMeshStepReport report;

  /* Bulk data overrunning its declared object, offset past the end, flags. */
  bytes = dc_mesh_bulk_encode (&bulk, data, sizeof data);
  g_assert_false (dc_mesh_bulk_decode (bytes, &back, &out, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
  g_clear_error (&error);
  g_clear_pointer (&bytes, g_bytes_unref);
  bulk.offset = G_MAXUINT64;
  bulk.total = 4;
  bytes = dc_mesh_bulk_encode (&bulk, NULL, 0);
  g_assert_false (dc_mesh_bulk_decode (bytes, &back, &out, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
  g_clear_error (&error);
  g_clear_pointer (&bytes, g_bytes_unref);
  bulk.offset = 0;
  bulk.flags = 1;
  bytes = dc_mesh_bulk_encode (&bulk, NULL, 0);
  g_assert_false (dc_mesh_bulk_decode (bytes, &back, &out, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
  g_clear_error (&error);
  g_clear_pointer (&bytes, g_bytes_unref);
  bytes = g_bytes_new (data, 5);
  g_assert_false (dc_mesh_bulk_decode (bytes, &back, &out, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
  g_clear_error (&error);
  g_assert_false (dc_mesh_step_report_decode (bytes, &report, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
  g_clear_error (&error);
  g_assert_null (out);

  /* Hellos: invalid UTF-8, a length past the end, trailing bytes, a NUL,
   * and every truncation of a good one. */
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GBytes) hello = g_bytes_new (cases[i], 9);

      g_assert_null (dc_mesh_hello_decode (hello, &error));
      g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
      g_clear_error (&error);
    }
  {
    g_autoptr(DcMeshHello) hello = dc_mesh_hello_new ("name", "cpu", "hash", 3);
    g_autoptr(GBytes) good = dc_mesh_hello_encode (hello);

    for (gsize n = 0; n < g_bytes_get_size (good); n++)
      {
        g_autoptr(GBytes) cut = g_bytes_new (g_bytes_get_data (good, NULL), n);

        g_assert_null (dc_mesh_hello_decode (cut, &error));
        g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
        g_clear_error (&error);
      }
  }
}

static void
test_encode_limits (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) two = g_bytes_new ("ab", 2);

  g_assert_null (dc_mesh_message_encode_pieces (DC_MESH_MSG_BYE, two, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_TOO_LARGE);
  g_clear_error (&error);
  g_assert_null (dc_mesh_message_encode_pieces (77, NULL, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
}

int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/dc/mesh/protocol/round-trip/sizes", test_round_trip_sizes);
  g_test_add_func ("/dc/mesh/protocol/round-trip/typed", test_round_trip_typed);
  g_test_add_func ("/dc/mesh/protocol/malformed/frames", test_malformed_frames);
  g_test_add_func ("/dc/mesh/protocol/malformed/multi-piece", test_malformed_multi_piece);
  g_test_add_func ("/dc/mesh/protocol/malformed/bodies", test_malformed_bodies);
  g_test_add_func ("/dc/mesh/protocol/credit", test_credit);
  g_test_add_func ("/dc/mesh/protocol/encode-limits", test_encode_limits);

  return g_test_run ();
}
