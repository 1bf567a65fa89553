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
#include <sys/resource.h>

#include "data/dc-data-error.h"
#include "data/dc-parquet-file.h"
#include "dc-test-parquet.h"
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

/* Limits on crafted files. Each would make the old reader allocate or hand
 * on gigabytes; the tests bound what they allow so that, on a reader
 * without the limits, they fail quickly instead of eating the machine. */

/* Caps this process's address space at what it maps now plus @extra bytes,
 * so that an allocation sized from a lying count fails (and g_malloc aborts
 * the test's subprocess) instead of succeeding lazily. */
static void
limit_address_space (gsize extra)
{
  g_autofree char *status = NULL;
  const char *line;
  struct rlimit limit;
  guint64 vm_kb;

  g_assert_true (g_file_get_contents ("/proc/self/status", &status, NULL, NULL));
  line = strstr (status, "VmSize:");
  g_assert_nonnull (line);
  vm_kb = g_ascii_strtoull (line + strlen ("VmSize:"), NULL, 10);
  limit.rlim_cur = limit.rlim_max = vm_kb * 1024 + extra;
  g_assert_cmpint (setrlimit (RLIMIT_AS, &limit), ==, 0);
}

/* Counts what the reader hands on and fails as soon as it passes @bound
 * (rows counted at 4 bytes plus their length, as the page cap counts). */
typedef struct
{
  guint64 rows;
  guint64 bytes;
  guint64 bound;
} Sink;

static void
bounded_cb (const char *data,
            gsize       len,
            gpointer    user_data)
{
  Sink *sink = user_data;

  sink->rows++;
  sink->bytes += len;
  g_assert_cmpuint (sink->rows * 4 + sink->bytes, <=, sink->bound);
}

static DcParquetFile *
open_crafted (GBytes *bytes)
{
  g_autoptr(DcByteSource) source = dc_byte_source_new_for_bytes (bytes, "crafted.parquet");
  g_autoptr(GError) error = NULL;
  DcParquetFile *file = dc_parquet_file_open (source, NULL, &error);

  g_assert_no_error (error);
  return file;
}

/* 140 bytes declaring 2^31 - 1 rows (the most a page header can): one
 * dictionary value and one RLE run. Refused from the page's count alone. */
static void
test_limit_rows_2g (void)
{
  g_autoptr(GBytes) bytes = dc_test_parquet_repeated ("x", 1, G_MAXINT32, G_MAXINT32,
                                                      G_MAXINT32);
  g_autoptr(DcParquetFile) file = open_crafted (bytes);
  g_autoptr(GError) error = NULL;
  Sink sink = { 0, 0, DC_PARQUET_MAX_PAGE_DECODED };

  g_test_message ("crafted file: %" G_GSIZE_FORMAT " bytes", g_bytes_get_size (bytes));
  g_assert_cmpuint (g_bytes_get_size (bytes), <=, 160);
  g_assert_false (dc_parquet_file_read_column (file, 0, NULL, 0, bounded_cb, &sink, NULL,
                                               &error));
  g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_UNSUPPORTED);
  g_assert_cmpstr (error->message, ==,
                   "page 1 of row group 0 in crafted.parquet decodes to more than 256 MiB");
  g_assert_cmpuint (sink.rows, ==, 0);
}

/* A 1 KiB dictionary value repeated by RLE runs: 2^31 - 1 times (2 TB of
 * text, refused at once), and 10^6 times (1 GB: refused once the page has
 * handed on 256 MiB). */
static void
test_limit_dictionary_run (void)
{
  g_autofree char *value = g_strnfill (1024, 'a');
  g_autoptr(GBytes) huge = dc_test_parquet_repeated (value, 1, G_MAXINT32, G_MAXINT32,
                                                     G_MAXINT32);
  g_autoptr(GBytes) big = dc_test_parquet_repeated (value, 1, 1000000, 1000000, 1000000);
  g_autoptr(DcParquetFile) file = open_crafted (huge);
  g_autoptr(GError) error = NULL;
  Sink sink = { 0, 0, DC_PARQUET_MAX_PAGE_DECODED };

  g_assert_false (dc_parquet_file_read_column (file, 0, NULL, 0, bounded_cb, &sink, NULL,
                                               &error));
  g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_UNSUPPORTED);
  g_assert_nonnull (strstr (error->message, "decodes to more than 256 MiB"));
  g_clear_error (&error);
  g_clear_pointer (&file, dc_parquet_file_free);

  file = open_crafted (big);
  g_assert_false (dc_parquet_file_read_column (file, 0, NULL, 0, bounded_cb, &sink, NULL,
                                               &error));
  g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_UNSUPPORTED);
  g_assert_cmpstr (error->message, ==,
                   "page 1 of row group 0 in crafted.parquet decodes to more than 256 MiB");
  /* Everything up to the cap was handed on, nothing past it. */
  g_assert_cmpuint (sink.rows, >, 200000);
}

/* Pages that each stay under the page cap but together expand the chunk
 * past DC_PARQUET_MAX_EXPANSION times its bytes. */
static void
test_limit_chunk_expansion (void)
{
  g_autofree char *value = g_strnfill (1024, 'b');
  g_autoptr(GBytes) bytes = dc_test_parquet_repeated (value, 8, 200000, 1600000, 1600000);
  g_autoptr(DcParquetFile) file = open_crafted (bytes);
  g_autoptr(GError) error = NULL;
  Sink sink = { 0, 0, DC_PARQUET_MAX_PAGE_DECODED };

  g_assert_false (dc_parquet_file_read_column (file, 0, NULL, 0, bounded_cb, &sink, NULL,
                                               &error));
  g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_UNSUPPORTED);
  g_assert_nonnull (strstr (error->message, "the column chunk of row group 0 in crafted.parquet "
                                            "decodes to more than"));
  g_test_message ("%s", error->message);
}

/* A chunk may not declare more values than its row group has rows. */
static void
test_limit_chunk_vs_row_group (void)
{
  g_autoptr(GBytes) bytes = dc_test_parquet_repeated ("x", 1, 1000, 1000, 10);
  g_autoptr(DcParquetFile) file = open_crafted (bytes);
  g_autoptr(GError) error = NULL;
  Sink sink = { 0, 0, 1000 * 5 };
  guint64 n_rows = 0;
  gboolean finished = FALSE;

  g_assert_false (dc_parquet_file_read_column (file, 0, NULL, 0, bounded_cb, &sink, NULL,
                                               &error));
  g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT);
  g_assert_nonnull (strstr (error->message, "declares 1000 values in 10 rows"));
  g_assert_cmpuint (sink.rows, ==, 0);
  g_clear_error (&error);

  g_assert_false (dc_parquet_file_read_rows (file, 0, 0, 0, G_MAXUINT64, bounded_cb, &sink,
                                             &n_rows, &finished, NULL, &error));
  g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT);
}

/* The footer: list counts are checked against the bytes left at the
 * smallest size an element can take, before anything is allocated. */
static void
test_limit_footer_counts (void)
{
  g_autoptr(GByteArray) b = g_byte_array_new ();
  g_autoptr(GError) error = NULL;
  g_autoptr(DcParquetMeta) meta = NULL;
  gint16 last = 0;

  /* 10^8 schema elements declared in 8 bytes. */
  tw_i32 (b, &last, 1, 1);
  tw_list (b, &last, 2, TW_STRUCT, 100000000);
  tw_stop (b);
  meta = dc_parquet_meta_parse (b->data, b->len, &error);
  g_assert_null (meta);
  g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT);
  g_assert_nonnull (strstr (error->message, "declares 100000000 elements"));
}

/* A footer as large as the footer cap whose schema list declares one
 * element per byte: each element needs at least 3, so it is refused; the
 * old reader first allocated 40 bytes per declared element (640 MiB). Run
 * with a capped address space so that such an allocation fails fast. */
static void
test_limit_footer_schema_alloc (void)
{
  if (g_test_subprocess ())
    {
      gsize size = DC_PARQUET_MAX_FOOTER;
      g_autofree guint8 *footer = g_malloc0 (size);
      g_autoptr(GByteArray) head = g_byte_array_new ();
      g_autoptr(GError) error = NULL;
      g_autoptr(DcParquetMeta) meta = NULL;
      gint16 last = 0;

      limit_address_space (128u << 20);
      tw_i32 (head, &last, 1, 1);
      tw_list (head, &last, 2, TW_STRUCT, size - 16);
      memcpy (footer, head->data, head->len);
      meta = dc_parquet_meta_parse (footer, size, &error);
      g_assert_null (meta);
      g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT);
      g_assert_nonnull (strstr (error->message, "more than its"));
      return;
    }
  g_test_trap_subprocess (NULL, 60 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
}

/* A schema footer with @n leaves named "c0", "c1", …; a name of @long_name
 * bytes when not 0. No row groups. */
static GBytes *
wide_schema_file (guint n,
                  gsize long_name)
{
  g_autoptr(GByteArray) chunk = g_byte_array_new ();
  GByteArray *b = g_byte_array_new ();
  g_autoptr(GByteArray) footer = g_byte_array_new ();
  gint16 last = 0;
  gint16 el = 0;

  tw_i32 (footer, &last, 1, 1);
  tw_list (footer, &last, 2, TW_STRUCT, n + 1);
  tw_string (footer, &el, 4, "schema");
  tw_i32 (footer, &el, 5, (gint32) n);
  tw_stop (footer);
  for (guint i = 0; i < n; i++)
    {
      g_autofree char *name = long_name > 0 ? g_strnfill (long_name, 'n')
                                            : g_strdup_printf ("c%u", i);

      el = 0;
      tw_i32 (footer, &el, 1, 6);
      tw_i32 (footer, &el, 3, 0);
      tw_string (footer, &el, 4, name);
      tw_i32 (footer, &el, 6, 0);
      tw_stop (footer);
    }
  tw_i64 (footer, &last, 3, 0);
  tw_list (footer, &last, 4, TW_STRUCT, 0);
  tw_stop (footer);
  g_byte_array_append (b, (const guint8 *) "PAR1", 4);
  g_byte_array_append (b, footer->data, footer->len);
  tw_le32 (b, footer->len);
  g_byte_array_append (b, (const guint8 *) "PAR1", 4);
  return g_byte_array_free_to_bytes (b);
}

/* The "no column" error names the first 8 columns, then how many more. */
static void
test_missing_column_many (void)
{
  g_autoptr(GBytes) bytes = wide_schema_file (20, 0);
  g_autoptr(GBytes) long_bytes = wide_schema_file (1, DC_PARQUET_MAX_PATH + 1);
  g_autoptr(DcByteSource) source = dc_byte_source_new_for_bytes (long_bytes, "long.parquet");
  g_autoptr(DcParquetFile) file = open_crafted (bytes);
  g_autoptr(DcParquetFile) none = NULL;
  g_autoptr(GError) error = NULL;

  g_assert_cmpuint (dc_parquet_file_get_meta (file)->n_columns, ==, 20);
  g_assert_cmpint (dc_parquet_file_find_text_column (file, "text", &error), ==, -1);
  g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_NO_TEXT_COLUMN);
  g_assert_cmpstr (error->message, ==,
                   "crafted.parquet has no column “text”; its columns are: "
                   "c0, c1, c2, c3, c4, c5, c6, c7 and 12 more");
  g_clear_error (&error);

  /* Column paths are capped: each leaf copies its ancestors' names. */
  none = dc_parquet_file_open (source, NULL, &error);
  g_assert_null (none);
  g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_UNSUPPORTED);
  g_assert_nonnull (strstr (error->message, "longer than 4096 bytes"));
}

/* Reading a row group a slice at a time gives the same rows as reading it
 * whole, and each slice stops just past its byte budget. */
static void
check_slices (gconstpointer data)
{
  const char *name = data;
  g_autoptr(DcParquetFile) file = open_fixture (name);
  const DcParquetMeta *meta = dc_parquet_file_get_meta (file);
  g_autoptr(GError) error = NULL;
  int column = dc_parquet_file_find_text_column (file, "text", &error);

  g_assert_no_error (error);
  for (guint g = 0; g < meta->n_row_groups; g++)
    {
      Summary whole = { 0 };
      Summary sliced = { 0 };
      guint64 first = 0;
      gboolean finished = FALSE;
      guint slices = 0;

      dc_parquet_file_read_column (file, column, &g, 1, summarize_cb, &whole, NULL, &error);
      g_assert_no_error (error);
      while (!finished)
        {
          Summary slice = { 0 };
          guint64 n_rows = 0;

          g_assert_true (dc_parquet_file_read_rows (file, column, g, first, 4096, summarize_cb,
                                                    &slice, &n_rows, &finished, NULL, &error));
          g_assert_no_error (error);
          g_assert_cmpint (slice.rows, ==, (gint64) n_rows);
          /* Past 4096 bytes by at most its last row. */
          if (!finished)
            g_assert_cmpuint (slice.bytes, >=, 4096);
          g_assert_cmpuint (slice.bytes - (slice.last != NULL ? strlen (slice.last) : 0), <, 4096);
          sliced.rows += slice.rows;
          sliced.nulls += slice.nulls;
          sliced.bytes += slice.bytes;
          if (sliced.first == NULL && slice.first != NULL)
            sliced.first = g_strdup (slice.first);
          if (slice.last != NULL)
            {
              g_free (sliced.last);
              sliced.last = g_strdup (slice.last);
            }
          summary_clear (&slice);
          first += n_rows;
          slices++;
          g_assert_cmpuint (slices, <, 10000);
        }
      g_assert_cmpint (sliced.rows, ==, whole.rows);
      g_assert_cmpint (sliced.nulls, ==, whole.nulls);
      g_assert_cmpuint (sliced.bytes, ==, whole.bytes);
      g_assert_cmpstr (sliced.first, ==, whole.first);
      g_assert_cmpstr (sliced.last, ==, whole.last);
      g_assert_cmpuint (slices, >, 1);
      summary_clear (&whole);
      summary_clear (&sliced);
    }
}

/* `daisychain-cli bench data --json FILE`: one line with the documented
 * fields; the comparison is either there or says why not. */
static void
test_cli_bench (void)
{
  g_autofree char *cli = dc_test_dup_build_path ("src", "cli", "daisychain-cli", NULL);
  g_autofree char *file = dc_test_dup_source_path ("tests", "data", "parquet",
                                                   "arrow-v1-snappy-plain.parquet", NULL);
  const char *argv[] = { cli, "bench", "data", "--json", file, NULL };
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  JsonObject *result;
  int status = -1;

  g_assert_true (dc_test_spawn (argv, &out, &err, &status, 60000));
  g_assert_cmpint (status, ==, 0);
  json_parser_load_from_data (parser, out, -1, &error);
  g_assert_no_error (error);
  result = json_node_get_object (json_parser_get_root (parser));
  g_assert_cmpint (json_object_get_int_member (result, "rows"), ==, 3001);
  g_assert_cmpint (json_object_get_int_member (result, "bytes"), ==, 232607);
  g_assert_cmpstr (json_object_get_string_member (result, "codec"), ==, "SNAPPY");
  g_assert_cmpfloat (json_object_get_double_member (result, "mb_per_s"), >, 0.0);
  if (json_object_has_member (result, "skipped"))
    {
      g_assert_true (JSON_NODE_HOLDS_NULL (json_object_get_member (result, "ratio")));
      g_test_message ("comparison skipped: %s",
                      json_object_get_string_member (result, "skipped"));
    }
  else
    {
      g_assert_cmpfloat (json_object_get_double_member (result, "parquet_wasm_mb_per_s"), >, 0.0);
      g_test_message ("ratio to parquet-wasm: %.2f",
                      json_object_get_double_member (result, "ratio"));
    }
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
  g_test_add_func ("/dc/data/cli/bench", test_cli_bench);
  g_test_add_func ("/dc/data/parquet/limits/rows-2g", test_limit_rows_2g);
  g_test_add_func ("/dc/data/parquet/limits/dictionary-run", test_limit_dictionary_run);
  g_test_add_func ("/dc/data/parquet/limits/chunk-expansion", test_limit_chunk_expansion);
  g_test_add_func ("/dc/data/parquet/limits/chunk-vs-row-group", test_limit_chunk_vs_row_group);
  g_test_add_func ("/dc/data/parquet/limits/footer-counts", test_limit_footer_counts);
  g_test_add_func ("/dc/data/parquet/limits/footer-schema-alloc", test_limit_footer_schema_alloc);
  g_test_add_func ("/dc/data/parquet/missing-column-many", test_missing_column_many);
  g_test_add_data_func ("/dc/data/parquet/slices/snappy-plain", "arrow-v1-snappy-plain.parquet",
                        check_slices);
  g_test_add_data_func ("/dc/data/parquet/slices/zstd-dict-nulls", "arrow-v2-zstd-dict.parquet",
                        check_slices);
  g_test_add_data_func ("/dc/data/parquet/slices/pyarrow", "fineweb-like-snappy.parquet",
                        check_slices);

  return g_test_run ();
}
