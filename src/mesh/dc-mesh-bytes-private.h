/* dc-mesh-bytes-private.h: little-endian integers in the wire formats of
 * dc-mesh-protocol.c and dc-mesh-train-protocol.c (docs/PROTOCOL.md: every
 * integer on the wire is little-endian, whatever the host's order).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

static inline void
put_u16 (guint8  *p,
         guint16  v)
{
  p[0] = v & 0xff;
  p[1] = (v >> 8) & 0xff;
}

static inline guint16
get_u16 (const guint8 *p)
{
  return (guint16) (p[0] | (p[1] << 8));
}

static inline void
put_u32 (guint8  *p,
         guint32  v)
{
  p[0] = v & 0xff;
  p[1] = (v >> 8) & 0xff;
  p[2] = (v >> 16) & 0xff;
  p[3] = (v >> 24) & 0xff;
}

static inline guint32
get_u32 (const guint8 *p)
{
  return (guint32) p[0] | ((guint32) p[1] << 8) | ((guint32) p[2] << 16) | ((guint32) p[3] << 24);
}

static inline void
put_u64 (guint8  *p,
         guint64  v)
{
  put_u32 (p, (guint32) v);
  put_u32 (p + 4, (guint32) (v >> 32));
}

static inline guint64
get_u64 (const guint8 *p)
{
  return (guint64) get_u32 (p) | ((guint64) get_u32 (p + 4) << 32);
}

G_END_DECLS
