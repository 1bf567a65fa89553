/* dc-quant-simd.c: the AVX2 quantizer and its start-up gate.
 *
 * It computes exactly what dc_quant_pack_reference() does (docs/VERIFICATION.md),
 * eight floats at a time:
 * - amax on the integer bits: for finite floats the order of |x| is the
 *   order of their bit patterns without the sign, so vpmaxud on x & 0x7fffffff
 *   finds the same largest magnitude (and NaN/infinity, whose patterns are
 *   above every finite one).
 * - e = floor(log2(amax)) - 6, read from the bits as the reference does.
 * - x · 2^-e in float rather than double. When 2^-e is a normal float
 *   (e in [-126, 126]) the product is exact whenever it is normal, because a
 *   power of two only moves the exponent, and it cannot overflow since
 *   |x| ≤ amax < 2^(e+7). When it falls below the normal range it may be
 *   rounded, but then |y| < 2^-126 and both paths round it to the integer 0.
 *   A vector whose amax is below 2^-120, so that e < −126 (late in a run,
 *   attention columns that no position attends to any more), is scaled
 *   from its values counted in steps of 2^-149 (tiny_as_steps_avx2 ()).
 * - vroundps with round-to-nearest-even (the reference's 1.5·2^52 trick is
 *   the same rounding), clamp to [-127, 127] in float, convert (exact: the
 *   values are integers) and narrow with saturating packs.
 * Strided vectors, non-finite input (for the reference's error message) and
 * CPUs without AVX2 use the reference. Like the GEMM kernels, the AVX2 path
 * is used only after it has matched the reference on adversarial inputs;
 * DC_TEST_BREAK_KERNEL containing "quant-avx2" corrupts its answer there,
 * for the test of the gate only.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-engine"

#include "config.h"

#include "dc-quant-simd-private.h"
#include "dc-test-break.h"
#include "dc-transpose-private.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DC_QUANT_X86 1
#endif

#ifdef DC_QUANT_X86

/* The range of e for which 2^-e is a normal float (see the file header). */
#define E_MIN (-126)
#define E_MAX 126

static inline float
float_pow2 (int e)
{
  guint32 u = (guint32) (e + 127) << 23;
  float f;

  memcpy (&f, &u, sizeof f);
  return f;
}

/* Vectors whose largest magnitude is below 2^-120 (these bits) are scaled
 * from their steps of 2^-149 (tiny_as_steps_avx2 ()). */
#define TINY_AMAX 0x03800000u

/* How a vector with a finite, nonzero largest magnitude is scaled. */
typedef enum
{
  SCALE_PLAIN,      /* x · 2^-e as floats */
  SCALE_TINY,       /* its steps of 2^-149 (tiny_as_steps_avx2 ()) · 2^(−e−149) */
  SCALE_REFERENCE,  /* 2^-e is no float: dc_quant_pack_reference () */
} ScaleKind;

/* The reference's e = floor(log2(amax)) − 6 in @e and, unless the vector
 * goes to the reference (@scale untouched then), the factor in @scale:
 * 2^-e, or for a tiny vector 2^(−e−149) (between 2^-22 and 2^6). The one
 * rule of the four packers. */
static ScaleKind
vector_scale (guint32  amax,
              int     *e,
              float   *scale)
{
  if (amax < TINY_AMAX)
    {
      int lg = (amax >> 23) != 0 ? (int) (amax >> 23) - 127 : (31 - __builtin_clz (amax)) - 149;

      *e = lg - 6;
      *scale = float_pow2 (-*e - 149);
      return SCALE_TINY;
    }
  *e = (int) (amax >> 23) - 127 - 6;
  if (*e < E_MIN || *e > E_MAX)
    return SCALE_REFERENCE;
  *scale = float_pow2 (-*e);
  return SCALE_PLAIN;
}

/* A plain vector's subnormal values x (|x| < 2^-126) scaled from their
 * steps of 2^-149 (the integer ±m of their bits, converted exactly) times
 * 2^(−e−149), so that no multiply reads a subnormal: Intel cores take a
 * microcode assist for that, about 7 ns a value on the H200 host's Xeon
 * against 0.3 for a normal one (s30; AMD's Zen reads one at full speed).
 * m · 2^(−e−149) = x · 2^-e exactly where 2^(−e−149) is a normal float
 * (e ≤ −23); for a larger e, |x · 2^-e| < 2^-103 rounds to 0, and so does
 * m · 0. The factor: */
static float
subnormal_factor (int e)
{
  return e <= -23 ? float_pow2 (-e - 149) : 0.0f;
}

/* Whether the packers take plain vectors' subnormal values that way: on
 * Intel by default, where it saves the assists (elsewhere it is only more
 * work); DC_QUANT_SUBNORMAL_STEPS=1 or 0 decides instead. Same bits either
 * way. */
static int subnormal_steps = -1;

static gboolean
use_subnormal_steps (void)
{
  int on = g_atomic_int_get (&subnormal_steps);

  if (G_UNLIKELY (on < 0))
    {
      const char *env = g_getenv ("DC_QUANT_SUBNORMAL_STEPS");

      on = env != NULL ? g_strcmp0 (env, "0") != 0 : __builtin_cpu_is ("intel");
      g_atomic_int_set (&subnormal_steps, on);
    }
  return on;
}

__attribute__ ((target ("avx2"))) static guint32
amax_bits_avx2 (const float *x,
                gsize        k)
{
  const __m256i abs_mask = _mm256_set1_epi32 (0x7fffffff);
  __m256i m0 = _mm256_setzero_si256 (), m1 = m0;
  __m128i s;
  guint32 amax;
  gsize i = 0;

  for (; i + 16 <= k; i += 16)
    {
      m0 = _mm256_max_epu32 (m0, _mm256_and_si256 (_mm256_loadu_si256 ((const __m256i *) (x + i)),
                                                   abs_mask));
      m1 = _mm256_max_epu32 (m1, _mm256_and_si256 (_mm256_loadu_si256 ((const __m256i *) (x + i + 8)),
                                                   abs_mask));
    }
  for (; i + 8 <= k; i += 8)
    m0 = _mm256_max_epu32 (m0, _mm256_and_si256 (_mm256_loadu_si256 ((const __m256i *) (x + i)),
                                                 abs_mask));
  m0 = _mm256_max_epu32 (m0, m1);
  s = _mm_max_epu32 (_mm256_castsi256_si128 (m0), _mm256_extracti128_si256 (m0, 1));
  s = _mm_max_epu32 (s, _mm_shuffle_epi32 (s, _MM_SHUFFLE (1, 0, 3, 2)));
  s = _mm_max_epu32 (s, _mm_shuffle_epi32 (s, _MM_SHUFFLE (2, 3, 0, 1)));
  amax = (guint32) _mm_cvtsi128_si32 (s);
  for (; i < k; i++)
    {
      guint32 u;

      memcpy (&u, x + i, sizeof u);
      u &= 0x7fffffffu;
      if (u > amax)
        amax = u;
    }
  return amax;
}

/* The lanes in @tiny (vectors whose largest value is below 2^-120, so all
 * their values are) as x · 2^149, the value in steps of 2^-149, without a
 * multiply: a normal x takes 149 more in its exponent field (at most 155),
 * a subnormal one is the integer ±m of its bits, which converts exactly.
 * Such a vector's 2^-e would not be a normal float (e < −126); its scale
 * becomes 2^(−e−149), which is, so x · 2^-e is formed from the same
 * values without a subnormal operand or a scale out of range (the
 * reference's scalar double loop was the other way). */
__attribute__ ((target ("avx2"))) static inline __m256
tiny_as_steps_avx2 (__m256  x,
                    __m256i tiny)
{
  __m256i bits = _mm256_castps_si256 (x);
  __m256i field = _mm256_and_si256 (bits, _mm256_set1_epi32 (0x7f800000));
  __m256i m = _mm256_sign_epi32 (_mm256_and_si256 (bits, _mm256_set1_epi32 (0x007fffff)), bits);
  __m256 steps = _mm256_blendv_ps (
    _mm256_castsi256_ps (_mm256_add_epi32 (bits, _mm256_set1_epi32 (149 << 23))),
    _mm256_cvtepi32_ps (m),
    _mm256_castsi256_ps (_mm256_cmpeq_epi32 (field, _mm256_setzero_si256 ())));

  return _mm256_blendv_ps (x, steps, _mm256_castsi256_ps (tiny));
}

/* The lanes in @plain holding a subnormal as their steps of 2^-149, their
 * factor (in *factor, else @scale) @sub: subnormal_factor (). */
__attribute__ ((target ("avx2"))) static inline __m256
subnormal_as_steps_avx2 (__m256   x,
                         __m256i  plain,
                         __m256   scale,
                         __m256   sub,
                         __m256  *factor)
{
  __m256i mag = _mm256_and_si256 (_mm256_castps_si256 (x), _mm256_set1_epi32 (0x7fffffff));
  __m256i lanes = _mm256_and_si256 (
    plain, _mm256_andnot_si256 (_mm256_cmpeq_epi32 (mag, _mm256_setzero_si256 ()),
                                _mm256_cmpgt_epi32 (_mm256_set1_epi32 (0x00800000), mag)));

  *factor = scale;
  if (_mm256_movemask_ps (_mm256_castsi256_ps (lanes)) == 0)
    return x;
  *factor = _mm256_blendv_ps (scale, sub, _mm256_castsi256_ps (lanes));
  return tiny_as_steps_avx2 (x, lanes);
}

/* Eight floats to eight int32 in [-127, 127]; @tiny: the vector's amax is
 * below 2^-120, read as tiny_as_steps_avx2 () gives it; else @steps: its
 * subnormals as subnormal_as_steps_avx2 () gives them, factor @sub. */
__attribute__ ((target ("avx2"))) static inline __m256i
quant8_avx2 (const float *x,
             __m256       scale,
             gboolean     tiny,
             gboolean     steps,
             __m256       sub)
{
  const __m256 hi = _mm256_set1_ps (127.0f), lo = _mm256_set1_ps (-127.0f);
  __m256 y = _mm256_loadu_ps (x);

  if (tiny)
    y = tiny_as_steps_avx2 (y, _mm256_set1_epi32 (-1));
  else if (steps)
    y = subnormal_as_steps_avx2 (y, _mm256_set1_epi32 (-1), scale, sub, &scale);
  y = _mm256_mul_ps (y, scale);

  y = _mm256_round_ps (y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  y = _mm256_min_ps (_mm256_max_ps (y, lo), hi);
  return _mm256_cvtps_epi32 (y);
}

/* 32 floats to 32 int8, in order. */
__attribute__ ((target ("avx2"))) static inline void
quant32_avx2 (const float *x,
              __m256       scale,
              gboolean     tiny,
              gboolean     steps,
              __m256       sub,
              gint8       *q)
{
  /* packs work within 128-bit lanes: the dwords come out as
   * a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7, and the permute restores order. */
  const __m256i order = _mm256_setr_epi32 (0, 4, 1, 5, 2, 6, 3, 7);
  __m256i ab = _mm256_packs_epi32 (quant8_avx2 (x, scale, tiny, steps, sub),
                                   quant8_avx2 (x + 8, scale, tiny, steps, sub));
  __m256i cd = _mm256_packs_epi32 (quant8_avx2 (x + 16, scale, tiny, steps, sub),
                                   quant8_avx2 (x + 24, scale, tiny, steps, sub));
  __m256i p = _mm256_permutevar8x32_epi32 (_mm256_packs_epi16 (ab, cd), order);

  _mm256_storeu_si256 ((__m256i *) q, p);
}

/* Returns FALSE when the vector needs the reference (non-finite, or e out
 * of the float range); q and *exponent are then untouched. */
__attribute__ ((target ("avx2"))) static gboolean
quant_vector_avx2 (const float *x,
                   gsize        k,
                   gint8       *q,
                   gint32      *exponent)
{
  guint32 amax = amax_bits_avx2 (x, k);
  ScaleKind kind;
  gboolean tiny, steps;
  __m256 scale, sub;
  gsize i = 0;
  float f = 1.0f;
  int e;

  if (amax >= 0x7f800000u)
    return FALSE;
  if (amax == 0)
    {
      memset (q, 0, k);
      *exponent = 0;
      return TRUE;
    }
  kind = vector_scale (amax, &e, &f);
  if (kind == SCALE_REFERENCE)
    return FALSE;
  tiny = kind == SCALE_TINY;
  steps = !tiny && use_subnormal_steps ();
  scale = _mm256_set1_ps (f);
  sub = _mm256_set1_ps (subnormal_factor (e));
  for (; i + 32 <= k; i += 32)
    quant32_avx2 (x + i, scale, tiny, steps, sub, q + i);
  if (i < k)
    {
      /* The ragged end through the same code: zeros quantize to 0. */
      float tail_x[32] = { 0 };
      gint8 tail_q[32];

      memcpy (tail_x, x + i, (k - i) * sizeof *x);
      quant32_avx2 (tail_x, scale, tiny, steps, sub, tail_q);
      memcpy (q + i, tail_q, k - i);
    }
  *exponent = e;
  return TRUE;
}

gboolean
dc_quant_pack_avx2 (const char     *what,
                    const float    *src,
                    gsize           vector_stride,
                    DcQuantMatrix  *out,
                    GError        **error)
{
  for (gsize v = 0; v < out->n_vectors; v++)
    {
      const float *x = src + v * vector_stride;

      if (!quant_vector_avx2 (x, out->k, out->q + v * out->k, out->exponent + v))
        {
          DcQuantMatrix one = { 1, out->k, out->q + v * out->k, out->exponent + v };

          /* Non-finite: the reference over the whole matrix gives the same
           * error, naming the same vector. Otherwise only this vector. */
          if (!dc_quant_pack_reference (what, x, out->k, 1, &one, NULL))
            return dc_quant_pack_reference (what, src, vector_stride, 1, out, error);
        }
    }
  return TRUE;
}

/*
 * The column quantizer: vectors that are columns of a row-major matrix
 * (out->k rows, row r at src + r · ld, column v at src + v), as a weight
 * gradient's operands are. Sixteen columns at a time (COLUMN_GROUP): one
 * pass over the rows finds each column's amax exactly as amax_bits_avx2
 * does for a row, then a second pass scales eight rows of eight columns
 * with quant8_avx2's arithmetic (multiply, round to nearest even, clamp,
 * convert: the same bits), transposes the
 * 8 × 8 int32 block in registers and narrows 32 rows of a column to 32
 * contiguous int8: the layout dc_quant_pack gives, without the float
 * transpose into a buffer that the products used to make first.
 */

/* Columns [c0, c0 + w) of row r, w ≤ 8; lanes past w read as 0. */
__attribute__ ((target ("avx2"))) static inline __m256
load_row8 (const float *row,
           __m256i      mask,
           gboolean     full)
{
  return full ? _mm256_loadu_ps (row) : _mm256_maskload_ps (row, mask);
}

/* r[0..7] (eight rows of eight int32) into t[c] = column c's eight rows. */
__attribute__ ((target ("avx2"))) static inline void
transpose_8x8_epi32 (const __m256i r_in[8],
                     __m256i       t_out[8])
{
  __m256 r[8], t[8];

  for (int i = 0; i < 8; i++)
    r[i] = _mm256_castsi256_ps (r_in[i]);
  dc_transpose_8x8_ps (r, t);
  for (int i = 0; i < 8; i++)
    t_out[i] = _mm256_castps_si256 (t[i]);
}

/* Rows [i0, i0 + 32) of columns [c0, c0 + w) into q (column v at q + v · k);
 * rows at or past k count as zero and are not stored. */
__attribute__ ((target ("avx2"))) static inline void
quant_columns_block_avx2 (const float *src,
                          gsize        ld,
                          gsize        k,
                          gsize        i0,
                          gsize        c0,
                          gsize        w,
                          __m256i      mask,
                          __m256i      tiny,
                          __m256i      steps,
                          __m256       scale,
                          __m256       sub,
                          gint8       *q)
{
  const gboolean any_tiny = _mm256_movemask_ps (_mm256_castsi256_ps (tiny)) != 0;
  const gboolean any_steps = _mm256_movemask_ps (_mm256_castsi256_ps (steps)) != 0;
  const __m256i order = _mm256_setr_epi32 (0, 4, 1, 5, 2, 6, 3, 7);
  const gboolean full = w == 8;
  const gsize rows = MIN (k - i0, 32);
  __m256i cols[4][8];

  for (int s = 0; s < 4; s++)
    {
      __m256i r[8];

      for (int j = 0; j < 8; j++)
        {
          gsize i = i0 + (gsize) (s * 8 + j);
          __m256 x = i < k ? load_row8 (src + i * ld + c0, mask, full) : _mm256_setzero_ps ();
          __m256 factor = scale, y;

          if (any_tiny)
            x = tiny_as_steps_avx2 (x, tiny);
          if (any_steps)
            x = subnormal_as_steps_avx2 (x, steps, scale, sub, &factor);
          y = _mm256_mul_ps (x, factor);

          /* |y| < 128 (see the file header), so the rounded value lies in
           * [-128, 128] and converts exactly; the clamp to [-127, 127] is
           * done once on the bytes below. */
          y = _mm256_round_ps (y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
          r[j] = _mm256_cvtps_epi32 (y);
        }
      transpose_8x8_epi32 (r, cols[s]);
    }
  for (gsize c = 0; c < w; c++)
    {
      __m256i ab = _mm256_packs_epi32 (cols[0][c], cols[1][c]);
      __m256i cd = _mm256_packs_epi32 (cols[2][c], cols[3][c]);
      __m256i p = _mm256_permutevar8x32_epi32 (_mm256_packs_epi16 (ab, cd), order);
      gint8 *dst = q + (c0 + c) * k + i0;

      /* The packs saturate 128 to 127; -128 is raised to -127 here: the
       * float path's clamp, in one instruction per 32 values. */
      p = _mm256_max_epi8 (p, _mm256_set1_epi8 (-127));

      if (rows == 32)
        {
          _mm256_storeu_si256 ((__m256i *) dst, p);
        }
      else
        {
          gint8 tail[32];

          _mm256_storeu_si256 ((__m256i *) tail, p);
          memcpy (dst, tail, rows);
        }
    }
}

/* Columns per group: 16 floats are one cache line of each row, so the
 * second pass re-reads from L2 the lines the first brought in (a group of
 * a 4096-row operand is 256 KiB), and each line is used whole, once. */
#define COLUMN_GROUP 16

__attribute__ ((target ("avx2"))) gboolean
dc_quant_pack_columns_avx2 (const char     *what,
                            const float    *src,
                            gsize           ld,
                            DcQuantMatrix  *out,
                            GError        **error)
{
  const __m256i abs_mask = _mm256_set1_epi32 (0x7fffffff);
  const __m256i lane = _mm256_setr_epi32 (0, 1, 2, 3, 4, 5, 6, 7);
  const gsize k = out->k, nv = out->n_vectors;

  for (gsize c0 = 0; c0 < nv; c0 += COLUMN_GROUP)
    {
      /* Two halves of eight columns; the second may be short or empty. */
      const gsize w = MIN (nv - c0, COLUMN_GROUP);
      const gsize w0 = MIN (w, 8), w1 = w - w0;
      const __m256i mask0 = _mm256_cmpgt_epi32 (_mm256_set1_epi32 ((int) w0), lane);
      const __m256i mask1 = _mm256_cmpgt_epi32 (_mm256_set1_epi32 ((int) w1), lane);
      __m256i m0 = _mm256_setzero_si256 (), m1 = m0;
      guint32 amax[COLUMN_GROUP];
      gint32 tiny[COLUMN_GROUP] = { 0 }, steps[COLUMN_GROUP] = { 0 };
      float scales[COLUMN_GROUP], subs[COLUMN_GROUP] = { 0 };
      gboolean slow[COLUMN_GROUP] = { FALSE };

      /* Pass 1: each column's largest magnitude on the bits. */
      for (gsize i = 0; i < k; i++)
        {
          const float *row = src + i * ld + c0;

          m0 = _mm256_max_epu32 (m0, _mm256_and_si256 (_mm256_castps_si256 (
                                   load_row8 (row, mask0, w0 == 8)), abs_mask));
          if (w1 > 0)
            m1 = _mm256_max_epu32 (m1, _mm256_and_si256 (_mm256_castps_si256 (
                                     load_row8 (row + 8, mask1, w1 == 8)), abs_mask));
        }
      _mm256_storeu_si256 ((__m256i *) amax, m0);
      _mm256_storeu_si256 ((__m256i *) (amax + 8), m1);

      /* Each column's exponent, by the row path's rule. */
      for (gsize c = 0; c < COLUMN_GROUP; c++)
        {
          ScaleKind kind;
          int e;

          scales[c] = 1.0f;
          if (c >= w)
            continue;
          if (amax[c] >= 0x7f800000u)
            {
              /* Not finite: the reference over the whole matrix gives the
               * same error, naming the same vector and index. */
              return dc_quant_pack_reference (what, src, 1, ld, out, error);
            }
          if (amax[c] == 0)
            {
              out->exponent[c0 + c] = 0;  /* ±0 · 1 rounds to 0 */
              continue;
            }
          kind = vector_scale (amax[c], &e, &scales[c]);
          if (kind == SCALE_REFERENCE)
            {
              slow[c] = TRUE;  /* the reference below, this column only */
              continue;
            }
          if (kind == SCALE_TINY)
            tiny[c] = -1;
          else if (use_subnormal_steps ())
            {
              steps[c] = -1;
              subs[c] = subnormal_factor (e);
            }
          out->exponent[c0 + c] = e;
        }

      /* Pass 2: scale, round, clamp, transpose and narrow, both halves of
       * a 32-row block together (the same cache lines). */
      for (gsize i0 = 0; i0 < k; i0 += 32)
        {
          quant_columns_block_avx2 (src, ld, k, i0, c0, w0, mask0,
                                    _mm256_loadu_si256 ((const __m256i *) tiny),
                                    _mm256_loadu_si256 ((const __m256i *) steps),
                                    _mm256_loadu_ps (scales), _mm256_loadu_ps (subs), out->q);
          if (w1 > 0)
            quant_columns_block_avx2 (src, ld, k, i0, c0 + 8, w1, mask1,
                                      _mm256_loadu_si256 ((const __m256i *) (tiny + 8)),
                                      _mm256_loadu_si256 ((const __m256i *) (steps + 8)),
                                      _mm256_loadu_ps (scales + 8), _mm256_loadu_ps (subs + 8),
                                      out->q);
        }

      for (gsize c = 0; c < w; c++)
        if (slow[c])
          {
            DcQuantMatrix one = { 1, k, out->q + (c0 + c) * k, out->exponent + c0 + c };

            if (!dc_quant_pack_reference (what, src + c0 + c, 1, ld, &one, error))
              return FALSE;
          }
    }
  return TRUE;
}

/*
 * The 16-lane quantizer (AVX-512 F and BW): the AVX2 packer's rule and
 * arithmetic, sixteen floats at a time, for the short vectors of the
 * attention (a head's 32 values are two steps instead of four). The ragged
 * end is a masked load (zeros, which quantize to 0) and a masked store.
 * Rounded values lie in [-128, 128] (see the file header): they are raised
 * to -127 as int32 and narrowed with signed saturation (128 → 127), the
 * float clamp's bits. It has its own gate and broken twin ("quant-avx512").
 */
#define AVX512_TARGET __attribute__ ((target ("avx512f,avx512bw")))

/* tiny_as_steps_avx2 () on 16 lanes, @tiny a mask. */
AVX512_TARGET static inline __m512
tiny_as_steps_avx512 (__m512    x,
                      __mmask16 tiny)
{
  const __mmask16 all = 0xffff;
  __m512i bits = _mm512_castps_si512 (x);
  __m512i m = _mm512_and_si512 (bits, _mm512_set1_epi32 (0x007fffff));
  __mmask16 sub = _mm512_cmpeq_epi32_mask (_mm512_and_si512 (bits, _mm512_set1_epi32 (0x7f800000)),
                                           _mm512_setzero_si512 ());

  m = _mm512_mask_sub_epi32 (m, _mm512_cmplt_epi32_mask (bits, _mm512_setzero_si512 ()),
                             _mm512_setzero_si512 (), m);
  x = _mm512_mask_mov_ps (x, tiny & ~sub & all,
                          _mm512_castsi512_ps (_mm512_add_epi32 (bits, _mm512_set1_epi32 (149 << 23))));
  return _mm512_mask_cvtepi32_ps (x, tiny & sub & all, m);
}

/* subnormal_as_steps_avx2 () on 16 lanes, @plain a mask. */
AVX512_TARGET static inline __m512
subnormal_as_steps_avx512 (__m512    x,
                           __mmask16 plain,
                           __m512    scale,
                           __m512    sub,
                           __m512   *factor)
{
  __m512i mag = _mm512_and_si512 (_mm512_castps_si512 (x), _mm512_set1_epi32 (0x7fffffff));
  __mmask16 lanes = plain
                    & _mm512_cmplt_epu32_mask (mag, _mm512_set1_epi32 (0x00800000))
                    & _mm512_cmpneq_epi32_mask (mag, _mm512_setzero_si512 ());

  *factor = scale;
  if (lanes == 0)
    return x;
  *factor = _mm512_mask_mov_ps (scale, lanes, sub);
  return tiny_as_steps_avx512 (x, lanes);
}

AVX512_TARGET static gboolean
quant_vector_avx512 (const float *x,
                     gsize        k,
                     gint8       *q,
                     gint32      *exponent)
{
  /* The maskz forms with every lane set: GCC 12's unmasked ones trip
   * -Wmaybe-uninitialized on their undefined pass-through operand. */
  const __mmask16 all = 0xffff;
  const __m512i abs_mask = _mm512_set1_epi32 (0x7fffffff);
  __m512i m = _mm512_setzero_si512 ();
  __m256i m8;
  __m128i s4;
  __m512 scale, sub;
  __mmask16 tiny, steps;
  ScaleKind kind;
  guint32 amax;
  gsize i;
  float f = 1.0f;
  int e;

  for (i = 0; i < k; i += 16)
    {
      __mmask16 live = k - i >= 16 ? 0xffff : (__mmask16) ((1u << (k - i)) - 1);

      m = _mm512_maskz_max_epu32 (all, m, _mm512_and_si512 (_mm512_castps_si512 (
                                      _mm512_maskz_loadu_ps (live, x + i)), abs_mask));
    }
  m8 = _mm256_max_epu32 (_mm512_maskz_extracti64x4_epi64 (0xf, m, 0),
                         _mm512_maskz_extracti64x4_epi64 (0xf, m, 1));
  s4 = _mm_max_epu32 (_mm256_castsi256_si128 (m8), _mm256_extracti128_si256 (m8, 1));
  s4 = _mm_max_epu32 (s4, _mm_shuffle_epi32 (s4, _MM_SHUFFLE (1, 0, 3, 2)));
  s4 = _mm_max_epu32 (s4, _mm_shuffle_epi32 (s4, _MM_SHUFFLE (2, 3, 0, 1)));
  amax = (guint32) _mm_cvtsi128_si32 (s4);
  if (amax >= 0x7f800000u)
    return FALSE;
  if (amax == 0)
    {
      memset (q, 0, k);
      *exponent = 0;
      return TRUE;
    }
  kind = vector_scale (amax, &e, &f);
  if (kind == SCALE_REFERENCE)
    return FALSE;
  tiny = kind == SCALE_TINY ? 0xffff : 0;
  steps = tiny == 0 && use_subnormal_steps () ? 0xffff : 0;
  scale = _mm512_set1_ps (f);
  sub = _mm512_set1_ps (subnormal_factor (e));
  for (i = 0; i < k; i += 16)
    {
      __mmask16 live = k - i >= 16 ? 0xffff : (__mmask16) ((1u << (k - i)) - 1);
      __m512 y = _mm512_maskz_loadu_ps (live, x + i);
      __m512 factor = scale;
      __m512i v;

      if (tiny != 0)
        y = tiny_as_steps_avx512 (y, tiny);
      else if (steps != 0)
        y = subnormal_as_steps_avx512 (y, steps, scale, sub, &factor);
      y = _mm512_mul_ps (y, factor);
      y = _mm512_maskz_roundscale_ps (all, y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      v = _mm512_maskz_max_epi32 (all, _mm512_maskz_cvtps_epi32 (all, y),
                                  _mm512_set1_epi32 (-127));
      _mm512_mask_cvtsepi32_storeu_epi8 (q + i, live, v);
    }
  *exponent = e;
  return TRUE;
}

AVX512_TARGET gboolean
dc_quant_pack_avx512 (const char     *what,
                      const float    *src,
                      gsize           vector_stride,
                      DcQuantMatrix  *out,
                      GError        **error)
{
  for (gsize v = 0; v < out->n_vectors; v++)
    {
      const float *x = src + v * vector_stride;

      if (!quant_vector_avx512 (x, out->k, out->q + v * out->k, out->exponent + v))
        {
          DcQuantMatrix one = { 1, out->k, out->q + v * out->k, out->exponent + v };

          if (!dc_quant_pack_reference (what, x, out->k, 1, &one, NULL))
            return dc_quant_pack_reference (what, src, vector_stride, 1, out, error);
        }
    }
  return TRUE;
}

/*
 * The 16-lane column quantizer (AVX-512 F and BW): the AVX2 column
 * packer's rule and arithmetic (pass 1: each column's amax on the bits;
 * pass 2: multiply by 2^-e, round to nearest even, convert), sixteen
 * columns a row, one cache line. Its transpose is cheaper: the saturating
 * packs of four rows leave, in each 128-bit lane, a 4 × 4 block of bytes
 * (four rows of four columns), one vpshufb turns each block to column
 * order, and four unpacks of four such registers give, per lane, one
 * column's 16 consecutive rows; four of those (64 rows) are stored as one
 * 64-byte line per column. The AVX2 packer moves
 * every value through an 8 × 8 int32 transpose first (about twice the
 * instructions per value). The packs saturate 128 to 127 and -128 is raised
 * to -127 on the bytes, as the AVX2 packer does. Its own gate and broken
 * twin ("quant-columns-avx512"). VL for the 16-byte masked stores.
 */
#define COLUMNS512_TARGET __attribute__ ((target ("avx512f,avx512bw,avx512vl")))

/* Rows [i0, i0 + 16) of the group's 16 columns (lanes off in @cols, and
 * rows at or past k, read as zero), quantized: lane L of u[m] is column
 * 4L + m's 16 rows, as int8; the columns in @tiny as
 * tiny_as_steps_avx512 () gives them. */
COLUMNS512_TARGET static inline __attribute__ ((always_inline)) void
quant_rows16_avx512 (const float *src,
                     gsize        ld,
                     gsize        k,
                     gsize        i0,
                     gsize        c0,
                     __mmask16    cols,
                     __mmask16    tiny,
                     __mmask16    steps,
                     __m512       scale,
                     __m512       sub,
                     __m512i      u[4])
{
  const __mmask16 all = 0xffff;
  /* Within each lane: the 4 × 4 block from row order to column order. */
  const __m512i to_columns = _mm512_maskz_broadcast_i32x4 (
    all, _mm_setr_epi8 (0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
  __m512i z[4], lo01, hi01, lo23, hi23;

  for (int j = 0; j < 4; j++)
    {
      __m512i r[4];

      for (int s = 0; s < 4; s++)
        {
          const gsize i = i0 + (gsize) (j * 4 + s);
          __m512 x = _mm512_maskz_loadu_ps (i < k ? cols : 0, src + i * ld + c0);
          __m512 factor = scale, y;

          if (tiny != 0)
            x = tiny_as_steps_avx512 (x, tiny);
          if (steps != 0)
            x = subnormal_as_steps_avx512 (x, steps, scale, sub, &factor);
          y = _mm512_mul_ps (x, factor);

          /* |y| < 128 (see the file header): the rounded value lies in
           * [-128, 128] and converts exactly. */
          y = _mm512_maskz_roundscale_ps (all, y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
          r[s] = _mm512_maskz_cvtps_epi32 (all, y);
        }
      z[j] = _mm512_maskz_packs_epi16 ((__mmask64) ~0ull,
                                       _mm512_maskz_packs_epi32 ((__mmask32) ~0u, r[0], r[1]),
                                       _mm512_maskz_packs_epi32 ((__mmask32) ~0u, r[2], r[3]));
      z[j] = _mm512_maskz_max_epi8 ((__mmask64) ~0ull, z[j], _mm512_set1_epi8 (-127));
      z[j] = _mm512_maskz_shuffle_epi8 ((__mmask64) ~0ull, z[j], to_columns);
    }
  /* Lane L of z[j], dword m: column 4L + m, rows 4j … 4j + 3. */
  lo01 = _mm512_maskz_unpacklo_epi32 (all, z[0], z[1]);
  hi01 = _mm512_maskz_unpackhi_epi32 (all, z[0], z[1]);
  lo23 = _mm512_maskz_unpacklo_epi32 (all, z[2], z[3]);
  hi23 = _mm512_maskz_unpackhi_epi32 (all, z[2], z[3]);
  u[0] = _mm512_maskz_unpacklo_epi64 (0xff, lo01, lo23);
  u[1] = _mm512_maskz_unpackhi_epi64 (0xff, lo01, lo23);
  u[2] = _mm512_maskz_unpacklo_epi64 (0xff, hi01, hi23);
  u[3] = _mm512_maskz_unpackhi_epi64 (0xff, hi01, hi23);
}

/* Rows [i0, i0 + 64) of columns [c0, c0 + w), w ≤ 16, into q (column v at
 * q + v · k), one 64-byte store per column: the columns' outputs are k
 * bytes apart (4 KiB at a weight gradient's K), so 16 of them share one
 * L1 set, and storing each line in four 16-byte pieces, 16 rows at a time,
 * evicted them between pieces (4096 × 512 ran slower than the AVX2
 * packer). Rows at or past k count as zero and are not stored. */
COLUMNS512_TARGET static void
quant_columns_block_avx512 (const float *src,
                            gsize        ld,
                            gsize        k,
                            gsize        i0,
                            gsize        c0,
                            gsize        w,
                            __mmask16    cols,
                            __mmask16    tiny,
                            __mmask16    steps,
                            __m512       scale,
                            __m512       sub,
                            gint8       *q)
{
  const gsize rows = MIN (k - i0, 64);
  const __mmask64 store_rows = rows == 64 ? ~0ull : (1ull << rows) - 1;
  __m512i u[4][4];

  for (int s = 0; s < 4; s++)
    {
      if (i0 + (gsize) s * 16 < k)
        quant_rows16_avx512 (src, ld, k, i0 + (gsize) s * 16, c0, cols, tiny, steps, scale, sub,
                             u[s]);
      else
        for (int m = 0; m < 4; m++)
          u[s][m] = _mm512_setzero_si512 ();
    }
  /* Per m, a 4 × 4 transpose of 128-bit lanes: lane s of v[L] is column
   * 4L + m's rows 16s … 16s + 15. */
  for (int m = 0; m < 4; m++)
    {
      const __m512i t0 = _mm512_maskz_shuffle_i32x4 (0xffff, u[0][m], u[1][m],
                                                         _MM_SHUFFLE (1, 0, 1, 0));
      const __m512i t1 = _mm512_maskz_shuffle_i32x4 (0xffff, u[0][m], u[1][m],
                                                         _MM_SHUFFLE (3, 2, 3, 2));
      const __m512i t2 = _mm512_maskz_shuffle_i32x4 (0xffff, u[2][m], u[3][m],
                                                         _MM_SHUFFLE (1, 0, 1, 0));
      const __m512i t3 = _mm512_maskz_shuffle_i32x4 (0xffff, u[2][m], u[3][m],
                                                         _MM_SHUFFLE (3, 2, 3, 2));
      __m512i v[4];

      v[0] = _mm512_maskz_shuffle_i32x4 (0xffff, t0, t2, _MM_SHUFFLE (2, 0, 2, 0));
      v[1] = _mm512_maskz_shuffle_i32x4 (0xffff, t0, t2, _MM_SHUFFLE (3, 1, 3, 1));
      v[2] = _mm512_maskz_shuffle_i32x4 (0xffff, t1, t3, _MM_SHUFFLE (2, 0, 2, 0));
      v[3] = _mm512_maskz_shuffle_i32x4 (0xffff, t1, t3, _MM_SHUFFLE (3, 1, 3, 1));
      for (int l = 0; l < 4; l++)
        {
          const gsize c = (gsize) (4 * l + m);

          if (c < w)
            _mm512_mask_storeu_epi8 (q + (c0 + c) * k + i0, store_rows, v[l]);
        }
    }
}

COLUMNS512_TARGET gboolean
dc_quant_pack_columns_avx512 (const char     *what,
                              const float    *src,
                              gsize           ld,
                              DcQuantMatrix  *out,
                              GError        **error)
{
  const __mmask16 all = 0xffff;
  const __m512i abs_mask = _mm512_set1_epi32 (0x7fffffff);
  const gsize k = out->k, nv = out->n_vectors;

  for (gsize c0 = 0; c0 < nv; c0 += COLUMN_GROUP)
    {
      const gsize w = MIN (nv - c0, COLUMN_GROUP);
      const __mmask16 cols = (__mmask16) ((1u << w) - 1);
      __m512i m = _mm512_setzero_si512 ();
      guint32 amax[COLUMN_GROUP];
      float scales[COLUMN_GROUP], subs[COLUMN_GROUP] = { 0 };
      gboolean slow[COLUMN_GROUP] = { FALSE };
      __mmask16 tiny = 0, steps = 0;

      /* Pass 1: each column's largest magnitude on the bits. */
      for (gsize i = 0; i < k; i++)
        {
          __m512 x = _mm512_maskz_loadu_ps (cols, src + i * ld + c0);

          m = _mm512_maskz_max_epu32 (all, m, _mm512_and_si512 (_mm512_castps_si512 (x), abs_mask));
        }
      _mm512_storeu_si512 (amax, m);

      /* Each column's exponent, by the row path's rule. */
      for (gsize c = 0; c < COLUMN_GROUP; c++)
        {
          ScaleKind kind;
          int e;

          scales[c] = 1.0f;
          if (c >= w)
            continue;
          if (amax[c] >= 0x7f800000u)
            return dc_quant_pack_reference (what, src, 1, ld, out, error);
          if (amax[c] == 0)
            {
              out->exponent[c0 + c] = 0;
              continue;
            }
          kind = vector_scale (amax[c], &e, &scales[c]);
          if (kind == SCALE_REFERENCE)
            {
              slow[c] = TRUE;
              continue;
            }
          if (kind == SCALE_TINY)
            tiny |= (__mmask16) (1u << c);
          else if (use_subnormal_steps ())
            {
              steps |= (__mmask16) (1u << c);
              subs[c] = subnormal_factor (e);
            }
          out->exponent[c0 + c] = e;
        }

      /* Pass 2. */
      for (gsize i0 = 0; i0 < k; i0 += 64)
        quant_columns_block_avx512 (src, ld, k, i0, c0, w, cols, tiny, steps,
                                    _mm512_loadu_ps (scales), _mm512_loadu_ps (subs), out->q);

      for (gsize c = 0; c < w; c++)
        if (slow[c])
          {
            DcQuantMatrix one = { 1, k, out->q + (c0 + c) * k, out->exponent + c0 + c };

            if (!dc_quant_pack_reference (what, src + c0 + c, 1, ld, &one, error))
              return FALSE;
          }
    }
  return TRUE;
}

static gboolean
cpu_has_avx512 (void)
{
  return __builtin_cpu_supports ("avx512f") && __builtin_cpu_supports ("avx512bw");
}

static gboolean
cpu_has_avx512_vl (void)
{
  return cpu_has_avx512 () && __builtin_cpu_supports ("avx512vl");
}

/* Inputs chosen to break a wrong packer: ties at .5 (even and odd), values
 * that round to 127.5 and 128, ±0, subnormals, amax near both ends of the
 * float range and at the edges of the fast path, ragged lengths, all-zero
 * vectors, then random floats over many binades. */
static gboolean
gate_input (guint        s,
            float       *x,
            gsize        k,
            guint64     *state)
{
  static const guint32 specials[] = {
    0x3f000000u, 0xbf000000u, 0x3fc00000u, 0xc0200000u,  /* ±0.5, 1.5, -2.5 */
    0x42fd0000u, 0x42ff0000u, 0xc2ff0000u, 0x42fe0000u,  /* 126.5, ±127.5, 127 */
    0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu,  /* ±0, subnormals */
    0x7f7fffffu, 0xff7fffffu, 0x00800000u, 0x80800000u,  /* ±FLT_MAX, ±FLT_MIN */
    0x42ffffffu, 0xc2fffffeu, 0x40400000u, 0x3e800000u,  /* just under 128, 3, 0.25 */
  };

  for (gsize i = 0; i < k; i++)
    {
      guint32 u;

      *state = *state * 6364136223846793005u + 1442695040888963407u;
      switch (s % 6)
        {
        case 0:   /* specials only */
          u = specials[(*state >> 33) % G_N_ELEMENTS (specials)];
          break;
        case 1:   /* all zero, with signs */
          u = (*state >> 40) & 1 ? 0x80000000u : 0u;
          break;
        case 2:   /* random over every finite binade */
          u = (guint32) (*state >> 32);
          if ((u & 0x7f800000u) == 0x7f800000u)
            u &= 0xbfffffffu;
          break;
        case 3:   /* half-integers around the top: ties after scaling */
          {
            float f = (float) ((gint64) ((*state >> 33) % 255) - 127) + 0.5f;

            memcpy (&u, &f, sizeof u);
          }
          break;
        case 4:   /* a narrow binade band, scaled to the vector's edge exponent */
          u = (guint32) (((s * 37u) % 254u + 1u) << 23) | (guint32) ((*state >> 41) & 0x7fffffu);
          u |= (guint32) (*state >> 63) << 31;
          break;
        default:  /* subnormal and tiny values mixed */
          u = (guint32) ((*state >> 40) & 0x00ffffffu) | ((guint32) (*state >> 63) << 31);
          break;
        }
      memcpy (x + i, &u, sizeof u);
    }
  return TRUE;
}

typedef gboolean (*RowPacker) (const char *, const float *, gsize, DcQuantMatrix *, GError **);

/* Gates a row packer; label names it in the refusal ("AVX2", "AVX-512"). */
static gboolean
gate_rows (RowPacker   packer,
           const char *twin,
           const char *label)
{
  static const gsize lengths[] = { 1, 7, 8, 15, 16, 17, 31, 32, 33, 64, 100, 257 };
  const gboolean broken = dc_test_break_kernel (twin);
  guint64 state = 0x2545f4914f6cdd1du;

  for (guint s = 0; s < 6 * 40; s++)
    {
      const gsize k = lengths[s % G_N_ELEMENTS (lengths)], nv = 3;
      g_autofree float *x = g_new (float, nv * k);
      g_autoptr(DcQuantMatrix) ref = dc_quant_matrix_new (nv, k, NULL);
      g_autoptr(DcQuantMatrix) got = dc_quant_matrix_new (nv, k, NULL);

      gate_input (s, x, nv * k, &state);
      if (!dc_quant_pack_reference ("quantizer gate", x, k, 1, ref, NULL) ||
          !packer ("quantizer gate", x, k, got, NULL))
        return FALSE;
      if (broken)
        got->q[0] ^= 1;
      if (memcmp (ref->q, got->q, nv * k) != 0 ||
          memcmp (ref->exponent, got->exponent, nv * sizeof *ref->exponent) != 0)
        {
          g_message ("%s quantizer failed verification on vectors of length %"
                     G_GSIZE_FORMAT " — refused", label, k);
          return FALSE;
        }
    }
  return TRUE;
}

/* The column quantizer's gate: the same inputs laid out as (k, nv)
 * matrices with a row stride wider than nv (as a weight gradient's operand
 * is a slice of its activations), every column-group remainder and every
 * row remainder of the 32-row blocks. DC_TEST_BREAK_KERNEL containing
 * "quant-columns-avx2" corrupts its answer here, for the test of the gate. */
typedef gboolean (*ColumnPacker) (const char *, const float *, gsize, DcQuantMatrix *, GError **);

static gboolean
gate_columns (ColumnPacker  packer,
              const char   *twin,
              const char   *label)
{
  static const gsize rows[] = { 1, 2, 7, 31, 32, 33, 64, 100 };
  static const gsize cols[] = { 1, 3, 8, 9, 16, 21 };
  const gboolean broken = dc_test_break_kernel (twin);
  guint64 state = 0x9e3779b97f4a7c15u;

  for (guint s = 0; s < 6 * 16; s++)
    {
      const gsize k = rows[s % G_N_ELEMENTS (rows)];
      const gsize nv = cols[(s / G_N_ELEMENTS (rows) + s) % G_N_ELEMENTS (cols)];
      const gsize ld = nv + 3;
      g_autofree float *x = g_new (float, k * ld);
      g_autoptr(DcQuantMatrix) ref = dc_quant_matrix_new (nv, k, NULL);
      g_autoptr(DcQuantMatrix) got = dc_quant_matrix_new (nv, k, NULL);

      gate_input (s, x, k * ld, &state);
      if (!dc_quant_pack_reference ("quantizer gate", x, 1, ld, ref, NULL) ||
          !packer ("quantizer gate", x, ld, got, NULL))
        return FALSE;
      if (broken)
        got->q[nv * k - 1] ^= 1;
      if (memcmp (ref->q, got->q, nv * k) != 0 ||
          memcmp (ref->exponent, got->exponent, nv * sizeof *ref->exponent) != 0)
        {
          g_message ("%s column quantizer failed verification on a %" G_GSIZE_FORMAT
                     " × %" G_GSIZE_FORMAT " matrix — refused", label, k, nv);
          return FALSE;
        }
    }
  return TRUE;
}

void
_dc_quant_set_subnormal_steps (int on)
{
  g_atomic_int_set (&subnormal_steps, CLAMP (on, -1, 1));
}

#else

void
_dc_quant_set_subnormal_steps (int on)
{
}

gboolean
dc_quant_pack_avx2 (const char     *what,
                    const float    *src,
                    gsize           vector_stride,
                    DcQuantMatrix  *out,
                    GError        **error)
{
  return dc_quant_pack_reference (what, src, vector_stride, 1, out, error);
}

gboolean
dc_quant_pack_columns_avx2 (const char     *what,
                            const float    *src,
                            gsize           ld,
                            DcQuantMatrix  *out,
                            GError        **error)
{
  return dc_quant_pack_reference (what, src, 1, ld, out, error);
}

gboolean
dc_quant_pack_avx512 (const char     *what,
                      const float    *src,
                      gsize           vector_stride,
                      DcQuantMatrix  *out,
                      GError        **error)
{
  return dc_quant_pack_reference (what, src, vector_stride, 1, out, error);
}

gboolean
dc_quant_pack_columns_avx512 (const char     *what,
                              const float    *src,
                              gsize           ld,
                              DcQuantMatrix  *out,
                              GError        **error)
{
  return dc_quant_pack_reference (what, src, 1, ld, out, error);
}

#endif /* DC_QUANT_X86 */

const char *
dc_quant_pack_avx512_name (void)
{
#ifdef DC_QUANT_X86
  static gsize decided = 0;
  static const char *name;

  if (g_once_init_enter (&decided))
    {
      name = cpu_has_avx512 () &&
             gate_rows (dc_quant_pack_avx512, "quant-avx512", "AVX-512") ? "avx512" : "none";
      g_once_init_leave (&decided, 1);
    }
  return name;
#else
  return "none";
#endif
}

const char *
dc_quant_pack_columns_simd_name (void)
{
#ifdef DC_QUANT_X86
  static gsize decided = 0;
  static const char *name;

  if (g_once_init_enter (&decided))
    {
      name = __builtin_cpu_supports ("avx2") &&
             gate_columns (dc_quant_pack_columns_avx2, "quant-columns-avx2", "AVX2")
             ? "avx2" : "scalar";
      g_once_init_leave (&decided, 1);
    }
  return name;
#else
  return "scalar";
#endif
}

const char *
dc_quant_pack_columns_avx512_name (void)
{
#ifdef DC_QUANT_X86
  static gsize decided = 0;
  static const char *name;

  if (g_once_init_enter (&decided))
    {
      name = cpu_has_avx512_vl () &&
             gate_columns (dc_quant_pack_columns_avx512, "quant-columns-avx512", "AVX-512")
             ? "avx512" : "none";
      g_once_init_leave (&decided, 1);
    }
  return name;
#else
  return "none";
#endif
}

const char *
dc_quant_pack_simd_name (void)
{
#ifdef DC_QUANT_X86
  static gsize decided = 0;
  static const char *name;

  if (g_once_init_enter (&decided))
    {
      name = __builtin_cpu_supports ("avx2") &&
             gate_rows (dc_quant_pack_avx2, "quant-avx2", "AVX2") ? "avx2" : "scalar";
      g_once_init_leave (&decided, 1);
    }
  return name;
#else
  return "scalar";
#endif
}

gboolean
dc_quant_pack_simd (const char     *what,
                    const float    *src,
                    gsize           vector_stride,
                    DcQuantMatrix  *out,
                    GError        **error)
{
#ifdef DC_QUANT_X86
  /* Vectors of at most 64 values (the attention's heads) take the 16-lane
   * packer where it passed its gate: there the AVX2 one's fixed costs (the
   * reduction, the 32-value tail copy) are most of the work. Longer ones
   * stay on AVX2, whose speed on them is memory's. */
  if (out->k <= 64 && g_str_equal (dc_quant_pack_avx512_name (), "avx512"))
    return dc_quant_pack_avx512 (what, src, vector_stride, out, error);
  if (g_str_equal (dc_quant_pack_simd_name (), "avx2"))
    return dc_quant_pack_avx2 (what, src, vector_stride, out, error);
#endif
  return dc_quant_pack_reference (what, src, vector_stride, 1, out, error);
}

gboolean
dc_quant_pack_columns_simd (const char     *what,
                            const float    *src,
                            gsize           ld,
                            DcQuantMatrix  *out,
                            GError        **error)
{
#ifdef DC_QUANT_X86
  /* The 16-lane packer where it passed its gate: about half the AVX2
   * one's instructions per value (docs/BENCHMARKS.md, issue 14). */
  if (g_str_equal (dc_quant_pack_columns_avx512_name (), "avx512"))
    return dc_quant_pack_columns_avx512 (what, src, ld, out, error);
  if (g_str_equal (dc_quant_pack_columns_simd_name (), "avx2"))
    return dc_quant_pack_columns_avx2 (what, src, ld, out, error);
#endif
  return dc_quant_pack_reference (what, src, 1, ld, out, error);
}
