/* test-engine-gemm-vk.c: the Vulkan GEMM (on lavapipe in the suite) equals the
 * CPU reference bit for bit, and a kernel that fails its init gate is refused
 * with the fallback to the CPU path. Shapes stay small: lavapipe runs int8
 * GEMM at well under 1 GOPS.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>

#include "dc-test-utils.h"
#include "engine/dc-gemm-backend.h"
#include "engine/dc-gemm-probe.h"
#include "engine/dc-gemm-vk.h"
#include "engine/dc-spirv-coop.h"

static DcQuantMatrix *
random_matrix (GRand *rand,
               gsize  n,
               gsize  k)
{
  DcQuantMatrix *m = dc_quant_matrix_new (n, k, NULL);

  for (gsize i = 0; i < n * k; i++)
    m->q[i] = (gint8) g_rand_int_range (rand, -127, 128);
  for (gsize v = 0; v < n; v++)
    m->exponent[v] = g_rand_int_range (rand, -30, 31);
  return m;
}

static DcGemmBackend *
vulkan_backend_or_skip (void)
{
  g_autoptr(GError) error = NULL;
  DcGemmBackend *backend = dc_gemm_backend_new (DC_BACKEND_VULKAN, &error);

  if (backend == NULL)
    {
      dc_test_skip_without_vulkan (error->message);
      return NULL;
    }
  return backend;
}

static void
check_against_reference (DcGemmBackend       *backend,
                         const DcQuantMatrix *a,
                         const DcQuantMatrix *b)
{
  const gsize M = a->n_vectors, N = b->n_vectors;
  g_autofree gint32 *ref_acc = g_new (gint32, M * N);
  g_autofree float *ref_c = g_new (float, M * N);
  g_autofree gint32 *acc = g_new (gint32, M * N);
  g_autofree float *c = g_new (float, M * N);
  g_autoptr(GError) error = NULL;

  dc_gemm_reference_i32 (a, b, ref_acc);
  dc_gemm_reference (a, b, ref_c);
  g_assert_true (dc_gemm_run_i32 (backend, a, b, acc, &error));
  g_assert_no_error (error);
  g_assert_true (dc_gemm_run (backend, a, b, c, &error));
  g_assert_no_error (error);
  g_assert_cmpmem (acc, M * N * 4, ref_acc, M * N * 4);
  g_assert_cmpmem (c, M * N * 4, ref_c, M * N * 4);
}

static void
test_vulkan_equals_reference (void)
{
  g_autoptr(DcGemmBackend) backend = vulkan_backend_or_skip ();
  g_autoptr(GRand) rand = g_rand_new_with_seed (11);
  static const gsize shapes[][3] = {
    { 1, 1, 1 }, { 2, 130, 77 }, { 131, 5, 3 }, { 64, 64, 32 }, { 65, 129, 33 },
    { 100, 90, 200 },
  };

  if (backend == NULL)
    return;
  g_test_message ("device: %s, kernel: %s", dc_gemm_backend_get_device_name (backend),
                  dc_gemm_backend_get_kernel_name (backend));
  g_assert_cmpint (dc_gemm_backend_get_kind (backend), ==, DC_BACKEND_VULKAN);

  for (gsize s = 0; s < G_N_ELEMENTS (shapes); s++)
    {
      g_autoptr(DcQuantMatrix) a = random_matrix (rand, shapes[s][0], shapes[s][2]);
      g_autoptr(DcQuantMatrix) b = random_matrix (rand, shapes[s][1], shapes[s][2]);

      check_against_reference (backend, a, b);
    }
}

static void
collect_message (const char     *domain,
                 GLogLevelFlags  level,
                 const char     *message,
                 gpointer        user_data)
{
  g_ptr_array_add (user_data, g_strdup (message));
}

/* Each variant on its own (the preferred one hides the others otherwise),
 * and its broken twin refused by the gate, by name. */
static void
test_each_variant (void)
{
  const char * const *names = dc_gemm_vk_variant_names ();
  g_autoptr(GRand) rand = g_rand_new_with_seed (13);
  g_autoptr(DcQuantMatrix) a = random_matrix (rand, 130, 67);
  g_autoptr(DcQuantMatrix) b = random_matrix (rand, 70, 67);
  g_autoptr(GString) refused = g_string_new (NULL);
  guint n_checked = 0;

  for (gsize i = 0; names[i] != NULL; i++)
    {
      g_autoptr(DcGemmBackend) backend = NULL;
      g_autoptr(DcGemmBackend) broken = NULL;
      g_autoptr(GPtrArray) messages = g_ptr_array_new_with_free_func (g_free);
      g_autoptr(GError) error = NULL;
      guint handler;

      g_setenv ("DC_GEMM_VK_KERNEL", names[i], TRUE);
      backend = dc_gemm_backend_new (DC_BACKEND_VULKAN, &error);
      g_unsetenv ("DC_GEMM_VK_KERNEL");
      if (backend == NULL)
        {
          g_test_message ("%s: %s", names[i], error->message);
          g_string_append_printf (refused, "%s%s: %s", refused->len > 0 ? "; " : "", names[i],
                                  error->message);
          continue;
        }
      if (dc_gemm_backend_get_kind (backend) != DC_BACKEND_VULKAN)
        continue;  /* not offered on this device */
      g_assert_cmpstr (dc_gemm_backend_get_kernel_name (backend), ==, names[i]);
      check_against_reference (backend, a, b);
      g_test_message ("%s: equal to the reference", names[i]);
      n_checked++;

      g_setenv ("DC_GEMM_VK_KERNEL", names[i], TRUE);
      g_setenv ("DC_TEST_BREAK_KERNEL", names[i], TRUE);
      handler = g_log_set_handler ("dc-engine", G_LOG_LEVEL_MESSAGE, collect_message, messages);
      broken = dc_gemm_backend_new (DC_BACKEND_VULKAN, &error);
      g_log_remove_handler ("dc-engine", handler);
      g_unsetenv ("DC_TEST_BREAK_KERNEL");
      g_unsetenv ("DC_GEMM_VK_KERNEL");
      g_assert_no_error (error);
      g_assert_cmpint (dc_gemm_backend_get_kind (broken), ==, DC_BACKEND_CPU);
      g_assert_cmpuint (messages->len, >=, 1);
      g_assert_nonnull (strstr (g_ptr_array_index (messages, 0), names[i]));
      g_assert_nonnull (strstr (g_ptr_array_index (messages, 0), "failed verification"));
      g_test_message ("%s: broken twin refused", names[i]);
    }
  /* Not one variant compared is not a pass. */
  if (n_checked == 0)
    dc_test_skip_without_vulkan (refused->len > 0 ? refused->str : "no variant is offered");
}

/* Accumulator overflow at the largest K on the GPU: 127 · 127 · 131072 of
 * both signs, one tile of outputs, still exact. */
static void
test_vulkan_max_k (void)
{
  g_autoptr(DcGemmBackend) backend = vulkan_backend_or_skip ();
  g_autoptr(DcQuantMatrix) a = NULL;
  g_autoptr(DcQuantMatrix) b = NULL;
  gint32 acc[4];

  if (backend == NULL)
    return;
  a = dc_quant_matrix_new (2, DC_GEMM_MAX_K, NULL);
  b = dc_quant_matrix_new (2, DC_GEMM_MAX_K, NULL);
  memset (a->q, 127, DC_GEMM_MAX_K);
  memset (a->q + DC_GEMM_MAX_K, (gint8) -127, DC_GEMM_MAX_K);
  memset (b->q, 127, 2 * DC_GEMM_MAX_K);
  /* One int32 dispatch only: on lavapipe this K takes seconds. */
  g_assert_true (dc_gemm_run_i32 (backend, a, b, acc, NULL));
  g_assert_cmpint (acc[0], ==, 127 * 127 * DC_GEMM_MAX_K);
  g_assert_cmpint (acc[1], ==, 127 * 127 * DC_GEMM_MAX_K);
  g_assert_cmpint (acc[2], ==, -127 * 127 * DC_GEMM_MAX_K);
  g_assert_cmpint (acc[3], ==, -127 * 127 * DC_GEMM_MAX_K);
}

/* The probe hash through Vulkan equals the CPU's. */
static void
test_probe_equals_cpu (void)
{
  g_autoptr(DcGemmBackend) backend = vulkan_backend_or_skip ();
  g_autoptr(DcGemmBackend) cpu = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *hash = NULL;
  g_autofree char *cpu_hash = NULL;

  if (backend == NULL)
    return;
  cpu = dc_gemm_backend_new (DC_BACKEND_CPU_SCALAR, &error);
  g_assert_no_error (error);
  hash = dc_gemm_probe (backend, &error);
  g_assert_no_error (error);
  cpu_hash = dc_gemm_probe (cpu, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (hash, ==, cpu_hash);
}

static void
test_vulkan_refuses_bad_operands (void)
{
  g_autoptr(DcGemmBackend) backend = vulkan_backend_or_skip ();
  g_autoptr(DcQuantMatrix) a = dc_quant_matrix_new (2, 8, NULL);
  g_autoptr(DcQuantMatrix) b = dc_quant_matrix_new (2, 9, NULL);
  g_autoptr(DcQuantMatrix) b8 = dc_quant_matrix_new (2, 8, NULL);
  g_autoptr(GError) error = NULL;
  float c[4];

  if (backend == NULL)
    return;
  g_assert_false (dc_gemm_run (backend, a, b, c, &error));
  g_assert_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_SHAPE);
  g_clear_error (&error);
  b8->q[3] = -128;
  g_assert_false (dc_gemm_run (backend, a, b8, c, &error));
  g_assert_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_RANGE);
}


/* The gate: with every variant swapped for its broken twin, each is refused
 * by name and the backend computes on the CPU, still exactly. */
static void
test_gate_refuses_broken_kernel (void)
{
  g_autoptr(GPtrArray) messages = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(DcGemmBackend) backend = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GRand) rand = g_rand_new_with_seed (12);
  g_autoptr(DcQuantMatrix) a = random_matrix (rand, 33, 65);
  g_autoptr(DcQuantMatrix) b = random_matrix (rand, 17, 65);
  const char *last;
  guint handler;

  g_setenv ("DC_TEST_BREAK_KERNEL", "all", TRUE);
  handler = g_log_set_handler ("dc-engine", G_LOG_LEVEL_MESSAGE, collect_message, messages);
  backend = dc_gemm_backend_new (DC_BACKEND_VULKAN, &error);
  g_log_remove_handler ("dc-engine", handler);
  g_unsetenv ("DC_TEST_BREAK_KERNEL");

  if (backend == NULL)
    {
      dc_test_skip_without_vulkan (error->message);
      return;
    }
  for (guint i = 0; i < messages->len; i++)
    g_test_message ("logged: %s", (char *) g_ptr_array_index (messages, i));

  g_assert_cmpuint (messages->len, >=, 2);
  last = g_ptr_array_index (messages, messages->len - 1);
  g_assert_nonnull (strstr (last, "failed verification — using CPU path"));
  g_assert_nonnull (strstr (last, "tiled"));
  g_assert_nonnull (strstr (g_ptr_array_index (messages, 0), "failed verification"));
  g_assert_cmpint (dc_gemm_backend_get_kind (backend), ==, DC_BACKEND_CPU);

  check_against_reference (backend, a, b);
}

/* Breaking only the preferred variant: it is refused and the next one that
 * passes its gate is used. */
static void
test_gate_refuses_one_kernel (void)
{
  g_autoptr(DcGemmBackend) normal = vulkan_backend_or_skip ();
  g_autoptr(DcGemmBackend) backend = NULL;
  g_autoptr(GPtrArray) messages = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GError) error = NULL;
  g_autofree char *preferred = NULL;
  guint handler;

  if (normal == NULL)
    return;
  /* "preferred+large" where a second kernel takes the large products. */
  preferred = g_strdup (dc_gemm_backend_get_kernel_name (normal));
  if (strchr (preferred, '+') != NULL)
    {
      const char *large = strchr (preferred, '+') + 1;

      /* Breaking the large products' kernel leaves the preferred one alone. */
      g_setenv ("DC_TEST_BREAK_KERNEL", large, TRUE);
      handler = g_log_set_handler ("dc-engine", G_LOG_LEVEL_MESSAGE, collect_message, messages);
      backend = dc_gemm_backend_new (DC_BACKEND_VULKAN, &error);
      g_log_remove_handler ("dc-engine", handler);
      g_unsetenv ("DC_TEST_BREAK_KERNEL");
      g_assert_no_error (error);
      g_assert_cmpuint (messages->len, >=, 1);
      g_assert_nonnull (strstr (g_ptr_array_index (messages, 0), large));
      g_assert_nonnull (strstr (g_ptr_array_index (messages, 0), "failed verification"));
      g_assert_null (strstr (dc_gemm_backend_get_kernel_name (backend), large));
      g_test_message ("refused %s for large products, using %s", large,
                      dc_gemm_backend_get_kernel_name (backend));
      g_clear_pointer (&backend, dc_gemm_backend_free);
      g_ptr_array_set_size (messages, 0);
      *strchr (preferred, '+') = '\0';
    }
  g_clear_pointer (&normal, dc_gemm_backend_free);

  g_setenv ("DC_TEST_BREAK_KERNEL", preferred, TRUE);
  handler = g_log_set_handler ("dc-engine", G_LOG_LEVEL_MESSAGE, collect_message, messages);
  backend = dc_gemm_backend_new (DC_BACKEND_VULKAN, &error);
  g_log_remove_handler ("dc-engine", handler);
  g_unsetenv ("DC_TEST_BREAK_KERNEL");
  g_assert_no_error (error);

  g_assert_cmpuint (messages->len, >=, 1);
  g_assert_nonnull (strstr (g_ptr_array_index (messages, 0), preferred));
  g_assert_nonnull (strstr (g_ptr_array_index (messages, 0), "failed verification"));
  g_assert_cmpstr (dc_gemm_backend_get_kernel_name (backend), !=, preferred);
  g_test_message ("refused %s, using %s", preferred, dc_gemm_backend_get_kernel_name (backend));
}

/* The tile sweep's variants (gemm-int8-coopsc.comp, one module specialized
 * per tile shape): every one needs the NV int8 fragment and 32-wide
 * subgroups, and is offered by what its tile takes. */
static void
test_variant_offered_sc (void)
{
  const char * const *names = dc_gemm_vk_variant_names ();
  const DcVkFeatures h200 = {
    .shader_int8 = TRUE, .storage_buffer_8bit = TRUE, .integer_dot_product = TRUE,
    .coop_matrix_nv_int8 = TRUE, .subgroup_size = 32, .max_shared_memory = 49152,
    .max_invocations = 1024, .max_storage_buffer_range = G_MAXUINT32,
  };
  DcVkFeatures f = h200;
  g_autofree char *why = NULL;
  guint n_sc = 0;

  for (gsize i = 0; names[i] != NULL; i++)
    if (g_str_has_prefix (names[i], "sc"))
      {
        g_autofree char *no = NULL;

        n_sc++;
        /* All of them fit the H200's 48 KiB and 1024 invocations. */
        g_assert_true (dc_gemm_vk_variant_offered (&h200, names[i], NULL));
        f = h200;
        f.coop_matrix_nv_int8 = FALSE;
        g_assert_false (dc_gemm_vk_variant_offered (&f, names[i], &no));
        g_assert_nonnull (strstr (no, "VK_NV_cooperative_matrix"));
      }
  /* The sweep: at least 20 tile shapes. */
  g_assert_cmpuint (n_sc, >=, 20);

  /* Shared memory: 2 stages × 256 rows × 5 words × 16 bytes = 40,960; one
   * stage 20,480. */
  f = h200;
  f.max_shared_memory = 40959;
  g_assert_false (dc_gemm_vk_variant_offered (&f, "sc128x128-w64x32-k64-p1-s2", &why));
  g_assert_nonnull (strstr (why, "40960 bytes of shared memory"));
  g_assert_true (dc_gemm_vk_variant_offered (&f, "sc128x128-w64x32-k64-p1-s1", NULL));
  /* Invocations: 32 × 32 subgroup tiles in a 128 × 128 tile are 16
   * subgroups, 512 invocations. */
  f = h200;
  f.max_invocations = 256;
  g_assert_false (dc_gemm_vk_variant_offered (&f, "sc128x128-w32x32-k64-p1-s1", NULL));
  g_assert_true (dc_gemm_vk_variant_offered (&f, "sc128x128-w64x32-k64-p1-s1", NULL));
}

/* Which variants a device is offered before any gate, with the features of
 * devices this machine may not have: lavapipe lacks cooperative matrices, so
 * the coop kernels' own conditions are checked here rather than by running
 * them. */
static void
test_variant_offered (void)
{
  static const char *coop_names[] = { "coop", "coop2", "coop2-w4", "coop2-128x256",
                                      "coop2-256x128", "coop2-k32", "coop2-nopad" };
  /* The H200's driver (docs/BENCHMARKS.md): 48 KiB, subgroup 32. */
  const DcVkFeatures h200 = {
    .shader_int8 = TRUE, .storage_buffer_8bit = TRUE, .integer_dot_product = TRUE,
    .coop_matrix_nv_int8 = TRUE, .subgroup_size = 32, .max_shared_memory = 49152,
    .max_invocations = 1024, .max_storage_buffer_range = G_MAXUINT32,
  };
  /* lavapipe: no cooperative matrices, 32 KiB, subgroup 8. */
  const DcVkFeatures lavapipe = {
    .shader_int8 = TRUE, .storage_buffer_8bit = TRUE, .subgroup_size = 8,
    .max_shared_memory = 32768, .max_invocations = 1024, .max_storage_buffer_range = 1 << 27,
  };
  DcVkFeatures f;

  for (gsize i = 0; i < G_N_ELEMENTS (coop_names); i++)
    {
      g_autofree char *why = NULL;

      g_assert_true (dc_gemm_vk_variant_offered (&h200, coop_names[i], NULL));
      g_assert_false (dc_gemm_vk_variant_offered (&lavapipe, coop_names[i], &why));
      g_assert_nonnull (strstr (why, "cooperative matrix"));
    }
  g_assert_true (dc_gemm_vk_variant_offered (&lavapipe, "tiled", NULL));
  g_assert_false (dc_gemm_vk_variant_offered (&lavapipe, "dot", NULL));
  g_assert_true (dc_gemm_vk_variant_offered (&h200, "dot", NULL));

  /* The fragment shape is written for 32-wide subgroups. */
  f = h200;
  f.subgroup_size = 64;
  g_assert_false (dc_gemm_vk_variant_offered (&f, "coop2", NULL));

  /* Shared memory: coop2 takes 45,056 bytes, the 256-wide tiles 40,960, the
   * first coop kernel 49,152; a 40 KiB device gets the 256-wide ones only. */
  f = h200;
  f.max_shared_memory = 40960;
  {
    g_autofree char *why = NULL;

    g_assert_false (dc_gemm_vk_variant_offered (&f, "coop2", &why));
    g_assert_nonnull (strstr (why, "45056 bytes of shared memory"));
  }
  g_assert_false (dc_gemm_vk_variant_offered (&f, "coop", NULL));
  g_assert_true (dc_gemm_vk_variant_offered (&f, "coop2-128x256", NULL));
  g_assert_true (dc_gemm_vk_variant_offered (&f, "coop2-256x128", NULL));
  f.max_shared_memory = 40959;
  g_assert_false (dc_gemm_vk_variant_offered (&f, "coop2-128x256", NULL));

  /* Invocations: every coop2 tile but coop2-w4 takes 256. */
  f = h200;
  f.max_invocations = 128;
  g_assert_false (dc_gemm_vk_variant_offered (&f, "coop2", NULL));
  g_assert_true (dc_gemm_vk_variant_offered (&f, "coop2-w4", NULL));

  {
    g_autofree char *why = NULL;

    g_assert_false (dc_gemm_vk_variant_offered (&h200, "coop9", &why));
    g_assert_nonnull (strstr (why, "no GEMM kernel is called coop9"));
  }
}

/* The KHR kernels are offered only where the device lists their shape under
 * VK_KHR_cooperative_matrix (the H200 lists 16 × 16 × 32 there only). */
static void
test_variant_offered_khr (void)
{
  const DcVkFeatures nv_only = {
    .shader_int8 = TRUE, .storage_buffer_8bit = TRUE, .coop_matrix_nv_int8 = TRUE,
    .subgroup_size = 32, .max_shared_memory = 49152, .max_invocations = 1024,
    .max_storage_buffer_range = G_MAXUINT32,
  };
  DcVkFeatures f = nv_only;
  static const char *khr_names[] = { "coop-khr", "khr16", "khr16-128x256", "khr8-128x256" };

  for (gsize i = 0; i < G_N_ELEMENTS (khr_names); i++)
    {
      g_autofree char *why = NULL;

      g_assert_false (dc_gemm_vk_variant_offered (&nv_only, khr_names[i], &why));
      g_assert_nonnull (strstr (why, "under VK_KHR_cooperative_matrix"));
    }
  g_assert_true (dc_gemm_vk_variant_offered (&nv_only, "coopk8-128x256", NULL));

  /* Both KHR shapes: every KHR variant (and the NV ones still). */
  f.coop_matrix_khr_int8 = 3;
  for (gsize i = 0; i < G_N_ELEMENTS (khr_names); i++)
    g_assert_true (dc_gemm_vk_variant_offered (&f, khr_names[i], NULL));
  g_assert_true (dc_gemm_vk_variant_offered (&f, "coop", NULL));

  /* Only 16 × 8 × 32 under KHR: not the 16 × 16 fragments. */
  f.coop_matrix_khr_int8 = 1;
  {
    g_autofree char *why = NULL;

    g_assert_false (dc_gemm_vk_variant_offered (&f, "khr16", &why));
    g_assert_nonnull (strstr (why, "16 × 16 × 32"));
  }
  g_assert_true (dc_gemm_vk_variant_offered (&f, "coop-khr", NULL));
  g_assert_true (dc_gemm_vk_variant_offered (&f, "khr8-128x256", NULL));

  /* KHR without the NV extension: the NV kernels are not offered. */
  f.coop_matrix_khr_int8 = 2;
  f.coop_matrix_nv_int8 = FALSE;
  g_assert_true (dc_gemm_vk_variant_offered (&f, "khr16-128x256", NULL));
  g_assert_false (dc_gemm_vk_variant_offered (&f, "coop", NULL));
  g_assert_false (dc_gemm_vk_variant_offered (&f, "coopk8-128x256", NULL));

  /* 128 × 256 tiles with 16 × 16 fragments take 40,960 bytes. */
  f.max_shared_memory = 40959;
  g_assert_false (dc_gemm_vk_variant_offered (&f, "khr16-128x256", NULL));
  g_assert_true (dc_gemm_vk_variant_offered (&f, "khr16", NULL));
}

static GBytes *
shader_bytes (const char *name)
{
  g_autoptr(GError) error = NULL;
  GBytes *bytes = dc_vk_shader_lookup (name, &error);

  g_assert_no_error (error);
  return bytes;
}

/* The NV → KHR rewrite of each coop kernel: well-formed instructions, no NV
 * instruction left, one KHR type per NV type with its use, loads with a
 * layout id, every multiply-add marked signed (without that operand KHR
 * multiplies int8 as unsigned), the capability and extension renamed. */
static void
test_spirv_rewrite (void)
{
  static const char *names[] = { "gemm-int8-coop", "gemm-int8-coopk", "gemm-int8-coopk-128x256",
                                 "gemm-int8-coopk8-128x256", "gemm-int8-coopk-broken" };

  for (gsize s = 0; s < G_N_ELEMENTS (names); s++)
    {
      g_autoptr(GBytes) in = shader_bytes (names[s]);
      g_autoptr(GBytes) out = NULL;
      g_autoptr(GError) error = NULL;
      gsize n_in, n_out;
      const guint32 *w = g_bytes_get_data (in, &n_in), *o;
      guint nv_types = 0, khr_types = 0, muladds = 0, loads = 0, col_major = 0;
      guint uses[3] = { 0 };
      gboolean cap = FALSE, ext = FALSE;

      out = dc_spirv_coop_nv_to_khr (in, &error);
      g_assert_no_error (error);
      o = g_bytes_get_data (out, &n_out);
      n_in /= 4;
      n_out /= 4;
      g_assert_cmpuint (o[0], ==, 0x07230203);
      g_assert_cmpuint (o[3], ==, w[3] + 3);
      for (gsize i = 5; i < n_in; i += w[i] >> 16)
        nv_types += (w[i] & 0xffff) == 5358;
      for (gsize i = 5; i < n_out; i += o[i] >> 16)
        {
          guint len = o[i] >> 16, op = o[i] & 0xffff;

          g_assert_cmpuint (len, >, 0);
          g_assert_cmpuint (i + len, <=, n_out);
          g_assert_false (op >= 5357 && op <= 5362);
          if (op == 17)
            {
              g_assert_cmpuint (o[i + 1], !=, 5357);
              cap |= o[i + 1] == 6022;
            }
          if (op == 10)
            {
              g_assert_null (strstr ((const char *) &o[i + 1], "SPV_NV_cooperative_matrix"));
              ext |= g_str_equal ((const char *) &o[i + 1], "SPV_KHR_cooperative_matrix");
            }
          if (op == 4456)
            {
              g_assert_cmpuint (len, ==, 7);
              g_assert_cmpuint (o[i + 6], >=, w[3]);
              uses[o[i + 6] - w[3]]++;
              khr_types++;
            }
          if (op == 4457)
            {
              /* type, result, pointer, layout (new uint 0 or 1), stride */
              g_assert_cmpuint (len, >=, 6);
              g_assert_true (o[i + 4] == w[3] || o[i + 4] == w[3] + 1);
              col_major += o[i + 4] == w[3] + 1;
              loads++;
            }
          if (op == 4459)
            {
              g_assert_cmpuint (len, ==, 7);
              g_assert_cmpuint (o[i + 6], ==, 0xf);
              muladds++;
            }
        }
      g_test_message ("%s: %u matrix types (A %u, B %u, accumulator %u), %u loads "
                      "(%u column-major), %u multiply-adds", names[s], khr_types, uses[0],
                      uses[1], uses[2], loads, col_major, muladds);
      g_assert_true (cap);
      g_assert_true (ext);
      g_assert_cmpuint (khr_types, ==, nv_types);
      g_assert_cmpuint (uses[0], ==, 1);
      g_assert_cmpuint (uses[1], ==, 1);
      g_assert_cmpuint (uses[2], ==, 1);
      g_assert_cmpuint (muladds, >, 0);
      /* B is (N, K) row-major: its fragments load column-major. */
      g_assert_cmpuint (col_major, >, 0);
      g_assert_cmpuint (col_major, <, loads);
    }
}

/* Input the rewrite must refuse with a message, not crash on: a truncated
 * module, the wrong magic, a kernel without cooperative matrices, and every
 * prefix of a real one. */
static void
test_spirv_rewrite_refuses (void)
{
  g_autoptr(GBytes) coop = shader_bytes ("gemm-int8-coop");
  g_autoptr(GBytes) smoke = shader_bytes ("smoke");
  gsize n;
  const guint8 *data = g_bytes_get_data (coop, &n);

  {
    g_autoptr(GError) error = NULL;
    g_autoptr(GBytes) out = dc_spirv_coop_nv_to_khr (smoke, &error);

    g_assert_null (out);
    g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA);
    g_assert_nonnull (strstr (error->message, "does not use SPV_NV_cooperative_matrix"));
  }
  {
    g_autoptr(GError) error = NULL;
    g_autofree guint8 *copy = g_memdup2 (data, n);
    g_autoptr(GBytes) bad = NULL;
    g_autoptr(GBytes) out = NULL;

    copy[0] ^= 0xff;
    bad = g_bytes_new (copy, n);
    out = dc_spirv_coop_nv_to_khr (bad, &error);
    g_assert_null (out);
    g_assert_nonnull (strstr (error->message, "magic"));
  }
  for (gsize cut = 0; cut < n; cut += 4)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(GBytes) prefix = g_bytes_new_from_bytes (coop, 0, cut);
      g_autoptr(GBytes) out = dc_spirv_coop_nv_to_khr (prefix, &error);

      /* A prefix that ends between instructions may still be rewritable;
       * it must never be read past its end (valgrind/ASan catch that). */
      if (out == NULL)
        g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA);
    }
}

/* The queued timing on whatever Vulkan device there is (lavapipe in the
 * suite): every figure positive but the timestamps (absent on queues
 * without them); the CPU path refuses it by name. */
static void
test_time_queued (void)
{
  g_autoptr(DcGemmBackend) backend = vulkan_backend_or_skip ();
  g_autoptr(DcGemmBackend) cpu = NULL;
  g_autoptr(GRand) rand = g_rand_new_with_seed (13);
  g_autoptr(DcQuantMatrix) a = random_matrix (rand, 65, 64);
  g_autoptr(DcQuantMatrix) b = random_matrix (rand, 33, 64);
  g_autoptr(GError) error = NULL;
  DcGemmQueuedTiming t;

  if (backend == NULL)
    return;
  g_assert_true (dc_gemm_backend_time_queued (backend, a, b, 5, &t, &error));
  g_assert_no_error (error);
  g_test_message ("queued %g s, gpu %g s, fence wait %g s, poll %g s, fresh %g s", t.queued,
                  t.gpu, t.fence_wait, t.fence_poll, t.fresh);
  g_assert_cmpfloat (t.queued, >, 0);
  g_assert_cmpfloat (t.fence_wait, >, 0);
  g_assert_cmpfloat (t.fence_poll, >, 0);
  g_assert_cmpfloat (t.fresh, >, 0);
  g_assert_true (t.gpu > 0 || t.gpu == -1);
  /* The product is still right after the timing reused its buffers. */
  check_against_reference (backend, a, b);

  cpu = dc_gemm_backend_new (DC_BACKEND_CPU, &error);
  g_assert_no_error (error);
  g_assert_false (dc_gemm_backend_time_queued (cpu, a, b, 5, &t, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED);
}

int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);
  dc_test_use_lavapipe ();

  g_test_add_func ("/dc/engine/gemm/vulkan/equals-reference", test_vulkan_equals_reference);
  g_test_add_func ("/dc/engine/gemm/vulkan/each-variant", test_each_variant);
  g_test_add_func ("/dc/engine/gemm/vulkan/probe-equals-cpu", test_probe_equals_cpu);
  g_test_add_func ("/dc/engine/gemm/vulkan/max-k", test_vulkan_max_k);
  g_test_add_func ("/dc/engine/gemm/vulkan/refuses-bad-operands", test_vulkan_refuses_bad_operands);
  g_test_add_func ("/dc/engine/gemm/vulkan/gate-refuses-all", test_gate_refuses_broken_kernel);
  g_test_add_func ("/dc/engine/gemm/vulkan/gate-refuses-one", test_gate_refuses_one_kernel);
  g_test_add_func ("/dc/engine/gemm/vulkan/variant-offered", test_variant_offered);
  g_test_add_func ("/dc/engine/gemm/vulkan/variant-offered-khr", test_variant_offered_khr);
  g_test_add_func ("/dc/engine/gemm/vulkan/variant-offered-sc", test_variant_offered_sc);
  g_test_add_func ("/dc/engine/gemm/vulkan/spirv-rewrite", test_spirv_rewrite);
  g_test_add_func ("/dc/engine/gemm/vulkan/spirv-rewrite-refuses", test_spirv_rewrite_refuses);
  g_test_add_func ("/dc/engine/gemm/vulkan/time-queued", test_time_queued);

  return g_test_run ();
}
