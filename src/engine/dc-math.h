/* dc-math.h: the deterministic math library for everything outside the GEMM.
 *
 * Every function here is built only from correctly rounded IEEE-754 binary32
 * operations (+ − × ÷ √, conversions between integers and floats) and exact
 * integer and bit operations, in one fixed order, compiled with
 * -ffp-contract=off. No libm function computes any result, so every platform
 * that follows IEEE-754 with round-to-nearest-even and without flush-to-zero
 * gets the same bits. docs/VERIFICATION.md ("Operations outside the GEMM")
 * lists each function's algorithm, domain, special values and its error
 * against the correctly rounded result (measured with MPFR by
 * tests/test-engine-math.c).
 *
 * Conventions: a NaN argument of a scalar function comes back unchanged (same
 * bits); a function that has no real value for a non-NaN argument (logf of a
 * negative number) returns DC_MATH_NAN. Vector functions take f32 arrays of
 * length n (n ≤ DC_MATH_MAX_N) and may write their output over their input
 * where the comment says so. Every reduction uses dc_math_sum()'s fixed
 * pairwise order, which depends only on n, never on threads.
 *
 * Threads that compute model values call dc_math_check_fp_environment() once;
 * dc_math_probe_hash() identifies what this build computes, for peers to
 * compare.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* n up to 2^24 converts to float exactly, so means divide by the exact count. */
#define DC_MATH_MAX_N ((gsize) 1 << 24)

/* The quiet NaN returned for arguments outside a function's real domain. */
#define DC_MATH_NAN (__builtin_nanf (""))

/* sin and cos reduce arguments exactly for |x| < 2^24 (RoPE needs |x| ≤ 32768). */
#define DC_MATH_TRIG_MAX 0x1p24f

/* GPT-2's layer norm epsilon. */
#define DC_MATH_GPT2_LN_EPS 0x1.4f8b58p-17f /* 1e-5 rounded to f32 */

gboolean dc_math_check_fp_environment (GError    **error);
guint64  dc_math_probe_hash          (void);

float    dc_math_expf                (float        x);
float    dc_math_expm1f              (float        x);
float    dc_math_logf                (float        x);
float    dc_math_tanhf               (float        x);
float    dc_math_sigmoidf            (float        x);
float    dc_math_sinf                (float        x);
float    dc_math_cosf                (float        x);
void     dc_math_sincosf             (float        x,
                                      float       *sin_out,
                                      float       *cos_out);
float    dc_math_rsqrtf              (float        x);
/* x ≥ 0. RoPE: inv_freq[i] = dc_math_powf (base, -(float) (2 * i) / (float) d). */
float    dc_math_powf                (float        x,
                                      float        y);

float    dc_math_gelu_tanhf          (float        x);
float    dc_math_gelu_tanh_derivf    (float        x);
float    dc_math_siluf               (float        x);
float    dc_math_silu_derivf         (float        x);
float    dc_math_reluf               (float        x);

/* Reductions over x (n,) in the fixed pairwise order. */
float    dc_math_sum                 (const float *x,
                                      gsize        n);
float    dc_math_dot                 (const float *a,
                                      const float *b,
                                      gsize        n);
float    dc_math_max                 (const float *x,
                                      gsize        n);

/* Elementwise: x, y, dy, dx are (n,); y may be x, dx may be dy. */
void     dc_math_gelu_tanh           (const float *x,
                                      float       *y,
                                      gsize        n);
void     dc_math_gelu_tanh_backward  (const float *x,
                                      const float *dy,
                                      float       *dx,
                                      gsize        n);
void     dc_math_silu                (const float *x,
                                      float       *y,
                                      gsize        n);
void     dc_math_silu_backward       (const float *x,
                                      const float *dy,
                                      float       *dx,
                                      gsize        n);
void     dc_math_relu                (const float *x,
                                      float       *y,
                                      gsize        n);
void     dc_math_relu_backward       (const float *x,
                                      const float *dy,
                                      float       *dx,
                                      gsize        n);
void     dc_math_add                 (const float *a,
                                      const float *b,
                                      float       *y,
                                      gsize        n);
void     dc_math_scale               (const float *x,
                                      float        s,
                                      float       *y,
                                      gsize        n);
void     dc_math_bias_relu           (float       *y,
                                      const float *bias,
                                      float       *act,
                                      gsize        n);

/* One row of n logits; y may be x. */
void     dc_math_softmax             (const float *x,
                                      float       *y,
                                      gsize        n);
void     dc_math_log_softmax         (const float *x,
                                      float       *y,
                                      gsize        n);
/* y is the forward output (n,), dy the gradient w.r.t. y; dx may be dy. */
void     dc_math_softmax_backward    (const float *y,
                                      const float *dy,
                                      float       *dx,
                                      gsize        n);
void     dc_math_log_softmax_backward (const float *y,
                                       const float *dy,
                                       float       *dx,
                                       gsize        n);

/* Loss of one row of n logits against class target < n, and its gradient
 * (dlogits (n,) may be logits). */
float    dc_math_cross_entropy       (const float *logits,
                                      gsize        n,
                                      gsize        target);
void     dc_math_cross_entropy_backward (const float *logits,
                                         gsize        n,
                                         gsize        target,
                                         float        dloss,
                                         float       *dlogits);

/* One row x (n,); weight and bias (n,); y may be x. mean_out and rstd_out
 * (nullable) keep the statistics the backward pass needs. */
void     dc_math_layer_norm          (const float *x,
                                      const float *weight,
                                      const float *bias,
                                      float        eps,
                                      float       *y,
                                      float       *mean_out,
                                      float       *rstd_out,
                                      gsize        n);
/* Overwrites dx (n,), which must not be dy (it is scratch space first); adds
 * this row's share to dweight and dbias (n,), so a caller summing rows in a
 * fixed order gets a fixed result. The same holds for the RMS norm pair. */
void     dc_math_layer_norm_backward (const float *x,
                                      const float *weight,
                                      float        mean,
                                      float        rstd,
                                      const float *dy,
                                      float       *dx,
                                      float       *dweight,
                                      float       *dbias,
                                      gsize        n);
void     dc_math_rms_norm            (const float *x,
                                      const float *weight,
                                      float        eps,
                                      float       *y,
                                      float       *rstd_out,
                                      gsize        n);
void     dc_math_rms_norm_backward   (const float *x,
                                      const float *weight,
                                      float        rstd,
                                      const float *dy,
                                      float       *dx,
                                      float       *dweight,
                                      gsize        n);

/* RoPE (Llama, rotate-half pairs i and i + d/2): the table of one position,
 * cos_out and sin_out (head_dim/2,), and the rotation of one head's vector
 * x (head_dim,) in place, forward and backward. */
void     dc_math_rope_table          (float        base,
                                      gsize        head_dim,
                                      gsize        position,
                                      float       *cos_out,
                                      float       *sin_out);
void     dc_math_rope_apply          (float       *x,
                                      const float *cos,
                                      const float *sin,
                                      gsize        head_dim);
void     dc_math_rope_apply_backward (float       *dx,
                                      const float *cos,
                                      const float *sin,
                                      gsize        head_dim);

/* One AdamW step over n parameters; params, m and v (n,) are updated in place. */
void     dc_math_adamw_update        (float       *params,
                                      const float *grads,
                                      float       *m,
                                      float       *v,
                                      gsize        n,
                                      guint64      t,
                                      float        lr,
                                      float        beta1,
                                      float        beta2,
                                      float        eps,
                                      float        weight_decay);

/* The training's deterministic Adam (dc_gpt_model_adam_step ()'s lines)
 * on n elements, from (params, m_in, v_in) into (out_params, out_m, out_v);
 * each output may be its input (in place), no other overlap. */
void     dc_math_adam_elements       (const float *params,
                                      const float *grads,
                                      const float *m_in,
                                      const float *v_in,
                                      float       *out_params,
                                      float       *out_m,
                                      float       *out_v,
                                      gsize        n,
                                      float        lr,
                                      float        bc1,
                                      float        bc2,
                                      float        beta1,
                                      float        beta2,
                                      float        eps);

G_END_DECLS
