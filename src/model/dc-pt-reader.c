/* dc-pt-reader.c: the restricted pickle machine for checkpoints.
 *
 * The machine has a value stack and a mark stack. GLOBAL pushes a reference
 * to one of three allowed callables; REDUCE applies it to a tuple with the
 * exact argument shapes the writer uses; BINPERSID turns a
 * ("storage", FloatStorage, key, "cpu", numel) tuple into a storage handle
 * that must exist in the archive with exactly numel × 4 bytes.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-model"

#include "config.h"

#include "dc-pt-reader.h"

#include <string.h>

#include "dc-model-error.h"
#include "dc-regular-file.h"
#include "dc-pt-opcodes.h"
#include "dc-zip.h"

#define GLOBAL_ORDERED_DICT "collections.OrderedDict"
#define GLOBAL_REBUILD      "torch._utils._rebuild_tensor_v2"
#define GLOBAL_FLOAT_STORE  "torch.FloatStorage"

typedef struct
{
  const guint8 *p;
  gsize         len;
  gsize         pos;
  GPtrArray    *stack;  /* of DcPtValue, owned */
  GArray       *marks;  /* of guint, stack heights */
  DcPtFile     *file;
  DcZipReader  *zip;    /* storages are read (and CRC-checked) from here on use */
  guint         n_values;
} Machine;

void
dc_pt_value_free (DcPtValue *value)
{
  if (value == NULL)
    return;
  g_free (value->s);
  g_clear_pointer (&value->items, g_ptr_array_unref);
  g_free (value);
}

static DcPtValue *
value_new (Machine       *m,
           DcPtValueType  type)
{
  DcPtValue *v = g_new0 (DcPtValue, 1);

  v->type = type;
  m->n_values++;
  return v;
}

static gboolean
fail (GError     **error,
      Machine     *m,
      const char  *format,
      ...) G_GNUC_PRINTF (3, 4);

static gboolean
fail (GError     **error,
      Machine     *m,
      const char  *format,
      ...)
{
  va_list args;
  g_autofree char *message = NULL;

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
               "refused checkpoint pickle at byte %" G_GSIZE_FORMAT ": %s", m->pos, message);
  return FALSE;
}

static gboolean
need (Machine  *m,
      gsize     n,
      GError  **error)
{
  if (m->len - m->pos < n)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                   "checkpoint pickle is truncated at byte %" G_GSIZE_FORMAT, m->pos);
      return FALSE;
    }
  return TRUE;
}

static void
push (Machine   *m,
      DcPtValue *v)
{
  g_ptr_array_add (m->stack, v);
}

static DcPtValue *
pop (Machine *m)
{
  guint floor = m->marks->len > 0 ? g_array_index (m->marks, guint, m->marks->len - 1) : 0;

  if (m->stack->len <= floor)
    return NULL;
  return g_ptr_array_steal_index (m->stack, m->stack->len - 1);
}

/* Pops everything above the last mark into a new array, in order. */
static GPtrArray *
pop_mark (Machine *m)
{
  GPtrArray *items;
  guint mark;

  if (m->marks->len == 0)
    return NULL;
  mark = g_array_index (m->marks, guint, m->marks->len - 1);
  g_array_set_size (m->marks, m->marks->len - 1);
  items = g_ptr_array_new_with_free_func ((GDestroyNotify) dc_pt_value_free);
  for (guint i = mark; i < m->stack->len; i++)
    g_ptr_array_add (items, m->stack->pdata[i]);
  /* Ownership moved to items: shrink without running the free function. */
  m->stack->len = mark;
  return items;
}

static const char *
type_name (const DcPtValue *v)
{
  static const char *names[] = { "bool", "int", "str", "tuple", "dict",
                                 "tensor", "global", "storage" };

  return v == NULL ? "nothing" : names[v->type];
}

static gboolean
is_int (const DcPtValue *v)
{
  return v != NULL && v->type == DC_PT_VALUE_INT;
}

/* _rebuild_tensor_v2 (storage, offset, sizes, strides, requires_grad, hooks) */
static DcPtValue *
rebuild_tensor (Machine    *m,
                GPtrArray  *args,
                GError    **error)
{
  DcPtValue *storage, *offset, *sizes, *strides, *grad, *hooks;
  g_autoptr(DcPtValue) t = NULL;

  if (args->len != 6)
    {
      fail (error, m, "_rebuild_tensor_v2 takes 6 arguments, got %u", args->len);
      return NULL;
    }
  storage = args->pdata[0];
  offset = args->pdata[1];
  sizes = args->pdata[2];
  strides = args->pdata[3];
  grad = args->pdata[4];
  hooks = args->pdata[5];
  if (storage->type != DC_PT_VALUE_STORAGE || !is_int (offset)
      || sizes->type != DC_PT_VALUE_TUPLE || strides->type != DC_PT_VALUE_TUPLE
      || grad->type != DC_PT_VALUE_BOOL || hooks->type != DC_PT_VALUE_DICT
      || hooks->items->len != 0)
    {
      fail (error, m, "unexpected _rebuild_tensor_v2 arguments");
      return NULL;
    }
  if (sizes->items->len > DC_PT_MAX_DIMS || sizes->items->len != strides->items->len)
    {
      fail (error, m, "tensor has %u dimensions (at most %d)", sizes->items->len, DC_PT_MAX_DIMS);
      return NULL;
    }
  t = g_new0 (DcPtValue, 1);
  t->type = DC_PT_VALUE_TENSOR;
  t->s = g_strdup (storage->s);
  t->i = storage->i;
  t->offset = offset->i;
  t->n_dims = sizes->items->len;
  for (guint d = 0; d < t->n_dims; d++)
    {
      DcPtValue *size = sizes->items->pdata[d];
      DcPtValue *stride = strides->items->pdata[d];

      if (!is_int (size) || !is_int (stride) || size->i < 0 || stride->i < 0
          || size->i > G_MAXINT32 || stride->i > G_MAXINT32)
        {
          fail (error, m, "bad tensor size or stride");
          return NULL;
        }
      t->sizes[d] = size->i;
      t->strides[d] = stride->i;
    }
  return g_steal_pointer (&t);
}

/* ("storage", torch.FloatStorage, key, location, numel) */
static DcPtValue *
persistent_load (Machine    *m,
                 DcPtValue  *pid,
                 GError    **error)
{
  DcPtValue *kind, *type, *key, *location, *numel;
  GBytes *data;
  DcPtValue *v;

  if (pid->type != DC_PT_VALUE_TUPLE || pid->items->len != 5)
    {
      fail (error, m, "persistent id is not a 5-tuple");
      return NULL;
    }
  kind = pid->items->pdata[0];
  type = pid->items->pdata[1];
  key = pid->items->pdata[2];
  location = pid->items->pdata[3];
  numel = pid->items->pdata[4];
  if (kind->type != DC_PT_VALUE_STRING || !g_str_equal (kind->s, "storage")
      || key->type != DC_PT_VALUE_STRING || location->type != DC_PT_VALUE_STRING
      || !is_int (numel) || numel->i < 0)
    {
      fail (error, m, "malformed persistent id");
      return NULL;
    }
  if (type->type != DC_PT_VALUE_GLOBAL || !g_str_equal (type->s, GLOBAL_FLOAT_STORE))
    {
      fail (error, m, "storage type %s is not supported (float32 only)",
            type->type == DC_PT_VALUE_GLOBAL ? type->s : type_name (type));
      return NULL;
    }
  data = g_hash_table_lookup (m->file->storages, key->s);
  if (data == NULL)
    {
      g_autofree char *entry_name = g_strdup_printf ("%s/data/%s", m->file->archive, key->s);
      g_autoptr(GError) read_error = NULL;

      /* Only storages the pickle names are read, so only theirs are CRC-checked. */
      data = dc_zip_reader_read (m->zip, entry_name, &read_error);
      if (data == NULL && g_error_matches (read_error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND))
        {
          fail (error, m, "storage “%s” is missing from the archive", key->s);
          return NULL;
        }
      if (data == NULL)
        {
          g_propagate_error (error, g_steal_pointer (&read_error));
          return NULL;
        }
      g_hash_table_insert (m->file->storages, g_strdup (key->s), g_bytes_ref (data));
    }
  if ((guint64) numel->i > G_MAXSIZE / 4 || g_bytes_get_size (data) != (gsize) numel->i * 4)
    {
      fail (error, m, "storage “%s” has %" G_GSIZE_FORMAT " bytes, not %" G_GINT64_FORMAT " floats",
            key->s, g_bytes_get_size (data), numel->i);
      return NULL;
    }
  v = value_new (m, DC_PT_VALUE_STORAGE);
  v->s = g_strdup (key->s);
  v->i = numel->i;
  return v;
}

static gboolean
op_global (Machine  *m,
           GError  **error)
{
  const char *start = (const char *) m->p + m->pos;
  const char *nl1, *nl2;
  g_autofree char *name = NULL;
  DcPtValue *v;
  gsize avail = m->len - m->pos;

  nl1 = memchr (start, '\n', MIN (avail, 256));
  nl2 = nl1 != NULL ? memchr (nl1 + 1, '\n', MIN (avail - (nl1 + 1 - start), 256)) : NULL;
  if (nl2 == NULL)
    return fail (error, m, "malformed GLOBAL");
  name = g_strdup_printf ("%.*s.%.*s", (int) (nl1 - start), start, (int) (nl2 - nl1 - 1), nl1 + 1);
  if (!g_utf8_validate (name, -1, NULL))
    return fail (error, m, "malformed GLOBAL");
  if (!g_str_equal (name, GLOBAL_ORDERED_DICT) && !g_str_equal (name, GLOBAL_REBUILD)
      && !g_str_equal (name, GLOBAL_FLOAT_STORE))
    return fail (error, m, "global “%s” is not allowed in a checkpoint", name);
  m->pos = (const guint8 *) nl2 + 1 - m->p;
  v = value_new (m, DC_PT_VALUE_GLOBAL);
  v->s = g_steal_pointer (&name);
  push (m, v);
  return TRUE;
}

static gboolean
op_reduce (Machine  *m,
           GError  **error)
{
  g_autoptr(DcPtValue) args = pop (m);
  g_autoptr(DcPtValue) callable = pop (m);
  DcPtValue *result;

  if (args == NULL || callable == NULL || args->type != DC_PT_VALUE_TUPLE
      || callable->type != DC_PT_VALUE_GLOBAL)
    return fail (error, m, "REDUCE needs a global and a tuple");
  if (g_str_equal (callable->s, GLOBAL_ORDERED_DICT))
    {
      if (args->items->len != 0)
        return fail (error, m, "OrderedDict takes no arguments here");
      result = value_new (m, DC_PT_VALUE_DICT);
      result->items = g_ptr_array_new_with_free_func ((GDestroyNotify) dc_pt_value_free);
    }
  else if (g_str_equal (callable->s, GLOBAL_REBUILD))
    {
      result = rebuild_tensor (m, args->items, error);
      if (result == NULL)
        return FALSE;
      m->n_values++;
    }
  else
    return fail (error, m, "“%s” cannot be called", callable->s);
  push (m, result);
  return TRUE;
}

static gboolean
op_setitems (Machine  *m,
             GError  **error)
{
  g_autoptr(GPtrArray) items = pop_mark (m);
  DcPtValue *dict;

  if (items == NULL)
    return fail (error, m, "SETITEMS without MARK");
  dict = m->stack->len > 0 ? m->stack->pdata[m->stack->len - 1] : NULL;
  if (dict == NULL || dict->type != DC_PT_VALUE_DICT || items->len % 2 != 0)
    return fail (error, m, "SETITEMS needs a dict and key/value pairs");
  if (dict->items->len / 2 + items->len / 2 > DC_PT_MAX_DICT_ITEMS)
    return fail (error, m, "dict has more than %d items", DC_PT_MAX_DICT_ITEMS);
  for (guint i = 0; i < items->len; i += 2)
    {
      DcPtValue *key = items->pdata[i];

      if (key->type != DC_PT_VALUE_STRING)
        return fail (error, m, "dict keys must be strings, not %s", type_name (key));
      /* Checkpoints are written with unique keys; a repeat is a forged file. */
      if (dc_pt_value_lookup (dict, key->s) != NULL)
        return fail (error, m, "duplicate key “%s”", key->s);
      for (guint j = i + 2; j < items->len; j += 2)
        {
          DcPtValue *other = items->pdata[j];

          if (other->type == DC_PT_VALUE_STRING && g_str_equal (other->s, key->s))
            return fail (error, m, "duplicate key “%s”", key->s);
        }
    }
  for (guint i = 0; i < items->len; i++)
    g_ptr_array_add (dict->items, items->pdata[i]);
  items->len = 0;  /* moved into the dict */
  return TRUE;
}

static gboolean
step (Machine   *m,
      gboolean  *done,
      GError   **error)
{
  guint8 code;
  DcPtValue *v;

  if (!need (m, 1, error))
    return FALSE;
  /* Every value an opcode creates costs at least that opcode's byte, so
   * n_values <= pos; the caps below bound the machine's memory whatever the
   * pickle's size (about 260 bytes a value). */
  if (m->n_values >= DC_PT_MAX_VALUES)
    return fail (error, m, "too many values (more than %d)", DC_PT_MAX_VALUES);
  if (m->stack->len >= DC_PT_MAX_STACK)
    return fail (error, m, "too many values on the stack (more than %d)", DC_PT_MAX_STACK);
  code = m->p[m->pos++];
  switch (code)
    {
    case DC_PICKLE_PROTO:
      if (!need (m, 1, error))
        return FALSE;
      if (m->pos != 1 || m->p[m->pos] != 2)
        return fail (error, m, "only pickle protocol 2 is read");
      m->pos++;
      return TRUE;

    case DC_PICKLE_STOP:
      *done = TRUE;
      return TRUE;

    case DC_PICKLE_MARK:
      if (m->marks->len >= DC_PT_MAX_DEPTH)
        return fail (error, m, "nested deeper than %d", DC_PT_MAX_DEPTH);
      g_array_append_val (m->marks, m->stack->len);
      return TRUE;

    case DC_PICKLE_EMPTY_DICT:
      v = value_new (m, DC_PT_VALUE_DICT);
      v->items = g_ptr_array_new_with_free_func ((GDestroyNotify) dc_pt_value_free);
      push (m, v);
      return TRUE;

    case DC_PICKLE_EMPTY_TUPLE:
      v = value_new (m, DC_PT_VALUE_TUPLE);
      v->items = g_ptr_array_new_with_free_func ((GDestroyNotify) dc_pt_value_free);
      push (m, v);
      return TRUE;

    case DC_PICKLE_TUPLE:
      {
        GPtrArray *items = pop_mark (m);

        if (items == NULL)
          return fail (error, m, "TUPLE without MARK");
        if (items->len > DC_PT_MAX_TUPLE_ITEMS)
          {
            g_ptr_array_unref (items);
            return fail (error, m, "tuple has more than %d items", DC_PT_MAX_TUPLE_ITEMS);
          }
        v = value_new (m, DC_PT_VALUE_TUPLE);
        v->items = items;
        push (m, v);
        return TRUE;
      }

    case DC_PICKLE_SETITEMS:
      return op_setitems (m, error);

    case DC_PICKLE_GLOBAL:
      return op_global (m, error);

    case DC_PICKLE_REDUCE:
      return op_reduce (m, error);

    case DC_PICKLE_BINPERSID:
      {
        g_autoptr(DcPtValue) pid = pop (m);

        if (pid == NULL)
          return fail (error, m, "BINPERSID on an empty stack");
        v = persistent_load (m, pid, error);
        if (v == NULL)
          return FALSE;
        push (m, v);
        return TRUE;
      }

    case DC_PICKLE_BININT:
      if (!need (m, 4, error))
        return FALSE;
      v = value_new (m, DC_PT_VALUE_INT);
      v->i = (gint32) ((guint32) m->p[m->pos] | ((guint32) m->p[m->pos + 1] << 8)
                       | ((guint32) m->p[m->pos + 2] << 16) | ((guint32) m->p[m->pos + 3] << 24));
      m->pos += 4;
      push (m, v);
      return TRUE;

    case DC_PICKLE_LONG1:
      {
        guint64 u = 0;

        if (!need (m, 9, error))
          return FALSE;
        if (m->p[m->pos] != 8)
          return fail (error, m, "only 8-byte LONG1 integers are read");
        for (guint i = 0; i < 8; i++)
          u |= (guint64) m->p[m->pos + 1 + i] << (8 * i);
        v = value_new (m, DC_PT_VALUE_INT);
        v->i = (gint64) u;
        m->pos += 9;
        push (m, v);
        return TRUE;
      }

    case DC_PICKLE_BINUNICODE:
      {
        guint32 n;

        if (!need (m, 4, error))
          return FALSE;
        n = (guint32) m->p[m->pos] | ((guint32) m->p[m->pos + 1] << 8)
            | ((guint32) m->p[m->pos + 2] << 16) | ((guint32) m->p[m->pos + 3] << 24);
        m->pos += 4;
        if (!need (m, n, error))
          return FALSE;
        if (!g_utf8_validate ((const char *) m->p + m->pos, n, NULL)
            || memchr (m->p + m->pos, '\0', n) != NULL)
          return fail (error, m, "string is not valid UTF-8 text");
        v = value_new (m, DC_PT_VALUE_STRING);
        v->s = g_strndup ((const char *) m->p + m->pos, n);
        m->pos += n;
        push (m, v);
        return TRUE;
      }

    case DC_PICKLE_NEWTRUE:
    case DC_PICKLE_NEWFALSE:
      v = value_new (m, DC_PT_VALUE_BOOL);
      v->i = code == DC_PICKLE_NEWTRUE;
      push (m, v);
      return TRUE;

    default:
      m->pos--;
      return fail (error, m, "opcode 0x%02x is not allowed in a checkpoint", code);
    }
}

static gboolean
run_pickle (DcPtFile     *file,
            DcZipReader  *zip,
            GBytes       *pickle,
            GError      **error)
{
  Machine m = { 0 };
  gboolean done = FALSE;
  gboolean ok = TRUE;

  m.p = g_bytes_get_data (pickle, &m.len);
  m.stack = g_ptr_array_new_with_free_func ((GDestroyNotify) dc_pt_value_free);
  m.marks = g_array_new (FALSE, FALSE, sizeof (guint));
  m.file = file;
  m.zip = zip;
  if (m.len > DC_PT_MAX_PICKLE_SIZE)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE,
                   "checkpoint pickle is too large (%" G_GSIZE_FORMAT " bytes)", m.len);
      ok = FALSE;
    }
  while (ok && !done)
    ok = step (&m, &done, error);
  if (ok && (m.stack->len != 1 || m.marks->len != 0
             || ((DcPtValue *) m.stack->pdata[0])->type != DC_PT_VALUE_DICT))
    ok = fail (error, &m, "the checkpoint must hold exactly one dict");
  if (ok && m.pos != m.len)
    ok = fail (error, &m, "data after STOP");
  if (ok)
    file->root = g_ptr_array_steal_index (m.stack, 0);
  g_ptr_array_unref (m.stack);
  g_array_unref (m.marks);
  return ok;
}

/**
 * dc_pt_file_new_from_bytes:
 *
 * Returns: (transfer full): the parsed checkpoint, or %NULL with @error set
 */
DcPtFile *
dc_pt_file_new_from_bytes (GBytes  *bytes,
                           GError **error)
{
  g_autoptr(DcZipReader) zip = NULL;
  g_autoptr(DcPtFile) self = g_new0 (DcPtFile, 1);
  g_autofree char *pickle_name = NULL;
  DcZipEntry *pickle_entry;
  GBytes *pickle = NULL;

  self->storages = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                          (GDestroyNotify) g_bytes_unref);
  if (g_bytes_get_size (bytes) > DC_PT_MAX_FILE_SIZE)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE, "checkpoint is too large");
      return NULL;
    }
  zip = dc_zip_reader_new (bytes, error);
  if (zip == NULL)
    return NULL;
  /* Every entry lives under one top folder; data.pkl names it. */
  for (guint i = 0; i < zip->entries->len; i++)
    {
      DcZipEntry *entry = g_ptr_array_index (zip->entries, i);
      const char *slash = strchr (entry->name, '/');

      if (slash == NULL)
        continue;
      if (g_str_equal (slash, "/data.pkl") && self->archive == NULL)
        self->archive = g_strndup (entry->name, slash - entry->name);
    }
  if (self->archive == NULL)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                   "not a PyTorch checkpoint: no data.pkl in the archive");
      return NULL;
    }
  pickle_name = g_strdup_printf ("%s/data.pkl", self->archive);
  /* The size first: no CRC pass over a pickle that is refused anyway. */
  pickle_entry = g_hash_table_lookup (zip->by_name, pickle_name);
  g_assert (pickle_entry != NULL);  /* archive was taken from its name */
  if (g_bytes_get_size (pickle_entry->data) > DC_PT_MAX_PICKLE_SIZE)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE,
                   "checkpoint pickle is too large (%" G_GSIZE_FORMAT " bytes)",
                   g_bytes_get_size (pickle_entry->data));
      return NULL;
    }
  pickle = dc_zip_reader_read (zip, pickle_name, error);
  if (pickle == NULL)
    return NULL;
  if (!run_pickle (self, zip, pickle, error))
    return NULL;
  return g_steal_pointer (&self);
}

DcPtFile *
dc_pt_file_new_from_path (const char  *path,
                          GError     **error)
{
  g_autoptr(GMappedFile) mapped = NULL;
  g_autoptr(GBytes) bytes = NULL;

  mapped = dc_regular_file_map (path, error);
  if (mapped == NULL)
    return NULL;
  bytes = g_mapped_file_get_bytes (mapped);
  return dc_pt_file_new_from_bytes (bytes, error);
}

void
dc_pt_file_free (DcPtFile *self)
{
  if (self == NULL)
    return;
  g_clear_pointer (&self->root, dc_pt_value_free);
  g_clear_pointer (&self->storages, g_hash_table_unref);
  g_free (self->archive);
  g_free (self);
}

/**
 * dc_pt_value_lookup:
 *
 * Returns: (transfer none) (nullable): the value of @key in @dict
 */
const DcPtValue *
dc_pt_value_lookup (const DcPtValue *dict,
                    const char      *key)
{
  if (dict == NULL || dict->type != DC_PT_VALUE_DICT)
    return NULL;
  for (guint i = 0; i + 1 < dict->items->len; i += 2)
    {
      const DcPtValue *k = dict->items->pdata[i];

      if (g_str_equal (k->s, key))
        return dict->items->pdata[i + 1];
    }
  return NULL;
}

/**
 * dc_pt_file_read_tensor:
 * @name: the tensor's name, for messages
 * @out: (array): room for the product of @sizes floats
 *
 * Copies a contiguous float32 tensor of exactly the given shape.
 */
gboolean
dc_pt_file_read_tensor (DcPtFile        *self,
                        const DcPtValue *tensor,
                        const char      *name,
                        guint            n_dims,
                        const gint64    *sizes,
                        float           *out,
                        GError         **error)
{
  gint64 expect = 1;
  GBytes *data;

  if (tensor == NULL || tensor->type != DC_PT_VALUE_TENSOR)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                   "bad dims in checkpoint: tensor “%s” is missing", name);
      return FALSE;
    }
  if (tensor->n_dims != n_dims)
    goto bad_dims;
  for (guint d = n_dims; d-- > 0;)
    {
      if (tensor->sizes[d] != sizes[d] || (sizes[d] > 1 && tensor->strides[d] != expect))
        goto bad_dims;
      expect *= sizes[d];
    }
  if (tensor->offset < 0 || tensor->offset > tensor->i || tensor->i - tensor->offset < expect)
    goto bad_dims;
  data = g_hash_table_lookup (self->storages, tensor->s);
  g_assert (data != NULL);  /* persistent_load checked it */
  memcpy (out, (const float *) g_bytes_get_data (data, NULL) + tensor->offset,
          expect * sizeof (float));
  return TRUE;

bad_dims:
  g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_DIMS,
               "bad dims in checkpoint: tensor “%s” does not have the expected shape", name);
  return FALSE;
}
