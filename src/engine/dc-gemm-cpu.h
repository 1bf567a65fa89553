/* dc-gemm-cpu.h: the CPU paths of the INT8 GEMM (scalar, AVX2, AVX-512 VNNI, NEON),
 * threaded over a fixed partition of output tiles. Internal to the engine;
 * model code goes through dc-gemm-backend.h.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "dc-gemm.h"
#include "dc-gemm-backend.h"

G_BEGIN_DECLS

typedef enum
{
  DC_GEMM_ISA_SCALAR,
  DC_GEMM_ISA_AVX2,
  DC_GEMM_ISA_AVX512_VNNI,
  DC_GEMM_ISA_NEON,
} DcGemmIsa;

#define DC_GEMM_N_ISAS 4

const char *dc_gemm_isa_to_string      (DcGemmIsa             isa);
gboolean    dc_gemm_isa_supported      (DcGemmIsa             isa);
/* The fastest ISA the CPU supports whose kernel passed its start-up gate
 * against the scalar reference (a refused kernel is logged by name). */
DcGemmIsa   dc_gemm_isa_best           (void);

/* The AMX-INT8 kernel of the AVX-512 VNNI ISA (Sapphire Rapids and later). */
typedef enum
{
  DC_GEMM_AMX_UNSUPPORTED,   /* no AMX-TILE and AMX-INT8 (or no AVX-512 VNNI) */
  DC_GEMM_AMX_DISABLED,      /* DC_GEMM_AMX=0 */
  DC_GEMM_AMX_NOT_PERMITTED, /* Linux refused the tile data (arch_prctl) */
  DC_GEMM_AMX_REFUSED,       /* it failed its start-up gate */
  DC_GEMM_AMX_ACTIVE,
} DcGemmAmxState;

DcGemmAmxState dc_gemm_amx_state       (void);
const char *   dc_gemm_amx_state_to_string (DcGemmAmxState state);
DcGemmAmxState dc_gemm_amx_decide      (gboolean              cpu_has,
                                        const char           *env,
                                        gboolean            (*permit) (void),
                                        gboolean            (*verify) (void),
                                        gsize                *min_k);

/* acc is (M, N) row-major int32; c is (M, N) row-major f32. Operands must have
 * passed dc_quant_matrix_check and share k. n_threads ≥ 1; the result does not
 * depend on it (tests/test-engine-gemm-cpu.c). */
void        dc_gemm_cpu_i32            (const DcQuantMatrix  *a,
                                        const DcQuantMatrix  *b,
                                        gint32               *acc,
                                        DcGemmIsa             isa,
                                        guint                 n_threads);
void        dc_gemm_cpu                (const DcQuantMatrix  *a,
                                        const DcQuantMatrix  *b,
                                        float                *c,
                                        DcGemmIsa             isa,
                                        guint                 n_threads);

/* dc_gemm_cpu() with the operands quantized by @fill in the preparation's
 * pool call (dc_gemm_run_fill()); FALSE, with nothing computed, when a
 * fill failed. */
gboolean    dc_gemm_cpu_fill           (const DcQuantMatrix  *a,
                                        const DcQuantMatrix  *b,
                                        const DcGemmFill     *fill,
                                        float                *c,
                                        DcGemmIsa             isa,
                                        guint                 n_threads);
/* Only the filling, on the pool (for a backend that multiplies elsewhere). */
gboolean    dc_gemm_cpu_fill_operands  (const DcQuantMatrix  *a,
                                        const DcQuantMatrix  *b,
                                        const DcGemmFill     *fill);

G_END_DECLS
