/* dc-gpt-vk-step.c: the training step resident on a Vulkan device (stage 1:
 * weights and Adam moments resident, the Adam step a recorded, replayed
 * kernel).
 *
 * Buffers: w, m, v and g (n floats each) in device-local memory, w and g
 * being views of the training pass's F when the step is shared with it
 * (dc_gpt_vk_step_new_shared ()); the step's scalars (DcVkAdamScalars) in a
 * small host-visible buffer the kernel reads; gradients from the host come
 * in through a host-visible staging buffer and w, m, v go out through
 * another (3n floats, host-cached). Four recordings, each submitted when
 * needed: the Adam kernel; copy staging_in → g (gradients from the host: a
 * group's, or a step not shared); copy w → staging_out; copy w, m, v →
 * staging_out. By default the host model is overwritten with the device's
 * state after every step, so everything that keeps the model's pointer
 * (hashes, checkpoints, the UI) sees the CPU path's bits; a lazy step
 * (dc_gpt_vk_step_set_lazy ()) reads back only when asked
 * (dc_gpt_vk_step_sync_host ()), and a shared lazy step lets nothing but
 * the loss leave the device.
 *
 * Every kernel is gated when the step is made: shaders/f32-exact-check.comp
 * on a sweep of float pairs against the CPU's own + − × ÷ √, and
 * shaders/adam.comp for three steps on 4096 elements against
 * dc_gpt_model_adam_step (). A refusal is logged and the caller keeps Adam on
 * the CPU. DC_TEST_BREAK_KERNEL=f32-exact,adam (or all) swaps in the broken
 * twins, for the tests of the gates.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-model"

#include "config.h"

#include "dc-gpt-vk-step.h"
#include "dc-gpt-vk-step-private.h"

#include <string.h>

#include "engine/dc-vk-context.h"
#include "engine/dc-test-break.h"
#include "engine/dc-parallel.h"
#include "dc-model-error.h"
#include "dc-gpt-vk-forward-private.h"
#include "dc-sha256.h"

/* Mirrors the Scalars block of shaders/adam.comp (std430: nine uint32). */
typedef struct
{
  guint32 n;
  guint32 lr;
  guint32 bc1;
  guint32 bc2;
  guint32 beta1;
  guint32 beta2;
  guint32 one_minus_beta1;
  guint32 one_minus_beta2;
  guint32 eps;
} DcVkAdamScalars;

G_STATIC_ASSERT (sizeof (DcVkAdamScalars) == 36);
G_STATIC_ASSERT (G_STRUCT_OFFSET (DcVkAdamScalars, eps) == 32);

/* Invocations per workgroup of adam.comp (its local_size_x). */
#define ADAM_GROUP 256
/* At most this many workgroups per dispatch (the smallest maxComputeWorkGroupCount
 * Vulkan allows is 65535); the kernel's grid-stride loop covers the rest. */
#define ADAM_MAX_GROUPS 65535
/* Elements of the Adam gate: enough that every kind of gradient below
 * appears many times, and small enough for lavapipe (milliseconds). */
#define ADAM_GATE_N 4096
#define ADAM_GATE_STEPS 3

struct _DcGptVkStep
{
  /* owned */
  DcVkContext   *ctx;             /* borrowed from the pass when shared */
  DcVkPipeline  *adam;
  DcVkBuffer    *w, *g, *m, *v;   /* device-local, n floats each; w and g are views
                                   * of the training pass's F when shared */
  DcVkBuffer    *scalars;         /* host-visible DcVkAdamScalars */
  DcVkBuffer    *staging_in;      /* host-visible, n floats: gradients */
  DcVkBuffer    *staging_out;     /* host-visible (cached), 3n floats: w, m, v */
  DcVkRecording *recording;       /* the Adam kernel alone */
  DcVkRecording *grads_in;        /* staging_in → g */
  DcVkRecording *down_w;          /* w → staging_out */
  DcVkRecording *down_all;        /* w, m, v → staging_out */
  DcVkPipeline  *hash;            /* resident-hash.comp (nullable: its gate refused it) */
  DcVkBuffer    *digests;         /* host-visible: the piece digests of w, m, v */
  DcVkRecording *hash_all;        /* the digests of w, m and v */
  /* state */
  gsize          n;
  DcVkF32Mode    native;          /* + − × on the float unit (f32-exact.glsl) */
  gboolean       ctx_owned;
  gboolean       shared;          /* w and g are the training pass's */
  gboolean       lazy;            /* the host model is refreshed on demand only */
  /* Whether the host model's arrays hold the device's current weights, and
   * moments; staging_out always holds what the host arrays were last given
   * (by a download or an upload), so a host write shows as a difference. */
  gboolean       host_w, host_mv;
  gboolean       exposed;         /* the host arrays were handed out since the last step */
  DcGptVkStepTimes times;
};

gboolean
_dc_gpt_vk_kernel_broken (const char *name)
{
  return dc_test_break_kernel (name);
}

/* Whether the gates' tests asked for @name's broken twin: for a native
 * kernel, "name" (both variants) or "name-native" (the native one only, so
 * a test sees the emulated kernels take over). */
gboolean
_dc_gpt_vk_kernel_twin (const char *name,
                        gboolean    native)
{
  g_autofree char *native_name = NULL;

  if (_dc_gpt_vk_kernel_broken (name))
    return TRUE;
  if (!native)
    return FALSE;
  native_name = g_strconcat (name, "-native", NULL);
  return _dc_gpt_vk_kernel_broken (native_name);
}

/* The SPIR-V file of a kernel variant (shaders/meson.build):
 * shader[-native[-nodenorm]][-broken]. */
char *
_dc_gpt_vk_kernel_file (const char  *shader,
                        DcVkF32Mode  native,
                        gboolean     broken)
{
  return g_strconcat (shader,
                      native == DC_VK_F32_NATIVE ? "-native"
                      : native == DC_VK_F32_NATIVE_NODENORM ? "-native-nodenorm" : "",
                      broken ? "-broken" : "", NULL);
}

/* Which native-float kernels to try on @ctx (their gates decide), or
 * DC_VK_F32_EMULATED with @why_not saying why none. A kernel declares only
 * the float controls the device reports: it must report RTE rounding and
 * signed zero/inf/NaN preservation for 32-bit floats; where it also reports
 * DenormPreserve the kernels declare it, otherwise (-nodenorm) the gates,
 * whose pairs have subnormal operands and results of every op, alone prove
 * that the device keeps subnormals. DC_VK_F32=emulated never tries native;
 * DC_VK_F32=native declares all three modes whatever the device reports (an
 * experiment outside the Vulkan spec where one is unreported, never the
 * default). */
DcVkF32Mode
_dc_gpt_vk_native_wanted (DcVkContext  *ctx,
                          char        **why_not)
{
  const DcVkFeatures *f = dc_vk_context_get_features (ctx);
  const char *env = g_getenv ("DC_VK_F32");
  const char *missing = NULL;

  g_debug ("Vulkan device %s reports float controls denormPreserveFloat32=%d "
           "roundingModeRTEFloat32=%d signedZeroInfNanPreserveFloat32=%d",
           dc_vk_context_get_device_name (ctx), f->float32_denorm_preserve,
           f->float32_rounding_rte, f->float32_signed_zero_inf_nan);
  if (env != NULL && g_str_equal (env, "native"))
    return DC_VK_F32_NATIVE;
  if (env != NULL && g_str_equal (env, "emulated"))
    missing = "DC_VK_F32=emulated";
  else if (!f->float32_rounding_rte)
    missing = "the device does not report shaderRoundingModeRTEFloat32";
  else if (!f->float32_signed_zero_inf_nan)
    missing = "the device does not report shaderSignedZeroInfNanPreserveFloat32";
  if (missing == NULL)
    return f->float32_denorm_preserve ? DC_VK_F32_NATIVE : DC_VK_F32_NATIVE_NODENORM;
  if (why_not != NULL)
    *why_not = g_strdup (missing);
  return DC_VK_F32_EMULATED;
}

guint64
_dc_gpt_vk_splitmix64 (guint64 *state)
{
  guint64 z = (*state += G_GUINT64_CONSTANT (0x9e3779b97f4a7c15));

  z = (z ^ (z >> 30)) * G_GUINT64_CONSTANT (0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * G_GUINT64_CONSTANT (0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/* ---- The exact f32 operations -------------------------------------------- */

void
_dc_gpt_vk_step_f32_reference (guint32  a,
                               guint32  b,
                               guint32 *out)
{
  /* Separate statements: each one correctly rounded IEEE operation (the
   * library is compiled with -ffp-contract=off). */
  float x = bits_f32 (a), y = bits_f32 (b);
  float sum = x + y, diff = x - y, prod = x * y, quot = x / y;
  float root = __builtin_sqrtf (x);

  out[0] = f32_bits (sum);
  out[1] = f32_bits (diff);
  out[2] = f32_bits (prod);
  out[3] = f32_bits (quot);
  out[4] = f32_bits (root);
  out[5] = f32_bits (quot);
}

gboolean
_dc_gpt_vk_step_same_f32 (guint32 gpu,
                          guint32 cpu)
{
  gboolean gpu_nan = (gpu & 0x7fffffffu) > 0x7f800000u;
  gboolean cpu_nan = (cpu & 0x7fffffffu) > 0x7f800000u;

  return gpu == cpu || (gpu_nan && cpu_nan);
}

gboolean
_dc_gpt_vk_step_run_f32_check (DcVkContext    *ctx,
                               const guint32  *a,
                               const guint32  *b,
                               gsize           n,
                               DcVkF32Mode     native,
                               gboolean        broken,
                               guint32        *out,
                               GError        **error)
{
  g_autoptr(DcVkPipeline) pipeline = NULL;
  g_autoptr(DcVkBuffer) buf_a = NULL, buf_b = NULL, buf_out = NULL;
  g_autofree char *file = _dc_gpt_vk_kernel_file ("f32-exact-check", native, broken);
  guint32 push;

  g_return_val_if_fail (n > 0 && n <= G_MAXUINT32 / 5, FALSE);

  pipeline = dc_vk_pipeline_new (ctx, file, 3, sizeof (guint32), error);
  if (pipeline == NULL
      || (buf_a = dc_vk_buffer_new (ctx, n * 4, error)) == NULL
      || (buf_b = dc_vk_buffer_new (ctx, n * 4, error)) == NULL
      || (buf_out = dc_vk_buffer_new (ctx, n * DC_GPT_VK_F32_CHECK_OPS * 4, error)) == NULL)
    return FALSE;
  memcpy (dc_vk_buffer_get_data (buf_a), a, n * 4);
  memcpy (dc_vk_buffer_get_data (buf_b), b, n * 4);
  push = (guint32) n;
  {
    DcVkBuffer *buffers[] = { buf_a, buf_b, buf_out };

    if (!dc_vk_dispatch (ctx, pipeline, buffers, &push, (guint) ((n + 63) / 64), 1, 1, error))
      return FALSE;
  }
  memcpy (out, dc_vk_buffer_get_data (buf_out), n * DC_GPT_VK_F32_CHECK_OPS * 4);
  return TRUE;
}

/* Float bit patterns whose sums, differences, products, quotients and roots
 * reach every path of f32-exact.glsl: specials, subnormals, overflow, ties,
 * cancellation, results below the normal range. */
static const guint32 f32_specials[] = {
  0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x00000003, 0x007fffff, 0x807fffff,
  0x00400000, 0x00800000, 0x80800000, 0x00800001, 0x3f800000, 0xbf800000, 0x3f800001,
  0x3fc00000, 0x40000000, 0x40400000, 0xc0400000, 0x3dcccccd, 0x3fffffff, 0x7f7fffff,
  0xff7fffff, 0x7f000000, 0x7f800000, 0xff800000, 0x7fc00000, 0x33800000, 0x34000000,
  0x4b800000, 0x4b000001, 0x5f000000, 0x1f800000, 0x0c000000, 0x2f800000, 0x322bcc77,
  0x3a83126f, 0x3f666666, 0x3f7fbe77, 0x3c23d70a, 0x00000002, 0x7effffff, 0x01000000,
};

static void
gate_pairs (GArray *a,
            GArray *b)
{
  guint64 state = G_GUINT64_CONSTANT (0x4461697379566b31);  /* "DaisyVk1" */

  for (guint i = 0; i < G_N_ELEMENTS (f32_specials); i++)
    for (guint j = 0; j < G_N_ELEMENTS (f32_specials); j++)
      {
        g_array_append_val (a, f32_specials[i]);
        g_array_append_val (b, f32_specials[j]);
      }
  for (guint i = 0; i < 8192; i++)
    {
      guint64 r = _dc_gpt_vk_splitmix64 (&state);
      guint32 x = (guint32) r, y = (guint32) (r >> 32);

      switch (i % 4)
        {
        case 0:  /* any bits */
          break;
        case 1:  /* close exponents: cancellation, ties of sums */
          y = (x & 0xff800000u) ^ (y & 0x81ffffffu);
          break;
        case 2:  /* small magnitudes: products and quotients near and below 2^-126 */
          x = (x & 0x807fffffu) | ((0x20u + (x >> 24) % 0x30u) << 23);
          y = (y & 0x807fffffu) | ((0x20u + (y >> 24) % 0x30u) << 23);
          break;
        default:  /* few mantissa bits: exact results and exact ties */
          x &= 0xfff80000u;
          y &= 0xfffc0000u;
          break;
        }
      g_array_append_val (a, x);
      g_array_append_val (b, y);
    }
  /* Subnormals in and out of every op, for native kernels on devices that
   * do not promise to keep them: random subnormal operands, not only the
   * specials above. */
  for (guint i = 0; i < 2048; i++)
    {
      guint64 r = _dc_gpt_vk_splitmix64 (&state);
      guint32 x = (guint32) r, y = (guint32) (r >> 32);

      switch (i % 4)
        {
        case 0:  /* subnormal ± subnormal */
          x &= 0x807fffffu;
          y &= 0x807fffffu;
          break;
        case 1:  /* subnormal × normal of 2^-27 to 2^33: subnormal and normal products */
          x &= 0x807fffffu;
          y = (y & 0x807fffffu) | ((100u + (y >> 24) % 60u) << 23);
          break;
        case 2:  /* subnormal ± normal near 2^-126: sums across the boundary */
          x &= 0x807fffffu;
          y = (y & 0x807fffffu) | ((1u + (y >> 24) % 3u) << 23);
          break;
        default:  /* normal − normal near 2^-126, same sign: subnormal differences */
          x = (x & 0x007fffffu) | ((1u + (x >> 24) % 2u) << 23);
          y = (y & 0x007fffffu) | ((1u + (y >> 24) % 2u) << 23);
          break;
        }
      g_array_append_val (a, x);
      g_array_append_val (b, y);
    }
}

gboolean
_dc_gpt_vk_step_gate_f32 (DcVkContext  *ctx,
                          DcVkF32Mode   native,
                          GError      **error)
{
  g_autoptr(GArray) a = g_array_new (FALSE, FALSE, sizeof (guint32));
  g_autoptr(GArray) b = g_array_new (FALSE, FALSE, sizeof (guint32));
  g_autofree guint32 *out = NULL;
  static const char * const op_names[] = { "sum", "difference", "product", "quotient", "root",
                                            "quotient by a prepared divisor" };

  G_STATIC_ASSERT (G_N_ELEMENTS (op_names) == DC_GPT_VK_F32_CHECK_OPS);

  gate_pairs (a, b);
  out = g_new (guint32, (gsize) a->len * DC_GPT_VK_F32_CHECK_OPS);
  if (!_dc_gpt_vk_step_run_f32_check (ctx, (guint32 *) a->data, (guint32 *) b->data, a->len,
                                      native, _dc_gpt_vk_kernel_twin ("f32-exact", native), out,
                                      error))
    return FALSE;
  for (guint i = 0; i < a->len; i++)
    {
      guint32 x = g_array_index (a, guint32, i), y = g_array_index (b, guint32, i);
      guint32 want[DC_GPT_VK_F32_CHECK_OPS];

      _dc_gpt_vk_step_f32_reference (x, y, want);
      for (guint k = 0; k < DC_GPT_VK_F32_CHECK_OPS; k++)
        if (!_dc_gpt_vk_step_same_f32 (out[DC_GPT_VK_F32_CHECK_OPS * i + k], want[k]))
          {
            g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                         "%s of 0x%08x and 0x%08x: 0x%08x instead of 0x%08x", op_names[k], x,
                         y, out[DC_GPT_VK_F32_CHECK_OPS * i + k], want[k]);
            return FALSE;
          }
    }
  return TRUE;
}

/* ---- The resident state and its recording -------------------------------- */

void
dc_gpt_vk_step_free (DcGptVkStep *self)
{
  if (self == NULL)
    return;
  /* Reverse order of creation; the context last. */
  g_clear_pointer (&self->recording, dc_vk_recording_free);
  g_clear_pointer (&self->hash_all, dc_vk_recording_free);
  g_clear_pointer (&self->digests, dc_vk_buffer_free);
  g_clear_pointer (&self->hash, dc_vk_pipeline_free);
  g_clear_pointer (&self->staging_out, dc_vk_buffer_free);
  g_clear_pointer (&self->staging_in, dc_vk_buffer_free);
  g_clear_pointer (&self->scalars, dc_vk_buffer_free);
  g_clear_pointer (&self->grads_in, dc_vk_recording_free);
  g_clear_pointer (&self->down_w, dc_vk_recording_free);
  g_clear_pointer (&self->down_all, dc_vk_recording_free);
  g_clear_pointer (&self->v, dc_vk_buffer_free);
  g_clear_pointer (&self->m, dc_vk_buffer_free);
  g_clear_pointer (&self->g, dc_vk_buffer_free);
  g_clear_pointer (&self->w, dc_vk_buffer_free);
  g_clear_pointer (&self->adam, dc_vk_pipeline_free);
  if (self->ctx_owned)
    g_clear_pointer (&self->ctx, dc_vk_context_free);
  g_free (self);
}

/* Buffers, pipeline and the recorded step for n elements, on a context this
 * step does not own (the gate's instance borrows the real one's). */
static gboolean
resident_build (DcGptVkStep  *self,
                DcVkContext  *ctx,
                gsize         n,
                DcVkF32Mode   native,
                gboolean      broken,
                DcVkBuffer   *f,
                gsize         grads_off,
                GError      **error)
{
  const DcVkFeatures *features = dc_vk_context_get_features (ctx);
  g_autofree char *file = _dc_gpt_vk_kernel_file ("adam", native, broken);
  gsize bytes = n * sizeof (float);
  guint groups = (guint) MIN ((n + ADAM_GROUP - 1) / ADAM_GROUP, ADAM_MAX_GROUPS);

  /* One binding holds one whole tensor array: the storage buffer range caps
   * the model (lavapipe: 128 MiB, 33.5 M parameters; the seeds' largest
   * model has far fewer). 3n floats go through one staging buffer. */
  if (n == 0 || n > G_MAXUINT32 || bytes > features->max_storage_buffer_range)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE,
                   "%" G_GSIZE_FORMAT " parameters do not fit one storage buffer binding of "
                   "%s (%u bytes)", n, dc_vk_context_get_device_name (ctx),
                   features->max_storage_buffer_range);
      return FALSE;
    }
  self->n = n;
  self->native = native;
  self->adam = dc_vk_pipeline_new (ctx, file, 5, 0, error);
  if (self->adam == NULL)
    return FALSE;
  /* Shared: the weights at the start of the training pass's F and the
   * gradients where its backward leaves them, so neither is copied between
   * the pass and the step. */
  self->shared = f != NULL;
  if (f != NULL)
    {
      if ((self->w = dc_vk_buffer_new_view (f, 0, bytes, error)) == NULL
          || (self->g = dc_vk_buffer_new_view (f, grads_off * sizeof (float), bytes,
                                               error)) == NULL)
        return FALSE;
    }
  else if ((self->w = dc_vk_buffer_new_device_local (ctx, bytes, error)) == NULL
           || (self->g = dc_vk_buffer_new_device_local (ctx, bytes, error)) == NULL)
    return FALSE;
  if ((self->m = dc_vk_buffer_new_device_local (ctx, bytes, error)) == NULL
      || (self->v = dc_vk_buffer_new_device_local (ctx, bytes, error)) == NULL
      || (self->scalars = dc_vk_buffer_new (ctx, sizeof (DcVkAdamScalars), error)) == NULL
      || (self->staging_in = dc_vk_buffer_new (ctx, bytes, error)) == NULL
      || (self->staging_out = dc_vk_buffer_new_cached (ctx, 3 * bytes, error)) == NULL
      || (self->recording = dc_vk_recording_new (ctx, error)) == NULL
      || (self->grads_in = dc_vk_recording_new (ctx, error)) == NULL
      || (self->down_w = dc_vk_recording_new (ctx, error)) == NULL
      || (self->down_all = dc_vk_recording_new (ctx, error)) == NULL)
    return FALSE;

  {
    DcVkCopy in = { self->staging_in, 0, self->g, 0, bytes };
    DcVkCopy out[] = {
      { self->w, 0, self->staging_out, 0, bytes },
      { self->m, 0, self->staging_out, bytes, bytes },
      { self->v, 0, self->staging_out, 2 * bytes, bytes },
    };
    DcVkBuffer *buffers[] = { self->w, self->g, self->m, self->v, self->scalars };

    dc_vk_recording_copy (self->grads_in, &in, 1);
    dc_vk_recording_copy (self->down_w, out, 1);
    dc_vk_recording_copy (self->down_all, out, G_N_ELEMENTS (out));
    if (!dc_vk_recording_dispatch (self->recording, self->adam, buffers, NULL, groups, 1, 1,
                                   error)
        || !dc_vk_recording_end (self->grads_in, error)
        || !dc_vk_recording_end (self->down_w, error)
        || !dc_vk_recording_end (self->down_all, error))
      return FALSE;
  }
  return dc_vk_recording_end (self->recording, error);
}

/* The host's copies and comparisons of the state (3n floats: 1 GB at
 * GPT-2-small) in chunks of this many bytes on the engine's pool: one core
 * reads cached memory at a fraction of the machine's bandwidth. */
#define HOST_CHUNK ((gsize) 1 << 20)

typedef struct
{
  guint8       *dst;
  const guint8 *src;
  gint          differs;
} HostBytes;

static void
copy_chunk (gsize    begin,
            gsize    end,
            guint    worker,
            gpointer data)
{
  HostBytes *h = data;

  memcpy (h->dst + begin, h->src + begin, end - begin);
}

static void
compare_chunk (gsize    begin,
               gsize    end,
               guint    worker,
               gpointer data)
{
  HostBytes *h = data;

  if (!g_atomic_int_get (&h->differs)
      && memcmp (h->dst + begin, h->src + begin, end - begin) != 0)
    g_atomic_int_set (&h->differs, 1);
}

static void
host_copy (void       *dst,
           const void *src,
           gsize       bytes)
{
  HostBytes h = { dst, src, 0 };

  dc_parallel_for (dc_parallel_get_default_threads (), bytes, HOST_CHUNK, copy_chunk, &h);
}

static gboolean
host_equal (const void *a,
            const void *b,
            gsize       bytes)
{
  HostBytes h = { (guint8 *) a, b, 0 };

  dc_parallel_for (dc_parallel_get_default_threads (), bytes, HOST_CHUNK, compare_chunk, &h);
  return !h.differs;
}

/* Copies the state in, one array at a time through the start of the
 * outgoing staging buffer (each replay overwrites it anyway). */
static gboolean
resident_upload (DcGptVkStep  *self,
                 DcVkContext  *ctx,
                 const float  *w,
                 const float  *m,
                 const float  *v,
                 GError      **error)
{
  gsize bytes = self->n * sizeof (float);
  const float *arrays[] = { w, m, v };
  DcVkBuffer *targets[] = { self->w, self->m, self->v };

  for (guint i = 0; i < G_N_ELEMENTS (arrays); i++)
    {
      host_copy (dc_vk_buffer_get_data (self->staging_out), arrays[i], bytes);
      if (!dc_vk_buffer_copy (ctx, self->staging_out, targets[i], bytes, error))
        return FALSE;
    }
  /* The outgoing staging buffer now mirrors the device, as after a replay. */
  for (guint i = 0; i < G_N_ELEMENTS (arrays); i++)
    host_copy ((guint8 *) dc_vk_buffer_get_data (self->staging_out) + i * bytes, arrays[i], bytes);
  self->host_w = self->host_mv = TRUE;
  self->times.uploads++;
  return TRUE;
}

/* Whether the host model still holds exactly what the device last gave it.
 * The group code writes the model directly (a roster's weights, a repair, an
 * audit's snapshot): the device must not step from a stale copy. */
static gboolean
resident_matches (DcGptVkStep      *self,
                  const DcGptModel *model)
{
  gsize bytes = self->n * sizeof (float);
  const guint8 *out = dc_vk_buffer_get_data (self->staging_out);

  return host_equal (out, model->params, bytes)
         && host_equal (out + bytes, model->adam_m, bytes)
         && host_equal (out + 2 * bytes, model->adam_v, bytes);
}

/* Brings the host arrays up to the device's state: the weights, and with
 * @moments the Adam moments too, read back only where the host's are
 * stale. */
static gboolean
resident_download (DcGptVkStep  *self,
                   gboolean      moments,
                   float        *w,
                   float        *m,
                   float        *v,
                   GError      **error)
{
  gsize bytes = self->n * sizeof (float);
  const guint8 *out = dc_vk_buffer_get_data (self->staging_out);
  gboolean all = moments && !self->host_mv;
  gint64 t0, t1;

  if (self->host_w && !all)
    return TRUE;
  t0 = g_get_monotonic_time ();
  if (!dc_vk_recording_submit (all ? self->down_all : self->down_w, error))
    return FALSE;
  t1 = g_get_monotonic_time ();
  host_copy (w, out, bytes);
  self->host_w = TRUE;
  if (all)
    {
      host_copy (m, out + bytes, bytes);
      host_copy (v, out + 2 * bytes, bytes);
      self->host_mv = TRUE;
      self->times.state_downloads++;
    }
  else
    self->times.weight_downloads++;
  self->times.device_ns += (guint64) (t1 - t0) * 1000;
  self->times.host_ns += (guint64) (g_get_monotonic_time () - t1) * 1000;
  return TRUE;
}

/* One replay: gradients in (unless @grads is NULL: the training pass's,
 * already in g), the Adam kernel; the host arrays are then stale. */
static gboolean
resident_adam (DcGptVkStep  *self,
               const float  *grads,
               float         lr,
               float         bc1,
               float         bc2,
               GError      **error)
{
  gsize bytes = self->n * sizeof (float);
  DcVkAdamScalars *s = dc_vk_buffer_get_data (self->scalars);
  const float b1 = DC_ADAM_BETA1, b2 = DC_ADAM_BETA2;
  gint64 t0, t1, t2;

  /* The same float constants as dc_gpt_model_adam_step (), as bits. */
  s->n = (guint32) self->n;
  s->lr = f32_bits (lr);
  s->bc1 = f32_bits (bc1);
  s->bc2 = f32_bits (bc2);
  s->beta1 = f32_bits (b1);
  s->beta2 = f32_bits (b2);
  s->one_minus_beta1 = f32_bits (1.0f - b1);
  s->one_minus_beta2 = f32_bits (1.0f - b2);
  s->eps = f32_bits (DC_ADAM_EPS);

  g_return_val_if_fail (grads != NULL || self->shared, FALSE);

  t0 = g_get_monotonic_time ();
  if (grads != NULL)
    host_copy (dc_vk_buffer_get_data (self->staging_in), grads, bytes);
  t1 = g_get_monotonic_time ();
  if ((grads != NULL && !dc_vk_recording_submit (self->grads_in, error))
      || !dc_vk_recording_submit (self->recording, error))
    return FALSE;
  t2 = g_get_monotonic_time ();
  self->host_w = self->host_mv = FALSE;
  self->times.steps++;
  self->times.device_ns += (guint64) (t2 - t1) * 1000;
  self->times.host_ns += (guint64) (t1 - t0) * 1000;
  return TRUE;
}

/* resident_adam (), then every array read back (the gate's check). */
static gboolean
resident_run (DcGptVkStep  *self,
              const float  *grads,
              float         lr,
              float         bc1,
              float         bc2,
              float        *w,
              float        *m,
              float        *v,
              GError      **error)
{
  return resident_adam (self, grads, lr, bc1, bc2, error)
         && resident_download (self, TRUE, w, m, v, error);
}

/* The host's half of a step, exactly as dc_gpt_model_adam_step_threads ()
 * does it: the step count and the running products β^t, then the bias
 * corrections. */
static void
advance_model (DcGptModel *model,
               float      *bc1,
               float      *bc2)
{
  model->step++;
  model->beta1_pow = model->beta1_pow * DC_ADAM_BETA1;
  model->beta2_pow = model->beta2_pow * DC_ADAM_BETA2;
  *bc1 = 1.0f - model->beta1_pow;
  *bc2 = 1.0f - model->beta2_pow;
}

/* Three Adam steps on gate elements, on the device and through
 * dc_gpt_model_adam_step (), compared bit for bit after each. */
static gboolean
gate_adam (DcVkContext  *ctx,
           DcVkF32Mode   native,
           GError      **error)
{
  g_autoptr(DcGptVkStep) gate = g_new0 (DcGptVkStep, 1);
  g_autofree float *w = g_new (float, ADAM_GATE_N), *m = g_new0 (float, ADAM_GATE_N);
  g_autofree float *v = g_new0 (float, ADAM_GATE_N), *grads = g_new (float, ADAM_GATE_N);
  g_autofree float *cpu_w = NULL, *cpu_m = NULL, *cpu_v = NULL;
  guint64 state = G_GUINT64_CONSTANT (0x4461697379416431);  /* "DaisyAd1" */
  DcGptModel cpu = { 0 }, device = { 0 };

  if (!resident_build (gate, ctx, ADAM_GATE_N, native, _dc_gpt_vk_kernel_twin ("adam", native),
                       NULL, 0, error))
    return FALSE;
  for (guint i = 0; i < ADAM_GATE_N; i++)
    {
      guint64 r = _dc_gpt_vk_splitmix64 (&state);

      /* Weights of every size a model has, both signs. */
      w[i] = bits_f32 ((guint32) (r & 0x807fffffu) | ((guint32) (100 + (r >> 40) % 40) << 23));
    }
  cpu.n_params = device.n_params = ADAM_GATE_N;
  cpu.params = cpu_w = g_memdup2 (w, ADAM_GATE_N * sizeof (float));
  cpu.adam_m = cpu_m = g_new0 (float, ADAM_GATE_N);
  cpu.adam_v = cpu_v = g_new0 (float, ADAM_GATE_N);
  cpu.beta1_pow = cpu.beta2_pow = device.beta1_pow = device.beta2_pow = 1.0f;
  if (!resident_upload (gate, ctx, w, m, v, error))
    return FALSE;

  for (guint step = 0; step < ADAM_GATE_STEPS; step++)
    {
      float lr = step == 1 ? 0x1.47ae14p-7f /* 0.01 */ : 0x1.0624dep-10f /* 0.001 */;
      float bc1, bc2;

      for (guint i = 0; i < ADAM_GATE_N; i++)
        {
          guint64 r = _dc_gpt_vk_splitmix64 (&state);
          guint32 mant = (guint32) r & 0x807fffffu;
          guint32 e;

          /* Gradients: zeros, subnormals, values whose squares are
           * subnormal, values near ε's scale (where √v̂ + ε rounds), and
           * ordinary and large ones. */
          switch ((r >> 32) % 8)
            {
            case 0: e = 0; mant &= 0x80000000u; break;
            case 1: e = 0; break;
            case 2: e = 40 + (r >> 40) % 20; break;
            case 3: e = 90 + (r >> 40) % 10; break;
            case 4: e = 100 + (r >> 40) % 10; break;
            case 5: e = 150 + (r >> 40) % 20; break;
            default: e = 110 + (r >> 40) % 20; break;
            }
          grads[i] = bits_f32 (mant | e << 23);
        }
      dc_gpt_model_adam_step (&cpu, grads, lr);
      advance_model (&device, &bc1, &bc2);
      if (!resident_run (gate, grads, lr, bc1, bc2, w, m, v, error))
        return FALSE;
      for (guint i = 0; i < ADAM_GATE_N; i++)
        {
          const float *got[] = { &w[i], &m[i], &v[i] };
          const float *want[] = { &cpu_w[i], &cpu_m[i], &cpu_v[i] };
          static const char * const names[] = { "weight", "first moment", "second moment" };

          for (guint k = 0; k < 3; k++)
            if (!_dc_gpt_vk_step_same_f32 (f32_bits (*got[k]), f32_bits (*want[k])))
              {
                g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                             "step %u, element %u (gradient 0x%08x): %s 0x%08x instead of "
                             "0x%08x", step + 1, i, f32_bits (grads[i]), names[k],
                             f32_bits (*got[k]), f32_bits (*want[k]));
                return FALSE;
              }
        }
    }
  return TRUE;
}

/* ---- The state hash's piece digests (resident-hash.comp) ----------------- */

/* Mirrors resident-hash.comp's push constants. */
typedef struct
{
  guint32 n;
  guint32 piece_words;
} DcVkHashPush;

/* Invocations per workgroup of resident-hash.comp (its local_size_x): one
 * piece each. */
#define HASH_GROUP 64

/* Array lengths of the hash gate, in floats: whole pieces, and last pieces
 * that end within a block, in a block's last two words (the padding then
 * needs a block of its own) and on a block's end; small enough for
 * lavapipe. */
static const gsize hash_gate_n[] = {
  2 * DC_GPT_HASH_PIECE_FLOATS + 15, DC_GPT_HASH_PIECE_FLOATS + 14, 3, 16,
};

/* The kernel over three arrays of n floats: one grid row each (a pipeline
 * has one descriptor set, so one dispatch binds all three). */
static guint
hash_groups (gsize n)
{
  return (guint) ((dc_gpt_hash_n_pieces (n) + HASH_GROUP - 1) / HASH_GROUP);
}

/* The hash kernel (its twin when the gates' tests ask) against
 * dc_gpt_hash_pieces () on splitmix64 bits: a digest wrong anywhere, or a
 * piece's tail or padding handled unlike SHA-256, refuses it. */
static DcVkPipeline *
gate_hash (DcVkContext  *ctx,
           GError      **error)
{
  g_autoptr(DcVkPipeline) pipeline = NULL;
  g_autofree char *file = _dc_gpt_vk_kernel_file ("resident-hash", DC_VK_F32_EMULATED,
                                                  _dc_gpt_vk_kernel_broken ("resident-hash"));
  guint64 state = G_GUINT64_CONSTANT (0x4461697379486131);  /* "DaisyHa1" */

  pipeline = dc_vk_pipeline_new (ctx, file, 4, sizeof (DcVkHashPush), error);
  if (pipeline == NULL)
    return NULL;
  for (guint i = 0; i < G_N_ELEMENTS (hash_gate_n); i++)
    {
      gsize n = hash_gate_n[i], pieces = dc_gpt_hash_n_pieces (n);
      g_autoptr(DcVkBuffer) a0 = NULL, a1 = NULL, a2 = NULL, digests = NULL;
      g_autofree guint8 *want = g_malloc (3 * pieces * DC_SHA256_SIZE);
      DcVkHashPush push = { (guint32) n, DC_GPT_HASH_PIECE_FLOATS };

      if ((a0 = dc_vk_buffer_new (ctx, n * sizeof (float), error)) == NULL
          || (a1 = dc_vk_buffer_new (ctx, n * sizeof (float), error)) == NULL
          || (a2 = dc_vk_buffer_new (ctx, n * sizeof (float), error)) == NULL
          || (digests = dc_vk_buffer_new (ctx, 3 * pieces * DC_SHA256_SIZE, error)) == NULL)
        return NULL;
      {
        DcVkBuffer *buffers[] = { a0, a1, a2, digests };

        for (guint k = 0; k < 3; k++)
          {
            guint32 *words = dc_vk_buffer_get_data (buffers[k]);

            for (gsize j = 0; j < n; j++)
              words[j] = (guint32) _dc_gpt_vk_splitmix64 (&state);
            dc_gpt_hash_pieces ((const float *) words, n, want + k * pieces * DC_SHA256_SIZE);
          }
        if (!dc_vk_dispatch (ctx, pipeline, buffers, &push, hash_groups (n), 3, 1, error))
          return NULL;
      }
      for (gsize k = 0; k < 3 * pieces; k++)
        if (memcmp ((const guint8 *) dc_vk_buffer_get_data (digests) + k * DC_SHA256_SIZE,
                    want + k * DC_SHA256_SIZE, DC_SHA256_SIZE) != 0)
          {
            g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                         "array %" G_GSIZE_FORMAT " of %" G_GSIZE_FORMAT " floats, piece %"
                         G_GSIZE_FORMAT ": the digest is not the CPU's SHA-256",
                         k / pieces + 1, n, k % pieces + 1);
            return NULL;
          }
    }
  return g_steal_pointer (&pipeline);
}

/* The hash kernel's gate, then its recording over w, m and v. A refusal is
 * logged and leaves the hash on the host (the state read back for it). */
static void
hash_build (DcGptVkStep *self)
{
  g_autoptr(GError) error = NULL;
  gsize pieces = dc_gpt_hash_n_pieces (self->n);
  DcVkHashPush push = { (guint32) self->n, DC_GPT_HASH_PIECE_FLOATS };
  DcVkBuffer *buffers[4];

  self->hash = gate_hash (self->ctx, &error);
  if (self->hash == NULL)
    {
      g_message ("Vulkan kernel resident-hash on %s failed verification (%s) — the state "
                 "hash is computed on the CPU", dc_vk_context_get_device_name (self->ctx),
                 error->message);
      return;
    }
  if ((self->digests = dc_vk_buffer_new (self->ctx, 3 * pieces * DC_SHA256_SIZE, &error)) != NULL)
    {
      buffers[0] = self->w;
      buffers[1] = self->m;
      buffers[2] = self->v;
      buffers[3] = self->digests;
    }
  if (self->digests == NULL
      || (self->hash_all = dc_vk_recording_new (self->ctx, &error)) == NULL
      || !dc_vk_recording_dispatch (self->hash_all, self->hash, buffers, &push,
                                    hash_groups (self->n), 3, 1, &error)
      || !dc_vk_recording_end (self->hash_all, &error))
    {
      g_message ("The state hash on %s could not be set up (%s) — it is computed on the CPU",
                 dc_vk_context_get_device_name (self->ctx), error->message);
      g_clear_pointer (&self->hash_all, dc_vk_recording_free);
      g_clear_pointer (&self->digests, dc_vk_buffer_free);
      g_clear_pointer (&self->hash, dc_vk_pipeline_free);
    }
}

/**
 * dc_gpt_vk_step_can_hash:
 *
 * Returns: whether dc_gpt_vk_step_dup_hashes () digests the state on the
 *   device now: its kernel passed its gate and the device holds the
 *   current state (the host's arrays are stale, and nobody was handed
 *   them since the last step, who might have written them)
 */
gboolean
dc_gpt_vk_step_can_hash (DcGptVkStep *self)
{
  return self->hash_all != NULL && !self->exposed && !(self->host_w && self->host_mv);
}

/**
 * dc_gpt_vk_step_dup_hashes:
 * @model: the model the step runs for (its step and β^t)
 * @weights: (out) (optional): dc_gpt_model_dup_hash () of the device's state
 * @optimizer: (out) (optional): dc_gpt_model_dup_optimizer_hash () of it
 *
 * The state hashes with the pieces digested on the device: only the
 * digests (32 bytes a piece) are read back. Only where
 * dc_gpt_vk_step_can_hash () says so.
 */
gboolean
dc_gpt_vk_step_dup_hashes (DcGptVkStep       *self,
                           const DcGptModel  *model,
                           char             **weights,
                           char             **optimizer,
                           GError           **error)
{
  gsize bytes = dc_gpt_hash_n_pieces (self->n) * DC_SHA256_SIZE;
  const guint8 *digests;
  gint64 t0, t1;

  g_return_val_if_fail (model->n_params == self->n, FALSE);
  g_return_val_if_fail (dc_gpt_vk_step_can_hash (self), FALSE);

  t0 = g_get_monotonic_time ();
  if (!dc_vk_recording_submit (self->hash_all, error))
    return FALSE;
  t1 = g_get_monotonic_time ();
  digests = dc_vk_buffer_get_data (self->digests);
  dc_gpt_model_finish_hashes (model, digests, digests + bytes, weights, optimizer);
  self->times.hashes++;
  self->times.device_ns += (guint64) (t1 - t0) * 1000;
  self->times.host_ns += (guint64) (g_get_monotonic_time () - t1) * 1000;
  return TRUE;
}

static DcGptVkStep *step_new (const DcGptModel  *model,
                              DcGptVkForward    *pass,
                              GError           **error);

/**
 * dc_gpt_vk_step_new:
 * @model: the state to make resident (its weights and moments are copied)
 *
 * Opens the best Vulkan device, gates the step's kernels against the CPU and
 * uploads the model's weights and Adam moments.
 *
 * Returns: (transfer full) (nullable): the resident step, or %NULL with
 *   @error set (no device, a kernel refused, or a model too large)
 */
DcGptVkStep *
dc_gpt_vk_step_new (const DcGptModel  *model,
                    GError           **error)
{
  return step_new (model, NULL, error);
}

/**
 * dc_gpt_vk_step_new_shared:
 * @model: the state to make resident (its weights and moments are copied)
 * @pass: (transfer none): a training pass (dc_gpt_vk_forward_new_training ())
 *   of @model's config, which must outlive the step
 *
 * Like dc_gpt_vk_step_new (), on @pass's device, with the weights and the
 * gradients in @pass's own buffer: the pass reads the weights the step
 * writes and the step reads the gradients the pass leaves, on the device.
 * Then dc_gpt_vk_step_apply_gradients () takes %NULL gradients (the pass's)
 * and only what the caller asks for leaves the device.
 *
 * Returns: (transfer full) (nullable): the resident step, or %NULL with
 *   @error set
 */
DcGptVkStep *
dc_gpt_vk_step_new_shared (const DcGptModel  *model,
                           DcGptVkForward    *pass,
                           GError           **error)
{
  g_return_val_if_fail (pass != NULL, NULL);

  return step_new (model, pass, error);
}

static DcGptVkStep *
step_new (const DcGptModel  *model,
          DcGptVkForward    *pass,
          GError           **error)
{
  g_autoptr(DcGptVkStep) self = g_new0 (DcGptVkStep, 1);
  g_autoptr(GError) local_error = NULL;
  g_autofree char *why_not = NULL;
  const char *kernel = NULL;
  DcVkBuffer *f = NULL;
  gsize grads_off = 0;
  DcVkF32Mode native;

  if (pass != NULL)
    {
      self->ctx = _dc_gpt_vk_forward_get_context (pass);
      f = _dc_gpt_vk_forward_get_f (pass, &grads_off);
    }
  else
    {
      self->ctx = dc_vk_context_new (-1, error);
      if (self->ctx == NULL)
        return NULL;
      self->ctx_owned = TRUE;
    }
  native = _dc_gpt_vk_native_wanted (self->ctx, &why_not);
  if (native)
    {
      if (!_dc_gpt_vk_step_gate_f32 (self->ctx, native, &local_error))
        kernel = "f32-exact";
      else if (!gate_adam (self->ctx, native, &local_error))
        kernel = "adam";
      if (kernel != NULL)
        {
          g_message ("Vulkan kernel %s-native on %s failed verification (%s) — using the "
                     "emulated kernels", kernel, dc_vk_context_get_device_name (self->ctx),
                     local_error->message);
          g_clear_error (&local_error);
          native = DC_VK_F32_EMULATED;
          kernel = NULL;
        }
      else
        g_debug ("Resident step on %s: native float arithmetic (%s), its gates passed",
                 dc_vk_context_get_device_name (self->ctx),
                 native == DC_VK_F32_NATIVE_NODENORM ? "DenormPreserve not declared"
                                                     : "DenormPreserve declared");
    }
  else
    g_info ("Resident step on %s: emulated float arithmetic (%s)",
            dc_vk_context_get_device_name (self->ctx), why_not);
  if (native)
    ;
  else if (!_dc_gpt_vk_step_gate_f32 (self->ctx, DC_VK_F32_EMULATED, &local_error))
    kernel = "f32-exact";
  else if (!gate_adam (self->ctx, DC_VK_F32_EMULATED, &local_error))
    kernel = "adam";
  if (kernel != NULL)
    {
      g_message ("Vulkan kernel %s on %s failed verification (%s) — refused", kernel,
                 dc_vk_context_get_device_name (self->ctx), local_error->message);
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                   "Vulkan kernel %s on %s failed verification — Adam stays on the CPU",
                   kernel, dc_vk_context_get_device_name (self->ctx));
      return NULL;
    }
  if (!resident_build (self, self->ctx, model->n_params, native, FALSE, f, grads_off, error)
      || !resident_upload (self, self->ctx, model->params, model->adam_m, model->adam_v, error))
    return NULL;
  hash_build (self);
  return g_steal_pointer (&self);
}

const char *
dc_gpt_vk_step_get_device_name (DcGptVkStep *self)
{
  return dc_vk_context_get_device_name (self->ctx);
}

/**
 * dc_gpt_vk_step_get_arithmetic:
 *
 * Returns: how the Adam kernel does float + − ×: "native" (the device's
 *   float unit, its gates passed) or "emulated" (in integers)
 */
const char *
dc_gpt_vk_step_get_arithmetic (DcGptVkStep *self)
{
  return self->native ? "native" : "emulated";
}

/**
 * dc_gpt_vk_step_get_resident:
 *
 * Returns: what of the step runs resident on the device today ("adam")
 */
const char *
dc_gpt_vk_step_get_resident (DcGptVkStep *self)
{
  return "adam";
}

/**
 * dc_gpt_vk_step_get_shared:
 *
 * Returns: whether the step shares the training pass's weights and
 *   gradients (dc_gpt_vk_step_new_shared ())
 */
gboolean
dc_gpt_vk_step_get_shared (DcGptVkStep *self)
{
  return self->shared;
}

/**
 * dc_gpt_vk_step_set_lazy:
 * @lazy: %TRUE: after a step the host model's weights and moments are stale
 *   until dc_gpt_vk_step_sync_host () reads them back; %FALSE (the default):
 *   every step reads them back, so the host model is always current
 */
void
dc_gpt_vk_step_set_lazy (DcGptVkStep *self,
                         gboolean     lazy)
{
  self->lazy = lazy;
}

/**
 * dc_gpt_vk_step_sync_host:
 * @model: the model the step runs for
 * @moments: also the Adam moments (a checkpoint, the optimizer hash); the
 *   weights alone otherwise (the weight hash)
 *
 * Reads back from the device what of @model's arrays is stale (nothing when
 * all is current). The arrays are then the caller's to read or write: the
 * next step compares them with what they were given and uploads them again
 * where the caller changed them.
 */
gboolean
dc_gpt_vk_step_sync_host (DcGptVkStep  *self,
                          DcGptModel   *model,
                          gboolean      moments,
                          GError      **error)
{
  g_return_val_if_fail (model->n_params == self->n, FALSE);

  self->exposed = TRUE;
  return resident_download (self, moments, model->params, model->adam_m, model->adam_v, error);
}

/**
 * dc_gpt_vk_step_prepare:
 * @model: the model the step runs for
 *
 * Uploads @model's weights and moments if the host changed them since the
 * step last handed them out (the group code writes the model directly: a
 * roster's weights, a repair, an audit's snapshot); the device must not
 * step from a stale copy. A shared step's pass calls it before reading the
 * weights.
 */
gboolean
dc_gpt_vk_step_prepare (DcGptVkStep  *self,
                        DcGptModel   *model,
                        GError      **error)
{
  gint64 t0;
  gboolean ok = TRUE;

  g_return_val_if_fail (model->n_params == self->n, FALSE);

  /* A lazy step whose arrays nobody was given cannot have been written
   * through them; otherwise the mirror in staging_out tells. */
  if (self->lazy && !self->exposed)
    return TRUE;
  t0 = g_get_monotonic_time ();
  self->exposed = FALSE;
  if (!resident_matches (self, model))
    {
      g_debug ("Resident step: the model changed on the host; uploading it again");
      ok = resident_upload (self, self->ctx, model->params, model->adam_m, model->adam_v, error);
    }
  self->times.host_ns += (guint64) (g_get_monotonic_time () - t0) * 1000;
  return ok;
}

/**
 * dc_gpt_vk_step_apply_gradients:
 * @model: the model the step was made from, in the state the last step left
 * @grads: (array) (nullable): n_params gradients; %NULL for a shared step:
 *   those its training pass left on the device
 * @lr: the learning rate
 *
 * dc_gpt_model_adam_step () on the device: the same bits. @model's step and
 * β^t advance; its weights and moments are read back at once, or with
 * dc_gpt_vk_step_set_lazy () only when dc_gpt_vk_step_sync_host () asks.
 */
gboolean
dc_gpt_vk_step_apply_gradients (DcGptVkStep  *self,
                                DcGptModel   *model,
                                const float  *grads,
                                float         lr,
                                GError      **error)
{
  DcGptModel next = *model;
  float bc1, bc2;

  g_return_val_if_fail (model->n_params == self->n, FALSE);
  g_return_val_if_fail (grads != NULL || self->shared, FALSE);

  if (!dc_gpt_vk_step_prepare (self, model, error))
    return FALSE;
  advance_model (&next, &bc1, &bc2);
  if (!resident_adam (self, grads, lr, bc1, bc2, error)
      || (!self->lazy
          && !resident_download (self, TRUE, model->params, model->adam_m, model->adam_v,
                                 error)))
    return FALSE;
  model->step = next.step;
  model->beta1_pow = next.beta1_pow;
  model->beta2_pow = next.beta2_pow;
  return TRUE;
}

void
dc_gpt_vk_step_get_times (DcGptVkStep      *self,
                          DcGptVkStepTimes *out)
{
  *out = self->times;
}
