/* dc-cli-hub-token.h: where the CLI's commands find a Hugging Face token
 * (`data`, `infer`, `tokenize`): --token-file, else HF_TOKEN. Asked only when
 * the Hub answers 401/403, as the app's token dialog is.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "data/dc-hf-client.h"

G_BEGIN_DECLS

/* A token file larger than this is not a token. */
#define DC_CLI_MAX_TOKEN_FILE 4096

/* Sets CLIENT's token function to read TOKEN_FILE (may be NULL: HF_TOKEN).
 * The file name is the process's (one command per process). */
void dc_cli_hub_token_attach (DcHfClient *client,
                              const char *token_file);

G_END_DECLS
