/* dc-shader-params.h: C mirrors of the kernels' push-constant blocks (std430).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>
#include <stddef.h>

G_BEGIN_DECLS

/* shaders/gemm-int8.comp */
typedef struct
{
  guint32 m;
  guint32 n;
  guint32 kw;    /* padded K / 4 */
  guint32 mode;  /* 0: int32 accumulators, 1: f32 epilogue */
} DcGemmPush;

G_STATIC_ASSERT (sizeof (DcGemmPush) == 16);
G_STATIC_ASSERT (offsetof (DcGemmPush, kw) == 8);
G_STATIC_ASSERT (offsetof (DcGemmPush, mode) == 12);

G_END_DECLS
