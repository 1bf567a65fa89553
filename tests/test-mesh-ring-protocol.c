/* test-mesh-ring-protocol.c: the inference ring's message bodies, and the
 * checks a received hop passes (non-finite, another model's).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "infer/dc-infer-ring.h"
#include "mesh/dc-mesh-error.h"
#include "mesh/dc-mesh-ring-protocol.h"

static void
fill_run_id (guint8 *id)
{
  for (guint i = 0; i < DC_MESH_RING_RUN_ID_SIZE; i++)
    id[i] = (guint8) (i * 11 + 3);
}

static void
test_round_trips (void)
{
  g_autoptr(GError) error = NULL;
  DcMeshRingOffer offer = { 123456789, 2.5, 0 }, offer2;
  DcMeshRingAssign assign = { { 0 }, 2, 4, 64, 1, 3, (char *) "test/llama-tiny@main",
                              (char *) "00ff00ff00ff00ff" };
  g_auto(DcMeshRingAssign) assign2 = { { 0 } };
  DcMeshRingReady ready = { { 0 }, 4242, FALSE, (char *) "not enough memory" };
  g_auto(DcMeshRingReady) ready2 = { { 0 } };
  float data[6] = { 0.0f, -1.5f, 3.25f, 1e-30f, -0.0f, 7.0f };
  DcMeshRingHop hop = { { 0 }, 9, 16, 2, 3, (char *) "test/llama-tiny", data };
  g_auto(DcMeshRingHop) hop2 = { { 0 } };
  DcMeshRingToken token = { { 0 }, 1, 5, 321, 0, (char *) " naïve" };
  g_auto(DcMeshRingToken) token2 = { { 0 } };
  g_autoptr(GBytes) b1 = NULL, b2 = NULL, b3 = NULL, b4 = NULL, b5 = NULL;

  fill_run_id (assign.run_id);
  fill_run_id (ready.run_id);
  fill_run_id (hop.run_id);
  fill_run_id (token.run_id);

  b1 = dc_mesh_ring_offer_encode (&offer);
  g_assert_cmpuint (g_bytes_get_size (b1), ==, DC_MESH_RING_OFFER_SIZE);
  g_assert_true (dc_mesh_message_check_payload (DC_MESH_MSG_RING_OFFER, g_bytes_get_size (b1),
                                                NULL));
  g_assert_true (dc_mesh_ring_offer_decode (b1, &offer2, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (offer2.memory_bytes, ==, offer.memory_bytes);
  g_assert_cmpfloat (offer2.gmacs, ==, offer.gmacs);

  b2 = dc_mesh_ring_assign_encode (&assign);
  g_assert_true (dc_mesh_ring_assign_decode (b2, &assign2, &error));
  g_assert_no_error (error);
  g_assert_cmpmem (assign2.run_id, 16, assign.run_id, 16);
  g_assert_cmpuint (assign2.first, ==, 2);
  g_assert_cmpuint (assign2.last, ==, 4);
  g_assert_cmpuint (assign2.context, ==, 64);
  g_assert_cmpstr (assign2.model, ==, assign.model);
  g_assert_cmpstr (assign2.next, ==, assign.next);

  b3 = dc_mesh_ring_ready_encode (&ready);
  g_assert_true (dc_mesh_ring_ready_decode (b3, &ready2, &error));
  g_assert_no_error (error);
  g_assert_false (ready2.ok);
  g_assert_cmpuint (ready2.downloaded, ==, 4242);
  g_assert_cmpstr (ready2.message, ==, ready.message);

  b4 = dc_mesh_ring_hop_encode (&hop);
  g_assert_true (dc_mesh_message_check_payload (DC_MESH_MSG_RING_HOP, g_bytes_get_size (b4),
                                                NULL));
  g_assert_true (dc_mesh_ring_hop_decode (b4, &hop2, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (hop2.turn, ==, 9);
  g_assert_cmpuint (hop2.position, ==, 16);
  g_assert_cmpmem (hop2.data, sizeof data, data, sizeof data);   /* bit for bit, -0 too */

  b5 = dc_mesh_ring_token_encode (&token);
  g_assert_true (dc_mesh_ring_token_decode (b5, &token2, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (token2.id, ==, 321);
  g_assert_cmpstr (token2.text, ==, token.text);
}

static GBytes *
mutate (GBytes *good,
        gsize   at,
        guint8  value,
        gssize  resize)
{
  gsize size;
  const guint8 *data = g_bytes_get_data (good, &size);
  gsize new_size = resize < 0 ? size - (gsize) -resize : size + (gsize) resize;
  guint8 *copy = g_malloc0 (MAX (new_size, 1));

  memcpy (copy, data, MIN (size, new_size));
  if (at < new_size)
    copy[at] = value;
  return g_bytes_new_take (copy, new_size);
}

static void
test_refusals (void)
{
  float data[4] = { 1, 2, 3, 4 };
  DcMeshRingHop hop = { { 0 }, 1, 0, 2, 2, (char *) "m", data };
  DcMeshRingToken token = { { 0 }, 1, 0, 7, 0, (char *) "x" };
  DcMeshRingAssign assign = { { 0 }, 0, 1, 8, 1, 2, (char *) "m", (char *) "n" };
  g_autoptr(GBytes) good_hop = dc_mesh_ring_hop_encode (&hop);
  g_autoptr(GBytes) good_token = dc_mesh_ring_token_encode (&token);
  g_autoptr(GBytes) good_assign = dc_mesh_ring_assign_encode (&assign);
  const gsize counts = 1 + 16 + 8;   /* version, run id, turn, position: n is next */
  struct
  {
    GBytes     *bytes;
    int         kind;   /* 0 hop, 1 token, 2 assign */
    int         code;
    const char *says;
  } cases[] = {
    { mutate (good_hop, 0, 2, 0), 0, DC_MESH_ERROR_UNSUPPORTED, "body version 2" },
    { mutate (good_hop, 0, 1, -1), 0, DC_MESH_ERROR_MALFORMED, "does not match" },
    { mutate (good_hop, 0, 1, 1), 0, DC_MESH_ERROR_MALFORMED, "does not match" },
    /* 65 positions: over the limit, refused before any allocation. */
    { mutate (good_hop, counts, 65, 0), 0, DC_MESH_ERROR_MALFORMED, "outside" },
    { mutate (good_hop, counts, 0, 0), 0, DC_MESH_ERROR_MALFORMED, "outside" },
    /* The model id's first byte becomes 0xff: not UTF-8. */
    { mutate (good_hop, counts + 8 + 2, 0xff, 0), 0, DC_MESH_ERROR_MALFORMED, "not UTF-8" },
    { mutate (good_token, 1 + 16 + 12, 0x80, 0), 1, DC_MESH_ERROR_MALFORMED, "unknown flags" },
    { mutate (good_token, 0, 1, -1), 1, DC_MESH_ERROR_MALFORMED, "truncated" },
    /* Stage 0 is the head's. */
    { mutate (good_assign, 1 + 16 + 12, 0, 0), 2, DC_MESH_ERROR_MALFORMED, "make no sense" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GError) error = NULL;
      gboolean ok;

      if (cases[i].kind == 0)
        {
          g_auto(DcMeshRingHop) out = { { 0 } };

          ok = dc_mesh_ring_hop_decode (cases[i].bytes, &out, &error);
          g_assert_null (out.data);
        }
      else if (cases[i].kind == 1)
        {
          g_auto(DcMeshRingToken) out = { { 0 } };

          ok = dc_mesh_ring_token_decode (cases[i].bytes, &out, &error);
        }
      else
        {
          g_auto(DcMeshRingAssign) out = { { 0 } };

          ok = dc_mesh_ring_assign_decode (cases[i].bytes, &out, &error);
        }
      g_assert_false (ok);
      g_assert_error (error, DC_MESH_ERROR, cases[i].code);
      g_assert_nonnull (strstr (error->message, cases[i].says));
      g_bytes_unref (cases[i].bytes);
    }
  /* A lying size is refused by the frame check before the body is read. */
  g_assert_false (dc_mesh_message_check_payload (DC_MESH_MSG_RING_HOP,
                                                 DC_MESH_RING_HOP_MAX + 1, NULL));
  g_assert_false (dc_mesh_message_check_payload (DC_MESH_MSG_RING_OFFER, 20, NULL));
}

/* A stage's request for weight bytes and the head's answer: they round-trip,
 * and what no answer may carry is refused before anything is allocated. */
static void
test_fetch_bytes (void)
{
  DcMeshRingFetch fetch = { { 3 }, 9, 4096, 1024, (char *) "model.safetensors" };
  g_autoptr(GBytes) data = g_bytes_new_static ("abcdefgh", 8);
  DcMeshRingBytes bytes = { { 3 }, 9, 4096, { 0x11, 0x22 }, (char *) "", data };
  DcMeshRingBytes refusal = { { 3 }, 9, 4096, { 0 }, (char *) "not cached", NULL };
  g_autoptr(GBytes) e1 = dc_mesh_ring_fetch_encode (&fetch);
  g_autoptr(GBytes) e2 = dc_mesh_ring_bytes_encode (&bytes);
  g_autoptr(GBytes) e3 = dc_mesh_ring_bytes_encode (&refusal);
  g_auto(DcMeshRingFetch) f = { { 0 } };
  g_auto(DcMeshRingBytes) b = { { 0 } };
  g_auto(DcMeshRingBytes) r = { { 0 } };
  g_autoptr(GError) error = NULL;
  /* The fetch's length (after version, run id, request and offset). */
  const gsize length_at = 1 + 16 + 4 + 8;
  struct
  {
    GBytes     *bytes;
    gboolean    is_fetch;
    const char *says;
  } cases[] = {
    { mutate (e1, length_at + 1, 0, 0), TRUE, "outside 1–" },
    /* 0x01000000 + 1024 bytes: over 4 MiB. */
    { mutate (e1, length_at + 3, 1, 0), TRUE, "outside 1–" },
    { mutate (e1, 0, 1, 1), TRUE, "trailing bytes" },
    /* A refusal that also carries bytes. */
    { mutate (e3, g_bytes_get_size (e3), 'x', 1), FALSE, "bytes with a refusal" },
    { mutate (e2, 0, 1, -40), FALSE, "truncated" },
  };

  g_assert_true (dc_mesh_message_check_payload (DC_MESH_MSG_RING_FETCH,
                                                g_bytes_get_size (e1), NULL));
  g_assert_true (dc_mesh_ring_fetch_decode (e1, &f, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (f.file, ==, "model.safetensors");
  g_assert_cmpuint (f.request, ==, 9);
  g_assert_cmpuint (f.offset, ==, 4096);
  g_assert_cmpuint (f.length, ==, 1024);
  g_assert_cmpuint (f.run_id[0], ==, 3);
  g_assert_true (dc_mesh_ring_bytes_decode (e2, &b, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (b.message, ==, "");
  g_assert_true (g_bytes_equal (b.data, data));
  g_assert_cmpuint (b.sha256[1], ==, 0x22);
  g_assert_true (dc_mesh_ring_bytes_decode (e3, &r, &error));
  g_assert_cmpstr (r.message, ==, "not cached");
  g_assert_null (r.data);
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_auto(DcMeshRingFetch) fo = { { 0 } };
      g_auto(DcMeshRingBytes) bo = { { 0 } };
      g_autoptr(GError) local_error = NULL;
      gboolean ok = cases[i].is_fetch ? dc_mesh_ring_fetch_decode (cases[i].bytes, &fo,
                                                                   &local_error)
                                      : dc_mesh_ring_bytes_decode (cases[i].bytes, &bo,
                                                                   &local_error);

      g_assert_false (ok);
      g_assert_error (local_error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
      g_assert_nonnull (strstr (local_error->message, cases[i].says));
      g_assert_null (fo.file);
      g_assert_null (bo.data);
      g_bytes_unref (cases[i].bytes);
    }
  /* An answer past one chunk is refused by the frame check. */
  g_assert_false (dc_mesh_message_check_payload (DC_MESH_MSG_RING_BYTES,
                                                 DC_MESH_RING_BYTES_MAX + 1, NULL));
}

/* A stage's request for a model file (or a header) and the head's answer:
 * they round-trip; a kind, a length or an offset no request may carry, and
 * an answer whose bytes lie outside the size it states (or whose size is
 * past the largest file), are refused before anything is allocated. */
static void
test_file_fetch (void)
{
  DcMeshRingFileFetch fetch = { { 4 }, 11, DC_MESH_RING_FILE_HEADER, 0, 1024,
                                (char *) "model.safetensors" };
  g_autoptr(GBytes) data = g_bytes_new_static ("abcdefgh", 8);
  DcMeshRingFile file = { { 4 }, 11, 0, 8, 1000, { 0x33, 0x44 }, (char *) "", data };
  DcMeshRingFile absent = { { 4 }, 12, 0, 0, 0, { 0 }, (char *) "", NULL };
  g_autoptr(GBytes) e1 = dc_mesh_ring_file_fetch_encode (&fetch);
  g_autoptr(GBytes) e2 = dc_mesh_ring_file_encode (&file);
  g_autoptr(GBytes) e3 = dc_mesh_ring_file_encode (&absent);
  g_auto(DcMeshRingFileFetch) f = { { 0 } };
  g_auto(DcMeshRingFile) b = { { 0 } };
  g_auto(DcMeshRingFile) a = { { 0 } };
  g_autoptr(GError) error = NULL;
  /* Offsets in the bodies: after the version and the run id (17 bytes),
   * the fetch's request (4), kind (1), offset (8), length (4); the answer's
   * request (4), offset (8), total (8). */
  const gsize kind_at = 17 + 4, length_at = 17 + 4 + 1 + 8;
  const gsize answer_offset_at = 17 + 4, total_at = 17 + 4 + 8;
  struct
  {
    GBytes     *bytes;
    gboolean    is_fetch;
    const char *says;
  } cases[] = {
    { mutate (e1, kind_at, 3, 0), TRUE, "an unknown kind of file" },
    { mutate (e1, length_at + 1, 0, 0), TRUE, "outside 1–" },
    /* 0x01000000 + 1024 bytes: over 4 MiB. */
    { mutate (e1, length_at + 3, 1, 0), TRUE, "outside 1–" },
    /* An offset of 2⁵⁶ and more. */
    { mutate (e1, kind_at + 8, 1, 0), TRUE, "an offset past the largest file" },
    { mutate (e1, 0, 1, 1), TRUE, "trailing bytes" },
    /* 8 bytes of data in a file said to hold 4. */
    { mutate (e2, total_at, 4, 0), FALSE, "outside the file's size" },
    /* A file of 2⁵⁶ bytes and more. */
    { mutate (e2, total_at + 7, 1, 0), FALSE, "past the largest one" },
    /* Bytes at offset 200 of an 8-byte file. */
    { mutate (e2, answer_offset_at, 200, 0), FALSE, "outside the file's size" },
    { mutate (e2, 0, 1, -40), FALSE, "truncated" },
  };

  g_assert_true (dc_mesh_message_check_payload (DC_MESH_MSG_RING_FILE_FETCH,
                                                g_bytes_get_size (e1), NULL));
  g_assert_true (dc_mesh_message_check_payload (DC_MESH_MSG_RING_FILE,
                                                g_bytes_get_size (e2), NULL));
  g_assert_cmpstr (dc_mesh_message_type_to_string (DC_MESH_MSG_RING_FILE_FETCH), ==,
                   "ring-file-fetch");
  g_assert_true (dc_mesh_ring_file_fetch_decode (e1, &f, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (f.name, ==, "model.safetensors");
  g_assert_cmpuint (f.kind, ==, DC_MESH_RING_FILE_HEADER);
  g_assert_cmpuint (f.request, ==, 11);
  g_assert_cmpuint (f.length, ==, 1024);
  g_assert_cmpuint (f.run_id[0], ==, 4);
  g_assert_true (dc_mesh_ring_file_decode (e2, &b, &error));
  g_assert_no_error (error);
  g_assert_true (g_bytes_equal (b.data, data));
  g_assert_cmpuint (b.total, ==, 8);
  g_assert_cmpuint (b.file_size, ==, 1000);
  g_assert_cmpuint (b.sha256[1], ==, 0x44);
  g_assert_true (dc_mesh_ring_file_decode (e3, &a, &error));
  g_assert_cmpuint (a.total, ==, 0);
  g_assert_null (a.data);
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_auto(DcMeshRingFileFetch) fo = { { 0 } };
      g_auto(DcMeshRingFile) bo = { { 0 } };
      g_autoptr(GError) local_error = NULL;
      gboolean ok = cases[i].is_fetch ? dc_mesh_ring_file_fetch_decode (cases[i].bytes, &fo,
                                                                        &local_error)
                                      : dc_mesh_ring_file_decode (cases[i].bytes, &bo,
                                                                  &local_error);

      g_assert_false (ok);
      g_assert_error (local_error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED);
      g_assert_nonnull (strstr (local_error->message, cases[i].says));
      g_assert_null (fo.name);
      g_assert_null (bo.data);
      g_bytes_unref (cases[i].bytes);
    }
  g_assert_false (dc_mesh_message_check_payload (DC_MESH_MSG_RING_FILE,
                                                 DC_MESH_RING_FILE_BODY_MAX + 1, NULL));
}

/* What a stage (and the head) refuses in a well-formed hop. */
static void
test_check_hop (void)
{
  float data[4] = { 1, 2, 3, 4 };
  DcMeshRingHop hop = { { 0 }, 1, 7, 2, 2, (char *) "test/llama-tiny", data };
  g_autofree char *ok = dc_infer_ring_check_hop (&hop, "beta", "test/llama-tiny", 2);
  g_autofree char *wrong_model = dc_infer_ring_check_hop (&hop, "beta", "test/gpt2-tiny", 2);
  g_autofree char *wrong_width = dc_infer_ring_check_hop (&hop, "beta", "test/llama-tiny", 4);
  g_autofree char *nan = NULL, *inf = NULL;

  g_assert_null (ok);
  g_assert_cmpstr (wrong_model, ==, "REFUSED activation from “beta”: it belongs to model "
                                    "test/llama-tiny; this device holds a slice of "
                                    "test/gpt2-tiny");
  g_assert_true (g_str_has_prefix (wrong_width, "REFUSED activation from “beta”"));
  data[3] = NAN;
  nan = dc_infer_ring_check_hop (&hop, "beta", "test/llama-tiny", 2);
  g_assert_cmpstr (nan, ==, "REFUSED activation from “beta”: a non-finite value at position 8");
  data[3] = 4;
  data[0] = -INFINITY;
  inf = dc_infer_ring_check_hop (&hop, "beta", "test/llama-tiny", 2);
  g_assert_cmpstr (inf, ==, "REFUSED activation from “beta”: a non-finite value at position 7");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/mesh/ring-protocol/round-trips", test_round_trips);
  g_test_add_func ("/mesh/ring-protocol/refusals", test_refusals);
  g_test_add_func ("/mesh/ring-protocol/fetch-bytes", test_fetch_bytes);
  g_test_add_func ("/mesh/ring-protocol/file-fetch", test_file_fetch);
  g_test_add_func ("/mesh/ring-protocol/check-hop", test_check_hop);
  return g_test_run ();
}
