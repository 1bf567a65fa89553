/* fuzz-engine-spirv-coop.c: libFuzzer target for the NV → KHR
 * cooperative-matrix SPIR-V rewrite (src/engine/dc-spirv-coop.c). Any bytes
 * go in; the rewrite must refuse them with G_IO_ERROR_INVALID_DATA or give a
 * module whose instructions tile it exactly, with no NV cooperative-matrix
 * instruction left and every multiply-add marked signed. Its input comes
 * from the build, not from outside, but it walks untrusted-looking offsets
 * and must never read past the end.
 *
 * Seeds: the coop kernel's SPIR-V and the smoke kernel's (no matrices).
 *
 * Build: CC=clang meson setup build-fuzz -Dfuzzers=true
 * Run:   build-fuzz/tests/fuzz/fuzz-engine-spirv-coop -runs=200000
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <gio/gio.h>
#include <stdlib.h>

#include "engine/dc-spirv-coop.h"

int LLVMFuzzerTestOneInput (const guint8 *data, size_t size);

int
LLVMFuzzerTestOneInput (const guint8 *data,
                        size_t        size)
{
  g_autoptr(GBytes) in = g_bytes_new (data, size);
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) out = dc_spirv_coop_nv_to_khr (in, &error);
  const guint32 *w;
  gsize n;

  if (out == NULL)
    {
      if (!g_error_matches (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA))
        abort ();
      return 0;
    }
  w = g_bytes_get_data (out, &n);
  if (n % 4 != 0 || n < 20)
    abort ();
  n /= 4;
  for (gsize i = 5; i < n;)
    {
      guint len = w[i] >> 16, op = w[i] & 0xffff;

      if (len == 0 || len > n - i)
        abort ();
      if (op >= 5358 && op <= 5362)
        abort ();
      if (op == 4459 && (len != 7 || w[i + 6] != 0xf))
        abort ();
      i += len;
    }
  return 0;
}
