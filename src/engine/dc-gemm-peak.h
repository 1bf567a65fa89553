/* dc-gemm-peak.h: the measured int8 peak of a CPU GEMM kernel's
 * instruction mix, for `bench gemm`'s peak_ratio.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Longest a measurement may take (seconds): it runs once per path before a
 * benchmark, and the clock settles within milliseconds. */
#define DC_GEMM_PEAK_MAX_SECONDS 2.0

double dc_gemm_peak_measure (const char *kernel,
                             guint       n_threads,
                             double      seconds);

G_END_DECLS
