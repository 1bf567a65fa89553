/* dc-cli-bench-data.c: `daisychain-cli bench data`, text decoding speed.
 *
 * Decodes the `text` column of local parquet files (all row groups, from a
 * mapped file, so no I/O is timed) and reports MB/s of text, next to
 * parquet-wasm (Rust arrow/parquet in WebAssembly) under Node reading the
 * same column of the same file in the same run. The comparison is skipped,
 * saying why, when Node or the npm package is missing; install it with
 * `npm ci --prefix tools/bench-data`.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-cli"

#include "config.h"

/* PRId64 and PRIu64 in translatable strings: xgettext knows them, not
 * GLib's G_GINT64_FORMAT (the msgid would end at the "%"). */
#include <inttypes.h>
#include <glib/gi18n.h>

#include "dc-cli.h"
#include "data/dc-parquet-file.h"

/* Time each reader for at least this long (and at least MIN_ITERATIONS). */
#define MIN_SECONDS 1.0
#define MIN_ITERATIONS 3

typedef struct
{
  gint64  rows;
  guint64 bytes;
} Count;

static void
count_cb (const char *data,
          gsize       len,
          gpointer    user_data)
{
  Count *count = user_data;

  count->rows++;
  count->bytes += len;
}

static char *
dup_root_path (const char *first,
               ...)
{
  const char *root = g_getenv ("DC_SOURCE_ROOT");
  g_autoptr(GPtrArray) parts = g_ptr_array_new ();
  va_list args;

  g_ptr_array_add (parts, (gpointer) (root != NULL ? root : "."));
  va_start (args, first);
  for (const char *p = first; p != NULL; p = va_arg (args, const char *))
    g_ptr_array_add (parts, (gpointer) p);
  va_end (args);
  g_ptr_array_add (parts, NULL);
  return g_build_filenamev ((char **) parts->pdata);
}

/* Runs tools/bench-data/bench.mjs; returns its JSON object or NULL with a reason. */
static JsonObject *
run_parquet_wasm (const char  *path,
                  guint        iterations,
                  char       **reason)
{
  g_autofree char *script = dup_root_path ("tools", "bench-data", "bench.mjs", NULL);
  g_autofree char *module = dup_root_path ("tools", "bench-data", "node_modules", "parquet-wasm",
                                           NULL);
  g_autofree char *node = g_find_program_in_path ("node");
  g_autofree char *iter_text = g_strdup_printf ("%u", iterations);
  g_autoptr(GSubprocess) process = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  JsonNode *root;

  if (node == NULL)
    {
      *reason = g_strdup (_("node is not installed"));
      return NULL;
    }
  if (!g_file_test (script, G_FILE_TEST_EXISTS) || !g_file_test (module, G_FILE_TEST_IS_DIR))
    {
      *reason = g_strdup (_("parquet-wasm is not installed: run "
                            "“npm ci --prefix tools/bench-data” in the source tree"));
      return NULL;
    }
  process = g_subprocess_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_PIPE,
                              &error, node, script, path, iter_text, NULL);
  if (process == NULL
      || !g_subprocess_communicate_utf8 (process, NULL, NULL, &out, &err, &error))
    {
      *reason = g_strdup_printf (_("node failed: %s"), error->message);
      return NULL;
    }
  if (!g_subprocess_get_successful (process)
      || !json_parser_load_from_data (parser, out, -1, NULL)
      || !JSON_NODE_HOLDS_OBJECT (root = json_parser_get_root (parser)))
    {
      *reason = g_strdup_printf (_("parquet-wasm failed: %s"), err != NULL ? g_strstrip (err) : "");
      return NULL;
    }
  return json_object_ref (json_node_get_object (root));
}

static gboolean
bench_file (DcCliOptions  *options,
            const char    *path,
            GError       **error)
{
  g_autoptr(DcByteSource) source = dc_byte_source_new_for_path (path, error);
  g_autoptr(DcParquetFile) file = NULL;
  g_autoptr(JsonObject) wasm = NULL;
  g_autofree char *reason = NULL;
  const DcParquetMeta *meta;
  Count count = { 0 };
  guint iterations = 0;
  gint64 start;
  double seconds;
  double mb_per_s;
  int column;

  if (source == NULL)
    return FALSE;
  file = dc_parquet_file_open (source, NULL, error);
  if (file == NULL)
    return FALSE;
  meta = dc_parquet_file_get_meta (file);
  column = dc_parquet_file_find_text_column (file, "text", error);
  if (column < 0)
    return FALSE;

  /* Warm-up pass: page cache, allocator. */
  if (!dc_parquet_file_read_column (file, column, NULL, 0, count_cb, &count, NULL, error))
    return FALSE;

  start = g_get_monotonic_time ();
  do
    {
      count = (Count) { 0 };
      if (!dc_parquet_file_read_column (file, column, NULL, 0, count_cb, &count, NULL, error))
        return FALSE;
      iterations++;
      seconds = (double) (g_get_monotonic_time () - start) / G_USEC_PER_SEC;
    }
  while (seconds < MIN_SECONDS || iterations < MIN_ITERATIONS);
  mb_per_s = (double) count.bytes * iterations / seconds / 1e6;

  wasm = run_parquet_wasm (path, MAX (iterations, 5), &reason);
  if (wasm != NULL && (guint64) json_object_get_int_member_with_default (wasm, "bytes", -1)
                      != count.bytes)
    {
      g_clear_pointer (&wasm, json_object_unref);
      reason = g_strdup (_("parquet-wasm decoded different text (byte counts differ)"));
    }

  if (options->json)
    {
      g_autoptr(JsonBuilder) builder = json_builder_new ();

      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "benchmark");
      json_builder_add_string_value (builder, "data");
      json_builder_set_member_name (builder, "file");
      json_builder_add_string_value (builder, path);
      json_builder_set_member_name (builder, "codec");
      json_builder_add_string_value (builder, meta->n_row_groups > 0
                                     ? dc_parquet_codec_to_string (meta->row_groups[0].chunks[column].codec)
                                     : "none");
      json_builder_set_member_name (builder, "rows");
      json_builder_add_int_value (builder, count.rows);
      json_builder_set_member_name (builder, "bytes");
      json_builder_add_int_value (builder, (gint64) count.bytes);
      json_builder_set_member_name (builder, "iterations");
      json_builder_add_int_value (builder, iterations);
      json_builder_set_member_name (builder, "seconds");
      json_builder_add_double_value (builder, seconds);
      json_builder_set_member_name (builder, "mb_per_s");
      json_builder_add_double_value (builder, mb_per_s);
      json_builder_set_member_name (builder, "parquet_wasm_mb_per_s");
      if (wasm != NULL)
        json_builder_add_double_value (builder, json_object_get_double_member (wasm, "mb_per_s"));
      else
        json_builder_add_null_value (builder);
      json_builder_set_member_name (builder, "parquet_wasm_version");
      if (wasm != NULL)
        json_builder_add_string_value (builder, json_object_get_string_member (wasm, "version"));
      else
        json_builder_add_null_value (builder);
      json_builder_set_member_name (builder, "ratio");
      if (wasm != NULL)
        json_builder_add_double_value (builder,
                                       mb_per_s / json_object_get_double_member (wasm, "mb_per_s"));
      else
        json_builder_add_null_value (builder);
      if (reason != NULL)
        {
          json_builder_set_member_name (builder, "skipped");
          json_builder_add_string_value (builder, reason);
        }
      json_builder_end_object (builder);
      dc_cli_print_json (builder);
    }
  else
    {
      g_print (_("%s: %" PRId64 " rows, %.1f MB of text: %.1f MB/s"), path, count.rows,
               count.bytes / 1e6, mb_per_s);
      if (wasm != NULL)
        g_print (_("; parquet-wasm %s: %.1f MB/s (ratio %.2f×)\n"),
                 json_object_get_string_member (wasm, "version"),
                 json_object_get_double_member (wasm, "mb_per_s"),
                 mb_per_s / json_object_get_double_member (wasm, "mb_per_s"));
      else
        g_print (_("; comparison skipped: %s\n"), reason);
    }
  return TRUE;
}

int
dc_cli_bench_data_run (const DcCliCommand  *command,
                       DcCliOptions        *options,
                       int                  argc,
                       char               **argv)
{
  g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func (g_free);

  if (!dc_cli_parse_options (command, options, NULL, &argc, &argv))
    return DC_CLI_EXIT_USAGE;

  for (int i = 1; i < argc; i++)
    g_ptr_array_add (files, g_strdup (argv[i]));
  if (files->len == 0)
    {
      g_ptr_array_add (files, dup_root_path ("tests", "data", "parquet",
                                             "fineweb-like-snappy.parquet", NULL));
      g_ptr_array_add (files, dup_root_path ("tests", "data", "parquet",
                                             "fineweb-like-zstd.parquet", NULL));
    }

  for (guint i = 0; i < files->len; i++)
    {
      g_autoptr(GError) error = NULL;

      if (!bench_file (options, g_ptr_array_index (files, i), &error))
        return dc_cli_fail (options, error);
    }
  return DC_CLI_EXIT_OK;
}
