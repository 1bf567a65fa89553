/* dc-gemm-probe.h: the probe GEMM whose hash identifies a device's arithmetic.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "dc-gemm-backend.h"

G_BEGIN_DECLS

/* The probe's shape: ragged on purpose (not a multiple of any tile). */
#define DC_GEMM_PROBE_M 67
#define DC_GEMM_PROBE_N 61
#define DC_GEMM_PROBE_K 131

/**
 * dc_gemm_probe:
 *
 * Runs the seeded probe GEMM (quantization included) on @backend and hashes
 * its int32 accumulators and f32 outputs (docs/VERIFICATION.md, "Probe").
 * Every backend that implements the rule gives the same hash.
 *
 * Returns: (transfer full) (nullable): 64 lowercase hex digits (SHA-256)
 */
char *dc_gemm_probe (DcGemmBackend  *backend,
                     GError        **error);

G_END_DECLS
