/* dc-hf-url.h: every Hugging Face Hub URL, built in one place.
 *
 * The base URL defaults to the Hub and follows the ecosystem's HF_ENDPOINT
 * variable, so tests (and mirrors) point everything at another server.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define DC_HF_DEFAULT_ENDPOINT "https://huggingface.co"
#define DC_HF_DEFAULT_REVISION "main"

char *dc_hf_url_dup_default_base (void);
char *dc_hf_url_model_file       (const char *base,
                                  const char *repo,
                                  const char *revision,
                                  const char *path);
char *dc_hf_url_dataset_file     (const char *base,
                                  const char *repo,
                                  const char *revision,
                                  const char *path);
char *dc_hf_url_model_info       (const char *base,
                                  const char *repo);
char *dc_hf_url_dataset_tree     (const char *base,
                                  const char *repo,
                                  const char *revision,
                                  const char *path);
char *dc_hf_url_describe         (const char *url);

gboolean dc_hf_url_is_loopback      (const char  *url);
gboolean dc_hf_url_may_carry_token  (const char  *url);
gboolean dc_hf_url_check_redirect   (const char  *from,
                                     const char  *to,
                                     GError     **error);

G_END_DECLS
