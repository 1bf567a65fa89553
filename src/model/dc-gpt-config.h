/* dc-gpt-config.h: the training model's shape and its weight layout.
 *
 * The model is GPT-2 (learned token and position embeddings, pre-norm blocks,
 * ReLU MLP of width 4·C, final layer norm, head tied to the token embedding)
 * over the byte-level 256-token vocabulary. All weights live in one float
 * array; dc_gpt_config_tensor() lists every tensor with its Hugging Face name,
 * shape and offset. Linear weights keep the Hugging Face Conv1D layout
 * (in, out), so checkpoints and exports need no transposes.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define DC_GPT_VOCAB       256
#define DC_GPT_WIDTH_MIN   16
#define DC_GPT_WIDTH_MAX   128
#define DC_GPT_SEQ_MIN     16
#define DC_GPT_SEQ_MAX     128
#define DC_GPT_LAYERS_MAX  12
/* The Advanced range (issue 15), beyond the seeds' range above: up to the
 * GPT-2-small shape (width 768, 12 layers of 12 heads, 1,024 positions),
 * the largest model this program is meant to train; a step at batch 1 and
 * sequence 1024 needs about 2.7 GB (dc_gpt_train_memory ()). */
#define DC_GPT_ADVANCED_WIDTH_MAX  768
#define DC_GPT_ADVANCED_SEQ_MAX    1024
/* The tokenizer identity stored in checkpoints: raw UTF-8 bytes are the ids. */
#define DC_GPT_TOKENIZER   "daisychain-byte-level-256"

typedef struct
{
  guint width;    /* n_embd (C) */
  guint seq;      /* n_positions (T) */
  guint n_layer;
  guint n_head;
  guint vocab;    /* always DC_GPT_VOCAB */
} DcGptConfig;

typedef struct
{
  char   name[64];    /* Hugging Face GPT-2 name, "transformer.h.0.ln_1.weight" */
  guint  n_dims;      /* 1 or 2 */
  gint64 sizes[2];
  gsize  offset;      /* in floats, into the one weight array */
  gsize  numel;
} DcGptTensor;

/* Tensors per block and outside the blocks (wte, wpe, ln_f.weight, ln_f.bias). */
#define DC_GPT_TENSORS_PER_LAYER 12
#define DC_GPT_TENSORS_OUTSIDE   4

void     dc_gpt_config_init_derived  (DcGptConfig        *self,
                                      guint               width,
                                      guint               seq);
gboolean dc_gpt_config_validate      (const DcGptConfig  *self,
                                      GError            **error);
gboolean dc_gpt_config_in_seed_range (const DcGptConfig  *self);
guint    dc_gpt_config_n_tensors     (const DcGptConfig  *self);
void     dc_gpt_config_tensor        (const DcGptConfig  *self,
                                      guint               index,
                                      DcGptTensor        *out);
gsize    dc_gpt_config_n_params      (const DcGptConfig  *self);
gboolean dc_gpt_config_equal         (const DcGptConfig  *a,
                                      const DcGptConfig  *b);

G_END_DECLS
