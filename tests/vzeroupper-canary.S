/* vzeroupper-canary.S: a call into SSE code with dirty upper halves, on
 * purpose, so that test-engine-vzeroupper.sh can show its check catches
 * one (written in assembly: a compiler may or may not make it).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
        .text
        .type   dc_vzeroupper_canary_sse, @function
dc_vzeroupper_canary_sse:
        addss   %xmm1, %xmm0
        ret
        .size   dc_vzeroupper_canary_sse, .-dc_vzeroupper_canary_sse

        .globl  dc_vzeroupper_canary
        .type   dc_vzeroupper_canary, @function
dc_vzeroupper_canary:
        vaddps  %ymm1, %ymm0, %ymm0
        call    dc_vzeroupper_canary_sse
        vzeroupper
        ret
        .size   dc_vzeroupper_canary, .-dc_vzeroupper_canary

        .section .note.GNU-stack,"",@progbits
