/* dc-gpt-config.c: model shape, derived sizes and the tensor table.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-model"

#include "config.h"

#include "dc-gpt-config.h"

#include <stdio.h>

#include "dc-model-error.h"

/**
 * dc_gpt_config_init_derived:
 *
 * Fills a config from width and sequence length with the documented rule
 * (docs/ARCHITECTURE.md): heads of 16 channels (8 when the width is not a
 * multiple of 16), 2 layers up to width 32, 3 up to 64, 4 above.
 */
void
dc_gpt_config_init_derived (DcGptConfig *self,
                            guint        width,
                            guint        seq)
{
  self->width = width;
  self->seq = seq;
  self->vocab = DC_GPT_VOCAB;
  self->n_head = width % 16 == 0 ? width / 16 : MAX (1, width / 8);
  self->n_layer = width <= 32 ? 2 : width <= 64 ? 3 : 4;
}

/**
 * dc_gpt_config_in_seed_range:
 *
 * Whether the config is inside the seeds' range (width and sequence
 * DC_GPT_WIDTH_MIN–DC_GPT_WIDTH_MAX and DC_GPT_SEQ_MIN–DC_GPT_SEQ_MAX, 1 to
 * DC_GPT_LAYERS_MAX layers, heads dividing the width): the sizes a group
 * trains, and whose gradients and checkpoints the group protocol's limits
 * were set for. Larger valid configs are the Advanced range.
 */
gboolean
dc_gpt_config_in_seed_range (const DcGptConfig *self)
{
  return self->vocab == DC_GPT_VOCAB
         && self->width >= DC_GPT_WIDTH_MIN && self->width <= DC_GPT_WIDTH_MAX
         && self->seq >= DC_GPT_SEQ_MIN && self->seq <= DC_GPT_SEQ_MAX
         && self->n_layer >= 1 && self->n_layer <= DC_GPT_LAYERS_MAX
         && self->n_head >= 1 && self->width % self->n_head == 0;
}

/**
 * dc_gpt_config_validate:
 *
 * Accepts every config this build can compute: the seeds' range and the
 * Advanced range (width up to DC_GPT_ADVANCED_WIDTH_MAX, sequence up to
 * DC_GPT_ADVANCED_SEQ_MAX). Where only the seeds' range may run (a group),
 * the caller also checks dc_gpt_config_in_seed_range ().
 */
gboolean
dc_gpt_config_validate (const DcGptConfig  *self,
                        GError            **error)
{
  if (self->vocab != DC_GPT_VOCAB)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOKENIZER,
                   "tokenizer mismatch: vocabulary of %u tokens, this build uses %u bytes",
                   self->vocab, DC_GPT_VOCAB);
      return FALSE;
    }
  if (self->width < DC_GPT_WIDTH_MIN || self->width > DC_GPT_ADVANCED_WIDTH_MAX
      || self->seq < DC_GPT_SEQ_MIN || self->seq > DC_GPT_ADVANCED_SEQ_MAX
      || self->n_layer < 1 || self->n_layer > DC_GPT_LAYERS_MAX
      || self->n_head < 1 || self->width % self->n_head != 0)
    {
      if (self->width <= DC_GPT_WIDTH_MAX && self->seq <= DC_GPT_SEQ_MAX)
        g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_DIMS,
                     "width %u, sequence %u, %u layers, %u heads "
                     "(width and sequence must be %d–%d, layers 1–%d, heads must divide the width)",
                     self->width, self->seq, self->n_layer, self->n_head,
                     DC_GPT_WIDTH_MIN, DC_GPT_WIDTH_MAX, DC_GPT_LAYERS_MAX);
      else
        g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_DIMS,
                     "width %u, sequence %u, %u layers, %u heads are outside the Advanced range "
                     "(width %d–%d, sequence %d–%d, layers 1–%d, heads must divide the width)",
                     self->width, self->seq, self->n_layer, self->n_head,
                     DC_GPT_WIDTH_MIN, DC_GPT_ADVANCED_WIDTH_MAX, DC_GPT_SEQ_MIN,
                     DC_GPT_ADVANCED_SEQ_MAX, DC_GPT_LAYERS_MAX);
      return FALSE;
    }
  return TRUE;
}

guint
dc_gpt_config_n_tensors (const DcGptConfig *self)
{
  return DC_GPT_TENSORS_OUTSIDE + DC_GPT_TENSORS_PER_LAYER * self->n_layer;
}

static void
set_tensor (DcGptTensor *out,
            const char  *name,
            gint64       rows,
            gint64       cols)
{
  g_strlcpy (out->name, name, sizeof out->name);
  out->n_dims = cols == 0 ? 1 : 2;
  out->sizes[0] = rows;
  out->sizes[1] = cols;
  out->numel = cols == 0 ? rows : rows * cols;
}

/* Order: wte, wpe, the blocks, ln_f; within a block as Hugging Face lists them. */
static void
describe (const DcGptConfig *self,
          guint              index,
          DcGptTensor       *out)
{
  gint64 c = self->width;
  static const char *block[] = {
    "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
    "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
    "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias",
  };
  const gint64 shapes[][2] = {
    { c, 0 }, { c, 0 }, { c, 3 * c }, { 3 * c, 0 },
    { c, c }, { c, 0 }, { c, 0 }, { c, 0 },
    { c, 4 * c }, { 4 * c, 0 }, { 4 * c, c }, { c, 0 },
  };
  guint n_block = DC_GPT_TENSORS_PER_LAYER * self->n_layer;
  char name[64];

  G_STATIC_ASSERT (G_N_ELEMENTS (block) == DC_GPT_TENSORS_PER_LAYER);
  if (index == 0)
    set_tensor (out, "transformer.wte.weight", self->vocab, c);
  else if (index == 1)
    set_tensor (out, "transformer.wpe.weight", self->seq, c);
  else if (index < 2 + n_block)
    {
      guint layer = (index - 2) / DC_GPT_TENSORS_PER_LAYER;
      guint which = (index - 2) % DC_GPT_TENSORS_PER_LAYER;

      snprintf (name, sizeof name, "transformer.h.%u.%s", layer, block[which]);
      set_tensor (out, name, shapes[which][0], shapes[which][1]);
    }
  else if (index == 2 + n_block)
    set_tensor (out, "transformer.ln_f.weight", c, 0);
  else
    set_tensor (out, "transformer.ln_f.bias", c, 0);
}

/**
 * dc_gpt_config_tensor:
 * @index: 0 … dc_gpt_config_n_tensors () - 1
 *
 * Describes one tensor, its offset included (tensors are packed in order).
 */
void
dc_gpt_config_tensor (const DcGptConfig *self,
                      guint              index,
                      DcGptTensor       *out)
{
  gsize offset = 0;

  g_return_if_fail (index < dc_gpt_config_n_tensors (self));
  for (guint i = 0; i < index; i++)
    {
      describe (self, i, out);
      offset += out->numel;
    }
  describe (self, index, out);
  out->offset = offset;
}

gsize
dc_gpt_config_n_params (const DcGptConfig *self)
{
  DcGptTensor last;

  dc_gpt_config_tensor (self, dc_gpt_config_n_tensors (self) - 1, &last);
  return last.offset + last.numel;
}

gboolean
dc_gpt_config_equal (const DcGptConfig *a,
                     const DcGptConfig *b)
{
  return a->width == b->width && a->seq == b->seq && a->n_layer == b->n_layer
         && a->n_head == b->n_head && a->vocab == b->vocab;
}
