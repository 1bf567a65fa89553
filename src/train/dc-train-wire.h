/* dc-train-wire.h: the group coordinator's own headers inside the objects
 * it sends (docs/PROTOCOL.md, "The step exchange", "Joining mid-run").
 *
 * The mesh carries a gradient (GRADIENTS, REPAIR) and a joiner's state
 * (WEIGHTS) as opaque chunked objects; what is inside belongs to the
 * training layer: a 24-byte gradient header ("DRG1") before the float32
 * gradient, a 32-byte state header ("DWT1") before the weights and both Adam
 * moments. These parsers read a peer's bytes (untrusted): they check the
 * size against the model first, then every field, and never read past
 * @size. Plain functions, any thread.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define DC_TRAIN_GRADIENT_MAGIC        0x31475244u  /* "DRG1" */
#define DC_TRAIN_GRADIENT_HEADER_SIZE  24
#define DC_TRAIN_WEIGHTS_MAGIC         0x31545744u  /* "DWT1" */
#define DC_TRAIN_WEIGHTS_HEADER_SIZE   32
/* A roster is at most a room (DC_MESH_ROSTER_MAX). */
#define DC_TRAIN_GRADIENT_ROSTER_MAX   64

/**
 * DcTrainGradientHeader:
 * @roster_size: devices of the roster the gradient was computed for (1-64)
 * @digest: first 8 bytes of SHA-256 of that roster's sorted ids
 * @loss_bits: the sender's batch loss, binary32 bits
 */
typedef struct
{
  guint32 roster_size;
  guint64 digest;
  guint32 loss_bits;
} DcTrainGradientHeader;

/**
 * DcTrainWeightsHeader:
 * @n_params: parameters of the model
 * @step: the Adam steps the state is after
 * @beta1_pow: β1^step
 * @beta2_pow: β2^step
 */
typedef struct
{
  guint64 n_params;
  guint64 step;
  float   beta1_pow;
  float   beta2_pow;
} DcTrainWeightsHeader;

gboolean dc_train_gradient_header_parse (const guint8           *data,
                                         gsize                   size,
                                         gsize                   n_params,
                                         guint32                 rank,
                                         DcTrainGradientHeader  *header,
                                         GError                **error);
gboolean dc_train_weights_header_parse  (const guint8           *data,
                                         gsize                   size,
                                         gsize                   n_params,
                                         guint64                 step,
                                         DcTrainWeightsHeader   *header,
                                         GError                **error);

G_END_DECLS
