/* dc-spirv-coop.c: rewrites SPIR-V compiled from GL_NV_cooperative_matrix
 * GLSL into SPV_KHR_cooperative_matrix, word by word.
 *
 * Debian 12's glslang and glslc reject GL_KHR_cooperative_matrix, but the two
 * SPIR-V extensions differ only in a few operands: the KHR matrix type names
 * its use (A, B or accumulator), loads and stores take a layout id instead of
 * a column-major bool (and before the stride), and the multiply-add says in a
 * bitmask which operands are signed (the NV one took it from the component
 * types). The kernels keep one GLSL source (shaders/gemm-int8-coop*.comp) and
 * the host picks the extension the device lists the wanted shape under.
 *
 * Only what the GEMM kernels use is handled: signed integer matrices, an A
 * type of K = 32 columns and a B type of K = 32 rows (the int8 shapes), int32
 * accumulators; anything else is refused with a message, and every rewritten
 * kernel still has to pass the GEMM's init gate.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include "dc-spirv-coop.h"

#include <gio/gio.h>
#include <string.h>

enum
{
  OP_EXTENSION = 10,
  OP_CAPABILITY = 17,
  OP_TYPE_INT = 21,
  OP_CONSTANT_TRUE = 41,
  OP_CONSTANT_FALSE = 42,
  OP_CONSTANT = 43,
  OP_TYPE_COOP_KHR = 4456,
  OP_LOAD_KHR = 4457,
  OP_STORE_KHR = 4458,
  OP_MULADD_KHR = 4459,
  OP_LENGTH_KHR = 4460,
  OP_TYPE_COOP_NV = 5358,
  OP_LOAD_NV = 5359,
  OP_STORE_NV = 5360,
  OP_MULADD_NV = 5361,
  OP_LENGTH_NV = 5362,
  CAP_COOP_NV = 5357,
  CAP_COOP_KHR = 6022,
  USE_A = 0,
  USE_B = 1,
  USE_ACC = 2,
  /* MatrixA|B|C|ResultSignedComponentsKHR */
  ALL_SIGNED = 0xf,
};

#define SPIRV_MAGIC 0x07230203u
/* Ids and words beyond this are not a kernel of ours: the GEMM kernels have
 * a few thousand; the cap keeps the lookup tables small whatever the input. */
#define MAX_WORDS (1u << 20)

static gboolean
fail (GError    **error,
      const char *message,
      guint       word)
{
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
               "Cooperative-matrix SPIR-V rewrite: %s (word %u)", message, word);
  return FALSE;
}

typedef struct
{
  guint32 *int_width;   /* per id: width of OpTypeInt, 0 if not one */
  guint8  *int_signed;
  guint8  *is_const;    /* per id: 1 OpConstant (value in value[]), 2 true, 3 false */
  guint32 *value;
  gint8   *coop_use;    /* per id: the use of an NV matrix type, -1 if not one */
  guint32  uint_type;   /* id of OpTypeInt 32 0, 0 if none */
} Tables;

static gboolean
scan (const guint32 *w,
      guint32        n,
      guint32        bound,
      Tables        *t,
      GError       **error)
{
  for (guint32 i = 5; i < n;)
    {
      guint32 len = w[i] >> 16, op = w[i] & 0xffff;

      if (len == 0 || len > n - i)
        return fail (error, "an instruction runs past the end", i);
      switch (op)
        {
        case OP_TYPE_INT:
          if (len != 4 || w[i + 1] >= bound)
            return fail (error, "malformed OpTypeInt", i);
          t->int_width[w[i + 1]] = w[i + 2];
          t->int_signed[w[i + 1]] = w[i + 3] != 0;
          if (w[i + 2] == 32 && w[i + 3] == 0 && t->uint_type == 0)
            t->uint_type = w[i + 1];
          break;
        case OP_CONSTANT:
          if (len < 4 || w[i + 2] >= bound)
            return fail (error, "malformed OpConstant", i);
          t->is_const[w[i + 2]] = 1;
          t->value[w[i + 2]] = w[i + 3];
          break;
        case OP_CONSTANT_TRUE:
        case OP_CONSTANT_FALSE:
          if (len != 3 || w[i + 2] >= bound)
            return fail (error, "malformed boolean constant", i);
          t->is_const[w[i + 2]] = op == OP_CONSTANT_TRUE ? 2 : 3;
          break;
        case OP_TYPE_COOP_NV:
          {
            guint32 id, comp, rows, cols;

            if (len != 6)
              return fail (error, "malformed OpTypeCooperativeMatrixNV", i);
            id = w[i + 1], comp = w[i + 2], rows = w[i + 4], cols = w[i + 5];
            if (id >= bound || comp >= bound || rows >= bound || cols >= bound)
              return fail (error, "an id beyond the bound", i);
            if (t->int_width[comp] == 0 || !t->int_signed[comp])
              return fail (error, "only signed integer matrices are handled", i);
            if (t->is_const[rows] != 1 || t->is_const[cols] != 1)
              return fail (error, "matrix sizes must be constants", i);
            if (t->int_width[comp] == 32)
              t->coop_use[id] = USE_ACC;
            else if (t->int_width[comp] == 8 && t->value[cols] == 32 && t->value[rows] != 32)
              t->coop_use[id] = USE_A;
            else if (t->int_width[comp] == 8 && t->value[rows] == 32 && t->value[cols] != 32)
              t->coop_use[id] = USE_B;
            else
              return fail (error, "cannot tell the matrix's use from its shape", i);
          }
          break;
        default:
          break;
        }
      i += len;
    }
  return TRUE;
}

static void
emit (GArray        *out,
      guint32        op,
      const guint32 *operands,
      guint          n_operands)
{
  guint32 head = ((n_operands + 1) << 16) | op;

  g_array_append_val (out, head);
  g_array_append_vals (out, operands, n_operands);
}

/**
 * dc_spirv_coop_nv_to_khr:
 * @module: a SPIR-V module (host byte order) using SPV_NV_cooperative_matrix
 *
 * Returns: (transfer full) (nullable): the module on SPV_KHR_cooperative_matrix
 */
GBytes *
dc_spirv_coop_nv_to_khr (GBytes  *module,
                         GError **error)
{
  gsize size;
  const guint8 *data = g_bytes_get_data (module, &size);
  g_autofree guint32 *w = NULL;
  g_autoptr(GArray) out = NULL;
  g_autofree guint32 *int_width = NULL, *value = NULL;
  g_autofree guint8 *int_signed = NULL, *is_const = NULL;
  g_autofree gint8 *coop_use = NULL;
  Tables t;
  guint32 n, bound, use_ids[3];
  gboolean constants_added = FALSE, found_cap = FALSE, found_ext = FALSE, uint_seen = FALSE;

  if (size < 20 || size % 4 != 0 || size / 4 > MAX_WORDS)
    {
      fail (error, "not a SPIR-V module of a size handled", 0);
      return NULL;
    }
  n = size / 4;
  w = g_memdup2 (data, size);
  if (w[0] != SPIRV_MAGIC)
    {
      fail (error, "no SPIR-V magic number in host byte order", 0);
      return NULL;
    }
  bound = w[3];
  if (bound == 0 || bound > MAX_WORDS)
    {
      fail (error, "id bound out of range", 3);
      return NULL;
    }
  t.int_width = int_width = g_new0 (guint32, bound);
  t.int_signed = int_signed = g_new0 (guint8, bound);
  t.is_const = is_const = g_new0 (guint8, bound);
  t.value = value = g_new0 (guint32, bound);
  t.coop_use = coop_use = g_new (gint8, bound);
  memset (coop_use, -1, bound);
  t.uint_type = 0;
  if (!scan (w, n, bound, &t, error))
    return NULL;
  if (t.uint_type == 0)
    {
      fail (error, "no 32-bit unsigned integer type for the use constants", 0);
      return NULL;
    }

  /* Three new constants: uint 0, 1, 2 (the uses A, B, accumulator; 0 and 1
   * double as the RowMajorKHR and ColumnMajorKHR layouts). */
  for (guint u = 0; u < 3; u++)
    use_ids[u] = bound + u;

  out = g_array_sized_new (FALSE, FALSE, sizeof (guint32), n + 64);
  g_array_append_vals (out, w, 5);
  g_array_index (out, guint32, 3) = bound + 3;

  for (guint32 i = 5; i < n;)
    {
      guint32 len = w[i] >> 16, op = w[i] & 0xffff;
      const guint32 *o = &w[i + 1];

      if (op == OP_TYPE_INT && o[0] == t.uint_type)
        uint_seen = TRUE;
      switch (op)
        {
        case OP_CAPABILITY:
          if (len == 2 && o[0] == CAP_COOP_NV)
            {
              guint32 cap = CAP_COOP_KHR;

              emit (out, OP_CAPABILITY, &cap, 1);
              found_cap = TRUE;
            }
          else
            g_array_append_vals (out, &w[i], len);
          break;
        case OP_EXTENSION:
          if (len >= 2 && strncmp ((const char *) o, "SPV_NV_cooperative_matrix",
                                   (len - 1) * 4) == 0)
            {
              /* 26 characters and a NUL: seven words, zero-padded. */
              guint32 name[7] = { 0 };

              memcpy (name, "SPV_KHR_cooperative_matrix", 26);
              emit (out, OP_EXTENSION, name, 7);
              found_ext = TRUE;
            }
          else
            g_array_append_vals (out, &w[i], len);
          break;
        case OP_TYPE_COOP_NV:
          {
            guint32 operands[6];

            if (!constants_added && !uint_seen)
              {
                fail (error, "a matrix type comes before the 32-bit unsigned type", i);
                return NULL;
              }
            if (!constants_added)
              {
                for (guint u = 0; u < 3; u++)
                  {
                    guint32 c[3] = { t.uint_type, use_ids[u], u };

                    emit (out, OP_CONSTANT, c, 3);
                  }
                constants_added = TRUE;
              }
            memcpy (operands, o, 5 * sizeof (guint32));
            operands[5] = use_ids[coop_use[o[0]]];
            emit (out, OP_TYPE_COOP_KHR, operands, 6);
          }
          break;
        case OP_LOAD_NV:
        case OP_STORE_NV:
          {
            /* Load: type, result, pointer, stride, column-major, [access…];
             * store: pointer, object, stride, column-major, [access…]. */
            const guint fixed = op == OP_LOAD_NV ? 5 : 4;
            g_autofree guint32 *operands = NULL;
            guint32 major;

            if (len < fixed + 1)
              {
                fail (error, "malformed cooperative-matrix load or store", i);
                return NULL;
              }
            major = o[fixed - 1];
            if (major >= bound || (is_const[major] != 2 && is_const[major] != 3))
              {
                fail (error, "the column-major operand is not a constant", i);
                return NULL;
              }
            operands = g_memdup2 (o, (len - 1) * sizeof (guint32));
            /* KHR: layout, then stride. */
            operands[fixed - 2] = use_ids[is_const[major] == 2 ? 1 : 0];
            operands[fixed - 1] = o[fixed - 2];
            emit (out, op == OP_LOAD_NV ? OP_LOAD_KHR : OP_STORE_KHR, operands, len - 1);
          }
          break;
        case OP_MULADD_NV:
          {
            guint32 operands[6];

            if (len != 6)
              {
                fail (error, "malformed OpCooperativeMatrixMulAddNV", i);
                return NULL;
              }
            memcpy (operands, o, 5 * sizeof (guint32));
            /* Every matrix type was checked to be signed in scan (). */
            operands[5] = ALL_SIGNED;
            emit (out, OP_MULADD_KHR, operands, 6);
          }
          break;
        case OP_LENGTH_NV:
          emit (out, OP_LENGTH_KHR, o, len - 1);
          break;
        case OP_TYPE_COOP_KHR:
        case OP_LOAD_KHR:
        case OP_STORE_KHR:
        case OP_MULADD_KHR:
        case OP_LENGTH_KHR:
          fail (error, "the module already uses SPV_KHR_cooperative_matrix", i);
          return NULL;
        default:
          g_array_append_vals (out, &w[i], len);
          break;
        }
      i += len;
    }

  if (!found_cap || !found_ext || !constants_added)
    {
      fail (error, "the module does not use SPV_NV_cooperative_matrix", 0);
      return NULL;
    }
  {
    gsize n_bytes = out->len * sizeof (guint32);

    return g_bytes_new_take (g_array_free (g_steal_pointer (&out), FALSE), n_bytes);
  }
}
