/* dc-pt-writer.c: the pickle and zip layout of a PyTorch .pt file.
 *
 * Layout (what torch.save writes since 1.6, "zip format"):
 *   ARCHIVE/data.pkl    the pickle, protocol 2
 *   ARCHIVE/byteorder   "little"
 *   ARCHIVE/data/N      storage N, raw float32 little-endian
 *   ARCHIVE/version     "3\n"
 * Each entry is stored uncompressed with its data 64-byte aligned (dc-zip.c).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-model"

#include "config.h"

#include "dc-pt-writer.h"

#include <string.h>

#include "dc-model-error.h"
#include "dc-pt-opcodes.h"
#include "dc-zip.h"

/* Storages are little-endian float32, copied as they are in memory. */
G_STATIC_ASSERT (G_BYTE_ORDER == G_LITTLE_ENDIAN);

struct _DcPtWriter
{
  GByteArray *pickle;
  GPtrArray  *storages;  /* of GBytes, key = index */
  guint       depth;
};

DcPtWriter *
dc_pt_writer_new (void)
{
  DcPtWriter *self = g_new0 (DcPtWriter, 1);
  guint8 proto[] = { DC_PICKLE_PROTO, 2 };

  self->pickle = g_byte_array_new ();
  self->storages = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  g_byte_array_append (self->pickle, proto, sizeof proto);
  return self;
}

void
dc_pt_writer_free (DcPtWriter *self)
{
  if (self == NULL)
    return;
  g_clear_pointer (&self->pickle, g_byte_array_unref);
  g_clear_pointer (&self->storages, g_ptr_array_unref);
  g_free (self);
}

static void
op (DcPtWriter *self,
    guint8      code)
{
  g_byte_array_append (self->pickle, &code, 1);
}

static void
global (DcPtWriter *self,
        const char *module,
        const char *name)
{
  op (self, DC_PICKLE_GLOBAL);
  g_byte_array_append (self->pickle, (const guint8 *) module, strlen (module));
  g_byte_array_append (self->pickle, (const guint8 *) "\n", 1);
  g_byte_array_append (self->pickle, (const guint8 *) name, strlen (name));
  g_byte_array_append (self->pickle, (const guint8 *) "\n", 1);
}

/* collections.OrderedDict() : GLOBAL, EMPTY_TUPLE, REDUCE. */
static void
empty_ordered_dict (DcPtWriter *self)
{
  global (self, "collections", "OrderedDict");
  op (self, DC_PICKLE_EMPTY_TUPLE);
  op (self, DC_PICKLE_REDUCE);
}

/* Values of a dict are added between MARK and SETITEMS. */
void
dc_pt_writer_begin_dict (DcPtWriter *self,
                         gboolean    ordered)
{
  if (ordered)
    empty_ordered_dict (self);
  else
    op (self, DC_PICKLE_EMPTY_DICT);
  op (self, DC_PICKLE_MARK);
  self->depth++;
}

void
dc_pt_writer_end_dict (DcPtWriter *self)
{
  g_return_if_fail (self->depth > 0);
  op (self, DC_PICKLE_SETITEMS);
  self->depth--;
}

void
dc_pt_writer_string (DcPtWriter *self,
                     const char *value)
{
  gsize len = strlen (value);
  guint8 n[4] = { len & 0xff, (len >> 8) & 0xff, (len >> 16) & 0xff, (len >> 24) & 0xff };

  g_return_if_fail (len < G_MAXINT32 && g_utf8_validate (value, len, NULL));
  op (self, DC_PICKLE_BINUNICODE);
  g_byte_array_append (self->pickle, n, 4);
  g_byte_array_append (self->pickle, (const guint8 *) value, len);
}

void
dc_pt_writer_int (DcPtWriter *self,
                  gint64      value)
{
  guint64 u = (guint64) value;
  guint8 b[8];

  for (guint i = 0; i < 8; i++)
    b[i] = (u >> (8 * i)) & 0xff;
  if (value >= G_MININT32 && value <= G_MAXINT32)
    {
      op (self, DC_PICKLE_BININT);
      g_byte_array_append (self->pickle, b, 4);
    }
  else
    {
      /* LONG1 with 8 bytes of two's complement, little-endian. */
      guint8 n = 8;

      op (self, DC_PICKLE_LONG1);
      g_byte_array_append (self->pickle, &n, 1);
      g_byte_array_append (self->pickle, b, 8);
    }
}

void
dc_pt_writer_bool (DcPtWriter *self,
                   gboolean    value)
{
  op (self, value ? DC_PICKLE_NEWTRUE : DC_PICKLE_NEWFALSE);
}

void
dc_pt_writer_tensor_f32 (DcPtWriter   *self,
                         const float  *data,
                         guint         n_dims,
                         const gint64 *sizes)
{
  gint64 numel = 1;
  gint64 strides[DC_PT_MAX_DIMS];
  g_autofree char *key = NULL;
  guint8 *copy;

  g_return_if_fail (n_dims <= DC_PT_MAX_DIMS);
  for (guint d = n_dims; d-- > 0;)
    {
      strides[d] = numel;
      numel *= sizes[d];
    }
  copy = g_malloc (numel * sizeof (float));
  memcpy (copy, data, numel * sizeof (float));
  key = g_strdup_printf ("%u", self->storages->len);
  g_ptr_array_add (self->storages, g_bytes_new_take (copy, numel * sizeof (float)));

  /* _rebuild_tensor_v2 (storage, storage_offset, size, stride, requires_grad, backward_hooks) */
  global (self, "torch._utils", "_rebuild_tensor_v2");
  op (self, DC_PICKLE_MARK);
  /* persistent id ("storage", torch.FloatStorage, key, "cpu", numel) */
  op (self, DC_PICKLE_MARK);
  dc_pt_writer_string (self, "storage");
  global (self, "torch", "FloatStorage");
  dc_pt_writer_string (self, key);
  dc_pt_writer_string (self, "cpu");
  dc_pt_writer_int (self, numel);
  op (self, DC_PICKLE_TUPLE);
  op (self, DC_PICKLE_BINPERSID);
  dc_pt_writer_int (self, 0);
  op (self, DC_PICKLE_MARK);
  for (guint d = 0; d < n_dims; d++)
    dc_pt_writer_int (self, sizes[d]);
  op (self, DC_PICKLE_TUPLE);
  op (self, DC_PICKLE_MARK);
  for (guint d = 0; d < n_dims; d++)
    dc_pt_writer_int (self, strides[d]);
  op (self, DC_PICKLE_TUPLE);
  dc_pt_writer_bool (self, FALSE);
  empty_ordered_dict (self);
  op (self, DC_PICKLE_TUPLE);
  op (self, DC_PICKLE_REDUCE);
}

/**
 * dc_pt_writer_finish:
 * @archive_name: the top folder inside the zip (PyTorch uses the file's stem)
 *
 * Returns: (transfer full): the complete .pt file
 */
GBytes *
dc_pt_writer_finish (DcPtWriter  *self,
                     const char  *archive_name,
                     GError     **error)
{
  g_autoptr(DcZipWriter) zip = dc_zip_writer_new ();
  g_autoptr(GBytes) pickle = NULL;
  g_autofree char *name = NULL;

  g_return_val_if_fail (self->depth == 0, NULL);
  op (self, DC_PICKLE_STOP);
  pickle = g_bytes_new (self->pickle->data, self->pickle->len);

  name = g_strdup_printf ("%s/data.pkl", archive_name);
  dc_zip_writer_add (zip, name, pickle);
  g_free (name);
  {
    g_autoptr(GBytes) order = g_bytes_new_static ("little", 6);

    name = g_strdup_printf ("%s/byteorder", archive_name);
    dc_zip_writer_add (zip, name, order);
    g_free (name);
  }
  for (guint i = 0; i < self->storages->len; i++)
    {
      name = g_strdup_printf ("%s/data/%u", archive_name, i);
      dc_zip_writer_add (zip, name, g_ptr_array_index (self->storages, i));
      g_free (name);
    }
  {
    g_autoptr(GBytes) version = g_bytes_new_static ("3\n", 2);

    name = g_strdup_printf ("%s/version", archive_name);
    dc_zip_writer_add (zip, name, version);
  }
  return dc_zip_writer_finish (zip, error);
}
