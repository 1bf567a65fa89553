/* dc-cli-tokenize.c: `daisychain-cli tokenize`, a model's tokenizer.json
 * applied to a text. A local folder is read in place; a Hub repo is opened
 * as `infer` opens it (DcModelRepo: config, tokenizer and headers, no
 * weights), so both commands accept and refuse the same models.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-cli"

#include "config.h"

#include <string.h>
#include <glib/gi18n.h>
#include <gio/gunixinputstream.h>

#include "dc-cli.h"
#include "dc-cli-hub-token.h"
#include "infer/dc-model-repo.h"
#include "model/dc-bpe-tokenizer.h"
#include "model/dc-model-error.h"

/* Text on standard input is a prompt, not a corpus: 16 MiB is far past any context. */
#define STDIN_MAX_BYTES (16u * 1024u * 1024u)

static char *
read_stdin (gsize   *length,
            GError **error)
{
  g_autoptr(GInputStream) in = g_unix_input_stream_new (0, FALSE);
  g_autoptr(GByteArray) text = g_byte_array_new ();
  guint8 buffer[65536];

  for (;;)
    {
      gssize n = g_input_stream_read (in, buffer, sizeof buffer, NULL, error);

      if (n < 0)
        return NULL;
      if (n == 0)
        break;
      if (text->len + (gsize) n > STDIN_MAX_BYTES)
        {
          g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE,
                       "text on standard input is larger than %u MiB",
                       STDIN_MAX_BYTES / (1024 * 1024));
          return NULL;
        }
      g_byte_array_append (text, buffer, (guint) n);
    }
  *length = text->len;
  g_byte_array_append (text, (const guint8 *) "", 1);
  return (char *) g_byte_array_free (g_steal_pointer (&text), FALSE);
}

int
dc_cli_tokenize_run (const DcCliCommand  *command,
                     DcCliOptions        *options,
                     int                  argc,
                     char               **argv)
{
  g_autofree char *model = NULL, *text = NULL, *path = NULL, *token_file = NULL;
  gboolean no_special = FALSE;
  const GOptionEntry entries[] = {
    { "model", 0, 0, G_OPTION_ARG_FILENAME, &model,
      N_("A Hugging Face repo id (owner/name[@revision]) or a local folder holding "
         "tokenizer.json"), "REPO|DIR" },
    { "token-file", 0, 0, G_OPTION_ARG_FILENAME, &token_file,
      N_("Read the Hugging Face token from FILE (else HF_TOKEN), sent only on a 401/403"),
      "FILE" },
    { "text", 0, 0, G_OPTION_ARG_STRING, &text,
      N_("The text (read from standard input when not given)"), "T" },
    { "no-special-tokens", 0, 0, G_OPTION_ARG_NONE, &no_special,
      N_("Do not add the tokens the tokenizer's template adds (BOS and such)"), NULL },
    { NULL }
  };
  g_autoptr(GError) error = NULL;
  g_autoptr(DcBpeTokenizer) own_tokenizer = NULL;
  DcBpeTokenizer *tokenizer;
  g_autoptr(DcHfClient) client = NULL;
  g_autoptr(DcModelRepo) repo = NULL;
  g_autoptr(GArray) ids = NULL;
  gsize length = 0;

  if (!dc_cli_parse_options (command, options, entries, &argc, &argv))
    return DC_CLI_EXIT_USAGE;
  if (argc > 1)
    return dc_cli_usage_error (command, _("unexpected argument “%s”"), argv[1]);
  if (model == NULL)
    return dc_cli_usage_error (command, _("--model is required"));
  if (g_file_test (model, G_FILE_TEST_IS_DIR))
    {
      /* A folder may hold a tokenizer alone: no config needed. */
      path = g_build_filename (model, "tokenizer.json", NULL);
      own_tokenizer = dc_bpe_tokenizer_new_from_file (path, &error);
      if (own_tokenizer == NULL)
        return dc_cli_fail (options, error);
      tokenizer = own_tokenizer;
    }
  else
    {
      client = dc_hf_client_new (NULL);
      dc_cli_hub_token_attach (client, token_file);
      repo = dc_model_repo_open (client, model, NULL, &error);
      if (repo == NULL)
        return dc_cli_fail (options, error);
      tokenizer = dc_model_repo_get_tokenizer (repo);   /* the repo's */
    }
  if (text != NULL)
    length = strlen (text);
  else if ((text = read_stdin (&length, &error)) == NULL)
    return dc_cli_fail (options, error);
  ids = dc_bpe_tokenizer_encode (tokenizer, text, (gssize) length, !no_special, &error);
  if (ids == NULL)
    return dc_cli_fail (options, error);

  if (options->json)
    {
      g_autoptr(JsonBuilder) builder = json_builder_new ();

      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "ids");
      json_builder_begin_array (builder);
      for (guint i = 0; i < ids->len; i++)
        json_builder_add_int_value (builder, g_array_index (ids, guint32, i));
      json_builder_end_array (builder);
      json_builder_set_member_name (builder, "count");
      json_builder_add_int_value (builder, ids->len);
      json_builder_end_object (builder);
      dc_cli_print_json (builder);
    }
  else
    {
      g_autoptr(GString) line = g_string_new (NULL);

      for (guint i = 0; i < ids->len; i++)
        g_string_append_printf (line, "%s%u", i > 0 ? "," : "", g_array_index (ids, guint32, i));
      g_print ("%s\n", line->str);
    }
  return DC_CLI_EXIT_OK;
}
