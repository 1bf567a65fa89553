/* fuzz-parquet-meta.c: libFuzzer target for the parquet footer and the
 * whole-file path (footer checks, metadata, column lookup, chunk ranges,
 * page decoding).
 *
 * Build: CC=clang meson setup build-fuzz -Dfuzzers=true && meson compile -C build-fuzz
 * Run:   build-fuzz/tests/fuzz-parquet-meta -runs=200000 tests/data/parquet
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include "data/dc-parquet-file.h"

int LLVMFuzzerTestOneInput (const guint8 *data, size_t size);

static void
ignore_cb (const char *data,
           gsize       len,
           gpointer    user_data)
{
  /* Touch the bytes so that a bad slice is caught by ASan. */
  if (data != NULL && len > 0)
    *(volatile char *) user_data = data[len - 1];
}

int
LLVMFuzzerTestOneInput (const guint8 *data,
                        size_t        size)
{
  g_autoptr(GBytes) bytes = g_bytes_new (data, size);
  g_autoptr(DcByteSource) source = dc_byte_source_new_for_bytes (bytes, "fuzz.parquet");
  g_autoptr(DcParquetFile) file = NULL;
  g_autoptr(DcParquetMeta) meta = NULL;
  char sink = 0;
  int column;

  /* The metadata parser alone, on the raw input. */
  meta = dc_parquet_meta_parse (data, size, NULL);

  file = dc_parquet_file_open (source, NULL, NULL);
  if (file == NULL)
    return 0;
  column = dc_parquet_file_find_text_column (file, "text", NULL);
  if (column >= 0)
    dc_parquet_file_read_column (file, column, NULL, 0, ignore_cb, &sink, NULL, NULL);
  return 0;
}
