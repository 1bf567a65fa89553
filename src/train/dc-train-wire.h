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

#include "model/dc-gpt-config.h"

G_BEGIN_DECLS

#define DC_TRAIN_GRADIENT_MAGIC        0x31475244u  /* "DRG1" */
#define DC_TRAIN_GRADIENT_HEADER_SIZE  24
#define DC_TRAIN_WEIGHTS_MAGIC         0x31545744u  /* "DWT1" */
#define DC_TRAIN_WEIGHTS_HEADER_SIZE   32
/* A roster is at most a room (DC_MESH_ROSTER_MAX). */
#define DC_TRAIN_GRADIENT_ROSTER_MAX   64
/* The sharded exchange's objects (docs/PROTOCOL.md, "The step exchange"). */
#define DC_TRAIN_SHARD_MAGIC           0x31535244u  /* "DRS1" */
#define DC_TRAIN_SHARD_HEADER_SIZE     32
#define DC_TRAIN_SHARD_HASH_SIZE       32  /* SHA-256 */
/* An auditor's "your contribution to shard a of step S" (docs/PROTOCOL.md,
 * "contribution-request"): version, reserved, run id, step, roster digest,
 * shard, roster size. */
#define DC_TRAIN_CONTRIB_REQUEST_SIZE     44
#define DC_TRAIN_CONTRIB_REQUEST_VERSION  1

/**
 * DcTrainWire:
 * @DC_TRAIN_WIRE_F32: gradient values on the wire as IEEE-754 binary32
 *   (the default: every pinned hash is of f32 runs)
 * @DC_TRAIN_WIRE_BF16: as bfloat16 (binary32's top 16 bits, rounded to
 *   nearest even): half the bytes. The run's CONFIG says which; every
 *   device rounds its own contribution and its own summed shard the same
 *   way before use, so every device sums and applies the same values
 * @DC_TRAIN_WIRE_INT8: blocks of 39 values sharing a power-of-two scale,
 *   8 bits a value (about a quarter of f32's bytes): for slow networks.
 *   Rounded the same way as bf16 (dc_train_wire_round ()), block by block
 *   from each shard's first value
 *
 * The element type of a shard object on the wire (byte 5 of the DRS1
 * header). Shards kept in memory are always binary32.
 */
typedef enum
{
  DC_TRAIN_WIRE_F32 = 0,
  DC_TRAIN_WIRE_BF16 = 1,
  DC_TRAIN_WIRE_INT8 = 2,
} DcTrainWire;

/* The int8 wire (docs/PROTOCOL.md, "The int8 wire"): after the 32-byte
 * header, 8 zero bytes, then blocks of 40 bytes: a signed exponent byte e
 * and 39 signed values q (−127…127), each value q × 2^e. A mesh chunk's
 * 65,400 data bytes are whole blocks, so each chunk of a shard object
 * holds whole blocks: its values can be summed and sent on as it comes. */
#define DC_TRAIN_INT8_PAD            8
#define DC_TRAIN_INT8_BLOCK_SIZE     40
#define DC_TRAIN_INT8_BLOCK_VALUES   (DC_TRAIN_INT8_BLOCK_SIZE - 1)
#define DC_TRAIN_INT8_EXP_MIN        (-126)
#define DC_TRAIN_INT8_EXP_MAX        121

/**
 * DcTrainShardKind:
 * @DC_TRAIN_SHARD_CONTRIBUTION: shard r of one device's gradient, sent to
 *   rank r (the reducer of shard r) and, on audit steps, to r's auditor
 * @DC_TRAIN_SHARD_SUMMED: the reducer's sum of the roster's contributions to
 *   its shard (rank order, then ÷ n), sent to every device: the header, the
 *   values, then the SHA-256 of each contribution it summed (after the
 *   values since body version 5, so that the sum can be sent chunk by chunk:
 *   dc_train_shard_listed_hashes ())
 */
typedef enum
{
  DC_TRAIN_SHARD_CONTRIBUTION = 1,
  DC_TRAIN_SHARD_SUMMED = 2,
} DcTrainShardKind;

/**
 * DcTrainShardHeader:
 * @kind: a #DcTrainShardKind
 * @roster_size: devices of the roster (1-64)
 * @shard: which shard (< @roster_size)
 * @digest: first 8 bytes of SHA-256 of that roster's sorted ids
 * @loss_bits: a contribution: its author's batch loss; a summed shard: the
 *   step's loss (the roster's losses summed in rank order, ÷ n), binary32 bits
 * @n_values: values of the shard (dc_train_shard_range ())
 * @wire: the values' element type (%DC_TRAIN_WIRE_F32 in memory)
 */
typedef struct
{
  DcTrainShardKind kind;
  guint32 roster_size;
  guint32 shard;
  guint64 digest;
  guint32 loss_bits;
  gsize   n_values;
  DcTrainWire wire;
} DcTrainShardHeader;

/**
 * DcTrainShardLayout:
 * @n_params: the model's parameters (< 2^32)
 * @late_end: the values that become final last, [0, @late_end): the
 *   embeddings and block 0, which the backward pass finishes last; 0 for
 *   even shards (dc_train_shard_layout_init_even ())
 * @block_len: values of each later block
 * @n_blocks: blocks after block 0 (the final norm counts with the last)
 * @block_weighted: the values after block 0 are cut in equal weight, block
 *   l weighing 1/(1 + l) (the tail layout of 2026-12-02); %FALSE (the
 *   default since 2026-12-03, branch group-reduce): in equal counts
 *
 * How a gradient is cut into shards (docs/ARCHITECTURE.md, "The sharded
 * exchange"): a pure function of the model's shape, the same on every
 * device. dc_train_shard_range () reads it.
 */
typedef struct
{
  gsize n_params;
  gsize late_end;
  gsize block_len;
  guint n_blocks;
  gboolean block_weighted;
} DcTrainShardLayout;

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

/**
 * DcTrainContribRequest:
 * @run_id: the run (16 bytes)
 * @step: the audited step (≥ 1)
 * @digest: its roster's digest (first 8 bytes of SHA-256 of the sorted ids)
 * @shard: the audited reducer's shard (< @roster_size)
 * @roster_size: devices of that roster (2-64: an audit needs two)
 */
typedef struct
{
  guint8  run_id[16];
  guint64 step;
  guint64 digest;
  guint32 shard;
  guint32 roster_size;
} DcTrainContribRequest;

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

void     dc_train_shard_layout_init_even (DcTrainShardLayout   *layout,
                                         gsize                   n_params);
void     dc_train_shard_layout_init_tail (DcTrainShardLayout   *layout,
                                         gsize                   n_params,
                                         gsize                   late_end,
                                         gsize                   block_len,
                                         guint                   n_blocks);
void     dc_train_shard_layout_init_model (DcTrainShardLayout  *layout,
                                          const DcGptConfig   *config);
guint    dc_train_shard_late_count      (const DcTrainShardLayout *layout,
                                         guint                   n_ranks);
void     dc_train_shard_range           (const DcTrainShardLayout *layout,
                                         guint                   n_ranks,
                                         guint                   shard,
                                         gsize                  *start,
                                         gsize                  *length);
gsize    dc_train_shard_object_size     (DcTrainShardKind        kind,
                                         const DcTrainShardLayout *layout,
                                         guint                   n_ranks,
                                         guint                   shard);
gsize    dc_train_shard_wire_size       (DcTrainShardKind        kind,
                                         DcTrainWire             wire,
                                         const DcTrainShardLayout *layout,
                                         guint                   n_ranks,
                                         guint                   shard);
void     dc_train_shard_header_write    (guint8                 *data,
                                         const DcTrainShardHeader *header);
guint64  dc_train_wire_gradient_cap     (gsize                   n_params);
guint64  dc_train_wire_weights_cap      (gsize                   n_params);
gboolean dc_train_shard_header_read     (const guint8           *data,
                                         gsize                   size,
                                         DcTrainShardHeader     *header,
                                         GError                **error);
gboolean dc_train_shard_header_parse    (const guint8           *data,
                                         gsize                   size,
                                         const DcTrainShardLayout *layout,
                                         DcTrainShardHeader     *header,
                                         GError                **error);

GBytes * dc_train_contrib_request_write (const DcTrainContribRequest *request);
gboolean dc_train_contrib_request_parse (const guint8           *data,
                                         gsize                   size,
                                         DcTrainContribRequest  *request,
                                         GError                **error);
const char *dc_train_wire_to_string     (DcTrainWire             wire);
gboolean dc_train_wire_from_string      (const char             *text,
                                         DcTrainWire            *wire);
gboolean dc_train_bf16_round            (float                  *values,
                                         gsize                   n);
GBytes  *dc_train_shard_encode          (GBytes                 *object,
                                         DcTrainWire             wire);
GBytes  *dc_train_shard_decode          (GBytes                 *object,
                                         const DcTrainShardHeader *header,
                                         GError                **error);
const guint8 *dc_train_shard_listed_hashes (const guint8        *data,
                                            gsize                size);
gboolean _dc_train_wire_set_simd        (gboolean                use);
gboolean dc_train_wire_round            (DcTrainWire             wire,
                                         float                  *values,
                                         gsize                   n);
gboolean dc_train_wire_round_pooled     (DcTrainWire             wire,
                                         float                  *values,
                                         gsize                   n);
gboolean dc_train_wire_round_shards     (DcTrainWire             wire,
                                         const DcTrainShardLayout *layout,
                                         guint                   n_ranks,
                                         float                  *grads);
void     dc_train_wire_corrupt          (DcTrainWire             wire,
                                         float                  *values,
                                         gsize                   n);
gsize    dc_train_wire_values_size      (DcTrainWire             wire,
                                         gsize                   n);
gsize    dc_train_wire_value_offset     (DcTrainWire             wire,
                                         gsize                   index);
gsize    dc_train_wire_values_before    (DcTrainWire             wire,
                                         gsize                   n,
                                         gsize                   offset);
void     dc_train_wire_pack             (DcTrainWire             wire,
                                         const float            *values,
                                         gsize                   n,
                                         gsize                   first,
                                         guint8                 *out);
gboolean dc_train_wire_unpack           (DcTrainWire             wire,
                                         const guint8           *data,
                                         gsize                   size,
                                         gsize                   first,
                                         float                  *out,
                                         gsize                   n);
void     dc_train_shard_layout_init_run (DcTrainShardLayout     *layout,
                                         const DcGptConfig      *config,
                                         gsize                   n_params);
void     dc_train_bf16_pack             (const float            *values,
                                         gsize                   n,
                                         guint8                 *out);
gboolean dc_train_bf16_unpack           (const guint8           *data,
                                         gsize                   n,
                                         float                  *out);

G_END_DECLS
