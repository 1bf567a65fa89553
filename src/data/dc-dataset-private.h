/* dc-dataset-private.h: test hooks of DcTextStream.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "dc-byte-source.h"
#include "dc-dataset.h"

G_BEGIN_DECLS

/* Text taken from a row group per refill. A row group may hold gigabytes of
 * text (or declare 2^31 rows); taking it a slice at a time keeps the stream's
 * buffer at about one writer-default page, small beside the 8 MiB the
 * trainer gathers before its first step. */
#define DC_TEXT_STREAM_SLICE_BYTES (1u << 20)

/* A stream over one parquet file instead of a Hub dataset's listing. */
DcTextStream *_dc_text_stream_new_for_source     (DcByteSource *source,
                                                  const char   *column,
                                                  guint         rank,
                                                  guint         world,
                                                  guint64       seed);
/* The bytes of text the stream holds, read or not (its slice of a row group). */
gsize         _dc_text_stream_get_buffered_bytes (DcTextStream *stream);

G_END_DECLS
