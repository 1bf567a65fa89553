/* dc-train-wire.c: the coordinator's object headers (see dc-train-wire.h).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-train"

#include "config.h"

#include <math.h>
#include <string.h>

#if defined (__x86_64__) && (defined (__GNUC__) || defined (__clang__))
#include <immintrin.h>
#define WIRE_HAVE_AVX2 1
#define WIRE_AVX2 __attribute__ ((target ("avx2")))
#endif

#include <gio/gio.h>

#include "dc-train-wire.h"
#include "engine/dc-parallel.h"
#include "mesh/dc-mesh-train-protocol.h"
#include "model/dc-gpt-config.h"

/* The wire's values with AVX2 (several times the scalar rate: the rounding,
 * packing and unpacking run over every gradient, on the step's path): the
 * scalar rule's operations on each lane in the same order, so the same
 * bits (test-train-wire /int8-simd and /bf16-simd compare them on every
 * kind of value). Whether this machine has it is asked once; tests may
 * turn it off. */
static gint wire_simd = -1;  /* -1: not asked yet */

static gboolean
use_simd (void)
{
  if (g_atomic_int_get (&wire_simd) < 0)
    {
#ifdef WIRE_HAVE_AVX2
      g_atomic_int_set (&wire_simd, __builtin_cpu_supports ("avx2") ? 1 : 0);
#else
      g_atomic_int_set (&wire_simd, 0);
#endif
    }
  return g_atomic_int_get (&wire_simd) == 1;
}

/**
 * _dc_train_wire_set_simd:
 * @use: whether the int8 blocks and bf16 values may use the vector path
 *
 * Tests only: the scalar rule alone with %FALSE, to compare.
 *
 * Returns: whether the vector path is there on this machine
 */
gboolean
_dc_train_wire_set_simd (gboolean use)
{
  gboolean available;

  g_atomic_int_set (&wire_simd, -1);
  available = use_simd ();
  if (!use)
    g_atomic_int_set (&wire_simd, 0);
  return available;
}

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

/**
 * dc_train_shard_layout_init_even:
 *
 * Even shards: shard r is [⌊r·n/N⌋, ⌊(r+1)·n/N⌋) (the layout before
 * 2026-12-02 afternoon; what a model without blocks gets).
 */
void
dc_train_shard_layout_init_even (DcTrainShardLayout *layout,
                                 gsize               n_params)
{
  memset (layout, 0, sizeof *layout);
  layout->n_params = n_params;
}

/**
 * dc_train_shard_layout_init_tail:
 * @late_end: where block 1 begins (the embeddings and block 0 before it)
 * @block_len: values of each block after it
 * @n_blocks: blocks after block 0
 *
 * The tail layout (dc_train_shard_range ()); an even one when the model
 * has no block after block 0 or the sizes do not add up.
 */
void
dc_train_shard_layout_init_tail (DcTrainShardLayout *layout,
                                 gsize               n_params,
                                 gsize               late_end,
                                 gsize               block_len,
                                 guint               n_blocks)
{
  dc_train_shard_layout_init_even (layout, n_params);
  if (n_blocks == 0 || block_len == 0 || late_end == 0 || late_end >= n_params
      || block_len > (n_params - late_end) / n_blocks)
    return;
  layout->late_end = late_end;
  layout->block_len = block_len;
  layout->n_blocks = n_blocks;
}

/**
 * dc_train_shard_layout_init_model:
 * @config: the run's model
 *
 * The tail layout of @config's gradients: block 1 begins the values final
 * before the end of the backward pass (the tied head makes the token
 * embedding final only at the very end, block 0 just before it).
 */
void
dc_train_shard_layout_init_model (DcTrainShardLayout *layout,
                                  const DcGptConfig  *config)
{
  gsize n_params = dc_gpt_config_n_params (config);
  DcGptTensor block1, block2;

  if (config->n_layer < 2)
    {
      dc_train_shard_layout_init_even (layout, n_params);
      return;
    }
  dc_gpt_config_tensor (config, 2 + DC_GPT_TENSORS_PER_LAYER, &block1);
  if (config->n_layer > 2)
    dc_gpt_config_tensor (config, 2 + 2 * DC_GPT_TENSORS_PER_LAYER, &block2);
  else
    block2.offset = n_params;
  /* With two blocks block 1's length includes the final norm, which the
   * layout counts with the last block anyway. */
  dc_train_shard_layout_init_tail (layout, n_params, block1.offset,
                                   block2.offset - block1.offset, config->n_layer - 1);
}

/**
 * dc_train_shard_layout_init_run:
 * @config: the run's model
 * @n_params: its parameters
 *
 * The layout a run's devices cut their gradients by: the tail layout
 * (dc_train_shard_layout_init_model ()), or for experiments
 * `DC_TRAIN_GROUP_SHARDS=even` (even shards) or `weighted` (the tail
 * layout cut by block weight). Every device of a run must see the same
 * value, and so must `--simulate-peers` (an int8 wire rounds shard by
 * shard).
 */
void
dc_train_shard_layout_init_run (DcTrainShardLayout *layout,
                                const DcGptConfig  *config,
                                gsize               n_params)
{
  static gsize choice = 0;

  if (g_once_init_enter (&choice))
    {
      const char *shards = g_getenv ("DC_TRAIN_GROUP_SHARDS");

      g_once_init_leave (&choice, g_strcmp0 (shards, "even") == 0 ? 2
                                  : g_strcmp0 (shards, "weighted") == 0 ? 3 : 1);
    }
  if (choice == 2)
    dc_train_shard_layout_init_even (layout, n_params);
  else
    {
      dc_train_shard_layout_init_model (layout, config);
      layout->block_weighted = choice == 3;
    }
}

/* Weights of the tail layout's early values. By default every value
 * weighs the same (the early shards are even by count). Block-weighted
 * (@block_weighted): block l (1 ≤ l, final l blocks of the backward pass
 * before its end) weighs 1/(1 + l), as integers: lcm (1..12) / (1 + l),
 * exact for up to 11 later blocks (DC_GPT_LAYERS_MAX is 12); later blocks
 * weigh as the 11th. The H200 host's traces (docs/BENCHMARKS.md, branch
 * group-reduce) showed the block-weighted shard final earliest, the
 * largest, arriving last more often than any other: what it crosses
 * during the backward pass crosses slowly (16 cores computing), and its
 * reducer receives and sends the most. */
#define SHARD_WEIGHT_UNIT 27720u
#define SHARD_WEIGHT_BLOCKS 11u

static guint64
block_weight (const DcTrainShardLayout *layout,
              guint                     l)
{
  if (!layout->block_weighted)
    return SHARD_WEIGHT_UNIT;
  return SHARD_WEIGHT_UNIT / (1u + MIN (l, SHARD_WEIGHT_BLOCKS));
}

/* [start, end) of early block l (1-based; the last ends at n_params). */
static void
block_bounds (const DcTrainShardLayout *layout,
              guint                     l,
              gsize                    *start,
              gsize                    *end)
{
  *start = layout->late_end + (gsize) (l - 1) * layout->block_len;
  *end = l == layout->n_blocks ? layout->n_params : *start + layout->block_len;
}

static guint64
early_weight (const DcTrainShardLayout *layout)
{
  guint64 total = 0;

  for (guint l = 1; l <= layout->n_blocks; l++)
    {
      gsize start, end;

      block_bounds (layout, l, &start, &end);
      total += (guint64) (end - start) * block_weight (layout, l);
    }
  return total;
}

/* The first value at which the early values' weight reaches @target. */
static gsize
early_position (const DcTrainShardLayout *layout,
                guint64                   target)
{
  for (guint l = 1; l <= layout->n_blocks; l++)
    {
      gsize start, end;
      guint64 w = block_weight (layout, l);

      block_bounds (layout, l, &start, &end);
      if (target <= (guint64) (end - start) * w)
        return start + (gsize) ((target + w - 1) / w);
      target -= (guint64) (end - start) * w;
    }
  return layout->n_params;
}

/**
 * dc_train_shard_late_count:
 * @layout: the model's
 * @n_ranks: the roster's size (1-64)
 *
 * How many of the first shards hold the values final last (the tail
 * layout's k, dc_train_shard_range ()): ⌊N/2⌋, or more where those values
 * are more than ⌊N/2⌋ even shards' worth, so that none of these shards is
 * larger than an even one. 0 means even shards: one device alone, an even
 * layout, a model whose values final last need all N shards (width 16 at
 * N = 2: 70 % of it), or too few values for a late shard each and 64 for
 * an early one.
 */
guint
dc_train_shard_late_count (const DcTrainShardLayout *layout,
                           guint                     n_ranks)
{
  gsize n_params = layout->n_params;
  guint64 k;

  if (layout->late_end == 0 || n_ranks < 2)
    return 0;
  /* n_params < 2^32 (dc_train_shard_header_parse () checks it; a model
   * is far smaller) and n_ranks ≤ 64: no overflow here, nor in
   * dc_train_shard_range ()'s weights (under 2^32 × 27720 × 64 < 2^53). */
  k = ((guint64) n_ranks * layout->late_end + n_params - 1) / n_params;
  k = MAX (k, n_ranks / 2);
  if (k > n_ranks - 1 || layout->late_end < k
      || (n_params - layout->late_end) / 64 < n_ranks - k)
    return 0;
  return (guint) k;
}

/**
 * dc_train_shard_range:
 * @layout: the model's (dc_train_shard_layout_init_model ())
 * @n_ranks: the roster's size (≥ 1)
 * @shard: < @n_ranks
 *
 * Shard r of a gradient: contiguous, in rank order, covering every
 * parameter once. Even layout: [⌊r·n/N⌋, ⌊(r+1)·n/N⌋). Tail layout
 * (issue 11's exchange tail, 2026-12-02): the values final only at the
 * end of the backward pass, [0, late_end), are cut evenly into the first
 * k shards (dc_train_shard_late_count (): ⌊N/2⌋ or more, never larger
 * than an even shard), so that each of their reducers has little to sum and
 * forward after the last gradient; the rest is cut into the other N − k
 * in equal counts (since 2026-12-03; with @layout's block_weighted, in
 * equal *weight*, block l weighing 1/(1 + l), so that a shard final
 * only one block before the end is smaller than one final three blocks
 * before). Any cut gives the same sums, element by element.
 */
void
dc_train_shard_range (const DcTrainShardLayout *layout,
                      guint                     n_ranks,
                      guint                     shard,
                      gsize                    *start,
                      gsize                    *length)
{
  gsize n_params = layout->n_params;
  guint k = dc_train_shard_late_count (layout, n_ranks);
  guint m = n_ranks - k;
  guint64 a, b;

  if (k == 0)
    {
      a = (guint64) shard * n_params / n_ranks;
      b = (guint64) (shard + 1) * n_params / n_ranks;
    }
  else if (shard < k)
    {
      a = (guint64) shard * layout->late_end / k;
      b = (guint64) (shard + 1) * layout->late_end / k;
    }
  else
    {
      guint64 total = early_weight (layout);
      guint j = shard - k;

      a = j == 0 ? layout->late_end : early_position (layout, total * j / m);
      b = j + 1 == m ? n_params : early_position (layout, total * (j + 1) / m);
    }
  *start = a;
  *length = b - a;
}

/**
 * dc_train_shard_wire_size:
 *
 * The exact size of a shard object whose values are @wire: the 32-byte
 * header, the shard's values (4 bytes each in f32, 2 in bf16, blocks of
 * 39 in 40 bytes after 8 zero bytes in int8: dc_train_wire_values_size ()),
 * then for a summed shard @n_ranks SHA-256 hashes.
 */
gsize
dc_train_shard_wire_size (DcTrainShardKind kind,
                          DcTrainWire      wire,
                          const DcTrainShardLayout *layout,
                          guint            n_ranks,
                          guint            shard)
{
  gsize start, length;

  dc_train_shard_range (layout, n_ranks, shard, &start, &length);
  return DC_TRAIN_SHARD_HEADER_SIZE
         + (kind == DC_TRAIN_SHARD_SUMMED ? (gsize) n_ranks * DC_TRAIN_SHARD_HASH_SIZE : 0)
         + dc_train_wire_values_size (wire, length);
}

/**
 * dc_train_shard_object_size:
 *
 * The exact size of a shard object in float32 (as kept in memory, and on
 * the wire of an f32 run): dc_train_shard_wire_size () of
 * %DC_TRAIN_WIRE_F32.
 */
gsize
dc_train_shard_object_size (DcTrainShardKind          kind,
                            const DcTrainShardLayout *layout,
                            guint                     n_ranks,
                            guint                     shard)
{
  return dc_train_shard_wire_size (kind, DC_TRAIN_WIRE_F32, layout, n_ranks, shard);
}

static void
put_u32 (guint8  *p,
         guint32  v)
{
  v = GUINT32_TO_LE (v);
  memcpy (p, &v, 4);
}

/**
 * dc_train_shard_header_write:
 * @data: at least %DC_TRAIN_SHARD_HEADER_SIZE bytes
 *
 * Writes @header (its n_values is not on the wire: the size implies it).
 */
void
dc_train_shard_header_write (guint8                   *data,
                             const DcTrainShardHeader *header)
{
  guint64 digest = GUINT64_TO_LE (header->digest);

  memset (data, 0, DC_TRAIN_SHARD_HEADER_SIZE);
  put_u32 (data, DC_TRAIN_SHARD_MAGIC);
  data[4] = (guint8) header->kind;
  data[5] = (guint8) header->wire;
  put_u32 (data + 8, header->roster_size);
  put_u32 (data + 12, header->shard);
  memcpy (data + 16, &digest, 8);
  put_u32 (data + 24, header->loss_bits);
}

/**
 * dc_train_shard_header_read:
 * @data: (array length=size): a shard object, or its first chunk
 *
 * Checks a shard object's 32-byte header alone (docs/PROTOCOL.md): magic
 * "DRS1", kind 1 or 2, element type 0 (f32), 1 (bf16) or 2 (int8), reserved bytes
 * zero, roster size 1-64, shard below it. The object's size is
 * dc_train_shard_header_parse ()'s to check.
 *
 * Returns: %FALSE with @error set when it is not one
 */
gboolean
dc_train_shard_header_read (const guint8        *data,
                            gsize                size,
                            DcTrainShardHeader  *header,
                            GError             **error)
{
  if (size < DC_TRAIN_SHARD_HEADER_SIZE || get_u32 (data) != DC_TRAIN_SHARD_MAGIC)
    {
      g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                           "a gradient shard without its DRS1 header");
      return FALSE;
    }
  if ((data[4] != DC_TRAIN_SHARD_CONTRIBUTION && data[4] != DC_TRAIN_SHARD_SUMMED)
      || (data[5] != DC_TRAIN_WIRE_F32 && data[5] != DC_TRAIN_WIRE_BF16
          && data[5] != DC_TRAIN_WIRE_INT8)
      || data[6] != 0 || data[7] != 0 || get_u32 (data + 28) != 0)
    {
      g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                           "a gradient shard of unknown kind or element type, or with reserved "
                           "bytes set");
      return FALSE;
    }
  header->kind = data[4];
  header->wire = data[5];
  header->roster_size = get_u32 (data + 8);
  header->shard = get_u32 (data + 12);
  header->digest = get_u64 (data + 16);
  header->loss_bits = get_u32 (data + 24);
  if (header->roster_size == 0 || header->roster_size > DC_TRAIN_GRADIENT_ROSTER_MAX
      || header->shard >= header->roster_size)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                   "a gradient shard %u for a roster of %u devices (1 to %u)", header->shard,
                   header->roster_size, DC_TRAIN_GRADIENT_ROSTER_MAX);
      return FALSE;
    }
  return TRUE;
}

/**
 * dc_train_shard_header_parse:
 * @data: (array length=size): a whole shard object
 * @layout: the receiving model's shard layout
 *
 * Checks a shard object (docs/PROTOCOL.md): its header as
 * dc_train_shard_header_read () does, and exactly the size
 * dc_train_shard_wire_size () gives for it. It does not read the values
 * (dc_train_shard_decode () does).
 *
 * Returns: %FALSE with @error set when it is not one
 */
gboolean
dc_train_shard_header_parse (const guint8        *data,
                             gsize                size,
                             const DcTrainShardLayout *layout,
                             DcTrainShardHeader  *header,
                             GError             **error)
{
  gsize start;

  if (!dc_train_shard_header_read (data, size, header, error))
    return FALSE;
  /* Bounded before any product (dc_train_shard_range () multiplies by the
   * shard, ≤ 64): far above any model (a gradient is at most 64 MiB). */
  if (layout->n_params > G_MAXUINT32
      || size != dc_train_shard_wire_size (header->kind, header->wire, layout,
                                           header->roster_size, header->shard))
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                   "a gradient shard of %" G_GSIZE_FORMAT " bytes (%s) for a model of %"
                   G_GSIZE_FORMAT " parameters", size, dc_train_wire_to_string (header->wire),
                   layout->n_params);
      return FALSE;
    }
  dc_train_shard_range (layout, header->roster_size, header->shard, &start, &header->n_values);
  return TRUE;
}

/**
 * dc_train_contrib_request_write:
 * @request: what to ask
 *
 * Returns: (transfer full): the 44-byte body of a contribution request
 */
GBytes *
dc_train_contrib_request_write (const DcTrainContribRequest *request)
{
  guint8 *out = g_malloc0 (DC_TRAIN_CONTRIB_REQUEST_SIZE);
  guint64 step = GUINT64_TO_LE (request->step);
  guint64 digest = GUINT64_TO_LE (request->digest);
  guint32 shard = GUINT32_TO_LE (request->shard);
  guint32 roster_size = GUINT32_TO_LE (request->roster_size);

  out[0] = DC_TRAIN_CONTRIB_REQUEST_VERSION;
  memcpy (out + 4, request->run_id, 16);
  memcpy (out + 20, &step, 8);
  memcpy (out + 28, &digest, 8);
  memcpy (out + 36, &shard, 4);
  memcpy (out + 40, &roster_size, 4);
  return g_bytes_new_take (out, DC_TRAIN_CONTRIB_REQUEST_SIZE);
}

/**
 * dc_train_contrib_request_parse:
 * @data: (array length=size): a peer's contribution-request body
 *
 * Checks an auditor's request for this device's contribution to a shard:
 * exactly 44 bytes, version 1, reserved bytes zero, a step of at least 1,
 * a roster of 2 to 64 devices and a shard below it.
 *
 * Returns: %FALSE with @error set when it is not one
 */
gboolean
dc_train_contrib_request_parse (const guint8           *data,
                                gsize                   size,
                                DcTrainContribRequest  *request,
                                GError                **error)
{
  if (size != DC_TRAIN_CONTRIB_REQUEST_SIZE)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                   "a contribution request of %" G_GSIZE_FORMAT " bytes (it has %u)", size,
                   DC_TRAIN_CONTRIB_REQUEST_SIZE);
      return FALSE;
    }
  if (data[0] != DC_TRAIN_CONTRIB_REQUEST_VERSION)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
                   "a contribution request of version %u (this build reads version %u)",
                   data[0], DC_TRAIN_CONTRIB_REQUEST_VERSION);
      return FALSE;
    }
  if (data[1] != 0 || data[2] != 0 || data[3] != 0)
    {
      g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                           "a contribution request with reserved bytes set");
      return FALSE;
    }
  memcpy (request->run_id, data + 4, 16);
  request->step = get_u64 (data + 20);
  request->digest = get_u64 (data + 28);
  request->shard = get_u32 (data + 36);
  request->roster_size = get_u32 (data + 40);
  if (request->step == 0)
    {
      g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                           "a contribution request for step 0 (steps start at 1)");
      return FALSE;
    }
  if (request->roster_size < 2 || request->roster_size > DC_TRAIN_GRADIENT_ROSTER_MAX
      || request->shard >= request->roster_size)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                   "a contribution request for shard %u of a roster of %u devices (2 to %u)",
                   request->shard, request->roster_size, DC_TRAIN_GRADIENT_ROSTER_MAX);
      return FALSE;
    }
  return TRUE;
}

/* The most parameters any run a group may agree on has: the Advanced
 * range's largest model (the GPT-2-small shape). */
static gsize
advanced_max_params (void)
{
  DcGptConfig config;

  dc_gpt_config_init_derived (&config, DC_GPT_ADVANCED_WIDTH_MAX, DC_GPT_ADVANCED_SEQ_MAX);
  config.n_layer = DC_GPT_LAYERS_MAX;
  return dc_gpt_config_n_params (&config);
}

/**
 * dc_train_wire_gradient_cap:
 * @n_params: parameters of the run's model, as built from the accepted
 *   config (never a number a peer sent on its own)
 *
 * The largest GRADIENTS or REPAIR object a device accepts in that run: a
 * shard object of the whole gradient with a roster of 64's hashes, but
 * never less than the seeds' cap (DC_MESH_GRADIENT_MAX_TOTAL, so that a run
 * of the seeds' sizes accepts what it always did) nor more than the
 * Advanced range's largest model needs (bounded again by the mesh's
 * ceiling). A parameter count beyond that range gives that bound.
 *
 * Returns: the cap in bytes, for dc_mesh_chunk_decode_capped () and the
 *   assemblers
 */
guint64
dc_train_wire_gradient_cap (gsize n_params)
{
  guint64 fixed = DC_TRAIN_SHARD_HEADER_SIZE
                  + (guint64) DC_TRAIN_GRADIENT_ROSTER_MAX * DC_TRAIN_SHARD_HASH_SIZE;
  guint64 need = fixed + (guint64) MIN (n_params, advanced_max_params ()) * sizeof (float);

  return MIN (MAX (need, (guint64) DC_MESH_GRADIENT_MAX_TOTAL),
              (guint64) DC_MESH_GRADIENT_CEILING_TOTAL);
}

/**
 * dc_train_wire_weights_cap:
 * @n_params: as for dc_train_wire_gradient_cap ()
 *
 * The largest WEIGHTS object (a joiner's state: header, weights and both
 * Adam moments) a device accepts in that run, at least the seeds' cap
 * (DC_MESH_WEIGHTS_MAX_TOTAL), at most the Advanced range's largest
 * model's state (bounded again by the mesh's ceiling).
 */
guint64
dc_train_wire_weights_cap (gsize n_params)
{
  guint64 need = DC_TRAIN_WEIGHTS_HEADER_SIZE
                 + 3 * (guint64) MIN (n_params, advanced_max_params ()) * sizeof (float);

  return MIN (MAX (need, (guint64) DC_MESH_WEIGHTS_MAX_TOTAL),
              (guint64) DC_MESH_WEIGHTS_CEILING_TOTAL);
}

/**
 * dc_train_wire_to_string:
 *
 * Returns: "f32", "bf16" or "int8", as `train --gradient-wire` names them
 */
const char *
dc_train_wire_to_string (DcTrainWire wire)
{
  return wire == DC_TRAIN_WIRE_BF16 ? "bf16" : wire == DC_TRAIN_WIRE_INT8 ? "int8" : "f32";
}

/**
 * dc_train_wire_from_string:
 *
 * Returns: %FALSE when @text is not "f32", "bf16" or "int8"
 */
gboolean
dc_train_wire_from_string (const char  *text,
                           DcTrainWire *wire)
{
  if (g_strcmp0 (text, "f32") == 0)
    *wire = DC_TRAIN_WIRE_F32;
  else if (g_strcmp0 (text, "bf16") == 0)
    *wire = DC_TRAIN_WIRE_BF16;
  else if (g_strcmp0 (text, "int8") == 0)
    *wire = DC_TRAIN_WIRE_INT8;
  else
    return FALSE;
  return TRUE;
}

/* The exponent of a binary32 with all bits set: NaN or an infinity (a
 * bfloat16's is the same bits, its top half). */
#define F32_EXP_MASK 0x7f800000u

static inline guint32
bf16_round_bits (guint32 bits)
{
  /* Round to nearest, ties to even, on the 16 bits dropped; a carry into
   * the exponent is right (it rounds up to the next binade, or to an
   * infinity past bfloat16's largest finite value). */
  return (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
}

#ifdef WIRE_HAVE_AVX2
/* bf16_round_bits () on eight lanes. */
WIRE_AVX2 static inline __m256i
bf16_round_bits_avx2 (__m256i bits)
{
  __m256i odd = _mm256_and_si256 (_mm256_srli_epi32 (bits, 16), _mm256_set1_epi32 (1));

  return _mm256_and_si256 (_mm256_add_epi32 (_mm256_add_epi32 (bits, _mm256_set1_epi32 (0x7fff)),
                                             odd),
                           _mm256_set1_epi32 ((int) 0xffff0000u));
}

/* dc_train_bf16_round () of the first n − n % 8 values; the bad bits in @bad. */
WIRE_AVX2 static gsize
bf16_round_avx2 (float   *values,
                 gsize    n,
                 guint32 *bad)
{
  const __m256i exp_mask = _mm256_set1_epi32 ((int) F32_EXP_MASK);
  __m256i any = _mm256_setzero_si256 ();
  gsize i = 0;

  for (; i + 8 <= n; i += 8)
    {
      __m256i bits = _mm256_loadu_si256 ((const __m256i *) (values + i));
      __m256i special = _mm256_cmpeq_epi32 (_mm256_and_si256 (bits, exp_mask), exp_mask);
      __m256i rounded = _mm256_blendv_epi8 (bf16_round_bits_avx2 (bits), bits, special);

      any = _mm256_or_si256 (any, _mm256_cmpeq_epi32 (_mm256_and_si256 (rounded, exp_mask),
                                                      exp_mask));
      _mm256_storeu_si256 ((__m256i *) (values + i), rounded);
    }
  *bad |= !_mm256_testz_si256 (any, any);
  return i;
}

/* dc_train_bf16_pack () of the first n − n % 16 values. */
WIRE_AVX2 static gsize
bf16_pack_avx2 (const float *values,
                gsize        n,
                guint8      *out)
{
  gsize i = 0;

  for (; i + 16 <= n; i += 16)
    {
      __m256i a = _mm256_srli_epi32 (bf16_round_bits_avx2 (
                    _mm256_loadu_si256 ((const __m256i *) (values + i))), 16);
      __m256i b = _mm256_srli_epi32 (bf16_round_bits_avx2 (
                    _mm256_loadu_si256 ((const __m256i *) (values + i + 8))), 16);
      /* Each 128-bit half packs a's four then b's four: back in order. */
      __m256i halves = _mm256_permute4x64_epi64 (_mm256_packus_epi32 (a, b), 0xd8);

      _mm256_storeu_si256 ((__m256i *) (out + 2 * i), halves);
    }
  return i;
}

/* dc_train_bf16_unpack () of the first n − n % 16 values; FALSE when one
 * of them is NaN or an infinity (all are widened). */
WIRE_AVX2 static gsize
bf16_unpack_avx2 (const guint8 *data,
                  gsize         n,
                  float        *out,
                  gboolean     *bad)
{
  const __m256i exp_mask = _mm256_set1_epi16 (0x7f80);
  __m256i any = _mm256_setzero_si256 ();
  gsize i = 0;

  for (; i + 16 <= n; i += 16)
    {
      __m256i h = _mm256_loadu_si256 ((const __m256i *) (data + 2 * i));

      any = _mm256_or_si256 (any, _mm256_cmpeq_epi16 (_mm256_and_si256 (h, exp_mask), exp_mask));
      _mm256_storeu_si256 ((__m256i *) (out + i),
                           _mm256_slli_epi32 (_mm256_cvtepu16_epi32 (_mm256_castsi256_si128 (h)),
                                              16));
      _mm256_storeu_si256 ((__m256i *) (out + i + 8),
                           _mm256_slli_epi32 (_mm256_cvtepu16_epi32 (
                                                _mm256_extracti128_si256 (h, 1)), 16));
    }
  *bad |= !_mm256_testz_si256 (any, any);
  return i;
}
#endif

/**
 * dc_train_bf16_round:
 * @values: (array length=n): rounded in place
 *
 * Rounds each value to the nearest bfloat16 (ties to even), kept as
 * binary32 with its low 16 bits zero: what a bf16 run sends and uses, so
 * that a device's own contribution and summed shard are the values the
 * others receive. The same on every host (integer operations only).
 *
 * Returns: %FALSE when a value is (or rounds to) NaN or an infinity; the
 *   values are rounded anyway, the non-finite ones left as they were
 */
gboolean
dc_train_bf16_round (float *values,
                     gsize  n)
{
  guint32 bad = 0;
  gsize i = 0;

#ifdef WIRE_HAVE_AVX2
  if (use_simd ())
    i = bf16_round_avx2 (values, n, &bad);
#endif
  for (; i < n; i++)
    {
      guint32 bits, rounded;

      memcpy (&bits, values + i, 4);
      rounded = bf16_round_bits (bits);
      /* NaN and infinities stay (their payload is not rounded into another). */
      if ((bits & F32_EXP_MASK) == F32_EXP_MASK)
        rounded = bits;
      bad |= (rounded & F32_EXP_MASK) == F32_EXP_MASK;
      memcpy (values + i, &rounded, 4);
    }
  return bad == 0;
}

/* The bytes after a shard object's values: a summed shard's contribution
 * hashes (since body version 5, 2026-12-03: after the values, so that a
 * reducer can send its sum chunk by chunk before it has hashed every
 * contribution whole; before, they came before the values). */
static gsize
trailer_size (const guint8 *data)
{
  return data[4] == DC_TRAIN_SHARD_SUMMED ? (gsize) get_u32 (data + 8) * DC_TRAIN_SHARD_HASH_SIZE
                                          : 0;
}

/**
 * dc_train_shard_listed_hashes:
 * @data: (array length=size): a whole shard object whose header was
 *   checked (dc_train_shard_header_parse ()) or that this device wrote,
 *   in either element type
 *
 * Where a summed shard lists the SHA-256 of each contribution it summed
 * (n × 32 bytes, rank order): the object's last bytes, after the values.
 *
 * Returns: (nullable): the first hash, or %NULL for a contribution
 */
const guint8 *
dc_train_shard_listed_hashes (const guint8 *data,
                              gsize         size)
{
  gsize trailer = trailer_size (data);

  return trailer == 0 ? NULL : data + size - trailer;
}

/**
 * dc_train_bf16_pack:
 * @values: (array length=n): float32 values
 * @out: (out caller-allocates): 2 × @n bytes
 *
 * Each value's bfloat16 (rounded to nearest even: the top 16 bits of a
 * value dc_train_bf16_round () already rounded), little-endian.
 */
void
dc_train_bf16_pack (const float *values,
                    gsize        n,
                    guint8      *out)
{
  gsize i = 0;

#ifdef WIRE_HAVE_AVX2
  if (use_simd ())
    i = bf16_pack_avx2 (values, n, out);
#endif
  for (; i < n; i++)
    {
      guint32 bits;
      guint16 half;

      memcpy (&bits, values + i, 4);
      bits = bf16_round_bits (GUINT32_FROM_LE (bits));
      half = GUINT16_TO_LE ((guint16) (bits >> 16));
      memcpy (out + 2 * i, &half, 2);
    }
}

/**
 * dc_train_bf16_unpack:
 * @data: 2 × @n bytes of little-endian bfloat16
 * @out: (out caller-allocates) (array length=n): the values widened (exact)
 *
 * Returns: %FALSE when a value is NaN or an infinity (all are widened)
 */
gboolean
dc_train_bf16_unpack (const guint8 *data,
                      gsize         n,
                      float        *out)
{
  gboolean bad = FALSE;
  gsize i = 0;

#ifdef WIRE_HAVE_AVX2
  if (use_simd ())
    i = bf16_unpack_avx2 (data, n, out, &bad);
#endif
  for (; i < n; i++)
    {
      guint16 half;
      guint32 bits;

      memcpy (&half, data + 2 * i, 2);
      half = GUINT16_FROM_LE (half);
      bad |= (half & 0x7f80u) == 0x7f80u;
      bits = GUINT32_TO_LE ((guint32) half << 16);
      memcpy (out + i, &bits, 4);
    }
  return !bad;
}

/* A mesh chunk holds whole blocks, and the first block begins where the
 * header and the 8 zero bytes end (dc-train-wire.h). */
G_STATIC_ASSERT (DC_MESH_CHUNK_DATA_MAX % DC_TRAIN_INT8_BLOCK_SIZE == 0);
G_STATIC_ASSERT (DC_TRAIN_SHARD_HEADER_SIZE + DC_TRAIN_INT8_PAD == DC_TRAIN_INT8_BLOCK_SIZE);

/* 2^e as a float, for −126 ≤ e ≤ 127 (a normal number: exact). */
static inline float
pow2f (int e)
{
  guint32 bits = (guint32) (e + 127) << 23;
  float f;

  memcpy (&f, &bits, 4);
  return f;
}

/* The int8 wire's block exponent: the least e ≥ DC_TRAIN_INT8_EXP_MIN with
 * @absmax ≤ 127 × 2^e, so the largest value's q is 64…127 and rounding
 * twice gives the same values. From the bits (no libm call: this runs
 * for every 39 values of every gradient): a normal absmax is 1.f × 2^(E−127)
 * = m × 2^k with m = 1.f / 2, k = E − 126; 127 × 2^(k−7) = (127/128) × 2^k,
 * so e = k − 7 when m ≤ 127/128 (f ≤ 0.984375: the fraction's bits at most
 * 0x7e0000), else k − 6. A subnormal or zero absmax takes the least. */
static int
int8_exponent (float absmax)
{
  guint32 bits, biased;
  int e;

  memcpy (&bits, &absmax, 4);
  biased = bits >> 23;
  if (biased == 0)
    return DC_TRAIN_INT8_EXP_MIN;
  e = (int) biased - 126 - ((bits & 0x7fffffu) <= 0x7e0000u ? 7 : 6);
  return MAX (e, DC_TRAIN_INT8_EXP_MIN);
}

/* Round to nearest, ties to even, for |y| ≤ 2^22: adding and taking back
 * 1.5 × 2^23 leaves y's integer part in the float's last bits (IEEE
 * addition rounds in the default mode; the build forbids reassociating it:
 * -fno-fast-math). −0 and values under one half give +0 or −0: the caller
 * converts to int. */
static inline float
round_even (float y)
{
  const float magic = 12582912.0f;

  return (y + magic) - magic;
}

/* One block: its exponent and each value's q. FALSE when a value is not
 * finite or the block's values do not fit the exponent range (a gradient
 * beyond 127 × 2^121: diverged). */
static gboolean
int8_block_encode (const float *values,
                   gsize        n,
                   int         *exponent,
                   gint8       *q)
{
  float absmax = 0.0f, scale;
  guint32 bad = 0;
  int e;

  for (gsize i = 0; i < n; i++)
    {
      guint32 bits;

      memcpy (&bits, values + i, 4);
      bad |= (bits & F32_EXP_MASK) == F32_EXP_MASK;
      absmax = MAX (absmax, fabsf (values[i]));
    }
  if (bad)
    return FALSE;
  e = int8_exponent (absmax);
  if (e > DC_TRAIN_INT8_EXP_MAX)
    return FALSE;
  *exponent = e;
  /* x × 2^−e is exact (a power of two; a result below 2^−126 is under one
   * half and rounds to 0 whatever its last bits), at most 127 in size. */
  scale = pow2f (-e);
  for (gsize i = 0; i < n; i++)
    q[i] = (gint8) (int) round_even (values[i] * scale);
  return TRUE;
}

/* q × 2^e: exact, a normal float or zero (|q| ≥ 1 and e ≥ −126; |q| ≤ 127
 * and e ≤ 121 stay below FLT_MAX). The int conversion first: −0 is 0. */
static inline float
int8_value (int q,
            int e)
{
  return (float) q * pow2f (e);
}

#ifdef WIRE_HAVE_AVX2
G_STATIC_ASSERT (DC_TRAIN_INT8_BLOCK_VALUES == 39);

/* int8_block_encode () of one whole block (39 values): the q as five
 * vectors of eight int32 (the last lane of the fifth 0). The largest
 * magnitude is a maximum of exact values (no NaN: refused first), so its
 * order does not matter; y × 2^−e and the magic number's addition and
 * subtraction are round_even ()'s, lane by lane; y is then a whole number,
 * which any conversion keeps. @next_readable: the value after the block
 * is this caller's to read (a plain load, not a masked one, which AMD's
 * cores run slowly); its lane is left out. */
WIRE_AVX2 static gboolean
int8_block_avx2 (const float *values,
                 gboolean     next_readable,
                 int         *exponent,
                 __m256i      q[5])
{
  const __m256i last = _mm256_setr_epi32 (-1, -1, -1, -1, -1, -1, -1, 0);
  const __m256i exp_mask = _mm256_set1_epi32 ((int) F32_EXP_MASK);
  const __m256 abs_mask = _mm256_castsi256_ps (_mm256_set1_epi32 (0x7fffffff));
  const __m256 magic = _mm256_set1_ps (12582912.0f);
  __m256 v[5], amax = _mm256_setzero_ps (), scale, v4;
  __m256i bad = _mm256_setzero_si256 ();
  __m128 m;
  int e;

  for (int k = 0; k < 4; k++)
    v[k] = _mm256_loadu_ps (values + 8 * k);
  v4 = next_readable ? _mm256_loadu_ps (values + 32) : _mm256_maskload_ps (values + 32, last);
  v[4] = _mm256_blend_ps (v4, _mm256_setzero_ps (), 0x80);
  for (int k = 0; k < 5; k++)
    {
      __m256i bits = _mm256_castps_si256 (v[k]);

      bad = _mm256_or_si256 (bad, _mm256_cmpeq_epi32 (_mm256_and_si256 (bits, exp_mask),
                                                      exp_mask));
      amax = _mm256_max_ps (amax, _mm256_and_ps (v[k], abs_mask));
    }
  if (!_mm256_testz_si256 (bad, bad))
    return FALSE;
  m = _mm_max_ps (_mm256_castps256_ps128 (amax), _mm256_extractf128_ps (amax, 1));
  m = _mm_max_ps (m, _mm_movehl_ps (m, m));
  m = _mm_max_ss (m, _mm_shuffle_ps (m, m, 1));
  e = int8_exponent (_mm_cvtss_f32 (m));
  if (e > DC_TRAIN_INT8_EXP_MAX)
    return FALSE;
  *exponent = e;
  scale = _mm256_set1_ps (pow2f (-e));
  for (int k = 0; k < 5; k++)
    {
      __m256 y = _mm256_mul_ps (v[k], scale);

      y = _mm256_sub_ps (_mm256_add_ps (y, magic), magic);
      q[k] = _mm256_cvttps_epi32 (y);
    }
  return TRUE;
}

/* A block's last seven values, lanes 0–6 of @tail, as 4 + 2 + 1: not the
 * next block's first value, which a load of it would then have to take
 * from a store that only partly covers it, nor past the end. */
WIRE_AVX2 static inline void
store_block_tail (float  *out,
                  __m256  tail)
{
  __m128 hi = _mm256_extractf128_ps (tail, 1);

  _mm_storeu_ps (out, _mm256_castps256_ps128 (tail));
  _mm_storel_pi ((__m64 *) (out + 4), hi);
  _mm_store_ss (out + 6, _mm_movehl_ps (hi, hi));
}

/* The block rounded in place: q × 2^e (int8_value ()), its 39 values
 * only. */
WIRE_AVX2 static gboolean
int8_round_block_avx2 (float    *values,
                       gboolean  next_readable)
{
  __m256i q[5];
  __m256 step;
  int e;

  if (!int8_block_avx2 (values, next_readable, &e, q))
    return FALSE;
  step = _mm256_set1_ps (pow2f (e));
  for (int k = 0; k < 4; k++)
    _mm256_storeu_ps (values + 8 * k, _mm256_mul_ps (_mm256_cvtepi32_ps (q[k]), step));
  store_block_tail (values + 32, _mm256_mul_ps (_mm256_cvtepi32_ps (q[4]), step));
  return TRUE;
}

/* The block packed: its exponent byte, then its 39 q (dc_train_wire_pack ()). */
WIRE_AVX2 static void
int8_pack_block_avx2 (const float *values,
                      gboolean     next_readable,
                      guint8      *out)
{
  __m256i q[5], words, bytes;
  gint32 tail[8];
  int e = DC_TRAIN_INT8_EXP_MIN;

  if (!int8_block_avx2 (values, next_readable, &e, q))
    {
      memset (out, 0, DC_TRAIN_INT8_BLOCK_SIZE);
      out[0] = (guint8) (gint8) e;
      return;
    }
  out[0] = (guint8) (gint8) e;
  /* −127…127: the saturating packs keep every value. They work within
   * each 128-bit half, so the bytes come out as four-byte groups of q0 q1
   * q2 q3 (low halves), then high halves: put back in order. */
  words = _mm256_packs_epi16 (_mm256_packs_epi32 (q[0], q[1]), _mm256_packs_epi32 (q[2], q[3]));
  bytes = _mm256_permutevar8x32_epi32 (words, _mm256_setr_epi32 (0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256 ((__m256i *) (out + 1), bytes);
  _mm256_storeu_si256 ((__m256i *) tail, q[4]);
  for (int i = 0; i < 7; i++)
    out[33 + i] = (guint8) (gint8) tail[i];
}

/* One whole block's 39 q (after its exponent byte, checked by the
 * caller) unpacked: FALSE for a q of −128, else each q × 2^e
 * (int8_value (): int to float and one product, both exact). */
WIRE_AVX2 static gboolean
int8_unpack_block_avx2 (const guint8 *q,
                        int           e,
                        float        *out)
{
  __m256i head = _mm256_loadu_si256 ((const __m256i *) q);
  guint64 rest = 0;
  __m128i tail;
  __m256 step = _mm256_set1_ps (pow2f (e));

  memcpy (&rest, q + 32, 7);
  tail = _mm_cvtsi64_si128 ((long long) rest);
  if (_mm256_movemask_epi8 (_mm256_cmpeq_epi8 (head, _mm256_set1_epi8 ((char) 0x80))) != 0
      || _mm_movemask_epi8 (_mm_cmpeq_epi8 (tail, _mm_set1_epi8 ((char) 0x80))) != 0)
    return FALSE;
  for (int k = 0; k < 4; k++)
    {
      __m128i eight = _mm_loadl_epi64 ((const __m128i *) (q + 8 * k));

      _mm256_storeu_ps (out + 8 * k,
                        _mm256_mul_ps (_mm256_cvtepi32_ps (_mm256_cvtepi8_epi32 (eight)), step));
    }
  store_block_tail (out + 32, _mm256_mul_ps (_mm256_cvtepi32_ps (_mm256_cvtepi8_epi32 (tail)),
                                            step));
  return TRUE;
}
#endif

/**
 * dc_train_wire_round:
 * @values: (array length=n): values whose first begins a shard (or a chunk
 *   of one), rounded in place
 *
 * Rounds @values to @wire, as what a device sends and uses: nothing for
 * f32, dc_train_bf16_round () for bf16, and for int8 each block of 39
 * values from @values[0] (the last may be shorter) to its q × 2^e. The
 * same on every host (exact operations only), and rounding twice gives
 * the same values.
 *
 * Returns: %FALSE when a value is not finite (or rounds beyond the wire's
 *   range): training diverged
 */
gboolean
dc_train_wire_round (DcTrainWire  wire,
                     float       *values,
                     gsize        n)
{
  gboolean ok = TRUE;

  if (wire == DC_TRAIN_WIRE_F32)
    return TRUE;
  if (wire == DC_TRAIN_WIRE_BF16)
    return dc_train_bf16_round (values, n);
  for (gsize b = 0; b < n; b += DC_TRAIN_INT8_BLOCK_VALUES)
    {
      gsize m = MIN (n - b, DC_TRAIN_INT8_BLOCK_VALUES);
      gint8 q[DC_TRAIN_INT8_BLOCK_VALUES];
      int e;

#ifdef WIRE_HAVE_AVX2
      if (m == DC_TRAIN_INT8_BLOCK_VALUES && use_simd ())
        {
          ok &= int8_round_block_avx2 (values + b, b + DC_TRAIN_INT8_BLOCK_VALUES < n);
          continue;
        }
#endif
      if (!int8_block_encode (values + b, m, &e, q))
        {
          ok = FALSE;
          continue;
        }
      for (gsize i = 0; i < m; i++)
        values[b + i] = int8_value (q[i], e);
    }
  return ok;
}

/* A chunk of the pool's rounding and packing: whole int8 blocks (a
 * block's scale is its own, so a chunk that begins on one gives the same
 * bits as one pass over all), about 80 KB of float32. */
#define POOL_CHUNK_VALUES (512 * DC_TRAIN_INT8_BLOCK_VALUES)

/* One pooled pass: rounding @round in place, or packing @pack into @out. */
typedef struct
{
  DcTrainWire  wire;
  gsize        n;
  float       *round;
  const float *pack;
  guint8      *out;
  gint         failed;  /* atomic: a rounded value that cannot be sent */
} PoolJob;

static void
pool_chunk (gsize    begin,
            gsize    end,
            guint    worker,
            gpointer data)
{
  PoolJob *job = data;
  gsize first = begin * POOL_CHUNK_VALUES, last = MIN (end * POOL_CHUNK_VALUES, job->n);

  if (job->pack != NULL)
    dc_train_wire_pack (job->wire, job->pack + first, last - first, first,
                        job->out + dc_train_wire_value_offset (job->wire, first));
  else if (!dc_train_wire_round (job->wire, job->round + first, last - first))
    g_atomic_int_set (&job->failed, 1);
}

static void
run_pooled (PoolJob *job)
{
  dc_parallel_for (dc_parallel_get_default_threads (),
                   (job->n + POOL_CHUNK_VALUES - 1) / POOL_CHUNK_VALUES, 1, pool_chunk, job);
}

/**
 * dc_train_wire_round_pooled:
 *
 * dc_train_wire_round () on the engine's pool (its default threads), for
 * a worker's whole contribution: the same bits, since each chunk begins on
 * a block. A device's own gradient is rounded on the step's critical path
 * (842 k values at width 128: ≈ 1.7 ms on one 2-vCPU VM thread).
 */
gboolean
dc_train_wire_round_pooled (DcTrainWire  wire,
                            float       *values,
                            gsize        n)
{
  PoolJob job = { wire, n, values, NULL, NULL, 0 };

  if (wire == DC_TRAIN_WIRE_F32 || n <= POOL_CHUNK_VALUES)
    return dc_train_wire_round (wire, values, n);
  run_pooled (&job);
  return g_atomic_int_get (&job.failed) == 0;
}

/* dc_train_wire_pack () of a whole shard's values (@first 0) on the pool. */
static void
pack_pooled (DcTrainWire  wire,
             const float *values,
             gsize        n,
             guint8      *out)
{
  PoolJob job = { wire, n, NULL, values, out, 0 };

  if (n <= POOL_CHUNK_VALUES)
    {
      dc_train_wire_pack (wire, values, n, 0, out);
      return;
    }
  run_pooled (&job);
}

/**
 * dc_train_wire_round_shards:
 * @grads: (array): a whole gradient (@layout's n_params values)
 *
 * dc_train_wire_round () of each shard of a roster of @n_ranks in turn:
 * what a device's contributions are, whichever reducer they go to.
 *
 * Returns: %FALSE when a value is not finite
 */
gboolean
dc_train_wire_round_shards (DcTrainWire               wire,
                            const DcTrainShardLayout *layout,
                            guint                     n_ranks,
                            float                    *grads)
{
  gboolean ok = TRUE;

  /* f32 and bf16 round value by value: where shards begin does not matter. */
  if (wire != DC_TRAIN_WIRE_INT8)
    return dc_train_wire_round_pooled (wire, grads, layout->n_params);
  for (guint r = 0; r < n_ranks; r++)
    {
      gsize start, length;

      dc_train_shard_range (layout, n_ranks, r, &start, &length);
      ok &= dc_train_wire_round_pooled (wire, grads + start, length);
    }
  return ok;
}

/**
 * dc_train_wire_corrupt:
 * @values: (array length=n): rounded values beginning a shard, n ≥ 1
 *
 * Test faults only: changes @values[0]'s block so that it still rounds to
 * itself on @wire (the corrupt device sends what it uses): the lowest bit
 * of @values[0] in f32 and bf16; in int8 the sign of the block's largest
 * value (or its first set to the smallest step when all are 0).
 */
void
dc_train_wire_corrupt (DcTrainWire  wire,
                       float       *values,
                       gsize        n)
{
  guint32 bits;
  gsize m, top = 0;

  if (n == 0)
    return;
  if (wire != DC_TRAIN_WIRE_INT8)
    {
      memcpy (&bits, &values[0], 4);
      bits ^= wire == DC_TRAIN_WIRE_BF16 ? 1u << 16 : 1u;
      memcpy (&values[0], &bits, 4);
      return;
    }
  m = MIN (n, DC_TRAIN_INT8_BLOCK_VALUES);
  for (gsize i = 1; i < m; i++)
    if (fabsf (values[i]) > fabsf (values[top]))
      top = i;
  if (values[top] == 0.0f)
    values[top] = int8_value (1, DC_TRAIN_INT8_EXP_MIN);
  else
    values[top] = -values[top];
}

/**
 * dc_train_wire_values_size:
 *
 * Returns: the bytes @n values take on @wire, from a shard's first
 */
gsize
dc_train_wire_values_size (DcTrainWire wire,
                           gsize       n)
{
  gsize rest;

  if (wire == DC_TRAIN_WIRE_F32)
    return n * sizeof (float);
  if (wire == DC_TRAIN_WIRE_BF16)
    return n * 2;
  rest = n % DC_TRAIN_INT8_BLOCK_VALUES;
  return DC_TRAIN_INT8_PAD + n / DC_TRAIN_INT8_BLOCK_VALUES * DC_TRAIN_INT8_BLOCK_SIZE
         + (rest > 0 ? 1 + rest : 0);
}

/**
 * dc_train_wire_value_offset:
 * @index: a value's index in its shard; for int8 a block's first
 *
 * Returns: where that value's bytes begin, from the values' first byte
 *   (the one after the shard object's header); for int8 the block's
 *   exponent byte, and 0 for the first (its bytes begin with the 8 zero
 *   bytes)
 */
gsize
dc_train_wire_value_offset (DcTrainWire wire,
                            gsize       index)
{
  if (wire == DC_TRAIN_WIRE_INT8)
    return index == 0 ? 0
                      : DC_TRAIN_INT8_PAD + index / DC_TRAIN_INT8_BLOCK_VALUES
                                            * DC_TRAIN_INT8_BLOCK_SIZE;
  return dc_train_wire_values_size (wire, index);
}

/**
 * dc_train_wire_values_before:
 * @n: the values of the shard
 * @offset: a byte offset from the values' first byte
 *
 * Returns: how many of the @n values lie wholly before @offset (at a mesh
 *   chunk's boundary, every value of a block is on the same side)
 */
gsize
dc_train_wire_values_before (DcTrainWire wire,
                             gsize       n,
                             gsize       offset)
{
  gsize v, rest;

  if (wire == DC_TRAIN_WIRE_F32)
    return MIN (n, offset / sizeof (float));
  if (wire == DC_TRAIN_WIRE_BF16)
    return MIN (n, offset / 2);
  if (offset <= DC_TRAIN_INT8_PAD)
    return 0;
  offset -= DC_TRAIN_INT8_PAD;
  rest = offset % DC_TRAIN_INT8_BLOCK_SIZE;
  v = offset / DC_TRAIN_INT8_BLOCK_SIZE * DC_TRAIN_INT8_BLOCK_VALUES + (rest > 1 ? rest - 1 : 0);
  return MIN (n, v);
}

/**
 * dc_train_wire_pack:
 * @values: (array length=n): values @first … @first + @n − 1 of a shard
 * @first: for int8 a block's first value (0, or a multiple of 39)
 * @out: (out caller-allocates): their bytes, from
 *   dc_train_wire_value_offset (@first) on: dc_train_wire_value_offset
 *   (@first + @n) minus it, or to the end of the values for the last
 *
 * Encodes values already rounded to @wire (dc_train_wire_round ()): their
 * bytes on @wire, little-endian; exact. Non-finite values never reach it
 * (the rounding refused them); an int8 block that could not be encoded is
 * written as zeros.
 */
void
dc_train_wire_pack (DcTrainWire  wire,
                    const float *values,
                    gsize        n,
                    gsize        first,
                    guint8      *out)
{
  if (wire == DC_TRAIN_WIRE_F32)
    {
      memcpy (out, values, n * sizeof (float));
      return;
    }
  if (wire == DC_TRAIN_WIRE_BF16)
    {
      dc_train_bf16_pack (values, n, out);
      return;
    }
  g_return_if_fail (first % DC_TRAIN_INT8_BLOCK_VALUES == 0);
  if (first == 0)
    {
      memset (out, 0, DC_TRAIN_INT8_PAD);
      out += DC_TRAIN_INT8_PAD;
    }
  for (gsize b = 0; b < n; b += DC_TRAIN_INT8_BLOCK_VALUES)
    {
      gsize m = MIN (n - b, DC_TRAIN_INT8_BLOCK_VALUES);
      int e = DC_TRAIN_INT8_EXP_MIN;

#ifdef WIRE_HAVE_AVX2
      if (m == DC_TRAIN_INT8_BLOCK_VALUES && use_simd ())
        {
          int8_pack_block_avx2 (values + b, b + DC_TRAIN_INT8_BLOCK_VALUES < n, out);
          out += DC_TRAIN_INT8_BLOCK_SIZE;
          continue;
        }
#endif
      if (!int8_block_encode (values + b, m, &e, (gint8 *) out + 1))
        memset (out, 0, 1 + m);
      out[0] = (guint8) (gint8) e;
      out += 1 + m;
    }
}

/**
 * dc_train_wire_unpack:
 * @data: (array length=size): bytes of values from a peer (untrusted)
 * @first: the first value's index in its shard (for int8 a block's
 *   first: 0 means @data begins with the 8 zero bytes)
 * @out: (out caller-allocates) (array length=n): the values in float32
 *
 * Decodes exactly @n values from exactly @size bytes (exact widening).
 *
 * Returns: %FALSE when @size is not theirs, a bf16 or int8 value is NaN
 *   or an infinity, or an int8 block is malformed (padding set, exponent outside −126…121,
 *   a q of −128)
 */
gboolean
dc_train_wire_unpack (DcTrainWire   wire,
                      const guint8 *data,
                      gsize         size,
                      gsize         first,
                      float        *out,
                      gsize         n)
{
  if (wire == DC_TRAIN_WIRE_F32)
    {
      /* As dc_train_shard_decode () keeps an f32 object: as it came. */
      if (size != n * sizeof (float))
        return FALSE;
      memcpy (out, data, size);
      return TRUE;
    }
  if (wire == DC_TRAIN_WIRE_BF16)
    return size == n * 2 && dc_train_bf16_unpack (data, n, out);
  if (first % DC_TRAIN_INT8_BLOCK_VALUES != 0)
    return FALSE;
  if (first == 0)
    {
      if (size < DC_TRAIN_INT8_PAD)
        return FALSE;
      for (guint i = 0; i < DC_TRAIN_INT8_PAD; i++)
        if (data[i] != 0)
          return FALSE;
      data += DC_TRAIN_INT8_PAD;
      size -= DC_TRAIN_INT8_PAD;
    }
  for (gsize b = 0; b < n; b += DC_TRAIN_INT8_BLOCK_VALUES)
    {
      gsize m = MIN (n - b, DC_TRAIN_INT8_BLOCK_VALUES);
      int e;

      if (size < 1 + m)
        return FALSE;
      e = (gint8) data[0];
      if (e < DC_TRAIN_INT8_EXP_MIN || e > DC_TRAIN_INT8_EXP_MAX)
        return FALSE;
#ifdef WIRE_HAVE_AVX2
      if (m == DC_TRAIN_INT8_BLOCK_VALUES && use_simd ())
        {
          if (!int8_unpack_block_avx2 (data + 1, e, out + b))
            return FALSE;
          data += DC_TRAIN_INT8_BLOCK_SIZE;
          size -= DC_TRAIN_INT8_BLOCK_SIZE;
          continue;
        }
#endif
      for (gsize i = 0; i < m; i++)
        {
          int q = (gint8) data[1 + i];

          if (q == -128)
            return FALSE;
          out[b + i] = int8_value (q, e);
        }
      data += 1 + m;
      size -= 1 + m;
    }
  return size == 0;
}

/**
 * dc_train_shard_encode:
 * @object: a float32 shard object this device wrote (header and sizes right)
 *
 * The object as @wire sends it: @object itself for f32; otherwise a copy
 * with the wire's element type and its bytes for each value
 * (dc_train_wire_pack (): the values are already rounded to it, so this
 * loses nothing), packed on the engine's pool in chunks of whole blocks.
 *
 * Returns: (transfer full): the object to send
 */
GBytes *
dc_train_shard_encode (GBytes      *object,
                       DcTrainWire  wire)
{
  gsize size, skip, n, trailer, bytes;
  const guint8 *data = g_bytes_get_data (object, &size);
  guint8 *out;

  if (wire == DC_TRAIN_WIRE_F32)
    return g_bytes_ref (object);
  skip = DC_TRAIN_SHARD_HEADER_SIZE;
  trailer = trailer_size (data);
  n = (size - skip - trailer) / sizeof (float);
  bytes = dc_train_wire_values_size (wire, n);
  out = g_malloc (skip + bytes + trailer);
  memcpy (out, data, skip);
  out[5] = wire;
  pack_pooled (wire, (const float *) (data + skip), n, out + skip);
  memcpy (out + skip + bytes, data + skip + 4 * n, trailer);
  return g_bytes_new_take (out, skip + bytes + trailer);
}

/**
 * dc_train_shard_decode:
 * @object: a shard object received, its header checked by
 *   dc_train_shard_header_parse () into @header
 *
 * The object in float32, as it is kept: @object itself when it is f32;
 * otherwise a copy with each value widened (exact) and element type 0. A
 * value that is NaN or an infinity is refused, as a diverged gradient is,
 * and so is a malformed int8 block.
 *
 * Returns: (transfer full): the float32 object, or %NULL with @error set
 */
GBytes *
dc_train_shard_decode (GBytes                   *object,
                       const DcTrainShardHeader *header,
                       GError                  **error)
{
  gsize size, skip, trailer, bytes;
  const guint8 *data = g_bytes_get_data (object, &size);
  g_autofree guint8 *out = NULL;

  if (header->wire == DC_TRAIN_WIRE_F32)
    return g_bytes_ref (object);
  skip = DC_TRAIN_SHARD_HEADER_SIZE;
  trailer = trailer_size (data);
  /* header->n_values was checked against the size: skip + the values'
   * bytes + trailer. */
  bytes = dc_train_wire_values_size (header->wire, header->n_values);
  out = g_malloc (skip + header->n_values * sizeof (float) + trailer);
  memcpy (out, data, skip);
  out[5] = DC_TRAIN_WIRE_F32;
  if (!dc_train_wire_unpack (header->wire, data + skip, bytes, 0, (float *) (out + skip),
                             header->n_values))
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                   "a gradient shard in %s with a value that is not finite (NaN or an "
                   "infinity) or a malformed block", dc_train_wire_to_string (header->wire));
      return NULL;
    }
  memcpy (out + skip + header->n_values * sizeof (float), data + skip + bytes, trailer);
  return g_bytes_new_take (g_steal_pointer (&out),
                           skip + header->n_values * sizeof (float) + trailer);
}
