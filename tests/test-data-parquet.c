/* test-data-parquet.c: the parquet reader against pyarrow-written files.
 *
 * tests/data/parquet/expect.json holds what pyarrow read from the same files
 * (row count, summed UTF-8 bytes, first and last text); every value must
 * match. Damaged copies (truncated at many points, bytes flipped) must give
 * an error or a result, never a crash (MALLOC_CHECK_ and the test's own
 * asserts watch that).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <json-glib/json-glib.h>
#include <string.h>

#include "data/dc-data-error.h"
#include "data/dc-parquet-file.h"
#include "dc-test-utils.h"

typedef struct
{
  gint64  rows;
  gint64  nulls;
  guint64 bytes;
  char   *first;
  char   *last;
} Summary;

static void
summary_clear (Summary *summary)
{
  g_clear_pointer (&summary->first, g_free);
  g_clear_pointer (&summary->last, g_free);
}

static void
summarize_cb (const char *data,
              gsize       len,
              gpointer    user_data)
{
  Summary *summary = user_data;

  summary->rows++;
  if (data == NULL)
    {
      summary->nulls++;
      return;
    }
  summary->bytes += len;
  if (summary->first == NULL)
    summary->first = g_strndup (data, len);
  /* Keeping only the last value costs a copy per row; fine at fixture size. */
  g_free (summary->last);
  summary->last = g_strndup (data, len);
}

static JsonObject *
load_expect (void)
{
  g_autofree char *path = dc_test_dup_source_path ("tests", "data", "parquet", "expect.json", NULL);
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;

  json_parser_load_from_file (parser, path, &error);
  g_assert_no_error (error);
  return json_object_ref (json_node_get_object (json_parser_get_root (parser)));
}

static DcParquetFile *
open_fixture (const char *name)
{
  g_autofree char *path = dc_test_dup_source_path ("tests", "data", "parquet", name, NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(DcByteSource) source = dc_byte_source_new_for_path (path, &error);
  DcParquetFile *file;

  g_assert_no_error (error);
  file = dc_parquet_file_open (source, NULL, &error);
  g_assert_no_error (error);
  return file;
}

static void
check_fixture (gconstpointer data)
{
  const char *name = data;
  g_autoptr(JsonObject) expect = load_expect ();
  g_autoptr(DcParquetFile) file = open_fixture (name);
  const DcParquetMeta *meta = dc_parquet_file_get_meta (file);
  g_autoptr(GError) error = NULL;
  Summary all = { 0 };
  gint64 group_rows = 0;
  guint64 group_bytes = 0;
  int column;

  g_assert_cmpuint (meta->n_columns, ==, 10);
  g_assert_cmpint (meta->num_rows, ==, json_object_get_int_member (expect, "rows"));
  column = dc_parquet_file_find_text_column (file, "text", &error);
  g_assert_no_error (error);
  g_assert_cmpint (column, ==, 0);

  dc_parquet_file_read_column (file, column, NULL, 0, summarize_cb, &all, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpint (all.rows, ==, json_object_get_int_member (expect, "rows"));
  g_assert_cmpint (all.nulls, ==, 0);
  g_assert_cmpuint (all.bytes, ==, json_object_get_int_member (expect, "text_bytes"));
  g_assert_cmpstr (all.first, ==, json_object_get_string_member (expect, "first_text"));
  g_assert_cmpstr (all.last, ==, json_object_get_string_member (expect, "last_text"));

  /* Row groups one at a time, in reverse: the same totals. */
  for (guint g = meta->n_row_groups; g-- > 0;)
    {
      Summary one = { 0 };

      dc_parquet_file_read_column (file, column, &g, 1, summarize_cb, &one, NULL, &error);
      g_assert_no_error (error);
      g_assert_cmpint (one.rows, ==, meta->row_groups[g].num_rows);
      group_rows += one.rows;
      group_bytes += one.bytes;
      summary_clear (&one);
    }
  g_assert_cmpint (group_rows, ==, all.rows);
  g_assert_cmpuint (group_bytes, ==, all.bytes);
  summary_clear (&all);
}

static void
test_snappy_row_group_count (void)
{
  g_autoptr(DcParquetFile) file = open_fixture ("fineweb-like-snappy.parquet");
  g_autoptr(DcParquetFile) zfile = open_fixture ("fineweb-like-zstd.parquet");

  g_assert_cmpuint (dc_parquet_file_get_meta (file)->n_row_groups, ==, 8);
  g_assert_cmpint (dc_parquet_file_get_meta (file)->row_groups[0].chunks[0].codec, ==,
                   DC_PARQUET_CODEC_SNAPPY);
  g_assert_cmpuint (dc_parquet_file_get_meta (zfile)->n_row_groups, ==, 11);
  g_assert_cmpint (dc_parquet_file_get_meta (zfile)->row_groups[0].chunks[0].codec, ==,
                   DC_PARQUET_CODEC_ZSTD);
}

static void
test_missing_column_lists_columns (void)
{
  g_autoptr(DcParquetFile) file = open_fixture ("fineweb-like-zstd.parquet");
  g_autoptr(GError) error = NULL;

  g_assert_cmpint (dc_parquet_file_find_text_column (file, "content", &error), ==, -1);
  g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_NO_TEXT_COLUMN);
  g_assert_nonnull (strstr (error->message, "text, id, dump, url"));
  g_clear_error (&error);

  /* A numeric column is not text. */
  g_assert_cmpint (dc_parquet_file_find_text_column (file, "score", &error), ==, -1);
  g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_NO_TEXT_COLUMN);
}

static void
test_bad_row_group (void)
{
  g_autoptr(DcParquetFile) file = open_fixture ("fineweb-like-zstd.parquet");
  g_autoptr(GError) error = NULL;
  guint g = 11;
  Summary summary = { 0 };

  g_assert_false (dc_parquet_file_read_column (file, 0, &g, 1, summarize_cb, &summary, NULL,
                                               &error));
  g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_NOT_FOUND);
  summary_clear (&summary);
}

static GBytes *
load_fixture_bytes (const char *name)
{
  g_autofree char *path = dc_test_dup_source_path ("tests", "data", "parquet", name, NULL);
  g_autoptr(GError) error = NULL;
  char *contents;
  gsize len;

  g_file_get_contents (path, &contents, &len, &error);
  g_assert_no_error (error);
  return g_bytes_new_take (contents, len);
}

/* Reads everything it can; returns whether it all succeeded. */
static gboolean
try_read_all (GBytes  *bytes,
              GError **error)
{
  g_autoptr(DcByteSource) source = dc_byte_source_new_for_bytes (bytes, "damaged.parquet");
  g_autoptr(DcParquetFile) file = dc_parquet_file_open (source, NULL, error);
  Summary summary = { 0 };
  gboolean ok;
  int column;

  if (file == NULL)
    return FALSE;
  column = dc_parquet_file_find_text_column (file, "text", error);
  if (column < 0)
    return FALSE;
  ok = dc_parquet_file_read_column (file, column, NULL, 0, summarize_cb, &summary, NULL, error);
  summary_clear (&summary);
  return ok;
}

static void
test_truncated (void)
{
  g_autoptr(GBytes) whole = load_fixture_bytes ("fineweb-like-snappy.parquet");
  gsize size = g_bytes_get_size (whole);
  guint failures = 0;

  /* Every cut loses the footer magic: each must fail with CORRUPT. */
  for (gsize cut = 0; cut < size; cut += 4093)
    {
      g_autoptr(GBytes) part = g_bytes_new_from_bytes (whole, 0, cut);
      g_autoptr(GError) error = NULL;

      g_assert_false (try_read_all (part, &error));
      g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT);
      failures++;
    }
  g_assert_cmpuint (failures, >, 600);
}

static void
test_truncated_message (void)
{
  g_autoptr(GBytes) whole = load_fixture_bytes ("fineweb-like-zstd.parquet");
  g_autoptr(GBytes) part = g_bytes_new_from_bytes (whole, 0, g_bytes_get_size (whole) / 2);
  g_autoptr(GError) error = NULL;

  g_assert_false (try_read_all (part, &error));
  g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT);
  g_assert_nonnull (strstr (error->message, "truncated"));
}

static void
test_corrupted (void)
{
  g_autoptr(GBytes) whole = load_fixture_bytes ("fineweb-like-zstd.parquet");
  gsize size;
  const guint8 *data = g_bytes_get_data (whole, &size);
  guint32 meta_len = GUINT32_FROM_LE (*(const guint32 *) (const void *) (data + size - 8));
  GRand *rand = g_rand_new_with_seed (20261130);
  guint failed = 0;

  /* Flip bytes in the footer metadata and in the pages: the reader must
   * either fail cleanly or succeed (a flipped byte inside a text value is
   * still a valid file). */
  for (guint trial = 0; trial < 400; trial++)
    {
      guint8 *copy = g_memdup2 (data, size);
      g_autoptr(GBytes) damaged = NULL;
      g_autoptr(GError) error = NULL;
      gsize at;

      if (trial % 2 == 0)
        at = size - 8 - meta_len + g_rand_int_range (rand, 0, (gint32) meta_len);
      else
        at = 4 + g_rand_int_range (rand, 0, (gint32) (size - 12 - meta_len));
      copy[at] ^= (guint8) g_rand_int_range (rand, 1, 256);
      damaged = g_bytes_new_take (copy, size);
      if (!try_read_all (damaged, &error))
        {
          g_assert_nonnull (error);
          g_assert_true (error->domain == DC_DATA_ERROR);
          failed++;
        }
      else
        {
          g_assert_no_error (error);
        }
    }
  g_test_message ("%u of 400 damaged copies were refused", failed);
  g_assert_cmpuint (failed, >, 50);
  g_rand_free (rand);
}

static void
test_not_parquet (void)
{
  g_autoptr(GBytes) text = g_bytes_new_static ("PAR1 hello, this is not a parquet file PAR1", 43);
  g_autoptr(GError) error = NULL;

  g_assert_false (try_read_all (text, &error));
  g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT);
}

static JsonObject *
load_arrow_expect (void)
{
  g_autofree char *path = dc_test_dup_source_path ("tests", "data", "parquet", "arrow-expect.json",
                                                   NULL);
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;

  json_parser_load_from_file (parser, path, &error);
  g_assert_no_error (error);
  return json_object_ref (json_node_get_object (json_parser_get_root (parser)));
}

/* Files written by arrow-rs (parquet-wasm): pages v1 and v2, PLAIN and
 * dictionary, GZIP/UNCOMPRESSED/ZSTD/SNAPPY, nulls, ~4 KiB pages. */
static void
check_arrow_fixture (gconstpointer data)
{
  const char *name = data;
  g_autoptr(JsonObject) expect = load_arrow_expect ();
  g_autoptr(DcParquetFile) file = open_fixture (name);
  g_autoptr(GError) error = NULL;
  Summary all = { 0 };
  int column;

  column = dc_parquet_file_find_text_column (file, "text", &error);
  g_assert_no_error (error);
  dc_parquet_file_read_column (file, column, NULL, 0, summarize_cb, &all, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (dc_parquet_file_get_meta (file)->n_row_groups, ==, 5);
  g_assert_cmpint (all.rows, ==, json_object_get_int_member (expect, "rows"));
  g_assert_cmpint (all.nulls, ==, json_object_get_int_member (expect, "nulls"));
  g_assert_cmpuint (all.bytes, ==, json_object_get_int_member (expect, "text_bytes"));
  g_assert_cmpstr (all.first, ==, json_object_get_string_member (expect, "first_text"));
  g_assert_cmpstr (all.last, ==, json_object_get_string_member (expect, "last_text"));
  summary_clear (&all);
}

static void
check_refused (gconstpointer data)
{
  const char * const *pair = data;
  g_autoptr(DcParquetFile) file = open_fixture (pair[0]);
  g_autoptr(GError) error = NULL;
  Summary all = { 0 };

  g_assert_false (dc_parquet_file_read_column (file, 0, NULL, 0, summarize_cb, &all, NULL,
                                               &error));
  g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_UNSUPPORTED);
  /* The message names what was found. */
  g_assert_nonnull (strstr (error->message, pair[1]));
  g_test_message ("%s", error->message);
  summary_clear (&all);
}

int
main (int    argc,
      char **argv)
{
  static const char *brotli[] = { "arrow-brotli.parquet", "BROTLI" };
  static const char *delta[] = { "arrow-delta.parquet", "DELTA_LENGTH_BYTE_ARRAY" };

  g_test_init (&argc, &argv, NULL);

  g_test_add_data_func ("/dc/data/parquet/snappy", "fineweb-like-snappy.parquet", check_fixture);
  g_test_add_data_func ("/dc/data/parquet/zstd", "fineweb-like-zstd.parquet", check_fixture);
  g_test_add_func ("/dc/data/parquet/row-groups-and-codecs", test_snappy_row_group_count);
  g_test_add_data_func ("/dc/data/parquet/arrow/v2-gzip-plain", "arrow-v2-gzip-plain.parquet",
                        check_arrow_fixture);
  g_test_add_data_func ("/dc/data/parquet/arrow/v1-uncompressed-dict",
                        "arrow-v1-uncompressed-dict.parquet", check_arrow_fixture);
  g_test_add_data_func ("/dc/data/parquet/arrow/v2-zstd-dict", "arrow-v2-zstd-dict.parquet",
                        check_arrow_fixture);
  g_test_add_data_func ("/dc/data/parquet/arrow/v1-snappy-plain", "arrow-v1-snappy-plain.parquet",
                        check_arrow_fixture);
  g_test_add_data_func ("/dc/data/parquet/arrow/refuses-brotli", brotli, check_refused);
  g_test_add_data_func ("/dc/data/parquet/arrow/refuses-delta", delta, check_refused);
  g_test_add_func ("/dc/data/parquet/missing-column", test_missing_column_lists_columns);
  g_test_add_func ("/dc/data/parquet/bad-row-group", test_bad_row_group);
  g_test_add_func ("/dc/data/parquet/truncated", test_truncated);
  g_test_add_func ("/dc/data/parquet/truncated-message", test_truncated_message);
  g_test_add_func ("/dc/data/parquet/corrupted", test_corrupted);
  g_test_add_func ("/dc/data/parquet/not-parquet", test_not_parquet);

  return g_test_run ();
}
