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
#include <zstd.h>

#include "mesh/dc-mesh-error.h"
#include "mesh/dc-mesh-protocol.h"
#include "mesh/dc-mesh-train-protocol.h"

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
  g_autoptr(GBytes) bulk_bytes = NULL, bulk_data = NULL;
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

/* SWITCH and SWITCHED carry the new connection's generation as a u64:
 * the bytes, the names, a short body and generations 0 and 1 refused. */
static void
test_switch (void)
{
  const guint8 expected[DC_MESH_SWITCH_SIZE] = { 2, 0, 0, 0, 0, 0, 0, 0 };
  g_autoptr(GBytes) payload = dc_mesh_switch_encode (2);
  g_autoptr(GBytes) short_body = g_bytes_new (expected, DC_MESH_SWITCH_SIZE - 1);
  g_autoptr(GBytes) first = dc_mesh_switch_encode (1);
  g_autoptr(GError) error = NULL;
  guint64 generation = 0;

  g_assert_cmpmem (g_bytes_get_data (payload, NULL), g_bytes_get_size (payload),
                   expected, sizeof expected);
  g_assert_true (dc_mesh_switch_decode (payload, &generation, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (generation, ==, 2);
  g_assert_cmpstr (dc_mesh_message_type_to_string (DC_MESH_MSG_SWITCH), ==, "switch");
  g_assert_cmpstr (dc_mesh_message_type_to_string (DC_MESH_MSG_SWITCHED), ==, "switched");
  g_assert_cmpuint (DC_MESH_MSG_LAST, ==, DC_MESH_MSG_SWITCHED);
  g_assert_true (dc_mesh_message_check_payload (DC_MESH_MSG_SWITCHED, DC_MESH_SWITCH_SIZE,
                                                &error));
  g_assert_false (dc_mesh_switch_decode (short_body, &generation, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
  g_clear_error (&error);
  g_assert_false (dc_mesh_switch_decode (first, &generation, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
}

/* A heartbeat (PING's and PONG's body too) is a u64 sequence and the
 * sender's µs, little-endian, 16 bytes; any other size is refused. */
static void
test_heartbeat (void)
{
  const guint8 expected[DC_MESH_HEARTBEAT_SIZE] = { 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,
                                                    0x10, 0x0f, 0x0e, 0x0d, 0x0c, 0x0b, 0x0a, 0x09 };
  g_autoptr(GBytes) payload = dc_mesh_heartbeat_encode (G_GUINT64_CONSTANT (0x0102030405060708),
                                                        G_GINT64_CONSTANT (0x090a0b0c0d0e0f10));
  g_autoptr(GBytes) short_body = g_bytes_new (expected, DC_MESH_HEARTBEAT_SIZE - 1);
  g_autoptr(GError) error = NULL;
  guint64 seq = 0;
  gint64 sent_us = 0;

  g_assert_cmpmem (g_bytes_get_data (payload, NULL), g_bytes_get_size (payload), expected,
                   sizeof expected);
  g_assert_true (dc_mesh_heartbeat_decode (payload, &seq, &sent_us, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (seq, ==, G_GUINT64_CONSTANT (0x0102030405060708));
  g_assert_cmpint (sent_us, ==, G_GINT64_CONSTANT (0x090a0b0c0d0e0f10));
  g_assert_false (dc_mesh_heartbeat_decode (short_body, &seq, &sent_us, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
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
  g_assert_null (dc_mesh_step_report_decode (bytes, &error));
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

/* The hello's optional memory: round trip, absent (the older layout,
 * byte for byte), the encoder's clamp, and the decoder's refusals. */
static void
test_hello_memory (void)
{
  g_autoptr(DcMeshReader) reader = dc_mesh_reader_new ();
  g_autoptr(DcMeshHello) hello = dc_mesh_hello_new ("name", "cpu", "hash", 3);
  g_autoptr(DcMeshHello) copy = NULL, back = NULL;
  g_autoptr(GBytes) without = NULL, with = NULL, bad = NULL;
  g_autoptr(GPtrArray) pieces = NULL;
  g_autoptr(DcMeshMessage) message = NULL;
  g_autoptr(GError) error = NULL;
  char name[300];

  /* Not announced: exactly the layout older builds send and accept. */
  without = dc_mesh_hello_encode (hello);
  g_assert_cmpuint (g_bytes_get_size (without), ==, 4 + 1 + 4 + 1 + 3 + 1 + 4);
  back = dc_mesh_hello_decode (without, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (back->memory, ==, 0);
  g_clear_pointer (&back, dc_mesh_hello_free);

  /* Announced: 8 more bytes, through the framing layer, and kept by a copy. */
  hello->memory = G_GUINT64_CONSTANT (3) << 30;
  with = dc_mesh_hello_encode (hello);
  g_assert_cmpuint (g_bytes_get_size (with), ==, g_bytes_get_size (without) + 8);
  pieces = dc_mesh_message_encode_pieces (DC_MESH_MSG_HELLO, with, &error);
  g_assert_no_error (error);
  message = reassemble (reader, pieces);
  back = dc_mesh_hello_decode (message->payload, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (back->memory, ==, G_GUINT64_CONSTANT (3) << 30);
  g_assert_cmpstr (back->probe_hash, ==, "hash");
  copy = dc_mesh_hello_copy (back);
  g_assert_cmpuint (copy->memory, ==, back->memory);
  g_assert_cmpstr (copy->name, ==, "name");
  g_clear_pointer (&back, dc_mesh_hello_free);

  /* More than the maximum is sent as the maximum. */
  hello->memory = G_MAXUINT64;
  g_clear_pointer (&with, g_bytes_unref);
  with = dc_mesh_hello_encode (hello);
  back = dc_mesh_hello_decode (with, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (back->memory, ==, DC_MESH_HELLO_MEMORY_MAX);
  g_clear_pointer (&back, dc_mesh_hello_free);

  /* The largest hello (three 255-byte strings and the memory) fits the
   * frame's limit. */
  memset (name, 'x', sizeof name - 1);
  name[sizeof name - 1] = '\0';
  {
    g_autoptr(DcMeshHello) big = dc_mesh_hello_new (name, name, name, 1);
    g_autoptr(GBytes) big_bytes = NULL;

    big->memory = 1;
    big_bytes = dc_mesh_hello_encode (big);
    g_assert_cmpuint (g_bytes_get_size (big_bytes), ==, 7 + 3 * 255 + 8);
    g_assert_true (dc_mesh_message_check_payload (DC_MESH_MSG_HELLO,
                                                  g_bytes_get_size (big_bytes), &error));
    g_assert_no_error (error);
    back = dc_mesh_hello_decode (big_bytes, &error);
    g_assert_no_error (error);
    g_assert_cmpuint (back->memory, ==, 1);
    g_clear_pointer (&back, dc_mesh_hello_free);
  }

  /* A zero memory (absent is how one says "none"), one over 1 PiB, and
   * other trailing lengths are refused. */
  {
    gsize size = g_bytes_get_size (without);
    const guint8 *base = g_bytes_get_data (without, NULL);
    const guint64 values[] = { 0, DC_MESH_HELLO_MEMORY_MAX + 1, G_MAXUINT64 };
    const gsize tails[] = { 1, 4, 7, 9 };

    for (guint i = 0; i < G_N_ELEMENTS (values); i++)
      {
        guint8 *data = g_malloc (size + 8);
        guint64 le = GUINT64_TO_LE (values[i]);

        memcpy (data, base, size);
        memcpy (data + size, &le, 8);
        bad = g_bytes_new_take (data, size + 8);
        g_assert_null (dc_mesh_hello_decode (bad, &error));
        g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
        g_test_message ("hello refused as expected: %s", error->message);
        g_clear_error (&error);
        g_clear_pointer (&bad, g_bytes_unref);
      }
    for (guint i = 0; i < G_N_ELEMENTS (tails); i++)
      {
        guint8 *data = g_malloc0 (size + tails[i]);

        memcpy (data, base, size);
        data[size] = 1;
        bad = g_bytes_new_take (data, size + tails[i]);
        g_assert_null (dc_mesh_hello_decode (bad, &error));
        g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
        g_clear_error (&error);
        g_clear_pointer (&bad, g_bytes_unref);
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

/* Training bodies (dc-mesh-train-protocol.c). */

/* Sends @body through the framing layer and returns what the reader gives
 * back; every training body must fit one piece. */
static GBytes *
through_frames (guint   type,
                GBytes *body)
{
  g_autoptr(DcMeshReader) reader = dc_mesh_reader_new ();
  g_autoptr(GPtrArray) pieces = NULL;
  g_autoptr(DcMeshMessage) message = NULL;
  g_autoptr(GError) error = NULL;

  pieces = dc_mesh_message_encode_pieces (type, body, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (pieces->len, ==, 1);
  message = reassemble (reader, pieces);
  g_assert_cmpuint (message->type, ==, type);
  return g_bytes_ref (message->payload);
}

/* A copy of @body with byte @at set to @value, or cut to @size bytes. */
static GBytes *
patched (GBytes *body,
         gsize   at,
         guint8  value)
{
  gsize size = g_bytes_get_size (body);
  guint8 *copy = g_memdup2 (g_bytes_get_data (body, NULL), size);

  g_assert_cmpuint (at, <, size);
  copy[at] = value;
  return g_bytes_new_take (copy, size);
}

static GBytes *
cut (GBytes *body,
     gsize   size)
{
  return g_bytes_new_from_bytes (body, 0, size);
}

static GBytes *
extended (GBytes       *body,
          const guint8 *more,
          gsize         n)
{
  GByteArray *out = g_byte_array_new ();

  g_byte_array_append (out, g_bytes_get_data (body, NULL), g_bytes_get_size (body));
  g_byte_array_append (out, more, n);
  return g_byte_array_free_to_bytes (out);
}

static void
fill (guint8 *p,
      gsize   n,
      guint   seed)
{
  for (gsize i = 0; i < n; i++)
    p[i] = (guint8) (i * 31 + seed);
}

static DcMeshRunConfig *
sample_config (void)
{
  DcMeshRunConfig *config = dc_mesh_run_config_new ();

  fill (config->run_id, sizeof config->run_id, 1);
  config->width = 128;
  config->seq = 64;
  config->batch = 32;
  config->steps = 600;
  config->lr_x1000 = 3;
  config->numeric_rule_id = 7;
  config->run_seed = G_GUINT64_CONSTANT (0x0123456789abcdef);
  config->start_step = 40;
  config->resume = TRUE;
  fill (config->resume_hash, sizeof config->resume_hash, 2);
  config->dataset_spec = g_strdup ("hf:roneneldan/TinyStories");
  config->probe_hash = g_strdup ("9f0c2b7a11d3e4f5");
  config->starter_id = g_strdup ("a1b2c3d4e5f60718");
  return config;
}

static void
expect_config_refused (GBytes *body,
                       gint    code)
{
  g_autoptr(GError) error = NULL;

  g_assert_null (dc_mesh_run_config_decode (body, &error));
  g_assert_error (error, DC_MESH_ERROR, code);
  g_test_message ("config refused as expected: %s", error->message);
}

static void
test_train_config (void)
{
  g_autoptr(DcMeshRunConfig) config = sample_config ();
  g_autoptr(DcMeshRunConfig) back = NULL;
  g_autoptr(GBytes) body = NULL, payload = NULL, bad = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *long_spec = NULL;
  gsize size, spec_at = DC_MESH_CONFIG_FIXED_SIZE;

  body = dc_mesh_run_config_encode (config, &error);
  g_assert_no_error (error);
  payload = through_frames (DC_MESH_MSG_CONFIG, body);
  back = dc_mesh_run_config_decode (payload, &error);
  g_assert_no_error (error);
  g_assert_cmpmem (back->run_id, 16, config->run_id, 16);
  g_assert_cmpuint (back->width, ==, 128);
  g_assert_cmpuint (back->seq, ==, 64);
  g_assert_cmpuint (back->batch, ==, 32);
  g_assert_cmpuint (back->steps, ==, 600);
  g_assert_cmpuint (back->lr_x1000, ==, 3);
  g_assert_cmpuint (back->numeric_rule_id, ==, 7);
  g_assert_cmpuint (back->run_seed, ==, config->run_seed);
  g_assert_cmpuint (back->start_step, ==, 40);
  g_assert_true (back->resume);
  g_assert_cmpmem (back->resume_hash, 32, config->resume_hash, 32);
  g_assert_cmpstr (back->dataset_spec, ==, config->dataset_spec);
  g_assert_cmpstr (back->probe_hash, ==, config->probe_hash);
  g_assert_cmpstr (back->starter_id, ==, config->starter_id);
  size = g_bytes_get_size (body);

  /* Every truncation, one trailing byte. */
  for (gsize n = 0; n < size; n++)
    {
      g_autoptr(GBytes) part = cut (body, n);
      g_autoptr(GError) part_error = NULL;

      g_assert_null (dc_mesh_run_config_decode (part, &part_error));
      g_assert_nonnull (part_error);
    }
  bad = extended (body, (const guint8 *) "x", 1);
  expect_config_refused (bad, DC_MESH_ERROR_MALFORMED);
  g_clear_pointer (&bad, g_bytes_unref);

  /* Another body version; unknown flags. Bytes 2 and 3, reserved before,
   * are the layers and heads (test_train_config_size). */
  bad = patched (body, 0, DC_MESH_TRAIN_BODY_VERSION + 1);
  expect_config_refused (bad, DC_MESH_ERROR_UNSUPPORTED);
  g_clear_pointer (&bad, g_bytes_unref);
  bad = patched (body, 1, 0x11);
  expect_config_refused (bad, DC_MESH_ERROR_MALFORMED);
  g_clear_pointer (&bad, g_bytes_unref);
  /* Bit 3: chunks may be zstd-compressed (2026-12-05; 0x09 was refused). */
  g_assert_false (back->chunks_zstd);
  {
    g_autoptr(GBytes) zstd_body = patched (body, 1, 0x09);   /* resume + zstd */
    g_autoptr(DcMeshRunConfig) zstd_config = dc_mesh_run_config_decode (zstd_body, NULL);

    g_assert_nonnull (zstd_config);
    g_assert_true (zstd_config->chunks_zstd);
  }
  /* Bit 1: gradients on the wire as bf16 (2026-12-02; 0x03 was refused). */
  g_assert_false (back->gradient_bf16);
  bad = patched (body, 1, 0x03);
  g_clear_pointer (&back, dc_mesh_run_config_free);
  back = dc_mesh_run_config_decode (bad, &error);
  g_assert_no_error (error);
  g_assert_true (back->gradient_bf16);
  g_assert_true (back->resume);
  g_clear_pointer (&bad, g_bytes_unref);
  config->gradient_bf16 = TRUE;
  bad = dc_mesh_run_config_encode (config, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (((const guint8 *) g_bytes_get_data (bad, NULL))[1], ==, 0x03);
  config->gradient_bf16 = FALSE;
  g_clear_pointer (&bad, g_bytes_unref);
  /* Bit 2: gradients on the wire as int8 blocks (2026-12-03; 0x05 was
   * refused); never together with bit 1. */
  bad = patched (body, 1, 0x05);
  g_clear_pointer (&back, dc_mesh_run_config_free);
  back = dc_mesh_run_config_decode (bad, &error);
  g_assert_no_error (error);
  g_assert_true (back->gradient_int8);
  g_assert_false (back->gradient_bf16);
  g_clear_pointer (&bad, g_bytes_unref);
  config->gradient_int8 = TRUE;
  bad = dc_mesh_run_config_encode (config, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (((const guint8 *) g_bytes_get_data (bad, NULL))[1], ==, 0x05);
  config->gradient_int8 = FALSE;
  g_clear_pointer (&bad, g_bytes_unref);
  bad = patched (body, 1, 0x07);
  expect_config_refused (bad, DC_MESH_ERROR_MALFORMED);
  g_clear_pointer (&bad, g_bytes_unref);

  /* A resume hash without the resume flag; a start step past the end. */
  bad = patched (body, 1, 0);
  expect_config_refused (bad, DC_MESH_ERROR_MALFORMED);
  g_clear_pointer (&bad, g_bytes_unref);
  bad = patched (body, 52 + 7, 0x80);
  expect_config_refused (bad, DC_MESH_ERROR_MALFORMED);
  g_clear_pointer (&bad, g_bytes_unref);

  /* A dataset spec declared longer than its cap: TOO_LARGE before any copy;
   * one longer than the body: MALFORMED. */
  bad = patched (body, spec_at + 1, 0x20);   /* 0x2000 + low byte > 4096 */
  expect_config_refused (bad, DC_MESH_ERROR_TOO_LARGE);
  g_clear_pointer (&bad, g_bytes_unref);
  bad = patched (body, spec_at, 0xff);
  expect_config_refused (bad, DC_MESH_ERROR_MALFORMED);
  g_clear_pointer (&bad, g_bytes_unref);

  /* Invalid UTF-8 and a NUL inside the dataset spec. */
  bad = patched (body, spec_at + 2, 0xc3);
  {
    g_autoptr(GBytes) worse = patched (bad, spec_at + 3, 0x28);

    expect_config_refused (worse, DC_MESH_ERROR_MALFORMED);
  }
  g_clear_pointer (&bad, g_bytes_unref);
  bad = patched (body, spec_at + 4, 0);
  expect_config_refused (bad, DC_MESH_ERROR_MALFORMED);
  g_clear_pointer (&bad, g_bytes_unref);

  /* The frame layer refuses a config body over its cap. */
  g_assert_false (dc_mesh_message_check_payload (DC_MESH_MSG_CONFIG,
                                                 DC_MESH_CONFIG_MAX_SIZE + 1, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_TOO_LARGE);
  g_clear_error (&error);

  /* The encoder refuses what the decoder would: a spec over 4096 bytes, an
   * empty starter id, a resume hash without resume. */
  long_spec = g_strnfill (DC_MESH_DATASET_SPEC_MAX + 1, 'd');
  g_free (config->dataset_spec);
  config->dataset_spec = g_steal_pointer (&long_spec);
  g_assert_null (dc_mesh_run_config_encode (config, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_TOO_LARGE);
  g_clear_error (&error);
  config->dataset_spec[DC_MESH_DATASET_SPEC_MAX] = '\0';
  g_clear_pointer (&bad, g_bytes_unref);
  bad = dc_mesh_run_config_encode (config, &error);   /* exactly the cap: fine */
  g_assert_no_error (error);
  g_clear_pointer (&back, dc_mesh_run_config_free);
  back = dc_mesh_run_config_decode (bad, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (strlen (back->dataset_spec), ==, DC_MESH_DATASET_SPEC_MAX);
  g_free (config->starter_id);
  config->starter_id = g_strdup ("");
  g_assert_null (dc_mesh_run_config_encode (config, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
  g_clear_error (&error);
  g_free (config->starter_id);
  config->starter_id = g_strdup ("s");
  config->resume = FALSE;
  g_assert_null (dc_mesh_run_config_encode (config, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
  g_clear_error (&error);

  /* A fresh run: no resume, empty dataset spec (built-in corpus). */
  memset (config->resume_hash, 0, sizeof config->resume_hash);
  g_free (config->dataset_spec);
  config->dataset_spec = g_strdup ("");
  g_clear_pointer (&bad, g_bytes_unref);
  bad = dc_mesh_run_config_encode (config, &error);
  g_assert_no_error (error);
  g_clear_pointer (&back, dc_mesh_run_config_free);
  back = dc_mesh_run_config_decode (bad, &error);
  g_assert_no_error (error);
  g_assert_false (back->resume);
  g_assert_cmpstr (back->dataset_spec, ==, "");
}

static DcMeshStepReport *
sample_report (guint n)
{
  DcMeshStepReport *report = dc_mesh_step_report_new ();

  fill (report->run_id, 16, 3);
  report->step = 12345;
  report->loss_bits = 0x40490fdbu;
  fill (report->weights_hash, 32, 4);
  fill (report->optimizer_hash, 32, 5);
  report->compute_us = 1000;
  report->send_us = 2000;
  report->wait_us = 3000;
  report->combine_us = G_MAXUINT64;
  report->roster = g_new0 (char *, n + 1);
  for (guint i = 0; i < n; i++)
    report->roster[i] = g_strdup_printf ("%016x", i * 0x1111u + 1);
  return report;
}

static void
expect_report_refused (GBytes *body,
                       gint    code)
{
  g_autoptr(GError) error = NULL;

  g_assert_null (dc_mesh_step_report_decode (body, &error));
  g_assert_error (error, DC_MESH_ERROR, code);
  g_test_message ("step report refused as expected: %s", error->message);
}

/* Layers and heads (bytes 2 and 3): 0 for a size derived from the width,
 * which is the layout older builds send; any other value round-trips. */
static void
test_train_config_size (void)
{
  g_autoptr(DcMeshRunConfig) config = sample_config ();
  g_autoptr(DcMeshRunConfig) back = NULL;
  g_autoptr(GBytes) body = NULL, payload = NULL;
  g_autoptr(GError) error = NULL;
  const guint8 *p;

  body = dc_mesh_run_config_encode (config, &error);
  g_assert_no_error (error);
  p = g_bytes_get_data (body, NULL);
  g_assert_cmpuint (p[2], ==, 0);
  g_assert_cmpuint (p[3], ==, 0);
  back = dc_mesh_run_config_decode (body, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (back->n_layer, ==, 0);
  g_assert_cmpuint (back->n_head, ==, 0);
  g_clear_pointer (&back, dc_mesh_run_config_free);
  g_clear_pointer (&body, g_bytes_unref);

  config->width = 768;
  config->seq = 1024;
  config->n_layer = 12;
  config->n_head = 12;
  body = dc_mesh_run_config_encode (config, &error);
  g_assert_no_error (error);
  p = g_bytes_get_data (body, NULL);
  g_assert_cmpuint (p[2], ==, 12);
  g_assert_cmpuint (p[3], ==, 12);
  payload = through_frames (DC_MESH_MSG_CONFIG, body);
  back = dc_mesh_run_config_decode (payload, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (back->width, ==, 768);
  g_assert_cmpuint (back->seq, ==, 1024);
  g_assert_cmpuint (back->n_layer, ==, 12);
  g_assert_cmpuint (back->n_head, ==, 12);
}

static void
test_train_step_report (void)
{
  g_autoptr(DcMeshStepReport) report = sample_report (3);
  g_autoptr(DcMeshStepReport) back = NULL;
  g_autoptr(GBytes) body = NULL, payload = NULL, bad = NULL;
  g_autoptr(GError) error = NULL;
  gsize size;

  body = dc_mesh_step_report_encode (report, &error);
  g_assert_no_error (error);
  payload = through_frames (DC_MESH_MSG_STEP_REPORT, body);
  back = dc_mesh_step_report_decode (payload, &error);
  g_assert_no_error (error);
  g_assert_cmpmem (back->run_id, 16, report->run_id, 16);
  g_assert_cmpuint (back->step, ==, 12345);
  g_assert_cmpuint (back->loss_bits, ==, 0x40490fdbu);
  g_assert_cmpmem (back->weights_hash, 32, report->weights_hash, 32);
  g_assert_cmpmem (back->optimizer_hash, 32, report->optimizer_hash, 32);
  g_assert_cmpuint (back->compute_us, ==, 1000);
  g_assert_cmpuint (back->send_us, ==, 2000);
  g_assert_cmpuint (back->wait_us, ==, 3000);
  g_assert_cmpuint (back->combine_us, ==, G_MAXUINT64);
  g_assert_true (g_strv_equal ((const char * const *) back->roster,
                               (const char * const *) report->roster));
  size = g_bytes_get_size (body);

  for (gsize n = 0; n < size; n++)
    {
      g_autoptr(GBytes) part = cut (body, n);
      g_autoptr(GError) part_error = NULL;

      g_assert_null (dc_mesh_step_report_decode (part, &part_error));
      g_assert_nonnull (part_error);
    }
  bad = extended (body, (const guint8 *) "\0", 1);
  expect_report_refused (bad, DC_MESH_ERROR_MALFORMED);
  g_clear_pointer (&bad, g_bytes_unref);
  bad = patched (body, 0, 9);
  expect_report_refused (bad, DC_MESH_ERROR_UNSUPPORTED);
  g_clear_pointer (&bad, g_bytes_unref);
  bad = patched (body, 1, 1);
  expect_report_refused (bad, DC_MESH_ERROR_MALFORMED);
  g_clear_pointer (&bad, g_bytes_unref);

  /* Roster counts: zero, over the cap, more than the body holds. */
  bad = patched (body, 2, 0);
  expect_report_refused (bad, DC_MESH_ERROR_MALFORMED);
  g_clear_pointer (&bad, g_bytes_unref);
  bad = patched (body, 2, DC_MESH_ROSTER_MAX + 1);
  expect_report_refused (bad, DC_MESH_ERROR_TOO_LARGE);
  g_clear_pointer (&bad, g_bytes_unref);
  bad = patched (body, 3, 0xff);
  expect_report_refused (bad, DC_MESH_ERROR_TOO_LARGE);
  g_clear_pointer (&bad, g_bytes_unref);
  bad = patched (body, 2, 40);
  expect_report_refused (bad, DC_MESH_ERROR_MALFORMED);
  g_clear_pointer (&bad, g_bytes_unref);

  /* An id declared longer than its cap, an empty id, a repeated id. */
  bad = patched (body, DC_MESH_STEP_REPORT_FIXED_SIZE, DC_MESH_MEMBER_ID_MAX + 1);
  expect_report_refused (bad, DC_MESH_ERROR_TOO_LARGE);
  g_clear_pointer (&bad, g_bytes_unref);
  bad = patched (body, DC_MESH_STEP_REPORT_FIXED_SIZE, 0);
  expect_report_refused (bad, DC_MESH_ERROR_MALFORMED);
  g_clear_pointer (&bad, g_bytes_unref);
  g_free (report->roster[2]);
  report->roster[2] = g_strdup (report->roster[0]);
  g_assert_null (dc_mesh_step_report_encode (report, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
  g_clear_error (&error);
  {
    /* Make the third id equal the first on the wire. */
    gsize at = DC_MESH_STEP_REPORT_FIXED_SIZE + 2 * 17 + 1;
    g_autofree guint8 *copy = g_memdup2 (g_bytes_get_data (body, NULL), size);

    memcpy (copy + at, copy + DC_MESH_STEP_REPORT_FIXED_SIZE + 1, 16);
    bad = g_bytes_new (copy, size);
    expect_report_refused (bad, DC_MESH_ERROR_MALFORMED);
    g_clear_pointer (&bad, g_bytes_unref);
  }

  /* The largest roster fits one piece; one more member does not encode. */
  g_clear_pointer (&report, dc_mesh_step_report_free);
  report = sample_report (DC_MESH_ROSTER_MAX);
  g_clear_pointer (&body, g_bytes_unref);
  g_clear_pointer (&payload, g_bytes_unref);
  body = dc_mesh_step_report_encode (report, &error);
  g_assert_no_error (error);
  payload = through_frames (DC_MESH_MSG_STEP_REPORT, body);
  g_clear_pointer (&back, dc_mesh_step_report_free);
  back = dc_mesh_step_report_decode (payload, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (g_strv_length (back->roster), ==, DC_MESH_ROSTER_MAX);
  g_clear_pointer (&report, dc_mesh_step_report_free);
  report = sample_report (DC_MESH_ROSTER_MAX + 1);
  g_assert_null (dc_mesh_step_report_encode (report, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_TOO_LARGE);
  g_clear_error (&error);
  g_assert_false (dc_mesh_message_check_payload (DC_MESH_MSG_STEP_REPORT,
                                                 DC_MESH_STEP_REPORT_MAX_SIZE + 1, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_TOO_LARGE);
}

static void
test_train_repair_audit (void)
{
  DcMeshRepairRequest request = { { 0 }, 77, 3 }, request_back;
  DcMeshAudit audit = { { 0 }, 78, 2, { 0 } }, audit_back;
  g_autoptr(GBytes) body = NULL, payload = NULL, bad = NULL;
  g_autoptr(GError) error = NULL;

  fill (request.run_id, 16, 6);
  body = dc_mesh_repair_request_encode (&request);
  g_assert_cmpuint (g_bytes_get_size (body), ==, DC_MESH_REPAIR_REQUEST_SIZE);
  payload = through_frames (DC_MESH_MSG_REPAIR_REQUEST, body);
  g_assert_true (dc_mesh_repair_request_decode (payload, &request_back, &error));
  g_assert_no_error (error);
  g_assert_cmpmem (request.run_id, 16, request_back.run_id, 16);
  g_assert_cmpuint (request_back.step, ==, 77);
  g_assert_cmpuint (request_back.rank, ==, 3);
  g_assert_cmpstr (dc_mesh_message_type_to_string (DC_MESH_MSG_REPAIR_REQUEST), ==,
                   "repair-request");
  bad = patched (body, 0, DC_MESH_TRAIN_BODY_VERSION + 1);
  g_assert_false (dc_mesh_repair_request_decode (bad, &request_back, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_UNSUPPORTED);
  g_clear_error (&error);
  g_clear_pointer (&bad, g_bytes_unref);
  bad = patched (body, 2, 1);
  g_assert_false (dc_mesh_repair_request_decode (bad, &request_back, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
  g_clear_error (&error);
  g_clear_pointer (&bad, g_bytes_unref);
  bad = cut (body, DC_MESH_REPAIR_REQUEST_SIZE - 1);
  g_assert_false (dc_mesh_repair_request_decode (bad, &request_back, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
  g_clear_error (&error);
  g_clear_pointer (&bad, g_bytes_unref);
  bad = extended (body, (const guint8 *) "x", 1);
  g_assert_false (dc_mesh_repair_request_decode (bad, &request_back, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_TOO_LARGE);
  g_clear_error (&error);
  g_clear_pointer (&bad, g_bytes_unref);

  fill (audit.run_id, 16, 7);
  fill (audit.gradient_hash, 32, 8);
  g_clear_pointer (&body, g_bytes_unref);
  g_clear_pointer (&payload, g_bytes_unref);
  body = dc_mesh_audit_encode (&audit);
  payload = through_frames (DC_MESH_MSG_AUDIT, body);
  g_assert_true (dc_mesh_audit_decode (payload, &audit_back, &error));
  g_assert_no_error (error);
  g_assert_cmpmem (audit.run_id, 16, audit_back.run_id, 16);
  g_assert_cmpuint (audit_back.step, ==, 78);
  g_assert_cmpuint (audit_back.rank, ==, 2);
  g_assert_cmpmem (audit.gradient_hash, 32, audit_back.gradient_hash, 32);
  bad = patched (body, 0, 0);
  g_assert_false (dc_mesh_audit_decode (bad, &audit_back, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_UNSUPPORTED);
  g_clear_error (&error);
  g_clear_pointer (&bad, g_bytes_unref);
  bad = patched (body, 3, 1);
  g_assert_false (dc_mesh_audit_decode (bad, &audit_back, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
  g_clear_error (&error);
  g_clear_pointer (&bad, g_bytes_unref);
  bad = cut (body, 10);
  g_assert_false (dc_mesh_audit_decode (bad, &audit_back, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
}

static DcMeshChunk
chunk_info (guint64 step,
            guint32 rank)
{
  DcMeshChunk info;

  memset (&info, 0, sizeof info);
  fill (info.run_id, 16, 9);
  info.step = step;
  info.rank = rank;
  return info;
}

/* Decodes body @i of @bodies after a trip through the framing layer. */
static void
decode_chunk (guint        type,
              GPtrArray   *bodies,
              guint        i,
              DcMeshChunk *chunk)
{
  g_autoptr(GBytes) payload = through_frames (type, g_ptr_array_index (bodies, i));
  g_autoptr(GError) error = NULL;

  g_assert_true (dc_mesh_chunk_decode (type, payload, chunk, &error));
  g_assert_no_error (error);
}

static void
expect_chunk_refused (guint   type,
                      GBytes *body,
                      gint    code)
{
  g_autoptr(GError) error = NULL;
  DcMeshChunk chunk;

  memset (&chunk, 0, sizeof chunk);
  g_assert_false (dc_mesh_chunk_decode (type, body, &chunk, &error));
  g_assert_error (error, DC_MESH_ERROR, code);
  g_assert_null (chunk.data);
  g_test_message ("chunk refused as expected: %s", error->message);
}

static GBytes *
chunk_patched_u32 (GBytes *body,
                   gsize   at,
                   guint32 value)
{
  gsize size = g_bytes_get_size (body);
  guint8 *copy = g_memdup2 (g_bytes_get_data (body, NULL), size);

  put32 (copy + at, value);
  return g_bytes_new_take (copy, size);
}

/* @body with its object's hash (bytes 56–87) zeroed, as a chunk sent
 * before its object was hashed whole. */
static GBytes *
object_hash_zeroed (GBytes *body)
{
  gsize size = g_bytes_get_size (body);
  guint8 *copy = g_memdup2 (g_bytes_get_data (body, NULL), size);

  memset (copy + 56, 0, DC_MESH_HASH_SIZE);
  return g_bytes_new_take (copy, size);
}

static gpointer
frames_thread (gpointer data)
{
  return dc_mesh_chunk_frames_encode (DC_MESH_MSG_GRADIENTS, data, NULL);
}

/* dc_mesh_chunk_frames_encode (), which a sender runs on a worker to
 * frame an object once for every peer: on another thread, each chunk's
 * frame is the pieces dc_mesh_message_encode_pieces () makes of its body,
 * byte for byte, and a reader gives back each body (the frame's CRC-32
 * holds, the chunk decodes); a type that is not chunked is refused. */
static void
test_train_chunk_frames (void)
{
  g_autoptr(GBytes) object = pattern_bytes (2 * DC_MESH_CHUNK_DATA_MAX + 100, 7);
  DcMeshChunk info = chunk_info (3, 1);
  g_autoptr(GPtrArray) bodies = NULL;
  g_autoptr(GPtrArray) frames = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(DcMeshReader) reader = dc_mesh_reader_new ();

  bodies = dc_mesh_chunks_split (DC_MESH_MSG_GRADIENTS, &info, object, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (bodies->len, ==, 3);
  frames = g_thread_join (g_thread_new ("frames", frames_thread, bodies));
  g_assert_nonnull (frames);
  g_assert_cmpuint (frames->len, ==, bodies->len);
  for (guint i = 0; i < frames->len; i++)
    {
      GPtrArray *pieces = g_ptr_array_index (frames, i);
      g_autoptr(GPtrArray) expected = dc_mesh_message_encode_pieces (DC_MESH_MSG_GRADIENTS,
                                                                     g_ptr_array_index (bodies,
                                                                                        i),
                                                                     &error);
      g_autoptr(DcMeshMessage) message = NULL;
      DcMeshChunk chunk = { 0 };

      g_assert_no_error (error);
      /* A chunk is one piece: the credit window is checked between chunks. */
      g_assert_cmpuint (pieces->len, ==, 1);
      g_assert_cmpuint (expected->len, ==, 1);
      g_assert_true (g_bytes_equal (g_ptr_array_index (pieces, 0),
                                    g_ptr_array_index (expected, 0)));
      message = dc_mesh_reader_push (reader, g_bytes_get_data (g_ptr_array_index (pieces, 0),
                                                               NULL),
                                     g_bytes_get_size (g_ptr_array_index (pieces, 0)), &error);
      g_assert_no_error (error);
      g_assert_nonnull (message);
      g_assert_cmpuint (message->type, ==, DC_MESH_MSG_GRADIENTS);
      g_assert_true (g_bytes_equal (message->payload, g_ptr_array_index (bodies, i)));
      g_assert_true (dc_mesh_chunk_decode (DC_MESH_MSG_GRADIENTS, message->payload, &chunk,
                                           &error));
      g_assert_no_error (error);
      g_assert_cmpuint (chunk.index, ==, i);
      dc_mesh_chunk_clear (&chunk);
    }
  g_assert_null (dc_mesh_chunk_frames_encode (DC_MESH_MSG_DATA, bodies, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
}

/* A body whose chunk data was replaced by @data (@n bytes) in coding
 * @coding, header otherwise as @body's. */
static GBytes *
with_data (GBytes       *body,
           guint8        coding,
           const guint8 *data,
           gsize         n)
{
  guint8 *copy = g_malloc (DC_MESH_CHUNK_HEADER_SIZE + n);

  memcpy (copy, g_bytes_get_data (body, NULL), DC_MESH_CHUNK_HEADER_SIZE);
  copy[1] = coding;
  memcpy (copy + DC_MESH_CHUNK_HEADER_SIZE, data, n);
  return g_bytes_new_take (copy, DC_MESH_CHUNK_HEADER_SIZE + n);
}

static void
expect_zstd_refused (GBytes *body)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) raw = dc_mesh_chunk_expand (DC_MESH_MSG_GRADIENTS, body, &error);
  DcMeshChunk chunk = { 0 };
  g_autoptr(GError) decode_error = NULL;

  g_assert_null (raw);
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
  g_assert_false (dc_mesh_chunk_decode (DC_MESH_MSG_GRADIENTS, body, &chunk, &decode_error));
  g_assert_nonnull (decode_error);
}

/* zstd-compressed chunk data (header byte 1 = 1, since 2026-12-05): a
 * compressible gradient's chunks go compressed, a short last chunk and
 * random data raw; every compressed chunk expands to its raw body byte for
 * byte and decodes to the same chunk; the data hash is only of raw data;
 * and what a peer could send wrong is refused before anything is allocated
 * or written past the chunk's own size: a frame that declares another
 * size or none, one that decompresses to more or less than it declares,
 * data that is not zstd, bytes changed inside the compressed data (zstd
 * frames carry no checksum here: the chunk's own hash catches it), an
 * inconsistent header, an unknown coding. */
static void
test_train_chunk_zstd (void)
{
  const gsize total = 2 * DC_MESH_CHUNK_DATA_MAX + 100;
  g_autofree guint8 *values = g_malloc (total);
  g_autoptr(GBytes) object = NULL;
  g_autofree guint8 *noise_bytes = g_malloc (DC_MESH_CHUNK_DATA_MAX);
  g_autoptr(GBytes) noise = NULL;
  DcMeshChunk info = chunk_info (4, 2);
  g_autoptr(GPtrArray) bodies = NULL;
  g_autoptr(GPtrArray) noise_bodies = NULL;
  g_autoptr(GPtrArray) frames = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GRand) rand = g_rand_new_with_seed (8);
  guint8 hash[DC_MESH_HASH_SIZE];

  /* Small values, as an int8 gradient's are: a few bits of entropy each. */
  for (gsize i = 0; i < total; i++)
    values[i] = (guint8) (gint8) (g_rand_int_range (rand, -6, 7) * g_rand_int_range (rand, 0, 3));
  object = g_bytes_new (values, total);
  for (gsize i = 0; i < DC_MESH_CHUNK_DATA_MAX; i++)
    noise_bytes[i] = (guint8) g_rand_int_range (rand, 0, 256);
  noise = g_bytes_new (noise_bytes, DC_MESH_CHUNK_DATA_MAX);
  bodies = dc_mesh_chunks_split (DC_MESH_MSG_GRADIENTS, &info, object, &error);
  g_assert_no_error (error);
  frames = dc_mesh_chunk_frames_encode_coded (DC_MESH_MSG_GRADIENTS, bodies, TRUE, &error);
  g_assert_no_error (error);
  for (guint i = 0; i < bodies->len; i++)
    {
      g_autoptr(DcMeshReader) reader = dc_mesh_reader_new ();
      GPtrArray *pieces = g_ptr_array_index (frames, i);
      GBytes *raw_body = g_ptr_array_index (bodies, i);
      g_autoptr(DcMeshMessage) message = NULL;
      g_autoptr(GBytes) expanded = NULL;
      DcMeshChunk a = { 0 }, b = { 0 };

      g_assert_cmpuint (pieces->len, ==, 1);
      message = dc_mesh_reader_push (reader, g_bytes_get_data (g_ptr_array_index (pieces, 0), NULL),
                                     g_bytes_get_size (g_ptr_array_index (pieces, 0)), &error);
      g_assert_no_error (error);
      g_assert_nonnull (message);
      /* The last chunk (100 bytes) is not worth a zstd frame. */
      g_assert_cmpint (dc_mesh_chunk_is_compressed (DC_MESH_MSG_GRADIENTS, message->payload), ==,
                       i + 1 < bodies->len);
      if (i + 1 < bodies->len)
        {
          g_assert_cmpuint (g_bytes_get_size (message->payload), <,
                            g_bytes_get_size (raw_body) / 2);
          g_assert_false (dc_mesh_chunk_data_hash (DC_MESH_MSG_GRADIENTS, message->payload, hash));
        }
      expanded = dc_mesh_chunk_expand (DC_MESH_MSG_GRADIENTS, message->payload, &error);
      g_assert_no_error (error);
      g_assert_true (g_bytes_equal (expanded, raw_body));
      g_assert_true (dc_mesh_chunk_data_hash (DC_MESH_MSG_GRADIENTS, expanded, hash));
      g_assert_true (dc_mesh_chunk_decode (DC_MESH_MSG_GRADIENTS, message->payload, &a, &error));
      g_assert_no_error (error);
      g_assert_true (dc_mesh_chunk_decode (DC_MESH_MSG_GRADIENTS, raw_body, &b, &error));
      g_assert_no_error (error);
      g_assert_cmpuint (a.index, ==, i);
      g_assert_cmpmem (a.chunk_hash, 32, b.chunk_hash, 32);
      g_assert_true (g_bytes_equal (a.data, b.data));
      dc_mesh_chunk_clear (&a);
      dc_mesh_chunk_clear (&b);
    }

  /* Random bytes do not compress: the body goes as it is. */
  noise_bodies = dc_mesh_chunks_split (DC_MESH_MSG_GRADIENTS, &info, noise, &error);
  g_assert_no_error (error);
  {
    g_autoptr(GBytes) same = dc_mesh_chunk_body_compress (g_ptr_array_index (noise_bodies, 0));

    g_assert_true (same == g_ptr_array_index (noise_bodies, 0));
  }

  /* Refusals, on chunk 0 (65,400 bytes of data). */
  {
    GBytes *raw_body = g_ptr_array_index (bodies, 0);
    const guint8 *raw_data = (const guint8 *) g_bytes_get_data (raw_body, NULL)
                             + DC_MESH_CHUNK_HEADER_SIZE;
    const gsize raw_n = g_bytes_get_size (raw_body) - DC_MESH_CHUNK_HEADER_SIZE;
    g_autoptr(GBytes) good = dc_mesh_chunk_body_compress (raw_body);
    const guint8 *z = (const guint8 *) g_bytes_get_data (good, NULL) + DC_MESH_CHUNK_HEADER_SIZE;
    const gsize zn = g_bytes_get_size (good) - DC_MESH_CHUNK_HEADER_SIZE;
    gsize bound = ZSTD_compressBound (raw_n + 1);
    g_autofree guint8 *other = g_malloc (bound);
    gsize other_n;
    g_autofree guint8 *flipped = g_memdup2 (z, zn);
    g_autoptr(GBytes) bad = NULL;

    g_assert_true (dc_mesh_chunk_is_compressed (DC_MESH_MSG_GRADIENTS, good));
    /* One byte short of what the chunk holds, and one over. */
    other_n = ZSTD_compress (other, bound, raw_data, raw_n - 1, 1);
    g_assert_false (ZSTD_isError (other_n));
    bad = with_data (raw_body, 1, other, other_n);
    expect_zstd_refused (bad);
    g_clear_pointer (&bad, g_bytes_unref);
    {
      g_autofree guint8 *longer = g_malloc0 (raw_n + 1);

      memcpy (longer, raw_data, raw_n);
      other_n = ZSTD_compress (other, bound, longer, raw_n + 1, 1);
      g_assert_false (ZSTD_isError (other_n));
      bad = with_data (raw_body, 1, other, other_n);
      expect_zstd_refused (bad);
      g_clear_pointer (&bad, g_bytes_unref);
    }
    /* A frame without its content size (streamed), and two frames whose
     * first declares the right size but whose whole is longer. */
    {
      ZSTD_CCtx *cctx = ZSTD_createCCtx ();
      ZSTD_outBuffer out = { other, bound, 0 };
      ZSTD_inBuffer in = { raw_data, raw_n, 0 };
      g_autofree guint8 *two = g_malloc (2 * zn);

      g_assert_false (ZSTD_isError (ZSTD_CCtx_setParameter (cctx, ZSTD_c_contentSizeFlag, 0)));
      g_assert_cmpuint (ZSTD_compressStream2 (cctx, &out, &in, ZSTD_e_end), ==, 0);
      ZSTD_freeCCtx (cctx);
      bad = with_data (raw_body, 1, other, out.pos);
      expect_zstd_refused (bad);
      g_clear_pointer (&bad, g_bytes_unref);
      memcpy (two, z, zn);
      memcpy (two + zn, z, zn);
      bad = with_data (raw_body, 1, two, 2 * zn);
      expect_zstd_refused (bad);
      g_clear_pointer (&bad, g_bytes_unref);
    }
    /* Not zstd at all; cut short. */
    bad = with_data (raw_body, 1, raw_data, 4000);
    expect_zstd_refused (bad);
    g_clear_pointer (&bad, g_bytes_unref);
    bad = with_data (raw_body, 1, z, zn / 2);
    expect_zstd_refused (bad);
    g_clear_pointer (&bad, g_bytes_unref);
    /* A byte changed in the middle of the compressed data: zstd may still
     * decode it (to other bytes); the chunk's hash refuses it then. */
    flipped[zn / 2] ^= 0x20;
    bad = with_data (raw_body, 1, flipped, zn);
    {
      g_autoptr(GError) decode_error = NULL;
      DcMeshChunk chunk = { 0 };

      g_assert_false (dc_mesh_chunk_decode (DC_MESH_MSG_GRADIENTS, bad, &chunk, &decode_error));
      g_assert_error (decode_error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
    }
    g_clear_pointer (&bad, g_bytes_unref);
    /* The header checked before any allocation: index past count, total
     * past the ceiling; and a coding this build does not know. */
    {
      g_autoptr(GBytes) past = patched (good, 32, 7);
      guint8 *huge = g_memdup2 (g_bytes_get_data (good, NULL), g_bytes_get_size (good));
      g_autoptr(GBytes) huge_total = NULL;
      g_autoptr(GBytes) unknown = patched (raw_body, 1, 2);
      g_autoptr(GError) unknown_error = NULL;
      DcMeshChunk chunk = { 0 };

      expect_zstd_refused (past);
      huge[47] = 0x40;   /* total's top byte: 2^62 bytes */
      huge_total = g_bytes_new_take (huge, g_bytes_get_size (good));
      expect_zstd_refused (huge_total);
      g_assert_false (dc_mesh_chunk_decode (DC_MESH_MSG_GRADIENTS, unknown, &chunk, &unknown_error));
      g_assert_error (unknown_error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
    }
  }
}

/* Every chunk refusal the decoder has, on the chunks of a 3-chunk gradient. */
static void
test_train_chunk_refused (void)
{
  g_autoptr(GBytes) object = pattern_bytes (2 * DC_MESH_CHUNK_DATA_MAX + 100, 11);
  DcMeshChunk info = chunk_info (5, 1);
  g_autoptr(GPtrArray) bodies = NULL;
  g_autoptr(GError) error = NULL;
  GBytes *first, *last;
  g_autoptr(GBytes) bad = NULL;
  DcMeshChunk chunk;

  bodies = dc_mesh_chunks_split (DC_MESH_MSG_GRADIENTS, &info, object, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (bodies->len, ==, 3);
  first = g_ptr_array_index (bodies, 0);
  last = g_ptr_array_index (bodies, 2);
  g_assert_cmpuint (g_bytes_get_size (first), ==, DC_MESH_PIECE_SIZE - DC_MESH_HEADER_SIZE);
  g_assert_cmpuint (g_bytes_get_size (last), ==, DC_MESH_CHUNK_HEADER_SIZE + 100);

  /* Body version, reserved bytes, a type that is not chunked. */
  bad = patched (first, 0, DC_MESH_TRAIN_BODY_VERSION - 1);
  expect_chunk_refused (DC_MESH_MSG_GRADIENTS, bad, DC_MESH_ERROR_UNSUPPORTED);
  g_clear_pointer (&bad, g_bytes_unref);
  bad = patched (first, 1, 1);
  expect_chunk_refused (DC_MESH_MSG_GRADIENTS, bad, DC_MESH_ERROR_MALFORMED);
  g_clear_pointer (&bad, g_bytes_unref);
  expect_chunk_refused (DC_MESH_MSG_DATA, first, DC_MESH_ERROR_MALFORMED);

  /* Chunk index past the end; a count that does not match the total. */
  bad = chunk_patched_u32 (last, 32, 3);
  expect_chunk_refused (DC_MESH_MSG_GRADIENTS, bad, DC_MESH_ERROR_MALFORMED);
  g_clear_pointer (&bad, g_bytes_unref);
  bad = chunk_patched_u32 (last, 32, G_MAXUINT32);
  expect_chunk_refused (DC_MESH_MSG_GRADIENTS, bad, DC_MESH_ERROR_MALFORMED);
  g_clear_pointer (&bad, g_bytes_unref);
  bad = chunk_patched_u32 (first, 36, 4);
  expect_chunk_refused (DC_MESH_MSG_GRADIENTS, bad, DC_MESH_ERROR_MALFORMED);
  g_clear_pointer (&bad, g_bytes_unref);

  /* Totals: zero, over the gradient cap (but fine for weights), 2^64 − 1. */
  bad = chunk_patched_u32 (first, 40, 0);
  expect_chunk_refused (DC_MESH_MSG_GRADIENTS, bad, DC_MESH_ERROR_MALFORMED);
  g_clear_pointer (&bad, g_bytes_unref);
  {
    DcMeshChunk big = chunk_info (5, 1);
    g_autoptr(GBytes) data = pattern_bytes (DC_MESH_CHUNK_DATA_MAX, 1);
    g_autoptr(GBytes) body = NULL;

    big.total = DC_MESH_GRADIENT_MAX_TOTAL + 1;
    big.count = (guint32) ((big.total + DC_MESH_CHUNK_DATA_MAX - 1) / DC_MESH_CHUNK_DATA_MAX);
    big.data = data;
    g_assert_null (dc_mesh_chunk_encode (DC_MESH_MSG_GRADIENTS, &big, &error));
    g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_TOO_LARGE);
    g_clear_error (&error);
    body = dc_mesh_chunk_encode (DC_MESH_MSG_WEIGHTS, &big, &error);
    g_assert_no_error (error);
    g_assert_true (dc_mesh_chunk_decode (DC_MESH_MSG_WEIGHTS, body, &chunk, &error));
    g_assert_no_error (error);
    dc_mesh_chunk_clear (&chunk);
    /* The same bytes as a gradient chunk are over that type's cap. */
    expect_chunk_refused (DC_MESH_MSG_GRADIENTS, body, DC_MESH_ERROR_TOO_LARGE);
  }
  bad = chunk_patched_u32 (first, 44, G_MAXUINT32);
  {
    g_autoptr(GBytes) worse = chunk_patched_u32 (bad, 40, G_MAXUINT32);

    expect_chunk_refused (DC_MESH_MSG_WEIGHTS, worse, DC_MESH_ERROR_TOO_LARGE);
  }
  g_clear_pointer (&bad, g_bytes_unref);

  /* A short middle chunk and a last chunk with a byte too many. */
  bad = cut (first, g_bytes_get_size (first) - 1);
  expect_chunk_refused (DC_MESH_MSG_GRADIENTS, bad, DC_MESH_ERROR_MALFORMED);
  g_clear_pointer (&bad, g_bytes_unref);
  bad = extended (last, (const guint8 *) "x", 1);
  expect_chunk_refused (DC_MESH_MSG_GRADIENTS, bad, DC_MESH_ERROR_MALFORMED);
  g_clear_pointer (&bad, g_bytes_unref);

  /* A data position on a gradient; every truncation of the header. */
  bad = patched (first, 48, 1);
  expect_chunk_refused (DC_MESH_MSG_GRADIENTS, bad, DC_MESH_ERROR_MALFORMED);
  g_assert_true (dc_mesh_chunk_decode (DC_MESH_MSG_WEIGHTS, bad, &chunk, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (chunk.position, ==, 1);
  dc_mesh_chunk_clear (&chunk);
  g_clear_pointer (&bad, g_bytes_unref);
  for (gsize n = 0; n <= DC_MESH_CHUNK_HEADER_SIZE; n++)
    {
      g_autoptr(GBytes) part = cut (first, n);

      expect_chunk_refused (DC_MESH_MSG_GRADIENTS, part, DC_MESH_ERROR_MALFORMED);
    }

  /* The frame layer refuses a chunk message larger than one piece. */
  g_assert_false (dc_mesh_message_check_payload (DC_MESH_MSG_GRADIENTS,
                                                 DC_MESH_PIECE_SIZE - DC_MESH_HEADER_SIZE + 1,
                                                 &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_TOO_LARGE);
  g_clear_error (&error);

  /* Splitting refuses an empty object and one over the cap. */
  {
    g_autoptr(GBytes) empty = g_bytes_new (NULL, 0);

    g_assert_null (dc_mesh_chunks_split (DC_MESH_MSG_GRADIENTS, &info, empty, &error));
    g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
    g_clear_error (&error);
  }
}

/* The 5 MB gradient: split, each chunk through the framing layer, pushed in
 * a shuffled order with duplicates and strangers in between, reassembled
 * byte for byte. */
static void
test_train_assemble_5mb (void)
{
  const gsize total = 5 * 1000 * 1000 + 3;
  g_autoptr(GBytes) object = pattern_bytes (total, 21);
  g_autoptr(GBytes) other = pattern_bytes (1000, 22);
  g_autoptr(GBytes) whole = NULL;
  DcMeshChunk info = chunk_info (17, 2), stranger;
  g_autoptr(GPtrArray) bodies = NULL, other_bodies = NULL;
  g_autoptr(DcMeshChunkAssembler) assembler = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GRand) rand = g_rand_new_with_seed (5);
  g_autofree guint *order = NULL;
  guint count;

  bodies = dc_mesh_chunks_split (DC_MESH_MSG_GRADIENTS, &info, object, &error);
  g_assert_no_error (error);
  count = bodies->len;
  g_assert_cmpuint (count, ==, (total + DC_MESH_CHUNK_DATA_MAX - 1) / DC_MESH_CHUNK_DATA_MAX);

  order = g_new (guint, count);
  for (guint i = 0; i < count; i++)
    order[i] = i;
  for (guint i = count - 1; i > 0; i--)
    {
      guint j = g_rand_int_range (rand, 0, i + 1), t = order[i];

      order[i] = order[j];
      order[j] = t;
    }
  g_assert_cmpuint (order[count - 1], !=, count - 1);

  other_bodies = dc_mesh_chunks_split (DC_MESH_MSG_GRADIENTS, &info, other, &error);
  g_assert_no_error (error);
  decode_chunk (DC_MESH_MSG_GRADIENTS, other_bodies, 0, &stranger);

  /* The object's hash is over its chunks' hashes, as anyone can take it. */
  {
    DcMeshChunk last;
    guint8 hash[DC_MESH_HASH_SIZE];

    decode_chunk (DC_MESH_MSG_GRADIENTS, bodies, count - 1, &last);
    dc_mesh_chunk_object_hash (object, hash);
    g_assert_cmpmem (last.hash, DC_MESH_HASH_SIZE, hash, DC_MESH_HASH_SIZE);
    dc_mesh_train_hash (object, hash);
    g_assert_true (memcmp (last.hash, hash, DC_MESH_HASH_SIZE) != 0);
    dc_mesh_chunk_clear (&last);
  }

  assembler = dc_mesh_chunk_assembler_new (DC_MESH_MSG_GRADIENTS, 0);
  g_assert_cmpuint (dc_mesh_chunk_assembler_get_count (assembler), ==, 0);
  for (guint k = 0; k < count; k++)
    {
      DcMeshChunk chunk;

      decode_chunk (DC_MESH_MSG_GRADIENTS, bodies, order[k], &chunk);
      g_assert_null (whole);
      g_assert_true (dc_mesh_chunk_assembler_push (assembler, &chunk, &whole, &error));
      g_assert_no_error (error);
      g_assert_cmpuint (dc_mesh_chunk_assembler_get_received (assembler), ==, k + 1);

      if (k == 3)
        {
          /* A duplicate, and a chunk of another object (same step and rank,
           * other total and hash), are refused and change nothing. */
          g_assert_false (dc_mesh_chunk_assembler_push (assembler, &chunk, NULL, &error));
          g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
          g_clear_error (&error);
          g_assert_false (dc_mesh_chunk_assembler_push (assembler, &stranger, NULL, &error));
          g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
          g_clear_error (&error);
          g_assert_cmpuint (dc_mesh_chunk_assembler_get_received (assembler), ==, 4);
          g_assert_cmpuint (dc_mesh_chunk_assembler_get_count (assembler), ==, count);
        }
      if (k + 1 < count)
        g_assert_false (dc_mesh_chunk_assembler_is_complete (assembler));
      dc_mesh_chunk_clear (&chunk);
    }
  g_assert_true (dc_mesh_chunk_assembler_is_complete (assembler));
  g_assert_nonnull (whole);
  g_assert_true (g_bytes_equal (whole, object));
  g_clear_pointer (&whole, g_bytes_unref);

  /* Nothing is accepted after completion: not a stranger, not a chunk of
   * the object itself sent again. */
  g_assert_false (dc_mesh_chunk_assembler_push (assembler, &stranger, NULL, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
  g_clear_error (&error);
  dc_mesh_chunk_clear (&stranger);
  {
    DcMeshChunk again;

    decode_chunk (DC_MESH_MSG_GRADIENTS, bodies, 0, &again);
    g_assert_false (dc_mesh_chunk_assembler_push (assembler, &again, &whole, &error));
    g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
    g_assert_null (whole);
    dc_mesh_chunk_clear (&again);
  }
}

/* A chunk whose bytes were changed (header intact, so each message is well
 * formed) fails its own hash as it is decoded, saying which chunk; one
 * whose own hash was recomputed for the changed bytes (a sender lying
 * consistently) decodes, and the object then fails its hash, over the
 * chunks' hashes, at completion; the assembler then starts over and a
 * clean resend (a repair) completes. Also the caller's own cap. */
static void
test_train_assemble_refused (void)
{
  g_autoptr(GBytes) object = pattern_bytes (3 * DC_MESH_CHUNK_DATA_MAX, 31);
  DcMeshChunk info = chunk_info (4, 0), chunk;
  g_autoptr(GPtrArray) bodies = NULL;
  g_autoptr(DcMeshChunkAssembler) assembler = NULL;
  g_autoptr(DcMeshChunkAssembler) small = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) whole = NULL, corrupt = NULL, rehashed = NULL;
  gsize size;

  bodies = dc_mesh_chunks_split (DC_MESH_MSG_REPAIR, &info, object, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (bodies->len, ==, 3);
  size = g_bytes_get_size (g_ptr_array_index (bodies, 1));
  corrupt = patched (g_ptr_array_index (bodies, 1), size - 7,
                     ((const guint8 *) g_bytes_get_data (g_ptr_array_index (bodies, 1),
                                                         NULL))[size - 7] ^ 1);

  /* Every chunk of this object is full, so a full chunk with an index past
   * the end has a plausible size: it must still be refused. */
  for (guint32 index = 3; index < 6; index++)
    {
      g_autoptr(GBytes) past = chunk_patched_u32 (g_ptr_array_index (bodies, 1), 32, index);

      expect_chunk_refused (DC_MESH_MSG_REPAIR, past, DC_MESH_ERROR_MALFORMED);
    }

  assembler = dc_mesh_chunk_assembler_new (DC_MESH_MSG_REPAIR, 0);
  decode_chunk (DC_MESH_MSG_REPAIR, bodies, 0, &chunk);
  g_assert_true (dc_mesh_chunk_assembler_push (assembler, &chunk, &whole, &error));
  dc_mesh_chunk_clear (&chunk);
  decode_chunk (DC_MESH_MSG_REPAIR, bodies, 2, &chunk);
  g_assert_true (dc_mesh_chunk_assembler_push (assembler, &chunk, &whole, &error));
  dc_mesh_chunk_clear (&chunk);
  g_assert_false (dc_mesh_chunk_decode (DC_MESH_MSG_REPAIR, corrupt, &chunk, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
  g_assert_nonnull (strstr (error->message, "chunk 1 of 3"));
  g_assert_nonnull (strstr (error->message, "fails its hash"));
  g_test_message ("refused as it arrived: %s", error->message);
  g_clear_error (&error);
  g_assert_cmpuint (dc_mesh_chunk_assembler_get_received (assembler), ==, 2);

  /* The same bytes with their own hash recomputed, as a lying sender would. */
  {
    DcMeshChunk lie = { 0 };

    g_assert_true (dc_mesh_chunk_decode (DC_MESH_MSG_REPAIR, g_ptr_array_index (bodies, 1), &lie,
                                         &error));
    g_clear_pointer (&lie.data, g_bytes_unref);
    lie.data = g_bytes_new_from_bytes (corrupt, DC_MESH_CHUNK_HEADER_SIZE,
                                       size - DC_MESH_CHUNK_HEADER_SIZE);
    rehashed = dc_mesh_chunk_encode (DC_MESH_MSG_REPAIR, &lie, &error);
    g_assert_no_error (error);
    dc_mesh_chunk_clear (&lie);
  }
  g_assert_true (dc_mesh_chunk_decode (DC_MESH_MSG_REPAIR, rehashed, &chunk, &error));
  g_assert_false (dc_mesh_chunk_assembler_push (assembler, &chunk, &whole, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
  g_test_message ("refused as expected: %s", error->message);
  g_clear_error (&error);
  dc_mesh_chunk_clear (&chunk);
  g_assert_null (whole);
  g_assert_false (dc_mesh_chunk_assembler_is_complete (assembler));
  g_assert_cmpuint (dc_mesh_chunk_assembler_get_received (assembler), ==, 0);

  for (guint i = 0; i < bodies->len; i++)
    {
      decode_chunk (DC_MESH_MSG_REPAIR, bodies, i, &chunk);
      g_assert_true (dc_mesh_chunk_assembler_push (assembler, &chunk, &whole, &error));
      g_assert_no_error (error);
      dc_mesh_chunk_clear (&chunk);
    }
  g_assert_nonnull (whole);
  g_assert_true (g_bytes_equal (whole, object));

  /* A streaming sender: chunks 0 and 1 without the object's hash (zeros),
   * the last with it, completes; a chunk carrying another hash is another
   * object; a last chunk without the hash is refused by the decoder. */
  {
    g_autoptr(DcMeshChunkAssembler) streamed = dc_mesh_chunk_assembler_new (DC_MESH_MSG_REPAIR,
                                                                             0);
    g_autoptr(GBytes) other_hash = patched (g_ptr_array_index (bodies, 1), 60, 0x5a);
    g_autoptr(GBytes) last_bare = NULL;

    g_clear_pointer (&whole, g_bytes_unref);
    last_bare = object_hash_zeroed (g_ptr_array_index (bodies, bodies->len - 1));
    expect_chunk_refused (DC_MESH_MSG_REPAIR, last_bare, DC_MESH_ERROR_MALFORMED);
    for (guint i = 0; i < bodies->len; i++)
      {
        g_autoptr(GBytes) body = i + 1 < bodies->len
                                 ? object_hash_zeroed (g_ptr_array_index (bodies, i))
                                 : g_bytes_ref (g_ptr_array_index (bodies, i));

        g_assert_true (dc_mesh_chunk_decode (DC_MESH_MSG_REPAIR, body, &chunk, &error));
        g_assert_no_error (error);
        g_assert_true (dc_mesh_chunk_assembler_push (streamed, &chunk, &whole, &error));
        g_assert_no_error (error);
        dc_mesh_chunk_clear (&chunk);
      }
    g_assert_nonnull (whole);
    g_assert_true (g_bytes_equal (whole, object));
    g_clear_pointer (&whole, g_bytes_unref);

    /* Knowing the hash (from chunk 0 here), a chunk with another is refused. */
    dc_mesh_chunk_assembler_free (g_steal_pointer (&streamed));
    streamed = dc_mesh_chunk_assembler_new (DC_MESH_MSG_REPAIR, 0);
    decode_chunk (DC_MESH_MSG_REPAIR, bodies, 0, &chunk);
    g_assert_true (dc_mesh_chunk_assembler_push (streamed, &chunk, NULL, &error));
    dc_mesh_chunk_clear (&chunk);
    g_assert_true (dc_mesh_chunk_decode (DC_MESH_MSG_REPAIR, other_hash, &chunk, &error));
    g_assert_false (dc_mesh_chunk_assembler_push (streamed, &chunk, NULL, &error));
    g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
    g_clear_error (&error);
    dc_mesh_chunk_clear (&chunk);
  }

  /* A caller that knows the gradient's size caps the assembler at it. */
  small = dc_mesh_chunk_assembler_new (DC_MESH_MSG_REPAIR, 2 * DC_MESH_CHUNK_DATA_MAX);
  decode_chunk (DC_MESH_MSG_REPAIR, bodies, 0, &chunk);
  g_assert_false (dc_mesh_chunk_assembler_push (small, &chunk, NULL, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_TOO_LARGE);
  dc_mesh_chunk_clear (&chunk);
  g_assert_cmpuint (dc_mesh_chunk_assembler_get_count (small), ==, 0);
}

/* A gradient over the default 64 MiB cap: refused by the plain decoder and
 * by a cap the caller derived from a small run, accepted only under a cap
 * raised for the run (dc_mesh_chunk_decode_capped), and never past the
 * type's ceiling whatever the caller asks. The sender's split takes it. */
static void
test_train_chunk_capped (void)
{
  DcMeshChunk chunk = chunk_info (5, 1), back;
  g_autoptr(GBytes) data = pattern_bytes (DC_MESH_CHUNK_DATA_MAX, 3);
  g_autoptr(GBytes) body = NULL;
  g_autoptr(GError) error = NULL;
  guint64 total = (guint64) DC_MESH_GRADIENT_MAX_TOTAL + 1000;

  g_assert_cmpuint (dc_mesh_chunk_ceiling_total (DC_MESH_MSG_GRADIENTS), ==,
                    DC_MESH_GRADIENT_CEILING_TOTAL);
  g_assert_cmpuint (dc_mesh_chunk_ceiling_total (DC_MESH_MSG_REPAIR), ==,
                    DC_MESH_GRADIENT_CEILING_TOTAL);
  g_assert_cmpuint (dc_mesh_chunk_ceiling_total (DC_MESH_MSG_WEIGHTS), ==,
                    DC_MESH_WEIGHTS_CEILING_TOTAL);
  g_assert_cmpuint (dc_mesh_chunk_ceiling_total (DC_MESH_MSG_CHECKPOINT), ==,
                    DC_MESH_WEIGHTS_MAX_TOTAL);
  g_assert_cmpuint (DC_MESH_GRADIENT_CEILING_TOTAL, >, DC_MESH_GRADIENT_MAX_TOTAL);

  /* A weights chunk of the same object size encodes (its cap is 256 MiB);
   * its bytes are those of a gradient chunk but for the type. */
  chunk.total = total;
  chunk.count = (guint32) ((total + DC_MESH_CHUNK_DATA_MAX - 1) / DC_MESH_CHUNK_DATA_MAX);
  chunk.data = data;
  body = dc_mesh_chunk_encode (DC_MESH_MSG_WEIGHTS, &chunk, &error);
  g_assert_no_error (error);

  expect_chunk_refused (DC_MESH_MSG_GRADIENTS, body, DC_MESH_ERROR_TOO_LARGE);
  g_assert_false (dc_mesh_chunk_decode_capped (DC_MESH_MSG_GRADIENTS, body,
                                               DC_MESH_GRADIENT_MAX_TOTAL, &back, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_TOO_LARGE);
  g_clear_error (&error);
  g_assert_false (dc_mesh_chunk_decode_capped (DC_MESH_MSG_GRADIENTS, body, total - 1, &back,
                                               &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_TOO_LARGE);
  g_clear_error (&error);
  g_assert_true (dc_mesh_chunk_decode_capped (DC_MESH_MSG_GRADIENTS, body, total, &back,
                                              &error));
  g_assert_no_error (error);
  g_assert_cmpuint (back.total, ==, total);
  dc_mesh_chunk_clear (&back);
  g_assert_true (dc_mesh_chunk_decode_capped (DC_MESH_MSG_REPAIR, body, G_MAXUINT64, &back,
                                              &error));
  g_assert_no_error (error);
  dc_mesh_chunk_clear (&back);

  /* Over the ceiling: refused whatever cap is asked for. */
  {
    g_autoptr(GBytes) over = NULL;
    guint64 huge = (guint64) DC_MESH_GRADIENT_CEILING_TOTAL + 1;
    guint8 *bytes = g_memdup2 (g_bytes_get_data (body, NULL), g_bytes_get_size (body));
    guint64 le_total = GUINT64_TO_LE (huge);
    guint32 le_count = GUINT32_TO_LE ((guint32) ((huge + DC_MESH_CHUNK_DATA_MAX - 1)
                                                 / DC_MESH_CHUNK_DATA_MAX));

    /* No encoder writes it: the total and count are patched in. */
    memcpy (bytes + 36, &le_count, 4);
    memcpy (bytes + 40, &le_total, 8);
    over = g_bytes_new_take (bytes, g_bytes_get_size (body));
    g_assert_false (dc_mesh_chunk_decode_capped (DC_MESH_MSG_GRADIENTS, over, G_MAXUINT64,
                                                 &back, &error));
    g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_TOO_LARGE);
    g_clear_error (&error);
  }

  /* An assembler takes the raised cap, bounded by the ceiling. */
  {
    g_autoptr(DcMeshChunkAssembler) plain = dc_mesh_chunk_assembler_new (DC_MESH_MSG_GRADIENTS,
                                                                         0);
    g_autoptr(DcMeshChunkAssembler) raised = dc_mesh_chunk_assembler_new (DC_MESH_MSG_GRADIENTS,
                                                                          total);
    g_autoptr(GBytes) object = NULL;

    chunk.total = total;
    chunk.count = (guint32) ((total + DC_MESH_CHUNK_DATA_MAX - 1) / DC_MESH_CHUNK_DATA_MAX);
    dc_mesh_train_hash (data, chunk.chunk_hash);
    g_assert_false (dc_mesh_chunk_assembler_push (plain, &chunk, &object, &error));
    g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_TOO_LARGE);
    g_clear_error (&error);
    g_assert_true (dc_mesh_chunk_assembler_push (raised, &chunk, &object, &error));
    g_assert_no_error (error);
    g_assert_null (object);
  }

  /* The sender cuts such an object (its own) into chunks. */
  {
    g_autofree guint8 *whole = g_malloc0 (DC_MESH_GRADIENT_MAX_TOTAL + 1);
    g_autoptr(GBytes) object = g_bytes_new_take (g_steal_pointer (&whole),
                                                 DC_MESH_GRADIENT_MAX_TOTAL + 1);
    g_autoptr(GPtrArray) bodies = NULL;
    DcMeshChunk info = chunk_info (5, 1);

    bodies = dc_mesh_chunks_split (DC_MESH_MSG_GRADIENTS, &info, object, &error);
    g_assert_no_error (error);
    g_assert_cmpuint (bodies->len, ==, (DC_MESH_GRADIENT_MAX_TOTAL + 1 + DC_MESH_CHUNK_DATA_MAX
                                        - 1) / DC_MESH_CHUNK_DATA_MAX);
  }
}

/* The receipt's checks taken apart (dc-peer.c runs them on a worker): a
 * frame read without its checksum and verified afterwards, and a chunk
 * decoded with its data's SHA-256 taken beforehand. A corrupted payload
 * passes dc_mesh_reader_push_unchecked () (only the checksum would catch
 * it) and fails dc_mesh_message_verify () with the checked reader's
 * message; a chunk whose given hash is not its data's is refused, so the
 * comparison is still made; a type that is not chunked has no data hash. */
static void
test_deferred_checks (void)
{
  g_autoptr(GBytes) object = pattern_bytes (DC_MESH_CHUNK_DATA_MAX + 100, 7);
  DcMeshChunk info = chunk_info (3, 0);
  g_autoptr(GPtrArray) bodies = NULL;
  g_autoptr(GPtrArray) pieces = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(DcMeshReader) reader = dc_mesh_reader_new ();
  g_autoptr(DcMeshMessage) message = NULL;
  g_autofree guint8 *copy = NULL;
  g_autoptr(GBytes) tiny = g_bytes_new_static ("x", 1);
  guint8 hash[DC_MESH_HASH_SIZE];
  guint32 checksum = 0;
  gsize size;
  GBytes *body;
  DcMeshChunk chunk;

  bodies = dc_mesh_chunks_split (DC_MESH_MSG_GRADIENTS, &info, object, &error);
  g_assert_no_error (error);
  body = g_ptr_array_index (bodies, 0);
  pieces = dc_mesh_message_encode_pieces (DC_MESH_MSG_GRADIENTS, body, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (pieces->len, ==, 1);

  /* The frame as sent: read unchecked, then verified. */
  message = dc_mesh_reader_push_unchecked (reader, g_bytes_get_data (g_ptr_array_index (pieces, 0),
                                                                     NULL),
                                           g_bytes_get_size (g_ptr_array_index (pieces, 0)),
                                           &checksum, &error);
  g_assert_no_error (error);
  g_assert_nonnull (message);
  g_assert_true (g_bytes_equal (message->payload, body));
  g_assert_true (dc_mesh_message_verify (message, checksum, &error));
  g_assert_no_error (error);
  g_clear_pointer (&message, dc_mesh_message_free);

  /* One payload byte changed on the way. */
  size = g_bytes_get_size (g_ptr_array_index (pieces, 0));
  copy = g_memdup2 (g_bytes_get_data (g_ptr_array_index (pieces, 0), NULL), size);
  copy[size - 1] ^= 0x40;
  message = dc_mesh_reader_push_unchecked (reader, copy, size, &checksum, &error);
  g_assert_no_error (error);
  g_assert_nonnull (message);
  g_assert_false (dc_mesh_message_verify (message, checksum, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
  g_assert_nonnull (strstr (error->message, "fails its checksum"));
  g_clear_error (&error);
  g_clear_pointer (&message, dc_mesh_message_free);
  g_assert_null (dc_mesh_reader_push (reader, copy, size, &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
  g_clear_error (&error);

  /* The chunk's data hash taken first, then the decode. */
  g_assert_true (dc_mesh_chunk_data_hash (DC_MESH_MSG_GRADIENTS, body, hash));
  g_assert_true (dc_mesh_chunk_decode_prehashed (DC_MESH_MSG_GRADIENTS, body, 0, hash, &chunk,
                                                 &error));
  g_assert_no_error (error);
  g_assert_cmpuint (chunk.index, ==, 0);
  dc_mesh_chunk_clear (&chunk);
  hash[5] ^= 1;
  g_assert_false (dc_mesh_chunk_decode_prehashed (DC_MESH_MSG_GRADIENTS, body, 0, hash, &chunk,
                                                  &error));
  g_assert_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
  g_assert_nonnull (strstr (error->message, "fails its hash"));
  g_clear_error (&error);
  g_assert_false (dc_mesh_chunk_data_hash (DC_MESH_MSG_DATA, body, hash));
  g_assert_false (dc_mesh_chunk_data_hash (DC_MESH_MSG_GRADIENTS, tiny, hash));
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
  g_test_add_func ("/dc/mesh/protocol/heartbeat", test_heartbeat);
  g_test_add_func ("/dc/mesh/protocol/switch", test_switch);
  g_test_add_func ("/dc/mesh/protocol/encode-limits", test_encode_limits);
  g_test_add_func ("/dc/mesh/protocol/hello-memory", test_hello_memory);
  g_test_add_func ("/dc/mesh/protocol/train/config", test_train_config);
  g_test_add_func ("/dc/mesh/protocol/train/config-size", test_train_config_size);
  g_test_add_func ("/dc/mesh/protocol/train/chunk-capped", test_train_chunk_capped);
  g_test_add_func ("/dc/mesh/protocol/train/step-report", test_train_step_report);
  g_test_add_func ("/dc/mesh/protocol/train/repair-audit", test_train_repair_audit);
  g_test_add_func ("/dc/mesh/protocol/train/chunk-refused", test_train_chunk_refused);
  g_test_add_func ("/dc/mesh/protocol/train/chunk-frames", test_train_chunk_frames);
  g_test_add_func ("/dc/mesh/protocol/train/chunk-zstd", test_train_chunk_zstd);
  g_test_add_func ("/dc/mesh/protocol/train/assemble-5mb", test_train_assemble_5mb);
  g_test_add_func ("/dc/mesh/protocol/train/assemble-refused", test_train_assemble_refused);
  g_test_add_func ("/dc/mesh/protocol/deferred-checks", test_deferred_checks);

  return g_test_run ();
}
