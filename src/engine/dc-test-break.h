/* dc-test-break.h: the one reader of DC_TEST_BREAK_KERNEL, the tests' switch
 * that swaps a kernel for its broken twin so each gate can be seen refusing.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/**
 * dc_test_break_matches:
 * @spec: (nullable): a value of DC_TEST_BREAK_KERNEL: `name[,name…]` or `all`
 * @name: a kernel's name
 *
 * Returns: %TRUE when @spec names @name or is `all` (among other names)
 */
gboolean dc_test_break_matches (const char *spec,
                                const char *name);

/**
 * dc_test_break_kernel:
 * @name: a kernel's name
 *
 * Reads DC_TEST_BREAK_KERNEL now (tests set and unset it within one
 * process) and matches it with dc_test_break_matches(). For tests only:
 * unset, every kernel is the real one.
 */
gboolean dc_test_break_kernel (const char *name);

G_END_DECLS
