/* dc-version.c
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-core"

#include "config.h"

#include "dc-version.h"

#include <gst/gst.h>
#include <json-glib/json-glib.h>
#include <libsoup/soup.h>
#include <vulkan/vulkan.h>

const char *
dc_version_get_string (void)
{
  return PACKAGE_VERSION;
}

const char *
dc_version_get_app_id (void)
{
  return APP_ID;
}

/**
 * dc_version_dup_library_info:
 *
 * Returns: (transfer full): one line per library this build runs on, with the
 *   version found at run time, for bug reports and `daisychain-cli info`.
 */
char *
dc_version_dup_library_info (void)
{
  guint gst_major, gst_minor, gst_micro, gst_nano;

  gst_version (&gst_major, &gst_minor, &gst_micro, &gst_nano);

  return g_strdup_printf ("GLib %u.%u.%u\n"
                          "json-glib %d.%d.%d\n"
                          "libsoup %u.%u.%u\n"
                          "GStreamer %u.%u.%u\n"
                          "Vulkan headers 1.%u.%u",
                          glib_major_version, glib_minor_version, glib_micro_version,
                          JSON_MAJOR_VERSION, JSON_MINOR_VERSION, JSON_MICRO_VERSION,
                          soup_get_major_version (), soup_get_minor_version (),
                          soup_get_micro_version (),
                          gst_major, gst_minor, gst_micro,
                          VK_API_VERSION_MINOR (VK_HEADER_VERSION_COMPLETE),
                          VK_HEADER_VERSION);
}
