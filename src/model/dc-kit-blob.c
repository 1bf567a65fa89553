/* dc-kit-blob.c: the inference kit's blob (layout in dc-kit-blob.h and
 * docs/ARCHITECTURE.md, "Inference kit").
 *
 * What is stored, and why:
 *  - every weight matrix as the GEMM's operand (kind "q8"): the int8 values
 *    of dc_quant_pack (), vector-major, then one int16 exponent per vector.
 *    The vectors are the ones dc-gpt.c packs: for a Conv1D weight (in, out)
 *    the columns, one per output; for the tied head the rows of wte. Packing
 *    here with the engine's own quantizer means the kit never re-derives a
 *    weight's bits, and a matrix costs one byte per value instead of four;
 *  - f32 (kind "f32") only where the forward pass adds or multiplies the exact
 *    float value: the token and position embeddings (their sum is the
 *    residual stream's start, so wte is stored in both forms), the layer-norm
 *    gains and biases and the linear biases.
 * Tensors start on 8-byte boundaries (zero padding), so a reader may view
 * them in place.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-model"

#include "config.h"

#include "dc-kit-blob.h"

#include <math.h>
#include <string.h>
#include <json-glib/json-glib.h>

#include "dc-sha256.h"
#include "engine/dc-gemm.h"
#include "dc-gpt-config.h"

#define ALIGN8(n) (((n) + 7) & ~(gsize) 7)

typedef struct
{
  char        *name;
  const char  *kind;     /* "f32" or "q8" */
  gsize        shape[2];
  guint        n_dims;
  gsize        offset;   /* from the start of the tensor data */
  gsize        length;   /* bytes, without padding */
  /* One of the two sources. */
  const float *f32;      /* borrowed: shape[0] (× shape[1]) floats */
  DcQuantMatrix *q8;     /* owned */
} Entry;

static void
entry_clear (gpointer data)
{
  Entry *e = data;

  g_free (e->name);
  g_clear_pointer (&e->q8, dc_quant_matrix_free);
}

static gboolean
is_conv1d_weight (const char *name)
{
  return g_str_has_suffix (name, ".c_attn.weight") || g_str_has_suffix (name, ".c_proj.weight")
         || g_str_has_suffix (name, ".c_fc.weight");
}

/* The q8 entry of the vectors src[v * vector_stride + i * k_stride]. */
static gboolean
add_q8 (GArray       *entries,
        const char   *name,
        const float  *src,
        gsize         n_vectors,
        gsize         k,
        gsize         vector_stride,
        gsize         k_stride,
        GError      **error)
{
  Entry e = { g_strdup (name), "q8", { n_vectors, k }, 2, 0, n_vectors * k + 2 * n_vectors,
              NULL, NULL };

  e.q8 = dc_quant_matrix_new (n_vectors, k, error);
  if (e.q8 == NULL || !dc_quant_pack_reference (name, src, vector_stride, k_stride, e.q8, error))
    {
      g_prefix_error (error, "the inference kit cannot hold this model: ");
      entry_clear (&e);
      return FALSE;
    }
  g_array_append_val (entries, e);
  return TRUE;
}

static void
write_entry (const Entry *e,
             guint8      *out)
{
  if (e->q8 == NULL)
    {
      gsize n = e->length / 4;

      G_STATIC_ASSERT (G_BYTE_ORDER == G_LITTLE_ENDIAN);
      memcpy (out, e->f32, n * sizeof (float));
      return;
    }
  memcpy (out, e->q8->q, e->q8->n_vectors * e->q8->k);
  out += e->q8->n_vectors * e->q8->k;
  for (gsize v = 0; v < e->q8->n_vectors; v++)
    {
      /* dc_quant_pack's exponents lie in [-155, 121]: int16 holds them. */
      guint16 le = GUINT16_TO_LE ((guint16) (gint16) e->q8->exponent[v]);

      memcpy (out + 2 * v, &le, 2);
    }
}

static char *
header_json (const DcGptModel *model,
             double            loss,
             GArray           *entries,
             gsize            *length)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonGenerator) gen = json_generator_new ();
  g_autoptr(JsonNode) root = NULL;
  g_autofree char *hash = dc_gpt_model_dup_hash (model);
  const DcGptConfig *c = &model->config;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "format");
  json_builder_add_string_value (b, "daisychain-kit");
  json_builder_set_member_name (b, "tokenizer");
  json_builder_add_string_value (b, DC_GPT_TOKENIZER);
  json_builder_set_member_name (b, "config");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "vocab");
  json_builder_add_int_value (b, c->vocab);
  json_builder_set_member_name (b, "width");
  json_builder_add_int_value (b, c->width);
  json_builder_set_member_name (b, "layers");
  json_builder_add_int_value (b, c->n_layer);
  json_builder_set_member_name (b, "heads");
  json_builder_add_int_value (b, c->n_head);
  json_builder_set_member_name (b, "seq");
  json_builder_add_int_value (b, c->seq);
  json_builder_set_member_name (b, "activation");
  json_builder_add_string_value (b, "relu");
  json_builder_end_object (b);
  json_builder_set_member_name (b, "info");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "step");
  json_builder_add_int_value (b, (gint64) model->step);
  json_builder_set_member_name (b, "loss");
  if (isfinite (loss))
    json_builder_add_double_value (b, loss);
  else
    json_builder_add_null_value (b);
  json_builder_set_member_name (b, "weight_hash");
  json_builder_add_string_value (b, hash);
  json_builder_set_member_name (b, "rule");
  json_builder_add_string_value (b, dc_gemm_rule_id ());
  json_builder_end_object (b);
  json_builder_set_member_name (b, "tensors");
  json_builder_begin_array (b);
  for (guint i = 0; i < entries->len; i++)
    {
      const Entry *e = &g_array_index (entries, Entry, i);

      json_builder_begin_object (b);
      json_builder_set_member_name (b, "name");
      json_builder_add_string_value (b, e->name);
      json_builder_set_member_name (b, "kind");
      json_builder_add_string_value (b, e->kind);
      json_builder_set_member_name (b, "shape");
      json_builder_begin_array (b);
      for (guint d = 0; d < e->n_dims; d++)
        json_builder_add_int_value (b, e->shape[d]);
      json_builder_end_array (b);
      json_builder_set_member_name (b, "offset");
      json_builder_add_int_value (b, e->offset);
      json_builder_set_member_name (b, "length");
      json_builder_add_int_value (b, e->length);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  json_builder_end_object (b);

  root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  return json_generator_to_data (gen, length);
}

/**
 * dc_kit_blob_new:
 * @model: the trained model (only read)
 * @loss: the last training loss, or NAN when unknown (stored as null)
 *
 * Returns: (transfer full): the blob, the same bytes for the same model and
 *   loss, or %NULL when a weight is not finite (it cannot be quantized).
 */
GBytes *
dc_kit_blob_new (const DcGptModel  *model,
                 double             loss,
                 GError           **error)
{
  g_autoptr(GArray) entries = g_array_new (FALSE, TRUE, sizeof (Entry));
  g_autoptr(DcSha256) sum = dc_sha256_new ();
  const DcGptConfig *c;
  g_autofree char *json = NULL;
  gsize json_len, header_len, data_len = 0, total;
  guint8 *blob;
  guint32 le;

  g_return_val_if_fail (model != NULL, NULL);
  c = &model->config;
  g_array_set_clear_func (entries, entry_clear);

  for (guint t = 0; t < dc_gpt_config_n_tensors (c); t++)
    {
      DcGptTensor info;
      const float *w;

      dc_gpt_config_tensor (c, t, &info);
      w = model->params + info.offset;
      if (info.n_dims == 2 && is_conv1d_weight (info.name))
        {
          /* (in, out) row-major: the out columns are the vectors. */
          if (!add_q8 (entries, info.name, w, info.sizes[1], info.sizes[0], 1, info.sizes[1],
                       error))
            return NULL;
        }
      else
        {
          Entry e = { g_strdup (info.name), "f32", { info.sizes[0], info.sizes[1] },
                      info.n_dims, 0, info.numel * sizeof (float), w, NULL };

          /* The same refusal as the quantized tensors': a diverged model has
           * nothing to generate with, and the reader refuses it too. */
          for (gsize i = 0; i < info.numel; i++)
            if (!isfinite (w[i]))
              {
                g_set_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_NOT_FINITE,
                             "the inference kit cannot hold this model: %s: %s at index %"
                             G_GSIZE_FORMAT " (refused)", info.name,
                             isnan (w[i]) ? "NaN" : "infinity", i);
                g_free (e.name);
                return NULL;
              }
          g_array_append_val (entries, e);
        }
    }
  /* The head is tied to wte: logits = ln_f(x) · wteᵀ packs wte's rows. */
  if (!add_q8 (entries, "lm_head.weight", model->params, c->vocab, c->width, c->width, 1, error))
    return NULL;

  for (guint i = 0; i < entries->len; i++)
    {
      Entry *e = &g_array_index (entries, Entry, i);

      e->offset = data_len;
      data_len += ALIGN8 (e->length);
    }

  json = header_json (model, loss, entries, &json_len);
  header_len = ALIGN8 (DC_KIT_BLOB_PREFIX + json_len) - DC_KIT_BLOB_PREFIX;
  g_assert (header_len <= DC_KIT_BLOB_HEADER_MAX && data_len <= DC_KIT_BLOB_DATA_MAX);
  total = DC_KIT_BLOB_PREFIX + header_len + data_len;
  blob = g_malloc0 (total);

  memcpy (blob, DC_KIT_BLOB_MAGIC, 4);
  le = GUINT32_TO_LE (DC_KIT_BLOB_VERSION);
  memcpy (blob + 4, &le, 4);
  le = GUINT32_TO_LE ((guint32) header_len);
  memcpy (blob + 40, &le, 4);
  le = GUINT32_TO_LE ((guint32) data_len);
  memcpy (blob + 44, &le, 4);
  memcpy (blob + DC_KIT_BLOB_PREFIX, json, json_len);
  memset (blob + DC_KIT_BLOB_PREFIX + json_len, ' ', header_len - json_len);
  for (guint i = 0; i < entries->len; i++)
    {
      const Entry *e = &g_array_index (entries, Entry, i);

      write_entry (e, blob + DC_KIT_BLOB_PREFIX + header_len + e->offset);
    }
  dc_sha256_update (sum, blob + 40, total - 40);
  dc_sha256_get_digest (sum, blob + 8);
  return g_bytes_new_take (blob, total);
}
