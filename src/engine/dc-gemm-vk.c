/* dc-gemm-vk.c: the Vulkan path of the exact INT8 GEMM and its init gates.
 *
 * Kernel variants (shaders/gemm-int8*.comp), most preferred first:
 *   coop    128 × 128 tiles on cooperative matrices (needs VK_NV_cooperative_matrix
 *           with its int8 16 × 8 × 32 shape and 32-wide subgroups)
 *   sc…     gemm-int8-coopsc.comp: coop's fragments with the tile shape set by
 *           specialization constants (the tile sweep, docs/BENCHMARKS.md);
 *           the best, sc128x128-w64x32-k128-p1-s1 (385 TOPS queued at 4096³
 *           on the H200, 4.8× coop), is the second kernel kept for products
 *           of 2048³ and up (large_variants); coop keeps the smaller ones.
 *   coop2…  gemm-int8-coop2.comp: cooperative matrices with block tiles of
 *           128 × 128 to 256 × 128, padded double-buffered staging and one
 *           barrier per K step (same needs as coop, plus the shared memory
 *           and invocations each variant's tile takes: variant_offered ()).
 *           They pass the gate on the H200 but ran 39–46 TOPS at 4096³
 *           against coop's 53, so they come after it: kept for tuning
 *           (DC_GEMM_VK_KERNEL) and as fallbacks.
 *   coop-khr, coopk8…, khr16…, khr8…  coop's kernel and gemm-int8-coopk.comp
 *           (16 × 8 or 16 × 16 fragments, 128 × 128 or 128 × 256 tiles, 64 or
 *           128 bytes of K per stage), the "khr" ones rewritten for
 *           VK_KHR_cooperative_matrix when loaded (dc-spirv-coop.c). All pass
 *           the gate on the H200; none beats coop (65–81 TOPS queued at 4096³
 *           against coop's 81), so they come after it.
 *   dot     64 × 64 tiles, packed OpSDot     (needs shaderIntegerDotProduct)
 *   dot128  128 × 128 tiles, packed OpSDot   (needs shaderIntegerDotProduct)
 *   tiled   64 × 64 tiles, plain int32 math  (needs shaderInt8, 8-bit storage)
 * On the H200 (docs/BENCHMARKS.md) coop ran 4096³ at 54.6 TOPS and 8192³ at
 * 79.5, dot at 47.0 and 64.0, dot128 and tiled at 8.2 at 4096³ (the 64
 * accumulators of dot128 cost more occupancy than its larger tile saves).
 * A variant computes nothing until its gate has passed: a sweep of shapes
 * (ragged, 1 × K, K = 1, tile ± 1, values at ±127, zero rows) that must equal
 * the CPU reference bit for bit, int32 accumulators and f32 outputs. The first
 * variant that passes is used; when none passes the backend falls back to the
 * CPU path. DC_TEST_BREAK_KERNEL=name[,name…] or "all" swaps in the broken
 * twin of a variant, for the test of the gate only. DC_GEMM_VK_KERNEL=name
 * offers only that variant (tests of each variant, benchmarks); it is still
 * gated.
 *
 * Operands are repacked into zero-padded device-local buffers (M and N rounded
 * up to the variant's tile, K to its K step: 32 or 64 bytes) through a
 * host-visible staging buffer; the zero padding adds nothing to any sum, and
 * only real outputs are written.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-engine"

#include "config.h"

#include "dc-gemm-vk.h"

#include <string.h>

#include "dc-shader-params.h"
#include "dc-test-break.h"
#include "dc-vk-context.h"

typedef struct
{
  const char *name;
  const char *shader;
  guint       tile_m;
  guint       tile_n;
  guint       pad_k;          /* K is padded to a multiple of this many bytes */
  guint       invocations;    /* per workgroup */
  guint       shared_bytes;   /* shared memory per workgroup */
  gboolean    needs_dot;
  guint       needs_coop;     /* a Coop value */
  /* gemm-int8-coopsc.comp's specialization constants 0-8 (BM, BN, WM, WN,
   * BKQ, PAD, STAGES, PACKED, SWZ; 9, the invocations, follows from them);
   * all zero for the other shaders. */
  guint32     sc[9];
} Variant;

enum { SC_BM, SC_BN, SC_WM, SC_WN, SC_BKQ, SC_PAD, SC_STAGES, SC_PACKED, SC_SWZ, SC_N };

/* Which cooperative-matrix shape a variant needs, under which extension. */
typedef enum
{
  COOP_NONE,
  COOP_NV8,     /* VK_NV_cooperative_matrix, int8 16 × 8 × 32 */
  COOP_KHR8,    /* VK_KHR_cooperative_matrix, int8 16 × 8 × 32 ("+khr" shaders) */
  COOP_KHR16,   /* VK_KHR_cooperative_matrix, int8 16 × 16 × 32 */
} Coop;

/* gemm-int8-coopk.comp's shared memory: the two 64-byte K tiles and a
 * 16 × BN int32 staging tile for the epilogue. */
#define COOPK_SHARED(bm, bn, kt) (((bm) + (bn)) * 16 * (kt) + 16 * (bn) * 4)

/* coop2's shared memory: two stages of (BM + BN) rows of BKQ + 1 16-byte
 * words, and 512 bytes per subgroup for the epilogue (gemm-int8-coop2.comp). */
#define COOP2_SHARED(bm, bn, bkq, warps) (2 * ((bm) + (bn)) * ((bkq) + 1) * 16 + (warps) * 512)

/* gemm-int8-coopsc.comp's shared memory: STAGES stages of (BM + BN) rows of
 * BKQ + PAD 16-byte words (the epilogue's 512 bytes per subgroup fit in one). */
#define SC_SHARED(bm, bn, bkq, pad, st) ((st) * ((bm) + (bn)) * ((bkq) + (pad)) * 16)

/* One gemm-int8-coopsc variant: block tile bm × bn, subgroup tile wm × wn,
 * bkq 16-byte words of K a step, pad words per staged row, st stages, pk
 * (operands packed in blocks), swz (bands of tile rows). */
#define SC(name, bm, bn, wm, wn, bkq, pad, st, pk, swz) \
  SCX (name, "gemm-int8-coopsc", bm, bn, wm, wn, bkq, pad, st, pk, swz)
/* …, shared memory as 32-bit elements (gemm-int8-coopsc32). */
#define SC32(name, bm, bn, wm, wn, bkq, pad, st, pk, swz) \
  SCX (name, "gemm-int8-coopsc32", bm, bn, wm, wn, bkq, pad, st, pk, swz)
#define SCX(name, shader, bm, bn, wm, wn, bkq, pad, st, pk, swz) \
  { name, shader, bm, bn, (bkq) * 16, (bm) / (wm) * ((bn) / (wn)) * 32, \
    SC_SHARED (bm, bn, bkq, pad, st), FALSE, COOP_NV8, \
    { bm, bn, wm, wn, bkq, pad, st, pk, swz } }

/* Most preferred first, by the H200's figures at 4096³ (docs/BENCHMARKS.md;
 * 2026-12-02, the dispatches queued in one submission): coop 80.2–81.2 TOPS,
 * coop-khr 81.0, coopk8 71.7, coopk8-k128 69.2, khr16 65.2, khr16-k128 64.9,
 * khr16-128x256 64.6, khr8-128x256 60.2, coopk8-128x256 59.5; 2026-12-01
 * 23:17, each dispatch waited for: coop 53.2, coop2-w4 46.3, coop2-128x256
 * 45.2, coop2-nopad 45.2, coop2 44.4, coop2-256x128 41.8, coop2-k32 39.5. */
static const Variant variants[] = {
  /* 2 × 128 × 64 bytes of tiles and a 64 × 128 int32 half tile. */
  { "coop", "gemm-int8-coop", 128, 128, 32, 256, 2 * 128 * 64 + 64 * 128 * 4, FALSE, COOP_NV8 },
  /* Rewritten for VK_KHR_cooperative_matrix (dc-spirv-coop.c): the same
   * kernel as coop, for devices that list the int8 shape under KHR only. */
  { "coop-khr", "gemm-int8-coop+khr", 128, 128, 32, 256, 2 * 128 * 64 + 64 * 128 * 4, FALSE,
    COOP_KHR8 },
  /* gemm-int8-coopk.comp: coop's tile with a 16-row epilogue (24 KiB of
   * shared memory against 48), and with 128 bytes of K per stage. */
  { "coopk8", "gemm-int8-coopk8", 128, 128, 32, 256, COOPK_SHARED (128, 128, 4), FALSE,
    COOP_NV8 },
  { "coopk8-k128", "gemm-int8-coopk8-k128", 128, 128, 32, 256, COOPK_SHARED (128, 128, 8), FALSE,
    COOP_NV8 },
  /* 16 × 16 × 32 fragments (the largest int8 shape the H200 lists, under KHR
   * only) and 128 × 256 tiles. */
  { "khr16", "gemm-int8-coopk+khr", 128, 128, 32, 256, COOPK_SHARED (128, 128, 4), FALSE,
    COOP_KHR16 },
  { "khr16-k128", "gemm-int8-coopk-k128+khr", 128, 128, 32, 256, COOPK_SHARED (128, 128, 8),
    FALSE, COOP_KHR16 },
  { "khr16-128x256", "gemm-int8-coopk-128x256+khr", 128, 256, 32, 256, COOPK_SHARED (128, 256, 4),
    FALSE, COOP_KHR16 },
  { "khr8-128x256", "gemm-int8-coopk8-128x256+khr", 128, 256, 32, 256, COOPK_SHARED (128, 256, 4),
    FALSE, COOP_KHR8 },
  { "coopk8-128x256", "gemm-int8-coopk8-128x256", 128, 256, 32, 256, COOPK_SHARED (128, 256, 4),
    FALSE, COOP_NV8 },
  { "coop2-w4", "gemm-int8-coop2-w4", 128, 128, 64, 128, COOP2_SHARED (128, 128, 4, 4),
    FALSE, COOP_NV8 },
  { "coop2-128x256", "gemm-int8-coop2-128x256", 128, 256, 32, 256,
    COOP2_SHARED (128, 256, 2, 8), FALSE, COOP_NV8 },
  { "coop2-nopad", "gemm-int8-coop2-nopad", 128, 128, 64, 256,
    2 * (128 + 128) * 4 * 16 + 8 * 512, FALSE, COOP_NV8 },
  { "coop2", "gemm-int8-coop2", 128, 128, 64, 256, COOP2_SHARED (128, 128, 4, 8), FALSE, COOP_NV8 },
  { "coop2-256x128", "gemm-int8-coop2-256x128", 256, 128, 32, 256,
    COOP2_SHARED (256, 128, 2, 8), FALSE, COOP_NV8 },
  { "coop2-k32", "gemm-int8-coop2-k32", 128, 128, 32, 256, COOP2_SHARED (128, 128, 2, 8),
    FALSE, COOP_NV8 },
  /* The tile sweep (gemm-int8-coopsc.comp, docs/BENCHMARKS.md "Tile
   * sweep"): names say block tile, subgroup tile, K bytes a step, padding
   * words, stages, packed operands, swizzle bands, 32-bit shared elements. */
  SC ("sc128x128-w64x32-k64-p0-s1", 128, 128, 64, 32, 4, 0, 1, 0, 0),
  SC ("sc128x128-w64x32-k64-p1-s1", 128, 128, 64, 32, 4, 1, 1, 0, 0),
  SC ("sc128x128-w64x32-k64-p0-s2", 128, 128, 64, 32, 4, 0, 2, 0, 0),
  SC ("sc128x128-w64x32-k64-p1-s2", 128, 128, 64, 32, 4, 1, 2, 0, 0),
  SC ("sc128x128-w64x32-k64-p1-s1-pk", 128, 128, 64, 32, 4, 1, 1, 1, 0),
  SC ("sc128x128-w64x32-k64-p1-s2-pk", 128, 128, 64, 32, 4, 1, 2, 1, 0),
  SC ("sc128x128-w64x32-k64-p1-s1-z8", 128, 128, 64, 32, 4, 1, 1, 0, 8),
  SC ("sc128x128-w64x32-k128-p1-s1", 128, 128, 64, 32, 8, 1, 1, 0, 0),
  SC ("sc128x128-w64x32-k128-p1-s1-pk", 128, 128, 64, 32, 8, 1, 1, 1, 0),
  /* Not yet measured: the best shape with the band walk, and with 16
   * subgroups of 32 × 32 (candidates for the next sweep). */
  SC ("sc128x128-w64x32-k128-p1-s1-z8", 128, 128, 64, 32, 8, 1, 1, 0, 8),
  SC ("sc128x128-w32x32-k128-p1-s1", 128, 128, 32, 32, 8, 1, 1, 0, 0),
  SC ("sc128x128-w64x64-k32-p1-s2-pk", 128, 128, 64, 64, 2, 1, 2, 1, 0),
  SC ("sc128x128-w64x32-k32-p1-s1", 128, 128, 64, 32, 2, 1, 1, 0, 0),
  SC ("sc128x128-w64x32-k32-p1-s2-pk", 128, 128, 64, 32, 2, 1, 2, 1, 0),
  SC ("sc128x128-w32x64-k64-p1-s1", 128, 128, 32, 64, 4, 1, 1, 0, 0),
  SC ("sc128x128-w64x64-k64-p1-s1", 128, 128, 64, 64, 4, 1, 1, 0, 0),
  SC ("sc128x128-w64x64-k64-p1-s2-pk", 128, 128, 64, 64, 4, 1, 2, 1, 0),
  SC ("sc128x128-w32x32-k64-p1-s1", 128, 128, 32, 32, 4, 1, 1, 0, 0),
  SC ("sc128x256-w64x64-k64-p1-s1", 128, 256, 64, 64, 4, 1, 1, 0, 0),
  SC ("sc128x256-w64x64-k32-p1-s2-pk", 128, 256, 64, 64, 2, 1, 2, 1, 0),
  SC ("sc128x256-w64x64-k64-p1-s1-z8", 128, 256, 64, 64, 4, 1, 1, 0, 8),
  SC ("sc256x128-w64x64-k64-p1-s1", 256, 128, 64, 64, 4, 1, 1, 0, 0),
  SC ("sc256x128-w64x64-k32-p1-s2-pk", 256, 128, 64, 64, 2, 1, 2, 1, 0),
  SC ("sc64x128-w32x64-k64-p1-s1", 64, 128, 32, 64, 4, 1, 1, 0, 0),
  SC ("sc64x128-w32x64-k64-p1-s2-pk", 64, 128, 32, 64, 4, 1, 2, 1, 0),
  SC32 ("sc128x128-w64x32-k64-p0-s1-e32", 128, 128, 64, 32, 4, 0, 1, 0, 0),
  SC32 ("sc128x128-w64x32-k64-p1-s1-e32", 128, 128, 64, 32, 4, 1, 1, 0, 0),
  SC32 ("sc128x128-w64x32-k64-p1-s2-pk-e32", 128, 128, 64, 32, 4, 1, 2, 1, 0),
  SC32 ("sc128x128-w64x64-k64-p1-s1-e32", 128, 128, 64, 64, 4, 1, 1, 0, 0),
  SC32 ("sc128x256-w64x64-k64-p1-s1-e32", 128, 256, 64, 64, 4, 1, 1, 0, 0),
  { "dot", "gemm-int8-dot", 64, 64, 32, 256, 2 * 64 * 9 * 4, TRUE, COOP_NONE },
  { "dot128", "gemm-int8-dot128", 128, 128, 32, 256, 2 * 128 * 9 * 4, TRUE, COOP_NONE },
  { "tiled", "gemm-int8-tiled", 64, 64, 32, 256, 2 * 64 * 9 * 4, FALSE, COOP_NONE },
};

/* Kernels for large products, most preferred first: the tile sweep's best on
 * the H200 (docs/BENCHMARKS.md, "Tile sweep", 2026-12-02 08:06 UTC, queued
 * TOPS at 2048³ / 4096³ / 8192³: 270 / 385 / 462 against coop's 74 / 81 / 85
 * and torch._int_mm's 100 / 121 / 126), then the next best at 4096³. */
static const char * const large_variants[] = {
  "sc128x128-w64x32-k128-p1-s1",
  "sc128x128-w64x32-k64-p1-s1-pk",
};
/* M · N · K from which the large products' kernel runs: 2048³, the smallest
 * size the sweep measured (3.7× coop there); below it coop stays, unmeasured
 * against the sweep's kernels (its 32-byte K padding against their 64–128
 * suits the short products of decoding). */
#define LARGE_MIN_OPS (2048.0 * 2048.0 * 2048.0)

/**
 * dc_gemm_vk_variant_offered:
 * @features: what a device offers
 * @name: a kernel variant's name
 * @why: (out) (optional) (transfer full): why not, when not offered
 *
 * Whether the device can run the variant at all, before its init gate: the
 * instructions it needs and the shared memory and invocations its tile takes.
 * Split out so that the test can check the decision with the features of
 * devices it does not have (lavapipe has no cooperative matrices).
 *
 * Returns: %TRUE when offered; %FALSE for an unknown name too
 */
gboolean
dc_gemm_vk_variant_offered (const DcVkFeatures  *features,
                            const char          *name,
                            char               **why)
{
  const Variant *variant = NULL;

  for (gsize v = 0; v < G_N_ELEMENTS (variants); v++)
    if (g_str_equal (variants[v].name, name))
      variant = &variants[v];
  if (variant == NULL)
    {
      if (why != NULL)
        *why = g_strdup_printf ("no GEMM kernel is called %s", name);
      return FALSE;
    }
  if (variant->needs_dot && !features->integer_dot_product)
    {
      if (why != NULL)
        *why = g_strdup ("no shaderIntegerDotProduct");
      return FALSE;
    }
  if (variant->needs_coop != COOP_NONE && features->subgroup_size != 32)
    {
      if (why != NULL)
        *why = g_strdup ("no int8 cooperative matrix on 32-wide subgroups");
      return FALSE;
    }
  if ((variant->needs_coop == COOP_NV8 && !features->coop_matrix_nv_int8) ||
      (variant->needs_coop == COOP_KHR8 && !(features->coop_matrix_khr_int8 & 1)) ||
      (variant->needs_coop == COOP_KHR16 && !(features->coop_matrix_khr_int8 & 2)))
    {
      if (why != NULL)
        *why = g_strdup_printf ("no int8 cooperative matrix of 16 × %u × 32 under %s",
                                variant->needs_coop == COOP_KHR16 ? 16 : 8,
                                variant->needs_coop == COOP_NV8 ? "VK_NV_cooperative_matrix"
                                                                : "VK_KHR_cooperative_matrix");
      return FALSE;
    }
  if (variant->shared_bytes > features->max_shared_memory ||
      variant->invocations > features->max_invocations)
    {
      if (why != NULL)
        *why = g_strdup_printf ("its tile takes %u bytes of shared memory and %u invocations, "
                                "the device allows %u and %u",
                                variant->shared_bytes, variant->invocations,
                                features->max_shared_memory, features->max_invocations);
      return FALSE;
    }
  return TRUE;
}

const char * const *
dc_gemm_vk_variant_names (void)
{
  static const char *names[G_N_ELEMENTS (variants) + 1];
  static gsize done = 0;

  if (g_once_init_enter (&done))
    {
      for (gsize v = 0; v < G_N_ELEMENTS (variants); v++)
        names[v] = variants[v].name;
      g_once_init_leave (&done, 1);
    }
  return names;
}

/* Buffers kept between products: allocating device memory costs far more
 * than a small product, so each grows to the largest size asked for and is
 * reused (the descriptors bind whole buffers; kernels index only what the
 * push constants say). */
typedef struct
{
  DcVkBuffer *staging;  /* host-visible: uploads and the read-back */
  DcVkBuffer *a;        /* device-local (Mp, Kp) int8 */
  DcVkBuffer *b;        /* device-local (Np, Kp) int8 */
  DcVkBuffer *c;        /* device-local (M, N) int32 or f32 bits */
  DcVkBuffer *ea;       /* host-visible (M) int32 */
  DcVkBuffer *eb;       /* host-visible (N) int32 */
} Buffers;

static void
buffers_clear (Buffers *self)
{
  g_clear_pointer (&self->staging, dc_vk_buffer_free);
  g_clear_pointer (&self->a, dc_vk_buffer_free);
  g_clear_pointer (&self->b, dc_vk_buffer_free);
  g_clear_pointer (&self->c, dc_vk_buffer_free);
  g_clear_pointer (&self->ea, dc_vk_buffer_free);
  g_clear_pointer (&self->eb, dc_vk_buffer_free);
}

static gboolean
ensure_buffer (DcVkContext  *ctx,
               DcVkBuffer  **buffer,
               gsize         size,
               gboolean      device_local,
               GError      **error)
{
  if (*buffer != NULL && dc_vk_buffer_get_size (*buffer) >= size)
    return TRUE;
  g_clear_pointer (buffer, dc_vk_buffer_free);
  *buffer = device_local ? dc_vk_buffer_new_device_local (ctx, size, error)
                         : dc_vk_buffer_new (ctx, size, error);
  return *buffer != NULL;
}

struct _DcGemmVk
{
  /* owned */
  DcVkContext   *ctx;
  Buffers        buffers;
  DcVkPipeline  *pipeline;
  DcVkPipeline  *large_pipeline;  /* nullable: products of LARGE_MIN_OPS and up */
  char          *features;
  char          *kernel_name;     /* nullable: "preferred+large" */
  /* borrowed */
  const Variant *variant;
  const Variant *large_variant;
};

/* The kernel for a product of M × N × K. */
static void
pick (DcGemmVk       *self,
      gsize           M,
      gsize           N,
      gsize           K,
      const Variant **variant,
      DcVkPipeline  **pipeline)
{
  if (self->large_pipeline != NULL && (double) M * N * K >= LARGE_MIN_OPS)
    {
      *variant = self->large_variant;
      *pipeline = self->large_pipeline;
    }
  else
    {
      *variant = self->variant;
      *pipeline = self->pipeline;
    }
}

static gsize
round_up (gsize x,
          gsize to)
{
  return (x + to - 1) / to * to;
}

static gboolean
variant_broken_for_test (const Variant *variant)
{
  return dc_test_break_kernel (variant->name);
}

/* Copies @m's rows into @dst, zeroed beforehand, rows of @kp bytes. With
 * @block (bytes of K a step), blocked instead: for each tile of @tile rows and
 * each K step, the tile's rows' @block bytes one after another, so that a
 * workgroup's step reads one contiguous span (gemm-int8-coopsc.comp's
 * PACKED). The copy in is made for every product anyway, so the packing costs
 * no extra pass; operands that stay on the device (a model's weights) would
 * be packed once when uploaded. */
static void
pack_rows (guint8              *dst,
           const DcQuantMatrix *m,
           gsize                kp,
           gsize                tile,
           gsize                block)
{
  const gsize K = m->k;

  if (block == 0)
    {
      for (gsize r = 0; r < m->n_vectors; r++)
        memcpy (dst + r * kp, m->q + r * K, K);
      return;
    }
  for (gsize r = 0; r < m->n_vectors; r++)
    for (gsize k0 = 0; k0 < K; k0 += block)
      memcpy (dst + ((r / tile * (kp / block) + k0 / block) * tile + r % tile) * block,
              m->q + r * K + k0, MIN (block, K - k0));
}

/* Uploads, dispatches and reads back. out is (M, N): int32 or f32 bits. */
static gboolean
run_variant (DcVkContext          *ctx,
             Buffers              *buffers,
             DcVkPipeline         *pipeline,
             const Variant        *variant,
             const DcQuantMatrix  *a,
             const DcQuantMatrix  *b,
             guint32               mode,
             gboolean              poison,
             guint                 repeat,
             gint64               *dispatch_usec,
             DcVkDispatchTiming   *queued,
             guint32              *out,
             GError              **error)
{
  const gsize M = a->n_vectors, N = b->n_vectors, K = a->k;
  const gsize Mp = round_up (M, variant->tile_m), Np = round_up (N, variant->tile_n);
  const gsize Kp = round_up (K, variant->pad_k);
  const DcVkFeatures *features = dc_vk_context_get_features (ctx);
  gsize size_a, size_b, size_c, size_staging;
  DcGemmPush push;
  guint8 *host;
  gint64 start;

  /* Every binding must fit the device's range, and the push constants and
   * group counts their 32-bit fields. */
  if (!g_size_checked_mul (&size_a, Mp, Kp) || !g_size_checked_mul (&size_b, Np, Kp) ||
      !g_size_checked_mul (&size_c, M * 4, N) ||
      size_a > features->max_storage_buffer_range || size_b > features->max_storage_buffer_range ||
      size_c > features->max_storage_buffer_range || Kp / 4 > G_MAXUINT32)
    {
      g_set_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_TOO_LARGE,
                   "GEMM %" G_GSIZE_FORMAT " × %" G_GSIZE_FORMAT " × %" G_GSIZE_FORMAT
                   " exceeds the Vulkan device's buffer limit (%u bytes per binding)",
                   M, N, K, features->max_storage_buffer_range);
      return FALSE;
    }
  /* Staging layout: A's rows at 0, B's after them, the gate's poison pattern
   * after those; the output is read back to offset 0 once the copies in are
   * done (the barriers order the reuse). */
  size_staging = MAX (size_a + size_b + (poison ? size_c : 0), size_c);

  if (!ensure_buffer (ctx, &buffers->staging, size_staging, FALSE, error) ||
      !ensure_buffer (ctx, &buffers->a, size_a, TRUE, error) ||
      !ensure_buffer (ctx, &buffers->b, size_b, TRUE, error) ||
      !ensure_buffer (ctx, &buffers->c, size_c, TRUE, error) ||
      !ensure_buffer (ctx, &buffers->ea, M * sizeof (gint32), FALSE, error) ||
      !ensure_buffer (ctx, &buffers->eb, N * sizeof (gint32), FALSE, error))
    {
      /* Leave no half-grown cache behind. */
      buffers_clear (buffers);
      return FALSE;
    }

  host = dc_vk_buffer_get_data (buffers->staging);
  memset (host, 0, size_a + size_b);
  pack_rows (host, a, Kp, variant->tile_m, variant->sc[SC_PACKED] ? variant->pad_k : 0);
  pack_rows (host + size_a, b, Kp, variant->tile_n, variant->sc[SC_PACKED] ? variant->pad_k : 0);
  /* The gate fills the output with a pattern first: a kernel that skips
   * outputs must not pass on what an earlier product left in the reused
   * buffer (or on zeroed fresh memory). */
  if (poison)
    memset (host + size_a + size_b, 0xa5, size_c);
  memcpy (dc_vk_buffer_get_data (buffers->ea), a->exponent, M * sizeof (gint32));
  memcpy (dc_vk_buffer_get_data (buffers->eb), b->exponent, N * sizeof (gint32));

  push.m = M;
  push.n = N;
  push.kw = Kp / 4;
  push.mode = mode;

  {
    DcVkBuffer *bindings[] = { buffers->a, buffers->b, buffers->ea, buffers->eb, buffers->c };
    const DcVkCopy uploads[] = {
      { buffers->staging, 0, buffers->a, 0, size_a },
      { buffers->staging, size_a, buffers->b, 0, size_b },
      { buffers->staging, size_a + size_b, buffers->c, 0, size_c },
    };
    const DcVkCopy download = { buffers->c, 0, buffers->staging, 0, size_c };
    const guint groups_x = Np / variant->tile_n, groups_y = Mp / variant->tile_m;

    if (repeat <= 1)
      {
        /* One submission: copies in, the dispatch, the copy out. */
        start = g_get_monotonic_time ();
        if (!dc_vk_dispatch_with_copies (ctx, pipeline, bindings, &push, groups_x, groups_y, 1,
                                         uploads, poison ? 3 : 2, &download, 1, error))
          return FALSE;
        if (dispatch_usec != NULL)
          *dispatch_usec = g_get_monotonic_time () - start;
      }
    else
      {
        /* Benchmarks: upload once, then time the dispatches alone. */
        if (!dc_vk_dispatch_with_copies (ctx, pipeline, bindings, &push, groups_x, groups_y, 1,
                                         uploads, 2, NULL, 0, error))
          return FALSE;
        if (queued != NULL)
          {
            if (!dc_vk_time_dispatches (ctx, pipeline, bindings, &push, groups_x, groups_y, 1,
                                        repeat, queued, error))
              return FALSE;
          }
        else
          {
            start = g_get_monotonic_time ();
            for (guint r = 1; r < repeat; r++)
              if (!dc_vk_dispatch (ctx, pipeline, bindings, &push, groups_x, groups_y, 1, error))
                return FALSE;
            if (dispatch_usec != NULL)
              *dispatch_usec = (g_get_monotonic_time () - start) * repeat / (repeat - 1);
          }
        if (!dc_vk_buffer_copy (ctx, buffers->c, buffers->staging, size_c, error))
          return FALSE;
      }
  }

  memcpy (out, host, size_c);
  return TRUE;
}

static DcQuantMatrix *
gate_matrix (GRand *rand,
             gsize  n,
             gsize  k,
             int    style)
{
  DcQuantMatrix *m = dc_quant_matrix_new (n, k, NULL);

  for (gsize i = 0; i < n * k; i++)
    {
      if (style == 0)
        m->q[i] = (gint8) g_rand_int_range (rand, -127, 128);
      else
        m->q[i] = g_rand_boolean (rand) ? 127 : -127;
    }
  /* A zero vector in every matrix that has room for one. */
  if (n > 2)
    memset (m->q + (n / 2) * k, 0, k);
  for (gsize v = 0; v < n; v++)
    m->exponent[v] = g_rand_int_range (rand, -140, 141);  /* reaches flush and saturation */
  return m;
}

/* The init gate. Returns FALSE with a message saying what differed. */
static gboolean
gate_variant (DcVkContext    *ctx,
              Buffers        *buffers,
              DcVkPipeline   *pipeline,
              const Variant  *variant,
              GError        **error)
{
  /* M, N, K, value style (0 random, 1 all ±127). */
  static const gsize shapes[][4] = {
    { 1, 1, 1, 0 }, { 1, 65, 130, 0 }, { 67, 3, 1, 0 }, { 63, 65, 31, 0 }, { 64, 64, 32, 0 },
    { 65, 63, 33, 0 }, { 127, 129, 95, 0 }, { 128, 128, 64, 0 }, { 129, 127, 97, 0 },
    { 70, 40, 300, 1 }, { 3, 200, 129, 1 },
    /* The 256-wide tiles ± 1 (coop2-128x256, coop2-256x128). */
    { 255, 257, 65, 0 }, { 257, 255, 128, 1 },
  };
  g_autoptr(GRand) rand = g_rand_new_with_seed (0x6a7e);

  for (gsize s = 0; s < G_N_ELEMENTS (shapes); s++)
    {
      const gsize M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
      g_autoptr(DcQuantMatrix) a = gate_matrix (rand, M, K, shapes[s][3]);
      g_autoptr(DcQuantMatrix) b = gate_matrix (rand, N, K, shapes[s][3]);
      g_autofree gint32 *ref_acc = g_new (gint32, M * N);
      g_autofree float *ref_c = g_new (float, M * N);
      g_autofree guint32 *got = g_new (guint32, M * N);

      dc_gemm_reference_i32 (a, b, ref_acc);
      dc_gemm_reference (a, b, ref_c);

      for (guint32 mode = 0; mode < 2; mode++)
        {
          const void *ref = mode == 0 ? (const void *) ref_acc : (const void *) ref_c;

          if (!run_variant (ctx, buffers, pipeline, variant, a, b, mode, TRUE, 1, NULL, NULL, got,
                            error))
            return FALSE;
          if (memcmp (got, ref, M * N * 4) != 0)
            {
              gsize i = 0;
              guint32 want;

              while (memcmp (&got[i], (const guint32 *) ref + i, 4) == 0)
                i++;
              memcpy (&want, (const guint32 *) ref + i, 4);
              g_set_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_VERIFICATION,
                           "%s output of %" G_GSIZE_FORMAT " × %" G_GSIZE_FORMAT " × %"
                           G_GSIZE_FORMAT " differs at (%" G_GSIZE_FORMAT ", %" G_GSIZE_FORMAT
                           "): 0x%08x, reference 0x%08x",
                           mode == 0 ? "int32" : "f32", M, N, K, i / N, i % N, got[i], want);
              return FALSE;
            }
        }
    }
  return TRUE;
}

static const Variant *
find_variant (const char *name)
{
  for (gsize v = 0; v < G_N_ELEMENTS (variants); v++)
    if (g_str_equal (variants[v].name, name))
      return &variants[v];
  return NULL;
}

/* The variant's pipeline once it has passed its gate (its broken twin's under
 * DC_TEST_BREAK_KERNEL); NULL, with the refusal logged, otherwise. */
static DcVkPipeline *
gated_pipeline (DcGemmVk      *self,
                const Variant *variant)
{
  g_autoptr(DcVkPipeline) pipeline = NULL;
  g_autoptr(GError) local_error = NULL;
  g_autofree char *shader = NULL;

  if (variant_broken_for_test (variant))
    {
      /* The twin of "NAME+khr" is "NAME-broken+khr". */
      gsize stem = g_str_has_suffix (variant->shader, "+khr") ? strlen (variant->shader) - 4
                                                              : strlen (variant->shader);

      shader = g_strdup_printf ("%.*s-broken%s", (int) stem, variant->shader,
                                variant->shader + stem);
    }
  else
    shader = g_strdup (variant->shader);
  if (variant->sc[SC_BM] != 0)
    {
      guint32 constants[SC_N + 1];

      memcpy (constants, variant->sc, sizeof variant->sc);
      constants[SC_N] = variant->invocations;
      pipeline = dc_vk_pipeline_new_specialized (self->ctx, shader, 5, sizeof (DcGemmPush),
                                                 constants, G_N_ELEMENTS (constants),
                                                 &local_error);
    }
  else
    pipeline = dc_vk_pipeline_new (self->ctx, shader, 5, sizeof (DcGemmPush), &local_error);
  if (pipeline != NULL &&
      gate_variant (self->ctx, &self->buffers, pipeline, variant, &local_error))
    {
      g_debug ("GEMM kernel %s passed its gate on %s", variant->name,
               dc_vk_context_get_device_name (self->ctx));
      return g_steal_pointer (&pipeline);
    }
  g_message ("Vulkan GEMM kernel %s on %s failed verification (%s) — refused",
             variant->name, dc_vk_context_get_device_name (self->ctx), local_error->message);
  return NULL;
}

DcGemmVk *
dc_gemm_vk_new (GError **error)
{
  return dc_gemm_vk_new_for_device (NULL, error);
}

/* @device_id: (nullable): dc_vk_context_new_for_id()'s; NULL for the best device. */
DcGemmVk *
dc_gemm_vk_new_for_device (const char  *device_id,
                           GError     **error)
{
  g_autoptr(DcGemmVk) self = g_new0 (DcGemmVk, 1);
  g_autoptr(GString) refused = g_string_new (NULL);
  g_autoptr(GError) local_error = NULL;
  const DcVkFeatures *features;
  const char * const *large;
  const char *large_env;
  gsize n_large;

  self->ctx = dc_vk_context_new_for_id (device_id, &local_error);
  if (self->ctx == NULL)
    {
      g_set_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_BACKEND, "%s", local_error->message);
      return NULL;
    }
  features = dc_vk_context_get_features (self->ctx);
  self->features = dc_vk_features_to_string (features);
  g_debug ("Vulkan GEMM on %s: %s", dc_vk_context_get_device_name (self->ctx), self->features);

  if (!features->shader_int8 || !features->storage_buffer_8bit)
    {
      g_set_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_BACKEND,
                   "Vulkan device %s lacks what the INT8 kernels need:%s%s",
                   dc_vk_context_get_device_name (self->ctx),
                   features->shader_int8 ? "" : " shaderInt8",
                   features->storage_buffer_8bit ? "" : " storageBuffer8BitAccess");
      return NULL;
    }

  for (gsize v = 0; v < G_N_ELEMENTS (variants); v++)
    {
      const Variant *variant = &variants[v];
      g_autofree char *why = NULL;

      if (g_getenv ("DC_GEMM_VK_KERNEL") != NULL &&
          !g_str_equal (g_getenv ("DC_GEMM_VK_KERNEL"), variant->name))
        continue;
      if (!dc_gemm_vk_variant_offered (features, variant->name, &why))
        {
          g_debug ("GEMM kernel %s not offered: %s", variant->name, why);
          continue;
        }
      self->pipeline = gated_pipeline (self, variant);
      if (self->pipeline != NULL)
        {
          self->variant = variant;
          break;
        }
      g_string_append_printf (refused, "%s%s", refused->len ? ", " : "", variant->name);
    }

  /* Large products: the first of large_variants that passes its gate, beside
   * the preferred kernel (none when a test or benchmark names one kernel).
   * DC_GEMM_VK_LARGE_KERNEL=name offers that one instead (the sweep's
   * candidates, before one is made the default); still gated. */
  large = large_variants;
  n_large = G_N_ELEMENTS (large_variants);
  if (g_getenv ("DC_GEMM_VK_LARGE_KERNEL") != NULL)
    {
      large_env = g_getenv ("DC_GEMM_VK_LARGE_KERNEL");
      large = &large_env;
      n_large = 1;
    }
  for (gsize l = 0; self->pipeline != NULL && g_getenv ("DC_GEMM_VK_KERNEL") == NULL &&
                    l < n_large; l++)
    {
      const Variant *variant = find_variant (large[l]);

      if (variant == NULL || variant == self->variant ||
          !dc_gemm_vk_variant_offered (features, variant->name, NULL))
        continue;
      self->large_pipeline = gated_pipeline (self, variant);
      if (self->large_pipeline != NULL)
        {
          self->large_variant = variant;
          self->kernel_name = g_strdup_printf ("%s+%s", self->variant->name, variant->name);
          break;
        }
    }

  if (self->pipeline == NULL)
    {
      g_set_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_VERIFICATION,
                   "Vulkan GEMM kernel %s on %s failed verification — using CPU path",
                   refused->len ? refused->str : "(none offered)",
                   dc_vk_context_get_device_name (self->ctx));
      return NULL;
    }
  return g_steal_pointer (&self);
}

void
dc_gemm_vk_free (DcGemmVk *self)
{
  if (self == NULL)
    return;
  g_clear_pointer (&self->pipeline, dc_vk_pipeline_free);
  g_clear_pointer (&self->large_pipeline, dc_vk_pipeline_free);
  g_free (self->kernel_name);
  buffers_clear (&self->buffers);
  g_clear_pointer (&self->ctx, dc_vk_context_free);
  g_free (self->features);
  g_free (self);
}

const char *
dc_gemm_vk_get_device_name (DcGemmVk *self)
{
  return dc_vk_context_get_device_name (self->ctx);
}

const char *
dc_gemm_vk_get_device_id (DcGemmVk *self)
{
  return dc_vk_context_get_device_id (self->ctx);
}

const char *
dc_gemm_vk_get_kernel_name (DcGemmVk *self)
{
  return self->kernel_name != NULL ? self->kernel_name : self->variant->name;
}

const char *
dc_gemm_vk_get_features (DcGemmVk *self)
{
  return self->features;
}

gboolean
dc_gemm_vk_run (DcGemmVk             *self,
                const DcQuantMatrix  *a,
                const DcQuantMatrix  *b,
                gint32               *acc,
                float                *c,
                GError              **error)
{
  const Variant *variant;
  DcVkPipeline *pipeline;

  g_return_val_if_fail ((acc == NULL) != (c == NULL), FALSE);

  pick (self, a->n_vectors, b->n_vectors, a->k, &variant, &pipeline);
  if (!run_variant (self->ctx, &self->buffers, pipeline, variant, a, b,
                    acc != NULL ? 0 : 1, FALSE, 1, NULL, NULL,
                    acc != NULL ? (guint32 *) acc : (guint32 *) c, error))
    {
      g_prefix_error (error, "Vulkan GEMM: ");
      if (error != NULL && *error != NULL && (*error)->domain != DC_GEMM_ERROR)
        {
          GError *e = *error;

          *error = g_error_new_literal (DC_GEMM_ERROR, DC_GEMM_ERROR_BACKEND, e->message);
          g_error_free (e);
        }
      return FALSE;
    }
  return TRUE;
}

gboolean
dc_gemm_vk_time (DcGemmVk             *self,
                 const DcQuantMatrix  *a,
                 const DcQuantMatrix  *b,
                 guint                 repeat,
                 double               *seconds,
                 GError              **error)
{
  g_autofree guint32 *out = g_try_new (guint32, a->n_vectors * b->n_vectors);
  const Variant *variant;
  DcVkPipeline *pipeline;
  gint64 usec = 0;

  pick (self, a->n_vectors, b->n_vectors, a->k, &variant, &pipeline);
  if (out == NULL)
    {
      g_set_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_TOO_LARGE, "Out of memory for the output");
      return FALSE;
    }
  if (!run_variant (self->ctx, &self->buffers, pipeline, variant, a, b,
                    1, FALSE, repeat, &usec, NULL, out, error))
    return FALSE;
  *seconds = (double) usec / G_USEC_PER_SEC;
  return TRUE;
}

/**
 * dc_gemm_vk_time_queued:
 * @repeat: dispatches to queue in one command buffer, at least one
 * @timing: (out): seconds per product (dc_vk_time_dispatches())
 *
 * Benchmark: uploads once, then times the product's dispatch queued @repeat
 * times in one submission (how torch times launches), by GPU timestamps, and
 * one per submission waited for by fence wait and by fence poll.
 */
gboolean
dc_gemm_vk_time_queued (DcGemmVk             *self,
                        const DcQuantMatrix  *a,
                        const DcQuantMatrix  *b,
                        guint                 repeat,
                        DcVkDispatchTiming   *timing,
                        GError              **error)
{
  g_autofree guint32 *out = g_try_new (guint32, a->n_vectors * b->n_vectors);
  const Variant *variant;
  DcVkPipeline *pipeline;

  pick (self, a->n_vectors, b->n_vectors, a->k, &variant, &pipeline);
  if (out == NULL)
    {
      g_set_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_TOO_LARGE, "Out of memory for the output");
      return FALSE;
    }
  return run_variant (self->ctx, &self->buffers, pipeline, variant, a, b,
                      1, FALSE, MAX (repeat, 2), NULL, timing, out, error);
}
