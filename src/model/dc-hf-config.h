/* dc-hf-config.h: a Hugging Face config.json for the architectures this
 * build runs: the Llama family (Llama, Mistral, Qwen2/2.5, SmolLM,
 * TinyLlama) and GPT-2.
 *
 * Both spellings the Hub uses are read: rope_theta at the top level or in
 * rope_parameters, torch_dtype or dtype. head_dim is given or derived,
 * num_key_value_heads defaults to the head count. Anything else is refused
 * with "unsupported architecture" naming what was found.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* config.json is a few KB; 1 MiB and depth 16 leave room for nested sub-configs. */
#define DC_HF_CONFIG_MAX_BYTES  (1024u * 1024u)
#define DC_HF_CONFIG_MAX_DEPTH  16
/* Ranges the loaders accept; the largest open models stay well inside them
 * (Llama 3.1 405B: hidden 16384, 126 layers, 128 heads, FFN 53248, 131072 positions). */
#define DC_HF_MAX_HIDDEN        65536
#define DC_HF_MAX_LAYERS        1024
#define DC_HF_MAX_HEADS         1024
#define DC_HF_MAX_INTERMEDIATE  (1u << 20)
#define DC_HF_MAX_POSITIONS     (1u << 24)
#define DC_HF_MAX_VOCAB         (1u << 20)   /* as DC_BPE_MAX_VOCAB */
/* End-of-text ids kept from a list: models list one to three. */
#define DC_HF_MAX_EOS_IDS       8

typedef enum
{
  DC_HF_FAMILY_LLAMA,    /* RMSNorm, RoPE, SwiGLU, grouped-query attention */
  DC_HF_FAMILY_GPT2,     /* LayerNorm, learned positions, GELU MLP, Conv1D layout */
} DcHfFamily;

typedef struct
{
  DcHfFamily  family;
  char       *architecture;       /* architectures[0], or the model_type */
  char       *model_type;         /* "llama", "mistral", "qwen2", "gpt2" */
  char       *dtype;              /* "float32", "float16" or "bfloat16" */
  guint       vocab_size;
  guint       hidden_size;
  guint       n_layers;
  guint       n_heads;
  guint       n_kv_heads;
  guint       head_dim;
  guint       intermediate_size;
  guint       max_positions;
  guint       sliding_window;     /* 0: none */
  double      rope_theta;         /* Llama family */
  double      norm_eps;           /* rms_norm_eps or layer_norm_epsilon */
  gint64      bos_token_id;       /* -1 when absent */
  gint64      eos_token_id;       /* -1 when absent; the first of a list */
  guint       n_eos_token_ids;    /* every end-of-text id given (Llama 3.1 lists 3) */
  gint64      eos_token_ids[DC_HF_MAX_EOS_IDS];
  guint       tie_word_embeddings : 1;
  guint       qkv_bias : 1;       /* Qwen2 always; Llama with attention_bias */
  guint       o_bias : 1;         /* Llama with attention_bias */
  guint       mlp_bias : 1;
} DcHfConfig;

DcHfConfig *dc_hf_config_parse           (const char  *json,
                                          gssize       len,
                                          GError     **error);
DcHfConfig *dc_hf_config_new_from_file   (const char  *path,
                                          GError     **error);
void        dc_hf_config_free            (DcHfConfig  *self);
guint64     dc_hf_config_n_params        (const DcHfConfig *self);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcHfConfig, dc_hf_config_free)

G_END_DECLS
