/* dc-hf-config.c: config.json for the Llama family and GPT-2.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-model"

#include "config.h"

#include "dc-hf-config.h"

#include <string.h>
#include <json-glib/json-glib.h>

#include "dc-json-bounds.h"
#include "dc-model-error.h"
#include "dc-regular-file.h"

void
dc_hf_config_free (DcHfConfig *self)
{
  if (self == NULL)
    return;
  g_free (self->architecture);
  g_free (self->model_type);
  g_free (self->dtype);
  g_free (self);
}

static const char *
get_string (JsonObject *object,
            const char *member)
{
  JsonNode *node = json_object_get_member (object, member);

  if (node == NULL || json_node_get_value_type (node) != G_TYPE_STRING)
    return NULL;
  return json_node_get_string (node);
}

/* Reads an integer in [min, max]; absent or null gives @fallback, or an error
 * when @fallback is REQUIRED. */
#define REQUIRED G_MAXUINT64

static gboolean
get_uint (JsonObject  *object,
          const char  *member,
          guint64      min,
          guint64      max,
          guint64      fallback,
          guint       *out,
          GError     **error)
{
  JsonNode *node = json_object_get_member (object, member);
  gint64 v;

  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    {
      if (fallback == REQUIRED)
        {
          g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                       "config.json has no “%s”", member);
          return FALSE;
        }
      *out = (guint) fallback;
      return TRUE;
    }
  if (json_node_get_value_type (node) != G_TYPE_INT64 ||
      (v = json_node_get_int (node)) < (gint64) min || (guint64) v > max)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_DIMS,
                   "config.json “%s” must be an integer from %" G_GUINT64_FORMAT " to %"
                   G_GUINT64_FORMAT, member, min, max);
      return FALSE;
    }
  *out = (guint) v;
  return TRUE;
}

static gboolean
get_double (JsonObject  *object,
            const char  *member,
            double       fallback,
            double      *out,
            GError     **error)
{
  JsonNode *node = json_object_get_member (object, member);
  GType type;

  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    {
      *out = fallback;
      return TRUE;
    }
  type = json_node_get_value_type (node);
  if (type != G_TYPE_INT64 && type != G_TYPE_DOUBLE)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                   "config.json “%s” is not a number", member);
      return FALSE;
    }
  *out = json_node_get_double (node);
  return TRUE;
}

static gboolean
get_flag (JsonObject *object,
          const char *member,
          gboolean    fallback)
{
  JsonNode *node = json_object_get_member (object, member);

  if (node == NULL || json_node_get_value_type (node) != G_TYPE_BOOLEAN)
    return fallback;
  return json_node_get_boolean (node);
}

/* A token id, or the first of a list of them (Llama 3.1 lists several EOS ids). */
static gint64
get_token_id (JsonObject *object,
              const char *member)
{
  JsonNode *node = json_object_get_member (object, member);

  if (node != NULL && JSON_NODE_HOLDS_ARRAY (node) &&
      json_array_get_length (json_node_get_array (node)) > 0)
    node = json_array_get_element (json_node_get_array (node), 0);
  if (node == NULL || json_node_get_value_type (node) != G_TYPE_INT64 ||
      json_node_get_int (node) < 0 || json_node_get_int (node) >= DC_HF_MAX_VOCAB)
    return -1;
  return json_node_get_int (node);
}

/* Every valid id of eos_token_id (a number or a list), up to DC_HF_MAX_EOS_IDS. */
static void
get_eos_ids (DcHfConfig *self,
             JsonObject *object)
{
  JsonNode *node = json_object_get_member (object, "eos_token_id");
  JsonArray *list;

  self->n_eos_token_ids = 0;
  if (node == NULL)
    return;
  if (!JSON_NODE_HOLDS_ARRAY (node))
    {
      if (self->eos_token_id >= 0)
        self->eos_token_ids[self->n_eos_token_ids++] = self->eos_token_id;
      return;
    }
  list = json_node_get_array (node);
  for (guint i = 0; i < json_array_get_length (list) && self->n_eos_token_ids < DC_HF_MAX_EOS_IDS;
       i++)
    {
      JsonNode *e = json_array_get_element (list, i);

      if (json_node_get_value_type (e) == G_TYPE_INT64 && json_node_get_int (e) >= 0
          && json_node_get_int (e) < DC_HF_MAX_VOCAB)
        self->eos_token_ids[self->n_eos_token_ids++] = json_node_get_int (e);
    }
}

static gboolean
parse_llama (DcHfConfig  *self,
             JsonObject  *object,
             GError     **error)
{
  JsonNode *rope = json_object_get_member (object, "rope_parameters");
  JsonNode *scaling = json_object_get_member (object, "rope_scaling");
  JsonObject *rope_object = NULL;
  const char *act = get_string (object, "hidden_act");
  const char *rope_type = NULL;
  guint derived;

  if (!get_uint (object, "vocab_size", 1, DC_HF_MAX_VOCAB, REQUIRED, &self->vocab_size, error) ||
      !get_uint (object, "hidden_size", 1, DC_HF_MAX_HIDDEN, REQUIRED, &self->hidden_size,
                 error) ||
      !get_uint (object, "num_hidden_layers", 1, DC_HF_MAX_LAYERS, REQUIRED, &self->n_layers,
                 error) ||
      !get_uint (object, "num_attention_heads", 1, DC_HF_MAX_HEADS, REQUIRED, &self->n_heads,
                 error) ||
      !get_uint (object, "num_key_value_heads", 1, DC_HF_MAX_HEADS, self->n_heads,
                 &self->n_kv_heads, error) ||
      !get_uint (object, "intermediate_size", 1, DC_HF_MAX_INTERMEDIATE, REQUIRED,
                 &self->intermediate_size, error) ||
      !get_uint (object, "max_position_embeddings", 1, DC_HF_MAX_POSITIONS, 2048,
                 &self->max_positions, error) ||
      !get_uint (object, "sliding_window", 0, DC_HF_MAX_POSITIONS, 0, &self->sliding_window,
                 error) ||
      !get_double (object, "rms_norm_eps", 1e-6, &self->norm_eps, error))
    return FALSE;

  if (self->hidden_size % self->n_heads != 0 && json_object_get_member (object, "head_dim") == NULL)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_DIMS,
                   "config.json hidden_size %u is not a multiple of num_attention_heads %u",
                   self->hidden_size, self->n_heads);
      return FALSE;
    }
  derived = self->hidden_size / self->n_heads;
  if (!get_uint (object, "head_dim", 1, DC_HF_MAX_HIDDEN, derived, &self->head_dim, error))
    return FALSE;
  if (self->n_heads % self->n_kv_heads != 0)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_DIMS,
                   "config.json num_attention_heads %u is not a multiple of num_key_value_heads %u",
                   self->n_heads, self->n_kv_heads);
      return FALSE;
    }
  /* RoPE rotates pairs of dimensions. */
  if (self->head_dim % 2 != 0)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_DIMS,
                   "config.json head_dim %u is odd; RoPE needs pairs", self->head_dim);
      return FALSE;
    }

  /* transformers 5 writes rope_parameters; older files rope_theta (and rope_scaling). */
  if (rope != NULL && JSON_NODE_HOLDS_OBJECT (rope))
    rope_object = json_node_get_object (rope);
  else if (scaling != NULL && JSON_NODE_HOLDS_OBJECT (scaling))
    rope_object = json_node_get_object (scaling);
  if (rope_object != NULL)
    {
      rope_type = get_string (rope_object, "rope_type");
      if (rope_type == NULL)
        rope_type = get_string (rope_object, "type");
    }
  if (rope_type != NULL && strcmp (rope_type, "default") != 0)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                   "unsupported architecture: RoPE scaling “%s” (only plain RoPE is supported)",
                   rope_type);
      return FALSE;
    }
  if (rope != NULL && JSON_NODE_HOLDS_OBJECT (rope) &&
      json_object_has_member (json_node_get_object (rope), "rope_theta"))
    {
      if (!get_double (json_node_get_object (rope), "rope_theta", 10000.0, &self->rope_theta,
                       error))
        return FALSE;
    }
  else if (!get_double (object, "rope_theta", 10000.0, &self->rope_theta, error))
    {
      return FALSE;
    }
  if (!(self->rope_theta > 0.0) || !(self->norm_eps > 0.0) || self->norm_eps > 1.0)
    {
      g_set_error_literal (error, DC_MODEL_ERROR, DC_MODEL_ERROR_DIMS,
                           "config.json rope_theta and rms_norm_eps must be positive");
      return FALSE;
    }
  if (act != NULL && strcmp (act, "silu") != 0)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                   "unsupported architecture: hidden_act “%s” (the Llama family uses silu)",
                   act);
      return FALSE;
    }

  /* Qwen2's attention always carries q/k/v biases (transformers hard-codes
   * them); Llama's follow attention_bias, which covers o_proj too. */
  if (strcmp (self->model_type, "qwen2") == 0)
    self->qkv_bias = TRUE;
  else if (get_flag (object, "attention_bias", FALSE))
    self->qkv_bias = self->o_bias = TRUE;
  self->mlp_bias = get_flag (object, "mlp_bias", FALSE);
  /* Qwen2 keeps sliding_window in the file but uses it only with use_sliding_window. */
  if (strcmp (self->model_type, "qwen2") == 0 && !get_flag (object, "use_sliding_window", FALSE))
    self->sliding_window = 0;
  self->tie_word_embeddings = get_flag (object, "tie_word_embeddings", FALSE);
  return TRUE;
}

static gboolean
parse_gpt2 (DcHfConfig  *self,
            JsonObject  *object,
            GError     **error)
{
  const char *act = get_string (object, "activation_function");
  guint inner;

  if (!get_uint (object, "vocab_size", 1, DC_HF_MAX_VOCAB, REQUIRED, &self->vocab_size, error) ||
      !get_uint (object, "n_embd", 1, DC_HF_MAX_HIDDEN, REQUIRED, &self->hidden_size, error) ||
      !get_uint (object, "n_layer", 1, DC_HF_MAX_LAYERS, REQUIRED, &self->n_layers, error) ||
      !get_uint (object, "n_head", 1, DC_HF_MAX_HEADS, REQUIRED, &self->n_heads, error) ||
      !get_uint (object, "n_positions", 1, DC_HF_MAX_POSITIONS, 1024, &self->max_positions,
                 error) ||
      !get_double (object, "layer_norm_epsilon", 1e-5, &self->norm_eps, error))
    return FALSE;
  if (self->hidden_size % self->n_heads != 0)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_DIMS,
                   "config.json n_embd %u is not a multiple of n_head %u",
                   self->hidden_size, self->n_heads);
      return FALSE;
    }
  /* n_inner null means 4 × n_embd. */
  inner = self->hidden_size <= DC_HF_MAX_INTERMEDIATE / 4 ? 4 * self->hidden_size
                                                          : DC_HF_MAX_INTERMEDIATE;
  if (!get_uint (object, "n_inner", 1, DC_HF_MAX_INTERMEDIATE, inner, &self->intermediate_size,
                 error))
    return FALSE;
  if (act != NULL && strcmp (act, "gelu_new") != 0 && strcmp (act, "gelu_pytorch_tanh") != 0)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                   "unsupported architecture: activation_function “%s” (GPT-2 uses gelu_new)",
                   act);
      return FALSE;
    }
  if (!(self->norm_eps > 0.0) || self->norm_eps > 1.0)
    {
      g_set_error_literal (error, DC_MODEL_ERROR, DC_MODEL_ERROR_DIMS,
                           "config.json layer_norm_epsilon must be positive");
      return FALSE;
    }
  /* The forward pass scales scores by 1/√head_dim, as every released GPT-2
   * does; these two switches change what the model computes, so a config
   * that sets them is refused rather than run wrong. (reorder_and_upcast_attn
   * changes only the precision of the f32 reference path: accepted.) */
  if (!get_flag (object, "scale_attn_weights", TRUE))
    {
      g_set_error_literal (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                           "unsupported architecture: GPT-2 with scale_attn_weights false");
      return FALSE;
    }
  if (get_flag (object, "scale_attn_by_inverse_layer_idx", FALSE))
    {
      g_set_error_literal (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                           "unsupported architecture: GPT-2 with "
                           "scale_attn_by_inverse_layer_idx");
      return FALSE;
    }
  self->n_kv_heads = self->n_heads;
  self->head_dim = self->hidden_size / self->n_heads;
  self->qkv_bias = self->o_bias = self->mlp_bias = TRUE;
  self->tie_word_embeddings = get_flag (object, "tie_word_embeddings", TRUE);
  return TRUE;
}

/**
 * dc_hf_config_parse:
 * @json: the text of a config.json (untrusted)
 * @len: its length, or -1 when nul-terminated
 *
 * Returns: (transfer full) (nullable): the config, or %NULL with @error set;
 *   %DC_MODEL_ERROR_UNSUPPORTED with "unsupported architecture" naming what
 *   was found for anything but the Llama family and GPT-2
 */
DcHfConfig *
dc_hf_config_parse (const char  *json,
                    gssize       len,
                    GError     **error)
{
  static const struct { const char *model_type; const char *arch; DcHfFamily family; } known[] = {
    { "llama", "LlamaForCausalLM", DC_HF_FAMILY_LLAMA },
    { "mistral", "MistralForCausalLM", DC_HF_FAMILY_LLAMA },
    { "qwen2", "Qwen2ForCausalLM", DC_HF_FAMILY_LLAMA },
    { "gpt2", "GPT2LMHeadModel", DC_HF_FAMILY_GPT2 },
  };
  g_autoptr(DcHfConfig) self = NULL;
  g_autoptr(JsonNode) root = NULL;
  g_autoptr(GError) local_error = NULL;
  JsonObject *object;
  JsonNode *archs, *quant;
  const char *model_type, *arch = NULL, *dtype;
  gboolean found = FALSE;

  root = dc_json_parse_bounded (json, len, DC_HF_CONFIG_MAX_BYTES, DC_HF_CONFIG_MAX_DEPTH,
                                &local_error);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                   "config.json is not a JSON object: %s",
                   local_error != NULL ? local_error->message : "another JSON value");
      return NULL;
    }
  object = json_node_get_object (root);
  model_type = get_string (object, "model_type");
  archs = json_object_get_member (object, "architectures");
  if (archs != NULL && JSON_NODE_HOLDS_ARRAY (archs) &&
      json_array_get_length (json_node_get_array (archs)) > 0 &&
      json_node_get_value_type (json_array_get_element (json_node_get_array (archs), 0)) ==
        G_TYPE_STRING)
    arch = json_array_get_string_element (json_node_get_array (archs), 0);

  self = g_new0 (DcHfConfig, 1);
  for (guint i = 0; i < G_N_ELEMENTS (known); i++)
    if ((model_type == NULL || strcmp (model_type, known[i].model_type) == 0) &&
        (arch == NULL || strcmp (arch, known[i].arch) == 0) && (model_type || arch))
      {
        self->family = known[i].family;
        self->model_type = g_strdup (known[i].model_type);
        self->architecture = g_strdup (known[i].arch);
        found = TRUE;
        break;
      }
  if (!found)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                   "unsupported architecture “%s” (model_type “%s”); supported: Llama, "
                   "Mistral, Qwen2 and GPT-2 causal language models",
                   arch != NULL ? arch : "(none)", model_type != NULL ? model_type : "(none)");
      return NULL;
    }
  quant = json_object_get_member (object, "quantization_config");
  if (quant != NULL && JSON_NODE_HOLDS_OBJECT (quant))
    {
      const char *method = get_string (json_node_get_object (quant), "quant_method");

      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                   "unsupported architecture: quantized checkpoint (quant_method “%s”)",
                   method != NULL ? method : "(none)");
      return NULL;
    }

  /* transformers 5 writes "dtype", older versions "torch_dtype". */
  dtype = get_string (object, "dtype");
  if (dtype == NULL)
    dtype = get_string (object, "torch_dtype");
  if (dtype == NULL)
    dtype = "float32";
  if (strcmp (dtype, "float32") != 0 && strcmp (dtype, "float16") != 0 &&
      strcmp (dtype, "bfloat16") != 0)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                   "config.json dtype “%s” is not supported "
                   "(float32, float16 and bfloat16 are)", dtype);
      return NULL;
    }
  self->dtype = g_strdup (dtype);
  self->bos_token_id = get_token_id (object, "bos_token_id");
  self->eos_token_id = get_token_id (object, "eos_token_id");
  get_eos_ids (self, object);

  if (self->family == DC_HF_FAMILY_GPT2 ? !parse_gpt2 (self, object, error)
                                        : !parse_llama (self, object, error))
    return NULL;
  return g_steal_pointer (&self);
}

/**
 * dc_hf_config_new_from_file:
 * @path: a config.json (a regular file)
 *
 * Returns: (transfer full) (nullable): the config, or %NULL with @error set
 */
DcHfConfig *
dc_hf_config_new_from_file (const char  *path,
                            GError     **error)
{
  g_autofree char *contents = NULL;
  gsize length = 0;

  if (!dc_regular_file_get_contents (path, DC_HF_CONFIG_MAX_BYTES, &contents, &length, error))
    return NULL;
  return dc_hf_config_parse (contents, (gssize) length, error);
}

/**
 * dc_hf_config_n_params:
 *
 * Returns: the number of weights the checkpoint holds (a tied head counted once)
 */
guint64
dc_hf_config_n_params (const DcHfConfig *self)
{
  guint64 v = self->vocab_size, h = self->hidden_size, l = self->n_layers;
  guint64 q = (guint64) self->n_heads * self->head_dim;
  guint64 kv = (guint64) self->n_kv_heads * self->head_dim;
  guint64 ffn = self->intermediate_size, per_layer, n;

  if (self->family == DC_HF_FAMILY_GPT2)
    {
      /* c_attn (h, 3h) + bias, c_proj (h, h) + bias, two LayerNorms, c_fc + bias, c_proj + bias. */
      per_layer = h * 3 * h + 3 * h + h * h + h + 4 * h + h * ffn + ffn + ffn * h + h;
      return v * h + (guint64) self->max_positions * h + l * per_layer + 2 * h +
             (self->tie_word_embeddings ? 0 : v * h);
    }
  per_layer = h * q + 2 * h * kv + q * h + 3 * h * ffn + 2 * h;
  if (self->qkv_bias)
    per_layer += q + 2 * kv;
  if (self->o_bias)
    per_layer += h;
  if (self->mlp_bias)
    per_layer += 2 * ffn + h;
  n = v * h + l * per_layer + h;
  return n + (self->tie_word_embeddings ? 0 : v * h);
}
