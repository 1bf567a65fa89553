/* dc-hf-export.h: a trained model as a Hugging Face folder that
 * transformers' GPT2LMHeadModel.from_pretrained () loads.
 *
 * Files: config.json, model.safetensors (f32, Hugging Face names, the tied
 * lm_head left out as save_pretrained does), tokenizer.json (byte-level:
 * token id = byte value), tokenizer_config.json, generation_config.json.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "dc-checkpoint.h"
#include "dc-gpt-model.h"

G_BEGIN_DECLS

GBytes   *dc_safetensors_write   (const DcGptModel  *model,
                                  GError           **error);
char     *dc_hf_tokenizer_json   (void);
gboolean  dc_hf_export           (const DcGptModel  *model,
                                  const char        *dir,
                                  GError           **error);
gboolean  dc_hf_export_full      (const DcGptModel  *model,
                                  const char        *dir,
                                  GCancellable      *cancellable,
                                  GError           **error);
gboolean  dc_hf_export_progress  (const DcGptModel      *model,
                                  const char            *dir,
                                  GCancellable          *cancellable,
                                  DcCheckpointProgress   progress,
                                  gpointer               user_data,
                                  GError               **error);

G_END_DECLS
