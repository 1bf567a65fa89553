/* dc-hf-model.c: the Llama family and GPT-2 for inference, INT8 throughout.
 *
 * Layout (docs/ARCHITECTURE.md, "The Hugging Face model"):
 * - Every weight matrix is one DcQuantMatrix whose vectors are its output
 *   rows: Linear weights (out, in) are packed row by row, GPT-2's Conv1D
 *   weights (in, out) column by column, so Y = X·Wᵀ is dc_gemm (X, W) for
 *   both. Each vector has its own power-of-two scale (dc_quant_pack), packed
 *   once at load; the f32 copies are dropped tensor by tensor.
 * - Q, K and V are one matrix ((Hq + 2·Hkv)·D, C), and so are the Llama MLP's
 *   gate and up (2·F, C): one product per token instead of three and two.
 *   Each output element depends only on its own row, so fusing changes no bit.
 * - The token embedding is kept as the checkpoint stores it (F32, F16 or
 *   BF16 bytes) and a lookup widens its row exactly: it is no product's
 *   operand, and quantizing it too added an error at every input that cost
 *   about 1 % of the reference's greedy steps (docs/TEST_RESULTS.md). The
 *   head is INT8 (V, C), packed from lm_head or, when tied, from the
 *   embedding.
 * - Norm weights, biases and GPT-2's position table stay f32 (small).
 *
 * Attention and the KV cache: a key is quantized once, as one vector of
 * length D, when its position is appended; Q·Kᵀ is then a product against
 * the cached int8 keys. P·V needs V's columns as vectors (over positions), so
 * the query at position p uses them quantized over exactly [start, p]
 * (start = 0, or p + 1 - sliding_window): kept up to date position by
 * position in the cache (columns_extend) without a window, packed anew with
 * one. Quantizing over exactly the positions the query sees keeps every
 * output causal (a future token never changes a past scale) and makes the
 * result independent of how the tokens were split into calls: one at a time
 * or all at once gives the same bits.
 *
 * Threads: products use the backend's threads, and so do a prompt's
 * per-position passes (appending keys and values by KV head, attention in
 * units of a few queries of one KV head, the MLP's activation by row), each
 * unit computed whole by one thread, so the bits do not depend on the thread
 * count. The backend, the model's forward and a cache are used by one
 * caller at a time.
 *
 * Devices: with a Vulkan backend, only products of at least
 * DC_HF_MODEL_OFFLOAD_ROWS rows on both sides and DC_GPT_TRAINER_OFFLOAD_MIN
 * multiply-adds go to it (a prompt's projections); decoding and attention
 * run on a CPU backend the model owns. The device uploads both operands
 * for every product, so a one-row product, which reads each weight once
 * on the CPU too, can only lose there. Every backend computes the same bits.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-model"

#include "config.h"

#include "dc-hf-model.h"
#include "dc-hf-model-private.h"

#include <string.h>

#include "engine/dc-gemm.h"
#include "engine/dc-math.h"
#include "engine/dc-parallel.h"
#include "dc-gpt-trainer.h"
#include "dc-model-error.h"

/* Products with fewer rows on either side stay on the CPU with a device:
 * the weights' upload is shared by this many rows at least. */
#define DC_HF_MODEL_OFFLOAD_ROWS 16

/* Rows widened to f32 at a time while packing a matrix: bounds the
 * temporary f32 copy to 4 MiB whatever the tensor's size. (It was 64 MiB:
 * for a tied 49,152 × 576 embedding that transient alone lifted the peak
 * resident memory of loading SmolLM-135M from 206 to 261 MiB, above
 * llama.cpp's 211; smaller chunks cost nothing measurable.) */
#define WIDEN_MAX_FLOATS (1024u * 1024u)

typedef struct
{
  float         *norm1_w, *norm1_b;  /* (C); b: GPT-2 */
  DcQuantMatrix *qkv;                /* ((Hq + 2 Hkv) D, C) */
  float         *qkv_b;              /* ((Hq + 2 Hkv) D) or NULL */
  DcQuantMatrix *o;                  /* (C, Hq D) */
  float         *o_b;                /* (C) or NULL */
  float         *norm2_w, *norm2_b;
  DcQuantMatrix *up;                 /* Llama: (2F, C), gate rows then up rows; GPT-2: (F, C) */
  float         *up_b;               /* (2F) / (F) or NULL */
  DcQuantMatrix *down;               /* (C, F) */
  float         *down_b;             /* (C) or NULL */
} Layer;

/* A forward's buffers, kept between calls (forward_chunk). */
typedef struct _Kept Kept;

static void kept_free (Kept *kept);

struct _DcHfModel
{
  DcHfConfig     config;      /* owned strings */
  DcGemmBackend *backend;     /* borrowed */
  DcGemmBackend *cpu;         /* owned when backend is a device: the small products */
  gsize          n_qkv;       /* (Hq + 2 Hkv) D */
  gsize          n_up;        /* 2F (Llama) or F (GPT-2) */
  guint8        *embed;       /* (V, C) as stored, embed_dtype */
  DcSafetensorsDtype embed_dtype;
  float         *positions;   /* GPT-2: (P, C) */
  Layer         *layers;
  float         *norm_w, *norm_b;
  DcQuantMatrix *head;        /* (V, C): lm_head, or the embedding when tied */
  /* A part (a ring stage) holds layers [first, last) only, and the
   * embedding, final norm and head only with ends; a whole model is
   * [0, n_layers) with ends. */
  guint          first, last;
  gboolean       ends;
  /* Held by the forward that uses the kept buffers; a concurrent one
   * (against the rules, but harmless) allocates its own. */
  GMutex         kept_lock;
  Kept          *kept;
};

struct _DcHfKvCache
{
  DcHfModel *model;     /* borrowed: the cache must not outlive it */
  guint      n_layers;  /* the model's last - first: layer l is at l - first */
  guint      context;
  guint      length;
  gint8     *k_q;       /* (L, Hkv, context, D) */
  gint32    *k_e;       /* (L, Hkv, context) */
  float     *v;         /* (L, Hkv, D, context): transposed, so that each of V's
                         * columns, P·V's vectors, is contiguous for the packer */
  /* V's columns quantized over [0, vq_len) as dc_quant_pack would pack them
   * (see columns_extend), so that a query need not pack them anew. */
  gint8     *vq;        /* (L, Hkv, D, context) */
  gint32    *ve;        /* (L, Hkv, D) */
  float     *vmax;      /* (L, Hkv, D): the largest |value| of each column */
  guint     *vq_len;    /* (L, Hkv) */
  guint      repack : 1; /* tests: pack the columns anew for every query */
};

/* Where a tensor goes while loading. */
typedef enum
{
  DEST_ROWS,   /* Linear (out, in): rows are vectors */
  DEST_COLS,   /* Conv1D (in, out): columns are vectors */
  DEST_FLOATS, /* kept as f32 */
  DEST_EMBED,  /* kept as stored; packed into the head too when tied */
} DestKind;

typedef struct
{
  char            *name;
  guint            rank;
  guint64          shape[2];
  DestKind         kind;
  DcQuantMatrix  **matrix;     /* DEST_ROWS / DEST_COLS, at vector offset */
  gsize            offset;     /* vectors, or floats for DEST_FLOATS */
  float          **floats;
} Need;

static void
need_clear (gpointer data)
{
  g_free (((Need *) data)->name);
}

static void
add_need (GArray          *needs,
          DestKind         kind,
          guint64          d0,
          guint64          d1,
          DcQuantMatrix  **matrix,
          float          **floats,
          gsize            offset,
          const char      *format,
          ...) G_GNUC_PRINTF (8, 9);

static void
add_need (GArray          *needs,
          DestKind         kind,
          guint64          d0,
          guint64          d1,
          DcQuantMatrix  **matrix,
          float          **floats,
          gsize            offset,
          const char      *format,
          ...)
{
  Need need = { 0 };
  va_list args;

  va_start (args, format);
  need.name = g_strdup_vprintf (format, args);
  va_end (args);
  need.kind = kind;
  need.rank = d1 == 0 ? 1 : 2;
  need.shape[0] = d0;
  need.shape[1] = d1;
  need.matrix = matrix;
  need.floats = floats;
  need.offset = offset;
  g_array_append_val (needs, need);
}

/* The tensors of CONFIG's architecture with their shapes; with MODEL, also
 * where each one goes (MODEL's matrices and arrays need not exist yet: the
 * pointers are to its fields). PREFIX is GPT-2's "transformer." or "". */
static GArray *
plan_tensors (const DcHfConfig *c,
              const char       *prefix,
              DcHfModel        *model,
              guint             first,
              guint             last,
              gboolean          ends)
{
  GArray *needs = g_array_new (FALSE, TRUE, sizeof (Need));
  const guint64 C = c->hidden_size, V = c->vocab_size, F = c->intermediate_size;
  const guint64 D = c->head_dim, QD = (guint64) c->n_heads * D, KD = (guint64) c->n_kv_heads * D;
  Layer dummy;

  g_array_set_clear_func (needs, need_clear);
#define M(field) (model != NULL ? &model->field : NULL)
#define LM(field) (model != NULL ? &model->layers[l].field : &dummy.field)

  if (c->family == DC_HF_FAMILY_GPT2)
    {
      const char *p = prefix;

      if (ends)
        {
          add_need (needs, DEST_EMBED, V, C, M (head), NULL, 0, "%swte.weight", p);
          add_need (needs, DEST_FLOATS, c->max_positions, C, NULL, M (positions), 0,
                    "%swpe.weight", p);
        }
      for (guint l = first; l < last; l++)
        {
          add_need (needs, DEST_FLOATS, C, 0, NULL, LM (norm1_w), 0, "%sh.%u.ln_1.weight", p, l);
          add_need (needs, DEST_FLOATS, C, 0, NULL, LM (norm1_b), 0, "%sh.%u.ln_1.bias", p, l);
          add_need (needs, DEST_COLS, C, 3 * C, LM (qkv), NULL, 0, "%sh.%u.attn.c_attn.weight",
                    p, l);
          add_need (needs, DEST_FLOATS, 3 * C, 0, NULL, LM (qkv_b), 0, "%sh.%u.attn.c_attn.bias",
                    p, l);
          add_need (needs, DEST_COLS, C, C, LM (o), NULL, 0, "%sh.%u.attn.c_proj.weight", p, l);
          add_need (needs, DEST_FLOATS, C, 0, NULL, LM (o_b), 0, "%sh.%u.attn.c_proj.bias", p, l);
          add_need (needs, DEST_FLOATS, C, 0, NULL, LM (norm2_w), 0, "%sh.%u.ln_2.weight", p, l);
          add_need (needs, DEST_FLOATS, C, 0, NULL, LM (norm2_b), 0, "%sh.%u.ln_2.bias", p, l);
          add_need (needs, DEST_COLS, C, F, LM (up), NULL, 0, "%sh.%u.mlp.c_fc.weight", p, l);
          add_need (needs, DEST_FLOATS, F, 0, NULL, LM (up_b), 0, "%sh.%u.mlp.c_fc.bias", p, l);
          add_need (needs, DEST_COLS, F, C, LM (down), NULL, 0, "%sh.%u.mlp.c_proj.weight", p, l);
          add_need (needs, DEST_FLOATS, C, 0, NULL, LM (down_b), 0, "%sh.%u.mlp.c_proj.bias",
                    p, l);
        }
      if (ends)
        {
          add_need (needs, DEST_FLOATS, C, 0, NULL, M (norm_w), 0, "%sln_f.weight", p);
          add_need (needs, DEST_FLOATS, C, 0, NULL, M (norm_b), 0, "%sln_f.bias", p);
        }
    }
  else
    {
      if (ends)
        add_need (needs, DEST_EMBED, V, C, c->tie_word_embeddings ? M (head) : NULL, NULL, 0,
                  "model.embed_tokens.weight");
      for (guint l = first; l < last; l++)
        {
          add_need (needs, DEST_FLOATS, C, 0, NULL, LM (norm1_w), 0,
                    "model.layers.%u.input_layernorm.weight", l);
          add_need (needs, DEST_ROWS, QD, C, LM (qkv), NULL, 0,
                    "model.layers.%u.self_attn.q_proj.weight", l);
          add_need (needs, DEST_ROWS, KD, C, LM (qkv), NULL, QD,
                    "model.layers.%u.self_attn.k_proj.weight", l);
          add_need (needs, DEST_ROWS, KD, C, LM (qkv), NULL, QD + KD,
                    "model.layers.%u.self_attn.v_proj.weight", l);
          if (c->qkv_bias)
            {
              add_need (needs, DEST_FLOATS, QD, 0, NULL, LM (qkv_b), 0,
                        "model.layers.%u.self_attn.q_proj.bias", l);
              add_need (needs, DEST_FLOATS, KD, 0, NULL, LM (qkv_b), QD,
                        "model.layers.%u.self_attn.k_proj.bias", l);
              add_need (needs, DEST_FLOATS, KD, 0, NULL, LM (qkv_b), QD + KD,
                        "model.layers.%u.self_attn.v_proj.bias", l);
            }
          add_need (needs, DEST_ROWS, C, QD, LM (o), NULL, 0,
                    "model.layers.%u.self_attn.o_proj.weight", l);
          if (c->o_bias)
            add_need (needs, DEST_FLOATS, C, 0, NULL, LM (o_b), 0,
                      "model.layers.%u.self_attn.o_proj.bias", l);
          add_need (needs, DEST_FLOATS, C, 0, NULL, LM (norm2_w), 0,
                    "model.layers.%u.post_attention_layernorm.weight", l);
          add_need (needs, DEST_ROWS, F, C, LM (up), NULL, 0,
                    "model.layers.%u.mlp.gate_proj.weight", l);
          add_need (needs, DEST_ROWS, F, C, LM (up), NULL, F,
                    "model.layers.%u.mlp.up_proj.weight", l);
          add_need (needs, DEST_ROWS, C, F, LM (down), NULL, 0,
                    "model.layers.%u.mlp.down_proj.weight", l);
          if (c->mlp_bias)
            {
              add_need (needs, DEST_FLOATS, F, 0, NULL, LM (up_b), 0,
                        "model.layers.%u.mlp.gate_proj.bias", l);
              add_need (needs, DEST_FLOATS, F, 0, NULL, LM (up_b), F,
                        "model.layers.%u.mlp.up_proj.bias", l);
              add_need (needs, DEST_FLOATS, C, 0, NULL, LM (down_b), 0,
                        "model.layers.%u.mlp.down_proj.bias", l);
            }
        }
      if (ends)
        add_need (needs, DEST_FLOATS, C, 0, NULL, M (norm_w), 0, "model.norm.weight");
      if (ends && !c->tie_word_embeddings)
        add_need (needs, DEST_ROWS, V, C, M (head), NULL, 0, "lm_head.weight");
    }
#undef M
#undef LM
  return needs;
}

/* GPT-2 checkpoints name their tensors with or without "transformer."
 * (save_pretrained writes it; the Hub's openai-community/gpt2 does not). */
static const char *
gpt2_prefix (DcTensorSource  *source,
             GError         **error)
{
  if (dc_tensor_source_lookup (source, "transformer.wte.weight") != NULL)
    return "transformer.";
  if (dc_tensor_source_lookup (source, "wte.weight") != NULL)
    return "";
  g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
               "the checkpoint has no tensor “transformer.wte.weight” (or “wte.weight”)");
  return NULL;
}

static char *
shape_string (guint          rank,
              const guint64 *shape)
{
  GString *s = g_string_new ("[");

  for (guint i = 0; i < rank; i++)
    g_string_append_printf (s, "%s%" G_GUINT64_FORMAT, i > 0 ? ", " : "", shape[i]);
  g_string_append_c (s, ']');
  return g_string_free (s, FALSE);
}

/* Looks every need up and checks its shape; the entries, in NEEDS' order. */
static GPtrArray *
check_tensors (const DcHfConfig *config,
               DcTensorSource   *source,
               GArray           *needs,
               GError          **error)
{
  g_autoptr(GPtrArray) found = g_ptr_array_sized_new (needs->len);

  for (guint i = 0; i < needs->len; i++)
    {
      const Need *need = &g_array_index (needs, Need, i);
      const DcSafetensorsTensor *t = dc_tensor_source_lookup (source, need->name);
      gboolean same;

      if (t == NULL)
        {
          g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                       "the checkpoint has no tensor “%s”, which %s needs", need->name,
                       config->architecture);
          return NULL;
        }
      same = t->rank == need->rank;
      for (guint d = 0; same && d < need->rank; d++)
        same = t->shape[d] == need->shape[d];
      if (!same)
        {
          g_autofree char *want = shape_string (need->rank, need->shape);
          g_autofree char *have = shape_string (t->rank, t->shape);

          g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_DIMS,
                       "tensor “%s” has shape %s; config.json implies %s", need->name, have,
                       want);
          return NULL;
        }
      g_ptr_array_add (found, (gpointer) t);
    }
  return g_steal_pointer (&found);
}

static GArray *
plan_for_source (const DcHfConfig *config,
                 DcTensorSource   *source,
                 DcHfModel        *model,
                 guint             first,
                 guint             last,
                 gboolean          ends,
                 GError          **error)
{
  const char *prefix = "";

  if (config->family == DC_HF_FAMILY_GPT2)
    {
      prefix = gpt2_prefix (source, error);
      if (prefix == NULL)
        return NULL;
    }
  return plan_tensors (config, prefix, model, first, last, ends);
}

/**
 * dc_hf_model_list_tensors:
 *
 * Returns: (transfer container) (element-type DcSafetensorsTensor) (nullable): the header
 *   entries the model reads (borrowed from @source), or %NULL with @error set
 */
GPtrArray *
dc_hf_model_list_tensors (const DcHfConfig  *config,
                          DcTensorSource    *source,
                          GError           **error)
{
  g_return_val_if_fail (config != NULL, NULL);

  return dc_hf_model_list_part_tensors (config, source, 0, config->n_layers, TRUE, error);
}

/**
 * dc_hf_model_list_part_tensors:
 *
 * As dc_hf_model_list_tensors() for the part dc_hf_model_load_part() loads:
 * what a ring stage downloads.
 *
 * Returns: (transfer container) (element-type DcSafetensorsTensor) (nullable)
 */
GPtrArray *
dc_hf_model_list_part_tensors (const DcHfConfig  *config,
                               DcTensorSource    *source,
                               guint              first,
                               guint              last,
                               gboolean           ends,
                               GError           **error)
{
  g_autoptr(GArray) needs = NULL;

  g_return_val_if_fail (config != NULL && DC_IS_TENSOR_SOURCE (source), NULL);
  g_return_val_if_fail (first <= last && last <= config->n_layers, NULL);

  needs = plan_for_source (config, source, NULL, first, last, ends, error);
  if (needs == NULL)
    return NULL;
  return check_tensors (config, source, needs, error);
}

/* Vectors per matrix field, from the plan: a fused matrix is the sum of its parts. */
static guint64
layer_matrix_vectors (const DcHfConfig *c,
                      gboolean          qkv)
{
  if (qkv)
    return (guint64) (c->n_heads + 2 * c->n_kv_heads) * c->head_dim;
  return c->family == DC_HF_FAMILY_GPT2 ? c->intermediate_size : 2 * (guint64) c->intermediate_size;
}

/**
 * dc_hf_model_memory_bytes:
 * @context: the positions one KV cache holds
 *
 * Returns: what a loaded model and one cache of @context positions take:
 *   INT8 weights and their exponents, the f32 norms, biases and position
 *   table, and the cache (int8 keys, f32 values)
 */
guint64
dc_hf_model_memory_bytes (const DcHfConfig *config,
                          guint             context)
{
  g_return_val_if_fail (config != NULL, 0);

  return dc_hf_model_part_memory_bytes (config, 0, config->n_layers, TRUE, context);
}

/**
 * dc_hf_model_part_memory_bytes:
 *
 * Returns: as dc_hf_model_memory_bytes(), for the part dc_hf_model_load_part()
 *   loads and its cache
 */
guint64
dc_hf_model_part_memory_bytes (const DcHfConfig *config,
                               guint             first,
                               guint             last,
                               gboolean          ends,
                               guint             context)
{
  g_autoptr(GArray) needs = NULL;
  guint64 total = 0;
  guint64 kv_per_pos;

  g_return_val_if_fail (config != NULL, 0);
  g_return_val_if_fail (first <= last && last <= config->n_layers, 0);

  needs = plan_tensors (config, "", NULL, first, last, ends);
  for (guint i = 0; i < needs->len; i++)
    {
      const Need *need = &g_array_index (needs, Need, i);
      guint64 n = need->shape[0] * MAX (need->shape[1], 1);

      if (need->kind == DEST_FLOATS)
        total += 4 * n;
      else if (need->kind == DEST_EMBED)
        total += n * (strcmp (config->dtype, "float32") == 0 ? 4 : 2) +
                 (need->matrix != NULL || config->family == DC_HF_FAMILY_GPT2 ||
                  config->tie_word_embeddings ? n + 4 * need->shape[0] : 0);
      else
        total += n + 4 * (need->kind == DEST_ROWS ? need->shape[0] : need->shape[1]);
    }
  /* Per position and layer and KV head: an int8 key and its exponent, the
   * f32 values and their int8 copy. */
  kv_per_pos = (guint64) config->n_kv_heads * (config->head_dim + 4 + 5 * config->head_dim);
  return total + kv_per_pos * (last - first) * context;
}

const DcHfConfig *
dc_hf_model_get_config (DcHfModel *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  return &self->config;
}

void
dc_hf_model_free (DcHfModel *self)
{

  if (self == NULL)
    return;
  if (self->layers != NULL)
    for (guint l = self->first; l < self->last; l++)
      {
        Layer *layer = &self->layers[l];

        g_free (layer->norm1_w);
        g_free (layer->norm1_b);
        g_clear_pointer (&layer->qkv, dc_quant_matrix_free);
        g_free (layer->qkv_b);
        g_clear_pointer (&layer->o, dc_quant_matrix_free);
        g_free (layer->o_b);
        g_free (layer->norm2_w);
        g_free (layer->norm2_b);
        g_clear_pointer (&layer->up, dc_quant_matrix_free);
        g_free (layer->up_b);
        g_clear_pointer (&layer->down, dc_quant_matrix_free);
        g_free (layer->down_b);
      }
  g_free (self->layers);
  g_free (self->embed);
  g_clear_pointer (&self->cpu, dc_gemm_backend_free);
  g_clear_pointer (&self->head, dc_quant_matrix_free);
  g_free (self->positions);
  g_free (self->norm_w);
  g_free (self->norm_b);
  g_free (self->config.architecture);
  g_free (self->config.model_type);
  g_free (self->config.dtype);
  g_clear_pointer (&self->kept, kept_free);
  g_mutex_clear (&self->kept_lock);
  g_free (self);
}

/* Allocates every matrix and array the plan fills (sizes from the config,
 * already checked against the headers). */
static gboolean
allocate_model (DcHfModel  *self,
                GError    **error)
{
  const DcHfConfig *c = &self->config;
  const gsize C = c->hidden_size, F = c->intermediate_size;
  const gsize QD = (gsize) c->n_heads * c->head_dim;
  const gboolean gpt2 = c->family == DC_HF_FAMILY_GPT2;

  self->n_qkv = (gsize) layer_matrix_vectors (c, TRUE);
  self->n_up = (gsize) layer_matrix_vectors (c, FALSE);
  if (self->ends)
    {
      if ((self->head = dc_quant_matrix_new (c->vocab_size, C, error)) == NULL)
        return FALSE;
      if (gpt2)
        self->positions = g_try_new (float, (gsize) c->max_positions * C);
      self->norm_w = g_new (float, C);
      if (gpt2)
        self->norm_b = g_new (float, C);
    }
  for (guint l = self->first; l < self->last; l++)
    {
      Layer *layer = &self->layers[l];

      layer->norm1_w = g_new (float, C);
      layer->norm2_w = g_new (float, C);
      if (gpt2)
        {
          layer->norm1_b = g_new (float, C);
          layer->norm2_b = g_new (float, C);
        }
      if (gpt2 || c->qkv_bias)
        layer->qkv_b = g_new0 (float, self->n_qkv);
      if (gpt2 || c->o_bias)
        layer->o_b = g_new0 (float, C);
      if (gpt2 || c->mlp_bias)
        {
          layer->up_b = g_new0 (float, self->n_up);
          layer->down_b = g_new0 (float, C);
        }
      if ((layer->qkv = dc_quant_matrix_new (self->n_qkv, C, error)) == NULL ||
          (layer->o = dc_quant_matrix_new (C, QD, error)) == NULL ||
          (layer->up = dc_quant_matrix_new (self->n_up, C, error)) == NULL ||
          (layer->down = dc_quant_matrix_new (C, F, error)) == NULL)
        return FALSE;
    }
  if (gpt2 && self->ends && self->positions == NULL)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE,
                   "not enough memory for the position table");
      return FALSE;
    }
  return TRUE;
}

/* Widens RAW (the tensor's bytes) and stores it where NEED says; the
 * embedding keeps RAW itself (*RAW_INOUT becomes NULL). */
static gboolean
store_tensor (DcHfModel                 *self,
              const Need                *need,
              const DcSafetensorsTensor *t,
              guint8                   **raw_inout,
              GError                   **error)
{
  const gsize esize = dc_safetensors_dtype_size (t->dtype);
  const guint8 *raw = *raw_inout;

  if (need->kind == DEST_EMBED)
    {
      self->embed = g_steal_pointer (raw_inout);
      self->embed_dtype = t->dtype;
      if (need->matrix == NULL)
        return TRUE;
    }
  if (need->kind == DEST_FLOATS)
    {
      dc_widen_to_f32 (t->dtype, raw, *need->floats + need->offset, (gsize) t->numel);
      return TRUE;
    }
  if (need->kind == DEST_ROWS || need->kind == DEST_EMBED)
    {
      const gsize rows = (gsize) need->shape[0], k = (gsize) need->shape[1];
      const gsize step = MAX ((gsize) 1, WIDEN_MAX_FLOATS / k);
      g_autofree float *f32 = g_new (float, MIN (rows, step) * k);
      DcQuantMatrix *m = *need->matrix;

      for (gsize r0 = 0; r0 < rows; r0 += step)
        {
          gsize n = MIN (step, rows - r0);
          DcQuantMatrix view = {
            .n_vectors = n,
            .k = k,
            .q = m->q + (need->offset + r0) * k,
            .exponent = m->exponent + need->offset + r0,
          };

          dc_widen_to_f32 (t->dtype, raw + r0 * k * esize, f32, n * k);
          if (!dc_quant_pack (need->name, f32, k, 1, &view, error))
            return FALSE;
        }
      return TRUE;
    }
  else
    {
      /* Conv1D (in, out): vector n is column n, K = in. */
      const gsize k = (gsize) need->shape[0], cols = (gsize) need->shape[1];
      g_autofree float *f32 = g_new (float, k * cols);
      DcQuantMatrix *m = *need->matrix;
      DcQuantMatrix view = {
        .n_vectors = cols,
        .k = k,
        .q = m->q + need->offset * k,
        .exponent = m->exponent + need->offset,
      };

      dc_widen_to_f32 (t->dtype, raw, f32, k * cols);
      return dc_quant_pack (need->name, f32, 1, cols, &view, error);
    }
}

static void
copy_config (DcHfConfig       *dst,
             const DcHfConfig *src)
{
  *dst = *src;
  dst->architecture = g_strdup (src->architecture);
  dst->model_type = g_strdup (src->model_type);
  dst->dtype = g_strdup (src->dtype);
}

/**
 * dc_hf_model_load:
 * @backend: (transfer none): where the products run; must outlive the model
 * @progress: (nullable) (scope call): called after each tensor
 *
 * Returns: (transfer full) (nullable): the model, or %NULL with @error set
 */
DcHfModel *
dc_hf_model_load (const DcHfConfig  *config,
                  DcTensorSource    *source,
                  DcGemmBackend     *backend,
                  DcHfLoadProgress   progress,
                  gpointer           user_data,
                  GCancellable      *cancellable,
                  GError           **error)
{
  g_return_val_if_fail (config != NULL, NULL);

  return dc_hf_model_load_part (config, source, backend, 0, config->n_layers, TRUE, progress,
                                user_data, cancellable, error);
}

/**
 * dc_hf_model_load_part:
 * @first: the first layer this part holds
 * @last: one past its last layer
 * @ends: whether it holds the embedding, the final norm and the head
 *
 * A ring stage's share of the model: reads only the tensors of layers
 * [@first, @last) and, with @ends, of the embedding, final norm and head.
 *
 * Returns: (transfer full) (nullable): the part, or %NULL with @error set
 */
DcHfModel *
dc_hf_model_load_part (const DcHfConfig  *config,
                       DcTensorSource    *source,
                       DcGemmBackend     *backend,
                       guint              first,
                       guint              last,
                       gboolean           ends,
                       DcHfLoadProgress   progress,
                       gpointer           user_data,
                       GCancellable      *cancellable,
                       GError           **error)
{
  g_autoptr(DcHfModel) self = NULL;
  g_autoptr(GArray) needs = NULL;
  g_autoptr(GPtrArray) found = NULL;
  guint64 total = 0, done = 0;

  g_return_val_if_fail (config != NULL && DC_IS_TENSOR_SOURCE (source), NULL);
  g_return_val_if_fail (backend != NULL, NULL);
  g_return_val_if_fail (first <= last && last <= config->n_layers, NULL);

  self = g_new0 (DcHfModel, 1);
  g_mutex_init (&self->kept_lock);
  copy_config (&self->config, config);
  self->backend = backend;
  self->first = first;
  self->last = last;
  self->ends = ends;
  if (dc_gemm_backend_get_kind (backend) == DC_BACKEND_VULKAN)
    {
      self->cpu = dc_gemm_backend_new (DC_BACKEND_CPU, error);
      if (self->cpu == NULL)
        return NULL;
    }
  /* The plan points at the layers' fields (bounded by DC_HF_MAX_LAYERS). */
  self->layers = g_new0 (Layer, self->config.n_layers);

  /* Every tensor is checked before anything is allocated or read. */
  needs = plan_for_source (&self->config, source, self, first, last, ends, error);
  if (needs == NULL)
    return NULL;
  found = check_tensors (&self->config, source, needs, error);
  if (found == NULL || !allocate_model (self, error))
    return NULL;

  for (guint i = 0; i < found->len; i++)
    {
      const DcSafetensorsTensor *t = g_ptr_array_index (found, i);

      total += t->end - t->begin;
    }
  for (guint i = 0; i < found->len; i++)
    {
      const DcSafetensorsTensor *t = g_ptr_array_index (found, i);
      const Need *need = &g_array_index (needs, Need, i);
      guint64 len = t->end - t->begin;
      g_autofree guint8 *raw = NULL;

      if (len != t->numel * dc_safetensors_dtype_size (t->dtype) || len > G_MAXSIZE)
        {
          g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                       "tensor “%s” holds %" G_GUINT64_FORMAT " bytes, not the %"
                       G_GUINT64_FORMAT " its shape needs", t->name, len,
                       t->numel * dc_safetensors_dtype_size (t->dtype));
          return NULL;
        }
      raw = g_try_malloc (MAX ((gsize) len, 1));
      if (raw == NULL)
        {
          g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE,
                       "not enough memory to read tensor “%s” (%" G_GUINT64_FORMAT " bytes)",
                       t->name, len);
          return NULL;
        }
      if (!dc_tensor_source_read (source, t, raw, cancellable, error) ||
          !store_tensor (self, need, t, &raw, error))
        return NULL;
      done += len;
      if (progress != NULL)
        progress (done, total, user_data);
    }
  return g_steal_pointer (&self);
}

/**
 * dc_hf_kv_cache_new:
 * @context: positions to hold, 1 to the model's max_positions
 *
 * Returns: (transfer full) (nullable): an empty cache, or %NULL with @error set
 */
DcHfKvCache *
dc_hf_kv_cache_new (DcHfModel  *model,
                    guint       context,
                    GError    **error)
{
  g_autoptr(DcHfKvCache) self = NULL;
  const DcHfConfig *c;
  gsize per_layer, n, values_bytes;

  g_return_val_if_fail (model != NULL, NULL);
  c = &model->config;

  if (context < 1 || context > c->max_positions)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                   "context length %u is outside 1 to %u (the model's max_positions)",
                   context, c->max_positions);
      return NULL;
    }
  /* n: cached keys' bytes (one per value); values take 4 × n. A part
   * without layers (a ring's head) still counts positions. */
  if (!g_size_checked_mul (&per_layer, (gsize) c->n_kv_heads * c->head_dim, context) ||
      !g_size_checked_mul (&n, per_layer, MAX (model->last - model->first, 1)) ||
      !g_size_checked_mul (&values_bytes, n, sizeof (float)))
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE,
                   "a KV cache of %u positions is too large for this machine", context);
      return NULL;
    }
  self = g_new0 (DcHfKvCache, 1);
  self->model = model;
  self->n_layers = MAX (model->last - model->first, 1);
  self->context = context;
  self->k_q = g_try_malloc (n);
  self->k_e = g_try_new (gint32, (gsize) self->n_layers * c->n_kv_heads * context);
  self->v = g_try_malloc (values_bytes);
  self->vq = g_try_malloc (n);
  self->ve = g_try_new (gint32, (gsize) self->n_layers * c->n_kv_heads * c->head_dim);
  self->vmax = g_try_new (float, (gsize) self->n_layers * c->n_kv_heads * c->head_dim);
  self->vq_len = g_new0 (guint, (gsize) self->n_layers * c->n_kv_heads);
  if (self->k_q == NULL || self->k_e == NULL || self->v == NULL || self->vq == NULL ||
      self->ve == NULL || self->vmax == NULL)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE,
                   "not enough memory for a KV cache of %u positions", context);
      return NULL;
    }
  return g_steal_pointer (&self);
}

guint
dc_hf_kv_cache_get_length (DcHfKvCache *cache)
{
  g_return_val_if_fail (cache != NULL, 0);
  return cache->length;
}

void
dc_hf_kv_cache_reset (DcHfKvCache *cache)
{
  g_return_if_fail (cache != NULL);
  cache->length = 0;
  memset (cache->vq_len, 0, sizeof (guint) * cache->n_layers *
                            cache->model->config.n_kv_heads);
}

/* Forgets positions LENGTH and after (a draft span's rejected tokens). A
 * cell whose quantized V columns reach past LENGTH is packed anew by the
 * next query (columns_for_query packs when vq_len differs from the
 * position), so the bits are those of a cache that never held them. */
void
dc_hf_kv_cache_truncate (DcHfKvCache *cache,
                         guint        length)
{
  gsize cells;

  g_return_if_fail (cache != NULL);
  if (length >= cache->length)
    return;
  cache->length = length;
  cells = (gsize) cache->n_layers * cache->model->config.n_kv_heads;
  for (gsize i = 0; i < cells; i++)
    if (cache->vq_len[i] > length)
      cache->vq_len[i] = 0;
}

void
_dc_hf_kv_cache_set_repack (DcHfKvCache *cache,
                            gboolean     repack)
{
  cache->repack = repack != FALSE;
}

void
dc_hf_kv_cache_free (DcHfKvCache *cache)
{
  if (cache == NULL)
    return;
  g_free (cache->k_q);
  g_free (cache->k_e);
  g_free (cache->v);
  g_free (cache->vq);
  g_free (cache->ve);
  g_free (cache->vmax);
  g_free (cache->vq_len);
  g_free (cache);
}

/* Scratch of one forward chunk. Quantized operands are views into q/e. */
typedef struct
{
  gsize   n;          /* positions in the chunk */
  float  *x;          /* (n, C) residual stream */
  float  *h;          /* (n, max (C, F, Hq D)) normed input / activations */
  float  *qkv;        /* (n, n_qkv) */
  float  *att;        /* (n, Hq D) */
  float  *mlp;        /* (n, n_up) */
  float  *tmp;        /* (n, C) */
  float  *rope_cos;   /* (n, D / 2) */
  float  *rope_sin;
  gint8  *qa;         /* the left operand: up to n · max (C, F, Hq D, n_up) values */
  gint32 *ea;
} Scratch;

static void
scratch_clear (Scratch *s)
{
  g_free (s->x);
  g_free (s->h);
  g_free (s->qkv);
  g_free (s->att);
  g_free (s->mlp);
  g_free (s->tmp);
  g_free (s->rope_cos);
  g_free (s->rope_sin);
  g_free (s->qa);
  g_free (s->ea);
}

/* Packs N vectors of length K (element (v, i) at src[v·vs + i·ks]) into the
 * scratch buffer at vector offset OFF, and describes them in VIEW. */
static gboolean
pack_into (const char    *what,
           const float   *src,
           gsize          n,
           gsize          k,
           gsize          vs,
           gsize          ks,
           gint8         *q,
           gint32        *e,
           DcQuantMatrix *view,
           GError       **error)
{
  view->n_vectors = n;
  view->k = k;
  view->q = q;
  view->exponent = e;
  return dc_quant_pack (what, src, vs, ks, view, error);
}

/* c = a · bᵀ on the backend that suits its size (same bits on each). */
static gboolean
product (DcHfModel            *self,
         const DcQuantMatrix  *a,
         const DcQuantMatrix  *b,
         float                *c,
         GError              **error)
{
  DcGemmBackend *backend = self->backend;

  if (self->cpu != NULL &&
      (a->n_vectors < DC_HF_MODEL_OFFLOAD_ROWS || b->n_vectors < DC_HF_MODEL_OFFLOAD_ROWS ||
       (guint64) a->n_vectors * b->n_vectors * a->k < DC_GPT_TRAINER_OFFLOAD_MIN))
    backend = self->cpu;
  return dc_gemm_run_packed (backend, a, b, c, error);
}

/* out (n, N) = x (n, K) · W (N, K)ᵀ (+ bias), through the INT8 rule. */
static gboolean
linear (DcHfModel           *self,
        Scratch             *s,
        const char          *what,
        const float         *x,
        gsize                n,
        const DcQuantMatrix *w,
        const float         *bias,
        float               *out,
        GError             **error)
{
  DcQuantMatrix a;

  if (!pack_into (what, x, n, w->k, w->k, 1, s->qa, s->ea, &a, error))
    return FALSE;
  /* x · Wᵀ whatever n: the VNNI kernels correct by the left operand's row
   * sums, so x on the left costs n sums a product, not a pass over all of W
   * (the same bits either way: exact integer sums, a symmetric epilogue). */
  if (!product (self, &a, w, out, error))
    return FALSE;
  if (bias != NULL)
    for (gsize i = 0; i < n; i++)
      for (gsize j = 0; j < w->n_vectors; j++)
        out[i * w->n_vectors + j] += bias[j];
  return TRUE;
}

/* The kernels between the products, on the engine's pool: each row (a
 * position) is computed whole by one thread with the serial code, so the
 * bits do not depend on the thread count. A prompt's rows spread; a decode
 * step's single row stays on the caller. Only the MLP's activation (an
 * exponential per element, about F / C = 3 times a norm's work) is worth a
 * join point: a prompt's norms and residual adds (64 × 576 values, tens of
 * µs) cost less than the wait for a helper the scheduler preempted on a
 * loaded machine, so they stay on the caller. */
typedef struct
{
  DcHfModel   *self;
  const float *x, *w, *b;
  float       *y;
} RowPass;

static guint
pass_threads (DcHfModel *self,
              gsize      n)
{
  return n < 2 ? 1 : dc_gemm_backend_get_n_threads (self->cpu != NULL ? self->cpu
                                                                      : self->backend);
}

static void
norm_chunk (gsize    i0,
            gsize    i1,
            guint    worker,
            gpointer data)
{
  const RowPass *p = data;
  const DcHfConfig *c = &p->self->config;
  const gsize C = c->hidden_size;
  const float eps = (float) c->norm_eps;

  for (gsize i = i0; i < i1; i++)
    if (c->family == DC_HF_FAMILY_GPT2)
      dc_math_layer_norm (p->x + i * C, p->w, p->b, eps, p->y + i * C, NULL, NULL, C);
    else
      dc_math_rms_norm (p->x + i * C, p->w, eps, p->y + i * C, NULL, C);
}

static void
norm_rows (DcHfModel   *self,
           const float *x,
           const float *w,
           const float *b,
           float       *y,
           gsize        n)
{
  RowPass p = { self, x, w, b, y };

  norm_chunk (0, n, 0, &p);
}

/* The MLP's activation of rows: x (n, n_up) → y (n, F). */
static void
activation_chunk (gsize    i0,
                  gsize    i1,
                  guint    worker,
                  gpointer data)
{
  const RowPass *p = data;
  DcHfModel *self = p->self;
  const gsize F = self->config.intermediate_size;

  for (gsize i = i0; i < i1; i++)
    {
      float *act = p->y + i * F;
      const float *m = p->x + i * self->n_up;

      if (self->config.family == DC_HF_FAMILY_GPT2)
        dc_math_gelu_tanh (m, act, F);
      else
        {
          dc_math_silu (m, act, F);
          for (gsize j = 0; j < F; j++)
            act[j] *= m[F + j];
        }
    }
}

/* y (n, C) += x (n, C), a row per chunk. */
static void
residual_chunk (gsize    i0,
                gsize    i1,
                guint    worker,
                gpointer data)
{
  const RowPass *p = data;
  const gsize C = p->self->config.hidden_size;

  for (gsize i = i0 * C; i < i1 * C; i++)
    p->y[i] += p->x[i];
}

/* Errors from a pass on the pool: the one of the lowest failing index is
 * kept, so the message does not depend on the thread count or timing. */
typedef struct
{
  GMutex  lock;
  gsize   at;
  GError *error;
} FirstError;

static void
first_error_take (FirstError *f,
                  gsize       at,
                  GError     *error)
{
  g_mutex_lock (&f->lock);
  if (f->error == NULL || at < f->at)
    {
      g_clear_error (&f->error);
      f->error = error;
      f->at = at;
    }
  else
    g_error_free (error);
  g_mutex_unlock (&f->lock);
}

/* Hands the kept error to ERROR; returns whether there was none. */
static gboolean
first_error_propagate (FirstError  *f,
                       GError     **error)
{
  gboolean ok = f->error == NULL;

  if (!ok)
    g_propagate_error (error, g_steal_pointer (&f->error));
  g_mutex_clear (&f->lock);
  return ok;
}

/* V's columns of one cell quantized over [0, *len): column d's floats at
 * v[d · v_stride …], its int8 values at q[d · q_stride …], its exponent
 * e[d] and its largest |value| max[d]. The cache keeps one per cell (for
 * decode); each worker of a prompt's attention keeps its own. */
typedef struct
{
  const float *v;
  gsize        v_stride;
  gint8       *q;
  gsize        q_stride;
  gint32      *e;
  float       *max;
  guint       *len;
} Columns;

static Columns
cache_columns (DcHfKvCache *cache,
               gsize        lg)
{
  const gsize D = cache->model->config.head_dim, ctx = cache->context;
  Columns cols = {
    .v = cache->v + lg * D * ctx,
    .v_stride = ctx,
    .q = cache->vq + lg * D * ctx,
    .q_stride = ctx,
    .e = cache->ve + lg * D,
    .max = cache->vmax + lg * D,
    .len = cache->vq_len + lg,
  };

  return cols;
}

/* Packs the D columns over [0, len): what the packer gives for vectors of
 * length len. Their largest |values| (for columns_extend) only WITH_MAX. */
static gboolean
columns_pack (Columns  *cols,
              gsize     D,
              gsize     len,
              gboolean  with_max,
              GError  **error)
{
  for (gsize d = 0; d < D; d++)
    {
      const float *col = cols->v + d * cols->v_stride;
      float m = 0.0f;
      DcQuantMatrix view;

      if (!pack_into ("attention V", col, 1, len, len, 1, cols->q + d * cols->q_stride,
                      cols->e + d, &view, error))
        return FALSE;
      for (gsize t = 0; with_max && t < len; t++)
        m = MAX (m, ABS (col[t]));
      cols->max[d] = m;
    }
  *cols->len = (guint) len;
  return TRUE;
}

/* Adds position pos (= *len) to the quantized columns. A vector's exponent
 * depends only on its largest |value| and each value's int8 only on itself
 * and the exponent (the INT8 rule), so packing the pair (x, the column's new
 * maximum) gives x's int8 and the column's exponent exactly; only when that
 * exponent changes is the column packed anew, which happens about log2 of
 * the column's range times, not per position. */
static gboolean
columns_extend (Columns  *cols,
                gsize     D,
                gsize     pos,
                GError  **error)
{
  for (gsize d = 0; d < D; d++)
    {
      const float *col = cols->v + d * cols->v_stride;
      const float x = col[pos];
      const float m = pos == 0 ? ABS (x) : MAX (cols->max[d], ABS (x));
      const float pair[2] = { x, m };
      gint8 q[2];
      gint32 e;
      DcQuantMatrix view;

      if (!pack_into ("attention V", pair, 1, 2, 2, 1, q, &e, &view, error))
        return FALSE;
      if (pos == 0 || e == cols->e[d])
        {
          cols->q[d * cols->q_stride + pos] = q[0];
          cols->e[d] = e;
          cols->max[d] = m;
        }
      else
        {
          DcQuantMatrix col_view;

          if (!pack_into ("attention V", col, 1, pos + 1, pos + 1, 1, cols->q + d * cols->q_stride,
                          cols->e + d, &col_view, error))
            return FALSE;
          cols->max[d] = m;
        }
    }
  *cols->len = (guint) pos + 1;
  return TRUE;
}

/* V's columns over [0, pos] for the query at POS, into VT (D contiguous
 * vectors of length pos + 1 at Q, their exponents at E). */
static gboolean
columns_for_query (Columns        *cols,
                   gsize           D,
                   gsize           pos,
                   gint8          *q,
                   gint32         *e,
                   DcQuantMatrix  *vt,
                   GError        **error)
{
  const gsize len = pos + 1;

  if (*cols->len == pos ? !columns_extend (cols, D, pos, error)
                        : !columns_pack (cols, D, len, TRUE, error))
    return FALSE;
  for (gsize d = 0; d < D; d++)
    memcpy (q + d * len, cols->q + d * cols->q_stride, len);
  memcpy (e, cols->e, D * sizeof (gint32));
  vt->n_vectors = D;
  vt->k = len;
  vt->q = q;
  vt->exponent = e;
  return TRUE;
}

/* Queries per unit of a prompt's attention: a unit packs its V columns
 * once (D × its first position's keys) and extends them query by query,
 * so smaller units repeat that pack more often; 4 gives a 64-token chunk
 * 16 units per KV head, enough to spread over 16 threads, while the
 * repeated packs stay under a quarter of the columns' work. */
#define ATTENTION_QUERIES 4

/* One worker's buffers for attention units. Sized for the chunk's keys
 * (end); the prompt's units build their V columns here, not in the cache,
 * so that units of one head can run at once. */
typedef struct
{
  gint8  *qq;       /* the unit's queries: (ATTENTION_QUERIES · G, D) */
  gint32 *qe;
  float  *scores;   /* (ATTENTION_QUERIES · G, end) */
  gint8  *pq;       /* P: (G, end) */
  gint32 *pe;
  gint8  *vt;       /* V's columns for the product: (D, len) */
  gint32 *vte;
  gint8  *cq;       /* the columns over the unit's widest prefix: (D, end) */
  gint32 *ce;
  float  *cmax;
  guint   clen;
  gint32 *first_e;  /* the exponents of the columns over the first query's prefix */
} AttentionScratch;

typedef struct
{
  DcHfModel        *self;
  DcHfKvCache      *cache;
  Scratch          *s;
  guint             l;
  guint             p0;
  gsize             units_per_head;
  AttentionScratch *workers;
  FirstError        failed;
} AttentionPass;

static void
attention_scratch_free (AttentionScratch *w)
{
  g_free (w->qq);
  g_free (w->qe);
  g_free (w->scores);
  g_free (w->pq);
  g_free (w->pe);
  g_free (w->vt);
  g_free (w->vte);
  g_free (w->cq);
  g_free (w->ce);
  g_free (w->cmax);
  g_free (w->first_e);
}

/* For units over up to `end` keys. */
static gboolean
attention_scratch_init (AttentionScratch *w,
                        const DcHfConfig *c,
                        gsize             end)
{
  const gsize D = c->head_dim, G = c->n_heads / c->n_kv_heads;
  const gsize R = ATTENTION_QUERIES * G, columns = D * end;

  w->qq = g_try_malloc (R * D);
  w->qe = g_try_new (gint32, R);
  w->scores = g_try_new (float, R * end);
  w->pq = g_try_malloc (G * end);
  w->pe = g_try_new (gint32, G);
  w->vt = g_try_malloc (D * end);
  w->vte = g_try_new (gint32, D);
  w->cq = g_try_malloc (columns);
  w->ce = g_try_new (gint32, D);
  w->cmax = g_try_new (float, D);
  w->first_e = g_try_new (gint32, D);
  return w->first_e != NULL && w->qq != NULL && w->qe != NULL && w->scores != NULL && w->pq != NULL &&
         w->pe != NULL && w->vt != NULL && w->vte != NULL && w->cq != NULL && w->ce != NULL &&
         w->cmax != NULL;
}

/* c = a · bᵀ on the CPU backend: attention's products, small and run from
 * the pool's threads (a device backend is not for several threads at once). */
static gboolean
product_cpu (DcHfModel            *self,
             const DcQuantMatrix  *a,
             const DcQuantMatrix  *b,
             float                *c,
             GError              **error)
{
  return dc_gemm_run_packed (self->cpu != NULL ? self->cpu : self->backend, a, b, c, error);
}

/* The first key a query at POS sees: 0, or past the sliding window. */
static gsize
window_start (const DcHfConfig *c,
              gsize             pos)
{
  return c->sliding_window > 0 && pos + 1 > c->sliding_window ? pos + 1 - c->sliding_window : 0;
}

/* V's columns over [0, len) for a query of a prompt's unit, into VT. WIDE
 * holds them packed over the unit's widest prefix. The unit's first query
 * packs its own; the exponents of those and of WIDE bracket every query's
 * between (a column's exponent only grows with its largest |value|), so
 * where the two are equal each later query's column is WIDE's prefix, bit
 * for bit (a value's int8 depends only on itself and the exponent); the
 * few others are packed for the query. This replaces D two-value packs per
 * query, a tenth of a one-thread prefill. */
static gboolean
unit_columns (AttentionScratch *w,
              const Columns    *wide,
              gsize             D,
              gboolean          first,
              gsize             len,
              DcQuantMatrix    *vt,
              GError          **error)
{
  if (first)
    {
      if (!pack_into ("attention V", wide->v, D, len, wide->v_stride, 1, w->vt, w->vte, vt,
                      error))
        return FALSE;
      memcpy (w->first_e, w->vte, D * sizeof (gint32));
      return TRUE;
    }
  for (gsize d = 0; d < D; d++)
    if (w->first_e[d] == wide->e[d])
      {
        memcpy (w->vt + d * len, wide->q + d * wide->q_stride, len);
        w->vte[d] = wide->e[d];
      }
    else
      {
        DcQuantMatrix one;

        if (!pack_into ("attention V", wide->v + d * wide->v_stride, 1, len, len, 1,
                        w->vt + d * len, w->vte + d, &one, error))
          return FALSE;
      }
  vt->n_vectors = D;
  vt->k = len;
  vt->q = w->vt;
  vt->exponent = w->vte;
  return TRUE;
}

/* One unit: queries [i0, i1) of the chunk against KV head g. Each query
 * sees keys [0, pos] only, so the unit's scores stop at its last query's
 * position (an output depends only on its own two vectors: the same bits as
 * scoring every key). Writes only its queries' rows of s->att. */
static gboolean
attention_unit (AttentionPass    *p,
                AttentionScratch *w,
                gsize             g,
                gsize             i0,
                gsize             i1,
                GError          **error)
{
  DcHfModel *self = p->self;
  DcHfKvCache *cache = p->cache;
  Scratch *s = p->s;
  const DcHfConfig *c = &self->config;
  const gsize D = c->head_dim, Hq = c->n_heads, Hkv = c->n_kv_heads, G = Hq / Hkv;
  const gsize lg = (gsize) p->l * Hkv + g, cell = lg * cache->context;
  const gsize keys_end = p->p0 + i1;
  /* 1/√D in f32 (√ is correctly rounded), as transformers' head_dim ** -0.5. */
  const float scale = 1.0f / __builtin_sqrtf ((float) D);
  const float *values_t = cache->v + cell * D;   /* (D, context) */
  DcQuantMatrix a, keys = {
    .n_vectors = keys_end,
    .k = D,
    .q = cache->k_q + cell * D,
    .exponent = cache->k_e + cell,
  };
  /* A decode step (one query) keeps the cache's columns up to date. */
  Columns cols = cache_columns (cache, lg);
  /* A prompt's unit packs the columns over its first query's prefix and
   * over its last unwindowed query's (`wide`); see unit_columns. */
  Columns wide = {
    .v = values_t,
    .v_stride = cache->context,
    .q = w->cq,
    .q_stride = p->p0 + s->n,
    .e = w->ce,
    .max = w->cmax,
    .len = &w->clen,
  };
  gsize last0 = i0;

  w->clen = G_MAXUINT;
  if (s->n > 1 && !cache->repack && window_start (c, p->p0 + i0) == 0)
    {
      while (last0 + 1 < i1 && window_start (c, p->p0 + last0 + 1) == 0)
        last0++;
      /* Only the unit that hands its columns to the cache needs their maxima. */
      if (!columns_pack (&wide, D, p->p0 + last0 + 1, last0 + 1 == s->n, error))
        return FALSE;
    }
  /* The G query heads of group g, for each of the unit's positions: ((i1 - i0) G, D). */
  for (gsize i = i0; i < i1; i++)
    if (!pack_into ("attention Q", s->qkv + i * self->n_qkv + g * G * D, G, D, D, 1,
                    w->qq + (i - i0) * G * D, w->qe + (i - i0) * G, &a, error))
      return FALSE;
  a.n_vectors = (i1 - i0) * G;
  a.q = w->qq;
  a.exponent = w->qe;
  if (!product_cpu (self, &a, &keys, w->scores, error))
    return FALSE;

  for (gsize i = i0; i < i1; i++)
    {
      const gsize pos = p->p0 + i;
      const gsize start = window_start (c, pos);
      const gsize len = pos + 1 - start;
      DcQuantMatrix pm, vt;
      gboolean ok;

      for (gsize j = 0; j < G; j++)
        {
          float *row = w->scores + ((i - i0) * G + j) * keys_end + start;

          for (gsize t = 0; t < len; t++)
            row[t] *= scale;
          dc_math_softmax (row, row, len);
        }
      /* P (G, len) · V[start … pos] (len, D): V's columns are the vectors,
       * quantized over exactly [start, pos]. */
      if (!pack_into ("attention P", w->scores + (i - i0) * G * keys_end + start, G, len,
                      keys_end, 1, w->pq, w->pe, &pm, error))
        return FALSE;
      if (start > 0 || cache->repack)
        ok = pack_into ("attention V", values_t + start, D, len, cache->context, 1,
                        w->vt, w->vte, &vt, error);
      else if (s->n == 1)
        ok = columns_for_query (&cols, D, pos, w->vt, w->vte, &vt, error);
      else
        ok = unit_columns (w, &wide, D, i == i0, len, &vt, error);
      if (!ok || !product_cpu (self, &pm, &vt, s->att + i * Hq * D + g * G * D, error))
        return FALSE;
    }

  /* The unit with the prompt's last query leaves its columns in the cache
   * for the decode steps that follow. */
  if (s->n > 1 && i1 == s->n && w->clen == p->p0 + s->n)
    {
      for (gsize d = 0; d < D; d++)
        memcpy (cols.q + d * cols.q_stride, wide.q + d * wide.q_stride, w->clen);
      memcpy (cols.e, wide.e, D * sizeof (gint32));
      memcpy (cols.max, wide.max, D * sizeof (float));
      *cols.len = w->clen;
    }
  return TRUE;
}

static void
attention_chunk (gsize    u0,
                 gsize    u1,
                 guint    worker,
                 gpointer data)
{
  AttentionPass *p = data;

  for (gsize u = u0; u < u1; u++)
    {
      const gsize g = u / p->units_per_head, i0 = (u % p->units_per_head) * ATTENTION_QUERIES;
      GError *error = NULL;

      if (!attention_unit (p, &p->workers[worker], g, i0, MIN (i0 + ATTENTION_QUERIES, p->s->n),
                           &error))
        first_error_take (&p->failed, u, error);
    }
}

/* Attention of the chunk's n queries (positions p0 …) over the cache, on
 * the pool: units of ATTENTION_QUERIES queries × one KV head, each computed
 * whole by one thread with the same operations as one query at a time, so
 * the bits depend neither on the thread count nor on the split into calls. */
static gboolean
attention (DcHfModel        *self,
           DcHfKvCache      *cache,
           guint             l,
           Scratch          *s,
           guint             p0,
           AttentionScratch *workers,
           guint             n_threads,
           GError          **error)
{
  const gsize Hkv = self->config.n_kv_heads;
  AttentionPass p = {
    .self = self,
    .cache = cache,
    .s = s,
    .l = l,
    .p0 = p0,
    .units_per_head = (s->n + ATTENTION_QUERIES - 1) / ATTENTION_QUERIES,
    .workers = workers,
  };

  g_mutex_init (&p.failed.lock);
  /* The prompt's units build their own columns: the cache's are stale
   * until the last unit of each head hands its columns over. */
  if (s->n > 1)
    for (gsize g = 0; g < Hkv; g++)
      cache->vq_len[(gsize) l * Hkv + g] = G_MAXUINT;
  dc_parallel_for (n_threads, Hkv * p.units_per_head, 1, attention_chunk, &p);
  return first_error_propagate (&p.failed, error);
}

typedef struct
{
  DcHfModel   *self;
  DcHfKvCache *cache;
  Scratch     *s;
  guint        l;
  guint        p0;
  FirstError   failed;
} AppendPass;

/* Appends the chunk's keys and values of KV heads [g0, g1) to the cache,
 * after RoPE on them and on their groups' query heads. A KV head's values
 * are one contiguous block of the cache, (D, context): split by head, not by
 * position, no two threads write the same page (a fresh cache's first
 * touches are page faults, which two threads on one page serialize) or the
 * same cache line. */
static void
append_chunk (gsize    g0,
              gsize    g1,
              guint    worker,
              gpointer data)
{
  AppendPass *p = data;
  DcHfModel *self = p->self;
  DcHfKvCache *cache = p->cache;
  Scratch *s = p->s;
  const DcHfConfig *c = &self->config;
  const gsize D = c->head_dim, Hq = c->n_heads, Hkv = c->n_kv_heads, G = Hq / Hkv;

  for (gsize g = g0; g < g1; g++)
    for (gsize i = 0; i < s->n; i++)
      {
        float *row = s->qkv + i * self->n_qkv;
        const gsize cell = ((gsize) p->l * Hkv + g) * cache->context + p->p0 + i;
        float *values_t = cache->v + ((gsize) p->l * Hkv + g) * D * cache->context + p->p0 + i;
        DcQuantMatrix key;
        GError *error = NULL;

        if (c->family == DC_HF_FAMILY_LLAMA)
          {
            const float *cos = s->rope_cos + i * (D / 2), *sin = s->rope_sin + i * (D / 2);

            for (gsize h = g * G; h < (g + 1) * G; h++)
              dc_math_rope_apply (row + h * D, cos, sin, D);
            dc_math_rope_apply (row + (Hq + g) * D, cos, sin, D);
          }
        if (!pack_into ("attention K", row + (Hq + g) * D, 1, D, D, 1, cache->k_q + cell * D,
                        cache->k_e + cell, &key, &error))
          {
            first_error_take (&p->failed, g * s->n + i, error);
            return;
          }
        for (gsize d = 0; d < D; d++)
          values_t[d * cache->context] = row[(Hq + Hkv + g) * D + d];
      }
}

/* Appends the chunk's keys and values (after RoPE) to the cache. */
static gboolean
append_kv (DcHfModel   *self,
           DcHfKvCache *cache,
           guint        l,
           Scratch     *s,
           guint        p0,
           guint        n_threads,
           GError     **error)
{
  AppendPass p = { self, cache, s, l, p0 };

  g_mutex_init (&p.failed.lock);
  dc_parallel_for (n_threads, self->config.n_kv_heads, 1, append_chunk, &p);
  return first_error_propagate (&p.failed, error);
}

/* Writes zeros where the chunk's positions [p0, end) go in the cache, on
 * the caller, before the pool's threads write them there: a fresh cache's
 * first touches are page faults, and taken by two threads at once they
 * cost 15 ms of a 64-token prefill's 75 on the 2-vCPU VM (a paravirtualized
 * MMU), against 2 ms on one thread. Only the pages the chunk needs: a cache
 * made for a long context costs memory as it fills, not at once. */
static void
cache_touch (DcHfKvCache *cache,
             gsize        p0,
             gsize        end)
{
  const gsize D = cache->model->config.head_dim, ctx = cache->context;
  const gsize cells = (gsize) cache->n_layers * cache->model->config.n_kv_heads;

  for (gsize cell = 0; cell < cells; cell++)
    {
      memset (cache->k_q + (cell * ctx + p0) * D, 0, (end - p0) * D);
      for (gsize d = 0; d < D; d++)
        {
          memset (cache->v + (cell * D + d) * ctx + p0, 0, (end - p0) * sizeof (float));
          memset (cache->vq + (cell * D + d) * ctx + p0, 0, end - p0);
        }
    }
}

/* A forward's buffers, kept by the model between calls: allocated anew for
 * every call, the 64-row chunk's 2.5 MB (SmolLM-135M) came back from the
 * allocator as fresh pages each time, and their first touches, page faults
 * taken by the pool's threads at once, cost a fifth of a 2-thread prefill
 * on the 2-vCPU VM (a paravirtualized MMU). */
struct _Kept
{
  Scratch           s;          /* for `rows` positions */
  gsize             rows;
  AttentionScratch *workers;    /* n_workers, for up to `end` keys */
  guint             n_workers;
  gsize             end;
};

static void
kept_clear (Kept *kept)
{
  scratch_clear (&kept->s);
  for (guint w = 0; w < kept->n_workers; w++)
    attention_scratch_free (&kept->workers[w]);
  g_free (kept->workers);
  memset (kept, 0, sizeof *kept);
}

static void
kept_free (Kept *kept)
{
  kept_clear (kept);
  g_free (kept);
}

/* Makes KEPT hold buffers for n positions, attention over `end` keys and
 * n_threads workers. The workers' buffers grow by doubling, up to the
 * cache's context (`most`), so that a decode step, one key longer each time,
 * rarely reallocates them. */
static gboolean
kept_reserve (DcHfModel  *self,
              Kept       *kept,
              gsize       n,
              gsize       end,
              gsize       most,
              guint       n_threads,
              GError    **error)
{
  const DcHfConfig *c = &self->config;
  const gsize C = c->hidden_size, F = c->intermediate_size, D = c->head_dim;
  const gsize QD = (gsize) c->n_heads * D;
  const gsize widest = MAX (MAX (C, F), MAX (QD, self->n_up));

  if (n > kept->rows)
    {
      Scratch *s = &kept->s;

      scratch_clear (s);
      s->x = g_new (float, n * C);
      s->h = g_new (float, n * widest);
      s->qkv = g_new (float, n * self->n_qkv);
      s->att = g_new (float, n * QD);
      s->mlp = g_new (float, n * self->n_up);
      s->tmp = g_new (float, n * C);
      s->rope_cos = g_new (float, n * (D / 2));
      s->rope_sin = g_new (float, n * (D / 2));
      s->qa = g_malloc (n * widest);
      s->ea = g_new (gint32, n);
      kept->rows = n;
    }
  if (end > kept->end || n_threads > kept->n_workers)
    {
      const gsize keys = MAX (end, MIN (most, 2 * kept->end));
      const guint workers = MAX (n_threads, kept->n_workers);

      for (guint w = 0; w < kept->n_workers; w++)
        attention_scratch_free (&kept->workers[w]);
      g_free (kept->workers);
      kept->workers = g_new0 (AttentionScratch, workers);
      kept->n_workers = workers;
      kept->end = keys;
      for (guint w = 0; w < workers; w++)
        if (!attention_scratch_init (&kept->workers[w], c, keys))
          {
            /* Leave nothing half made: the next call starts over. */
            for (guint v = 0; v < workers; v++)
              attention_scratch_free (&kept->workers[v]);
            memset (kept->workers, 0, workers * sizeof *kept->workers);
            kept->end = 0;
            g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE,
                         "not enough memory for attention over %zu positions", end);
            return FALSE;
          }
    }
  return TRUE;
}

/* The chunk's n positions (p0 = the cache's length …) through the part's
 * layers. With IDS they are embedded first (the part has the ends); else
 * X holds their hidden states (n, C). With X, the states after the last
 * layer are written back to it; with LOGITS, the last position's logits
 * (the part has the ends). */
static gboolean
forward_chunk (DcHfModel     *self,
               DcHfKvCache   *cache,
               const guint32 *ids,
               float         *x,
               gsize          n,
               float         *logits,
               GError       **error)
{
  const DcHfConfig *c = &self->config;
  const gsize C = c->hidden_size, D = c->head_dim;
  const guint p0 = cache->length;
  const gsize end = p0 + n;
  const gboolean gpt2 = c->family == DC_HF_FAMILY_GPT2;
  /* A prompt's per-position passes (appending keys, attention) spread over
   * the backend's threads; a decode step's stay on the caller. */
  const guint n_threads = pass_threads (self, n);
  const gboolean keep = g_mutex_trylock (&self->kept_lock);
  Kept local = { 0 }, *kept = &local;
  AttentionScratch *workers;
  Scratch s;
  gboolean ok = FALSE;

  if (keep)
    {
      if (self->kept == NULL)
        self->kept = g_new0 (Kept, 1);
      kept = self->kept;
    }
  if (!kept_reserve (self, kept, n, end, keep ? cache->context : end, n_threads, error))
    goto out;
  s = kept->s;
  s.n = n;
  workers = kept->workers;

  for (gsize i = 0; i < n; i++)
    {
      if (ids != NULL)
        {
          const gsize esize = dc_safetensors_dtype_size (self->embed_dtype);

          dc_widen_to_f32 (self->embed_dtype, self->embed + (gsize) ids[i] * C * esize,
                           s.x + i * C, C);
          if (gpt2)
            for (gsize j = 0; j < C; j++)
              s.x[i * C + j] += self->positions[(gsize) (p0 + i) * C + j];
        }
      if (!gpt2)
        dc_math_rope_table ((float) c->rope_theta, D, p0 + i, s.rope_cos + i * (D / 2),
                            s.rope_sin + i * (D / 2));
    }
  if (ids == NULL)
    memcpy (s.x, x, n * C * sizeof (float));
  if (n > 1)
    cache_touch (cache, p0, end);

  for (guint l = self->first; l < self->last; l++)
    {
      const Layer *layer = &self->layers[l];
      const guint li = l - self->first;   /* the cache holds the part's layers */

      norm_rows (self, s.x, layer->norm1_w, layer->norm1_b, s.h, n);
      if (!linear (self, &s, "attention input", s.h, n, layer->qkv, layer->qkv_b, s.qkv, error) ||
          !append_kv (self, cache, li, &s, p0, n_threads, error))
        goto out;
      /* The chunk's keys are in the cache now; attention reads them there. */
      if (!attention (self, cache, li, &s, p0, workers, n_threads, error) ||
          !linear (self, &s, "attention output", s.att, n, layer->o, layer->o_b, s.tmp, error))
        goto out;
      {
        RowPass p = { self, s.tmp, NULL, NULL, s.x };

        residual_chunk (0, n, 0, &p);
      }

      norm_rows (self, s.x, layer->norm2_w, layer->norm2_b, s.h, n);
      if (!linear (self, &s, "MLP input", s.h, n, layer->up, layer->up_b, s.mlp, error))
        goto out;
      {
        RowPass p = { self, s.mlp, NULL, NULL, s.h };

        dc_parallel_for (pass_threads (self, n), n, 1, activation_chunk, &p);
      }
      if (!linear (self, &s, "MLP output", s.h, n, layer->down, layer->down_b, s.tmp, error))
        goto out;
      {
        RowPass p = { self, s.tmp, NULL, NULL, s.x };

        residual_chunk (0, n, 0, &p);
      }
    }

  cache->length = (guint) end;
  if (x != NULL)
    memcpy (x, s.x, n * C * sizeof (float));
  if (logits != NULL)
    {
      norm_rows (self, s.x + (n - 1) * C, self->norm_w, self->norm_b, s.h, 1);
      if (!linear (self, &s, "head", s.h, 1, self->head, NULL, logits, error))
        goto out;
    }
  ok = TRUE;

out:
  if (keep)
    g_mutex_unlock (&self->kept_lock);
  else
    kept_clear (&local);
  return ok;
}

/* The checks every forward call makes before touching the cache. */
static gboolean
check_call (DcHfModel      *self,
            DcHfKvCache    *cache,
            const guint32  *ids,
            gsize           n,
            GError        **error)
{
  /* The environment is per thread and the caller's thread may change. */
  if (!dc_math_check_fp_environment (error))
    return FALSE;
  if (n == 0)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                   "no tokens to run the model on");
      return FALSE;
    }
  if (n > cache->context - cache->length)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE,
                   "the context is full: %u of %u positions used, %zu more asked for",
                   cache->length, cache->context, n);
      return FALSE;
    }
  for (gsize i = 0; ids != NULL && i < n; i++)
    if (ids[i] >= self->config.vocab_size)
      {
        g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                     "token id %u is outside the vocabulary (%u tokens)", ids[i],
                     self->config.vocab_size);
        return FALSE;
      }
  return TRUE;
}

/**
 * dc_hf_model_forward_part:
 * @ids: (array length=n) (nullable): token ids to embed (the part has the ends), or %NULL
 * @x: (array) (inout): n × hidden_size floats: the input states when @ids is
 *   %NULL; the states after the part's last layer on return
 *
 * A ring stage's step: appends @n positions to @cache through the part's
 * layers. The same bits as the whole model's forward up to that layer.
 */
gboolean
dc_hf_model_forward_part (DcHfModel      *self,
                          DcHfKvCache    *cache,
                          const guint32  *ids,
                          float          *x,
                          gsize           n,
                          GError        **error)
{
  const gsize C = self->config.hidden_size;

  g_return_val_if_fail (self != NULL && cache != NULL && x != NULL, FALSE);
  g_return_val_if_fail (cache->model == self, FALSE);
  g_return_val_if_fail (ids == NULL || self->ends, FALSE);

  if (!check_call (self, cache, ids, n, error))
    return FALSE;
  for (gsize done = 0; done < n; done += DC_HF_MODEL_CHUNK)
    {
      gsize m = MIN ((gsize) DC_HF_MODEL_CHUNK, n - done);

      if (!forward_chunk (self, cache, ids != NULL ? ids + done : NULL, x + done * C, m, NULL,
                          error))
        return FALSE;
    }
  return TRUE;
}

/**
 * dc_hf_model_head:
 * @x: (array): one position's state after the last layer (hidden_size floats)
 * @logits: (out caller-allocates): vocab_size floats
 *
 * The final norm and the head, as dc_hf_model_forward() ends (the part has the ends).
 */
gboolean
dc_hf_model_head (DcHfModel    *self,
                  const float  *x,
                  float        *logits,
                  GError      **error)
{
  const DcHfConfig *c;
  Scratch s = { 0 };
  gboolean ok;

  g_return_val_if_fail (self != NULL && self->ends && x != NULL && logits != NULL, FALSE);
  c = &self->config;

  if (!dc_math_check_fp_environment (error))
    return FALSE;
  s.n = 1;
  s.h = g_new (float, c->hidden_size);
  s.qa = g_malloc (c->hidden_size);
  s.ea = g_new (gint32, 1);
  norm_rows (self, x, self->norm_w, self->norm_b, s.h, 1);
  ok = linear (self, &s, "head", s.h, 1, self->head, NULL, logits, error);
  scratch_clear (&s);
  return ok;
}

guint
dc_hf_model_get_first_layer (DcHfModel *self)
{
  g_return_val_if_fail (self != NULL, 0);
  return self->first;
}

guint
dc_hf_model_get_last_layer (DcHfModel *self)
{
  g_return_val_if_fail (self != NULL, 0);
  return self->last;
}

/**
 * dc_hf_model_forward:
 * @ids: (array length=n_ids): token ids, each below vocab_size
 * @logits: (out caller-allocates) (nullable): vocab_size floats, the last position's
 *
 * On failure the cache is left as it was before the call when the ids or
 * the context were refused; after a failure inside the computation (out of
 * memory, a NaN) its length is unspecified and it should be reset.
 */
gboolean
dc_hf_model_forward (DcHfModel      *self,
                     DcHfKvCache    *cache,
                     const guint32  *ids,
                     gsize           n_ids,
                     float          *logits,
                     GError        **error)
{
  g_return_val_if_fail (self != NULL && cache != NULL, FALSE);
  g_return_val_if_fail (cache->model == self, FALSE);
  g_return_val_if_fail (ids != NULL || n_ids == 0, FALSE);

  g_return_val_if_fail (self->ends && self->first == 0 &&
                        self->last == self->config.n_layers, FALSE);

  if (!check_call (self, cache, ids, n_ids, error))
    return FALSE;
  for (gsize done = 0; done < n_ids; done += DC_HF_MODEL_CHUNK)
    {
      gsize n = MIN ((gsize) DC_HF_MODEL_CHUNK, n_ids - done);

      if (!forward_chunk (self, cache, ids + done, NULL, n, done + n == n_ids ? logits : NULL,
                          error))
        return FALSE;
    }
  return TRUE;
}
