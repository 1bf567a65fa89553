/* PLACEHOLDER: owned by FETCH (hf-contract.md section 3); the lead keeps FETCH's version.
 *
 * dc-model-repo.h: a model from the Hub or a local folder; implements DcTensorSource.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "data/dc-hf-client.h"
#include "model/dc-bpe-tokenizer.h"
#include "model/dc-hf-config.h"
#include "model/dc-tensor-source.h"

G_BEGIN_DECLS

#define DC_TYPE_MODEL_REPO (dc_model_repo_get_type ())
G_DECLARE_FINAL_TYPE (DcModelRepo, dc_model_repo, DC, MODEL_REPO, GObject)   /* implements DcTensorSource */

/* SPEC: a repo id "owner/name" (optionally "owner/name@revision") or a path to a local folder. */
void          dc_model_repo_open_async   (DcHfClient *client, const char *spec,
                                          GCancellable *cancellable,
                                          GAsyncReadyCallback callback, gpointer user_data);
DcModelRepo  *dc_model_repo_open_finish  (GAsyncResult *result, GError **error);
DcModelRepo  *dc_model_repo_open         (DcHfClient *client, const char *spec,
                                          GCancellable *cancellable, GError **error);

const char       *dc_model_repo_get_spec       (DcModelRepo *self);
gboolean          dc_model_repo_is_local       (DcModelRepo *self);
const DcHfConfig *dc_model_repo_get_config     (DcModelRepo *self);
DcBpeTokenizer   *dc_model_repo_get_tokenizer  (DcModelRepo *self);
const char       *dc_model_repo_get_dtype      (DcModelRepo *self);      /* of the tensors, e.g. "BF16" */
guint64           dc_model_repo_get_weight_bytes (DcModelRepo *self);    /* the download size */
guint64           dc_model_repo_get_bytes_downloaded (DcModelRepo *self);
/* What the dialog shows: "LlamaForCausalLM, 30 layers, 135 M parameters, ..." */
char             *dc_model_repo_dup_summary    (DcModelRepo *self);

G_END_DECLS
