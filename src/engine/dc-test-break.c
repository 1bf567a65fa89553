/* dc-test-break.c: DC_TEST_BREAK_KERNEL, read the same way by every gate.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "dc-test-break.h"

gboolean
dc_test_break_matches (const char *spec,
                       const char *name)
{
  g_auto(GStrv) names = NULL;

  if (spec == NULL || *spec == '\0')
    return FALSE;
  names = g_strsplit (spec, ",", -1);
  return g_strv_contains ((const char * const *) names, "all") ||
         g_strv_contains ((const char * const *) names, name);
}

gboolean
dc_test_break_kernel (const char *name)
{
  return dc_test_break_matches (g_getenv ("DC_TEST_BREAK_KERNEL"), name);
}
