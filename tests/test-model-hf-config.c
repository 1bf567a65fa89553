/* test-model-hf-config.c: config.json for the Llama family and GPT-2, in
 * both spellings the Hub uses, and the refusals.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>

#include "dc-test-utils.h"
#include "model/dc-hf-config.h"
#include "model/dc-model-error.h"

static DcHfConfig *
load_fixture (const char *model)
{
  g_autofree char *path = dc_test_dup_source_path ("tests", "data", "hf", "models", model,
                                                   "config.json", NULL);
  g_autoptr(GError) error = NULL;
  DcHfConfig *config = dc_hf_config_new_from_file (path, &error);

  g_assert_no_error (error);
  return config;
}

static void
test_fixtures (void)
{
  g_autoptr(DcHfConfig) gpt2 = load_fixture ("gpt2-tiny");
  g_autoptr(DcHfConfig) llama = load_fixture ("llama-tiny");

  g_assert_cmpint (gpt2->family, ==, DC_HF_FAMILY_GPT2);
  g_assert_cmpstr (gpt2->architecture, ==, "GPT2LMHeadModel");
  g_assert_cmpuint (gpt2->vocab_size, ==, 50257);
  g_assert_cmpuint (gpt2->hidden_size, ==, 64);
  g_assert_cmpuint (gpt2->n_layers, ==, 4);
  g_assert_cmpuint (gpt2->n_heads, ==, 4);
  g_assert_cmpuint (gpt2->head_dim, ==, 16);
  g_assert_cmpuint (gpt2->intermediate_size, ==, 256);   /* n_inner null: 4 × n_embd */
  g_assert_cmpuint (gpt2->max_positions, ==, 256);
  g_assert_true (gpt2->tie_word_embeddings);
  g_assert_cmpstr (gpt2->dtype, ==, "float32");
  g_assert_cmpint (gpt2->eos_token_id, ==, 50256);
  /* model.safetensors of the fixture holds 13,731,584 bytes of F32. */
  g_assert_cmpuint (dc_hf_config_n_params (gpt2), ==, 13731584 / 4);

  g_assert_cmpint (llama->family, ==, DC_HF_FAMILY_LLAMA);
  g_assert_cmpstr (llama->model_type, ==, "llama");
  g_assert_cmpuint (llama->hidden_size, ==, 128);
  g_assert_cmpuint (llama->n_layers, ==, 6);
  g_assert_cmpuint (llama->n_heads, ==, 4);
  g_assert_cmpuint (llama->n_kv_heads, ==, 2);
  g_assert_cmpuint (llama->head_dim, ==, 32);
  g_assert_cmpuint (llama->intermediate_size, ==, 344);
  g_assert_cmpfloat (llama->rope_theta, ==, 10000.0);   /* from rope_parameters */
  g_assert_cmpfloat (llama->norm_eps, ==, 1e-5);
  g_assert_false (llama->tie_word_embeddings);
  g_assert_false (llama->qkv_bias);
  g_assert_cmpstr (llama->dtype, ==, "float32");         /* from "dtype" */
  g_assert_cmpuint (dc_hf_config_n_params (llama), ==, 5405184 / 4);
}

/* Older Hub files: rope_theta and torch_dtype at the top level, no head_dim. */
static const char qwen2_json[] =
  "{\"architectures\": [\"Qwen2ForCausalLM\"], \"model_type\": \"qwen2\", \"hidden_act\": \"silu\","
  " \"hidden_size\": 896, \"intermediate_size\": 4864, \"num_attention_heads\": 14,"
  " \"num_hidden_layers\": 24, \"num_key_value_heads\": 2, \"vocab_size\": 151936,"
  " \"max_position_embeddings\": 32768, \"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0,"
  " \"sliding_window\": 32768, \"use_sliding_window\": false, \"tie_word_embeddings\": true,"
  " \"torch_dtype\": \"bfloat16\", \"bos_token_id\": 151643, \"eos_token_id\": 151645}";

static const char mistral_json[] =
  "{\"architectures\": [\"MistralForCausalLM\"], \"model_type\": \"mistral\","
  " \"hidden_size\": 4096, \"intermediate_size\": 14336, \"num_attention_heads\": 32,"
  " \"num_hidden_layers\": 32, \"num_key_value_heads\": 8, \"vocab_size\": 32768,"
  " \"max_position_embeddings\": 32768, \"rms_norm_eps\": 1e-05, \"sliding_window\": 4096,"
  " \"head_dim\": 128, \"rope_parameters\": {\"rope_theta\": 1000000.0, \"rope_type\": "
  "\"default\"},"
  " \"torch_dtype\": \"float16\", \"dtype\": \"float16\", \"tie_word_embeddings\": false}";

/* SmolLM-135M's shape (the benchmark's), TinyLlama-style: no num_key_value_heads. */
static const char smollm_json[] =
  "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": 576,"
  " \"intermediate_size\": 1536, \"num_attention_heads\": 9, \"num_hidden_layers\": 30,"
  " \"num_key_value_heads\": 3, \"vocab_size\": 49152, \"rope_theta\": 10000.0,"
  " \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\", \"eos_token_id\": [0, 2]}";

static const char tinyllama_json[] =
  "{\"model_type\": \"llama\", \"hidden_size\": 2048, \"intermediate_size\": 5632,"
  " \"num_attention_heads\": 32, \"num_hidden_layers\": 22, \"vocab_size\": 32000,"
  " \"attention_bias\": true}";

static void
test_variants (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcHfConfig) qwen2 = dc_hf_config_parse (qwen2_json, -1, &error);
  g_autoptr(DcHfConfig) mistral = NULL;
  g_autoptr(DcHfConfig) smollm = NULL;
  g_autoptr(DcHfConfig) tiny = NULL;

  g_assert_no_error (error);
  g_assert_cmpstr (qwen2->model_type, ==, "qwen2");
  g_assert_true (qwen2->qkv_bias);      /* Qwen2 always has q/k/v biases */
  g_assert_false (qwen2->o_bias);
  g_assert_true (qwen2->tie_word_embeddings);
  g_assert_cmpstr (qwen2->dtype, ==, "bfloat16");   /* from torch_dtype */
  g_assert_cmpfloat (qwen2->rope_theta, ==, 1e6);   /* top-level rope_theta */
  g_assert_cmpuint (qwen2->head_dim, ==, 64);       /* derived: 896 / 14 */
  g_assert_cmpuint (qwen2->sliding_window, ==, 0);  /* use_sliding_window false */
  g_assert_cmpint (qwen2->bos_token_id, ==, 151643);
  /* Qwen2.5-0.5B: 494,032,768 parameters, as its model card counts them. */
  g_assert_cmpuint (dc_hf_config_n_params (qwen2), ==, 494032768);

  mistral = dc_hf_config_parse (mistral_json, -1, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (mistral->head_dim, ==, 128);
  g_assert_cmpuint (mistral->n_kv_heads, ==, 8);
  g_assert_cmpuint (mistral->sliding_window, ==, 4096);
  g_assert_cmpfloat (mistral->rope_theta, ==, 1e6);
  g_assert_cmpstr (mistral->dtype, ==, "float16");
  g_assert_false (mistral->qkv_bias);

  smollm = dc_hf_config_parse (smollm_json, -1, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (smollm->head_dim, ==, 64);
  g_assert_cmpint (smollm->eos_token_id, ==, 0);     /* first of the list */
  g_assert_cmpuint (smollm->n_eos_token_ids, ==, 2);  /* and every one kept */
  g_assert_cmpint (smollm->eos_token_ids[0], ==, 0);
  g_assert_cmpint (smollm->eos_token_ids[1], ==, 2);
  g_assert_cmpint (smollm->bos_token_id, ==, -1);
  /* SmolLM-135M: 134,515,008 parameters. */
  g_assert_cmpuint (dc_hf_config_n_params (smollm), ==, 134515008);

  tiny = dc_hf_config_parse (tinyllama_json, -1, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (tiny->n_kv_heads, ==, 32);       /* defaults to the head count */
  g_assert_true (tiny->qkv_bias && tiny->o_bias);
  g_assert_cmpstr (tiny->dtype, ==, "float32");
  g_assert_cmpfloat (tiny->rope_theta, ==, 10000.0);
  g_assert_cmpuint (tiny->max_positions, ==, 2048);
}

static void
assert_refused (const char *json,
                int         code,
                const char *fragment)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcHfConfig) config = dc_hf_config_parse (json, -1, &error);

  g_assert_null (config);
  g_assert_error (error, DC_MODEL_ERROR, code);
  if (strstr (error->message, fragment) == NULL)
    g_error ("message “%s” lacks “%s”", error->message, fragment);
}

#define LLAMA_BASE "\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 128, " \
                   "\"num_hidden_layers\": 2, \"vocab_size\": 256"

static void
test_refusals (void)
{
  assert_refused ("{\"architectures\": [\"Phi3ForCausalLM\"], \"model_type\": \"phi3\"}",
                  DC_MODEL_ERROR_UNSUPPORTED, "unsupported architecture “Phi3ForCausalLM” "
                                              "(model_type “phi3”)");
  assert_refused ("{\"architectures\": [\"LlamaForSequenceClassification\"], \"model_type\": "
                  "\"llama\"}",
                  DC_MODEL_ERROR_UNSUPPORTED, "unsupported architecture "
                                              "“LlamaForSequenceClassification”");
  assert_refused ("{\"vocab_size\": 3}", DC_MODEL_ERROR_UNSUPPORTED,
                  "unsupported architecture “(none)” (model_type “(none)”)");
  assert_refused ("{" LLAMA_BASE ", \"num_attention_heads\": 4, \"quantization_config\": "
                  "{\"quant_method\": \"gptq\"}}",
                  DC_MODEL_ERROR_UNSUPPORTED, "quant_method “gptq”");
  assert_refused ("{" LLAMA_BASE ", \"num_attention_heads\": 4, \"rope_scaling\": {\"rope_type\": "
                  "\"llama3\", \"factor\": 8.0}}",
                  DC_MODEL_ERROR_UNSUPPORTED, "RoPE scaling “llama3”");
  assert_refused ("{" LLAMA_BASE ", \"num_attention_heads\": 4, \"hidden_act\": \"gelu\"}",
                  DC_MODEL_ERROR_UNSUPPORTED, "hidden_act “gelu”");
  assert_refused ("{" LLAMA_BASE ", \"num_attention_heads\": 4, \"torch_dtype\": \"int8\"}",
                  DC_MODEL_ERROR_UNSUPPORTED, "dtype “int8” is not supported");
  assert_refused ("{" LLAMA_BASE ", \"num_attention_heads\": 5}", DC_MODEL_ERROR_DIMS,
                  "not a multiple of num_attention_heads");
  assert_refused ("{" LLAMA_BASE ", \"num_attention_heads\": 4, \"num_key_value_heads\": 3}",
                  DC_MODEL_ERROR_DIMS, "not a multiple of num_key_value_heads");
  assert_refused ("{" LLAMA_BASE ", \"num_attention_heads\": 4, \"head_dim\": 15}",
                  DC_MODEL_ERROR_DIMS, "odd");
  assert_refused ("{" LLAMA_BASE ", \"num_attention_heads\": 0}", DC_MODEL_ERROR_DIMS,
                  "“num_attention_heads” must be an integer from 1");
  assert_refused ("{" LLAMA_BASE ", \"num_attention_heads\": 4.0}", DC_MODEL_ERROR_DIMS,
                  "num_attention_heads");
  assert_refused ("{" LLAMA_BASE ", \"num_attention_heads\": 99999999999}", DC_MODEL_ERROR_DIMS,
                  "num_attention_heads");
  assert_refused ("{\"model_type\": \"llama\", \"hidden_size\": 64}", DC_MODEL_ERROR_FORMAT,
                  "config.json has no “vocab_size”");
  assert_refused ("{\"model_type\": \"gpt2\", \"n_embd\": 64, \"n_layer\": 1, \"n_head\": 4,"
                  " \"vocab_size\": 9, \"activation_function\": \"relu\"}",
                  DC_MODEL_ERROR_UNSUPPORTED, "activation_function “relu”");
  /* GPT-2 variants whose attention differs from the forward pass's. */
  assert_refused ("{\"model_type\": \"gpt2\", \"n_embd\": 64, \"n_layer\": 1, \"n_head\": 4,"
                  " \"vocab_size\": 9, \"scale_attn_weights\": false}",
                  DC_MODEL_ERROR_UNSUPPORTED, "scale_attn_weights false");
  assert_refused ("{\"model_type\": \"gpt2\", \"n_embd\": 64, \"n_layer\": 1, \"n_head\": 4,"
                  " \"vocab_size\": 9, \"scale_attn_by_inverse_layer_idx\": true}",
                  DC_MODEL_ERROR_UNSUPPORTED, "scale_attn_by_inverse_layer_idx");
  assert_refused ("{\"model_type\": \"gpt2\", \"n_embd\": 64, \"n_layer\": 1, \"n_head\": 5,"
                  " \"vocab_size\": 9}", DC_MODEL_ERROR_DIMS, "not a multiple of n_head");
  assert_refused ("[]", DC_MODEL_ERROR_FORMAT, "not a JSON object");
  assert_refused ("{\"model_type\": ", DC_MODEL_ERROR_FORMAT, "not a JSON object");
}

int
main (int   argc,
      char *argv[])
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/dc/model/hf-config/fixtures", test_fixtures);
  g_test_add_func ("/dc/model/hf-config/variants", test_variants);
  g_test_add_func ("/dc/model/hf-config/refusals", test_refusals);
  return g_test_run ();
}
