/* dc-hf-export.c: config.json, model.safetensors, tokenizer.json,
 * tokenizer_config.json and generation_config.json.
 *
 * safetensors layout: an 8-byte little-endian header length N, N bytes of
 * JSON (padded with spaces to a multiple of 8 so tensor data stays aligned),
 * then the tensors' raw little-endian bytes at the header's data_offsets.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-model"

#include "config.h"

#include "dc-hf-export.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <string.h>

#include "dc-model-error.h"

/* Tensor bytes are written as they are in memory. */
G_STATIC_ASSERT (G_BYTE_ORDER == G_LITTLE_ENDIAN);

static char *
builder_to_string (JsonBuilder *builder)
{
  g_autoptr(JsonGenerator) generator = json_generator_new ();
  g_autoptr(JsonNode) root = json_builder_get_root (builder);

  json_generator_set_root (generator, root);
  json_generator_set_pretty (generator, TRUE);
  return json_generator_to_data (generator, NULL);
}

/* model.safetensors' header: the length, the JSON padded with spaces to a
 * multiple of 8; the tensors follow in table order. */
static GByteArray *
safetensors_header (const DcGptModel *model)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonGenerator) generator = json_generator_new ();
  g_autoptr(JsonNode) root = NULL;
  GByteArray *out = g_byte_array_new ();
  g_autofree char *header = NULL;
  gsize header_len, padded;
  guint64 offset = 0;
  guint8 len_bytes[8];

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "__metadata__");
  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "format");
  json_builder_add_string_value (builder, "pt");
  json_builder_end_object (builder);
  for (guint t = 0; t < dc_gpt_config_n_tensors (&model->config); t++)
    {
      DcGptTensor info;

      dc_gpt_config_tensor (&model->config, t, &info);
      json_builder_set_member_name (builder, info.name);
      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "dtype");
      json_builder_add_string_value (builder, "F32");
      json_builder_set_member_name (builder, "shape");
      json_builder_begin_array (builder);
      for (guint d = 0; d < info.n_dims; d++)
        json_builder_add_int_value (builder, info.sizes[d]);
      json_builder_end_array (builder);
      json_builder_set_member_name (builder, "data_offsets");
      json_builder_begin_array (builder);
      json_builder_add_int_value (builder, offset);
      json_builder_add_int_value (builder, offset + info.numel * sizeof (float));
      json_builder_end_array (builder);
      json_builder_end_object (builder);
      offset += info.numel * sizeof (float);
    }
  json_builder_end_object (builder);
  root = json_builder_get_root (builder);
  json_generator_set_root (generator, root);
  header = json_generator_to_data (generator, &header_len);
  padded = (header_len + 7) / 8 * 8;
  for (guint i = 0; i < 8; i++)
    len_bytes[i] = ((guint64) padded >> (8 * i)) & 0xff;
  g_byte_array_append (out, len_bytes, 8);
  g_byte_array_append (out, (const guint8 *) header, header_len);
  for (gsize i = header_len; i < padded; i++)
    g_byte_array_append (out, (const guint8 *) " ", 1);
  return out;
}

/**
 * dc_safetensors_write:
 *
 * Returns: (transfer full): the model.safetensors file
 */
GBytes *
dc_safetensors_write (const DcGptModel  *model,
                      GError           **error)
{
  GByteArray *out = safetensors_header (model);

  /* Tensors are packed in table order, exactly the header's offsets. */
  g_byte_array_append (out, (const guint8 *) model->params, model->n_params * sizeof (float));
  return g_byte_array_free_to_bytes (out);
}

/* model.safetensors into @dir, tensor by tensor: @cancellable is checked
 * and @progress told (@done of @total) after each one. */
static gboolean
write_safetensors (const DcGptModel      *model,
                   const char            *dir,
                   GCancellable          *cancellable,
                   DcCheckpointProgress   progress,
                   gpointer               user_data,
                   guint                  total,
                   GError               **error)
{
  g_autofree char *path = g_build_filename (dir, "model.safetensors", NULL);
  g_autoptr(GFile) file = g_file_new_for_path (path);
  g_autoptr(GFileOutputStream) stream = NULL;
  g_autoptr(GByteArray) header = safetensors_header (model);
  guint n_tensors = dc_gpt_config_n_tensors (&model->config);

  stream = g_file_replace (file, NULL, FALSE, G_FILE_CREATE_NONE, cancellable, error);
  if (stream == NULL
      || !g_output_stream_write_all (G_OUTPUT_STREAM (stream), header->data, header->len,
                                     NULL, cancellable, error))
    return FALSE;
  for (guint t = 0; t < n_tensors; t++)
    {
      DcGptTensor info;

      dc_gpt_config_tensor (&model->config, t, &info);
      if (!g_output_stream_write_all (G_OUTPUT_STREAM (stream), model->params + info.offset,
                                      info.numel * sizeof (float), NULL, cancellable, error))
        return FALSE;
      if (progress != NULL)
        progress (t + 1, total, user_data);
      if (g_cancellable_set_error_if_cancelled (cancellable, error))
        return FALSE;
    }
  return g_output_stream_close (G_OUTPUT_STREAM (stream), cancellable, error);
}

/* GPT-2's byte-to-character map (bytes_to_unicode in openai/gpt-2's
 * encoder.py): printable Latin-1 bytes map to themselves, the other 68 to
 * U+0100 onwards, so every byte is a visible character in tokenizer.json. */
static gunichar
byte_to_char (guint b)
{
  guint n = 0;

  if ((b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff))
    return b;
  for (guint i = 0; i < b; i++)
    if (!((i >= '!' && i <= '~') || (i >= 0xa1 && i <= 0xac) || (i >= 0xae && i <= 0xff)))
      n++;
  return 256 + n;
}

static void
add_byte_level (JsonBuilder *builder)
{
  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "type");
  json_builder_add_string_value (builder, "ByteLevel");
  json_builder_set_member_name (builder, "add_prefix_space");
  json_builder_add_boolean_value (builder, FALSE);
  json_builder_set_member_name (builder, "trim_offsets");
  json_builder_add_boolean_value (builder, FALSE);
  json_builder_set_member_name (builder, "use_regex");
  json_builder_add_boolean_value (builder, FALSE);
  json_builder_end_object (builder);
}

/**
 * dc_hf_tokenizer_json:
 *
 * A BPE tokenizer with the 256 byte symbols and no merges behind a
 * ByteLevel pre-tokenizer without its split regex: each byte becomes the
 * token whose id is its value, which is what the training model reads.
 *
 * Returns: (transfer full): tokenizer.json's text
 */
char *
dc_hf_tokenizer_json (void)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "version");
  json_builder_add_string_value (builder, "1.0");
  json_builder_set_member_name (builder, "truncation");
  json_builder_add_null_value (builder);
  json_builder_set_member_name (builder, "padding");
  json_builder_add_null_value (builder);
  json_builder_set_member_name (builder, "added_tokens");
  json_builder_begin_array (builder);
  json_builder_end_array (builder);
  json_builder_set_member_name (builder, "normalizer");
  json_builder_add_null_value (builder);
  json_builder_set_member_name (builder, "pre_tokenizer");
  add_byte_level (builder);
  json_builder_set_member_name (builder, "post_processor");
  json_builder_add_null_value (builder);
  json_builder_set_member_name (builder, "decoder");
  add_byte_level (builder);
  json_builder_set_member_name (builder, "model");
  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "type");
  json_builder_add_string_value (builder, "BPE");
  json_builder_set_member_name (builder, "dropout");
  json_builder_add_null_value (builder);
  json_builder_set_member_name (builder, "unk_token");
  json_builder_add_null_value (builder);
  json_builder_set_member_name (builder, "continuing_subword_prefix");
  json_builder_add_null_value (builder);
  json_builder_set_member_name (builder, "end_of_word_suffix");
  json_builder_add_null_value (builder);
  json_builder_set_member_name (builder, "fuse_unk");
  json_builder_add_boolean_value (builder, FALSE);
  json_builder_set_member_name (builder, "byte_fallback");
  json_builder_add_boolean_value (builder, FALSE);
  json_builder_set_member_name (builder, "vocab");
  json_builder_begin_object (builder);
  for (guint b = 0; b < DC_GPT_VOCAB; b++)
    {
      char utf8[8] = { 0 };

      g_unichar_to_utf8 (byte_to_char (b), utf8);
      json_builder_set_member_name (builder, utf8);
      json_builder_add_int_value (builder, b);
    }
  json_builder_end_object (builder);
  json_builder_set_member_name (builder, "merges");
  json_builder_begin_array (builder);
  json_builder_end_array (builder);
  json_builder_end_object (builder);
  json_builder_end_object (builder);
  return builder_to_string (builder);
}

static char *
config_json (const DcGptConfig *c)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();

#define INT(name, value) G_STMT_START { json_builder_set_member_name (builder, name); \
                                        json_builder_add_int_value (builder, value); } G_STMT_END
#define STR(name, value) G_STMT_START { json_builder_set_member_name (builder, name); \
                                        json_builder_add_string_value (builder, value); } G_STMT_END
#define DBL(name, value) G_STMT_START { json_builder_set_member_name (builder, name); \
                                        json_builder_add_double_value (builder, value); } G_STMT_END
  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "architectures");
  json_builder_begin_array (builder);
  json_builder_add_string_value (builder, "GPT2LMHeadModel");
  json_builder_end_array (builder);
  STR ("model_type", "gpt2");
  INT ("vocab_size", c->vocab);
  INT ("n_embd", c->width);
  INT ("n_layer", c->n_layer);
  INT ("n_head", c->n_head);
  INT ("n_positions", c->seq);
  INT ("n_ctx", c->seq);
  INT ("n_inner", 4 * c->width);
  STR ("activation_function", "relu");
  DBL ("layer_norm_epsilon", 1e-5);
  DBL ("initializer_range", 0.02);
  DBL ("resid_pdrop", 0.0);
  DBL ("embd_pdrop", 0.0);
  DBL ("attn_pdrop", 0.0);
  json_builder_set_member_name (builder, "scale_attn_weights");
  json_builder_add_boolean_value (builder, TRUE);
  json_builder_set_member_name (builder, "tie_word_embeddings");
  json_builder_add_boolean_value (builder, TRUE);
  /* Byte-level ids have no special tokens; 10 (newline) is the separator
   * generation starts from when a prompt is empty. */
  INT ("bos_token_id", 10);
  INT ("eos_token_id", 10);
  STR ("torch_dtype", "float32");
  json_builder_end_object (builder);
#undef INT
#undef STR
#undef DBL
  return builder_to_string (builder);
}

static gboolean
write_file (const char  *dir,
            const char  *name,
            const void  *data,
            gssize       len,
            GError     **error)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);

  if (len < 0)
    len = strlen (data);
  return g_file_set_contents (path, data, len, error);
}

gboolean
dc_hf_export (const DcGptModel  *model,
              const char        *dir,
              GError           **error)
{
  return dc_hf_export_progress (model, dir, NULL, NULL, NULL, error);
}

gboolean
dc_hf_export_full (const DcGptModel  *model,
                   const char        *dir,
                   GCancellable      *cancellable,
                   GError           **error)
{
  return dc_hf_export_progress (model, dir, cancellable, NULL, NULL, error);
}

static void
remove_folder (const char *path)
{
  g_autoptr(GDir) dir = g_dir_open (path, 0, NULL);
  const char *name;

  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *file = g_build_filename (path, name, NULL);

      g_unlink (file);
    }
  g_rmdir (path);
}

static const char * const export_files[] = {
  "config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
  "generation_config.json",
};

/* Moves the finished files of @temp into @dir, one rename each (an existing
 * @dir keeps its other files; each file is replaced whole), or @temp
 * becomes @dir when there is none. */
static gboolean
commit_folder (const char  *temp,
               const char  *dir,
               GError     **error)
{
  if (!g_file_test (dir, G_FILE_TEST_EXISTS))
    {
      if (g_rename (temp, dir) == 0)
        return TRUE;
    }
  else if (!g_file_test (dir, G_FILE_TEST_IS_DIR))
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_DIRECTORY,
                   "cannot export into %s: it is not a folder", dir);
      return FALSE;
    }
  for (gsize i = 0; i < G_N_ELEMENTS (export_files); i++)
    {
      g_autofree char *from = g_build_filename (temp, export_files[i], NULL);
      g_autofree char *to = g_build_filename (dir, export_files[i], NULL);

      if (g_rename (from, to) != 0)
        {
          int saved = errno;

          g_set_error (error, G_IO_ERROR, g_io_error_from_errno (saved),
                       "cannot write %s: %s", to, g_strerror (saved));
          return FALSE;
        }
    }
  return TRUE;
}

/**
 * dc_hf_export_progress:
 * @dir: the folder to write into; created when missing
 * @cancellable: (nullable): checked before each file and after each tensor
 * @progress: (nullable): told the tensors of model.safetensors written (one
 *   unit each) and, last, the move into @dir (one unit), on this thread
 *
 * Writes every file into a new hidden folder beside @dir first and moves
 * them into @dir only once all are written: cancelled or failed, no
 * partial folder is left and an existing @dir is as it was.
 */
gboolean
dc_hf_export_progress (const DcGptModel      *model,
                       const char            *dir,
                       GCancellable          *cancellable,
                       DcCheckpointProgress   progress,
                       gpointer               user_data,
                       GError               **error)
{
  guint total = dc_gpt_config_n_tensors (&model->config) + 1;
  g_autofree char *config = config_json (&model->config);
  g_autofree char *tokenizer = dc_hf_tokenizer_json ();
  g_autofree char *tokenizer_config = NULL;
  g_autofree char *generation = NULL;
  g_autofree char *parent = g_path_get_dirname (dir);
  g_autofree char *base = g_path_get_basename (dir);
  g_autofree char *template = NULL;
  g_autofree char *temp = NULL;
  gboolean ok;

  if (g_mkdir_with_parents (parent, 0755) != 0)
    {
      int saved = errno;

      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (saved),
                   "cannot create folder %s: %s", parent, g_strerror (saved));
      return FALSE;
    }
  template = g_strdup_printf ("%s/.%s.partial-XXXXXX", parent, base);
  temp = g_strdup (template);
  if (g_mkdtemp_full (temp, 0755) == NULL)
    {
      int saved = errno;

      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (saved),
                   "cannot create folder %s: %s", dir, g_strerror (saved));
      return FALSE;
    }
  tokenizer_config = g_strdup_printf ("{\n  \"tokenizer_class\": \"PreTrainedTokenizerFast\",\n"
                                      "  \"model_max_length\": %u,\n"
                                      "  \"clean_up_tokenization_spaces\": false\n}\n",
                                      model->config.seq);
  generation = g_strdup ("{\n  \"bos_token_id\": 10,\n  \"eos_token_id\": 10,\n"
                         "  \"do_sample\": false\n}\n");
  ok = !g_cancellable_set_error_if_cancelled (cancellable, error)
       && write_file (temp, "config.json", config, -1, error)
       && write_safetensors (model, temp, cancellable, progress, user_data, total, error)
       && !g_cancellable_set_error_if_cancelled (cancellable, error)
       && write_file (temp, "tokenizer.json", tokenizer, -1, error)
       && write_file (temp, "tokenizer_config.json", tokenizer_config, -1, error)
       && write_file (temp, "generation_config.json", generation, -1, error)
       && !g_cancellable_set_error_if_cancelled (cancellable, error)
       && commit_folder (temp, dir, error);
  if (ok && progress != NULL)
    progress (total, total, user_data);
  /* Gone after a commit that renamed it; otherwise its files go with it. */
  if (g_file_test (temp, G_FILE_TEST_EXISTS))
    remove_folder (temp);
  return ok;
}
