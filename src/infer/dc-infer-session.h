/* dc-infer-session.h: one loaded model and its generation, for the app and the CLI.
 *
 * Loading (dc_hf_model_load, with the repo as the weights' source) and
 * generation run on worker threads; every signal is emitted on the
 * thread-default main context of the thread that created the session, from
 * a GSource attached to it. Prompts submitted while one runs wait in a queue
 * (tokenized at once) and run in order. Stop ends the running prompt within
 * one token (or one prefill chunk) and keeps the queue.
 *
 * The context window: the model reads at most settings.context tokens. A
 * prompt longer than that keeps its last context/2 tokens; when the prompt
 * and the output so far fill the window, the oldest tokens are dropped, the
 * last context/2 are read again, and generation goes on (logged). The draw
 * of each token stays tied to its position in the whole sequence.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "dc-context.h"
#include "dc-model-repo.h"

G_BEGIN_DECLS

/* A turn of 4096 tokens takes minutes on a CPU; more is a typing mistake. */
#define DC_INFER_MAX_TOKENS   4096
/* The window needs room for one kept token and one new one. */
#define DC_INFER_MIN_CONTEXT  2
/* Prompts waiting at once; each holds its ids (a few KB). A queue this long
 * is a stuck client, not a person typing. */
#define DC_INFER_MAX_QUEUE    64
/* A prompt is text typed or piped in; 1 MiB is ~250k tokens, far past any context. */
#define DC_INFER_MAX_PROMPT_BYTES (1024u * 1024u)
/* A draft span and the token before it go through the model as one prompt
 * chunk (16 positions): longer spans are rarely accepted whole, and a
 * rejected tail is compute thrown away. */
#define DC_INFER_MAX_DRAFT_SPAN 15

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
  guint          draft_span;    /* 0 (off): tokens proposed from a repeated suffix, scored in one lap */
} DcInferSettings;

void            dc_infer_settings_init_default (DcInferSettings *settings);
gboolean        dc_infer_settings_validate     (const DcInferSettings *settings,
                                                guint max_positions, GError **error);

DcInferSession *dc_infer_session_new       (DcContext *context, DcModelRepo *repo);
DcModelRepo    *dc_infer_session_get_repo  (DcInferSession *self);
/* Loads the weights (downloads through the repo's cache) on a worker thread;
 * "load-progress" while it runs. */
void            dc_infer_session_load_async  (DcInferSession *self, GCancellable *cancellable,
                                              GAsyncReadyCallback callback, gpointer user_data);
gboolean        dc_infer_session_load_finish (DcInferSession *self, GAsyncResult *result,
                                              GError **error);
gboolean        dc_infer_session_is_loaded   (DcInferSession *self);
/* Queues a prompt; runs at once if idle. Returns the prompt's id (1, 2, ...). */
guint           dc_infer_session_submit    (DcInferSession *self, const char *prompt,
                                            const DcInferSettings *settings);
guint           dc_infer_session_get_queue_length (DcInferSession *self);  /* waiting, not running */
/* Stops the running generation (and keeps the queue); "finished" follows with stopped TRUE. */
void            dc_infer_session_stop      (DcInferSession *self);
void            dc_infer_session_clear_queue (DcInferSession *self);

/* Called on the generation thread: appends IDS (N_IDS of them) at position
 * START of the sequence (0: a new sequence) and writes the last position's
 * logits (vocab_size floats). LOGITS is NULL for a prompt's chunks before
 * its last: their logits are never read. */
typedef gboolean (*DcInferForwardFunc) (gpointer        user_data,
                                        const guint32  *ids,
                                        gsize           n_ids,
                                        guint           start,
                                        float          *logits,
                                        GError        **error);

/* A session on REPO's config and tokenizer whose forward pass is FORWARD
 * (the inference ring's): loaded at once; everything else (the queue,
 * sampling, the JSON mask, the window) is the same code as a local model's,
 * so the same logits give the same ids. USER_DATA must outlive the session. */
DcInferSession *dc_infer_session_new_with_forward (DcContext *context, DcModelRepo *repo,
                                                   DcInferForwardFunc forward,
                                                   gpointer user_data);
/* A forward that writes the logits of EVERY position (N_IDS × vocab_size
 * floats) into LOGITS, with the same user_data: what a draft span is scored
 * with. A session made with a forward and without this one scores a span
 * one position at a time. Call before the first submit. */
void            dc_infer_session_set_forward_rows (DcInferSession *self,
                                                   DcInferForwardFunc forward_rows);

/* The largest context this model allows (its max positions). */
guint           dc_infer_session_get_max_context (DcInferSession *self);

/* Teacher forcing, for comparisons with other implementations: feeds IDS one
 * at a time and returns, for each position, the TOP_K best ids and logits,
 * best first (ties: lower id first). The model must be loaded and idle.
 * Blocks the calling thread. Returns N_IDS × TOP_K DcInferScore. */
typedef struct
{
  guint32 id;
  float   logit;
} DcInferScore;

/* Scoring is for short comparisons; the top list is a display, not a dump. */
#define DC_INFER_MAX_TOP_K 100

GArray         *dc_infer_session_score     (DcInferSession *self, const guint32 *ids,
                                            gsize n_ids, guint top_k,
                                            GCancellable *cancellable, GError **error);

G_END_DECLS
