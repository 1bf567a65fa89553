/* test-engine-quant.c: the quantizer, the epilogue and the scalar reference
 * implement docs/VERIFICATION.md exactly, on hand-checked values.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "engine/dc-gemm.h"
#include "engine/dc-quant-simd-private.h"
#include "engine/dc-test-break.h"
#include "engine/dc-transpose.h"

static float
bits_float (guint32 u)
{
  float f;

  memcpy (&f, &u, sizeof f);
  return f;
}

static guint32
float_bits (float f)
{
  guint32 u;

  memcpy (&u, &f, sizeof u);
  return u;
}

static DcQuantMatrix *
pack_one (const float *x,
          gsize        k)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcQuantMatrix) m = dc_quant_matrix_new (1, k, &error);

  g_assert_no_error (error);
  dc_quant_pack ("test", x, k, 1, m, &error);
  g_assert_no_error (error);
  return g_steal_pointer (&m);
}

static void
test_quant_scale_and_rounding (void)
{
  /* amax 127.5 → floor(log2) = 6 → e = 0: values are rounded as they are. */
  const float x[] = { 127.5f, 2.5f, 3.5f, -2.5f, -127.5f, 0.5f, 1.5f, -0.4999f };
  const gint8 expect[] = { 127, 2, 4, -2, -127, 0, 2, 0 };
  g_autoptr(DcQuantMatrix) m = pack_one (x, G_N_ELEMENTS (x));

  g_assert_cmpint (m->exponent[0], ==, 0);
  for (gsize i = 0; i < G_N_ELEMENTS (x); i++)
    g_assert_cmpint (m->q[i], ==, expect[i]);
}

static void
test_quant_power_of_two_exact (void)
{
  /* amax 1 → e = -6: q = x · 64 exactly. */
  const float x[] = { 1.0f, -0.5f, 0.25f, 0.0f, -1.0f };
  g_autoptr(DcQuantMatrix) m = pack_one (x, G_N_ELEMENTS (x));

  g_assert_cmpint (m->exponent[0], ==, -6);
  g_assert_cmpint (m->q[0], ==, 64);
  g_assert_cmpint (m->q[1], ==, -32);
  g_assert_cmpint (m->q[2], ==, 16);
  g_assert_cmpint (m->q[3], ==, 0);
  g_assert_cmpint (m->q[4], ==, -64);
}

static void
test_quant_never_minus_128 (void)
{
  /* -127.9 would round to -128: the clamp keeps it at -127. */
  const float x[] = { -127.9f, 100.0f };
  g_autoptr(DcQuantMatrix) m = pack_one (x, G_N_ELEMENTS (x));

  g_assert_cmpint (m->exponent[0], ==, 0);
  g_assert_cmpint (m->q[0], ==, -127);
  g_assert_cmpint (m->q[1], ==, 100);
}

static void
test_quant_denormal_inputs (void)
{
  /* Subnormal inputs are scaled up exactly: 100 · 2^-149 has
   * floor(log2) = 6 - 149 → e = -149, q = 100. Denormals-are-zero modes
   * would give 0 here. */
  float x[3];
  g_autoptr(DcQuantMatrix) m = NULL;

  x[0] = bits_float (100);      /* 100 · 2^-149 */
  x[1] = -bits_float (3);       /* -3 · 2^-149 */
  x[2] = bits_float (1);        /* 2^-149 */
  m = pack_one (x, 3);
  g_assert_cmpint (m->exponent[0], ==, -149);
  g_assert_cmpint (m->q[0], ==, 100);
  g_assert_cmpint (m->q[1], ==, -3);
  g_assert_cmpint (m->q[2], ==, 1);

  /* A tiny value next to a large one rounds to zero, never to garbage. */
  {
    const float y[] = { 1e30f, bits_float (1) };
    g_autoptr(DcQuantMatrix) n = pack_one (y, 2);

    g_assert_cmpint (n->q[1], ==, 0);
  }
}

static void
test_quant_zero_vector (void)
{
  const float x[4] = { 0.0f, -0.0f, 0.0f, 0.0f };
  g_autoptr(DcQuantMatrix) m = pack_one (x, 4);

  g_assert_cmpint (m->exponent[0], ==, 0);
  for (int i = 0; i < 4; i++)
    g_assert_cmpint (m->q[i], ==, 0);
}

static void
test_quant_refuses_not_finite (void)
{
  const float values[] = { NAN, INFINITY, -INFINITY };

  for (gsize t = 0; t < G_N_ELEMENTS (values); t++)
    {
      float x[3] = { 1.0f, 2.0f, 3.0f };
      g_autoptr(GError) error = NULL;
      g_autoptr(DcQuantMatrix) m = dc_quant_matrix_new (1, 3, NULL);

      x[1] = values[t];
      g_assert_false (dc_quant_pack ("attention Q·Kᵀ", x, 3, 1, m, &error));
      g_assert_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_NOT_FINITE);
      g_assert_nonnull (strstr (error->message, "attention Q·Kᵀ"));
      g_assert_nonnull (strstr (error->message, t == 0 ? "NaN" : "infinity"));
    }
}

static void
test_quant_strides (void)
{
  /* Packing the columns of a (2, 3) row-major matrix: vector_stride 1,
   * k_stride 3 gives 3 vectors of length 2. */
  const float x[] = { 1, 2, 3,
                      4, 5, 6 };
  g_autoptr(GError) error = NULL;
  g_autoptr(DcQuantMatrix) m = dc_quant_matrix_new (3, 2, &error);

  g_assert_no_error (error);
  g_assert_true (dc_quant_pack ("columns", x, 1, 3, m, &error));
  g_assert_no_error (error);
  /* Column 0 = (1, 4): amax 4 → e = 2 - 6 = -4 → q = 16, 64. */
  g_assert_cmpint (m->exponent[0], ==, -4);
  g_assert_cmpint (m->q[0], ==, 16);
  g_assert_cmpint (m->q[1], ==, 64);
  /* Column 2 = (3, 6): amax 6 → e = -4 → q = 48, 96. */
  g_assert_cmpint (m->q[4], ==, 48);
  g_assert_cmpint (m->q[5], ==, 96);
}

static void
test_matrix_new_limits (void)
{
  g_autoptr(GError) error = NULL;
  DcQuantMatrix *m;

  m = dc_quant_matrix_new (1, DC_GEMM_MAX_K + 1, &error);
  g_assert_null (m);
  g_assert_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_TOO_LARGE);
  g_clear_error (&error);

  m = dc_quant_matrix_new (G_MAXSIZE / 2, 1024, &error);
  g_assert_null (m);
  g_assert_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_TOO_LARGE);
  g_clear_error (&error);

  m = dc_quant_matrix_new (0, 4, &error);
  g_assert_null (m);
  g_assert_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_SHAPE);
}

static void
test_epilogue (void)
{
  /* Exact powers of two. */
  g_assert_cmpuint (float_bits (dc_gemm_epilogue (3, -1, -1)), ==, float_bits (0.75f));
  g_assert_cmpuint (float_bits (dc_gemm_epilogue (-5, 2, 0)), ==, float_bits (-20.0f));
  /* The one rounding: 2^24 + 1 is not a float; ties go to even. */
  g_assert_cmpuint (float_bits (dc_gemm_epilogue ((1 << 24) + 1, 0, 0)), ==,
                    float_bits (16777216.0f));
  g_assert_cmpuint (float_bits (dc_gemm_epilogue ((1 << 24) + 3, 0, 0)), ==,
                    float_bits (16777220.0f));
  /* Below the normal range: signed zero, whatever the FPU's denormal mode. */
  g_assert_cmpuint (float_bits (dc_gemm_epilogue (1, -126, 0)), ==, 0x00800000u);
  g_assert_cmpuint (float_bits (dc_gemm_epilogue (1, -127, 0)), ==, 0u);
  g_assert_cmpuint (float_bits (dc_gemm_epilogue (-3, -100, -100)), ==, 0x80000000u);
  /* Above it: signed FLT_MAX, never infinity. */
  g_assert_cmpuint (float_bits (dc_gemm_epilogue (1, 127, 0)), ==, 0x7f000000u);
  g_assert_cmpuint (float_bits (dc_gemm_epilogue (1, 128, 0)), ==, 0x7f7fffffu);
  g_assert_cmpuint (float_bits (dc_gemm_epilogue (-7, 1000, 1000)), ==, 0xff7fffffu);
  g_assert_cmpuint (float_bits (dc_gemm_epilogue (0, 1000, 1000)), ==, 0u);
}

static void
test_reference_small (void)
{
  /* a (2, 3) · b (2, 3)ᵀ by hand. */
  g_autoptr(DcQuantMatrix) a = dc_quant_matrix_new (2, 3, NULL);
  g_autoptr(DcQuantMatrix) b = dc_quant_matrix_new (2, 3, NULL);
  const gint8 qa[] = { 1, 2, 3, -127, 127, 0 };
  const gint8 qb[] = { 4, 5, 6, 127, 127, -127 };
  gint32 acc[4];
  float c[4];

  memcpy (a->q, qa, 6);
  memcpy (b->q, qb, 6);
  a->exponent[0] = 0;
  a->exponent[1] = -2;
  b->exponent[0] = 1;
  b->exponent[1] = 0;

  dc_gemm_reference_i32 (a, b, acc);
  g_assert_cmpint (acc[0], ==, 32);
  g_assert_cmpint (acc[1], ==, 127 + 254 - 381);
  g_assert_cmpint (acc[2], ==, -508 + 635);
  g_assert_cmpint (acc[3], ==, 0);

  dc_gemm_reference (a, b, c);
  g_assert_cmpfloat (c[0], ==, 64.0f);
  g_assert_cmpfloat (c[1], ==, 0.0f);
  g_assert_cmpfloat (c[2], ==, 127.0f * 0.5f);
  g_assert_cmpfloat (c[3], ==, 0.0f);
}

static void
test_reference_max_k_no_overflow (void)
{
  /* The largest K with every product at +127·127: 2,114,060,288 < 2^31. */
  g_autoptr(DcQuantMatrix) a = dc_quant_matrix_new (1, DC_GEMM_MAX_K, NULL);
  g_autoptr(DcQuantMatrix) b = dc_quant_matrix_new (1, DC_GEMM_MAX_K, NULL);
  gint32 acc;

  memset (a->q, 127, DC_GEMM_MAX_K);
  memset (b->q, 127, DC_GEMM_MAX_K);
  dc_gemm_reference_i32 (a, b, &acc);
  g_assert_cmpint (acc, ==, 127 * 127 * DC_GEMM_MAX_K);
  g_assert_cmpint (acc, >, 0);
}

static void
test_check_refuses_minus_128 (void)
{
  g_autoptr(DcQuantMatrix) a = dc_quant_matrix_new (2, 4, NULL);
  g_autoptr(GError) error = NULL;

  g_assert_true (dc_quant_matrix_check ("x", a, &error));
  a->q[5] = -128;
  g_assert_false (dc_quant_matrix_check ("x", a, &error));
  g_assert_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_RANGE);
  g_clear_error (&error);
  a->q[5] = 0;
  a->exponent[1] = DC_GEMM_EXPONENT_MAX + 1;
  g_assert_false (dc_quant_matrix_check ("x", a, &error));
  g_assert_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_RANGE);
}

static void
test_rule_id (void)
{
  const char *id = dc_gemm_rule_id ();

  g_assert_cmpuint (strlen (id), ==, 16);
  for (int i = 0; i < 16; i++)
    g_assert_true (g_ascii_isxdigit (id[i]));
  g_assert_true (id == dc_gemm_rule_id ());
}

static gboolean
cpu_has_avx512 (void)
{
  return __builtin_cpu_supports ("avx512f") && __builtin_cpu_supports ("avx512bw");
}

/* Packs x (nv vectors of length k) with the reference, the AVX2 packer and
 * dc_quant_pack, and asserts all three give the same bits. */
static void
assert_packers_agree (const float *x,
                      gsize        nv,
                      gsize        k)
{
  g_autoptr(DcQuantMatrix) ref = dc_quant_matrix_new (nv, k, NULL);
  g_autoptr(DcQuantMatrix) simd = dc_quant_matrix_new (nv, k, NULL);
  g_autoptr(DcQuantMatrix) best = dc_quant_matrix_new (nv, k, NULL);

  g_assert_true (dc_quant_pack_reference ("ref", x, k, 1, ref, NULL));
  g_assert_true (dc_quant_pack_avx2 ("avx2", x, k, simd, NULL));
  g_assert_true (dc_quant_pack ("best", x, k, 1, best, NULL));
  if (cpu_has_avx512 ())
    {
      /* The 16-lane packer, at every length (dc_quant_pack uses it up to 64). */
      g_autoptr(DcQuantMatrix) wide = dc_quant_matrix_new (nv, k, NULL);

      g_assert_true (dc_quant_pack_avx512 ("avx512", x, k, wide, NULL));
      g_assert_cmpmem (wide->exponent, nv * sizeof (gint32), ref->exponent, nv * sizeof (gint32));
      for (gsize i = 0; i < nv * k; i++)
        if (wide->q[i] != ref->q[i])
          g_error ("avx512 packer disagrees at vector %" G_GSIZE_FORMAT " index %" G_GSIZE_FORMAT
                   " (x = %a): reference %d, avx512 %d", i / k, i % k, (double) x[i], ref->q[i],
                   wide->q[i]);
    }
  for (gsize v = 0; v < nv; v++)
    {
      g_assert_cmpint (simd->exponent[v], ==, ref->exponent[v]);
      g_assert_cmpint (best->exponent[v], ==, ref->exponent[v]);
    }
  for (gsize i = 0; i < nv * k; i++)
    {
      if (simd->q[i] != ref->q[i] || best->q[i] != ref->q[i])
        g_error ("packers disagree at vector %" G_GSIZE_FORMAT " index %" G_GSIZE_FORMAT
                 " (x = %a, e = %d): reference %d, avx2 %d, dc_quant_pack %d",
                 i / k, i % k, (double) x[i], ref->exponent[i / k], ref->q[i], simd->q[i],
                 best->q[i]);
    }
}

static void
test_quant_simd_adversarial (void)
{
  static const gsize lengths[] = { 1, 5, 8, 31, 32, 33, 63, 64, 65, 129 };

  if (!__builtin_cpu_supports ("avx2"))
    {
      g_test_skip ("no AVX2 on this CPU");
      return;
    }
  /* The packer in use is the AVX2 one: otherwise this test would compare
   * the reference with itself. */
  g_assert_cmpstr (dc_quant_pack_simd_name (), ==, "avx2");
  g_assert_cmpstr (dc_quant_pack_avx512_name (), ==, cpu_has_avx512 () ? "avx512" : "none");

  for (gsize l = 0; l < G_N_ELEMENTS (lengths); l++)
    {
      const gsize k = lengths[l];
      g_autofree float *x = g_new (float, k);

      /* Ties at .5 with amax in [64, 128): e = 0, q = rne(x). */
      for (gsize i = 0; i < k; i++)
        x[i] = (float) ((gint64) (i * 37 % 255) - 127) + 0.5f;
      x[0] = 127.5f;
      assert_packers_agree (x, 1, k);
      /* 126.5 → 126, 127.5 → 128 → clamped to 127, -127.5 → -127. */
      for (gsize i = 0; i < k; i++)
        x[i] = (i % 3 == 0) ? 126.5f : (i % 3 == 1 ? -127.5f : 127.5f);
      assert_packers_agree (x, 1, k);
      /* ±0 only: the all-zero vector. */
      for (gsize i = 0; i < k; i++)
        x[i] = (i & 1) ? -0.0f : 0.0f;
      assert_packers_agree (x, 1, k);
      /* Subnormals only (amax subnormal: the reference's range). */
      for (gsize i = 0; i < k; i++)
        x[i] = bits_float ((guint32) (i * 977 + 1) & 0x007fffffu) * ((i & 1) ? -1.0f : 1.0f);
      assert_packers_agree (x, 1, k);
      /* Huge amax next to tiny values and subnormals: they round to ±0. */
      for (gsize i = 0; i < k; i++)
        x[i] = (i % 4 == 0) ? -3.0e38f : bits_float (0x00000001u + (guint32) i);
      x[k - 1] = FLT_MAX;
      assert_packers_agree (x, 1, k);
      /* amax at each edge of the fast path: e = -127, -126, 126 and the
       * largest exponent (121). Values near 2^-e · 0.5 to catch the ties. */
      for (int b = 1; b < 255; b++)
        {
          for (gsize i = 0; i < k; i++)
            {
              guint32 mant = (guint32) (i * 0x2f3d1u) & 0x7fffffu;
              int bi = b - (int) (i % 9);

              x[i] = bits_float ((guint32) MAX (bi, 0) << 23 | mant);
              if (i & 1)
                x[i] = -x[i];
            }
          x[0] = bits_float ((guint32) b << 23 | 0x7fffffu);
          assert_packers_agree (x, 1, k);
        }
    }
}

static void
test_quant_simd_random (void)
{
  const gsize nv = 17, k = 97;
  g_autofree float *x = g_new (float, nv * k);
  guint64 state = 12345;

  if (!__builtin_cpu_supports ("avx2"))
    {
      g_test_skip ("no AVX2 on this CPU");
      return;
    }
  for (int round = 0; round < 200; round++)
    {
      for (gsize i = 0; i < nv * k; i++)
        {
          guint32 u;

          state = state * 6364136223846793005u + 1442695040888963407u;
          u = (guint32) (state >> 32);
          if (round % 2 == 0)
            {
              /* Any finite float. */
              if ((u & 0x7f800000u) == 0x7f800000u)
                u ^= 0x40000000u;
              x[i] = bits_float (u);
            }
          else
            {
              /* Training-like: normal values of a few binades, some ties. */
              x[i] = (float) ((gint32) (u >> 8) - (1 << 23)) / (float) (1 << (round % 24));
            }
        }
      assert_packers_agree (x, nv, k);
    }
}

/* Non-finite input through the SIMD path: the same error as the reference,
 * naming the same vector. */
static void
test_quant_simd_not_finite (void)
{
  float x[2 * 40];
  g_autoptr(GError) error = NULL;
  g_autoptr(DcQuantMatrix) m = dc_quant_matrix_new (2, 40, NULL);

  for (gsize i = 0; i < G_N_ELEMENTS (x); i++)
    x[i] = (float) i;
  x[40 + 33] = NAN;
  g_assert_false (dc_quant_pack ("simd", x, 40, 1, m, &error));
  g_assert_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_NOT_FINITE);
  g_assert_nonnull (strstr (error->message, "NaN at vector 1, index 33"));
}

/* The start-up gate refuses a corrupted AVX2 packer by name and falls back
 * to the reference. A subprocess: the verdict is cached per process. */
static void
test_quant_simd_gate (void)
{
  if (!__builtin_cpu_supports ("avx2"))
    {
      g_test_skip ("no AVX2 on this CPU");
      return;
    }
  if (g_test_subprocess ())
    {
      g_setenv ("DC_TEST_BREAK_KERNEL", "quant-avx2", TRUE);
      g_assert_cmpstr (dc_quant_pack_simd_name (), ==, "scalar");
      return;
    }
  g_test_trap_subprocess (NULL, 60 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
  g_test_trap_assert_stderr ("*AVX2 quantizer failed verification*refused*");
}

static gboolean
cpu_has_avx512_vl (void)
{
  return cpu_has_avx512 () && __builtin_cpu_supports ("avx512vl");
}

/* Columns of a (k, ld) row-major matrix, first nv of them, packed five
 * ways: the old route (transpose the floats, then the row reference), the
 * strided reference, the AVX2 column packer, the AVX-512 one (where the
 * CPU has it) and dc_quant_pack; all must be the same bytes. */
static void
assert_column_packers_agree (const float *x,
                             gsize        k,
                             gsize        nv,
                             gsize        ld)
{
  g_autofree float *rows = g_new (float, nv * k);
  g_autoptr(DcQuantMatrix) old = dc_quant_matrix_new (nv, k, NULL);
  g_autoptr(DcQuantMatrix) ref = dc_quant_matrix_new (nv, k, NULL);
  g_autoptr(DcQuantMatrix) simd = dc_quant_matrix_new (nv, k, NULL);
  g_autoptr(DcQuantMatrix) best = dc_quant_matrix_new (nv, k, NULL);
  g_autoptr(DcQuantMatrix) wide = dc_quant_matrix_new (nv, k, NULL);
  const gboolean has_wide = cpu_has_avx512_vl ();

  dc_transpose_f32_reference (x, ld, k, nv, rows, k);
  /* Garbage first: every byte must be written. */
  memset (wide->q, 0x55, nv * k);
  if (has_wide)
    g_assert_true (dc_quant_pack_columns_avx512 ("cols", x, ld, wide, NULL));
  g_assert_true (dc_quant_pack_reference ("old", rows, k, 1, old, NULL));
  g_assert_true (dc_quant_pack_reference ("ref", x, 1, ld, ref, NULL));
  g_assert_true (dc_quant_pack_columns_avx2 ("cols", x, ld, simd, NULL));
  g_assert_true (dc_quant_pack ("best", x, 1, ld, best, NULL));
  for (gsize v = 0; v < nv; v++)
    {
      g_assert_cmpint (ref->exponent[v], ==, old->exponent[v]);
      g_assert_cmpint (simd->exponent[v], ==, old->exponent[v]);
      g_assert_cmpint (best->exponent[v], ==, old->exponent[v]);
      if (has_wide)
        g_assert_cmpint (wide->exponent[v], ==, old->exponent[v]);
    }
  for (gsize i = 0; i < nv * k; i++)
    {
      if (ref->q[i] != old->q[i] || simd->q[i] != old->q[i] || best->q[i] != old->q[i] ||
          (has_wide && wide->q[i] != old->q[i]))
        g_error ("column packers disagree at column %" G_GSIZE_FORMAT " row %" G_GSIZE_FORMAT
                 " of a %" G_GSIZE_FORMAT " × %" G_GSIZE_FORMAT " matrix (x = %a, e = %d): "
                 "transpose+rows %d, reference %d, avx2 columns %d, avx512 columns %d, "
                 "dc_quant_pack %d",
                 i / k, i % k, k, nv, (double) x[(i % k) * ld + i / k], old->exponent[i / k],
                 old->q[i], ref->q[i], simd->q[i], has_wide ? wide->q[i] : old->q[i], best->q[i]);
    }
}

static void
test_quant_columns_random (void)
{
  static const gsize ks[] = { 1, 2, 7, 15, 16, 17, 31, 32, 33, 65, 100, 257 };
  static const gsize nvs[] = { 1, 5, 8, 9, 15, 16, 17, 23, 40 };
  guint64 state = 777;

  if (!__builtin_cpu_supports ("avx2"))
    {
      g_test_skip ("no AVX2 on this CPU");
      return;
    }
  g_assert_cmpstr (dc_quant_pack_columns_simd_name (), ==, "avx2");
  for (int round = 0; round < 3 * (int) (G_N_ELEMENTS (ks) * G_N_ELEMENTS (nvs)); round++)
    {
      const gsize k = ks[round % G_N_ELEMENTS (ks)];
      const gsize nv = nvs[(round / G_N_ELEMENTS (ks)) % G_N_ELEMENTS (nvs)];
      const gsize ld = nv + (gsize) (round % 5);
      g_autofree float *x = g_new (float, k * ld);

      for (gsize i = 0; i < k * ld; i++)
        {
          guint32 u;

          state = state * 6364136223846793005u + 1442695040888963407u;
          u = (guint32) (state >> 32);
          switch (round % 3)
            {
            case 0:   /* any finite float, subnormals included */
              if ((u & 0x7f800000u) == 0x7f800000u)
                u ^= 0x40000000u;
              x[i] = bits_float (u);
              break;
            case 1:   /* training-like: a few binades, ties */
              x[i] = (float) ((gint32) (u >> 8) - (1 << 23)) / (float) (1 << (round % 24));
              break;
            default:  /* subnormals and zeros only */
              x[i] = bits_float (u & 0x807fffffu & ((u & 0x100) ? 0xffffffffu : 0x80000000u));
              break;
            }
        }
      assert_column_packers_agree (x, k, nv, ld);
    }
}

/* Each column its own case: ties at the top, all ±0, subnormal amax, huge
 * amax over tiny values, and amax at every binade (the fast path's edges
 * e = -127, -126 and 126 included), side by side in one matrix. */
static void
test_quant_columns_adversarial (void)
{
  const gsize k = 45, nv = 11, ld = 13;
  float x[45 * 13];

  if (!__builtin_cpu_supports ("avx2"))
    {
      g_test_skip ("no AVX2 on this CPU");
      return;
    }
  for (int b = 1; b < 255; b++)
    {
      for (gsize i = 0; i < k; i++)
        for (gsize c = 0; c < ld; c++)
          {
            float *p = &x[i * ld + c];
            guint32 mant = (guint32) ((i * 13 + c) * 0x2f3d1u) & 0x7fffffu;
            int bc = (b + (int) c * 23) % 255;

            switch (c % 6)
              {
              case 0:
                *p = (float) ((gint64) ((i * 37 + c) % 255) - 127) + 0.5f;
                break;
              case 1:
                *p = (i & 1) ? -0.0f : 0.0f;
                break;
              case 2:
                *p = bits_float ((guint32) (i * 977 + c + 1) & 0x007fffffu) * ((i & 1) ? -1.0f : 1.0f);
                break;
              case 3:
                *p = (i % 4 == 0) ? -3.0e38f : bits_float (0x00000001u + (guint32) i);
                break;
              default:
                *p = bits_float ((guint32) MAX (bc - (int) (i % 9), 0) << 23 | mant);
                if (i & 1)
                  *p = -*p;
                break;
              }
          }
      x[(k - 1) * ld + 4] = bits_float ((guint32) b << 23 | 0x7fffffu);
      /* ±127.5 round to ±128, which clamp to ±127 (never -128). */
      x[2 * ld + 0] = -127.5f;
      x[3 * ld + 6] = 127.5f;
      x[5 * ld + 6] = -127.5f;
      assert_column_packers_agree (x, k, nv, ld);
    }
}

/* A NaN or infinity in a column: the reference's error, naming the same
 * vector (the first bad column) and index (its first bad row). */
static void
test_quant_columns_not_finite (void)
{
  const gsize k = 40, nv = 19, ld = 21;
  float x[40 * 21];

  for (int which = 0; which < 2; which++)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(GError) want = NULL;
      g_autoptr(DcQuantMatrix) m = dc_quant_matrix_new (nv, k, NULL);
      g_autoptr(DcQuantMatrix) r = dc_quant_matrix_new (nv, k, NULL);

      for (gsize i = 0; i < G_N_ELEMENTS (x); i++)
        x[i] = (float) i;
      x[33 * ld + 17] = which ? INFINITY : NAN;
      x[35 * ld + 12] = NAN;          /* an earlier column, a later row */
      x[20 * ld + 19] = INFINITY;     /* past nv: not an operand value */
      g_assert_false (dc_quant_pack ("cols", x, 1, ld, m, &error));
      g_assert_false (dc_quant_pack_reference ("cols", x, 1, ld, r, &want));
      g_assert_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_NOT_FINITE);
      g_assert_cmpstr (error->message, ==, want->message);
      g_assert_cmpstr (error->message, ==, "cols: NaN at vector 12, index 35 (refused, never quantized)");
      if (__builtin_cpu_supports ("avx2"))
        {
          g_clear_error (&error);
          g_assert_false (dc_quant_pack_columns_avx2 ("cols", x, ld, m, &error));
          g_assert_cmpstr (error->message, ==, want->message);
        }
      if (cpu_has_avx512_vl ())
        {
          g_clear_error (&error);
          g_assert_false (dc_quant_pack_columns_avx512 ("cols", x, ld, m, &error));
          g_assert_cmpstr (error->message, ==, want->message);
        }
    }
}

/* The column packer's gate refuses its broken twin and leaves the row
 * packer (its own gate) in use. A subprocess: verdicts are cached. */
static void
test_quant_columns_gate (void)
{
  if (!__builtin_cpu_supports ("avx2"))
    {
      g_test_skip ("no AVX2 on this CPU");
      return;
    }
  if (g_test_subprocess ())
    {
      const gsize k = 40, nv = 9, ld = 9;
      float x[40 * 9];
      g_autoptr(DcQuantMatrix) m = dc_quant_matrix_new (nv, k, NULL);
      g_autoptr(DcQuantMatrix) r = dc_quant_matrix_new (nv, k, NULL);

      g_setenv ("DC_TEST_BREAK_KERNEL", "quant-columns-avx2", TRUE);
      g_assert_cmpstr (dc_quant_pack_columns_simd_name (), ==, "scalar");
      g_assert_cmpstr (dc_quant_pack_simd_name (), ==, "avx2");
      /* Refused, dc_quant_pack still packs columns: with the reference. */
      for (gsize i = 0; i < G_N_ELEMENTS (x); i++)
        x[i] = (float) i * 0.37f - 50.0f;
      g_assert_true (dc_quant_pack ("cols", x, 1, ld, m, NULL));
      g_assert_true (dc_quant_pack_reference ("cols", x, 1, ld, r, NULL));
      g_assert_cmpmem (m->q, nv * k, r->q, nv * k);
      return;
    }
  g_test_trap_subprocess (NULL, 60 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
  g_test_trap_assert_stderr ("*AVX2 column quantizer failed verification*refused*");
}

/* The 16-lane column packer is the one in use where the CPU has it (else
 * these tests would not reach it through dc_quant_pack), and its gate
 * refuses its broken twin by name, leaving the AVX2 column packer in use.
 * A subprocess: verdicts are cached. */
static void
test_quant_columns_avx512_gate (void)
{
  if (!cpu_has_avx512_vl ())
    {
      g_test_skip ("no AVX-512 F, BW and VL on this CPU");
      return;
    }
  if (g_test_subprocess ())
    {
      const gsize k = 40, nv = 9, ld = 9;
      float x[40 * 9];
      g_autoptr(DcQuantMatrix) m = dc_quant_matrix_new (nv, k, NULL);
      g_autoptr(DcQuantMatrix) r = dc_quant_matrix_new (nv, k, NULL);

      g_setenv ("DC_TEST_BREAK_KERNEL", "quant-columns-avx512", TRUE);
      g_assert_cmpstr (dc_quant_pack_columns_avx512_name (), ==, "none");
      g_assert_cmpstr (dc_quant_pack_columns_simd_name (), ==, "avx2");
      for (gsize i = 0; i < G_N_ELEMENTS (x); i++)
        x[i] = (float) i * 0.37f - 50.0f;
      g_assert_true (dc_quant_pack ("cols", x, 1, ld, m, NULL));
      g_assert_true (dc_quant_pack_reference ("cols", x, 1, ld, r, NULL));
      g_assert_cmpmem (m->q, nv * k, r->q, nv * k);
      return;
    }
  g_assert_cmpstr (dc_quant_pack_columns_avx512_name (), ==, "avx512");
  g_test_trap_subprocess (NULL, 60 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
  g_test_trap_assert_stderr ("*AVX-512 column quantizer failed verification*refused*");
}

/* The 16-lane packer's gate refuses its broken twin by name; the AVX2
 * packer stays in use, and short vectors go to it. */
static void
test_quant_avx512_gate (void)
{
  if (!cpu_has_avx512 ())
    {
      g_test_skip ("no AVX-512 F and BW on this CPU");
      return;
    }
  if (g_test_subprocess ())
    {
      float x[32];
      g_autoptr(DcQuantMatrix) m = dc_quant_matrix_new (1, 32, NULL);
      g_autoptr(DcQuantMatrix) r = dc_quant_matrix_new (1, 32, NULL);

      g_setenv ("DC_TEST_BREAK_KERNEL", "quant-avx512", TRUE);
      g_assert_cmpstr (dc_quant_pack_avx512_name (), ==, "none");
      g_assert_cmpstr (dc_quant_pack_simd_name (), ==, "avx2");
      for (gsize i = 0; i < 32; i++)
        x[i] = (float) i * 0.37f - 5.0f;
      g_assert_true (dc_quant_pack ("short", x, 32, 1, m, NULL));
      g_assert_true (dc_quant_pack_reference ("short", x, 32, 1, r, NULL));
      g_assert_cmpmem (m->q, 32, r->q, 32);
      return;
    }
  g_test_trap_subprocess (NULL, 60 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
  g_test_trap_assert_stderr ("*AVX-512 quantizer failed verification*refused*");
}

/* "all" breaks the quantizer too, as it does every other gated kernel;
 * a longer name that merely contains "quant-avx2" does not. */
static void
test_quant_simd_gate_all (void)
{
  if (!__builtin_cpu_supports ("avx2"))
    {
      g_test_skip ("no AVX2 on this CPU");
      return;
    }
  if (g_test_subprocess ())
    {
      g_setenv ("DC_TEST_BREAK_KERNEL", "avx512-vnni,all", TRUE);
      g_assert_cmpstr (dc_quant_pack_simd_name (), ==, "scalar");
      g_assert_cmpstr (dc_quant_pack_columns_simd_name (), ==, "scalar");
      g_assert_cmpstr (dc_quant_pack_avx512_name (), ==, "none");
      g_assert_cmpstr (dc_quant_pack_columns_avx512_name (), ==, "none");
      return;
    }
  g_test_trap_subprocess (NULL, 60 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
  g_test_trap_assert_stderr ("*AVX2 quantizer failed verification*refused*");
}

/* The one reader every gate uses: whole names in a comma list, or "all". */
/* The packers with plain vectors' subnormal values taken from their steps
 * of 2^-149 (the default on Intel, which takes an assist for a multiply
 * that reads a subnormal) and without: every packer gives the reference's
 * bits either way. The adversarial cases put subnormals beside an amax in
 * every binade, 2^-120 and 2^-119 included (e = −126 and −125, where a
 * subnormal rounds to ±1); the random ones any finite float. */
static void
test_quant_subnormal_steps (void)
{
  for (int on = 1; on >= 0; on--)
    {
      _dc_quant_set_subnormal_steps (on);
      test_quant_simd_adversarial ();
      test_quant_simd_random ();
      test_quant_columns_random ();
      test_quant_columns_adversarial ();
    }
  _dc_quant_set_subnormal_steps (-1);
}

static void
test_break_matches (void)
{
  g_assert_false (dc_test_break_matches (NULL, "quant-avx2"));
  g_assert_false (dc_test_break_matches ("", "quant-avx2"));
  g_assert_true (dc_test_break_matches ("all", "quant-avx2"));
  g_assert_true (dc_test_break_matches ("adam,all", "softmax"));
  g_assert_true (dc_test_break_matches ("adam,quant-avx2", "quant-avx2"));
  g_assert_false (dc_test_break_matches ("adam,quant-avx2", "avx2"));
  g_assert_false (dc_test_break_matches ("quant-avx2-extra", "quant-avx2"));
  g_assert_false (dc_test_break_matches ("allx", "quant-avx2"));
}

int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/dc/engine/quant/scale-and-rounding", test_quant_scale_and_rounding);
  g_test_add_func ("/dc/engine/quant/power-of-two-exact", test_quant_power_of_two_exact);
  g_test_add_func ("/dc/engine/quant/never-minus-128", test_quant_never_minus_128);
  g_test_add_func ("/dc/engine/quant/denormal-inputs", test_quant_denormal_inputs);
  g_test_add_func ("/dc/engine/quant/zero-vector", test_quant_zero_vector);
  g_test_add_func ("/dc/engine/quant/refuses-not-finite", test_quant_refuses_not_finite);
  g_test_add_func ("/dc/engine/quant/strides", test_quant_strides);
  g_test_add_func ("/dc/engine/quant/simd-adversarial", test_quant_simd_adversarial);
  g_test_add_func ("/dc/engine/quant/simd-random", test_quant_simd_random);
  g_test_add_func ("/dc/engine/quant/simd-not-finite", test_quant_simd_not_finite);
  g_test_add_func ("/dc/engine/quant/simd-gate", test_quant_simd_gate);
  g_test_add_func ("/dc/engine/quant/simd-gate-all", test_quant_simd_gate_all);
  g_test_add_func ("/dc/engine/quant/avx512-gate", test_quant_avx512_gate);
  g_test_add_func ("/dc/engine/quant/columns-random", test_quant_columns_random);
  g_test_add_func ("/dc/engine/quant/columns-adversarial", test_quant_columns_adversarial);
  g_test_add_func ("/dc/engine/quant/subnormal-steps", test_quant_subnormal_steps);
  g_test_add_func ("/dc/engine/quant/columns-not-finite", test_quant_columns_not_finite);
  g_test_add_func ("/dc/engine/quant/columns-gate", test_quant_columns_gate);
  g_test_add_func ("/dc/engine/quant/columns-avx512-gate", test_quant_columns_avx512_gate);
  g_test_add_func ("/dc/engine/quant/break-matches", test_break_matches);
  g_test_add_func ("/dc/engine/quant/matrix-new-limits", test_matrix_new_limits);
  g_test_add_func ("/dc/engine/quant/check-refuses-minus-128", test_check_refuses_minus_128);
  g_test_add_func ("/dc/engine/gemm/epilogue", test_epilogue);
  g_test_add_func ("/dc/engine/gemm/reference-small", test_reference_small);
  g_test_add_func ("/dc/engine/gemm/reference-max-k", test_reference_max_k_no_overflow);
  g_test_add_func ("/dc/engine/gemm/rule-id", test_rule_id);

  return g_test_run ();
}
