/* dc-kit-blob.c: STAND-IN (kit-page) for kit-engine's blob writer: magic,
 * version, SHA-256 of the rest, then a u32 length and a JSON header; no
 * tensors. Replaced when the kit-engine branch is merged.
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

GBytes *
dc_kit_blob_new (const DcGptModel  *model,
                 double             loss,
                 GError           **error)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonGenerator) gen = json_generator_new ();
  g_autoptr(JsonNode) root = NULL;
  g_autofree char *json = NULL, *hash = dc_gpt_model_dup_hash (model);
  g_autoptr(GByteArray) out = g_byte_array_new ();
  g_autoptr(DcSha256) sha = dc_sha256_new ();
  guint8 digest[DC_SHA256_SIZE];
  guint32 version = GUINT32_TO_LE (1), len;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "config");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "vocab");
  json_builder_add_int_value (b, model->config.vocab);
  json_builder_set_member_name (b, "width");
  json_builder_add_int_value (b, model->config.width);
  json_builder_set_member_name (b, "layers");
  json_builder_add_int_value (b, model->config.n_layer);
  json_builder_set_member_name (b, "heads");
  json_builder_add_int_value (b, model->config.n_head);
  json_builder_set_member_name (b, "seq");
  json_builder_add_int_value (b, model->config.seq);
  json_builder_end_object (b);
  json_builder_set_member_name (b, "info");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "step");
  json_builder_add_int_value (b, model->step);
  json_builder_set_member_name (b, "loss");
  if (isnan (loss))
    json_builder_add_null_value (b);
  else
    json_builder_add_double_value (b, loss);
  json_builder_set_member_name (b, "weight_hash");
  json_builder_add_string_value (b, hash);
  json_builder_set_member_name (b, "rule");
  json_builder_add_string_value (b, "standin");
  json_builder_end_object (b);
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  json = json_generator_to_data (gen, NULL);

  len = GUINT32_TO_LE ((guint32) strlen (json));
  g_byte_array_append (out, (const guint8 *) DC_KIT_BLOB_MAGIC, 4);
  g_byte_array_append (out, (const guint8 *) &version, 4);
  g_byte_array_set_size (out, 40);
  g_byte_array_append (out, (const guint8 *) &len, 4);
  g_byte_array_append (out, (const guint8 *) json, strlen (json));
  dc_sha256_update (sha, out->data + 40, out->len - 40);
  dc_sha256_get_digest (sha, digest);
  memcpy (out->data + 8, digest, DC_SHA256_SIZE);
  return g_byte_array_free_to_bytes (g_steal_pointer (&out));
}
