/* dc-gemm-cpu.c: the CPU paths of the exact INT8 GEMM.
 *
 * a is (M, K) int8 and b is (N, K) int8, both K-contiguous ("vectors"); the
 * output is (M, N) row-major. The output is cut into a grid of tiles
 * (TILE_M × TILE_N, PACKED_TILE_M × PACKED_TILE_N for the packed VNNI
 * kernel, smaller for products with few of them: choose_tiles), and each
 * tile is computed whole by one thread, with
 * the same kernel and the same order of additions whichever thread it is:
 * the threads (the caller plus helpers of the engine's pool, dc-parallel.h) claim
 * tiles from an atomic counter, so a thread slowed down by other programs
 * does not hold the others up. Which thread computes a tile cannot change its
 * bits, and no sum is ever split between threads; and since every partial
 * sum of |q| ≤ 127 products over K ≤ DC_GEMM_MAX_K fits in int32, the order
 * of the integer additions inside a kernel cannot change a bit either.
 *
 * Kernels:
 * - scalar: the same loop as the reference, per tile.
 * - AVX2: vpmaddubsw multiplies unsigned by signed bytes into saturating int16
 *   pair sums. With |a| as the unsigned operand and sign(a)·b as the signed
 *   one, each pair sum is at most 2 · 127 · 127 = 32258 < 32767, so the
 *   saturation never triggers; it would with -128 (128 · 128 · 2 = 32768,
 *   and -(-128) wraps), which is why values are clamped to [-127, 127] and
 *   dc_quant_matrix_check refuses -128. vpmaddwd by ones widens to int32.
 * - AVX-512 VNNI: vpdpbusd sums four u8 × s8 products into int32 without
 *   saturation. b is made unsigned by flipping its top bit (b + 128), and
 *   128 · Σ a (per row of A) is subtracted afterwards; the intermediate may
 *   wrap modulo 2^32 but the true result fits in int32, so the wrapped
 *   arithmetic is exact. Three kernels: products of at most SKINNY_M rows
 *   (decode) read B once, in address order; larger ones with K ≤
 *   PACKED_MAX_K, or at least PACKED_MIN_M rows, repack B into 16-vector
 *   panels and broadcast A (no horizontal sums; K in steps of PACKED_KQ
 *   quads, the partial sums kept in the output between steps); the rest use
 *   4 × 4 register blocks of dot products.
 * - AMX-INT8 (a fourth kernel of the VNNI ISA, where the CPU and Linux
 *   allow it): tdpbsud tiles of 16 rows × 64 bytes against the packed
 *   kernel's panels; see tile_amx and dc_gemm_amx_state.
 * - NEON (aarch64): vmull_s8 gives exact int16 products (|p| ≤ 16129) and
 *   vpadalq_s16 adds their pairs into int32 lanes. NEON is part of the
 *   aarch64 baseline. It was compile-checked with clang for aarch64 but has
 *   not run on Arm hardware yet; the start-up gate below refuses it if it is
 *   wrong there.
 * The x86 kernels are compiled with target attributes; every kernel is chosen
 * at run time and gated against the scalar reference first.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-engine"

#include "config.h"

#include "dc-gemm-cpu.h"
#include "dc-gemm-private.h"
#include "dc-parallel.h"
#include "dc-test-break.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DC_GEMM_X86 1
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#define DC_GEMM_NEON 1
#endif

/* 32 rows of A at K = 1024 are 32 KiB, the L1 of the development VM's
 * cores: with 64 rows they streamed from L2 for every group of four columns
 * (1024³ went from ~95 to ~106 GOPS on one core). */
#define TILE_M 32
#define TILE_N 64

/* The packed VNNI kernel's tiles are larger: it blocks K itself (PACKED_KQ),
 * so a tile's rows need not fit L1, and each tile reads its A rows and B
 * columns from L2 or L3 once. 128 × 128 at K = 1024 reads 256 KiB per 16 M
 * multiply-adds; the 32 × 64 tiles read 96 KiB per 2 M, 2.7 times the
 * traffic per product, which is what 16 threads sharing one L3 ran out of
 * at 1024³ (docs/BENCHMARKS.md, issue 14). choose_tiles still halves them
 * down to the small sizes for products with few tiles. */
#define PACKED_TILE_M 128
#define PACKED_TILE_N 128
#define MAX_TILE_M MAX (TILE_M, PACKED_TILE_M)
#define MAX_TILE_N MAX (TILE_N, PACKED_TILE_N)

/* Products of at most this many rows are "skinny" (a decode step: one row
 * per sequence, a few sequences): they stream B once and read it in address
 * order. 8 is the batch of sequences decoding together that still reads the
 * weights from memory once per 4 rows of A; prefill (64 tokens and more)
 * takes the register-blocked kernel. */
#define SKINNY_M 8

typedef void (*TileFunc) (const DcQuantMatrix *a,
                          const DcQuantMatrix *b,
                          const gint32        *row_sum,
                          const guint8        *packed,
                          gsize                m0,
                          gsize                m1,
                          gsize                n0,
                          gsize                n1,
                          gint32              *out,
                          gsize                ld_out);

/* A named kernel: the unit the start-up gate verifies, the bug reports name,
 * and DC_TEST_BREAK_KERNEL breaks. */
typedef struct
{
  const char *name;
  TileFunc    tile;
} Kernel;

static const Kernel *kernel_for (DcGemmIsa isa,
                                 gsize     m,
                                 gsize     k);
static const Kernel *kernel_choose (DcGemmIsa isa,
                                    gsize     m,
                                    gsize     k,
                                    gsize     amx_min_k);
static gboolean run_cpu (const DcQuantMatrix *a,
                         const DcQuantMatrix *b,
                         const DcGemmFill    *fill,
                         gint32              *acc,
                         float               *c,
                         DcGemmIsa            isa,
                         guint                n_threads,
                         const Kernel        *kernel);

/* The epilogue over one row of a tile: c[j] = epilogue (acc[j], ea, eb[j]). */
typedef void (*EpilogueFunc) (const gint32 *acc,
                              gint32        ea,
                              const gint32 *eb,
                              gsize         n,
                              float        *c);

const char *
dc_gemm_isa_to_string (DcGemmIsa isa)
{
  switch (isa)
    {
    case DC_GEMM_ISA_SCALAR: return "scalar";
    case DC_GEMM_ISA_AVX2: return "avx2";
    case DC_GEMM_ISA_AVX512_VNNI: return "avx512-vnni";
    case DC_GEMM_ISA_NEON: return "neon";
    default: return "unknown";
    }
}

gboolean
dc_gemm_isa_supported (DcGemmIsa isa)
{
  switch (isa)
    {
    case DC_GEMM_ISA_SCALAR:
      return TRUE;
#ifdef DC_GEMM_X86
    case DC_GEMM_ISA_AVX2:
      return __builtin_cpu_supports ("avx2");
    case DC_GEMM_ISA_AVX512_VNNI:
      return __builtin_cpu_supports ("avx512bw") && __builtin_cpu_supports ("avx512vnni");
#endif
#ifdef DC_GEMM_NEON
    case DC_GEMM_ISA_NEON:
      return TRUE;
#endif
    default:
      return FALSE;
    }
}

/* The CPU counterpart of the Vulkan init gates: a SIMD kernel is used only
 * after it has matched the scalar reference on ragged shapes, ±127 values
 * and a zero vector, int32 and f32. Compilers and CPUs have bugs too, and a
 * wrong kernel must cost speed, not bits. The shapes reach every kernel of
 * the ISA (VNNI: skinny for M ≤ SKINNY_M, packed for K ≤ PACKED_MAX_K or
 * M ≥ PACKED_MIN_M, the dot-product blocks for the rest) with K tails and
 * ragged M and N, and the packed kernel over three K steps; one failing
 * kernel refuses the whole ISA.
 * DC_TEST_BREAK_KERNEL (see kernel_broken_for_test) breaks kernels on
 * purpose, for the tests of this gate only. */
static gboolean
kernels_verify (DcGemmIsa isa,
                gsize     amx_min_k)
{
  static const gsize shapes[][3] = {
    { 1, 1, 1 }, { 3, 5, 31 }, { 2, 4, 32 }, { 5, 7, 65 }, { 67, 65, 97 }, { 2, 9, 300 },
    { 4, 8, 16 }, { 3, 9, 48 }, { 8, 13, 130 }, { 9, 6, 64 }, { 12, 37, 301 }, { 257, 9, 301 },
    /* The packed kernel's first, middle and last K step (PACKED_KQ). */
    { 257, 9, 601 },
    /* AMX: whole 16-row groups and 64-byte steps, and partial ones of both. */
    { 32, 32, 64 }, { 48, 96, 256 }, { 33, 17, 16 }, { 40, 70, 131 },
  };
  guint64 state = 0x9e3779b97f4a7c15u;

  for (gsize s = 0; s < G_N_ELEMENTS (shapes); s++)
    {
      const gsize M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
      g_autoptr(DcQuantMatrix) a = dc_quant_matrix_new (M, K, NULL);
      g_autoptr(DcQuantMatrix) b = dc_quant_matrix_new (N, K, NULL);
      g_autofree gint32 *ref = g_new (gint32, M * N);
      g_autofree gint32 *acc = g_new (gint32, M * N);
      g_autofree float *ref_c = g_new (float, M * N);
      g_autofree float *c = g_new (float, M * N);
      const Kernel *kernel;

      for (gsize i = 0; i < M * K; i++)
        {
          state = state * 6364136223846793005u + 1442695040888963407u;
          a->q[i] = s == 5 ? ((state >> 40) & 1 ? 127 : -127) : (gint8) ((state >> 40) % 255 - 127);
        }
      for (gsize i = 0; i < N * K; i++)
        {
          state = state * 6364136223846793005u + 1442695040888963407u;
          b->q[i] = s == 5 ? -127 : (gint8) ((state >> 40) % 255 - 127);
        }
      if (N > 2)
        memset (b->q + K, 0, K);
      /* Small exponents, and on one shape exponents that send the epilogue
       * below and above the normal range (flush and saturate). */
      for (gsize v = 0; v < M; v++)
        a->exponent[v] = s == 4 ? (int) (v % 13) * 25 - 160 : (int) (v % 7) - 3;
      for (gsize v = 0; v < N; v++)
        b->exponent[v] = s == 4 ? (int) (v % 11) * 13 - 70 : (int) (v % 5) - 2;

      kernel = kernel_choose (isa, M, K, amx_min_k);
      dc_gemm_reference_i32 (a, b, ref);
      dc_gemm_reference (a, b, ref_c);
      run_cpu (a, b, NULL, acc, NULL, isa, 2, kernel);
      run_cpu (a, b, NULL, NULL, c, isa, 2, kernel);
      if (memcmp (acc, ref, M * N * sizeof *acc) != 0 || memcmp (c, ref_c, M * N * sizeof *c) != 0)
        {
          g_message ("CPU GEMM kernel %s failed verification on %" G_GSIZE_FORMAT " × %"
                     G_GSIZE_FORMAT " × %" G_GSIZE_FORMAT " — refused",
                     kernel->name, M, N, K);
          return FALSE;
        }
    }
  return TRUE;
}

/* Whether each ISA passed its gate, decided once per process. */
static gboolean
isa_usable (DcGemmIsa isa)
{
  static gsize verified = 0;
  static gboolean usable[DC_GEMM_N_ISAS];

  if (g_once_init_enter (&verified))
    {
      usable[DC_GEMM_ISA_SCALAR] = TRUE;
      for (int i = 1; i < DC_GEMM_N_ISAS; i++)
        usable[i] = dc_gemm_isa_supported (i) && kernels_verify (i, 0);
      g_once_init_leave (&verified, 1);
    }
  return usable[isa];
}

DcGemmIsa
dc_gemm_isa_best (void)
{
  const char *forced = g_getenv ("DC_GEMM_ISA");

  /* DC_GEMM_ISA=scalar|avx2|avx512-vnni|neon pins the kernel (benchmarks, bug
   * reports); an unsupported or refused choice falls back to the best one. */
  if (forced != NULL)
    {
      for (int isa = 0; isa < DC_GEMM_N_ISAS; isa++)
        if (g_str_equal (forced, dc_gemm_isa_to_string (isa)) && isa_usable (isa))
          return isa;
    }
  for (int isa = DC_GEMM_N_ISAS - 1; isa > DC_GEMM_ISA_SCALAR; isa--)
    if (isa_usable (isa))
      return isa;
  return DC_GEMM_ISA_SCALAR;
}

/* AMX-INT8 (tile_amx): a kernel of the AVX-512 VNNI ISA for products of
 * more than SKINNY_M rows and K of at least AMX_MIN_K, used only where
 * the CPU has it, Linux permits its tile data to this process, and it has
 * passed its own start-up gate against the scalar reference; the VNNI
 * kernels otherwise. At K = 16 (the attention's Q·Kᵀ at width 128) three
 * quarters of each 64-byte step would be padding, copied per product. */
#define AMX_MIN_K 64

#ifdef DC_GEMM_X86
#include <cpuid.h>
#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

/* arch_prctl's request for a dynamically enabled state component, and the
 * component of the tiles' data (Linux's asm/prctl.h, fpu/types.h). */
#define DC_ARCH_REQ_XCOMP_PERM 0x1023
#define DC_XFEATURE_XTILEDATA 18

static gboolean
amx_cpu_has (void)
{
  unsigned eax, ebx, ecx, edx;

  if (!dc_gemm_isa_supported (DC_GEMM_ISA_AVX512_VNNI) ||
      !__get_cpuid_count (7, 0, &eax, &ebx, &ecx, &edx))
    return FALSE;
  /* CPUID.(7, 0):EDX bit 24 AMX-TILE, bit 25 AMX-INT8. */
  return (edx >> 24 & 1) && (edx >> 25 & 1);
}

static gboolean
amx_permit (void)
{
  if (syscall (SYS_arch_prctl, DC_ARCH_REQ_XCOMP_PERM, DC_XFEATURE_XTILEDATA) == 0)
    return TRUE;
  g_message ("AMX-INT8: Linux did not permit tile data to this process (%s) — using "
             "AVX-512 VNNI", g_strerror (errno));
  return FALSE;
}

static gboolean
amx_verify (void)
{
  /* Every shape of more than SKINNY_M rows through tile_amx, K = 16 too. */
  return kernels_verify (DC_GEMM_ISA_AVX512_VNNI, 1);
}
#endif

const char *
dc_gemm_amx_state_to_string (DcGemmAmxState state)
{
  switch (state)
    {
    case DC_GEMM_AMX_UNSUPPORTED: return "unsupported";
    case DC_GEMM_AMX_DISABLED: return "disabled";
    case DC_GEMM_AMX_NOT_PERMITTED: return "not-permitted";
    case DC_GEMM_AMX_REFUSED: return "refused";
    case DC_GEMM_AMX_ACTIVE: return "active";
    default: return "unknown";
    }
}

/**
 * dc_gemm_amx_decide:
 * @cpu_has: whether CPUID reports AMX-TILE and AMX-INT8 (and AVX-512 VNNI)
 * @env: DC_GEMM_AMX's value (nullable): "0" or "off" disables the kernel, a
 *   number N ≥ 1 uses it from K = N on (measuring), anything else is ignored
 * @permit: asks Linux for the tile data (called only where @cpu_has and
 *   not disabled)
 * @verify: the start-up gate (called only after @permit succeeded)
 * @min_k: (out): the smallest K for the kernel, where the result is active
 *
 * The AMX kernel's selection, apart from the CPU so that tests can walk
 * every branch on machines without AMX. Returns: the state.
 */
DcGemmAmxState
dc_gemm_amx_decide (gboolean    cpu_has,
                    const char *env,
                    gboolean  (*permit) (void),
                    gboolean  (*verify) (void),
                    gsize      *min_k)
{
  guint64 n = 0;

  *min_k = AMX_MIN_K;
  if (!cpu_has)
    return DC_GEMM_AMX_UNSUPPORTED;
  if (env != NULL && (g_str_equal (env, "0") || g_ascii_strcasecmp (env, "off") == 0))
    return DC_GEMM_AMX_DISABLED;
  if (env != NULL && g_ascii_string_to_unsigned (env, 10, 1, DC_GEMM_MAX_K, &n, NULL))
    *min_k = (gsize) n;
  if (!permit ())
    return DC_GEMM_AMX_NOT_PERMITTED;
  if (!verify ())
    return DC_GEMM_AMX_REFUSED;
  return DC_GEMM_AMX_ACTIVE;
}

static gsize amx_min_k_active;  /* 0 unless the kernel is active */

/**
 * dc_gemm_amx_state:
 *
 * Decided once per process (DC_GEMM_AMX, the CPU, Linux, the gate).
 * Returns: whether the AVX-512 VNNI ISA's larger products take AMX tiles
 */
DcGemmAmxState
dc_gemm_amx_state (void)
{
  static gsize decided = 0;
  static DcGemmAmxState state = DC_GEMM_AMX_UNSUPPORTED;

  if (g_once_init_enter (&decided))
    {
#ifdef DC_GEMM_X86
      gsize min_k;

      state = dc_gemm_amx_decide (amx_cpu_has (), g_getenv ("DC_GEMM_AMX"), amx_permit,
                                  amx_verify, &min_k);
      if (state == DC_GEMM_AMX_ACTIVE)
        {
          amx_min_k_active = min_k;
          g_debug ("CPU GEMM: AMX-INT8 tiles for products of more than %d rows and K ≥ %"
                   G_GSIZE_FORMAT, SKINNY_M, min_k);
        }
#endif
      g_once_init_leave (&decided, 1);
    }
  return state;
}

static inline gint32
dot_scalar (const gint8 *x,
            const gint8 *y,
            gsize        k)
{
  gint32 sum = 0;

  for (gsize i = 0; i < k; i++)
    sum += (gint32) x[i] * (gint32) y[i];
  return sum;
}

static void
tile_scalar (const DcQuantMatrix *a,
             const DcQuantMatrix *b,
             const gint32        *row_sum,
             const guint8        *packed,
             gsize                m0,
             gsize                m1,
             gsize                n0,
             gsize                n1,
             gint32              *out,
             gsize                ld_out)
{
  const gsize K = a->k;

  for (gsize m = m0; m < m1; m++)
    for (gsize n = n0; n < n1; n++)
      out[(m - m0) * ld_out + (n - n0)] = dot_scalar (a->q + m * K, b->q + n * K, K);
}

#ifdef DC_GEMM_X86

__attribute__ ((target ("avx2"))) static inline gint32
hsum_avx2 (__m256i v)
{
  __m128i s = _mm_add_epi32 (_mm256_castsi256_si128 (v), _mm256_extracti128_si256 (v, 1));

  s = _mm_add_epi32 (s, _mm_shuffle_epi32 (s, _MM_SHUFFLE (1, 0, 3, 2)));
  s = _mm_add_epi32 (s, _mm_shuffle_epi32 (s, _MM_SHUFFLE (2, 3, 0, 1)));
  return _mm_cvtsi128_si32 (s);
}

/* The four lane sums of w, x, y, z as one vector. Integer adds in any order:
 * exact (see the file header). */
__attribute__ ((target ("avx2"))) static inline __m128i
hsum4_avx2 (__m256i w,
            __m256i x,
            __m256i y,
            __m256i z)
{
  __m256i t = _mm256_hadd_epi32 (_mm256_hadd_epi32 (w, x), _mm256_hadd_epi32 (y, z));

  return _mm_add_epi32 (_mm256_castsi256_si128 (t), _mm256_extracti128_si256 (t, 1));
}

/* 32 products of a[i] · b[i] summed in pairs, then to 8 int32 lanes. */
#define DOT32_AVX2(abs_a, a, b, ones) \
  _mm256_madd_epi16 (_mm256_maddubs_epi16 ((abs_a), _mm256_sign_epi8 ((b), (a))), (ones))

/* 16 bytes and 16 zeros: a half step for the tail, so that K = 16 (the
 * attention head width of the width-128 model) and K mod 32 ≥ 16 do not
 * fall to the scalar loop. The zeros add 0 to every sum. */
#define LOAD16_AVX2(p) \
  _mm256_inserti128_si256 (_mm256_setzero_si256 (), _mm_loadu_si128 ((const __m128i *) (p)), 0)

__attribute__ ((target ("avx2"))) static gint32
dot_avx2 (const gint8 *x,
          const gint8 *y,
          gsize        k)
{
  const __m256i ones = _mm256_set1_epi16 (1);
  __m256i acc = _mm256_setzero_si256 ();
  gsize i = 0;

  for (; i + 32 <= k; i += 32)
    {
      __m256i va = _mm256_loadu_si256 ((const __m256i *) (x + i));
      __m256i vb = _mm256_loadu_si256 ((const __m256i *) (y + i));

      acc = _mm256_add_epi32 (acc, DOT32_AVX2 (_mm256_abs_epi8 (va), va, vb, ones));
    }
  if (i + 16 <= k)
    {
      __m256i va = LOAD16_AVX2 (x + i);
      __m256i vb = LOAD16_AVX2 (y + i);

      acc = _mm256_add_epi32 (acc, DOT32_AVX2 (_mm256_abs_epi8 (va), va, vb, ones));
      i += 16;
    }
  return hsum_avx2 (acc) + dot_scalar (x + i, y + i, k - i);
}

/* A 2 × 4 block of dot products: 8 accumulators, each B chunk loaded once
 * for two rows, each A chunk once for four columns.
 *
 * The 32-byte steps are written in assembly: with 8 accumulators, 4 A
 * registers, the ones constant and 2 temporaries the loop needs 15 of the
 * 16 ymm registers, and GCC 12 spilled accumulators to the stack on every
 * step (the assembly measured about 8% faster on one core at 1024³, 4 runs
 * each, interleaved). The instructions are exactly
 * those of DOT32_AVX2: vpsignb, vpmaddubsw (|a| unsigned), vpmaddwd by ones,
 * vpaddd; the tail below uses the intrinsics. */
__attribute__ ((target ("avx2"))) static void
block_2x4_avx2 (const gint8 *a0,
                const gint8 *a1,
                const gint8 *b0,
                const gint8 *b1,
                const gint8 *b2,
                const gint8 *b3,
                gsize        k,
                gint32      *out0,
                gint32      *out1)
{
  const __m256i ones = _mm256_set1_epi16 (1);
  __m256i c00, c01, c02, c03, c10, c11, c12, c13;
  gsize steps = k / 32;
  gsize i = 0;

  __asm__ (
    "vpxor %%xmm8, %%xmm8, %%xmm8\n\t"
    "vpxor %%xmm9, %%xmm9, %%xmm9\n\t"
    "vpxor %%xmm10, %%xmm10, %%xmm10\n\t"
    "vpxor %%xmm11, %%xmm11, %%xmm11\n\t"
    "vpxor %%xmm12, %%xmm12, %%xmm12\n\t"
    "vpxor %%xmm13, %%xmm13, %%xmm13\n\t"
    "vpxor %%xmm14, %%xmm14, %%xmm14\n\t"
    "vpxor %%xmm15, %%xmm15, %%xmm15\n\t"
    /* ymm7 = 1 in every 16-bit lane */
    "vpcmpeqw %%ymm7, %%ymm7, %%ymm7\n\t"
    "vpsrlw $15, %%ymm7, %%ymm7\n\t"
    "test %[steps], %[steps]\n\t"
    "jz 2f\n"
    "1:\n\t"
    /* ymm0, ymm1: a0, a1; ymm2, ymm3: |a0|, |a1| */
    "vmovdqu (%[a0], %[i]), %%ymm0\n\t"
    "vmovdqu (%[a1], %[i]), %%ymm1\n\t"
    "vpabsb %%ymm0, %%ymm2\n\t"
    "vpabsb %%ymm1, %%ymm3\n\t"
#define DC_BLOCK_COLUMN(B, ACC0, ACC1)                   \
    "vmovdqu (%[" B "], %[i]), %%ymm4\n\t"              \
    "vpsignb %%ymm0, %%ymm4, %%ymm5\n\t"                \
    "vpsignb %%ymm1, %%ymm4, %%ymm6\n\t"                \
    "vpmaddubsw %%ymm5, %%ymm2, %%ymm5\n\t"             \
    "vpmaddubsw %%ymm6, %%ymm3, %%ymm6\n\t"             \
    "vpmaddwd %%ymm7, %%ymm5, %%ymm5\n\t"               \
    "vpmaddwd %%ymm7, %%ymm6, %%ymm6\n\t"               \
    "vpaddd %%ymm5, %%" ACC0 ", %%" ACC0 "\n\t"         \
    "vpaddd %%ymm6, %%" ACC1 ", %%" ACC1 "\n\t"
    DC_BLOCK_COLUMN ("b0", "ymm8", "ymm12")
    DC_BLOCK_COLUMN ("b1", "ymm9", "ymm13")
    DC_BLOCK_COLUMN ("b2", "ymm10", "ymm14")
    DC_BLOCK_COLUMN ("b3", "ymm11", "ymm15")
#undef DC_BLOCK_COLUMN
    "add $32, %[i]\n\t"
    "dec %[steps]\n\t"
    "jnz 1b\n"
    "2:\n\t"
    "vmovdqu %%ymm8, %[c00]\n\t"
    "vmovdqu %%ymm9, %[c01]\n\t"
    "vmovdqu %%ymm10, %[c02]\n\t"
    "vmovdqu %%ymm11, %[c03]\n\t"
    "vmovdqu %%ymm12, %[c10]\n\t"
    "vmovdqu %%ymm13, %[c11]\n\t"
    "vmovdqu %%ymm14, %[c12]\n\t"
    "vmovdqu %%ymm15, %[c13]"
    : [i] "+r" (i), [steps] "+r" (steps),
      [c00] "=m" (c00), [c01] "=m" (c01), [c02] "=m" (c02), [c03] "=m" (c03),
      [c10] "=m" (c10), [c11] "=m" (c11), [c12] "=m" (c12), [c13] "=m" (c13)
    : [a0] "r" (a0), [a1] "r" (a1), [b0] "r" (b0), [b1] "r" (b1), [b2] "r" (b2), [b3] "r" (b3),
      /* The k bytes read from each vector (sized so that clang accepts it). */
      "m" (*(const gint8 (*)[k]) a0), "m" (*(const gint8 (*)[k]) a1),
      "m" (*(const gint8 (*)[k]) b0), "m" (*(const gint8 (*)[k]) b1),
      "m" (*(const gint8 (*)[k]) b2), "m" (*(const gint8 (*)[k]) b3)
    : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
      "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "cc");

  /* The half step: 16 bytes and 16 zeros. */
  if (i + 16 <= k)
    {
      __m256i va0 = LOAD16_AVX2 (a0 + i), va1 = LOAD16_AVX2 (a1 + i);
      __m256i ua0 = _mm256_abs_epi8 (va0), ua1 = _mm256_abs_epi8 (va1);
      __m256i vb;

      vb = LOAD16_AVX2 (b0 + i);
      c00 = _mm256_add_epi32 (c00, DOT32_AVX2 (ua0, va0, vb, ones));
      c10 = _mm256_add_epi32 (c10, DOT32_AVX2 (ua1, va1, vb, ones));
      vb = LOAD16_AVX2 (b1 + i);
      c01 = _mm256_add_epi32 (c01, DOT32_AVX2 (ua0, va0, vb, ones));
      c11 = _mm256_add_epi32 (c11, DOT32_AVX2 (ua1, va1, vb, ones));
      vb = LOAD16_AVX2 (b2 + i);
      c02 = _mm256_add_epi32 (c02, DOT32_AVX2 (ua0, va0, vb, ones));
      c12 = _mm256_add_epi32 (c12, DOT32_AVX2 (ua1, va1, vb, ones));
      vb = LOAD16_AVX2 (b3 + i);
      c03 = _mm256_add_epi32 (c03, DOT32_AVX2 (ua0, va0, vb, ones));
      c13 = _mm256_add_epi32 (c13, DOT32_AVX2 (ua1, va1, vb, ones));
      i += 16;
    }

  /* Eight horizontal sums at once: three hadds and one cross-lane add per
   * row of four outputs, instead of a shuffle tree per output (this matters
   * for small K, where the reduction is a large share of the work). */
  _mm_storeu_si128 ((__m128i *) out0, hsum4_avx2 (c00, c01, c02, c03));
  _mm_storeu_si128 ((__m128i *) out1, hsum4_avx2 (c10, c11, c12, c13));
  if (i < k)
    {
      const gint8 *bs[4] = { b0, b1, b2, b3 };

      for (int j = 0; j < 4; j++)
        {
          out0[j] += dot_scalar (a0 + i, bs[j] + i, k - i);
          out1[j] += dot_scalar (a1 + i, bs[j] + i, k - i);
        }
    }
}

/* The 2 × 4 block for K = 16 exactly (the width-128 model's head width):
 * rows a0 and a1 share one register (a0 in the low 128 bits, a1 in the
 * high), each B vector is broadcast to both halves, so every multiply lane
 * does work instead of the half step's 16 zeros. Two hadds then leave the
 * four sums of row a0 in the low half and those of a1 in the high half. */
__attribute__ ((target ("avx2"))) static void
block_2x4_k16_avx2 (const gint8 *a0,
                    const gint8 *a1,
                    const gint8 *b0,
                    gint32      *out0,
                    gint32      *out1)
{
  const __m256i ones = _mm256_set1_epi16 (1);
  __m256i va = _mm256_inserti128_si256 (_mm256_castsi128_si256 (_mm_loadu_si128 ((const __m128i *) a0)),
                                        _mm_loadu_si128 ((const __m128i *) a1), 1);
  __m256i ua = _mm256_abs_epi8 (va);
  __m256i c[4];
  __m256i t;

  for (int j = 0; j < 4; j++)
    {
      __m256i vb = _mm256_broadcastsi128_si256 (_mm_loadu_si128 ((const __m128i *) (b0 + 16 * j)));

      c[j] = DOT32_AVX2 (ua, va, vb, ones);
    }
  t = _mm256_hadd_epi32 (_mm256_hadd_epi32 (c[0], c[1]), _mm256_hadd_epi32 (c[2], c[3]));
  _mm_storeu_si128 ((__m128i *) out0, _mm256_castsi256_si128 (t));
  _mm_storeu_si128 ((__m128i *) out1, _mm256_extracti128_si256 (t, 1));
}

__attribute__ ((target ("avx2"))) static void
tile_avx2 (const DcQuantMatrix *a,
           const DcQuantMatrix *b,
           const gint32        *row_sum,
           const guint8        *packed,
           gsize                m0,
           gsize                m1,
           gsize                n0,
           gsize                n1,
           gint32              *out,
           gsize                ld_out)
{
  const gsize K = a->k;
  gsize n = n0;

  /* Columns in fours (the four B vectors stay in L1 while the tile's rows of
   * A stream from L2), rows in twos; ragged edges one dot at a time. */
  for (; n + 4 <= n1; n += 4)
    {
      const gint8 *b0 = b->q + n * K;
      gsize m = m0;

      if (K == 16)
        for (; m + 2 <= m1; m += 2)
          block_2x4_k16_avx2 (a->q + m * K, a->q + (m + 1) * K, b0,
                              out + (m - m0) * ld_out + (n - n0),
                              out + (m + 1 - m0) * ld_out + (n - n0));
      for (; m + 2 <= m1; m += 2)
        block_2x4_avx2 (a->q + m * K, a->q + (m + 1) * K, b0, b0 + K, b0 + 2 * K, b0 + 3 * K, K,
                        out + (m - m0) * ld_out + (n - n0),
                        out + (m + 1 - m0) * ld_out + (n - n0));
      for (; m < m1; m++)
        for (gsize j = 0; j < 4; j++)
          out[(m - m0) * ld_out + (n + j - n0)] = dot_avx2 (a->q + m * K, b0 + j * K, K);
    }
  for (; n < n1; n++)
    for (gsize m = m0; m < m1; m++)
      out[(m - m0) * ld_out + (n - n0)] = dot_avx2 (a->q + m * K, b->q + n * K, K);
}

/* The VNNI kernels flip B, not A: vpdpbusd takes (b + 128) as the unsigned
 * operand and a as the signed one, so Σ (b + 128) · a = Σ a · b + 128 · Σ a,
 * and the correction needs only the row sums of A (M numbers, computed once
 * per product) instead of the column sums of B (a second pass over the whole
 * weight matrix, which doubled the memory traffic of a decode step). The
 * lanes may wrap modulo 2^32; the true result fits in int32, so the wrapped
 * arithmetic is exact. K tails use masked loads: bytes past K load as zero
 * in A, so whatever B's flipped tail holds, they add 0. */
#define VNNI_TARGET __attribute__ ((target ("avx512f,avx512bw,avx512vnni")))

/* Largest register block: 4 rows × 4 columns is 16 accumulators, 4 A
 * vectors and the B temporaries, within the 32 zmm registers with no spill;
 * each step issues 16 vpdpbusd for 8 loads. */
#define VNNI_R 4
#define VNNI_C 4

/* The lane sums of w, x, y, z as one vector. (The maskz forms with every
 * lane set: GCC 12's unmasked AVX-512 shuffles trip -Wmaybe-uninitialized on
 * their own undefined pass-through operand.) */
VNNI_TARGET static inline __m128i
hsum4_vnni (__m512i w,
            __m512i x,
            __m512i y,
            __m512i z)
{
  const __mmask16 all = 0xffff;
  const __mmask8 all64 = 0xff;
  __m512i wx = _mm512_add_epi32 (_mm512_maskz_unpacklo_epi32 (all, w, x),
                                 _mm512_maskz_unpackhi_epi32 (all, w, x));
  __m512i yz = _mm512_add_epi32 (_mm512_maskz_unpacklo_epi32 (all, y, z),
                                 _mm512_maskz_unpackhi_epi32 (all, y, z));
  __m512i s = _mm512_add_epi32 (_mm512_maskz_unpacklo_epi64 (all64, wx, yz),
                                _mm512_maskz_unpackhi_epi64 (all64, wx, yz));

  /* Each 128-bit quarter of s now holds (w, x, y, z) partial sums: add the
   * halves, then the quarters, in registers (a round trip through memory
   * stalled store-to-load forwarding once per block). */
  s = _mm512_add_epi32 (s, _mm512_maskz_shuffle_i32x4 (all, s, s, _MM_SHUFFLE (1, 0, 3, 2)));
  s = _mm512_add_epi32 (s, _mm512_maskz_shuffle_i32x4 (all, s, s, _MM_SHUFFLE (2, 3, 0, 1)));
  return _mm512_maskz_extracti32x4_epi32 (0xf, s, 0);
}

/* Σ_i a[i] for each of @n rows of length @k. */
VNNI_TARGET static void
row_sums_vnni (const gint8 *q,
               gsize        n,
               gsize        k,
               gint32      *sums)
{
  const __m512i flip = _mm512_set1_epi8 ((char) 0x80);

  for (gsize v = 0; v < n; v++)
    {
      const gint8 *x = q + v * k;
      __m512i acc = _mm512_setzero_si512 ();
      guint64 lanes[8], total = 0;
      gsize i = 0;

      /* vpsadbw sums (a + 128) as unsigned bytes into 64-bit lanes. */
      for (; i + 64 <= k; i += 64)
        {
          __m512i u = _mm512_xor_si512 (_mm512_loadu_si512 (x + i), flip);

          acc = _mm512_add_epi64 (acc, _mm512_sad_epu8 (u, _mm512_setzero_si512 ()));
        }
      if (i < k)
        {
          /* Bytes past k stay 0, not 0 + 128. */
          __mmask64 mask = _cvtu64_mask64 ((G_GUINT64_CONSTANT (1) << (k - i)) - 1);
          __m512i u = _mm512_xor_si512 (_mm512_maskz_loadu_epi8 (mask, x + i), flip);

          acc = _mm512_add_epi64 (acc, _mm512_sad_epu8 (_mm512_maskz_mov_epi8 (mask, u),
                                                        _mm512_setzero_si512 ()));
        }
      _mm512_storeu_si512 (lanes, acc);
      for (int l = 0; l < 8; l++)
        total += lanes[l];
      sums[v] = (gint32) ((gint64) total - 128 * (gint64) k);
    }
}

/* The end of a block: each accumulator's lane sum, less 128 · Σ a of its
 * row (wrapping, exact: see above), stored to out[r · ld_out + j]. */
VNNI_TARGET static inline __attribute__ ((always_inline)) void
block_store_vnni (const int     R,
                  const int     C,
                  __m512i       acc[8][8],
                  const gint32 *a_sum,
                  gint32       *out,
                  gsize         ld_out)
{
#pragma GCC unroll 8
  for (int r = 0; r < R; r++)
    {
      const __m128i correction = _mm_set1_epi32 ((int) ((guint32) a_sum[r] << 7));

#pragma GCC unroll 8
      for (int j = 0; j < C; j += 4)
        {
          const __m512i zero = _mm512_setzero_si512 ();
          __m128i s = hsum4_vnni (acc[r][j], j + 1 < C ? acc[r][j + 1] : zero,
                                  j + 2 < C ? acc[r][j + 2] : zero,
                                  j + 3 < C ? acc[r][j + 3] : zero);

          s = _mm_sub_epi32 (s, correction);
          if (j + 4 <= C)
            _mm_storeu_si128 ((__m128i *) (out + r * ld_out + j), s);
          else
            {
              gint32 lanes[4];

              _mm_storeu_si128 ((__m128i *) lanes, s);
              memcpy (out + r * ld_out + j, lanes, (gsize) (C - j) * sizeof *out);
            }
        }
    }
}

/* An R × C block of dot products over the whole of K: rows a0 … a0 + (R-1)·K
 * of A against vectors b0 … b0 + (C-1)·K of B; out[r · ld_out + j]. R and C
 * are constants after inlining, so the accumulators live in registers. */
VNNI_TARGET static inline __attribute__ ((always_inline)) void
block_vnni (const int     R,
            const int     C,
            const gint8  *a0,
            const gint8  *b0,
            gsize         k,
            const gint32 *a_sum,
            gint32       *out,
            gsize         ld_out)
{
  const __m512i flip = _mm512_set1_epi8 ((char) 0x80);
  __m512i acc[8][8];
  gsize i = 0;

#pragma GCC unroll 8
  for (int r = 0; r < R; r++)
#pragma GCC unroll 8
    for (int j = 0; j < C; j++)
      acc[r][j] = _mm512_setzero_si512 ();

  for (; i + 64 <= k; i += 64)
    {
      __m512i va[8];

#pragma GCC unroll 8
      for (int r = 0; r < R; r++)
        va[r] = _mm512_loadu_si512 (a0 + r * k + i);
#pragma GCC unroll 8
      for (int j = 0; j < C; j++)
        {
          __m512i vb = _mm512_xor_si512 (_mm512_loadu_si512 (b0 + j * k + i), flip);

#pragma GCC unroll 8
          for (int r = 0; r < R; r++)
            acc[r][j] = _mm512_dpbusd_epi32 (acc[r][j], vb, va[r]);
        }
    }
  if (i < k)
    {
      __mmask64 mask = _cvtu64_mask64 ((G_GUINT64_CONSTANT (1) << (k - i)) - 1);
      __m512i va[8];

#pragma GCC unroll 8
      for (int r = 0; r < R; r++)
        va[r] = _mm512_maskz_loadu_epi8 (mask, a0 + r * k + i);
#pragma GCC unroll 8
      for (int j = 0; j < C; j++)
        {
          __m512i vb = _mm512_xor_si512 (_mm512_maskz_loadu_epi8 (mask, b0 + j * k + i), flip);

#pragma GCC unroll 8
          for (int r = 0; r < R; r++)
            acc[r][j] = _mm512_dpbusd_epi32 (acc[r][j], vb, va[r]);
        }
    }

  block_store_vnni (R, C, acc, a_sum, out, ld_out);
}

/* The skinny kernel's block (M ≤ SKINNY_M): the same sums as block_vnni,
 * one B vector after the other. A decode step streams the weights from
 * memory once, and reading them in address order, not four vectors in step,
 * keeps the hardware prefetchers ahead; the rows of A come from L1 each time. */
VNNI_TARGET static inline __attribute__ ((always_inline)) void
block_seq_vnni (const int     R,
                const int     C,
                const gint8  *a0,
                const gint8  *b0,
                gsize         k,
                const gint32 *a_sum,
                gint32       *out,
                gsize         ld_out)
{
  const __m512i flip = _mm512_set1_epi8 ((char) 0x80);
  const gsize whole = k & ~(gsize) 63;
  const __mmask64 mask = _cvtu64_mask64 ((G_GUINT64_CONSTANT (1) << (k - whole)) - 1);
  __m512i acc[8][8];

#pragma GCC unroll 8
  for (int j = 0; j < C; j++)
    {
      const gint8 *bj = b0 + j * k;

#pragma GCC unroll 8
      for (int r = 0; r < R; r++)
        acc[r][j] = _mm512_setzero_si512 ();
      for (gsize i = 0; i < whole; i += 64)
        {
          __m512i vb = _mm512_xor_si512 (_mm512_loadu_si512 (bj + i), flip);

#pragma GCC unroll 8
          for (int r = 0; r < R; r++)
            acc[r][j] = _mm512_dpbusd_epi32 (acc[r][j], vb, _mm512_loadu_si512 (a0 + r * k + i));
        }
      if (whole < k)
        {
          __m512i vb = _mm512_xor_si512 (_mm512_maskz_loadu_epi8 (mask, bj + whole), flip);

#pragma GCC unroll 8
          for (int r = 0; r < R; r++)
            acc[r][j] = _mm512_dpbusd_epi32 (acc[r][j], vb,
                                             _mm512_maskz_loadu_epi8 (mask, a0 + r * k + whole));
        }
    }
  block_store_vnni (R, C, acc, a_sum, out, ld_out);
}

/* Every block shape a tile's ragged edges need, as constants. */
VNNI_TARGET static void
block_vnni_any (int           rows,
                int           cols,
                const gint8  *a0,
                const gint8  *b0,
                gsize         k,
                const gint32 *a_sum,
                gint32       *out,
                gsize         ld_out)
{
#define CASE(R, C) \
  case (R) * 16 + (C): block_vnni (R, C, a0, b0, k, a_sum, out, ld_out); return;
  switch (rows * 16 + cols)
    {
    CASE (1, 1) CASE (1, 2) CASE (1, 3) CASE (1, 4)
    CASE (2, 1) CASE (2, 2) CASE (2, 3) CASE (2, 4)
    CASE (3, 1) CASE (3, 2) CASE (3, 3) CASE (3, 4)
    CASE (4, 1) CASE (4, 2) CASE (4, 3)
    default: g_assert_not_reached ();
    }
#undef CASE
}

VNNI_TARGET static void
tile_vnni (const DcQuantMatrix *a,
           const DcQuantMatrix *b,
           const gint32        *a_sum,
           const guint8        *packed,
           gsize                m0,
           gsize                m1,
           gsize                n0,
           gsize                n1,
           gint32              *out,
           gsize                ld_out)
{
  const gsize K = a->k;

  /* Columns in groups of VNNI_C (they stay in L1 while the tile's rows of A
   * pass), rows in groups of VNNI_R. */
  for (gsize n = n0; n < n1; n += VNNI_C)
    {
      const int cols = (int) MIN ((gsize) VNNI_C, n1 - n);

      for (gsize m = m0; m < m1; m += VNNI_R)
        {
          const int rows = (int) MIN ((gsize) VNNI_R, m1 - m);
          gint32 *o = out + (m - m0) * ld_out + (n - n0);

          if (rows == VNNI_R && cols == VNNI_C)
            block_vnni (VNNI_R, VNNI_C, a->q + m * K, b->q + n * K, K, a_sum + m, o, ld_out);
          else
            block_vnni_any (rows, cols, a->q + m * K, b->q + n * K, K, a_sum + m, o, ld_out);
        }
    }
}

VNNI_TARGET static void
block_seq_vnni_any (int           rows,
                    int           cols,
                    const gint8  *a0,
                    const gint8  *b0,
                    gsize         k,
                    const gint32 *a_sum,
                    gint32       *out,
                    gsize         ld_out)
{
#define CASE(R, C) \
  case (R) * 16 + (C): block_seq_vnni (R, C, a0, b0, k, a_sum, out, ld_out); return;
  switch (rows * 16 + cols)
    {
    CASE (1, 1) CASE (1, 2) CASE (1, 3) CASE (1, 4)
    CASE (2, 1) CASE (2, 2) CASE (2, 3) CASE (2, 4)
    CASE (3, 1) CASE (3, 2) CASE (3, 3) CASE (3, 4)
    CASE (4, 1) CASE (4, 2) CASE (4, 3) CASE (4, 4)
    default: g_assert_not_reached ();
    }
#undef CASE
}

/* Products of at most SKINNY_M rows (decode): B vectors in address order,
 * four at a time, against up to four rows of A each pass. */
VNNI_TARGET static void
tile_vnni_skinny (const DcQuantMatrix *a,
                  const DcQuantMatrix *b,
                  const gint32        *a_sum,
                  const guint8        *packed,
                  gsize                m0,
                  gsize                m1,
                  gsize                n0,
                  gsize                n1,
                  gint32              *out,
                  gsize                ld_out)
{
  const gsize K = a->k;

  for (gsize n = n0; n < n1; n += 4)
    {
      const int cols = (int) MIN ((gsize) 4, n1 - n);

      for (gsize m = m0; m < m1; m += 4)
        {
          const int rows = (int) MIN ((gsize) 4, m1 - m);
          gint32 *o = out + (m - m0) * ld_out + (n - n0);

          /* The decode step's own shape inline, the rest through the switch. */
          if (rows == 1 && cols == 4)
            block_seq_vnni (1, 4, a->q + m * K, b->q + n * K, K, a_sum + m, o, ld_out);
          else
            block_seq_vnni_any (rows, cols, a->q + m * K, b->q + n * K, K, a_sum + m, o, ld_out);
        }
    }
}

/* The packed kernel (M > SKINNY_M, and K ≤ PACKED_MAX_K or M ≥ PACKED_MIN_M):
 * no horizontal sums.
 * B is repacked once per product, flipped, into panels of 16 vectors: quad
 * q of a panel is 64 bytes, bytes 4q … 4q + 3 of each of its 16 vectors, so
 * one vpdpbusd against four bytes of a row of A broadcast to every lane adds
 * into 16 outputs of that row at once. The dot-product blocks reduce 16 lanes
 * per output at the end of each block, which at K = 128 cost as much as the
 * 32 vpdpbusd before it. Bytes past K are 0 in the broadcast A, so B's
 * padding adds nothing; vectors past N are padding, computed, never stored. */
#define PACKED_MAX_K 256
/* Deeper products take the packed kernel too from this many rows of A on:
 * the repack of B (a gather per quad of 16 vectors) is then paid back by
 * 256 rows that each skip the dot-product blocks' 16-lane reductions and
 * B's per-block flip. At 1024³ it ran 1.5–1.9× the dot-product blocks per
 * CPU-second on the development VM (noisy, 2 threads); at 128 rows (the
 * 1.1B model's prefill, 128 × 5632 × 2048) the repack made it 2.5–3×
 * slower, hence 256, not 64. */
#define PACKED_MIN_M 256
#define PACKED_R 8
/* Spare bytes after the repacked panels: the AMX kernel's last K step reads
 * whole 16-quad B tiles (tile_amx). */
#define AMX_B_OVERRUN (16 * 64)

/* Panels [p0, p1) of 16 vectors of ceil (k / 4) quads each, into @packed
 * (n rounded up to 32: two panels per block). */
VNNI_TARGET static void
pack_b_panels_vnni (const DcQuantMatrix *b,
                    guint8              *packed,
                    gsize                p0,
                    gsize                p1)
{
  const gsize K = b->k, N = b->n_vectors, k4 = (K + 3) / 4;
  const gsize whole = K / 4;
  const __m512i flip = _mm512_set1_epi8 ((char) 0x80);

  for (gsize p = p0; p < p1; p++)
    {
      guint8 *panel = packed + p * k4 * 64;
      const gsize n0 = p * 16, valid = n0 < N ? MIN ((gsize) 16, N - n0) : 0;
      const gint8 *base = valid > 0 ? b->q + n0 * K : b->q;
      const __mmask16 lanes = (__mmask16) ((1u << valid) - 1);
      int offsets[16];

      for (int c = 0; c < 16; c++)
        offsets[c] = (int) ((gsize) MIN ((gsize) c, valid ? valid - 1 : 0) * K);
      /* Whole quads: one gather of 16 dwords, the same 4 bytes of 16 vectors. */
      for (gsize q = 0; q < whole; q++)
        {
          __m512i v = _mm512_mask_i32gather_epi32 (_mm512_setzero_si512 (), lanes,
                                                   _mm512_loadu_si512 (offsets),
                                                   base + 4 * q, 1);

          _mm512_storeu_si512 (panel + q * 64, _mm512_xor_si512 (v, flip));
        }
      /* The last, partial quad byte by byte (padding: flipped zeros). */
      if (whole < k4)
        for (int c = 0; c < 16; c++)
          for (gsize i = 0; i < 4; i++)
            {
              const gsize k = 4 * whole + i;
              const guint8 v = (gsize) c < valid && k < K ? (guint8) b->q[(n0 + c) * K + k] : 0;

              panel[whole * 64 + c * 4 + i] = v ^ 0x80;
            }
    }
}

typedef struct
{
  const DcQuantMatrix *a;
  const DcQuantMatrix *b;
  const DcGemmFill    *fill;    /* NULL: the operands are filled already */
  guint8              *packed;  /* NULL: B is not repacked */
  gint32              *row_sum; /* NULL: no row sums */
  gsize                pack_chunks;   /* chunks [0, pack_chunks) are B's */
  gsize                panels_per_chunk;  /* with packed */
  gsize                vectors_per_chunk; /* without */
  gsize                rows_per_chunk;
  gint                 failed;  /* atomic: a fill failed */
} PackBJob;

/* One chunk of the preparation: a run of B's vectors (filled, then
 * repacked into their panels while they are in cache), or a run of A's
 * rows (filled, then summed), so that all of it is one call of the pool.
 * A run whose fill failed is not used: the product is abandoned. */
static void
pack_b_chunk (gsize    c0,
              gsize    c1,
              guint    worker,
              gpointer data)
{
  PackBJob *job = data;
  const DcGemmFill *fill = job->fill;

  for (gsize c = c0; c < c1; c++)
    if (c < job->pack_chunks)
      {
        const gsize N = job->b->n_vectors;
        gsize p0 = 0, p1 = 0, v0, v1;

        if (job->packed != NULL)
          {
            p0 = c * job->panels_per_chunk;
            p1 = MIN (p0 + job->panels_per_chunk, (N + 31) / 32 * 2);
            v0 = MIN (p0 * 16, N);
            v1 = MIN (p1 * 16, N);
          }
        else
          {
            v0 = c * job->vectors_per_chunk;
            v1 = MIN (v0 + job->vectors_per_chunk, N);
          }
        if (fill != NULL && v0 < v1 && !fill->func (TRUE, v0, v1, fill->data))
          {
            g_atomic_int_set (&job->failed, 1);
            continue;
          }
#ifdef DC_GEMM_X86
        if (job->packed != NULL)
          pack_b_panels_vnni (job->b, job->packed, p0, p1);
#endif
      }
    else
      {
        const gsize r0 = (c - job->pack_chunks) * job->rows_per_chunk;
        const gsize r1 = MIN (r0 + job->rows_per_chunk, job->a->n_vectors);

        if (fill != NULL && !fill->func (FALSE, r0, r1, fill->data))
          {
            g_atomic_int_set (&job->failed, 1);
            continue;
          }
#ifdef DC_GEMM_X86
        if (job->row_sum != NULL)
          row_sums_vnni (job->a->q + r0 * job->a->k, r1 - r0, job->a->k, job->row_sum + r0);
#endif
      }
}

/* Runs the preparation: with @fill, both operands filled in chunks of its
 * sizes (B's rounded up to whole panels), each followed by its panels or
 * row sums; without, B's panels and A's row sums from the filled operands.
 * FALSE when a fill failed. */
static gboolean
prepare (const DcQuantMatrix *a,
         const DcQuantMatrix *b,
         const DcGemmFill    *fill,
         guint8              *packed,
         gint32              *row_sum,
         gsize                panels_per_chunk,
         gsize                rows_per_chunk,
         guint                n_threads)
{
  const gsize M = a->n_vectors, N = b->n_vectors;
  PackBJob job = { a, b, fill, packed, row_sum, 0, 0, 0, 0, 0 };
  gsize a_chunks;

  if (fill != NULL)
    {
      job.panels_per_chunk = MAX ((fill->b_chunk + 15) / 16, 1);
      job.vectors_per_chunk = fill->b_chunk;
      job.rows_per_chunk = fill->a_chunk;
    }
  else
    {
      job.panels_per_chunk = panels_per_chunk;
      job.rows_per_chunk = rows_per_chunk;
    }
  if (packed != NULL)
    job.pack_chunks = ((N + 31) / 32 * 2 + job.panels_per_chunk - 1) / job.panels_per_chunk;
  else if (fill != NULL)
    job.pack_chunks = (N + job.vectors_per_chunk - 1) / job.vectors_per_chunk;
  a_chunks = fill != NULL || row_sum != NULL
             ? (M + job.rows_per_chunk - 1) / job.rows_per_chunk : 0;
  dc_parallel_for (n_threads, job.pack_chunks + a_chunks, 1, pack_b_chunk, &job);
  return !g_atomic_int_get (&job.failed);
}

/* Bytes of packed panels per chunk of a parallel repack (each panel is
 * packed on its own, so the split cannot change a byte): about what a
 * chunk must weigh to outweigh its claim, and, at K = 1024, 64 chunks
 * for 4096 vectors. */
#define PACK_B_CHUNK_BYTES 65536

/* Each thread's repack buffer, kept between products and grown when a
 * product needs more. A fresh buffer per product came from the OS zeroed
 * page by page (glibc returns freed large blocks), and those page faults
 * took a tenth of a training step's CPU time. A thread's buffer is in use
 * only during that thread's own product (no product runs inside a tile). */
typedef struct
{
  gsize   size;
  guint8 *data;   /* 64-byte aligned, from posix_memalign */
} PackBuffer;

static void
pack_buffer_free (gpointer data)
{
  PackBuffer *buffer = data;

  free (buffer->data);
  g_free (buffer);
}

static GPrivate pack_buffer_key = G_PRIVATE_INIT (pack_buffer_free);

/* The calling thread's repack buffer of at least @size bytes, or NULL
 * without memory. */
static guint8 *
pack_buffer_get (gsize size)
{
  PackBuffer *buffer = g_private_get (&pack_buffer_key);
  guint8 *packed = NULL;

  if (buffer == NULL)
    {
      buffer = g_new0 (PackBuffer, 1);
      g_private_set (&pack_buffer_key, buffer);
    }
  if (buffer->size < size)
    {
      free (buffer->data);
      buffer->data = NULL;
      buffer->size = 0;
      if (posix_memalign ((void **) &packed, 64, size) != 0)
        return NULL;
      buffer->data = packed;
      buffer->size = size;
    }
  return buffer->data;
}

/* B repacked for the packed kernel, and A's row sums into @row_sum, on up
 * to @n_threads threads of the pool (at 1024³ and 16 threads the serial
 * repack took as long as the product), B into the calling thread's buffer;
 * with @fill, the operands are filled in the same call first (prepare ()).
 * Returns the buffer (owned by the thread: not to be freed), or NULL
 * without memory (then nothing was done). *@failed says a fill failed. */
static guint8 *
pack_b_vnni (const DcQuantMatrix *a,
             const DcQuantMatrix *b,
             gint32              *row_sum,
             const DcGemmFill    *fill,
             guint                n_threads,
             gboolean            *failed)
{
  const gsize K = b->k, N = b->n_vectors, k4 = (K + 3) / 4, n32 = (N + 31) / 32 * 32;
  const gsize size = MAX (n32 * k4 * 4, 64) + AMX_B_OVERRUN;
  guint8 *packed = pack_buffer_get (size);

  *failed = FALSE;
  if (packed == NULL)
    return NULL;
  if (fill == NULL && size + a->n_vectors * a->k < 2 * PACK_B_CHUNK_BYTES)
    n_threads = 1;
  /* Row sums read A once: chunks of about the same number of bytes. */
  *failed = !prepare (a, b, fill, packed, row_sum, MAX (PACK_B_CHUNK_BYTES / (k4 * 64), 1),
                      MAX (PACK_B_CHUNK_BYTES / MAX (a->k, 1), 1), n_threads);
  return packed;
}

/* R rows of A against the 32 vectors of two consecutive panels, over quads
 * [q0, q1) of K: the first K step starts from zero, later ones from the
 * partial sums stored in @out by the step before; the last one subtracts
 * the correction. Only the first @cols outputs of each row are loaded and
 * stored. Integer sums in any grouping: the same bits (file header). */
VNNI_TARGET static inline __attribute__ ((always_inline)) void
block_packed_vnni (const int     R,
                   const gint8  *a0,
                   gsize         k,
                   const guint8 *panels,
                   const gint32 *a_sum,
                   int           cols,
                   gsize         q0,
                   gsize         q1,
                   gint32       *out,
                   gsize         ld_out)
{
  const gsize k4 = (k + 3) / 4, whole = k / 4;
  const guint8 *panel1 = panels + k4 * 64;
  const __mmask16 mask0 = (__mmask16) (cols >= 16 ? 0xffff : (1u << cols) - 1);
  const __mmask16 mask1 = (__mmask16) (cols >= 32 ? 0xffff
                                       : cols > 16 ? (1u << (cols - 16)) - 1 : 0);
  __m512i acc[PACKED_R][2];

  if (q0 == 0)
    {
#pragma GCC unroll 8
      for (int r = 0; r < R; r++)
        acc[r][0] = acc[r][1] = _mm512_setzero_si512 ();
    }
  else
    {
#pragma GCC unroll 8
      for (int r = 0; r < R; r++)
        {
          acc[r][0] = _mm512_maskz_loadu_epi32 (mask0, out + r * ld_out);
          acc[r][1] = _mm512_maskz_loadu_epi32 (mask1, out + r * ld_out + 16);
        }
    }
  /* Whole quads: four bytes of each row, broadcast. */
  for (gsize q = q0; q < MIN (q1, whole); q++)
    {
      const __m512i vb0 = _mm512_load_si512 (panels + q * 64);
      const __m512i vb1 = _mm512_load_si512 (panel1 + q * 64);

#pragma GCC unroll 8
      for (int r = 0; r < R; r++)
        {
          gint32 x;
          __m512i va;

          memcpy (&x, a0 + r * k + 4 * q, 4);
          va = _mm512_set1_epi32 (x);
          acc[r][0] = _mm512_dpbusd_epi32 (acc[r][0], vb0, va);
          acc[r][1] = _mm512_dpbusd_epi32 (acc[r][1], vb1, va);
        }
    }
  /* The last, partial quad: its bytes past K are 0 in A. */
  if (q1 > whole && whole < k4)
    {
      const __m512i vb0 = _mm512_load_si512 (panels + whole * 64);
      const __m512i vb1 = _mm512_load_si512 (panel1 + whole * 64);

      for (int r = 0; r < R; r++)
        {
          gint32 x = 0;
          __m512i va;

          memcpy (&x, a0 + r * k + 4 * whole, k - 4 * whole);
          va = _mm512_set1_epi32 (x);
          acc[r][0] = _mm512_dpbusd_epi32 (acc[r][0], vb0, va);
          acc[r][1] = _mm512_dpbusd_epi32 (acc[r][1], vb1, va);
        }
    }
  if (q1 == k4)
    {
#pragma GCC unroll 8
      for (int r = 0; r < R; r++)
        {
          const __m512i correction = _mm512_set1_epi32 ((int) ((guint32) a_sum[r] << 7));

          acc[r][0] = _mm512_sub_epi32 (acc[r][0], correction);
          acc[r][1] = _mm512_sub_epi32 (acc[r][1], correction);
        }
    }
#pragma GCC unroll 8
  for (int r = 0; r < R; r++)
    {
      _mm512_mask_storeu_epi32 (out + r * ld_out, mask0, acc[r][0]);
      _mm512_mask_storeu_epi32 (out + r * ld_out + 16, mask1, acc[r][1]);
    }
}

/* block_packed_vnni for R = PACKED_R, the block of every full 8-row step,
 * with its 16 accumulators as named variables: GCC 12 kept the array form's
 * accumulators moving between registers and the stack on every quad (32
 * register copies and 2 stores per 16 vpdpbusd). The same instructions on
 * the same values otherwise; the partial quad and the end go through
 * block_packed_vnni's array form, outside the loop. */
VNNI_TARGET static void
block_packed8_vnni (const gint8  *a0,
                    gsize         k,
                    const guint8 *panels,
                    const gint32 *a_sum,
                    int           cols,
                    gsize         q0,
                    gsize         q1,
                    gint32       *out,
                    gsize         ld_out)
{
  const gsize k4 = (k + 3) / 4, whole = k / 4, end = MIN (q1, whole);
  const guint8 *panel1 = panels + k4 * 64;
  const __mmask16 mask0 = (__mmask16) (cols >= 16 ? 0xffff : (1u << cols) - 1);
  const __mmask16 mask1 = (__mmask16) (cols >= 32 ? 0xffff
                                       : cols > 16 ? (1u << (cols - 16)) - 1 : 0);
  __m512i c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51, c60, c61, c70, c71;
  __m512i acc[PACKED_R][2];

#define DC_ROW_INIT(R)                                                          \
  c##R##0 = q0 == 0 ? _mm512_setzero_si512 ()                                   \
                    : _mm512_maskz_loadu_epi32 (mask0, out + (R) * ld_out);     \
  c##R##1 = q0 == 0 ? _mm512_setzero_si512 ()                                   \
                    : _mm512_maskz_loadu_epi32 (mask1, out + (R) * ld_out + 16);
  DC_ROW_INIT (0) DC_ROW_INIT (1) DC_ROW_INIT (2) DC_ROW_INIT (3)
  DC_ROW_INIT (4) DC_ROW_INIT (5) DC_ROW_INIT (6) DC_ROW_INIT (7)
#undef DC_ROW_INIT

  for (gsize q = q0; q < end; q++)
    {
      const __m512i vb0 = _mm512_load_si512 (panels + q * 64);
      const __m512i vb1 = _mm512_load_si512 (panel1 + q * 64);
      const gint8 *x = a0 + 4 * q;

#define DC_ROW_STEP(R)                                          \
      {                                                         \
        gint32 v;                                               \
        __m512i va;                                             \
                                                                \
        memcpy (&v, x + (R) * k, 4);                            \
        va = _mm512_set1_epi32 (v);                             \
        c##R##0 = _mm512_dpbusd_epi32 (c##R##0, vb0, va);       \
        c##R##1 = _mm512_dpbusd_epi32 (c##R##1, vb1, va);       \
      }
      DC_ROW_STEP (0) DC_ROW_STEP (1) DC_ROW_STEP (2) DC_ROW_STEP (3)
      DC_ROW_STEP (4) DC_ROW_STEP (5) DC_ROW_STEP (6) DC_ROW_STEP (7)
#undef DC_ROW_STEP
    }

  if (q1 <= whole)
    {
      /* Not the K step with the partial quad: store (or correct and store). */
#define DC_ROW_STORE(R)                                                                    \
      if (q1 == k4)                                                                        \
        {                                                                                  \
          const __m512i corr = _mm512_set1_epi32 ((int) ((guint32) a_sum[R] << 7));        \
                                                                                           \
          c##R##0 = _mm512_sub_epi32 (c##R##0, corr);                                      \
          c##R##1 = _mm512_sub_epi32 (c##R##1, corr);                                      \
        }                                                                                  \
      _mm512_mask_storeu_epi32 (out + (R) * ld_out, mask0, c##R##0);                       \
      _mm512_mask_storeu_epi32 (out + (R) * ld_out + 16, mask1, c##R##1);
      DC_ROW_STORE (0) DC_ROW_STORE (1) DC_ROW_STORE (2) DC_ROW_STORE (3)
      DC_ROW_STORE (4) DC_ROW_STORE (5) DC_ROW_STORE (6) DC_ROW_STORE (7)
#undef DC_ROW_STORE
      return;
    }
  /* The partial quad: stored partial sums, then the array form's last step. */
  acc[0][0] = c00; acc[0][1] = c01; acc[1][0] = c10; acc[1][1] = c11;
  acc[2][0] = c20; acc[2][1] = c21; acc[3][0] = c30; acc[3][1] = c31;
  acc[4][0] = c40; acc[4][1] = c41; acc[5][0] = c50; acc[5][1] = c51;
  acc[6][0] = c60; acc[6][1] = c61; acc[7][0] = c70; acc[7][1] = c71;
  for (int r = 0; r < PACKED_R; r++)
    {
      _mm512_mask_storeu_epi32 (out + r * ld_out, mask0, acc[r][0]);
      _mm512_mask_storeu_epi32 (out + r * ld_out + 16, mask1, acc[r][1]);
    }
  block_packed_vnni (PACKED_R, a0, k, panels, a_sum, cols, whole, q1, out, ld_out);
}

VNNI_TARGET static void
block_packed_vnni_any (int           rows,
                       const gint8  *a0,
                       gsize         k,
                       const guint8 *panels,
                       const gint32 *a_sum,
                       int           cols,
                       gsize         q0,
                       gsize         q1,
                       gint32       *out,
                       gsize         ld_out)
{
#define CASE(R) \
  case R: block_packed_vnni (R, a0, k, panels, a_sum, cols, q0, q1, out, ld_out); return;
  switch (rows)
    {
    CASE (1) CASE (2) CASE (3) CASE (4) CASE (5) CASE (6) CASE (7)
    default: g_assert_not_reached ();
    }
#undef CASE
}

/* The packed kernel's K step, in quads: 64 quads (256 bytes) of a panel
 * pair are 8 KiB and the 8 rows of A 2 KiB, so the pair stays in a 32 KiB
 * L1 while every 8-row block of the tile passes over it (the tile's A slice,
 * up to PACKED_TILE_M × 256 = 32 KiB, comes from L2). Whole K at once, as
 * before, streamed the pair (32 KiB at K = 1024) from L2 for every block. */
#define PACKED_KQ 64

VNNI_TARGET static void
tile_vnni_packed (const DcQuantMatrix *a,
                  const DcQuantMatrix *b,
                  const gint32        *a_sum,
                  const guint8        *packed,
                  gsize                m0,
                  gsize                m1,
                  gsize                n0,
                  gsize                n1,
                  gint32              *out,
                  gsize                ld_out)
{
  const gsize K = a->k, k4 = (K + 3) / 4;

  for (gsize q0 = 0; q0 < k4; q0 += PACKED_KQ)
    {
      const gsize q1 = MIN (q0 + PACKED_KQ, k4);

      /* n0 is a multiple of the tile width, so of 32: blocks start on a panel pair. */
      for (gsize n = n0; n < n1; n += 32)
        {
          const guint8 *panels = packed + (n / 16) * k4 * 64;
          const int cols = (int) MIN ((gsize) 32, n1 - n);

          for (gsize m = m0; m < m1; m += PACKED_R)
            {
              const int rows = (int) MIN ((gsize) PACKED_R, m1 - m);
              gint32 *o = out + (m - m0) * ld_out + (n - n0);

              if (rows == PACKED_R)
                block_packed8_vnni (a->q + m * K, K, panels, a_sum + m, cols, q0, q1, o, ld_out);
              else
                block_packed_vnni_any (rows, a->q + m * K, K, panels, a_sum + m, cols, q0, q1,
                                       o, ld_out);
            }
        }
    }
}


/* AMX-INT8 (Sapphire Rapids and later): one tdpbsud multiplies a tile of
 * 16 rows × 64 bytes of A (signed) by a tile of 16 quads × 16 vectors of B
 * (unsigned: the packed kernel's flipped panels, whose 64-byte quads are
 * exactly the B tile's rows) into 16 × 16 int32 sums, 16,384 multiply-adds
 * an instruction against vpdpbusd's 64. The offset of B's flip comes off
 * with A's row sums as in the VNNI kernels, and the sums are exact int32
 * in any order (file header), so the bits are the VNNI kernels'. Tiles:
 * 0–3 the 2 × 2 accumulators (32 rows × 32 vectors), 4–5 A, 6–7 B. A's
 * bytes past K would meet B's padding (flipped zeros, +128) and the next
 * panel's quads: a K step that reaches past K, and rows past M, are copied
 * into a zeroed 16 × 64 buffer first (zeros add nothing, whatever B holds
 * there); the repack buffer ends with AMX_B_OVERRUN spare bytes, because
 * the last step's B tile reads whole 16-quad rows. */
#define AMX_TARGET __attribute__ ((target ("avx512f,avx512bw,avx512vnni,amx-tile,amx-int8")))
#define AMX_STEP 64   /* bytes of K per tdpbsud */

typedef struct
{
  guint8  palette;
  guint8  start_row;
  guint8  reserved[14];
  guint16 colsb[16];
  guint8  rows[16];
} AmxTileConfig;

/* Whether this thread has loaded the kernel's tile configuration: nothing
 * else in the process uses AMX, so it stays loaded (the kernel saves it
 * with the thread's state). */
static __thread gboolean amx_configured;

AMX_TARGET static void
amx_configure (void)
{
  AmxTileConfig config = { 0 };

  config.palette = 1;
  for (int t = 0; t < 8; t++)
    {
      config.colsb[t] = 64;
      config.rows[t] = 16;
    }
  _tile_loadconfig (&config);
  amx_configured = TRUE;
}

/* A's 16 rows from @m over K step [k0, k0 + 64) as a tile source: in place
 * when every byte is A's own, else copied into @buf (zeros elsewhere).
 * Returns the base, and its stride in @stride. */
static inline const gint8 *
amx_a_rows (const DcQuantMatrix *a,
            gsize                m,
            gsize                k0,
            gint8               *buf,
            gsize               *stride)
{
  const gsize M = a->n_vectors, K = a->k;
  const gsize rows = MIN ((gsize) 16, M - MIN (m, M)), len = MIN ((gsize) AMX_STEP, K - k0);

  if (rows == 16 && len == AMX_STEP)
    {
      *stride = K;
      return a->q + m * K + k0;
    }
  memset (buf, 0, 16 * AMX_STEP);
  for (gsize r = 0; r < rows; r++)
    memcpy (buf + r * AMX_STEP, a->q + (m + r) * K + k0, len);
  *stride = AMX_STEP;
  return buf;
}

/* One 16 × 16 accumulator tile's sums, less 128 · Σ a of each row
 * (wrapping, exact), into the outputs of @out that lie inside the tile
 * [m0, m1) × [n0, n1). */
AMX_TARGET static inline void
amx_store (const gint32 *c,
           const gint32 *a_sum,
           gsize         m,
           gsize         n,
           gsize         m0,
           gsize         m1,
           gsize         n0,
           gsize         n1,
           gint32       *out,
           gsize         ld_out)
{
  __mmask16 cols;

  if (m >= m1 || n >= n1)
    return;
  cols = (__mmask16) (n1 - n >= 16 ? 0xffff : (1u << (n1 - n)) - 1);
  for (gsize r = 0; r < MIN ((gsize) 16, m1 - m); r++)
    {
      const __m512i corr = _mm512_set1_epi32 ((int) ((guint32) a_sum[m + r] << 7));

      _mm512_mask_storeu_epi32 (out + (m - m0 + r) * ld_out + (n - n0), cols,
                                _mm512_sub_epi32 (_mm512_load_si512 (c + r * 16), corr));
    }
}

AMX_TARGET static void
tile_amx (const DcQuantMatrix *a,
          const DcQuantMatrix *b,
          const gint32        *a_sum,
          const guint8        *packed,
          gsize                m0,
          gsize                m1,
          gsize                n0,
          gsize                n1,
          gint32              *out,
          gsize                ld_out)
{
  const gsize K = a->k, k4 = (K + 3) / 4;
  gint8 buf0[16 * AMX_STEP] __attribute__ ((aligned (64)));
  gint8 buf1[16 * AMX_STEP] __attribute__ ((aligned (64)));
  gint32 c[4][16 * 16] __attribute__ ((aligned (64)));

  if (!amx_configured)
    amx_configure ();
  /* n0 is a multiple of the tile width, so of 32: blocks start on a panel pair. */
  for (gsize n = n0; n < n1; n += 32)
    {
      const guint8 *panel0 = packed + (n / 16) * k4 * 64;
      const guint8 *panel1 = panel0 + k4 * 64;

      for (gsize m = m0; m < m1; m += 32)
        {
          _tile_zero (0);
          _tile_zero (1);
          _tile_zero (2);
          _tile_zero (3);
          for (gsize k0 = 0; k0 < K; k0 += AMX_STEP)
            {
              gsize s0, s1;
              const gint8 *a0 = amx_a_rows (a, m, k0, buf0, &s0);
              const gint8 *a1 = amx_a_rows (a, m + 16, k0, buf1, &s1);

              _tile_loadd (4, a0, s0);
              _tile_loadd (5, a1, s1);
              _tile_loadd (6, panel0 + k0 * 16, 64);
              _tile_loadd (7, panel1 + k0 * 16, 64);
              _tile_dpbsud (0, 4, 6);
              _tile_dpbsud (1, 4, 7);
              _tile_dpbsud (2, 5, 6);
              _tile_dpbsud (3, 5, 7);
            }
          _tile_stored (0, c[0], 64);
          _tile_stored (1, c[1], 64);
          _tile_stored (2, c[2], 64);
          _tile_stored (3, c[3], 64);
          amx_store (c[0], a_sum, m, n, m0, m1, n0, n1, out, ld_out);
          amx_store (c[1], a_sum, m, n + 16, m0, m1, n0, n1, out, ld_out);
          amx_store (c[2], a_sum, m + 16, n, m0, m1, n0, n1, out, ld_out);
          amx_store (c[3], a_sum, m + 16, n + 16, m0, m1, n0, n1, out, ld_out);
        }
    }
}

#endif /* DC_GEMM_X86 */

#ifdef DC_GEMM_NEON

static gint32
dot_neon (const gint8 *x,
          const gint8 *y,
          gsize        k)
{
  int32x4_t acc = vdupq_n_s32 (0);
  gsize i = 0;

  for (; i + 16 <= k; i += 16)
    {
      int8x16_t va = vld1q_s8 (x + i);
      int8x16_t vb = vld1q_s8 (y + i);

      acc = vpadalq_s16 (acc, vmull_s8 (vget_low_s8 (va), vget_low_s8 (vb)));
      acc = vpadalq_s16 (acc, vmull_high_s8 (va, vb));
    }
  return vaddvq_s32 (acc) + dot_scalar (x + i, y + i, k - i);
}

/* One row of A against four vectors of B: each A chunk is loaded once. */
static void
block_1x4_neon (const gint8 *a0,
                const gint8 *const *bs,
                gsize        k,
                gint32      *out)
{
  int32x4_t acc[4] = { vdupq_n_s32 (0), vdupq_n_s32 (0), vdupq_n_s32 (0), vdupq_n_s32 (0) };
  gsize i = 0;

  for (; i + 16 <= k; i += 16)
    {
      int8x16_t va = vld1q_s8 (a0 + i);

      for (int j = 0; j < 4; j++)
        {
          int8x16_t vb = vld1q_s8 (bs[j] + i);

          acc[j] = vpadalq_s16 (acc[j], vmull_s8 (vget_low_s8 (va), vget_low_s8 (vb)));
          acc[j] = vpadalq_s16 (acc[j], vmull_high_s8 (va, vb));
        }
    }
  for (int j = 0; j < 4; j++)
    out[j] = vaddvq_s32 (acc[j]) + dot_scalar (a0 + i, bs[j] + i, k - i);
}

static void
tile_neon (const DcQuantMatrix *a,
           const DcQuantMatrix *b,
           const gint32        *row_sum,
           const guint8        *packed,
           gsize                m0,
           gsize                m1,
           gsize                n0,
           gsize                n1,
           gint32              *out,
           gsize                ld_out)
{
  const gsize K = a->k;
  gsize n = n0;

  for (; n + 4 <= n1; n += 4)
    {
      const gint8 *bs[4] = { b->q + n * K, b->q + (n + 1) * K, b->q + (n + 2) * K,
                             b->q + (n + 3) * K };

      for (gsize m = m0; m < m1; m++)
        block_1x4_neon (a->q + m * K, bs, K, out + (m - m0) * ld_out + (n - n0));
    }
  for (; n < n1; n++)
    for (gsize m = m0; m < m1; m++)
      out[(m - m0) * ld_out + (n - n0)] = dot_neon (a->q + m * K, b->q + n * K, K);
}

#endif /* DC_GEMM_NEON */

static void
epilogue_scalar (const gint32 *acc,
                 gint32        ea,
                 const gint32 *eb,
                 gsize         n,
                 float        *c)
{
  for (gsize j = 0; j < n; j++)
    c[j] = dc_gemm_epilogue_inline (acc[j], ea, eb[j]);
}

#ifdef DC_GEMM_X86

/* dc_gemm_epilogue_inline eight lanes at a time, on the same bits: vcvtdq2ps
 * rounds to nearest even like the scalar conversion (the default MXCSR,
 * checked at start-up by the FP-environment check), then the exponent field
 * is moved by ea + eb with the same flush (≤ 0 → signed zero) and saturation
 * (≥ 255 → signed FLT_MAX); acc = 0 gives +0. The exponents are within
 * [DC_GEMM_EXPONENT_MIN, DC_GEMM_EXPONENT_MAX], so the int32 sum cannot wrap. */
__attribute__ ((target ("avx2"))) static void
epilogue_avx2 (const gint32 *acc,
               gint32        ea,
               const gint32 *eb,
               gsize         n,
               float        *c)
{
  const __m256i sign_mask = _mm256_set1_epi32 ((int) 0x80000000u);
  const __m256i keep_mask = _mm256_set1_epi32 ((int) 0x807fffffu);
  const __m256i exp_mask = _mm256_set1_epi32 (0xff);
  const __m256i max_bits = _mm256_set1_epi32 (0x7f7fffff);
  const __m256i one = _mm256_set1_epi32 (1), top = _mm256_set1_epi32 (254);
  const __m256i vea = _mm256_set1_epi32 (ea);
  gsize j = 0;

  for (; j + 8 <= n; j += 8)
    {
      __m256i va = _mm256_loadu_si256 ((const __m256i *) (acc + j));
      __m256i bits = _mm256_castps_si256 (_mm256_cvtepi32_ps (va));
      __m256i sign = _mm256_and_si256 (bits, sign_mask);
      __m256i biased = _mm256_add_epi32 (_mm256_and_si256 (_mm256_srli_epi32 (bits, 23), exp_mask),
                                         _mm256_add_epi32 (vea, _mm256_loadu_si256 ((const __m256i *) (eb + j))));
      __m256i r = _mm256_or_si256 (_mm256_and_si256 (bits, keep_mask), _mm256_slli_epi32 (biased, 23));

      r = _mm256_blendv_epi8 (r, sign, _mm256_cmpgt_epi32 (one, biased));
      r = _mm256_blendv_epi8 (r, _mm256_or_si256 (sign, max_bits), _mm256_cmpgt_epi32 (biased, top));
      r = _mm256_andnot_si256 (_mm256_cmpeq_epi32 (va, _mm256_setzero_si256 ()), r);
      _mm256_storeu_si256 ((__m256i *) (c + j), r);
    }
  epilogue_scalar (acc + j, ea, eb + j, n - j, c + j);
}

/* The same sixteen lanes at a time for the AVX-512 ISA (the AVX2 form was
 * 6.7 % of a lone training step on the VM, s31): the same operations, the
 * blends as masks, and the ragged end as one masked block (no call into
 * the scalar code from here: see dc-math-vector.c's exp_shifted_avx2 ()). */
__attribute__ ((target ("avx512f"))) static void
epilogue_avx512 (const gint32 *acc,
                 gint32        ea,
                 const gint32 *eb,
                 gsize         n,
                 float        *c)
{
  const __m512i sign_mask = _mm512_set1_epi32 ((int) 0x80000000u);
  const __m512i keep_mask = _mm512_set1_epi32 ((int) 0x807fffffu);
  const __m512i exp_mask = _mm512_set1_epi32 (0xff);
  const __m512i max_bits = _mm512_set1_epi32 (0x7f7fffff);
  const __m512i one = _mm512_set1_epi32 (1), top = _mm512_set1_epi32 (254);
  const __m512i vea = _mm512_set1_epi32 (ea);
  const __mmask16 all = 0xffff;
  gsize j = 0;

  for (; j < n; j += 16)
    {
      __mmask16 in = n - j >= 16 ? (__mmask16) 0xffff : (__mmask16) ((1u << (n - j)) - 1);
      __m512i va = _mm512_maskz_loadu_epi32 (in, acc + j);
      /* (maskz forms with every lane set: GCC 12's unmasked forms trip
       * -Wmaybe-uninitialized on their undefined pass-through operand.) */
      __m512i bits = _mm512_castps_si512 (_mm512_maskz_cvtepi32_ps (all, va));
      __m512i sign = _mm512_and_si512 (bits, sign_mask);
      __m512i biased = _mm512_add_epi32 (_mm512_and_si512 (_mm512_maskz_srli_epi32 (all, bits, 23),
                                                           exp_mask),
                                         _mm512_add_epi32 (vea, _mm512_maskz_loadu_epi32 (in, eb + j)));
      __m512i r = _mm512_or_si512 (_mm512_and_si512 (bits, keep_mask),
                                   _mm512_maskz_slli_epi32 (all, biased, 23));

      r = _mm512_mask_mov_epi32 (r, _mm512_cmpgt_epi32_mask (one, biased), sign);
      r = _mm512_mask_mov_epi32 (r, _mm512_cmpgt_epi32_mask (biased, top),
                                 _mm512_or_si512 (sign, max_bits));
      r = _mm512_maskz_mov_epi32 (_mm512_cmpneq_epi32_mask (va, _mm512_setzero_si512 ()), r);
      _mm512_mask_storeu_epi32 (c + j, in, r);
    }
}

#endif /* DC_GEMM_X86 */

/* The scalar ISA keeps the scalar epilogue (it is the readable path); the
 * AVX-512 ISA uses the AVX-512 one, AVX2 the AVX2 one. Its output is part
 * of what kernels_verify compares with the reference. */
static EpilogueFunc
epilogue_func_for (DcGemmIsa isa)
{
#ifdef DC_GEMM_X86
  if (isa == DC_GEMM_ISA_AVX512_VNNI && dc_gemm_isa_supported (DC_GEMM_ISA_AVX512_VNNI))
    return epilogue_avx512;
  if ((isa == DC_GEMM_ISA_AVX2 || isa == DC_GEMM_ISA_AVX512_VNNI) &&
      dc_gemm_isa_supported (DC_GEMM_ISA_AVX2))
    return epilogue_avx2;
#endif
  return epilogue_scalar;
}

/* The ISA's kernel for an (m, ·, k) product, AMX's from K = @amx_min_k
 * on (0: never). */
static const Kernel *
kernel_choose (DcGemmIsa isa,
               gsize     m,
               gsize     k,
               gsize     amx_min_k)
{
  static const Kernel scalar = { "scalar", tile_scalar };
#ifdef DC_GEMM_X86
  static const Kernel avx2 = { "avx2", tile_avx2 };
  static const Kernel vnni = { "avx512-vnni", tile_vnni };
  static const Kernel vnni_skinny = { "avx512-vnni-skinny", tile_vnni_skinny };
  static const Kernel vnni_packed = { "avx512-vnni-packed", tile_vnni_packed };
  static const Kernel amx = { "avx512-amx", tile_amx };
#endif
#ifdef DC_GEMM_NEON
  static const Kernel neon = { "neon", tile_neon };
#endif

  g_return_val_if_fail (dc_gemm_isa_supported (isa), &scalar);

  switch (isa)
    {
#ifdef DC_GEMM_X86
    case DC_GEMM_ISA_AVX2: return &avx2;
    case DC_GEMM_ISA_AVX512_VNNI:
      if (amx_min_k > 0 && m > SKINNY_M && k >= amx_min_k)
        return &amx;
      return m <= SKINNY_M ? &vnni_skinny
           : k <= PACKED_MAX_K || m >= PACKED_MIN_M ? &vnni_packed : &vnni;
#endif
#ifdef DC_GEMM_NEON
    case DC_GEMM_ISA_NEON: return &neon;
#endif
    case DC_GEMM_ISA_SCALAR:
    default:
      return &scalar;
    }
}

static const Kernel *
kernel_for (DcGemmIsa isa,
            gsize     m,
            gsize     k)
{
  if (isa == DC_GEMM_ISA_AVX512_VNNI && dc_gemm_amx_state () == DC_GEMM_AMX_ACTIVE)
    return kernel_choose (isa, m, k, amx_min_k_active);
  return kernel_choose (isa, m, k, 0);
}

/* For the gate's tests only: DC_TEST_BREAK_KERNEL=name[,name…] or "all"
 * makes the named SIMD kernels corrupt one value of every tile, so that the
 * gate must catch each of them. Read once per process: this is asked for
 * every product, and the tests that set it do so in a subprocess. */
static gboolean
kernel_broken_for_test (const Kernel *kernel)
{
  static gsize read = 0;
  static char *spec = NULL;

  if (g_once_init_enter (&read))
    {
      spec = g_strdup (g_getenv ("DC_TEST_BREAK_KERNEL"));
      g_once_init_leave (&read, 1);
    }
  if (g_str_equal (kernel->name, "scalar"))
    return FALSE;
  return dc_test_break_matches (spec, kernel->name);
}

typedef struct
{
  const DcQuantMatrix *a;
  const DcQuantMatrix *b;
  const gint32        *row_sum; /* Σ_i a[m][i] per row of A, for VNNI's offset */
  const guint8        *packed;  /* B repacked for the packed VNNI kernel, or NULL */
  TileFunc             tile;
  gboolean             broken;  /* for the gate's tests: corrupt each tile */
  EpilogueFunc         epilogue;
  gint32              *acc;     /* (M, N) int32 output, or NULL */
  float               *c;       /* (M, N) f32 output, or NULL */
  gsize                tile_m;  /* ≤ MAX_TILE_M, a multiple of 8 */
  gsize                tile_n;  /* ≤ MAX_TILE_N, a multiple of 32 */
  gsize                tiles_m;
  gsize                tiles_n;
  guint                n_threads;
} Job;

/* Computes tiles [first, end) (a DcParallelFunc); each whole, see the file
 * header for why which thread computes a tile cannot change a bit. */
static void
run_tiles (gsize    first,
           gsize    end,
           guint    worker,
           gpointer data)
{
  Job *job = data;
  gint32 scratch[MAX_TILE_M * MAX_TILE_N];

  for (gsize t = first; t < end; t++)
    {
      const gsize M = job->a->n_vectors, N = job->b->n_vectors;
      gsize m0 = (t / job->tiles_n) * job->tile_m, n0 = (t % job->tiles_n) * job->tile_n;
      gsize m1 = MIN (m0 + job->tile_m, M), n1 = MIN (n0 + job->tile_n, N);

      if (job->acc != NULL)
        {
          job->tile (job->a, job->b, job->row_sum, job->packed, m0, m1, n0, n1,
                     job->acc + m0 * N + n0, N);
          if (G_UNLIKELY (job->broken))
            job->acc[m0 * N + n0] ^= 1;
          continue;
        }

      job->tile (job->a, job->b, job->row_sum, job->packed, m0, m1, n0, n1, scratch,
                 job->tile_n);
      if (G_UNLIKELY (job->broken))
        scratch[0] ^= 1;
      for (gsize m = m0; m < m1; m++)
        job->epilogue (scratch + (m - m0) * job->tile_n, job->a->exponent[m], job->b->exponent + n0,
                       n1 - n0, job->c + m * N + n0);
    }
}

/* The work below which a helper thread costs more than it saves (waking a
 * pooled thread takes microseconds on a quiet machine, far more on a loaded
 * one): 2^20 multiply-adds (about 3 µs of one core's VNNI work, 8 of
 * AVX2's), or 2^18 bytes of B for products that stream their weights (about
 * 13 µs at 20 GB/s); one-row products have a smaller share, below. */
#define MIN_MACS_PER_THREAD (1u << 20)
#define MIN_B_BYTES_PER_THREAD (1u << 18)

/* A one-row (skinny) product's share: 64 KiB of weights, about 4 µs of one
 * core streaming at 15 GB/s, still several times a claim by a helper that
 * is spinning (decode's products come microseconds apart, and a ring's hop
 * warms them). With 256 KiB a decode step's attention projections (576 ×
 * 576) ran on one thread and its MLP's on 3 and 6 of the H200 host's 16
 * cores; with 64 KiB they use 5–16. Late helpers cost nothing: the caller
 * claims the tiles they do not. */
#define MIN_B_BYTES_PER_THREAD_SKINNY (1u << 16)

/* DC_GEMM_SKINNY_KIB=N (4–4096) sets that share, for comparing it with
 * the old 256 on one machine in one sitting; the split never changes a
 * bit. Read once per process. */
static double
skinny_share_bytes (void)
{
  static gsize read = 0;
  static double bytes = MIN_B_BYTES_PER_THREAD_SKINNY;

  if (g_once_init_enter (&read))
    {
      const char *env = g_getenv ("DC_GEMM_SKINNY_KIB");

      if (env != NULL && *env != '\0')
        bytes = 1024.0 * CLAMP (g_ascii_strtoll (env, NULL, 10), 4, 4096);
      g_once_init_leave (&read, 1);
    }
  return bytes;
}

/* A product with fewer tiles than this has smaller tiles, down to 8 × 32,
 * while each keeps at least MIN_MACS_PER_THREAD of work (a claim costs far
 * less): the weight gradients of the width-128 model (128 × 128 and
 * 128 × 384 outputs over K = 4096) had 8 to 24 tiles of 32 × 64, so 16
 * threads ran them in one or two uneven rounds with cores idle. 64 tiles keep 16 threads busy within a
 * quarter of a tile. Chosen from the shape alone; and since a tile is never
 * split along K, its size cannot change a bit either. */
#define MIN_TILES 64

/* DC_GEMM_TILE=MxN (M a multiple of 8 up to MAX_TILE_M, N of 32 up to
 * MAX_TILE_N) sets the largest tile, for measuring tile sizes against each
 * other on one machine; tiles never change a bit. Read once per process. */
static void
tile_size_for_test (gsize *tile_m,
                    gsize *tile_n)
{
  static gsize read = 0;
  static gsize m = 0, n = 0;

  if (g_once_init_enter (&read))
    {
      const char *env = g_getenv ("DC_GEMM_TILE");
      unsigned tm = 0, tn = 0;

      if (env != NULL && sscanf (env, "%ux%u", &tm, &tn) == 2 && tm >= 8 && tm % 8 == 0 &&
          tm <= MAX_TILE_M && tn >= 32 && tn % 32 == 0 && tn <= MAX_TILE_N)
        {
          m = tm;
          n = tn;
        }
      g_once_init_leave (&read, 1);
    }
  if (m != 0)
    {
      *tile_m = m;
      *tile_n = n;
    }
}

static void
choose_tiles (Job *job)
{
  const gsize M = job->a->n_vectors, N = job->b->n_vectors;
  const double macs = (double) M * N * job->a->k;
  const gboolean packed = job->packed != NULL;
#ifdef DC_GEMM_X86
  /* AMX computes 32 rows at a time: smaller tiles would compute padding. */
  const gsize min_m = job->tile == tile_amx ? 32 : 8;
#else
  const gsize min_m = 8;
#endif

  job->tile_m = packed ? PACKED_TILE_M : TILE_M;
  job->tile_n = packed ? PACKED_TILE_N : TILE_N;
  tile_size_for_test (&job->tile_m, &job->tile_n);
  for (;;)
    {
      gsize tiles = ((M + job->tile_m - 1) / job->tile_m) * ((N + job->tile_n - 1) / job->tile_n);
      gsize next_m = job->tile_m, next_n = job->tile_n;

      if (tiles >= MIN_TILES)
        break;
      /* Halve the longer side of the tile that still splits the output. */
      if (job->tile_n > 32 && N > 32)
        next_n = job->tile_n / 2;
      else if (job->tile_m > min_m && M > min_m)
        next_m = job->tile_m / 2;
      else
        break;
      /* A skinny product's tiles are columns of B, split by bytes
       * (run_job), down to 32 columns: 576 outputs in 18 tiles, not 9, so
       * 5 threads take them in four even rounds. */
      if (M > SKINNY_M &&
          macs / (((M + next_m - 1) / next_m) * ((N + next_n - 1) / next_n)) <
          (double) MIN_MACS_PER_THREAD)
        break;
      job->tile_m = next_m;
      job->tile_n = next_n;
    }
  job->tiles_m = (M + job->tile_m - 1) / job->tile_m;
  job->tiles_n = (N + job->tile_n - 1) / job->tile_n;
}

/* Runs @job's tiles on the caller and up to n_threads - 1 helpers of the
 * engine's pool (dc-parallel.h), one tile per claim. */
static void
run_job (Job *job)
{
  const gsize n_tiles = job->tiles_m * job->tiles_n;
  const double b_bytes = (double) job->b->n_vectors * job->a->k;
  const double macs = b_bytes * job->a->n_vectors;
  const double b_share = job->a->n_vectors <= SKINNY_M ? skinny_share_bytes ()
                                                        : MIN_B_BYTES_PER_THREAD;
  const double work = MAX (macs / MIN_MACS_PER_THREAD, b_bytes / b_share);
  guint useful = (guint) MIN (work, (double) G_MAXUINT);

  job->n_threads = (guint) MIN ((gsize) MIN (job->n_threads, MAX (useful, 1)), n_tiles);
  dc_parallel_for (MAX (job->n_threads, 1), n_tiles, 1, run_tiles, job);
}

/* With @fill, the operands are filled in the preparation's pool call
 * first; FALSE (nothing computed) when a fill failed. */
static gboolean
run_cpu (const DcQuantMatrix *a,
         const DcQuantMatrix *b,
         const DcGemmFill    *fill,
         gint32              *acc,
         float               *c,
         DcGemmIsa            isa,
         guint                n_threads,
         const Kernel        *kernel)
{
  g_autofree gint32 *row_sum = NULL;
  guint8 *packed = NULL;  /* the thread's repack buffer: not freed here */
  Job job_box = { 0 }, *job = &job_box;
  gboolean failed = FALSE, prepared = fill == NULL;

  g_return_val_if_fail (a->k == b->k, FALSE);

  job->a = a;
  job->b = b;
  job->tile = kernel->tile;
  job->broken = kernel_broken_for_test (kernel);
  job->epilogue = epilogue_func_for (isa);
  job->acc = acc;
  job->c = c;
  job->n_threads = MAX (n_threads, 1);

#ifdef DC_GEMM_X86
  if (isa == DC_GEMM_ISA_AVX512_VNNI)
    row_sum = g_new (gint32, a->n_vectors);
  if (kernel->tile == tile_vnni_packed || kernel->tile == tile_amx)
    {
      packed = pack_b_vnni (a, b, row_sum, fill,
                            fill != NULL ? MIN (fill->n_threads, job->n_threads) : job->n_threads,
                            &failed);
      prepared = fill == NULL || packed != NULL;
      /* Out of memory for the copy: the dot-product blocks need none. */
      if (packed == NULL)
        job->tile = tile_vnni;
    }
#endif
  if (!prepared)
    {
      /* The fill, with A's row sums where the kernel needs them. */
      failed = !prepare (a, b, fill, NULL, row_sum, 1, 1, MIN (fill->n_threads, job->n_threads));
    }
#ifdef DC_GEMM_X86
  else if (isa == DC_GEMM_ISA_AVX512_VNNI && packed == NULL)
    row_sums_vnni (a->q, a->n_vectors, a->k, row_sum);
#endif
  if (failed)
    return FALSE;
  job->row_sum = row_sum;
  job->packed = packed;
  choose_tiles (job);
  /* The pool's chunk counter is a gint; no allocatable output comes near this. */
  g_assert (job->tiles_m * job->tiles_n < G_MAXINT / 2);
  run_job (job);
  return TRUE;
}

void
dc_gemm_cpu_i32 (const DcQuantMatrix *a,
                 const DcQuantMatrix *b,
                 gint32              *acc,
                 DcGemmIsa            isa,
                 guint                n_threads)
{
  run_cpu (a, b, NULL, acc, NULL, isa, n_threads, kernel_for (isa, a->n_vectors, a->k));
}

void
dc_gemm_cpu (const DcQuantMatrix *a,
             const DcQuantMatrix *b,
             float               *c,
             DcGemmIsa            isa,
             guint                n_threads)
{
  run_cpu (a, b, NULL, NULL, c, isa, n_threads, kernel_for (isa, a->n_vectors, a->k));
}

gboolean
dc_gemm_cpu_fill (const DcQuantMatrix *a,
                  const DcQuantMatrix *b,
                  const DcGemmFill    *fill,
                  float               *c,
                  DcGemmIsa            isa,
                  guint                n_threads)
{
  return run_cpu (a, b, fill, NULL, c, isa, n_threads, kernel_for (isa, a->n_vectors, a->k));
}

gboolean
dc_gemm_cpu_fill_operands (const DcQuantMatrix *a,
                           const DcQuantMatrix *b,
                           const DcGemmFill    *fill)
{
  return prepare (a, b, fill, NULL, NULL, 1, 1, fill->n_threads);
}
