/* dc-train-wire.c: the coordinator's object headers (see dc-train-wire.h).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-train"

#include "config.h"

#include <string.h>

#include <gio/gio.h>

#include "dc-train-wire.h"

static guint32
get_u32 (const guint8 *p)
{
  guint32 v;

  memcpy (&v, p, 4);
  return GUINT32_FROM_LE (v);
}

static guint64
get_u64 (const guint8 *p)
{
  guint64 v;

  memcpy (&v, p, 8);
  return GUINT64_FROM_LE (v);
}

/**
 * dc_train_gradient_header_parse:
 * @data: (array length=size): a whole gradient object
 * @n_params: the receiving model's parameters
 * @rank: the rank the chunk claims (must be < the roster size)
 *
 * Checks a gradient object: exactly 24 + 4 × @n_params bytes, magic
 * "DRG1", roster size 1-64 and above @rank, reserved bytes zero.
 *
 * Returns: %FALSE with @error set when it is not one
 */
gboolean
dc_train_gradient_header_parse (const guint8           *data,
                                gsize                   size,
                                gsize                   n_params,
                                guint32                 rank,
                                DcTrainGradientHeader  *header,
                                GError                **error)
{
  if (n_params > (G_MAXSIZE - DC_TRAIN_GRADIENT_HEADER_SIZE) / sizeof (float)
      || size != DC_TRAIN_GRADIENT_HEADER_SIZE + n_params * sizeof (float))
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                   "a gradient of %" G_GSIZE_FORMAT " bytes for a model of %" G_GSIZE_FORMAT
                   " parameters", size, n_params);
      return FALSE;
    }
  if (get_u32 (data) != DC_TRAIN_GRADIENT_MAGIC)
    {
      g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                           "a gradient without its DRG1 header");
      return FALSE;
    }
  header->roster_size = get_u32 (data + 4);
  header->digest = get_u64 (data + 8);
  header->loss_bits = get_u32 (data + 16);
  if (header->roster_size == 0 || header->roster_size > DC_TRAIN_GRADIENT_ROSTER_MAX
      || rank >= header->roster_size)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                   "a gradient of rank %u for a roster of %u devices (1 to %u)", rank,
                   header->roster_size, DC_TRAIN_GRADIENT_ROSTER_MAX);
      return FALSE;
    }
  if (get_u32 (data + 20) != 0)
    {
      g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                           "a gradient header with reserved bytes set");
      return FALSE;
    }
  return TRUE;
}

/**
 * dc_train_weights_header_parse:
 * @data: (array length=size): a whole state blob (WEIGHTS)
 * @n_params: the receiving model's parameters
 * @step: the step the blob must be of
 *
 * Checks a joiner's state blob: exactly 32 + 12 × @n_params bytes, magic
 * "DWT1", reserved zero, the same parameter count and step, and β powers
 * in (0, 1] (a running product of β < 1 from 1).
 *
 * Returns: %FALSE with @error set when it is not one
 */
gboolean
dc_train_weights_header_parse (const guint8           *data,
                               gsize                   size,
                               gsize                   n_params,
                               guint64                 step,
                               DcTrainWeightsHeader   *header,
                               GError                **error)
{
  if (n_params > (G_MAXSIZE - DC_TRAIN_WEIGHTS_HEADER_SIZE) / (3 * sizeof (float))
      || size != DC_TRAIN_WEIGHTS_HEADER_SIZE + 3 * n_params * sizeof (float))
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                   "%" G_GSIZE_FORMAT " bytes for %" G_GSIZE_FORMAT " parameters", size,
                   n_params);
      return FALSE;
    }
  header->n_params = get_u64 (data + 8);
  header->step = get_u64 (data + 16);
  memcpy (&header->beta1_pow, data + 24, 4);
  memcpy (&header->beta2_pow, data + 28, 4);
  if (get_u32 (data) != DC_TRAIN_WEIGHTS_MAGIC || get_u32 (data + 4) != 0
      || header->n_params != n_params || header->step != step)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                   "not a DWT1 state of %" G_GSIZE_FORMAT " parameters after step %"
                   G_GUINT64_FORMAT, n_params, step);
      return FALSE;
    }
  /* Written as !(x > 0 && x <= 1) so that NaN fails too. */
  if (!(header->beta1_pow > 0.0f && header->beta1_pow <= 1.0f)
      || !(header->beta2_pow > 0.0f && header->beta2_pow <= 1.0f))
    {
      g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                           "a state whose Adam β powers are not in (0, 1]");
      return FALSE;
    }
  return TRUE;
}
