/* PLACEHOLDER: owned by SESSION */
/* dc-infer-session.h: one loaded model and its generation (hf-contract §4).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "dc-context.h"
#include "infer/dc-model-repo.h"

G_BEGIN_DECLS

#define DC_TYPE_INFER_SESSION (dc_infer_session_get_type ())
G_DECLARE_FINAL_TYPE (DcInferSession, dc_infer_session, DC, INFER_SESSION, GObject)

typedef enum { DC_INFER_OUTPUT_FREE, DC_INFER_OUTPUT_JSON } DcInferOutput;

typedef struct
{
  guint          n_tokens;      /* 60 */
  guint          context;       /* 64, up to the model's max positions */
  guint          temperature;   /* hundredths: 0 = greedy; 100 = 1.0 */
  guint64        seed;          /* 1234; the draw at position p depends on (seed, p) only */
  DcInferOutput  output;        /* FREE */
} DcInferSettings;

void            dc_infer_settings_init_default    (DcInferSettings        *settings);
gboolean        dc_infer_settings_validate        (const DcInferSettings  *settings,
                                                   guint                   max_positions,
                                                   GError                **error);

DcInferSession *dc_infer_session_new              (DcContext              *context,
                                                   DcModelRepo            *repo);
DcModelRepo    *dc_infer_session_get_repo         (DcInferSession         *self);
void            dc_infer_session_load_async       (DcInferSession         *self,
                                                   GCancellable           *cancellable,
                                                   GAsyncReadyCallback     callback,
                                                   gpointer                user_data);
gboolean        dc_infer_session_load_finish      (DcInferSession         *self,
                                                   GAsyncResult           *result,
                                                   GError                **error);
gboolean        dc_infer_session_is_loaded        (DcInferSession         *self);
guint           dc_infer_session_submit           (DcInferSession         *self,
                                                   const char             *prompt,
                                                   const DcInferSettings  *settings);
guint           dc_infer_session_get_queue_length (DcInferSession         *self);
void            dc_infer_session_stop             (DcInferSession         *self);
void            dc_infer_session_clear_queue      (DcInferSession         *self);

G_END_DECLS
