/* dc-cli-data.c: `daisychain-cli data read` and `daisychain-cli data ls`.
 *
 * A token is read only when the Hub refuses a request for want of one:
 * from $HF_TOKEN, or from the file given with --token-file (no prompt, so
 * scripts never hang). It is never printed.
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
#include "dc-cli-hub-token.h"
#include "dc-regular-file.h"
#include "data/dc-data-error.h"
#include "data/dc-dataset.h"
#include "data/dc-hf-client.h"
#include "data/dc-parquet-file.h"

static DcHfClient *
new_client (const char *token_file)
{
  DcHfClient *client = dc_hf_client_new (NULL);

  dc_cli_hub_token_attach (client, token_file);
  return client;
}

typedef struct
{
  gint64   rows;
  guint64  bytes;
  GString *first;
  GString *last;
} Summary;

static void
summarize_cb (const char *data,
              gsize       len,
              gpointer    user_data)
{
  Summary *summary = user_data;

  summary->rows++;
  if (data == NULL)
    return;
  summary->bytes += len;
  if (summary->first == NULL)
    summary->first = g_string_new_len (data, (gssize) len);
  if (summary->last == NULL)
    summary->last = g_string_sized_new (len);
  g_string_truncate (summary->last, 0);
  g_string_append_len (summary->last, data, (gssize) len);
}

static void
add_nullable_string (JsonBuilder *builder,
                     const char  *name,
                     GString     *value)
{
  json_builder_set_member_name (builder, name);
  if (value != NULL)
    json_builder_add_string_value (builder, value->str);
  else
    json_builder_add_null_value (builder);
}

int
dc_cli_data_read_run (const DcCliCommand  *command,
                      DcCliOptions        *options,
                      int                  argc,
                      char               **argv)
{
  g_autofree char *column_name = NULL;
  g_autofree char *token_file = NULL;
  int row_group = -1;
  const GOptionEntry entries[] = {
    { "column", 0, 0, G_OPTION_ARG_STRING, &column_name,
      N_("The string column to read (default: text)"), N_("NAME") },
    { "row-group", 0, 0, G_OPTION_ARG_INT, &row_group,
      N_("Read only this row group (from 0)"), N_("N") },
    { "token-file", 0, 0, G_OPTION_ARG_FILENAME, &token_file,
      N_("Read a Hugging Face token from FILE if the server asks for one"), N_("FILE") },
    { NULL }
  };
  g_autoptr(DcHfClient) client = NULL;
  g_autoptr(DcByteSource) source = NULL;
  g_autoptr(DcParquetFile) file = NULL;
  g_autoptr(GError) error = NULL;
  const DcParquetMeta *meta;
  Summary summary = { 0 };
  guint group;
  int column;
  gboolean ok;

  if (!dc_cli_parse_options (command, options, entries, &argc, &argv))
    return DC_CLI_EXIT_USAGE;
  if (argc != 2)
    return dc_cli_usage_error (command, _("expected one FILE or URL"));

  if (g_str_has_prefix (argv[1], "http://") || g_str_has_prefix (argv[1], "https://"))
    {
      client = new_client (token_file);
      source = dc_hf_client_open_source (client, argv[1]);
    }
  else
    {
      source = dc_byte_source_new_for_path (argv[1], &error);
      if (source == NULL)
        return dc_cli_fail (options, error);
    }

  file = dc_parquet_file_open (source, NULL, &error);
  if (file == NULL)
    return dc_cli_fail (options, error);
  meta = dc_parquet_file_get_meta (file);
  column = dc_parquet_file_find_text_column (file, column_name != NULL ? column_name : "text",
                                             &error);
  if (column < 0)
    return dc_cli_fail (options, error);
  if (row_group >= 0 && (guint) row_group >= meta->n_row_groups)
    {
      g_set_error (&error, DC_DATA_ERROR, DC_DATA_ERROR_NOT_FOUND,
                   _("%s has %u row groups; there is no row group %d"), argv[1],
                   meta->n_row_groups, row_group);
      return dc_cli_fail (options, error);
    }

  group = (guint) MAX (row_group, 0);
  ok = dc_parquet_file_read_column (file, column, row_group >= 0 ? &group : NULL,
                                    row_group >= 0 ? 1 : 0, summarize_cb, &summary, NULL,
                                    &error);
  if (!ok)
    {
      if (summary.first != NULL)
        g_string_free (summary.first, TRUE);
      if (summary.last != NULL)
        g_string_free (summary.last, TRUE);
      return dc_cli_fail (options, error);
    }

  if (options->json)
    {
      g_autoptr(JsonBuilder) builder = json_builder_new ();

      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "rows");
      json_builder_add_int_value (builder, summary.rows);
      json_builder_set_member_name (builder, "bytes");
      json_builder_add_int_value (builder, (gint64) summary.bytes);
      add_nullable_string (builder, "first", summary.first);
      add_nullable_string (builder, "last", summary.last);
      json_builder_set_member_name (builder, "row_groups");
      json_builder_add_int_value (builder, meta->n_row_groups);
      json_builder_set_member_name (builder, "file_size");
      json_builder_add_int_value (builder, (gint64) dc_parquet_file_get_size (file));
      json_builder_set_member_name (builder, "transferred");
      json_builder_add_int_value (builder, (gint64) source->bytes_read);
      json_builder_end_object (builder);
      dc_cli_print_json (builder);
    }
  else
    {
      g_print (_("rows: %" PRId64 "\n"), summary.rows);
      g_print (_("bytes: %" PRIu64 "\n"), summary.bytes);
      g_print (_("first: %s\n"), summary.first != NULL ? summary.first->str : "(none)");
      g_print (_("last: %s\n"), summary.last != NULL ? summary.last->str : "(none)");
    }

  if (summary.first != NULL)
    g_string_free (summary.first, TRUE);
  if (summary.last != NULL)
    g_string_free (summary.last, TRUE);
  return DC_CLI_EXIT_OK;
}

int
dc_cli_data_ls_run (const DcCliCommand  *command,
                    DcCliOptions        *options,
                    int                  argc,
                    char               **argv)
{
  g_autofree char *token_file = NULL;
  const GOptionEntry entries[] = {
    { "token-file", 0, 0, G_OPTION_ARG_FILENAME, &token_file,
      N_("Read a Hugging Face token from FILE if the server asks for one"), N_("FILE") },
    { NULL }
  };
  g_autoptr(DcHfClient) client = NULL;
  g_autoptr(DcDatasetSpec) spec = NULL;
  g_autoptr(GPtrArray) files = NULL;
  g_autoptr(GError) error = NULL;

  if (!dc_cli_parse_options (command, options, entries, &argc, &argv))
    return DC_CLI_EXIT_USAGE;
  if (argc > 2)
    return dc_cli_usage_error (command, _("expected one DATASET"));

  spec = dc_dataset_spec_parse (argc == 2 ? argv[1] : DC_DATASET_DEFAULT, &error);
  if (spec == NULL)
    return dc_cli_fail (options, error);
  client = new_client (token_file);
  files = dc_dataset_list_files (client, spec, NULL, &error);
  if (files == NULL)
    return dc_cli_fail (options, error);

  if (options->json)
    {
      g_autoptr(JsonBuilder) builder = json_builder_new ();

      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "dataset");
      json_builder_add_string_value (builder, spec->repo);
      json_builder_set_member_name (builder, "revision");
      json_builder_add_string_value (builder, spec->revision);
      json_builder_set_member_name (builder, "folder");
      json_builder_add_string_value (builder, spec->folder);
      json_builder_set_member_name (builder, "files");
      json_builder_begin_array (builder);
      for (guint i = 0; i < files->len; i++)
        {
          DcDatasetFile *file = g_ptr_array_index (files, i);

          json_builder_begin_object (builder);
          json_builder_set_member_name (builder, "path");
          json_builder_add_string_value (builder, file->path);
          json_builder_set_member_name (builder, "size");
          json_builder_add_int_value (builder, (gint64) file->size);
          json_builder_end_object (builder);
        }
      json_builder_end_array (builder);
      json_builder_end_object (builder);
      dc_cli_print_json (builder);
    }
  else
    {
      for (guint i = 0; i < files->len; i++)
        {
          DcDatasetFile *file = g_ptr_array_index (files, i);

          g_print ("%12" G_GUINT64_FORMAT "  %s\n", file->size, file->path);
        }
      if (files->len == 0)
        g_print (_("no parquet files\n"));
    }
  return DC_CLI_EXIT_OK;
}
