/* dc-cli-hub-token.c: the CLI's Hugging Face token, from a file or HF_TOKEN.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-cli"

#include "config.h"

#include <glib/gi18n.h>

#include "dc-cli-hub-token.h"
#include "dc-regular-file.h"

/* One token file per process. The callback's data is NULL, so clients
 * made from the command's client (the training worker's) can share the
 * callback (dc_hf_client_share_token shares only data that needs no freeing). */
static char *cli_token_file;

static char *
token_cb (const char *description,
          gpointer    user_data)
{
  const char *token_file = cli_token_file;
  const char *env = g_getenv ("HF_TOKEN");
  g_autoptr(GError) error = NULL;
  g_autofree char *contents = NULL;
  gsize len;

  if (token_file != NULL)
    {
      /* A FIFO here would block the CLI for ever: regular files only. */
      if (!dc_regular_file_get_contents (token_file, DC_CLI_MAX_TOKEN_FILE, &contents, &len,
                                         &error))
        {
          g_printerr (_("daisychain-cli: cannot read the token file “%s”: %s\n"), token_file,
                      error->message);
          return NULL;
        }
      return g_strstrip (g_steal_pointer (&contents));
    }
  return env != NULL && *env != '\0' ? g_strdup (env) : NULL;
}

void
dc_cli_hub_token_attach (DcHfClient *client,
                         const char *token_file)
{
  if (token_file != NULL && g_strcmp0 (token_file, cli_token_file) != 0)
    {
      g_free (cli_token_file);
      cli_token_file = g_strdup (token_file);
    }
  dc_hf_client_set_token_func (client, token_cb, NULL, NULL);
}
