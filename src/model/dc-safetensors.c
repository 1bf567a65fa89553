/* dc-safetensors.c: the safetensors header, its index, F16/BF16 widening.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-model"

#include "config.h"

#include "dc-safetensors.h"

#include <string.h>
#include <json-glib/json-glib.h>

#include "dc-json-bounds.h"
#include "dc-model-error.h"
#include "dc-regular-file.h"

gsize
dc_safetensors_dtype_size (DcSafetensorsDtype dtype)
{
  return dtype == DC_SAFETENSORS_F32 ? 4 : 2;
}

const char *
dc_safetensors_dtype_name (DcSafetensorsDtype dtype)
{
  switch (dtype)
    {
    case DC_SAFETENSORS_F32:
      return "F32";
    case DC_SAFETENSORS_F16:
      return "F16";
    case DC_SAFETENSORS_BF16:
      return "BF16";
    default:
      return "?";
    }
}

static void
tensor_free (gpointer data)
{
  DcSafetensorsTensor *t = data;

  g_free (t->name);
  g_free (t);
}

void
dc_safetensors_free (DcSafetensors *self)
{
  if (self == NULL)
    return;
  g_clear_pointer (&self->by_name, g_hash_table_unref);
  g_clear_pointer (&self->tensors, g_ptr_array_unref);
  g_clear_pointer (&self->metadata, g_hash_table_unref);
  g_free (self);
}

/**
 * dc_safetensors_read_prefix:
 * @prefix: (array length=prefix_len): the file's first bytes (at least 8)
 * @file_size: the whole file's size in bytes
 * @header_len: (out): the header's length
 *
 * Checks the 8-byte length before anything of that size is fetched.
 */
gboolean
dc_safetensors_read_prefix (const guint8  *prefix,
                            gsize          prefix_len,
                            guint64        file_size,
                            guint64       *header_len,
                            GError       **error)
{
  guint64 n = 0;

  if (prefix_len < 8 || file_size < 8)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                   "safetensors file is shorter than its 8-byte header length");
      return FALSE;
    }
  for (int i = 7; i >= 0; i--)
    n = n << 8 | prefix[i];
  if (n > DC_SAFETENSORS_MAX_HEADER)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE,
                   "safetensors header of %" G_GUINT64_FORMAT " bytes is larger than the "
                   "%u MiB limit", n, DC_SAFETENSORS_MAX_HEADER / (1024 * 1024));
      return FALSE;
    }
  if (n < 2 || n > file_size - 8)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                   "safetensors header length %" G_GUINT64_FORMAT " does not fit the file "
                   "(%" G_GUINT64_FORMAT " bytes)", n, file_size);
      return FALSE;
    }
  *header_len = n;
  return TRUE;
}

static gboolean
read_u64 (JsonNode *node,
          guint64  *out)
{
  gint64 v;

  if (node == NULL || json_node_get_value_type (node) != G_TYPE_INT64)
    return FALSE;
  v = json_node_get_int (node);
  if (v < 0)
    return FALSE;
  *out = (guint64) v;
  return TRUE;
}

static gboolean
parse_tensor (DcSafetensors        *self,
              const char           *name,
              JsonNode             *node,
              DcSafetensorsTensor **out,
              GError              **error)
{
  DcSafetensorsTensor *t;
  JsonObject *object;
  JsonNode *shape, *offsets;
  const char *dtype;
  guint64 bytes;

#define FAIL(code, ...) \
  G_STMT_START { \
    g_set_error (error, DC_MODEL_ERROR, code, __VA_ARGS__); \
    return FALSE; \
  } G_STMT_END

  if (!JSON_NODE_HOLDS_OBJECT (node))
    FAIL (DC_MODEL_ERROR_FORMAT, "safetensors tensor “%s” is not an object", name);
  object = json_node_get_object (node);
  dtype = json_object_get_member (object, "dtype") != NULL &&
          json_node_get_value_type (json_object_get_member (object, "dtype")) == G_TYPE_STRING
            ? json_object_get_string_member (object, "dtype") : NULL;
  shape = json_object_get_member (object, "shape");
  offsets = json_object_get_member (object, "data_offsets");
  if (dtype == NULL || shape == NULL || !JSON_NODE_HOLDS_ARRAY (shape) || offsets == NULL ||
      !JSON_NODE_HOLDS_ARRAY (offsets) ||
      json_array_get_length (json_node_get_array (offsets)) != 2)
    FAIL (DC_MODEL_ERROR_FORMAT,
          "safetensors tensor “%s” needs a dtype, a shape and two data_offsets", name);

  t = g_new0 (DcSafetensorsTensor, 1);
  t->name = g_strdup (name);
  *out = t;   /* owned by the caller from here, also on failure */
  if (strcmp (dtype, "F32") == 0)
    t->dtype = DC_SAFETENSORS_F32;
  else if (strcmp (dtype, "F16") == 0)
    t->dtype = DC_SAFETENSORS_F16;
  else if (strcmp (dtype, "BF16") == 0)
    t->dtype = DC_SAFETENSORS_BF16;
  else
    FAIL (DC_MODEL_ERROR_UNSUPPORTED,
          "safetensors tensor “%s” has dtype “%s”, which is not supported "
          "(F32, F16 and BF16 are)", name, dtype);

  t->rank = json_array_get_length (json_node_get_array (shape));
  if (t->rank > DC_SAFETENSORS_MAX_RANK)
    FAIL (DC_MODEL_ERROR_UNSUPPORTED, "safetensors tensor “%s” has rank %u, more than %u",
          name, t->rank, DC_SAFETENSORS_MAX_RANK);
  t->numel = 1;
  for (guint i = 0; i < t->rank; i++)
    {
      if (!read_u64 (json_array_get_element (json_node_get_array (shape), i), &t->shape[i]))
        FAIL (DC_MODEL_ERROR_FORMAT,
              "safetensors tensor “%s” has a shape entry that is not a non-negative integer",
              name);
      if (!g_uint64_checked_mul (&t->numel, t->numel, t->shape[i]))
        FAIL (DC_MODEL_ERROR_TOO_LARGE,
              "safetensors tensor “%s” has a shape whose size overflows", name);
    }
  if (!g_uint64_checked_mul (&bytes, t->numel, dc_safetensors_dtype_size (t->dtype)))
    FAIL (DC_MODEL_ERROR_TOO_LARGE, "safetensors tensor “%s” has a shape whose size overflows",
          name);
  if (!read_u64 (json_array_get_element (json_node_get_array (offsets), 0), &t->begin) ||
      !read_u64 (json_array_get_element (json_node_get_array (offsets), 1), &t->end))
    FAIL (DC_MODEL_ERROR_FORMAT,
          "safetensors tensor “%s” has data_offsets that are not non-negative integers", name);
  if (t->end < t->begin || t->end > self->data_size)
    FAIL (DC_MODEL_ERROR_FORMAT,
          "safetensors tensor “%s” has data_offsets [%" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT
          "] outside the file's %" G_GUINT64_FORMAT " data bytes", name, t->begin, t->end,
          self->data_size);
  if (t->end - t->begin != bytes)
    FAIL (DC_MODEL_ERROR_FORMAT,
          "safetensors tensor “%s” holds %" G_GUINT64_FORMAT " bytes but its shape and dtype "
          "need %" G_GUINT64_FORMAT, name, t->end - t->begin, bytes);
#undef FAIL
  return TRUE;
}

static int
compare_begin (gconstpointer a,
               gconstpointer b)
{
  const DcSafetensorsTensor *x = *(DcSafetensorsTensor * const *) a;
  const DcSafetensorsTensor *y = *(DcSafetensorsTensor * const *) b;

  if (x->begin != y->begin)
    return x->begin < y->begin ? -1 : 1;
  /* Empty tensors first, so a non-empty one at the same offset follows them. */
  return (x->end > y->end) - (x->end < y->end);
}

/**
 * dc_safetensors_parse_header:
 * @header: (array length=header_len): the JSON header (untrusted)
 * @header_len: as read by dc_safetensors_read_prefix()
 * @file_size: the whole file's size in bytes
 *
 * Returns: (transfer full) (nullable): the tensors, or %NULL with @error set
 */
DcSafetensors *
dc_safetensors_parse_header (const char  *header,
                             gsize        header_len,
                             guint64      file_size,
                             GError     **error)
{
  g_autoptr(DcSafetensors) self = NULL;
  g_autoptr(JsonNode) root = NULL;
  g_autoptr(GError) local_error = NULL;
  JsonObjectIter iter;
  const char *name;
  JsonNode *node;
  guint64 pos = 0;
  gsize json_len = header_len;

  g_return_val_if_fail (header != NULL || header_len == 0, NULL);

  if (header_len > DC_SAFETENSORS_MAX_HEADER || file_size < 8 ||
      header_len > file_size - 8)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                   "safetensors header length %" G_GSIZE_FORMAT " does not fit the file "
                   "(%" G_GUINT64_FORMAT " bytes)", header_len, file_size);
      return NULL;
    }
  /* The format lets writers pad the header with trailing spaces. */
  while (json_len > 0 && header[json_len - 1] == ' ')
    json_len--;
  root = dc_json_parse_bounded (header != NULL ? header : "", (gssize) json_len,
                                DC_SAFETENSORS_MAX_HEADER, DC_SAFETENSORS_MAX_DEPTH,
                                &local_error);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                   "safetensors header is not a JSON object: %s",
                   local_error != NULL ? local_error->message : "another JSON value");
      return NULL;
    }
  if (json_object_get_size (json_node_get_object (root)) > DC_SAFETENSORS_MAX_TENSORS)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE,
                   "safetensors header lists %u tensors, more than %u",
                   json_object_get_size (json_node_get_object (root)),
                   DC_SAFETENSORS_MAX_TENSORS);
      return NULL;
    }

  self = g_new0 (DcSafetensors, 1);
  self->header_len = header_len;
  self->data_start = 8 + (guint64) header_len;
  self->data_size = file_size - self->data_start;
  self->tensors = g_ptr_array_new_with_free_func (tensor_free);
  self->by_name = g_hash_table_new (g_str_hash, g_str_equal);
  self->metadata = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);

  json_object_iter_init (&iter, json_node_get_object (root));
  while (json_object_iter_next (&iter, &name, &node))
    {
      DcSafetensorsTensor *t = NULL;
      gboolean ok;

      if (strcmp (name, "__metadata__") == 0)
        {
          JsonObjectIter meta;
          const char *key;
          JsonNode *value;

          if (!JSON_NODE_HOLDS_OBJECT (node))
            {
              g_set_error_literal (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                                   "safetensors __metadata__ is not an object");
              return NULL;
            }
          json_object_iter_init (&meta, json_node_get_object (node));
          while (json_object_iter_next (&meta, &key, &value))
            {
              if (json_node_get_value_type (value) != G_TYPE_STRING)
                {
                  g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                               "safetensors __metadata__ value “%s” is not a string", key);
                  return NULL;
                }
              g_hash_table_insert (self->metadata, g_strdup (key),
                                   g_strdup (json_node_get_string (value)));
            }
          continue;
        }
      ok = parse_tensor (self, name, node, &t, error);
      if (t != NULL)
        {
          g_ptr_array_add (self->tensors, t);
          g_hash_table_insert (self->by_name, t->name, t);
        }
      if (!ok)
        return NULL;
    }

  /* The tensors must tile the data area exactly: what the safetensors
   * library itself checks, so that no byte is read twice or left unexplained. */
  g_ptr_array_sort (self->tensors, compare_begin);
  for (guint i = 0; i < self->tensors->len; i++)
    {
      DcSafetensorsTensor *t = self->tensors->pdata[i];

      if (t->begin != pos)
        {
          g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                       "safetensors tensor “%s” starts at %" G_GUINT64_FORMAT
                       ", not at %" G_GUINT64_FORMAT " (tensors overlap or leave a gap)",
                       t->name, t->begin, pos);
          return NULL;
        }
      pos = t->end;
    }
  if (pos != self->data_size)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                   "safetensors tensors cover %" G_GUINT64_FORMAT " bytes but the file holds %"
                   G_GUINT64_FORMAT " data bytes", pos, self->data_size);
      return NULL;
    }
  return g_steal_pointer (&self);
}

/**
 * dc_safetensors_new_from_file:
 * @path: a .safetensors file (a regular file; only its header is read)
 *
 * Returns: (transfer full) (nullable): the tensors, or %NULL with @error set
 */
DcSafetensors *
dc_safetensors_new_from_file (const char  *path,
                              GError     **error)
{
  g_autoptr(GMappedFile) map = NULL;
  const guint8 *bytes;
  guint64 size, header_len;
  DcSafetensors *self;

  map = dc_regular_file_map (path, error);
  if (map == NULL)
    return NULL;
  bytes = (const guint8 *) g_mapped_file_get_contents (map);
  size = g_mapped_file_get_length (map);
  if (!dc_safetensors_read_prefix (bytes, size, size, &header_len, error))
    {
      g_prefix_error (error, "%s: ", path);
      return NULL;
    }
  self = dc_safetensors_parse_header ((const char *) bytes + 8, header_len, size, error);
  if (self == NULL)
    g_prefix_error (error, "%s: ", path);
  return self;
}

const DcSafetensorsTensor *
dc_safetensors_lookup (DcSafetensors *self,
                       const char    *name)
{
  g_return_val_if_fail (self != NULL && name != NULL, NULL);
  return g_hash_table_lookup (self->by_name, name);
}

void
dc_safetensors_index_free (DcSafetensorsIndex *self)
{
  if (self == NULL)
    return;
  g_clear_pointer (&self->weight_map, g_hash_table_unref);
  g_clear_pointer (&self->shards, g_ptr_array_unref);
  g_free (self);
}

/* A shard is named by the index and fetched next to it: a plain file name. */
static gboolean
shard_name_ok (const char *name)
{
  return name[0] != '\0' && name[0] != '.' && strchr (name, '/') == NULL &&
         strchr (name, '\\') == NULL && g_str_has_suffix (name, ".safetensors") &&
         g_utf8_validate (name, -1, NULL);
}

static int
compare_names (gconstpointer a,
               gconstpointer b)
{
  return strcmp (*(const char * const *) a, *(const char * const *) b);
}

/**
 * dc_safetensors_index_parse:
 * @json: the text of model.safetensors.index.json (untrusted)
 *
 * Returns: (transfer full) (nullable): the weight map, or %NULL with @error set
 */
DcSafetensorsIndex *
dc_safetensors_index_parse (const char  *json,
                            gssize       len,
                            GError     **error)
{
  g_autoptr(DcSafetensorsIndex) self = NULL;
  g_autoptr(JsonNode) root = NULL;
  g_autoptr(GError) local_error = NULL;
  g_autoptr(GHashTable) seen = g_hash_table_new (g_str_hash, g_str_equal);
  JsonNode *map, *metadata;
  JsonObjectIter iter;
  const char *name;
  JsonNode *node;

  root = dc_json_parse_bounded (json, len, DC_SAFETENSORS_INDEX_MAX_BYTES,
                                DC_SAFETENSORS_MAX_DEPTH, &local_error);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                   "model.safetensors.index.json is not a JSON object: %s",
                   local_error != NULL ? local_error->message : "another JSON value");
      return NULL;
    }
  map = json_object_get_member (json_node_get_object (root), "weight_map");
  if (map == NULL || !JSON_NODE_HOLDS_OBJECT (map))
    {
      g_set_error_literal (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                           "model.safetensors.index.json has no weight_map object");
      return NULL;
    }
  if (json_object_get_size (json_node_get_object (map)) > DC_SAFETENSORS_MAX_TENSORS)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE,
                   "model.safetensors.index.json lists more than %u tensors",
                   DC_SAFETENSORS_MAX_TENSORS);
      return NULL;
    }

  self = g_new0 (DcSafetensorsIndex, 1);
  self->weight_map = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  self->shards = g_ptr_array_new_with_free_func (g_free);
  metadata = json_object_get_member (json_node_get_object (root), "metadata");
  if (metadata != NULL && JSON_NODE_HOLDS_OBJECT (metadata))
    {
      JsonNode *total = json_object_get_member (json_node_get_object (metadata), "total_size");

      if (total != NULL && json_node_get_value_type (total) == G_TYPE_INT64 &&
          json_node_get_int (total) > 0)
        self->total_size = (guint64) json_node_get_int (total);
    }
  json_object_iter_init (&iter, json_node_get_object (map));
  while (json_object_iter_next (&iter, &name, &node))
    {
      const char *shard;

      if (json_node_get_value_type (node) != G_TYPE_STRING ||
          !shard_name_ok ((shard = json_node_get_string (node))))
        {
          g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                       "model.safetensors.index.json maps “%s” to something that is not a "
                       ".safetensors file name in the same folder", name);
          return NULL;
        }
      g_hash_table_insert (self->weight_map, g_strdup (name), g_strdup (shard));
      if (!g_hash_table_contains (seen, shard))
        {
          g_ptr_array_add (self->shards, g_strdup (shard));
          g_hash_table_add (seen, self->shards->pdata[self->shards->len - 1]);
        }
    }
  if (self->shards->len == 0)
    {
      g_set_error_literal (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                           "model.safetensors.index.json has an empty weight_map");
      return NULL;
    }
  g_ptr_array_sort (self->shards, compare_names);
  return g_steal_pointer (&self);
}

/* IEEE 754 binary16 -> binary32, exactly: every half value is a float value.
 * Subnormal halves (exponent 0) become normal floats; inf and NaN keep their
 * sign and payload bits. */
float
dc_f16_to_f32 (guint16 h)
{
  guint32 sign = (guint32) (h & 0x8000) << 16;
  guint32 exp = (h >> 10) & 0x1f;
  guint32 mant = h & 0x3ff;
  guint32 bits;
  float f;

  if (exp == 0x1f)
    bits = sign | 0x7f800000u | (mant << 13);
  else if (exp != 0)
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  else if (mant == 0)
    bits = sign;
  else
    {
      /* 0.mant × 2^-14: shift until the leading 1 reaches bit 10. */
      int e = -1;

      do
        {
          mant <<= 1;
          e++;
        }
      while ((mant & 0x400) == 0);
      bits = sign | ((guint32) (112 - e) << 23) | ((mant & 0x3ff) << 13);
    }
  memcpy (&f, &bits, sizeof f);
  return f;
}

/* bfloat16 is the top half of a binary32, so widening is a shift. */
float
dc_bf16_to_f32 (guint16 b)
{
  guint32 bits = (guint32) b << 16;
  float f;

  memcpy (&f, &bits, sizeof f);
  return f;
}

/* @src holds @n little-endian values of @dtype (any alignment); @dst gets @n floats. */
void
dc_widen_to_f32 (DcSafetensorsDtype  dtype,
                 const guint8       *src,
                 float              *dst,
                 gsize               n)
{
  for (gsize i = 0; i < n; i++)
    {
      switch (dtype)
        {
        case DC_SAFETENSORS_F32:
          {
            guint32 bits = (guint32) src[4 * i] | (guint32) src[4 * i + 1] << 8 |
                           (guint32) src[4 * i + 2] << 16 | (guint32) src[4 * i + 3] << 24;

            memcpy (&dst[i], &bits, sizeof bits);
          }
          break;
        case DC_SAFETENSORS_F16:
          dst[i] = dc_f16_to_f32 ((guint16) (src[2 * i] | src[2 * i + 1] << 8));
          break;
        case DC_SAFETENSORS_BF16:
          dst[i] = dc_bf16_to_f32 ((guint16) (src[2 * i] | src[2 * i + 1] << 8));
          break;
        default:
          g_assert_not_reached ();
        }
    }
}
