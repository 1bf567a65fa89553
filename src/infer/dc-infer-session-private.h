/* dc-infer-session-private.h: a seam for tests, a session on a fake model.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "dc-infer-session.h"
#include "model/dc-hf-config.h"

G_BEGIN_DECLS

/* Called on the generation thread: reads IDS (N_IDS of them) at positions
 * START, START + 1, ... of the current window (START 0: a new window, forget
 * the earlier ones) and writes the last position's logits (vocab_size floats). */
typedef gboolean (*DcInferFakeForward) (gpointer        user_data,
                                        const guint32  *ids,
                                        gsize           n_ids,
                                        guint           start,
                                        float          *logits,
                                        GError        **error);

typedef struct
{
  guint               vocab_size;
  guint               max_positions;
  gint64              eos_id;        /* -1: none */
  guint               n_eos_ids;     /* 0: eos_id alone ends a turn */
  gint64              eos_ids[DC_HF_MAX_EOS_IDS];  /* else any of these */
  gint64              bos_id;        /* -1: none */
  DcInferFakeForward  forward;
  DcInferFakeForward  forward_rows;  /* NULL: spans are scored a position at a time */
  gpointer            user_data;
  gboolean            load_later;    /* loaded by load_async, not at once */
} DcInferFakeModel;

/* Takes TOKENIZER; the session is loaded at once unless LOAD_LATER. */
DcInferSession *_dc_infer_session_new_fake (DcBpeTokenizer          *tokenizer,
                                            const DcInferFakeModel  *fake);

G_END_DECLS
