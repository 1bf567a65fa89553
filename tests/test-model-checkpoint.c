/* test-model-checkpoint.c: .pt checkpoints written, read, refused.
 *
 * Proves: a save/load round trip is bit-exact (weights, Adam moments, step,
 * settings); the bytes are deterministic; PyTorch (python3-torch, when
 * installed) opens the file with weights_only=True and sees the same tensor
 * bytes; files written by PyTorch with a malicious pickle, foreign pickles,
 * truncated and corrupted files, another tokenizer and out-of-range
 * dimensions are refused with the seeds' messages, never crash. Save and
 * load report progress once per tensor and stop when cancelled, leaving no
 * file; a Hugging Face export cancelled leaves no partial folder and an
 * older export as it was.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <glib/gstdio.h>
#include <zlib.h>
#include <json-glib/json-glib.h>

#include "dc-test-utils.h"
#include "model/dc-checkpoint.h"
#include "model/dc-hf-export.h"
#include "model/dc-model-error.h"
#include "model/dc-pt-opcodes.h"
#include "model/dc-pt-reader.h"
#include "model/dc-pt-writer.h"
#include "model/dc-zip.h"

#define PYTHON_TIMEOUT_MS 120000

static DcGptModel *
make_model (guint width,
            guint seq)
{
  DcGptConfig config;
  g_autoptr(GError) error = NULL;
  g_autofree float *grads = NULL;
  DcGptModel *model;

  dc_gpt_config_init_derived (&config, width, seq);
  model = dc_gpt_model_new (&config, &error);
  g_assert_no_error (error);
  dc_gpt_model_init_weights (model, 42);
  /* Two Adam steps with arbitrary gradients so the moments are not zero. */
  grads = g_new (float, model->n_params);
  for (gsize i = 0; i < model->n_params; i++)
    grads[i] = (float) ((gint) (i % 17) - 8) * 0.001f;
  dc_gpt_model_adam_step (model, grads, 0.01f);
  dc_gpt_model_adam_step (model, grads, 0.01f);
  return model;
}

static void
test_round_trip (void)
{
  g_autoptr(DcGptModel) model = make_model (32, 16);
  g_autoptr(DcGptModel) loaded = NULL;
  g_autoptr(GBytes) bytes = NULL, again = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *hash = NULL, *loaded_hash = NULL;
  DcTrainSettings settings, read_back;

  dc_train_settings_init_default (&settings);
  settings.seed = G_GUINT64_CONSTANT (0xfedcba9876543210);
  bytes = dc_checkpoint_to_bytes (model, &settings, &error);
  g_assert_no_error (error);
  again = dc_checkpoint_to_bytes (model, &settings, &error);
  g_assert_true (g_bytes_equal (bytes, again));

  loaded = dc_checkpoint_from_bytes (bytes, &read_back, &error);
  g_assert_no_error (error);
  g_assert_true (dc_gpt_config_equal (&model->config, &loaded->config));
  g_assert_cmpuint (loaded->step, ==, 2);
  g_assert_cmpmem (loaded->params, 3 * loaded->n_params * sizeof (float),
                   model->params, 3 * model->n_params * sizeof (float));
  g_assert_cmpmem (&loaded->beta1_pow, sizeof (float), &model->beta1_pow, sizeof (float));
  g_assert_cmpmem (&loaded->beta2_pow, sizeof (float), &model->beta2_pow, sizeof (float));
  g_assert_cmpuint (read_back.batch, ==, settings.batch);
  g_assert_cmpuint (read_back.steps, ==, settings.steps);
  g_assert_cmpuint (read_back.lr_x1000, ==, settings.lr_x1000);
  g_assert_cmpuint (read_back.seed, ==, settings.seed);
  hash = dc_gpt_model_dup_hash (model);
  loaded_hash = dc_gpt_model_dup_hash (loaded);
  g_assert_cmpstr (hash, ==, loaded_hash);
}

static char *
find_python_with_torch (void)
{
  const char *candidates[] = { g_getenv ("DC_PYTHON_TORCH"), "/usr/bin/python3", "python3" };

  for (guint i = 0; i < G_N_ELEMENTS (candidates); i++)
    {
      g_autofree char *path = NULL;
      int status = -1;

      if (candidates[i] == NULL)
        continue;
      path = g_find_program_in_path (candidates[i]);
      if (path == NULL)
        continue;
      {
        const char *argv[] = { path, "-c", "import torch", NULL };

        if (dc_test_spawn (argv, NULL, NULL, &status, PYTHON_TIMEOUT_MS) && status == 0)
          return g_steal_pointer (&path);
      }
    }
  return NULL;
}

static char *
sha256_hex (const float *data,
            gsize        n)
{
  return g_compute_checksum_for_data (G_CHECKSUM_SHA256, (const guchar *) data, n * sizeof (float));
}

static void
check_digests (JsonObject       *object,
               const char       *member,
               const DcGptModel *model,
               const float      *base)
{
  JsonObject *digests = json_object_get_object_member (object, member);

  g_assert_cmpuint (json_object_get_size (digests), ==, dc_gpt_config_n_tensors (&model->config));
  for (guint t = 0; t < dc_gpt_config_n_tensors (&model->config); t++)
    {
      DcGptTensor info;
      g_autofree char *expect = NULL;

      dc_gpt_config_tensor (&model->config, t, &info);
      expect = sha256_hex (base + info.offset, info.numel);
      g_assert_true (json_object_has_member (digests, info.name));
      g_assert_cmpstr (json_object_get_string_member (digests, info.name), ==, expect);
    }
}

static void
test_torch_opens (void)
{
  g_autoptr(DcGptModel) model = make_model (48, 24);
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autofree char *python = find_python_with_torch ();
  g_autofree char *dir = NULL, *path = NULL, *script = NULL, *out = NULL, *err = NULL;
  JsonObject *result, *config;
  DcTrainSettings settings;
  int status = -1;

  if (python == NULL)
    {
      g_test_skip ("python3 with torch (Debian's python3-torch) is not installed");
      return;
    }
  dc_train_settings_init_default (&settings);
  dir = g_dir_make_tmp ("dc-ckpt-XXXXXX", &error);
  g_assert_no_error (error);
  path = g_build_filename (dir, "model.pt", NULL);
  g_assert_true (dc_checkpoint_save (model, &settings, path, &error));
  g_assert_no_error (error);
  script = dc_test_dup_source_path ("tests", "check-pt-torch.py", NULL);
  {
    const char *argv[] = { python, script, path, NULL };

    g_assert_true (dc_test_spawn (argv, &out, &err, &status, PYTHON_TIMEOUT_MS));
  }
  if (status != 0)
    g_printerr ("%s", err);
  g_assert_cmpint (status, ==, 0);
  json_parser_load_from_data (parser, out, -1, &error);
  g_assert_no_error (error);
  result = json_node_get_object (json_parser_get_root (parser));
  g_test_message ("opened by torch %s", json_object_get_string_member (result, "torch"));
  g_assert_cmpstr (json_object_get_string_member (result, "format"), ==, DC_CHECKPOINT_FORMAT);
  g_assert_cmpstr (json_object_get_string_member (result, "tokenizer"), ==, DC_GPT_TOKENIZER);
  g_assert_cmpstr (json_object_get_string_member (result, "state_type"), ==, "OrderedDict");
  g_assert_cmpint (json_object_get_int_member (result, "step"), ==, 2);
  config = json_object_get_object_member (result, "config");
  g_assert_cmpint (json_object_get_int_member (config, "n_embd"), ==, 48);
  g_assert_cmpint (json_object_get_int_member (config, "n_positions"), ==, 24);
  g_assert_cmpint (json_object_get_int_member (config, "vocab_size"), ==, 256);
  g_assert_cmpfloat (json_object_get_double_member (result, "beta2"), ==, DC_ADAM_BETA2);
  check_digests (result, "params", model, model->params);
  check_digests (result, "exp_avg", model, model->adam_m);
  check_digests (result, "exp_avg_sq", model, model->adam_v);

  g_unlink (path);
  g_rmdir (dir);
}

static void
assert_refused (const char  *file,
                GQuark       domain,
                int          code,
                const char  *message_part)
{
  g_autofree char *path = dc_test_dup_source_path ("tests", "data", file, NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(DcGptModel) model = dc_checkpoint_load (path, NULL, &error);

  g_assert_null (model);
  g_assert_error (error, domain, code);
  g_test_message ("%s: %s", file, error->message);
  g_assert_nonnull (strstr (error->message, message_part));
}

static void
test_malicious_refused (void)
{
  /* The reader refuses the first item outside its subset: with torch's
   * default pickler that is a memo opcode, without memo the global itself. */
  assert_refused ("pt-malicious-global-nomemo.pt", DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                  "global “posix.system” is not allowed");
  assert_refused ("pt-malicious-global.pt", DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                  "opcode 0x71 is not allowed");
  assert_refused ("pt-torch-state-dict.pt", DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                  "is not allowed");
  g_assert_false (g_file_test ("/tmp/dc-pwned", G_FILE_TEST_EXISTS));
}

static void
test_truncated_and_corrupt (void)
{
  g_autoptr(DcGptModel) model = make_model (16, 16);
  g_autoptr(GBytes) bytes = NULL;
  g_autoptr(GError) error = NULL;
  DcTrainSettings settings;
  gsize len;
  const guint8 *data;

  dc_train_settings_init_default (&settings);
  bytes = dc_checkpoint_to_bytes (model, &settings, &error);
  g_assert_no_error (error);
  data = g_bytes_get_data (bytes, &len);
  /* Every prefix is refused with an error (a zip needs its end record). */
  for (gsize cut = 0; cut < len; cut += (cut < 200 ? 1 : 97))
    {
      g_autoptr(GBytes) part = g_bytes_new (data, cut);
      g_autoptr(GError) cut_error = NULL;
      g_autoptr(DcGptModel) none = dc_checkpoint_from_bytes (part, NULL, &cut_error);

      g_assert_null (none);
      g_assert_error (cut_error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT);
    }
  /* One flipped bit in the tensor data: the CRC check catches it. */
  {
    g_autofree guint8 *copy = g_memdup2 (data, len);
    g_autoptr(GBytes) flipped = NULL;
    g_autoptr(GError) flip_error = NULL;
    g_autoptr(DcGptModel) none = NULL;

    g_autoptr(DcZipReader) zip = dc_zip_reader_new (bytes, &error);
    GBytes *storage;
    gsize offset;

    g_assert_no_error (error);
    storage = dc_zip_reader_read (zip, "checkpoint/data/0", &error);
    g_assert_no_error (error);
    offset = (const guint8 *) g_bytes_get_data (storage, NULL) - data;
    copy[offset + 5] ^= 0x10;
    flipped = g_bytes_new (copy, len);
    none = dc_checkpoint_from_bytes (flipped, NULL, &flip_error);
    g_assert_null (none);
    g_assert_error (flip_error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT);
  }
}

/* A checkpoint-shaped dict with chosen tokenizer and config. */
static GBytes *
forged (const char *tokenizer,
        gint64      vocab,
        gint64      width)
{
  g_autoptr(DcPtWriter) w = dc_pt_writer_new ();
  g_autoptr(GError) error = NULL;
  GBytes *bytes;

  dc_pt_writer_begin_dict (w, FALSE);
  dc_pt_writer_string (w, "format");
  dc_pt_writer_string (w, DC_CHECKPOINT_FORMAT);
  dc_pt_writer_string (w, "format_version");
  dc_pt_writer_int (w, DC_CHECKPOINT_VERSION);
  dc_pt_writer_string (w, "tokenizer");
  dc_pt_writer_string (w, tokenizer);
  dc_pt_writer_string (w, "config");
  dc_pt_writer_begin_dict (w, FALSE);
  dc_pt_writer_string (w, "vocab_size");
  dc_pt_writer_int (w, vocab);
  dc_pt_writer_string (w, "n_embd");
  dc_pt_writer_int (w, width);
  dc_pt_writer_string (w, "n_positions");
  dc_pt_writer_int (w, 32);
  dc_pt_writer_string (w, "n_layer");
  dc_pt_writer_int (w, 2);
  dc_pt_writer_string (w, "n_head");
  dc_pt_writer_int (w, 2);
  dc_pt_writer_end_dict (w);
  dc_pt_writer_end_dict (w);
  bytes = dc_pt_writer_finish (w, "forged", &error);
  g_assert_no_error (error);
  return bytes;
}

static void
assert_forged_refused (GBytes     *bytes,
                       int         code,
                       const char *prefix)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcGptModel) model = dc_checkpoint_from_bytes (bytes, NULL, &error);

  g_assert_null (model);
  g_assert_error (error, DC_MODEL_ERROR, code);
  g_test_message ("%s", error->message);
  g_assert_true (g_str_has_prefix (error->message, prefix));
}

static void
test_mismatch_messages (void)
{
  g_autoptr(GBytes) other_tokenizer = forged ("gpt2-bpe-50257", 256, 32);
  g_autoptr(GBytes) other_vocab = forged (DC_GPT_TOKENIZER, 50257, 32);
  /* Past the Advanced range (width 768): 512 is a valid width now. */
  g_autoptr(GBytes) too_wide = forged (DC_GPT_TOKENIZER, 256, 1024);
  g_autoptr(GBytes) too_narrow = forged (DC_GPT_TOKENIZER, 256, 8);
  g_autoptr(GBytes) no_tensors = forged (DC_GPT_TOKENIZER, 256, 32);

  assert_forged_refused (other_tokenizer, DC_MODEL_ERROR_TOKENIZER, "tokenizer mismatch");
  assert_forged_refused (other_vocab, DC_MODEL_ERROR_TOKENIZER, "tokenizer mismatch");
  assert_forged_refused (too_wide, DC_MODEL_ERROR_DIMS, "bad dims in checkpoint");
  assert_forged_refused (too_narrow, DC_MODEL_ERROR_DIMS, "bad dims in checkpoint");
  /* Right header, no training section or tensors: refused, not crashed. */
  assert_forged_refused (no_tensors, DC_MODEL_ERROR_FORMAT, "not a DaisyChain checkpoint");
}

/* A well-formed header whose tensors do not fit the config. */
static void
test_shape_mismatch (void)
{
  g_autoptr(DcPtWriter) w = dc_pt_writer_new ();
  g_autoptr(GBytes) bytes = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(DcGptModel) model = make_model (32, 32);
  g_autoptr(DcGptModel) none = NULL;
  const char *ints[] = { "vocab_size", "n_embd", "n_positions", "n_layer", "n_head" };
  const gint64 values[] = { 256, 32, 32, model->config.n_layer, model->config.n_head };
  const char *training[] = { "batch", "steps", "lr_x1000", "seed" };
  const gint64 training_values[] = { 8, 300, 10, 1 };
  gint64 wrong[2] = { 256, 48 };

  dc_pt_writer_begin_dict (w, FALSE);
  dc_pt_writer_string (w, "format");
  dc_pt_writer_string (w, DC_CHECKPOINT_FORMAT);
  dc_pt_writer_string (w, "format_version");
  dc_pt_writer_int (w, DC_CHECKPOINT_VERSION);
  dc_pt_writer_string (w, "tokenizer");
  dc_pt_writer_string (w, DC_GPT_TOKENIZER);
  dc_pt_writer_string (w, "config");
  dc_pt_writer_begin_dict (w, FALSE);
  for (guint i = 0; i < G_N_ELEMENTS (ints); i++)
    {
      dc_pt_writer_string (w, ints[i]);
      dc_pt_writer_int (w, values[i]);
    }
  dc_pt_writer_end_dict (w);
  dc_pt_writer_string (w, "training");
  dc_pt_writer_begin_dict (w, FALSE);
  for (guint i = 0; i < G_N_ELEMENTS (training); i++)
    {
      dc_pt_writer_string (w, training[i]);
      dc_pt_writer_int (w, training_values[i]);
    }
  dc_pt_writer_end_dict (w);
  dc_pt_writer_string (w, "step");
  dc_pt_writer_int (w, 0);
  /* Every tensor named right, but wte is (256, 48) under a width-32 config. */
  dc_pt_writer_string (w, "model_state_dict");
  dc_pt_writer_begin_dict (w, TRUE);
  for (guint t = 0; t < dc_gpt_config_n_tensors (&model->config); t++)
    {
      DcGptTensor info;
      g_autofree float *zeros = g_new0 (float, 256 * 48);

      dc_gpt_config_tensor (&model->config, t, &info);
      dc_pt_writer_string (w, info.name);
      dc_pt_writer_tensor_f32 (w, zeros, info.n_dims, t == 0 ? wrong : info.sizes);
    }
  dc_pt_writer_end_dict (w);
  dc_pt_writer_end_dict (w);
  bytes = dc_pt_writer_finish (w, "forged", &error);
  g_assert_no_error (error);
  none = dc_checkpoint_from_bytes (bytes, NULL, &error);
  g_assert_null (none);
  g_assert_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_DIMS);
  g_assert_true (g_str_has_prefix (error->message, "bad dims in checkpoint"));
  g_assert_nonnull (strstr (error->message, "transformer.wte.weight"));
}


/* Little-endian helpers for hand-made archives the writer would never make. */
static void
put16 (GByteArray *a,
       guint       v)
{
  guint8 b[2] = { v & 0xff, (v >> 8) & 0xff };

  g_byte_array_append (a, b, 2);
}

static void
put32 (GByteArray *a,
       guint32     v)
{
  guint8 b[4] = { v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, (v >> 24) & 0xff };

  g_byte_array_append (a, b, 4);
}

static void
put_central_entry (GByteArray *dir,
                   const char *name,
                   guint32     crc,
                   guint32     size,
                   guint32     offset)
{
  put32 (dir, 0x02014b50);
  put16 (dir, 20);
  put16 (dir, 20);
  put16 (dir, 0);
  put16 (dir, 0);      /* stored */
  put16 (dir, 0);
  put16 (dir, 0x21);
  put32 (dir, crc);
  put32 (dir, size);
  put32 (dir, size);
  put16 (dir, strlen (name));
  put16 (dir, 0);
  put16 (dir, 0);
  put16 (dir, 0);
  put16 (dir, 0);
  put32 (dir, 0);
  put32 (dir, offset);
  g_byte_array_append (dir, (const guint8 *) name, strlen (name));
}

/* One local entry holding @size bytes at offset 0, named by @n_entries
 * central directory entries, "z/data/0", "z/data/1"…; @extra_size makes
 * the directory claim more data than the local entry holds. */
static GBytes *
craft_shared_data_zip (guint n_entries,
                       gsize size,
                       gsize extra_size)
{
  g_autoptr(GByteArray) out = g_byte_array_new ();
  g_autoptr(GByteArray) dir = g_byte_array_new ();
  g_autofree guint8 *data = g_malloc (size);
  const char *name = "z/data/0";
  guint32 crc, central_offset;

  memset (data, 0x5a, size);
  crc = crc32 (crc32 (0, Z_NULL, 0), data, size);
  put32 (out, 0x04034b50);
  put16 (out, 20);
  put16 (out, 0);
  put16 (out, 0);
  put16 (out, 0);
  put16 (out, 0x21);
  put32 (out, crc);
  put32 (out, size);
  put32 (out, size);
  put16 (out, strlen (name));
  put16 (out, 0);
  g_byte_array_append (out, (const guint8 *) name, strlen (name));
  g_byte_array_append (out, data, size);
  central_offset = out->len;
  for (guint i = 0; i < n_entries; i++)
    {
      g_autofree char *entry_name = g_strdup_printf ("z/data/%u", i);

      put_central_entry (dir, entry_name, crc, size + extra_size, 0);
    }
  g_byte_array_append (out, dir->data, dir->len);
  put32 (out, 0x06054b50);
  put16 (out, 0);
  put16 (out, 0);
  put16 (out, n_entries);
  put16 (out, n_entries);
  put32 (out, dir->len);
  put32 (out, central_offset);
  put16 (out, 0);
  return g_byte_array_free_to_bytes (g_steal_pointer (&out));
}

static void
assert_zip_refused (GBytes     *bytes,
                    const char *message_part)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcZipReader) zip = dc_zip_reader_new (bytes, &error);

  g_assert_null (zip);
  g_assert_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT);
  g_test_message ("%s", error->message);
  g_assert_nonnull (strstr (error->message, message_part));
}

/* 65,535 directory entries over one block of data: refused as overlapping
 * before any of it is read (the old reader CRC-checked the block 65,535
 * times). */
static void
test_zip_overlapping_entries (void)
{
  g_autoptr(GBytes) many = craft_shared_data_zip (0xffff, 4096, 0);
  g_autoptr(GBytes) two = craft_shared_data_zip (2, 16, 0);
  g_autoptr(GBytes) one = craft_shared_data_zip (1, 16, 0);
  g_autoptr(GError) error = NULL;
  g_autoptr(DcZipReader) zip = NULL;

  assert_zip_refused (many, "overlap");
  assert_zip_refused (two, "entries “z/data/0” and “z/data/1” overlap");
  /* The same layout with one entry is a valid archive. */
  zip = dc_zip_reader_new (one, &error);
  g_assert_no_error (error);
  g_assert_nonnull (zip);
}

/* An entry whose data runs into the central directory. */
static void
test_zip_overlaps_directory (void)
{
  g_autoptr(GBytes) bytes = craft_shared_data_zip (1, 16, 8);

  assert_zip_refused (bytes, "entry “z/data/0” overlaps the central directory");
}

static void
test_zip_duplicate_names (void)
{
  g_autoptr(DcZipWriter) writer = dc_zip_writer_new ();
  g_autoptr(GBytes) a = g_bytes_new_static ("first", 5);
  g_autoptr(GBytes) b = g_bytes_new_static ("second", 6);
  g_autoptr(GBytes) bytes = NULL;
  g_autoptr(GError) error = NULL;

  dc_zip_writer_add (writer, "z/data.pkl", a);
  dc_zip_writer_add (writer, "z/data.pkl", b);
  bytes = dc_zip_writer_finish (writer, &error);
  g_assert_no_error (error);
  assert_zip_refused (bytes, "duplicate entry “z/data.pkl”");
}

/* A one-tensor checkpoint pickle and its storage, re-zipped with an extra
 * entry "forged/data/9" that the pickle never names; @corrupt picks which
 * entry gets a flipped byte (0: the read storage, 9: the unread extra). */
static GBytes *
zip_with_extra_entry (guint corrupt)
{
  g_autoptr(DcPtWriter) w = dc_pt_writer_new ();
  g_autoptr(GBytes) original = NULL;
  g_autoptr(DcZipReader) zip = NULL;
  g_autoptr(DcZipWriter) out = dc_zip_writer_new ();
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) bytes = NULL;
  const float values[4] = { 1, 2, 3, 4 };
  const gint64 sizes[1] = { 4 };
  const char *names[] = { "forged/data.pkl", "forged/data/0", "forged/data/9" };
  gsize len;
  guint8 *copy;

  dc_pt_writer_begin_dict (w, FALSE);
  dc_pt_writer_string (w, "t");
  dc_pt_writer_tensor_f32 (w, values, 1, sizes);
  dc_pt_writer_end_dict (w);
  original = dc_pt_writer_finish (w, "forged", &error);
  g_assert_no_error (error);
  zip = dc_zip_reader_new (original, &error);
  g_assert_no_error (error);
  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    {
      GBytes *data = NULL;

      for (guint e = 0; e < zip->entries->len; e++)
        {
          DcZipEntry *entry = g_ptr_array_index (zip->entries, e);

          if (g_str_equal (entry->name, i < 2 ? names[i] : names[1]))
            data = entry->data;
        }
      g_assert_nonnull (data);
      dc_zip_writer_add (out, names[i], data);
    }
  bytes = dc_zip_writer_finish (out, &error);
  g_assert_no_error (error);
  /* Flip a byte inside the chosen entry's data (found by its content). */
  copy = g_bytes_unref_to_data (g_steal_pointer (&bytes), &len);
  {
    gsize found = 0;
    guint seen = 0;

    for (gsize i = 0; i + sizeof values <= len; i++)
      if (memcmp (copy + i, values, sizeof values) == 0 && seen++ == (corrupt == 0 ? 0 : 1))
        found = i;
    g_assert_cmpuint (found, >, 0);
    copy[found + 1] ^= 0x40;
  }
  return g_bytes_new_take (copy, len);
}

/* CRCs are checked for the entries that are read, and only for those. */
static void
test_zip_crc_checked_on_read (void)
{
  g_autoptr(GBytes) unread_corrupt = zip_with_extra_entry (9);
  g_autoptr(GBytes) read_corrupt = zip_with_extra_entry (0);
  g_autoptr(GError) error = NULL;
  g_autoptr(DcPtFile) file = NULL;
  g_autoptr(DcPtFile) none = NULL;

  file = dc_pt_file_new_from_bytes (unread_corrupt, &error);
  g_assert_no_error (error);
  g_assert_nonnull (dc_pt_value_lookup (file->root, "t"));

  none = dc_pt_file_new_from_bytes (read_corrupt, &error);
  g_assert_null (none);
  g_assert_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT);
  g_assert_nonnull (strstr (error->message, "“forged/data/0” is corrupt (CRC mismatch)"));
}

/* Address space this process may still grow by while parsing a flood. */
#define FLOOD_MEMORY_BUDGET (32 * 1024 * 1024)
#define FLOOD_BYTES         (1024 * 1024)

static void
limit_address_space (gsize extra)
{
  g_autofree char *statm = NULL;
  struct rlimit limit;
  guint64 pages;

  g_assert_true (g_file_get_contents ("/proc/self/statm", &statm, NULL, NULL));
  pages = g_ascii_strtoull (statm, NULL, 10);
  limit.rlim_cur = limit.rlim_max = pages * sysconf (_SC_PAGESIZE) + extra;
  g_assert_cmpint (setrlimit (RLIMIT_AS, &limit), ==, 0);
}

/* 1 MB of one pickle item, repeated (data: the item, then its length). The
 * machine must refuse it within a small address-space budget: the old
 * reader spent 259 MB on 1 MB of EMPTY_DICT. Runs in a subprocess whose
 * RLIMIT_AS makes an unbounded reader fail at once instead of eating the
 * machine. */
static void
test_pickle_flood (gconstpointer data)
{
  const char *item = data;
  gsize item_len = strlen (item);

  if (g_test_subprocess ())
    {
      g_autoptr(GByteArray) pickle = g_byte_array_new ();
      g_autoptr(DcZipWriter) writer = dc_zip_writer_new ();
      g_autoptr(GBytes) pickle_bytes = NULL;
      g_autoptr(GBytes) bytes = NULL;
      g_autoptr(GError) error = NULL;
      g_autoptr(DcPtFile) file = NULL;
      const guint8 proto[2] = { DC_PICKLE_PROTO, 2 };
      const guint8 stop = DC_PICKLE_STOP;

      g_byte_array_append (pickle, proto, 2);
      while (pickle->len < FLOOD_BYTES)
        g_byte_array_append (pickle, (const guint8 *) item, item_len);
      g_byte_array_append (pickle, &stop, 1);
      pickle_bytes = g_byte_array_free_to_bytes (g_steal_pointer (&pickle));
      dc_zip_writer_add (writer, "flood/data.pkl", pickle_bytes);
      bytes = dc_zip_writer_finish (writer, &error);
      g_assert_no_error (error);

      limit_address_space (FLOOD_MEMORY_BUDGET);
      file = dc_pt_file_new_from_bytes (bytes, &error);
      g_assert_null (file);
      g_assert_nonnull (error);
      g_printerr ("%s\n", error->message);
      return;
    }
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
  g_test_trap_assert_stderr ("*refused checkpoint pickle at byte *");
}

static void
assert_not_regular (const char *path)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcGptModel) model = dc_checkpoint_load (path, NULL, &error);
  g_autoptr(DcPtFile) file = NULL;
  g_autofree char *expected = g_strdup_printf ("“%s” is not a regular file", path);

  g_assert_null (model);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_NOT_REGULAR_FILE);
  g_assert_cmpstr (error->message, ==, expected);
  g_clear_error (&error);
  file = dc_pt_file_new_from_path (path, &error);
  g_assert_null (file);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_NOT_REGULAR_FILE);
}

/* A FIFO without a writer, a character device and a folder are refused by
 * name. The loads run in a subprocess killed after 20 s, so that a reader
 * that blocks in open () fails the test instead of hanging the suite. */
static void
test_not_regular_file (void)
{
  if (g_test_subprocess ())
    {
      g_autoptr(GError) error = NULL;
      g_autofree char *dir = g_dir_make_tmp ("dc-ckpt-fifo-XXXXXX", &error);
      g_autofree char *fifo = NULL;

      g_assert_no_error (error);
      fifo = g_build_filename (dir, "model.pt", NULL);
      g_assert_cmpint (mkfifo (fifo, 0600), ==, 0);
      assert_not_regular (fifo);
      assert_not_regular ("/dev/null");
      assert_not_regular (dir);
      g_unlink (fifo);
      g_rmdir (dir);
      return;
    }
  g_test_trap_subprocess (NULL, 20 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
}

typedef struct
{
  guint         calls;
  guint         last_done;
  guint         total;
  gboolean      in_order;
  guint         cancel_at;    /* cancel once @done reaches it; 0: never */
  GCancellable *cancellable;
} Seen;

static void
progress_cb (guint    done,
             guint    total,
             gpointer user_data)
{
  Seen *seen = user_data;

  if (done != seen->last_done + 1 || (seen->total != 0 && total != seen->total))
    seen->in_order = FALSE;
  seen->calls++;
  seen->last_done = done;
  seen->total = total;
  if (seen->cancel_at != 0 && done == seen->cancel_at)
    g_cancellable_cancel (seen->cancellable);
}

/* Save and load count every tensor (weights, both moments) and one last
 * unit, in order, ending at the total; cancelled midway, the save writes
 * nothing and the load returns no model. */
static void
test_progress_and_cancel (void)
{
  g_autoptr(DcGptModel) model = make_model (32, 16);
  g_autoptr(DcGptModel) loaded = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("dc-checkpoint-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "model.pt", NULL);
  g_autofree char *other = g_build_filename (dir, "other.pt", NULL);
  guint n_units = 3 * dc_gpt_config_n_tensors (&model->config) + 1;
  DcTrainSettings settings;
  Seen seen = { 0, 0, 0, TRUE, 0, NULL };

  dc_train_settings_init_default (&settings);
  g_assert_true (dc_checkpoint_save_full (model, &settings, path, NULL, progress_cb, &seen,
                                          &error));
  g_assert_no_error (error);
  g_assert_true (seen.in_order);
  g_assert_cmpuint (seen.calls, ==, n_units);
  g_assert_cmpuint (seen.total, ==, n_units);
  g_assert_cmpuint (seen.last_done, ==, n_units);

  seen = (Seen) { 0, 0, 0, TRUE, 0, NULL };
  loaded = dc_checkpoint_load_full (path, NULL, NULL, progress_cb, &seen, &error);
  g_assert_no_error (error);
  g_assert_nonnull (loaded);
  g_assert_true (seen.in_order);
  g_assert_cmpuint (seen.calls, ==, n_units);
  g_assert_cmpuint (seen.last_done, ==, n_units);
  g_clear_pointer (&loaded, dc_gpt_model_free);

  /* Cancelled at the fifth tensor: stops there. */
  seen = (Seen) { 0, 0, 0, TRUE, 5, g_cancellable_new () };
  g_assert_false (dc_checkpoint_save_full (model, &settings, other, seen.cancellable,
                                           progress_cb, &seen, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
  g_clear_error (&error);
  g_assert_cmpuint (seen.calls, ==, 5);
  g_assert_false (g_file_test (other, G_FILE_TEST_EXISTS));
  g_clear_object (&seen.cancellable);

  seen = (Seen) { 0, 0, 0, TRUE, 5, g_cancellable_new () };
  loaded = dc_checkpoint_load_full (path, NULL, seen.cancellable, progress_cb, &seen, &error);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
  g_clear_error (&error);
  g_assert_null (loaded);
  g_assert_cmpuint (seen.calls, ==, 5);
  g_clear_object (&seen.cancellable);

  dc_test_remove_tree (dir);
}

static int
compare_names (gconstpointer a,
               gconstpointer b)
{
  return strcmp (*(const char * const *) a, *(const char * const *) b);
}

/* Names in @dir, sorted and joined: what a folder holds. */
static char *
list_folder (const char *path)
{
  g_autoptr(GDir) dir = g_dir_open (path, 0, NULL);
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  const char *name;

  if (dir == NULL)
    return g_strdup ("(none)");
  while ((name = g_dir_read_name (dir)) != NULL)
    g_ptr_array_add (names, g_strdup (name));
  g_ptr_array_sort (names, compare_names);
  g_ptr_array_add (names, NULL);
  return g_strjoinv (" ", (char **) names->pdata);
}

/* A cancelled export leaves nothing behind (no folder, no hidden partial
 * one) and an export already there as it was; a finished one replaces the
 * export's files and keeps the folder's others. */
static void
test_hf_export_cancel (void)
{
  g_autoptr(DcGptModel) model = make_model (32, 16);
  g_autoptr(DcGptModel) other = make_model (16, 16);
  g_autoptr(GCancellable) cancelled = g_cancellable_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *parent = g_dir_make_tmp ("dc-hf-export-XXXXXX", NULL);
  g_autofree char *dir = g_build_filename (parent, "export", NULL);
  g_autofree char *fresh = g_build_filename (parent, "fresh", NULL);
  g_autofree char *weights = g_build_filename (dir, "model.safetensors", NULL);
  g_autofree char *readme = g_build_filename (dir, "README.md", NULL);
  g_autofree char *before = NULL, *listing = NULL;
  g_autofree char *old_bytes = NULL, *new_bytes = NULL;
  gsize old_len = 0, new_len = 0;

  g_cancellable_cancel (cancelled);

  /* No folder yet: none is created. */
  g_assert_false (dc_hf_export_full (model, fresh, cancelled, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
  g_clear_error (&error);
  listing = list_folder (parent);
  g_assert_cmpstr (listing, ==, "");
  g_clear_pointer (&listing, g_free);

  /* An older export (with a file of the user's): untouched. */
  g_assert_true (dc_hf_export_full (other, dir, NULL, &error));
  g_assert_no_error (error);
  g_assert_true (g_file_set_contents (readme, "mine\n", -1, &error));
  g_assert_true (g_file_get_contents (weights, &old_bytes, &old_len, &error));
  before = list_folder (dir);
  g_assert_false (dc_hf_export_full (model, dir, cancelled, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
  g_clear_error (&error);
  listing = list_folder (dir);
  g_assert_cmpstr (listing, ==, before);
  g_clear_pointer (&listing, g_free);
  g_assert_true (g_file_get_contents (weights, &new_bytes, &new_len, &error));
  g_assert_cmpmem (new_bytes, new_len, old_bytes, old_len);
  g_clear_pointer (&new_bytes, g_free);
  listing = list_folder (parent);
  g_assert_cmpstr (listing, ==, "export");
  g_clear_pointer (&listing, g_free);

  /* Finished: the weights are the new model's, README.md stays. */
  g_assert_true (dc_hf_export_full (model, dir, NULL, &error));
  g_assert_no_error (error);
  listing = list_folder (dir);
  g_assert_cmpstr (listing, ==, before);
  g_clear_pointer (&listing, g_free);
  g_assert_true (g_file_get_contents (weights, &new_bytes, &new_len, &error));
  g_assert_true (new_len != old_len || memcmp (new_bytes, old_bytes, old_len) != 0);
  listing = list_folder (parent);
  g_assert_cmpstr (listing, ==, "export");

  dc_test_remove_tree (parent);
}

typedef struct
{
  GArray       *done;         /* each report's @done */
  guint         total;
  guint         cancel_at;    /* cancel when @done reaches it; 0: never */
  GCancellable *cancellable;
} ExportProgress;

static void
export_progress_cb (guint    done,
                    guint    total,
                    gpointer user_data)
{
  ExportProgress *p = user_data;

  g_array_append_val (p->done, done);
  if (p->total == 0)
    p->total = total;
  g_assert_cmpuint (total, ==, p->total);
  if (p->cancel_at != 0 && done == p->cancel_at)
    g_cancellable_cancel (p->cancellable);
}

/* The Hugging Face export reports each tensor of model.safetensors written,
 * then the move into the folder, rising to its total; cancelled after the
 * first tensor (half-way through model.safetensors), it leaves the older
 * export as it was and no partial folder. */
static void
test_hf_export_progress (void)
{
  g_autoptr(DcGptModel) model = make_model (32, 16);
  g_autoptr(DcGptModel) other = make_model (16, 16);
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  g_autoptr(GArray) done = g_array_new (FALSE, FALSE, sizeof (guint));
  g_autoptr(GError) error = NULL;
  g_autofree char *parent = g_dir_make_tmp ("dc-hf-progress-XXXXXX", NULL);
  g_autofree char *dir = g_build_filename (parent, "export", NULL);
  g_autofree char *weights = g_build_filename (dir, "model.safetensors", NULL);
  g_autofree char *old_bytes = NULL, *new_bytes = NULL, *listing = NULL;
  g_autoptr(GBytes) expected = NULL;
  gsize old_len = 0, new_len = 0;
  guint n_tensors = dc_gpt_config_n_tensors (&model->config);
  ExportProgress progress = { done, 0, 0, cancellable };

  g_assert_true (dc_hf_export_progress (other, dir, NULL, export_progress_cb, &progress,
                                        &error));
  g_assert_no_error (error);
  g_assert_cmpuint (progress.total, ==, dc_gpt_config_n_tensors (&other->config) + 1);
  g_assert_cmpuint (done->len, ==, progress.total);
  for (guint i = 0; i < done->len; i++)
    g_assert_cmpuint (g_array_index (done, guint, i), ==, i + 1);
  g_assert_true (g_file_get_contents (weights, &old_bytes, &old_len, &error));

  /* Cancelled after the first of several tensors. */
  g_assert_cmpuint (n_tensors, >, 2);
  g_array_set_size (done, 0);
  progress.total = 0;
  progress.cancel_at = 1;
  g_assert_false (dc_hf_export_progress (model, dir, cancellable, export_progress_cb, &progress,
                                         &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
  g_clear_error (&error);
  g_assert_cmpuint (done->len, ==, 1);
  g_assert_true (g_file_get_contents (weights, &new_bytes, &new_len, &error));
  g_assert_cmpmem (new_bytes, new_len, old_bytes, old_len);
  g_clear_pointer (&new_bytes, g_free);
  listing = list_folder (parent);
  g_assert_cmpstr (listing, ==, "export");

  /* Written tensor by tensor: the same bytes as the whole file at once. */
  g_assert_true (dc_hf_export_progress (model, dir, NULL, NULL, NULL, &error));
  g_assert_no_error (error);
  g_assert_true (g_file_get_contents (weights, &new_bytes, &new_len, &error));
  expected = dc_safetensors_write (model, &error);
  g_assert_no_error (error);
  g_assert_cmpmem (new_bytes, new_len, g_bytes_get_data (expected, NULL),
                   g_bytes_get_size (expected));

  dc_test_remove_tree (parent);
}

int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/dc/model/checkpoint/round-trip", test_round_trip);
  g_test_add_func ("/dc/model/checkpoint/progress-and-cancel", test_progress_and_cancel);
  g_test_add_func ("/dc/model/checkpoint/hf-export-cancel", test_hf_export_cancel);
  g_test_add_func ("/dc/model/checkpoint/hf-export-progress", test_hf_export_progress);
  g_test_add_func ("/dc/model/checkpoint/torch-opens", test_torch_opens);
  g_test_add_func ("/dc/model/checkpoint/malicious-refused", test_malicious_refused);
  g_test_add_func ("/dc/model/checkpoint/truncated-corrupt", test_truncated_and_corrupt);
  g_test_add_func ("/dc/model/checkpoint/mismatch-messages", test_mismatch_messages);
  g_test_add_func ("/dc/model/checkpoint/shape-mismatch", test_shape_mismatch);
  g_test_add_func ("/dc/model/checkpoint/zip-overlapping-entries", test_zip_overlapping_entries);
  g_test_add_func ("/dc/model/checkpoint/zip-overlaps-directory", test_zip_overlaps_directory);
  g_test_add_func ("/dc/model/checkpoint/zip-duplicate-names", test_zip_duplicate_names);
  g_test_add_func ("/dc/model/checkpoint/zip-crc-checked-on-read", test_zip_crc_checked_on_read);
  g_test_add_func ("/dc/model/checkpoint/not-regular-file", test_not_regular_file);
  /* Each item is one opcode with its operands (no NUL bytes). */
  g_test_add_data_func ("/dc/model/checkpoint/pickle-flood/empty-dict", "}", test_pickle_flood);
  g_test_add_data_func ("/dc/model/checkpoint/pickle-flood/empty-tuple", ")", test_pickle_flood);
  g_test_add_data_func ("/dc/model/checkpoint/pickle-flood/true", "\x88", test_pickle_flood);
  g_test_add_data_func ("/dc/model/checkpoint/pickle-flood/binint", "J\x01\x01\x01\x01",
                        test_pickle_flood);
  g_test_add_data_func ("/dc/model/checkpoint/pickle-flood/tuples-of-dicts", "(}}}}}}}}t",
                        test_pickle_flood);
  g_test_add_data_func ("/dc/model/checkpoint/pickle-flood/empty-list", "]", test_pickle_flood);
  g_test_add_data_func ("/dc/model/checkpoint/pickle-flood/mark", "(", test_pickle_flood);
  g_test_add_data_func ("/dc/model/checkpoint/pickle-flood/memo-put", "}q\x01",
                        test_pickle_flood);
  return g_test_run ();
}
