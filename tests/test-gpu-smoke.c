/* test-gpu-smoke.c: a shader built from shaders/ runs on a Vulkan device.
 *
 * In the test suite VK_ICD_FILENAMES points at Mesa's lavapipe, so this runs
 * on any machine; with no Vulkan device at all the test is skipped, saying why.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include "dc-test-utils.h"
#include "engine/dc-vk-context.h"

typedef struct
{
  guint32 n;
  gint32  bias;
} SmokePush;

static void
test_smoke_dispatch (void)
{
  g_autoptr(DcVkContext) ctx = NULL;
  g_autoptr(DcVkBuffer) buffer = NULL;
  g_autoptr(DcVkPipeline) pipeline = NULL;
  g_autoptr(GError) error = NULL;
  /* Not a multiple of the 64-wide workgroup: the bounds check must hold. */
  const guint32 n = 1000;
  SmokePush push = { n, -7 };
  gint32 *data;

  ctx = dc_vk_context_new (-1, &error);
  if (ctx == NULL)
    {
      dc_test_skip_without_vulkan (error->message);
      return;
    }
  g_test_message ("device: %s", dc_vk_context_get_device_name (ctx));

  buffer = dc_vk_buffer_new (ctx, (n + 1) * sizeof (gint32), &error);
  g_assert_no_error (error);
  data = dc_vk_buffer_get_data (buffer);
  for (guint32 i = 0; i <= n; i++)
    data[i] = (gint32) i - 500;

  pipeline = dc_vk_pipeline_new (ctx, "smoke", 1, sizeof push, &error);
  g_assert_no_error (error);
  g_assert_true (dc_vk_dispatch (ctx, pipeline, &buffer, &push, (n + 63) / 64, 1, 1, &error));
  g_assert_no_error (error);

  for (guint32 i = 0; i < n; i++)
    g_assert_cmpint (data[i], ==, ((gint32) i - 500) * 3 - 7);
  /* The element past n was not touched. */
  g_assert_cmpint (data[n], ==, (gint32) n - 500);
}

static void
test_missing_kernel (void)
{
  g_autoptr(DcVkContext) ctx = NULL;
  g_autoptr(DcVkPipeline) pipeline = NULL;
  g_autoptr(GError) error = NULL;

  ctx = dc_vk_context_new (-1, &error);
  if (ctx == NULL)
    {
      dc_test_skip_without_vulkan (error->message);
      return;
    }

  pipeline = dc_vk_pipeline_new (ctx, "no-such-kernel", 1, 0, &error);
  g_assert_null (pipeline);
  g_assert_error (error, DC_VK_ERROR, DC_VK_ERROR_SHADER);
  g_assert_nonnull (strstr (error->message, "no-such-kernel"));
}

static void
test_bad_device_index (void)
{
  g_autoptr(DcVkContext) ctx = NULL;
  g_autoptr(GError) error = NULL;

  ctx = dc_vk_context_new (9999, &error);
  g_assert_null (ctx);
  g_assert_error (error, DC_VK_ERROR, DC_VK_ERROR_NO_DEVICE);
}

int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);
  dc_test_use_lavapipe ();

  g_test_add_func ("/dc/engine/vulkan/smoke-dispatch", test_smoke_dispatch);
  g_test_add_func ("/dc/engine/vulkan/missing-kernel", test_missing_kernel);
  g_test_add_func ("/dc/engine/vulkan/bad-device-index", test_bad_device_index);

  return g_test_run ();
}
