/* test-model-kit-blob.c: the inference kit's blob (dc_kit_blob_new ()).
 *
 * Proves: the layout of dc-kit-blob.h (magic, version, the SHA-256 of every
 * byte after it, header and data lengths, 8-byte alignment); the header's
 * config, info (step, loss or null, weight hash, rule id) and tensor table
 * (every tensor of the model, in order, with the documented shape, kind,
 * offset and length); each q8 tensor holds exactly dc_quant_pack ()'s values
 * and exponents of the vectors the forward pass packs (the columns of a
 * Conv1D weight, the rows of wte for the head), each f32 tensor the weights'
 * bytes; at width 128 the blob is under 40% of the f32 weights; the bytes are the
 * same on every call; a weight that is not finite, in a quantized tensor or
 * in a float one, is refused with a message naming the tensor.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <math.h>
#include <string.h>
#include <json-glib/json-glib.h>

#include "dc-sha256.h"
#include "engine/dc-gemm.h"
#include "model/dc-kit-blob.h"

static DcGptModel *
make_model (guint width,
            guint seq)
{
  DcGptConfig config;
  g_autoptr(GError) error = NULL;
  DcGptModel *model;

  dc_gpt_config_init_derived (&config, width, seq);
  model = dc_gpt_model_new (&config, &error);
  g_assert_no_error (error);
  dc_gpt_model_init_weights (model, 7);
  /* Non-trivial biases and gains, so that f32 tensors are not all 0 or 1. */
  for (gsize i = 0; i < model->n_params; i++)
    if (model->params[i] == 0.0f || model->params[i] == 1.0f)
      model->params[i] += (float) ((gint) (i % 13) - 6) * 0.01f;
  model->step = 1234;
  return model;
}

static guint32
read_u32 (const guint8 *p)
{
  return (guint32) p[0] | ((guint32) p[1] << 8) | ((guint32) p[2] << 16) | ((guint32) p[3] << 24);
}

static JsonObject *
parse_header (GBytes *blob)
{
  const guint8 *b = g_bytes_get_data (blob, NULL);
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;

  json_parser_load_from_data (parser, (const char *) b + DC_KIT_BLOB_PREFIX,
                              read_u32 (b + 40), &error);
  g_assert_no_error (error);
  return json_object_ref (json_node_get_object (json_parser_get_root (parser)));
}

static void
check_layout (guint width,
              guint seq)
{
  g_autoptr(DcGptModel) model = make_model (width, seq);
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) blob = dc_kit_blob_new (model, 1.25, &error);
  g_autoptr(GBytes) again = NULL;
  g_autoptr(JsonObject) header = NULL;
  g_autoptr(DcSha256) sum = dc_sha256_new ();
  g_autofree char *hash = dc_gpt_model_dup_hash (model);
  const DcGptConfig *c = &model->config;
  const guint8 *b, *data;
  gsize size, h, d, expect_offset = 0;
  guint8 digest[DC_SHA256_SIZE];
  JsonObject *config, *info;
  JsonArray *tensors;

  g_assert_no_error (error);
  b = g_bytes_get_data (blob, &size);
  g_assert_cmpmem (b, 4, DC_KIT_BLOB_MAGIC, 4);
  g_assert_cmpuint (read_u32 (b + 4), ==, DC_KIT_BLOB_VERSION);
  h = read_u32 (b + 40);
  d = read_u32 (b + 44);
  g_assert_cmpuint (size, ==, DC_KIT_BLOB_PREFIX + h + d);
  g_assert_cmpuint ((DC_KIT_BLOB_PREFIX + h) % 8, ==, 0);
  g_assert_cmpuint (h, <=, DC_KIT_BLOB_HEADER_MAX);
  data = b + DC_KIT_BLOB_PREFIX + h;
  dc_sha256_update (sum, b + 40, size - 40);
  dc_sha256_get_digest (sum, digest);
  g_assert_cmpmem (b + 8, DC_SHA256_SIZE, digest, DC_SHA256_SIZE);
  /* Compact: int8 matrices, f32 only for embeddings, norms and biases. At
   * width 128 the matrices dominate and the blob is under 40% of the f32
   * weights; at small widths the f32 token embedding (needed exactly) does. */
  if (width >= 128)
    g_assert_cmpuint (size, <, model->n_params * sizeof (float) * 2 / 5);

  header = parse_header (blob);
  g_assert_cmpstr (json_object_get_string_member (header, "format"), ==, "daisychain-kit");
  config = json_object_get_object_member (header, "config");
  g_assert_cmpint (json_object_get_int_member (config, "vocab"), ==, 256);
  g_assert_cmpint (json_object_get_int_member (config, "width"), ==, c->width);
  g_assert_cmpint (json_object_get_int_member (config, "layers"), ==, c->n_layer);
  g_assert_cmpint (json_object_get_int_member (config, "heads"), ==, c->n_head);
  g_assert_cmpint (json_object_get_int_member (config, "seq"), ==, c->seq);
  g_assert_cmpstr (json_object_get_string_member (config, "activation"), ==, "relu");
  info = json_object_get_object_member (header, "info");
  g_assert_cmpint (json_object_get_int_member (info, "step"), ==, 1234);
  g_assert_cmpfloat (json_object_get_double_member (info, "loss"), ==, 1.25);
  g_assert_cmpstr (json_object_get_string_member (info, "weight_hash"), ==, hash);
  g_assert_cmpstr (json_object_get_string_member (info, "rule"), ==, dc_gemm_rule_id ());

  tensors = json_object_get_array_member (header, "tensors");
  g_assert_cmpuint (json_array_get_length (tensors), ==, dc_gpt_config_n_tensors (c) + 1);
  for (guint i = 0; i < json_array_get_length (tensors); i++)
    {
      JsonObject *t = json_array_get_object_element (tensors, i);
      JsonArray *shape = json_object_get_array_member (t, "shape");
      const char *kind = json_object_get_string_member (t, "kind");
      gsize offset = json_object_get_int_member (t, "offset");
      gsize length = json_object_get_int_member (t, "length");
      gboolean head = i == dc_gpt_config_n_tensors (c);
      DcGptTensor info_t;
      const float *w;

      g_assert_cmpuint (offset, ==, expect_offset);
      g_assert_cmpuint (offset % 8, ==, 0);
      g_assert_cmpuint (offset + length, <=, d);
      expect_offset = offset + ((length + 7) & ~(gsize) 7);
      dc_gpt_config_tensor (c, head ? 0 : i, &info_t);
      w = model->params + info_t.offset;
      g_assert_cmpstr (json_object_get_string_member (t, "name"), ==,
                       head ? "lm_head.weight" : info_t.name);
      if (g_str_equal (kind, "f32"))
        {
          g_assert_false (head);
          g_assert_true (info_t.n_dims == 1 || strstr (info_t.name, "wte") != NULL
                         || strstr (info_t.name, "wpe") != NULL);
          g_assert_cmpuint (json_array_get_length (shape), ==, info_t.n_dims);
          g_assert_cmpint (json_array_get_int_element (shape, 0), ==, info_t.sizes[0]);
          g_assert_cmpuint (length, ==, info_t.numel * 4);
          g_assert_cmpmem (data + offset, length, w, info_t.numel * 4);
        }
      else
        {
          /* The vectors dc-gpt.c packs: the head's are wte's rows, a Conv1D
           * weight's (in, out) are its columns. */
          gsize nv = head ? c->vocab : info_t.sizes[1];
          gsize k = head ? c->width : info_t.sizes[0];
          g_autoptr(DcQuantMatrix) q = dc_quant_matrix_new (nv, k, &error);

          g_assert_cmpstr (kind, ==, "q8");
          g_assert_no_error (error);
          g_assert_true (dc_quant_pack ("test", w, head ? k : 1, head ? 1 : nv, q, &error));
          g_assert_no_error (error);
          g_assert_cmpint (json_array_get_int_element (shape, 0), ==, nv);
          g_assert_cmpint (json_array_get_int_element (shape, 1), ==, k);
          g_assert_cmpuint (length, ==, nv * k + 2 * nv);
          g_assert_cmpmem (data + offset, nv * k, q->q, nv * k);
          for (gsize v = 0; v < nv; v++)
            {
              const guint8 *e = data + offset + nv * k + 2 * v;

              g_assert_cmpint ((gint16) (e[0] | (e[1] << 8)), ==, q->exponent[v]);
            }
        }
    }
  g_assert_cmpuint (expect_offset, ==, d);

  again = dc_kit_blob_new (model, 1.25, &error);
  g_assert_no_error (error);
  g_assert_true (g_bytes_equal (blob, again));
}

static void
test_layout (void)
{
  check_layout (32, 16);
  check_layout (48, 32);   /* 6 heads of 8 */
  check_layout (128, 64);
}

static void
test_unknown_loss (void)
{
  g_autoptr(DcGptModel) model = make_model (16, 16);
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) blob = dc_kit_blob_new (model, NAN, &error);
  g_autoptr(JsonObject) header = NULL;

  g_assert_no_error (error);
  header = parse_header (blob);
  g_assert_true (json_object_get_null_member (json_object_get_object_member (header, "info"),
                                              "loss"));
}

static void
test_not_finite (void)
{
  g_autoptr(DcGptModel) model = make_model (16, 16);
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) blob = NULL;
  float *w = dc_gpt_model_tensor (model, "transformer.h.1.mlp.c_fc.weight");

  w[5] = NAN;
  blob = dc_kit_blob_new (model, 0.5, &error);
  g_assert_null (blob);
  g_assert_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_NOT_FINITE);
  g_assert_nonnull (strstr (error->message, "the inference kit cannot hold this model"));
  g_assert_nonnull (strstr (error->message, "transformer.h.1.mlp.c_fc.weight"));

  /* The same for a float tensor (a bias), which is stored as it is. */
  w[5] = 0.0f;
  dc_gpt_model_tensor (model, "transformer.h.0.ln_2.bias")[3] = INFINITY;
  g_clear_error (&error);
  blob = dc_kit_blob_new (model, 0.5, &error);
  g_assert_null (blob);
  g_assert_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_NOT_FINITE);
  g_assert_nonnull (strstr (error->message, "the inference kit cannot hold this model: "
                                            "transformer.h.0.ln_2.bias: infinity at index 3"));
}

int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/dc/model/kit-blob/layout", test_layout);
  g_test_add_func ("/dc/model/kit-blob/unknown-loss", test_unknown_loss);
  g_test_add_func ("/dc/model/kit-blob/not-finite", test_not_finite);
  return g_test_run ();
}
