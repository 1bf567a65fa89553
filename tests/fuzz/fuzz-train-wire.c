/* fuzz-train-wire.c: libFuzzer target for the group coordinator's own
 * headers inside the objects peers send: the 24-byte gradient header
 * ("DRG1", in GRADIENTS and REPAIR objects) and the 32-byte state header
 * ("DWT1", in WEIGHTS) and the sharded exchange's 32-byte shard header
 * ("DRS1", in GRADIENTS and REPAIR), src/train/dc-train-wire.h; and as an
 * auditor's contribution-request body (44 bytes).
 *
 * The input is a whole object. It is parsed as a gradient for a model of as
 * many parameters as its size implies (so that the size check passes and
 * the fields are reached) and of one parameter more (the size check must
 * refuse it), with the rank taken from its last byte; and as a state blob
 * likewise, with the step taken from its bytes 16-23 when present. An
 * accepted header must satisfy what the coordinator relies on.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>

#include "mesh/dc-mesh-train-protocol.h"
#include "train/dc-train-wire.h"

/* An even shard layout of @n parameters (dc_train_shard_layout_init_even ()). */
#define EVEN(n) (&(const DcTrainShardLayout) { .n_params = (n) })

int LLVMFuzzerTestOneInput (const guint8 *data, gsize size);

int
LLVMFuzzerTestOneInput (const guint8 *data,
                        gsize         size)
{
  guint32 rank = size > 0 ? data[size - 1] % 70 : 0;
  gsize grad_params = size >= DC_TRAIN_GRADIENT_HEADER_SIZE
                      ? (size - DC_TRAIN_GRADIENT_HEADER_SIZE) / 4 : 0;
  gsize state_params = size >= DC_TRAIN_WEIGHTS_HEADER_SIZE
                       ? (size - DC_TRAIN_WEIGHTS_HEADER_SIZE) / 12 : 0;
  guint64 step = 0;
  DcTrainGradientHeader gradient;
  DcTrainWeightsHeader state;

  for (guint extra = 0; extra < 2; extra++)
    {
      g_autoptr(GError) error = NULL;

      if (dc_train_gradient_header_parse (data, size, grad_params + extra, rank, &gradient,
                                          &error))
        {
          g_assert_no_error (error);
          g_assert_cmpuint (size, ==, DC_TRAIN_GRADIENT_HEADER_SIZE + 4 * (grad_params + extra));
          g_assert_cmpuint (gradient.roster_size, >=, 1);
          g_assert_cmpuint (gradient.roster_size, <=, DC_TRAIN_GRADIENT_ROSTER_MAX);
          g_assert_cmpuint (rank, <, gradient.roster_size);
        }
      else
        g_assert_nonnull (error);
    }
  /* As int8 values of a shard (from its first value, and from a later
   * block's): whatever decodes is finite, and rounding it again to int8
   * changes nothing (every decoded block is one the wire can carry), so
   * a device that keeps and re-sends a peer's values (repair) sends the
   * same values. */
  for (gsize first = 0; first <= DC_TRAIN_INT8_BLOCK_VALUES; first += DC_TRAIN_INT8_BLOCK_VALUES)
    for (gsize n = 0; n <= size; n += 1 + n / 4)
      {
        g_autofree float *values = g_new (float, MAX (n, 1));
        g_autofree float *again = NULL;

        if (!dc_train_wire_unpack (DC_TRAIN_WIRE_INT8, data, size, first, values, n))
          continue;
        g_assert_cmpuint (size, ==, dc_train_wire_values_size (DC_TRAIN_WIRE_INT8, n)
                                    - (first == 0 ? 0 : DC_TRAIN_INT8_PAD));
        again = g_memdup2 (values, MAX (n, 1) * sizeof (float));
        g_assert_true (dc_train_wire_round (DC_TRAIN_WIRE_INT8, again, n));
        g_assert_cmpmem (again, n * sizeof (float), values, n * sizeof (float));
      }
  /* As a shard object (DRS1) for a model of 0, 1, … parameters up to
   * what its size could hold (about 1 byte a value in int8). */
  for (gsize params = 0; params <= size + 1; params += 1 + params / 8)
    {
      g_autoptr(GError) error = NULL;
      DcTrainShardHeader shard;

      if (dc_train_shard_header_parse (data, size, EVEN (params), &shard, &error))
        {
          g_assert_no_error (error);
          g_assert_cmpuint (shard.roster_size, >=, 1);
          g_assert_cmpuint (shard.roster_size, <=, DC_TRAIN_GRADIENT_ROSTER_MAX);
          g_assert_cmpuint (shard.shard, <, shard.roster_size);
          g_assert_cmpuint (size, ==, dc_train_shard_wire_size (shard.kind, shard.wire, EVEN (params),
                                                                shard.roster_size,
                                                                shard.shard));
          g_assert_cmpuint (size, >=, DC_TRAIN_SHARD_HEADER_SIZE
                                      + dc_train_wire_values_size (shard.wire, shard.n_values));
          /* Widening a bf16 or int8 shard reads exactly its values; a NaN
           * or an infinity among them, or a malformed int8 block, is
           * refused. */
          {
            g_autoptr(GBytes) object = g_bytes_new_static (data, size);
            g_autoptr(GBytes) wide = dc_train_shard_decode (object, &shard, &error);

            if (wide != NULL)
              g_assert_cmpuint (g_bytes_get_size (wide), ==,
                                dc_train_shard_object_size (shard.kind, EVEN (params), shard.roster_size,
                                                            shard.shard));
            else
              g_assert_nonnull (error);
          }
        }
      else
        g_assert_nonnull (error);
    }
  /* The same object for a model whose shards are cut by the tail layout
   * (dc_train_shard_range (): a third of it final last, two later blocks
   * of a quarter): the header's roster and shard pick the range. */
  for (gsize params = 256; params <= size / 2 + 1; params += 1 + params / 8)
    {
      g_autoptr(GError) error = NULL;
      DcTrainShardLayout tail;
      DcTrainShardHeader shard;

      dc_train_shard_layout_init_tail (&tail, params, params / 3, params / 4, 2);
      if (dc_train_shard_header_parse (data, size, &tail, &shard, &error))
        {
          gsize start, length;

          dc_train_shard_range (&tail, shard.roster_size, shard.shard, &start, &length);
          g_assert_cmpuint (shard.n_values, ==, length);
          g_assert_cmpuint (start + length, <=, params);
          g_assert_cmpuint (size, ==, dc_train_shard_wire_size (shard.kind, shard.wire, &tail,
                                                                shard.roster_size,
                                                                shard.shard));
        }
      else
        g_assert_nonnull (error);
    }
  {
    g_autoptr(GError) error = NULL;
    DcTrainContribRequest request;

    if (dc_train_contrib_request_parse (data, size, &request, &error))
      {
        g_autoptr(GBytes) again = dc_train_contrib_request_write (&request);

        g_assert_no_error (error);
        g_assert_cmpuint (size, ==, DC_TRAIN_CONTRIB_REQUEST_SIZE);
        g_assert_cmpuint (request.step, >=, 1);
        g_assert_cmpuint (request.roster_size, >=, 2);
        g_assert_cmpuint (request.roster_size, <=, DC_TRAIN_GRADIENT_ROSTER_MAX);
        g_assert_cmpuint (request.shard, <, request.roster_size);
        g_assert_cmpmem (g_bytes_get_data (again, NULL), DC_TRAIN_CONTRIB_REQUEST_SIZE, data,
                         size);
      }
    else
      g_assert_nonnull (error);
  }

  /* The caps of a run of as many parameters as the input's size implies
   * (and of a count from its first bytes): between the seeds' caps and
   * the mesh's ceilings. */
  {
    guint64 counts[2] = { grad_params, 0 };

    if (size >= 8)
      memcpy (&counts[1], data, 8);
    for (guint i = 0; i < G_N_ELEMENTS (counts); i++)
      {
        gsize n = (gsize) MIN (counts[i], (guint64) G_MAXSIZE);

        g_assert_cmpuint (dc_train_wire_gradient_cap (n), >=, DC_MESH_GRADIENT_MAX_TOTAL);
        g_assert_cmpuint (dc_train_wire_gradient_cap (n), <=, DC_MESH_GRADIENT_CEILING_TOTAL);
        g_assert_cmpuint (dc_train_wire_weights_cap (n), >=, DC_MESH_WEIGHTS_MAX_TOTAL);
        g_assert_cmpuint (dc_train_wire_weights_cap (n), <=, DC_MESH_WEIGHTS_CEILING_TOTAL);
      }
  }
  if (size >= 24)
    {
      memcpy (&step, data + 16, 8);
      step = GUINT64_FROM_LE (step);
    }
  for (guint extra = 0; extra < 2; extra++)
    {
      g_autoptr(GError) error = NULL;

      if (dc_train_weights_header_parse (data, size, state_params + extra, step, &state, &error))
        {
          g_assert_no_error (error);
          g_assert_cmpuint (size, ==,
                            DC_TRAIN_WEIGHTS_HEADER_SIZE + 12 * (state_params + extra));
          g_assert_cmpuint (state.n_params, ==, state_params + extra);
          g_assert_cmpuint (state.step, ==, step);
          g_assert_true (state.beta1_pow > 0.0f && state.beta1_pow <= 1.0f);
          g_assert_true (state.beta2_pow > 0.0f && state.beta2_pow <= 1.0f);
        }
      else
        g_assert_nonnull (error);
    }
  return 0;
}
