/* test-engine-gemm-cpu.c: every CPU path (scalar, AVX2, AVX-512 VNNI where the
 * CPU has it) and every thread count gives the reference's bits; metamorphic
 * properties of the rule; and the bug corpus of INT8 engines, one test each.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>

#include "engine/dc-gemm-backend.h"
#include "engine/dc-gemm-cpu.h"
#include "engine/dc-gemm-peak.h"
#include "engine/dc-parallel.h"

static const guint thread_counts[] = { 1, 2, 3, 7 };

static DcQuantMatrix *
random_matrix (GRand *rand,
               gsize  n,
               gsize  k)
{
  g_autoptr(GError) error = NULL;
  DcQuantMatrix *m = dc_quant_matrix_new (n, k, &error);

  g_assert_no_error (error);
  for (gsize i = 0; i < n * k; i++)
    m->q[i] = (gint8) g_rand_int_range (rand, -127, 128);
  for (gsize v = 0; v < n; v++)
    m->exponent[v] = g_rand_int_range (rand, -20, 21);
  return m;
}

/* Every supported ISA × thread count against the reference, int32 and f32,
 * compared as bits. */
static void
check_all_paths (const DcQuantMatrix *a,
                 const DcQuantMatrix *b)
{
  const gsize M = a->n_vectors, N = b->n_vectors;
  g_autofree gint32 *ref_acc = g_new (gint32, M * N);
  g_autofree float *ref_c = g_new (float, M * N);
  g_autofree gint32 *acc = g_new (gint32, M * N);
  g_autofree float *c = g_new (float, M * N);

  dc_gemm_reference_i32 (a, b, ref_acc);
  dc_gemm_reference (a, b, ref_c);

  for (int isa = 0; isa < DC_GEMM_N_ISAS; isa++)
    {
      if (!dc_gemm_isa_supported (isa))
        continue;
      for (gsize t = 0; t < G_N_ELEMENTS (thread_counts); t++)
        {
          memset (acc, 0x55, M * N * sizeof *acc);
          memset (c, 0x55, M * N * sizeof *c);
          dc_gemm_cpu_i32 (a, b, acc, isa, thread_counts[t]);
          dc_gemm_cpu (a, b, c, isa, thread_counts[t]);
          if (memcmp (acc, ref_acc, M * N * sizeof *acc) != 0 ||
              memcmp (c, ref_c, M * N * sizeof *c) != 0)
            g_error ("%s with %u threads differs from the reference at M=%" G_GSIZE_FORMAT
                     " N=%" G_GSIZE_FORMAT " K=%" G_GSIZE_FORMAT,
                     dc_gemm_isa_to_string (isa), thread_counts[t], M, N, a->k);
        }
    }
}

static void
test_isas_reported (void)
{
  for (int isa = 0; isa < DC_GEMM_N_ISAS; isa++)
    g_test_message ("%s: %s", dc_gemm_isa_to_string (isa),
                    dc_gemm_isa_supported (isa) ? "supported" : "not on this CPU");
  g_test_message ("best: %s", dc_gemm_isa_to_string (dc_gemm_isa_best ()));
  g_assert_true (dc_gemm_isa_supported (DC_GEMM_ISA_SCALAR));
}

/* Issue 14: the measured peak exists for every SIMD kernel this CPU runs,
 * on several threads at once (the start wait must not hang when the pool
 * brings them), and is refused (-1) for kernels it has no loop for. Only
 * signs are checked: the rate itself depends on the machine's load. */
static void
test_peak_measured (void)
{
  static const guint threads[] = { 1, 3 };
  gboolean any = FALSE;

  g_assert_cmpfloat (dc_gemm_peak_measure ("scalar", 1, 0.01), ==, -1);
  g_assert_cmpfloat (dc_gemm_peak_measure ("no-such-kernel", 2, 0.01), ==, -1);
  for (int isa = DC_GEMM_ISA_AVX2; isa <= DC_GEMM_ISA_AVX512_VNNI; isa++)
    for (gsize t = 0; t < G_N_ELEMENTS (threads); t++)
      {
        double gops = dc_gemm_peak_measure (dc_gemm_isa_to_string (isa), threads[t], 0.02);

        if (!dc_gemm_isa_supported (isa))
          {
            g_assert_cmpfloat (gops, ==, -1);
            continue;
          }
        g_test_message ("%s peak on %u threads: %.0f GOPS", dc_gemm_isa_to_string (isa),
                        threads[t], gops);
        g_assert_cmpfloat (gops, >, 0);
        any = TRUE;
      }
  if (!any)
    g_test_skip ("this CPU has neither AVX2 nor AVX-512 VNNI: no loop to measure");
}

static void
test_edge_shapes (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (1);
  /* 1×K, K=1, tile and vector widths ±1 (64, 32), ragged everything. */
  static const gsize shapes[][3] = {
    { 1, 1, 1 }, { 1, 7, 1 }, { 1, 1, 300 }, { 5, 3, 1 }, { 2, 4, 32 }, { 2, 4, 31 },
    { 2, 4, 33 }, { 3, 5, 64 }, { 63, 65, 63 }, { 64, 64, 64 }, { 65, 63, 65 },
    { 1, 129, 95 }, { 130, 1, 97 }, { 67, 131, 129 }, { 128, 130, 200 },
    { 2, 4, 16 }, { 3, 5, 17 }, { 5, 9, 48 }, { 128, 128, 16 }, { 7, 6, 47 },
  };

  for (gsize s = 0; s < G_N_ELEMENTS (shapes); s++)
    {
      g_autoptr(DcQuantMatrix) a = random_matrix (rand, shapes[s][0], shapes[s][2]);
      g_autoptr(DcQuantMatrix) b = random_matrix (rand, shapes[s][1], shapes[s][2]);

      check_all_paths (a, b);
    }
}

static void
test_random_shapes (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (2);

  for (int round = 0; round < 25; round++)
    {
      gsize M = g_rand_int_range (rand, 1, 150);
      gsize N = g_rand_int_range (rand, 1, 150);
      gsize K = g_rand_int_range (rand, 1, 400);
      g_autoptr(DcQuantMatrix) a = random_matrix (rand, M, K);
      g_autoptr(DcQuantMatrix) b = random_matrix (rand, N, K);

      check_all_paths (a, b);
    }
}

static void
test_extreme_values (void)
{
  /* Every value at ±127: the largest vpmaddubsw pair sums (±32258), all sign
   * combinations, and zero rows mixed in. */
  g_autoptr(GRand) rand = g_rand_new_with_seed (3);
  g_autoptr(DcQuantMatrix) a = random_matrix (rand, 37, 333);
  g_autoptr(DcQuantMatrix) b = random_matrix (rand, 41, 333);

  for (gsize i = 0; i < a->n_vectors * a->k; i++)
    a->q[i] = g_rand_boolean (rand) ? 127 : -127;
  for (gsize i = 0; i < b->n_vectors * b->k; i++)
    b->q[i] = (i / 7) % 2 ? 127 : -127;
  memset (a->q + 5 * a->k, 0, a->k);
  memset (b->q + 9 * b->k, 0, b->k);
  check_all_paths (a, b);
}

/* Metamorphic: permuting K (the same permutation on both operands) leaves the
 * accumulators unchanged. */
static void
test_meta_k_permutation (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (4);
  const gsize M = 19, N = 23, K = 211;
  g_autoptr(DcQuantMatrix) a = random_matrix (rand, M, K);
  g_autoptr(DcQuantMatrix) b = random_matrix (rand, N, K);
  g_autoptr(DcQuantMatrix) pa = random_matrix (rand, M, K);
  g_autoptr(DcQuantMatrix) pb = random_matrix (rand, N, K);
  g_autofree gsize *perm = g_new (gsize, K);
  g_autofree gint32 *acc = g_new (gint32, M * N);
  g_autofree gint32 *pacc = g_new (gint32, M * N);

  for (gsize i = 0; i < K; i++)
    perm[i] = i;
  for (gsize i = K - 1; i > 0; i--)
    {
      gsize j = g_rand_int_range (rand, 0, i + 1), t = perm[i];

      perm[i] = perm[j];
      perm[j] = t;
    }
  for (gsize i = 0; i < K; i++)
    {
      for (gsize m = 0; m < M; m++)
        pa->q[m * K + i] = a->q[m * K + perm[i]];
      for (gsize n = 0; n < N; n++)
        pb->q[n * K + i] = b->q[n * K + perm[i]];
    }
  dc_gemm_cpu_i32 (a, b, acc, dc_gemm_isa_best (), 2);
  dc_gemm_cpu_i32 (pa, pb, pacc, dc_gemm_isa_best (), 3);
  g_assert_cmpmem (acc, M * N * sizeof *acc, pacc, M * N * sizeof *pacc);
}

/* Metamorphic: scaling a float row by 2^j scales its outputs by exactly 2^j
 * (the quantizer moves the exponent, the int8 values are unchanged), and a
 * zero row gives exactly zero. */
static void
test_meta_row_scaling_and_zero_row (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (5);
  const gsize M = 6, N = 9, K = 77;
  g_autofree float *x = g_new (float, M * K);
  g_autofree float *w = g_new (float, N * K);
  g_autofree float *c = g_new (float, M * N);
  g_autofree float *c2 = g_new (float, M * N);
  g_autoptr(DcQuantMatrix) a = dc_quant_matrix_new (M, K, NULL);
  g_autoptr(DcQuantMatrix) b = dc_quant_matrix_new (N, K, NULL);
  g_autoptr(GError) error = NULL;

  for (gsize i = 0; i < M * K; i++)
    x[i] = (float) g_rand_double_range (rand, -3.0, 3.0);
  for (gsize i = 0; i < N * K; i++)
    w[i] = (float) g_rand_double_range (rand, -3.0, 3.0);
  for (gsize i = 0; i < K; i++)
    x[4 * K + i] = 0.0f;

  dc_quant_pack ("x", x, K, 1, a, &error);
  dc_quant_pack ("w", w, K, 1, b, &error);
  g_assert_no_error (error);
  dc_gemm_cpu (a, b, c, dc_gemm_isa_best (), 2);

  for (gsize i = 0; i < K; i++)
    {
      x[1 * K + i] *= 8.0f;
      x[2 * K + i] *= 0.25f;
    }
  dc_quant_pack ("x", x, K, 1, a, &error);
  g_assert_no_error (error);
  dc_gemm_cpu (a, b, c2, dc_gemm_isa_best (), 1);

  for (gsize n = 0; n < N; n++)
    {
      g_assert_cmpfloat (c2[0 * N + n], ==, c[0 * N + n]);
      g_assert_cmpfloat (c2[1 * N + n], ==, c[1 * N + n] * 8.0f);
      g_assert_cmpfloat (c2[2 * N + n], ==, c[2 * N + n] * 0.25f);
      g_assert_cmpfloat (c[4 * N + n], ==, 0.0f);
    }
}

/* Metamorphic: the forms are one GEMM with roles swapped; C(a, b) = C(b, a)ᵀ
 * bit for bit, and Y = X·Wᵀ computed from rows equals the same product
 * packed from a transposed copy through the strides. */
static void
test_meta_transposition (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (6);
  const gsize M = 13, N = 29, K = 45;
  g_autofree float *x = g_new (float, M * K);
  g_autofree float *xt = g_new (float, K * M);
  g_autofree float *w = g_new (float, N * K);
  g_autofree float *c = g_new (float, M * N);
  g_autofree float *ct = g_new (float, N * M);
  g_autofree float *c3 = g_new (float, M * N);
  g_autoptr(DcQuantMatrix) a = dc_quant_matrix_new (M, K, NULL);
  g_autoptr(DcQuantMatrix) at = dc_quant_matrix_new (M, K, NULL);
  g_autoptr(DcQuantMatrix) b = dc_quant_matrix_new (N, K, NULL);
  g_autoptr(GError) error = NULL;

  for (gsize i = 0; i < M * K; i++)
    x[i] = (float) g_rand_double_range (rand, -1.0, 1.0);
  for (gsize i = 0; i < N * K; i++)
    w[i] = (float) g_rand_double_range (rand, -1.0, 1.0);
  for (gsize m = 0; m < M; m++)
    for (gsize k = 0; k < K; k++)
      xt[k * M + m] = x[m * K + k];

  dc_quant_pack ("x", x, K, 1, a, &error);
  dc_quant_pack ("xᵀ columns", xt, 1, M, at, &error);
  dc_quant_pack ("w", w, K, 1, b, &error);
  g_assert_no_error (error);
  g_assert_cmpmem (a->q, M * K, at->q, M * K);
  g_assert_cmpmem (a->exponent, M * 4, at->exponent, M * 4);

  dc_gemm_cpu (a, b, c, dc_gemm_isa_best (), 2);
  dc_gemm_cpu (b, a, ct, dc_gemm_isa_best (), 3);
  dc_gemm_cpu (at, b, c3, DC_GEMM_ISA_SCALAR, 1);
  for (gsize m = 0; m < M; m++)
    for (gsize n = 0; n < N; n++)
      {
        g_assert_cmpfloat (c[m * N + n], ==, ct[n * M + m]);
        g_assert_cmpfloat (c[m * N + n], ==, c3[m * N + n]);
      }
}

/* Bug corpus 1: -128 in vpmaddubsw. -(-128) wraps and 2 · 128 · 128
 * saturates int16; the quantizer never produces -128 and the checked entry
 * refuses it, so the SIMD path only ever sees values where it is exact. */
static void
test_bug_minus_128_saturation (void)
{
  g_autoptr(DcQuantMatrix) a = dc_quant_matrix_new (2, 64, NULL);
  g_autoptr(DcQuantMatrix) b = dc_quant_matrix_new (4, 64, NULL);
  g_autoptr(GError) error = NULL;
  float x[64];

  for (int i = 0; i < 64; i++)
    x[i] = -127.9f;
  x[0] = 127.0f;
  g_assert_true (dc_quant_pack ("x", x, 0, 1, a, &error));
  g_assert_no_error (error);
  for (int i = 0; i < 128; i++)
    g_assert_cmpint (a->q[i], >=, -127);

  a->q[3] = -128;
  g_assert_false (dc_quant_matrix_check ("x", a, &error));
  g_assert_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_RANGE);

  /* The worst legal case: pairs of (-127)·(-127) and 127·127 summing to
   * 32258 in int16, right below saturation. */
  memset (a->q, (gint8) -127, 128);
  memset (b->q, (gint8) -127, 128);
  memset (b->q + 128, 127, 128);
  check_all_paths (a, b);
}

/* Bug corpus 2: FMA contraction. x·y + z fused into one rounding changes
 * float results; -ffp-contract=off (set for all C) must hold in this build,
 * and the epilogue must equal an independent exact computation. */
static void
test_bug_fma_contraction (void)
{
  volatile float vx = 1.0f + 1.0f / 4096.0f, vz = -(1.0f + 1.0f / 2048.0f);
  float x = vx, z = vz;
  g_autoptr(GRand) rand = g_rand_new_with_seed (7);

  /* Rounded product: (1 + 2^-11 + 2^-24) → 1 + 2^-11 (tie to even), sum 0.
   * A fused multiply-add would give 2^-24. */
  g_assert_cmpfloat (x * x + z, ==, 0.0f);

  for (int i = 0; i < 100000; i++)
    {
      gint32 acc = (gint32) g_rand_int (rand);
      gint32 ea = g_rand_int_range (rand, -40, 41), eb = g_rand_int_range (rand, -40, 41);
      /* double holds acc exactly; one rounding to float, then an exact scale. */
      float expect = (float) (double) acc;

      for (int s = 0; s < ea + eb; s++)
        expect *= 2.0f;
      for (int s = 0; s > ea + eb; s--)
        expect *= 0.5f;
      g_assert_cmpfloat (dc_gemm_epilogue (acc, ea, eb), ==, expect);
    }
}

/* Bug corpus 3: thread-count-dependent reductions. Many tiles, ragged, and
 * every thread count must give identical bits (the partition is fixed and
 * no sum is split). */
static void
test_bug_thread_count (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (8);
  g_autoptr(DcQuantMatrix) a = random_matrix (rand, 300, 150);
  g_autoptr(DcQuantMatrix) b = random_matrix (rand, 257, 150);
  g_autofree float *c1 = g_new (float, 300 * 257);
  g_autofree float *cn = g_new (float, 300 * 257);

  dc_gemm_cpu (a, b, c1, dc_gemm_isa_best (), 1);
  for (guint t = 2; t <= 16; t++)
    {
      dc_gemm_cpu (a, b, cn, dc_gemm_isa_best (), t);
      g_assert_cmpmem (c1, 300 * 257 * sizeof (float), cn, 300 * 257 * sizeof (float));
    }
}

/* Bug corpus 4: denormal inputs. A flush-to-zero or denormals-are-zero mode
 * would zero these; the quantizer reads them exactly from their bits, and
 * the output is the same scaled product as for normal inputs. */
static void
test_bug_denormal_inputs (void)
{
  const gsize K = 40;
  float x[40], y[40], w[40];
  g_autoptr(DcQuantMatrix) a = dc_quant_matrix_new (1, K, NULL);
  g_autoptr(DcQuantMatrix) a2 = dc_quant_matrix_new (1, K, NULL);
  g_autoptr(DcQuantMatrix) b = dc_quant_matrix_new (1, K, NULL);
  g_autoptr(GError) error = NULL;
  float c, c2;

  for (gsize i = 0; i < K; i++)
    {
      guint32 bits = 1000u + 37u * (guint32) i;  /* subnormal bit patterns */

      memcpy (&x[i], &bits, sizeof bits);
      if (i % 3 == 0)
        x[i] = -x[i];
      y[i] = x[i] * 0x1p100f;   /* the same vector, scaled into the normal range */
      w[i] = (float) ((int) i - 20) * 0x1p40f;  /* keeps the product in the normal range */
    }
  dc_quant_pack ("x", x, K, 1, a, &error);
  dc_quant_pack ("y", y, K, 1, a2, &error);
  dc_quant_pack ("w", w, K, 1, b, &error);
  g_assert_no_error (error);
  g_assert_cmpmem (a->q, K, a2->q, K);
  g_assert_cmpint (a->exponent[0] + 100, ==, a2->exponent[0]);
  g_assert_cmpint (a->q[K - 1], !=, 0);

  dc_gemm_cpu (a, b, &c, dc_gemm_isa_best (), 1);
  dc_gemm_cpu (a2, b, &c2, dc_gemm_isa_best (), 1);
  g_assert_cmpfloat (c2, !=, 0.0f);
  g_assert_cmpfloat (c * 0x1p100f, ==, c2);
}

/* Bug corpus 5: accumulator overflow at the largest K. 127 · 127 · K must
 * stay below 2^31 on every path, for both signs. */
static void
test_bug_max_k_overflow (void)
{
  g_autoptr(DcQuantMatrix) a = dc_quant_matrix_new (2, DC_GEMM_MAX_K, NULL);
  g_autoptr(DcQuantMatrix) b = dc_quant_matrix_new (5, DC_GEMM_MAX_K, NULL);
  g_autoptr(GError) error = NULL;
  gint32 acc[10];

  memset (a->q, 127, DC_GEMM_MAX_K);
  memset (a->q + DC_GEMM_MAX_K, (gint8) -127, DC_GEMM_MAX_K);
  for (gsize n = 0; n < 5; n++)
    memset (b->q + n * DC_GEMM_MAX_K, n % 2 ? 127 : (gint8) -127, DC_GEMM_MAX_K);
  check_all_paths (a, b);
  dc_gemm_cpu_i32 (a, b, acc, dc_gemm_isa_best (), 2);
  g_assert_cmpint (acc[0], ==, -127 * 127 * DC_GEMM_MAX_K);
  g_assert_cmpint (acc[1], ==, 127 * 127 * DC_GEMM_MAX_K);
  g_assert_cmpint (acc[5], ==, 127 * 127 * DC_GEMM_MAX_K);

  g_assert_null (dc_quant_matrix_new (1, DC_GEMM_MAX_K + 1, &error));
  g_assert_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_TOO_LARGE);
}

/* The CPU gate: with every SIMD kernel's answer corrupted (test-only
 * switch), each is refused by name and the scalar kernel is chosen. Run in a
 * subprocess because the gate's verdict is cached per process. */
static void
test_gate_refuses_broken_kernel (void)
{
  if (g_test_subprocess ())
    {
      g_setenv ("DC_TEST_BREAK_KERNEL", "all", TRUE);
      g_assert_cmpint (dc_gemm_isa_best (), ==, DC_GEMM_ISA_SCALAR);
      return;
    }
  g_test_trap_subprocess (NULL, 60 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
  if (dc_gemm_isa_supported (DC_GEMM_ISA_AVX2))
    g_test_trap_assert_stderr ("*CPU GEMM kernel avx2 failed verification*refused*");
}

/* The SIMD epilogues against dc_gemm_epilogue (through the reference) where
 * it is delicate: ea + eb + the float's own exponent sweeping across 0 (flush
 * to a signed zero) and 255 (saturation to a signed FLT_MAX), at both ends of
 * the accepted exponent range, with zero accumulators (+0) and ±1, ±2^k and
 * large sums mixed in, on ragged widths (8-wide lanes plus a scalar tail). */
static void
test_epilogue_edge_exponents (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (12);
  const gsize M = 16, N = 37, K = 50;
  g_autoptr(DcQuantMatrix) a = random_matrix (rand, M, K);
  g_autoptr(DcQuantMatrix) b = random_matrix (rand, N, K);

  /* Row 0 zero (acc 0), rows 1-2 a single ±1, row 3 a power of two. */
  memset (a->q, 0, 4 * K);
  a->q[1 * K + 3] = 1;
  a->q[2 * K + 7] = -1;
  a->q[3 * K + 0] = 64;
  for (gsize v = 0; v < N; v++)
    b->q[v * K + 0] = (gint8) ((v % 3) == 0 ? 1 : -2);
  for (gsize v = 0; v < N; v++)
    b->exponent[v] = (int) (v % 9) - 4;
  b->exponent[N - 1] = DC_GEMM_EXPONENT_MIN;
  b->exponent[N - 2] = DC_GEMM_EXPONENT_MAX;
  for (int base = -440; base <= 280; base += (int) M)
    {
      for (gsize v = 0; v < M; v++)
        a->exponent[v] = base + (int) v;
      check_all_paths (a, b);
    }
}

/* dc_gemm_run_packed (the model's path, which skips the value check for
 * operands dc_quant_pack has just filled) gives dc_gemm_run's bits, and
 * dc_gemm_run still refuses a hand-filled -128. */
static void
test_run_packed (void)
{
  const gsize M = 70, N = 66, K = 130;
  g_autoptr(GError) error = NULL;
  g_autoptr(DcGemmBackend) cpu = dc_gemm_backend_new (DC_BACKEND_CPU, &error);
  g_autoptr(DcQuantMatrix) a = dc_quant_matrix_new (M, K, NULL);
  g_autoptr(DcQuantMatrix) b = dc_quant_matrix_new (N, K, NULL);
  g_autofree float *xa = g_new (float, M * K);
  g_autofree float *xb = g_new (float, N * K);
  g_autofree float *c1 = g_new (float, M * N);
  g_autofree float *c2 = g_new (float, M * N);
  g_autoptr(GRand) rand = g_rand_new_with_seed (11);

  g_assert_no_error (error);
  for (gsize i = 0; i < M * K; i++)
    xa[i] = (float) g_rand_double_range (rand, -3.0, 3.0);
  for (gsize i = 0; i < N * K; i++)
    xb[i] = (float) g_rand_double_range (rand, -1e-3, 1e-3);
  g_assert_true (dc_quant_pack ("a", xa, K, 1, a, NULL));
  g_assert_true (dc_quant_pack ("b", xb, K, 1, b, NULL));
  g_assert_true (dc_gemm_run (cpu, a, b, c1, &error));
  g_assert_no_error (error);
  g_assert_true (dc_gemm_run_packed (cpu, a, b, c2, &error));
  g_assert_no_error (error);
  g_assert_cmpmem (c1, M * N * sizeof *c1, c2, M * N * sizeof *c2);

  a->q[5] = -128;
  g_assert_false (dc_gemm_run (cpu, a, b, c1, &error));
  g_assert_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_RANGE);
}

typedef struct
{
  const DcQuantMatrix *src_a, *src_b;
  DcQuantMatrix       *a, *b;
  gint                *filled_a, *filled_b;  /* atomic: fills per vector */
  gsize                fail_b;               /* fail the chunk holding B's vector, or G_MAXSIZE */
} FillCase;

static gboolean
fill_copy (gboolean is_b,
           gsize    v0,
           gsize    v1,
           gpointer data)
{
  FillCase *fc = data;
  const DcQuantMatrix *src = is_b ? fc->src_b : fc->src_a;
  DcQuantMatrix *dst = is_b ? fc->b : fc->a;
  gint *filled = is_b ? fc->filled_b : fc->filled_a;

  g_assert_cmpuint (v0, <, v1);
  g_assert_cmpuint (v1, <=, src->n_vectors);
  if (is_b && fc->fail_b >= v0 && fc->fail_b < v1)
    return FALSE;
  memcpy (dst->q + v0 * src->k, src->q + v0 * src->k, (v1 - v0) * src->k);
  memcpy (dst->exponent + v0, src->exponent + v0, (v1 - v0) * sizeof (gint32));
  for (gsize v = v0; v < v1; v++)
    g_atomic_int_inc (&filled[v]);
  return TRUE;
}

/* dc_gemm_cpu_fill (the operands quantized inside the GEMM's preparation,
 * issue 14) gives dc_gemm_cpu's bits on every ISA, kernel (skinny, dot
 * blocks, packed panels) and thread count, with chunks that do not divide
 * the operands nor a panel, fills every vector exactly once, and computes
 * nothing when a fill fails. */
static void
test_fill_in_preparation (void)
{
  static const gsize shapes[][3] = {
    { 5, 66, 130 }, { 70, 66, 130 }, { 70, 17, 300 }, { 300, 33, 300 }, { 40, 1, 64 },
  };
  static const gsize chunks[][2] = { { 1, 1 }, { 7, 5 }, { 64, 40 } };
  g_autoptr(GRand) rand = g_rand_new_with_seed (23);

  for (gsize s = 0; s < G_N_ELEMENTS (shapes); s++)
    {
      const gsize M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
      g_autoptr(DcQuantMatrix) src_a = random_matrix (rand, M, K);
      g_autoptr(DcQuantMatrix) src_b = random_matrix (rand, N, K);
      g_autoptr(DcQuantMatrix) a = dc_quant_matrix_new (M, K, NULL);
      g_autoptr(DcQuantMatrix) b = dc_quant_matrix_new (N, K, NULL);
      g_autofree float *ref = g_new (float, M * N);
      g_autofree float *c = g_new (float, M * N);
      g_autofree gint *filled_a = g_new0 (gint, M);
      g_autofree gint *filled_b = g_new0 (gint, N);

      dc_gemm_reference (src_a, src_b, ref);
      for (int isa = 0; isa < DC_GEMM_N_ISAS; isa++)
        {
          if (!dc_gemm_isa_supported (isa))
            continue;
          for (gsize t = 0; t < G_N_ELEMENTS (thread_counts); t++)
            for (gsize ch = 0; ch < G_N_ELEMENTS (chunks); ch++)
              for (int fail = 0; fail < 2; fail++)
                {
                  FillCase fc = { src_a, src_b, a, b, filled_a, filled_b,
                                  fail ? N - 1 : G_MAXSIZE };
                  DcGemmFill fill = { fill_copy, &fc, chunks[ch][0], chunks[ch][1],
                                      thread_counts[t] };
                  gboolean ok;

                  memset (a->q, 0x55, M * K);
                  memset (b->q, 0x55, N * K);
                  memset (c, 0x55, M * N * sizeof *c);
                  memset (filled_a, 0, M * sizeof *filled_a);
                  memset (filled_b, 0, N * sizeof *filled_b);
                  ok = dc_gemm_cpu_fill (a, b, &fill, c, isa, thread_counts[t]);
                  if (fail)
                    {
                      g_assert_false (ok);
                      for (gsize i = 0; i < M * N; i++)
                        g_assert_cmphex (((guint32 *) c)[i], ==, 0x55555555u);
                      continue;
                    }
                  g_assert_true (ok);
                  for (gsize v = 0; v < M; v++)
                    g_assert_cmpint (filled_a[v], ==, 1);
                  for (gsize v = 0; v < N; v++)
                    g_assert_cmpint (filled_b[v], ==, 1);
                  if (memcmp (c, ref, M * N * sizeof *c) != 0)
                    g_error ("%s with %u threads and fill chunks %" G_GSIZE_FORMAT "/%"
                             G_GSIZE_FORMAT " differs from the reference at M=%" G_GSIZE_FORMAT
                             " N=%" G_GSIZE_FORMAT " K=%" G_GSIZE_FORMAT,
                             dc_gemm_isa_to_string (isa), thread_counts[t], chunks[ch][0],
                             chunks[ch][1], M, N, K);
                }
        }
    }
}

/* dc_gemm_run_fill through both CPU backends: the bits of dc_gemm_run on
 * the filled operands, and a failed fill is DC_GEMM_ERROR_NOT_FINITE. */
static void
test_run_fill_backends (void)
{
  const gsize M = 300, N = 50, K = 96;
  g_autoptr(GRand) rand = g_rand_new_with_seed (29);
  g_autoptr(DcQuantMatrix) src_a = random_matrix (rand, M, K);
  g_autoptr(DcQuantMatrix) src_b = random_matrix (rand, N, K);
  g_autoptr(DcQuantMatrix) a = dc_quant_matrix_new (M, K, NULL);
  g_autoptr(DcQuantMatrix) b = dc_quant_matrix_new (N, K, NULL);
  g_autofree float *ref = g_new (float, M * N);
  g_autofree float *c = g_new (float, M * N);
  g_autofree gint *filled_a = g_new0 (gint, M);
  g_autofree gint *filled_b = g_new0 (gint, N);
  static const DcBackendKind kinds[] = { DC_BACKEND_CPU, DC_BACKEND_CPU_SCALAR };

  dc_gemm_reference (src_a, src_b, ref);
  for (gsize i = 0; i < G_N_ELEMENTS (kinds); i++)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(DcGemmBackend) backend = dc_gemm_backend_new (kinds[i], &error);
      FillCase fc = { src_a, src_b, a, b, filled_a, filled_b, G_MAXSIZE };
      DcGemmFill fill = { fill_copy, &fc, 9, 13, 3 };

      g_assert_no_error (error);
      dc_gemm_backend_set_n_threads (backend, 3);
      g_assert_true (dc_gemm_run_fill (backend, a, b, &fill, c, &error));
      g_assert_no_error (error);
      g_assert_cmpmem (c, M * N * sizeof *c, ref, M * N * sizeof *ref);
      fc.fail_b = 20;
      g_assert_false (dc_gemm_run_fill (backend, a, b, &fill, c, &error));
      g_assert_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_NOT_FINITE);
    }
}

/* The shape classes of decode and prefill (issue 14): one to nine rows (the
 * skinny kernel's limit, 8, and one past it), K with and without a tail of
 * the 64-byte step (1, 63, 65, 577), N not a multiple of the four-vector
 * block or of the 64-column tile; the model widths 576 and 1536; and the
 * largest K with ±127 everywhere on a skinny and a blocked product. Every
 * ISA and thread count against the reference. */
static void
test_skinny_and_prefill_shapes (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (11);
  static const gsize ks[] = { 1, 15, 63, 64, 65, 130, 577 };
  static const gsize model[][3] = {
    { 1, 1536, 576 }, { 1, 576, 1536 }, { 2, 4099, 576 }, { 8, 67, 1536 }, { 9, 131, 576 },
    { 64, 1536, 576 }, { 64, 577, 1536 }, { 63, 130, 577 },
  };

  for (gsize m = 1; m <= 9; m++)
    for (gsize s = 0; s < G_N_ELEMENTS (ks); s++)
      {
        gsize n = (gsize) g_rand_int_range (rand, 1, 140);
        g_autoptr(DcQuantMatrix) a = random_matrix (rand, m, ks[s]);
        g_autoptr(DcQuantMatrix) b = random_matrix (rand, n, ks[s]);

        check_all_paths (a, b);
      }
  for (gsize s = 0; s < G_N_ELEMENTS (model); s++)
    {
      g_autoptr(DcQuantMatrix) a = random_matrix (rand, model[s][0], model[s][2]);
      g_autoptr(DcQuantMatrix) b = random_matrix (rand, model[s][1], model[s][2]);

      check_all_paths (a, b);
    }
  /* The extremes of the VNNI correction: every (b + 128) · a at 255 · ±127
   * and the largest K, so that the lane sums wrap; skinny and blocked. */
  for (gsize s = 0; s < 2; s++)
    {
      const gsize M = s == 0 ? 3 : 13, N = 6, K = DC_GEMM_MAX_K - 1;
      g_autoptr(DcQuantMatrix) a = random_matrix (rand, M, K);
      g_autoptr(DcQuantMatrix) b = random_matrix (rand, N, K);

      for (gsize i = 0; i < M * K; i++)
        a->q[i] = (i / K) % 2 ? 127 : -127;
      for (gsize i = 0; i < N * K; i++)
        b->q[i] = (i / K) % 3 == 0 ? 127 : (i / K) % 3 == 1 ? -127 : (gint8) (i % 255 - 127);
      check_all_paths (a, b);
    }
}

/* A decode step's one-row products (the SmolLM-135M shape: attention
 * input 960 × 576, output 576 × 576, MLP 3072 × 576 and 576 × 1536) split
 * over helpers by 64 KiB of weights a thread (issue 16): the attention's
 * output, 324 KiB, uses 4 threads where 256 KiB a thread ran it on the
 * caller alone; and every ISA and thread count from 1 to 16 gives the
 * reference's bits. */
static void
test_one_row_split (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (31);
  static const gsize shapes[][2] = { { 960, 576 }, { 576, 576 }, { 3072, 576 }, { 576, 1536 } };
  DcParallelStats before, after;

  for (gsize s = 0; s < G_N_ELEMENTS (shapes); s++)
    {
      const gsize N = shapes[s][0], K = shapes[s][1];
      g_autoptr(DcQuantMatrix) a = random_matrix (rand, 1, K);
      g_autoptr(DcQuantMatrix) b = random_matrix (rand, N, K);
      g_autofree float *ref = g_new (float, N);
      g_autofree float *c = g_new (float, N);

      dc_gemm_reference (a, b, ref);
      for (int isa = 0; isa < DC_GEMM_N_ISAS; isa++)
        {
          if (!dc_gemm_isa_supported (isa))
            continue;
          for (guint t = 1; t <= 16; t++)
            {
              memset (c, 0x55, N * sizeof *c);
              dc_gemm_cpu (a, b, c, isa, t);
              if (memcmp (c, ref, N * sizeof *c) != 0)
                g_error ("%s with %u threads differs from the reference at 1 × %" G_GSIZE_FORMAT
                         " × %" G_GSIZE_FORMAT, dc_gemm_isa_to_string (isa), t, N, K);
            }
        }
    }

  {
    g_autoptr(DcQuantMatrix) a = random_matrix (rand, 1, 576);
    g_autoptr(DcQuantMatrix) b = random_matrix (rand, 576, 576);
    g_autofree float *c = g_new (float, 576);

    /* Only this thread computes here, so the pool's counters move by this
     * call alone (the first call's start-up checks are done by then): one
     * call with helpers, none inline. */
    dc_gemm_cpu (a, b, c, dc_gemm_isa_best (), 4);
    dc_parallel_get_stats (&before);
    dc_gemm_cpu (a, b, c, dc_gemm_isa_best (), 4);
    dc_parallel_get_stats (&after);
    g_assert_cmpuint (after.jobs - before.jobs, ==, 1);
    g_assert_cmpuint (after.inline_jobs - before.inline_jobs, ==, 0);
  }
}

/* Products with few tiles of the default size (deep K, small outputs: the
 * weight gradients) are cut into smaller tiles; every ISA and 1, 2, 3, 7
 * and 16 threads give the reference's bits, ragged edges included. */
static void
test_few_tile_shapes (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (23);
  static const gsize shapes[][3] = {
    { 128, 128, 1024 }, { 128, 384, 1024 }, { 40, 200, 3000 }, { 33, 97, 1500 },
    { 16, 64, 4096 }, { 9, 33, 8000 },
  };

  for (gsize s = 0; s < G_N_ELEMENTS (shapes); s++)
    {
      g_autoptr(DcQuantMatrix) a = random_matrix (rand, shapes[s][0], shapes[s][2]);
      g_autoptr(DcQuantMatrix) b = random_matrix (rand, shapes[s][1], shapes[s][2]);
      const gsize M = shapes[s][0], N = shapes[s][1];
      g_autofree gint32 *ref = g_new (gint32, M * N);
      g_autofree gint32 *acc = g_new (gint32, M * N);

      check_all_paths (a, b);
      /* 16 threads, more than the tiles of the default size. */
      dc_gemm_reference_i32 (a, b, ref);
      dc_gemm_cpu_i32 (a, b, acc, dc_gemm_isa_best (), 16);
      g_assert_cmpmem (acc, M * N * sizeof *acc, ref, M * N * sizeof *ref);
    }
}

/* The packed VNNI kernel's K steps (64 quads) and its 128 × 128 tiles
 * (issue 14): K of one step exactly, one step and a byte, three steps with
 * a partial quad; M past a tile with a ragged 8-row block; N past a panel
 * pair and a tile; and A's row sums, now computed in chunks beside B's
 * repack, over several chunks. Every ISA and thread count against the
 * reference. */
static void
test_packed_k_steps (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (29);
  static const gsize shapes[][3] = {
    { 256, 33, 256 }, { 259, 129, 257 }, { 300, 161, 771 }, { 517, 100, 1030 },
  };

  for (gsize s = 0; s < G_N_ELEMENTS (shapes); s++)
    {
      g_autoptr(DcQuantMatrix) a = random_matrix (rand, shapes[s][0], shapes[s][2]);
      g_autoptr(DcQuantMatrix) b = random_matrix (rand, shapes[s][1], shapes[s][2]);

      /* ±127 in the last rows and columns: the largest partial sums carried
       * from one K step to the next. */
      for (gsize i = (shapes[s][0] - 3) * shapes[s][2]; i < shapes[s][0] * shapes[s][2]; i++)
        a->q[i] = i % 2 ? 127 : -127;
      for (gsize i = (shapes[s][1] - 2) * shapes[s][2]; i < shapes[s][1] * shapes[s][2]; i++)
        b->q[i] = -127;
      check_all_paths (a, b);
      /* 16 threads, more than this machine may have: more tiles in flight. */
      {
        const gsize M = shapes[s][0], N = shapes[s][1];
        g_autofree gint32 *ref = g_new (gint32, M * N);
        g_autofree gint32 *acc = g_new (gint32, M * N);

        dc_gemm_reference_i32 (a, b, ref);
        dc_gemm_cpu_i32 (a, b, acc, dc_gemm_isa_best (), 16);
        g_assert_cmpmem (acc, M * N * sizeof *acc, ref, M * N * sizeof *ref);
      }
    }
}

/* Quantized vectors start on a cache line: the VNNI kernels' 64-byte loads
 * from malloc's 16-byte alignment straddled two lines each. */
static void
test_operands_aligned (void)
{
  static const gsize sizes[][2] = { { 1, 1 }, { 3, 5 }, { 1, 576 }, { 1536, 576 }, { 4096, 1024 } };

  for (gsize s = 0; s < G_N_ELEMENTS (sizes); s++)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(DcQuantMatrix) m = dc_quant_matrix_new (sizes[s][0], sizes[s][1], &error);

      g_assert_no_error (error);
      g_assert_cmpuint ((guintptr) m->q % 64, ==, 0);
      for (gsize i = 0; i < sizes[s][0] * sizes[s][1]; i++)
        g_assert_cmpint (m->q[i], ==, 0);
    }
}

/* A broken twin of each AVX-512 VNNI kernel alone (skinny for M ≤ 8,
 * packed for K ≤ 256, the dot-product blocks above) is refused by the gate,
 * by its own name: the gate's shapes reach all three. */
static void
test_gate_refuses_each_vnni_kernel (void)
{
  static const char *const kernels[] = { "avx512-vnni-skinny", "avx512-vnni-packed",
                                         "avx512-vnni" };

  if (g_test_subprocess ())
    {
      g_setenv ("DC_TEST_BREAK_KERNEL", g_getenv ("DC_TEST_KERNEL_UNDER_TEST"), TRUE);
      g_assert_cmpint (dc_gemm_isa_best (), !=, DC_GEMM_ISA_AVX512_VNNI);
      return;
    }
  if (!dc_gemm_isa_supported (DC_GEMM_ISA_AVX512_VNNI))
    {
      g_test_skip ("this CPU has no AVX-512 VNNI");
      return;
    }
  for (gsize i = 0; i < G_N_ELEMENTS (kernels); i++)
    {
      g_autofree char *expected = NULL;

      expected = g_strdup_printf ("*CPU GEMM kernel %s failed verification*refused*", kernels[i]);

      g_setenv ("DC_TEST_KERNEL_UNDER_TEST", kernels[i], TRUE);
      g_test_trap_subprocess (NULL, 60 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_DEFAULT);
      g_test_trap_assert_passed ();
      g_test_trap_assert_stderr (expected);
      if (i < 2)
        g_test_trap_assert_stderr_unmatched ("*kernel avx512-vnni failed*");
    }
  g_unsetenv ("DC_TEST_KERNEL_UNDER_TEST");
}

/* AMX-INT8 selection, every branch, with stand-ins for Linux's permission
 * and the gate (the development machines have no AMX): each step is asked
 * only when the ones before it allow, and only "active" selects the kernel. */
static guint amx_permit_calls, amx_verify_calls;
static gboolean amx_permit_answer, amx_verify_answer;

static gboolean
fake_amx_permit (void)
{
  amx_permit_calls++;
  return amx_permit_answer;
}

static gboolean
fake_amx_verify (void)
{
  amx_verify_calls++;
  return amx_verify_answer;
}

static void
test_amx_decide (void)
{
  static const struct
  {
    gboolean       cpu_has;
    const char    *env;
    gboolean       permit;
    gboolean       verify;
    DcGemmAmxState state;
    guint          permit_calls;
    guint          verify_calls;
    gsize          min_k;
  } cases[] = {
    { FALSE, NULL, TRUE, TRUE, DC_GEMM_AMX_UNSUPPORTED, 0, 0, 64 },
    { FALSE, "1", TRUE, TRUE, DC_GEMM_AMX_UNSUPPORTED, 0, 0, 64 },
    { TRUE, "0", TRUE, TRUE, DC_GEMM_AMX_DISABLED, 0, 0, 64 },
    { TRUE, "off", TRUE, TRUE, DC_GEMM_AMX_DISABLED, 0, 0, 64 },
    { TRUE, NULL, FALSE, TRUE, DC_GEMM_AMX_NOT_PERMITTED, 1, 0, 64 },
    { TRUE, NULL, TRUE, FALSE, DC_GEMM_AMX_REFUSED, 1, 1, 64 },
    { TRUE, NULL, TRUE, TRUE, DC_GEMM_AMX_ACTIVE, 1, 1, 64 },
    { TRUE, "16", TRUE, TRUE, DC_GEMM_AMX_ACTIVE, 1, 1, 16 },
    { TRUE, "junk", TRUE, TRUE, DC_GEMM_AMX_ACTIVE, 1, 1, 64 },
    { TRUE, "1000000", TRUE, TRUE, DC_GEMM_AMX_ACTIVE, 1, 1, 64 },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      gsize min_k = 0;
      DcGemmAmxState state;

      amx_permit_calls = amx_verify_calls = 0;
      amx_permit_answer = cases[i].permit;
      amx_verify_answer = cases[i].verify;
      state = dc_gemm_amx_decide (cases[i].cpu_has, cases[i].env, fake_amx_permit,
                                  fake_amx_verify, &min_k);
      g_assert_cmpstr (dc_gemm_amx_state_to_string (state), ==,
                       dc_gemm_amx_state_to_string (cases[i].state));
      g_assert_cmpuint (amx_permit_calls, ==, cases[i].permit_calls);
      g_assert_cmpuint (amx_verify_calls, ==, cases[i].verify_calls);
      g_assert_cmpuint (min_k, ==, cases[i].min_k);
    }
}

/* On this machine the process's own answer is consistent with the CPU: no
 * AVX-512 VNNI, no AMX; and whatever it is, every product keeps the
 * reference's bits (check_all_paths runs through the chosen kernels). */
static void
test_amx_state_here (void)
{
  DcGemmAmxState state = dc_gemm_amx_state ();

  if (!dc_gemm_isa_supported (DC_GEMM_ISA_AVX512_VNNI))
    g_assert_cmpint (state, ==, DC_GEMM_AMX_UNSUPPORTED);
  g_test_message ("AMX-INT8 kernel: %s", dc_gemm_amx_state_to_string (state));
  g_assert_cmpstr (dc_gemm_amx_state_to_string (state), !=, "unknown");
}

/* Where the AMX kernel is active: from K = 1 on (DC_GEMM_AMX=1), the
 * attention's shapes (K = 16, N = 16), ragged rows, vectors and K steps
 * give the reference's bits at every thread count; and its broken twin is
 * refused by its own gate while the VNNI kernels stay in use. */
static void
test_amx_shapes (void)
{
  static const gsize shapes[][3] = {
    { 9, 1, 1 }, { 32, 128, 16 }, { 128, 16, 128 }, { 96, 32, 32 }, { 33, 33, 65 },
    { 100, 70, 200 }, { 128, 384, 128 }, { 257, 130, 1000 }, { 64, 48, 4099 },
  };

  if (g_test_subprocess ())
    {
      g_autoptr(GRand) rand = g_rand_new_with_seed (14);

      g_setenv ("DC_GEMM_AMX", "1", TRUE);
      g_assert_cmpint (dc_gemm_amx_state (), ==, DC_GEMM_AMX_ACTIVE);
      for (gsize s = 0; s < G_N_ELEMENTS (shapes); s++)
        {
          g_autoptr(DcQuantMatrix) a = random_matrix (rand, shapes[s][0], shapes[s][2]);
          g_autoptr(DcQuantMatrix) b = random_matrix (rand, shapes[s][1], shapes[s][2]);

          check_all_paths (a, b);
        }
      return;
    }
  if (dc_gemm_amx_state () != DC_GEMM_AMX_ACTIVE)
    {
      g_test_skip_printf ("the AMX-INT8 kernel is not in use here (%s)",
                          dc_gemm_amx_state_to_string (dc_gemm_amx_state ()));
      return;
    }
  g_test_trap_subprocess (NULL, 120 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
}

static void
test_amx_gate_refuses_broken (void)
{
  if (g_test_subprocess ())
    {
      g_setenv ("DC_TEST_BREAK_KERNEL", "avx512-amx", TRUE);
      g_assert_cmpint (dc_gemm_isa_best (), ==, DC_GEMM_ISA_AVX512_VNNI);
      g_assert_cmpint (dc_gemm_amx_state (), ==, DC_GEMM_AMX_REFUSED);
      return;
    }
  if (dc_gemm_amx_state () != DC_GEMM_AMX_ACTIVE)
    {
      g_test_skip_printf ("the AMX-INT8 kernel is not in use here (%s)",
                          dc_gemm_amx_state_to_string (dc_gemm_amx_state ()));
      return;
    }
  g_test_trap_subprocess (NULL, 60 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
  g_test_trap_assert_stderr ("*CPU GEMM kernel avx512-amx failed verification*refused*");
  g_test_trap_assert_stderr_unmatched ("*kernel avx512-vnni*failed*");
}

int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);
  /* one-row-split checks the default share, not a measuring override. */
  g_unsetenv ("DC_GEMM_SKINNY_KIB");

  g_test_add_func ("/dc/engine/gemm/cpu/isas", test_isas_reported);
  g_test_add_func ("/dc/engine/gemm/cpu/peak-measured", test_peak_measured);
  g_test_add_func ("/dc/engine/gemm/cpu/gate-refuses-broken", test_gate_refuses_broken_kernel);
  g_test_add_func ("/dc/engine/gemm/cpu/epilogue-edge-exponents", test_epilogue_edge_exponents);
  g_test_add_func ("/dc/engine/gemm/cpu/gate-refuses-each-vnni-kernel",
                   test_gate_refuses_each_vnni_kernel);
  g_test_add_func ("/dc/engine/gemm/cpu/amx-decide", test_amx_decide);
  g_test_add_func ("/dc/engine/gemm/cpu/amx-state-here", test_amx_state_here);
  g_test_add_func ("/dc/engine/gemm/cpu/amx-shapes", test_amx_shapes);
  g_test_add_func ("/dc/engine/gemm/cpu/amx-gate-refuses-broken", test_amx_gate_refuses_broken);
  g_test_add_func ("/dc/engine/gemm/cpu/run-packed", test_run_packed);
  g_test_add_func ("/dc/engine/gemm/cpu/operands-aligned", test_operands_aligned);
  g_test_add_func ("/dc/engine/gemm/cpu/few-tile-shapes", test_few_tile_shapes);
  g_test_add_func ("/dc/engine/gemm/cpu/packed-k-steps", test_packed_k_steps);
  g_test_add_func ("/dc/engine/gemm/cpu/skinny-and-prefill-shapes", test_skinny_and_prefill_shapes);
  g_test_add_func ("/dc/engine/gemm/cpu/one-row-split", test_one_row_split);
  g_test_add_func ("/dc/engine/gemm/cpu/edge-shapes", test_edge_shapes);
  g_test_add_func ("/dc/engine/gemm/cpu/random-shapes", test_random_shapes);
  g_test_add_func ("/dc/engine/gemm/cpu/extreme-values", test_extreme_values);
  g_test_add_func ("/dc/engine/gemm/meta/k-permutation", test_meta_k_permutation);
  g_test_add_func ("/dc/engine/gemm/meta/row-scaling-zero-row", test_meta_row_scaling_and_zero_row);
  g_test_add_func ("/dc/engine/gemm/meta/transposition", test_meta_transposition);
  g_test_add_func ("/dc/engine/gemm/bug/minus-128-saturation", test_bug_minus_128_saturation);
  g_test_add_func ("/dc/engine/gemm/bug/fma-contraction", test_bug_fma_contraction);
  g_test_add_func ("/dc/engine/gemm/bug/thread-count", test_bug_thread_count);
  g_test_add_func ("/dc/engine/gemm/bug/denormal-inputs", test_bug_denormal_inputs);
  g_test_add_func ("/dc/engine/gemm/bug/max-k-overflow", test_bug_max_k_overflow);
  g_test_add_func ("/dc/engine/gemm/fill-in-preparation", test_fill_in_preparation);
  g_test_add_func ("/dc/engine/gemm/run-fill-backends", test_run_fill_backends);

  return g_test_run ();
}
