/* test-model-safetensors.c: the safetensors header reader on headers built
 * here (every check, each refused by itself), the sharded index, and exact
 * F16/BF16 widening over every bit pattern.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <math.h>
#include <string.h>
#include <glib/gstdio.h>

#include "dc-test-utils.h"
#include "model/dc-model-error.h"
#include "model/dc-safetensors.h"

/* A whole file: 8-byte length, @header, @data_size zero bytes. */
static GBytes *
build_file (const char *header,
            gsize       data_size)
{
  gsize n = strlen (header);
  guint8 *buf = g_malloc0 (8 + n + data_size);

  for (int i = 0; i < 8; i++)
    buf[i] = (guint8) ((guint64) n >> (8 * i));
  memcpy (buf + 8, header, n);
  return g_bytes_new_take (buf, 8 + n + data_size);
}

static DcSafetensors *
parse_file (GBytes  *file,
            GError **error)
{
  gsize size;
  const guint8 *data = g_bytes_get_data (file, &size);
  guint64 header_len;

  if (!dc_safetensors_read_prefix (data, size, size, &header_len, error))
    return NULL;
  return dc_safetensors_parse_header ((const char *) data + 8, header_len, size, error);
}

#define GOOD_HEADER \
  "{\"__metadata__\": {\"format\": \"pt\"}, " \
  "\"b\": {\"dtype\": \"BF16\", \"shape\": [4], \"data_offsets\": [24, 32]}, " \
  "\"a\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 24]}, " \
  "\"e\": {\"dtype\": \"F16\", \"shape\": [0, 5], \"data_offsets\": [32, 32]}, " \
  "\"s\": {\"dtype\": \"F16\", \"shape\": [], \"data_offsets\": [32, 34]}}"

static void
test_good_header (void)
{
  g_autoptr(GBytes) file = build_file (GOOD_HEADER "   ", 34);
  g_autoptr(GError) error = NULL;
  g_autoptr(DcSafetensors) st = parse_file (file, &error);
  const DcSafetensorsTensor *a, *b, *s;
  g_autofree char *dir = g_dir_make_tmp ("dc-safetensors-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "model.safetensors", NULL);
  g_autoptr(DcSafetensors) from_file = NULL;

  g_assert_no_error (error);
  g_assert_cmpuint (st->tensors->len, ==, 4);
  g_assert_cmpuint (st->data_start, ==, 8 + strlen (GOOD_HEADER) + 3);  /* padding counts */
  g_assert_cmpuint (st->data_size, ==, 34);
  g_assert_cmpstr (g_hash_table_lookup (st->metadata, "format"), ==, "pt");
  a = dc_safetensors_lookup (st, "a");
  b = dc_safetensors_lookup (st, "b");
  s = dc_safetensors_lookup (st, "s");
  g_assert_nonnull (a);
  g_assert_cmpint (a->dtype, ==, DC_SAFETENSORS_F32);
  g_assert_cmpuint (a->rank, ==, 2);
  g_assert_cmpuint (a->shape[1], ==, 3);
  g_assert_cmpuint (a->numel, ==, 6);
  g_assert_cmpint (b->dtype, ==, DC_SAFETENSORS_BF16);
  g_assert_cmpuint (b->begin, ==, 24);
  g_assert_cmpuint (s->rank, ==, 0);
  g_assert_cmpuint (s->numel, ==, 1);
  g_assert_null (dc_safetensors_lookup (st, "__metadata__"));
  /* Sorted by offset. */
  g_assert_true (st->tensors->pdata[0] == a);

  g_assert_true (g_file_set_contents (path, g_bytes_get_data (file, NULL),
                                      (gssize) g_bytes_get_size (file), NULL));
  from_file = dc_safetensors_new_from_file (path, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (from_file->tensors->len, ==, 4);
  g_unlink (path);
  g_rmdir (dir);
}

static void
assert_refused (const char *header,
                gsize       data_size,
                int         code,
                const char *fragment)
{
  g_autoptr(GBytes) file = build_file (header, data_size);
  g_autoptr(GError) error = NULL;
  g_autoptr(DcSafetensors) st = parse_file (file, &error);

  g_assert_null (st);
  g_assert_error (error, DC_MODEL_ERROR, code);
  if (strstr (error->message, fragment) == NULL)
    g_error ("message “%s” lacks “%s”", error->message, fragment);
}

#define T(name, dtype, shape, b, e) \
  "\"" name "\": {\"dtype\": \"" dtype "\", \"shape\": " shape ", \"data_offsets\": [" b ", " e "]}"

static void
test_refusals (void)
{
  guint8 prefix[8] = { 0 };
  g_autoptr(GError) error = NULL;
  guint64 len;
  g_autoptr(GString) deep = g_string_new ("{\"a\": ");

  assert_refused ("{" T ("x", "I64", "[2]", "0", "16") "}", 16, DC_MODEL_ERROR_UNSUPPORTED,
                  "dtype “I64”, which is not supported");
  assert_refused ("{" T ("x", "F8_E4M3", "[2]", "0", "2") "}", 2, DC_MODEL_ERROR_UNSUPPORTED,
                  "F8_E4M3");
  assert_refused ("{" T ("x", "F32", "[1,1,1,1,1,1,1,1,1]", "0", "4") "}", 4,
                  DC_MODEL_ERROR_UNSUPPORTED, "rank 9");
  assert_refused ("{" T ("x", "F32", "[4294967296, 4294967296]", "0", "4") "}", 4,
                  DC_MODEL_ERROR_TOO_LARGE, "overflows");
  assert_refused ("{" T ("x", "F32", "[4611686018427387904]", "0", "4") "}", 4,
                  DC_MODEL_ERROR_TOO_LARGE, "overflows");
  assert_refused ("{" T ("x", "F32", "[-1]", "0", "4") "}", 4, DC_MODEL_ERROR_FORMAT,
                  "not a non-negative integer");
  assert_refused ("{" T ("x", "F32", "[1.5]", "0", "4") "}", 4, DC_MODEL_ERROR_FORMAT,
                  "not a non-negative integer");
  /* A header that lies about sizes: offsets say 8 bytes, shape says 4 floats. */
  assert_refused ("{" T ("x", "F32", "[4]", "0", "8") "}", 8, DC_MODEL_ERROR_FORMAT,
                  "holds 8 bytes but its shape and dtype need 16");
  /* Offsets past the end of the file (a truncated file). */
  assert_refused ("{" T ("x", "F32", "[4]", "0", "16") "}", 12, DC_MODEL_ERROR_FORMAT,
                  "outside the file's 12 data bytes");
  assert_refused ("{" T ("x", "F32", "[1]", "8", "4") "}", 12, DC_MODEL_ERROR_FORMAT,
                  "outside");
  assert_refused ("{" T ("x", "F32", "[1]", "-4", "0") "}", 4, DC_MODEL_ERROR_FORMAT,
                  "not non-negative integers");
  /* Overlap, gap, bytes nobody owns. */
  assert_refused ("{" T ("x", "F32", "[2]", "0", "8") ", " T ("y", "F32", "[2]", "4", "12") "}", 12,
                  DC_MODEL_ERROR_FORMAT, "overlap or leave a gap");
  assert_refused ("{" T ("x", "F32", "[1]", "0", "4") ", " T ("y", "F32", "[1]", "8", "12") "}", 12,
                  DC_MODEL_ERROR_FORMAT, "overlap or leave a gap");
  assert_refused ("{" T ("x", "F32", "[1]", "0", "4") "}", 12, DC_MODEL_ERROR_FORMAT,
                  "cover 4 bytes but the file holds 12");
  /* Malformed. */
  assert_refused ("{\"x\": {\"dtype\": \"F32\", \"shape\": [1]}}", 4, DC_MODEL_ERROR_FORMAT,
                  "needs a dtype, a shape and two data_offsets");
  assert_refused ("[1, 2]", 0, DC_MODEL_ERROR_FORMAT, "not a JSON object");
  assert_refused ("{\"x\": ", 0, DC_MODEL_ERROR_FORMAT, "not a JSON object");
  assert_refused ("{\"__metadata__\": {\"a\": 1}}", 0, DC_MODEL_ERROR_FORMAT,
                  "__metadata__ value “a” is not a string");
  for (guint i = 0; i < 20; i++)
    g_string_append (deep, "[");
  for (guint i = 0; i < 20; i++)
    g_string_append (deep, "]");
  g_string_append (deep, "}");
  assert_refused (deep->str, 0, DC_MODEL_ERROR_FORMAT, "not a JSON object");

  /* The length prefix: beyond the cap, beyond the file, too short. */
  prefix[3] = 0x10;   /* 256 MiB */
  g_assert_false (dc_safetensors_read_prefix (prefix, 8, G_MAXUINT64, &len, &error));
  g_assert_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE);
  g_clear_error (&error);
  memset (prefix, 0xff, 8);
  g_assert_false (dc_safetensors_read_prefix (prefix, 8, G_MAXUINT64, &len, &error));
  g_assert_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE);
  g_clear_error (&error);
  memset (prefix, 0, 8);
  prefix[0] = 100;
  g_assert_false (dc_safetensors_read_prefix (prefix, 8, 50, &len, &error));
  g_assert_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT);
  g_clear_error (&error);
  g_assert_false (dc_safetensors_read_prefix (prefix, 4, 50, &len, &error));
  g_assert_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT);
  g_clear_error (&error);
  g_assert_null (dc_safetensors_parse_header ("{}", 2, 9, &error));
  g_assert_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT);
}

static void
test_index (void)
{
  const char *good =
    "{\"metadata\": {\"total_size\": 1234}, \"weight_map\": {"
    "\"lm_head.weight\": \"model-00002-of-00002.safetensors\", "
    "\"model.embed_tokens.weight\": \"model-00001-of-00002.safetensors\", "
    "\"model.norm.weight\": \"model-00002-of-00002.safetensors\"}}";
  const char *bad[] = {
    "{\"weight_map\": {\"a\": \"../model.safetensors\"}}",
    "{\"weight_map\": {\"a\": \"/etc/model.safetensors\"}}",
    "{\"weight_map\": {\"a\": \"sub/model.safetensors\"}}",
    "{\"weight_map\": {\"a\": \"model.bin\"}}",
    "{\"weight_map\": {\"a\": 3}}",
    "{\"weight_map\": {}}",
    "{\"weight_map\": []}",
    "{\"metadata\": {}}",
    "{\"weight_map\": ",
  };
  g_autoptr(GError) error = NULL;
  g_autoptr(DcSafetensorsIndex) index = dc_safetensors_index_parse (good, -1, &error);

  g_assert_no_error (error);
  g_assert_cmpuint (index->total_size, ==, 1234);
  g_assert_cmpuint (index->shards->len, ==, 2);
  g_assert_cmpstr (index->shards->pdata[0], ==, "model-00001-of-00002.safetensors");
  g_assert_cmpstr (g_hash_table_lookup (index->weight_map, "model.norm.weight"), ==,
                   "model-00002-of-00002.safetensors");
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr(DcSafetensorsIndex) refused = dc_safetensors_index_parse (bad[i], -1, &error);

      g_assert_null (refused);
      g_assert_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT);
      g_clear_error (&error);
    }
}

/* Every one of the 65,536 halves against the definition, computed another way. */
static void
test_f16_exhaustive (void)
{
  for (guint h = 0; h < 65536; h++)
    {
      float got = dc_f16_to_f32 ((guint16) h);
      int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
      double sign = (h & 0x8000) ? -1.0 : 1.0;

      if (exp == 31 && mant == 0)
        g_assert_true (isinf (got) && (signbit (got) != 0) == ((h & 0x8000) != 0));
      else if (exp == 31)
        {
          guint32 bits;

          memcpy (&bits, &got, 4);
          g_assert_true (isnan (got));
          g_assert_cmphex ((bits >> 13) & 0x3ff, ==, mant);   /* payload kept */
          g_assert_cmpint (bits >> 31, ==, h >> 15);
        }
      else
        {
          double want = exp == 0 ? sign * ldexp (mant, -24)
                                 : sign * ldexp (1024 + mant, exp - 25);

          if ((double) got != want || (signbit (got) != 0) != ((h & 0x8000) != 0))
            g_error ("half 0x%04x widened to %a, expected %a", h, got, want);
        }
    }
  /* Named landmarks, for the reader. */
  g_assert_cmpfloat (dc_f16_to_f32 (0x0001), ==, ldexpf (1.0f, -24));   /* smallest subnormal */
  g_assert_cmpfloat (dc_f16_to_f32 (0x03ff), ==, ldexpf (1023.0f, -24)); /* largest subnormal */
  g_assert_cmpfloat (dc_f16_to_f32 (0x0400), ==, ldexpf (1.0f, -14));   /* smallest normal */
  g_assert_cmpfloat (dc_f16_to_f32 (0x7bff), ==, 65504.0f);
  g_assert_cmpfloat (dc_f16_to_f32 (0x3c00), ==, 1.0f);
  g_assert_cmpfloat (dc_f16_to_f32 (0xc000), ==, -2.0f);
  g_assert_true (signbit (dc_f16_to_f32 (0x8000)) && dc_f16_to_f32 (0x8000) == 0.0f);
}

static void
test_bf16_exhaustive (void)
{
  guint8 raw[6] = { 0x80, 0x3f, 0x01, 0x00, 0xc1, 0x7f };   /* 1.0, 2^-133, NaN, little-endian */
  guint8 half[4] = { 0x01, 0x00, 0x00, 0x7c };              /* 2^-24, +inf */
  guint8 f32[4] = { 0x00, 0x00, 0x80, 0xbf };               /* -1.0 */
  float out[3];

  for (guint b = 0; b < 65536; b++)
    {
      float got = dc_bf16_to_f32 ((guint16) b);
      guint32 bits;

      memcpy (&bits, &got, 4);
      g_assert_cmphex (bits, ==, (guint32) b << 16);
      if (((b >> 7) & 0xff) == 0 && (b & 0x7f) != 0)
        g_assert_cmpfloat ((double) got, ==,
                           ((b & 0x8000) ? -1.0 : 1.0) * ldexp (b & 0x7f, -133));
    }
  dc_widen_to_f32 (DC_SAFETENSORS_BF16, raw, out, 3);
  g_assert_cmpfloat (out[0], ==, 1.0f);
  g_assert_cmpfloat ((double) out[1], ==, ldexp (1.0, -133));
  g_assert_true (isnan (out[2]));
  dc_widen_to_f32 (DC_SAFETENSORS_F16, half, out, 2);
  g_assert_cmpfloat (out[0], ==, ldexpf (1.0f, -24));
  g_assert_true (isinf (out[1]) && out[1] > 0);
  dc_widen_to_f32 (DC_SAFETENSORS_F32, f32, out, 1);
  g_assert_cmpfloat (out[0], ==, -1.0f);
}

int
main (int   argc,
      char *argv[])
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/dc/model/safetensors/good-header", test_good_header);
  g_test_add_func ("/dc/model/safetensors/refusals", test_refusals);
  g_test_add_func ("/dc/model/safetensors/index", test_index);
  g_test_add_func ("/dc/model/safetensors/f16-exhaustive", test_f16_exhaustive);
  g_test_add_func ("/dc/model/safetensors/bf16-exhaustive", test_bf16_exhaustive);
  return g_test_run ();
}
