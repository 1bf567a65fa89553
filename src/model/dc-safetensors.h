/* dc-safetensors.h: the safetensors header, its index for sharded
 * checkpoints, and exact widening of F16/BF16 to F32.
 *
 * A safetensors file is an 8-byte little-endian header length N, N bytes of
 * JSON ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
 * optional "__metadata__": {string: string}}), then the data; offsets count
 * from the start of the data. The reader works on the header's bytes alone,
 * so a loader can fetch the first 8 bytes, then the header, by HTTP range,
 * and learn every tensor's byte range before any weight moves. All of it is
 * untrusted: every tensor is checked (dtype, rank, sizes without overflow,
 * offsets inside the file, data tiling the data area with no gap or overlap)
 * before the header is accepted.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The length prefix comes before anything can be checked; real headers are
 * under 1 MiB (a 70B shard lists ~700 tensors in ~80 KB), 100 MiB is generous. */
#define DC_SAFETENSORS_MAX_HEADER    (100u * 1024u * 1024u)
/* The header nests 3 levels ({name: {shape: [...]}}); 8 leaves room. */
#define DC_SAFETENSORS_MAX_DEPTH     8
/* safetensors itself allows any rank; models use at most 4 (conv weights). */
#define DC_SAFETENSORS_MAX_RANK      8
/* A 405B checkpoint has ~1,100 tensors in all; one file with 2^18 is refused. */
#define DC_SAFETENSORS_MAX_TENSORS   (1u << 18)
/* model.safetensors.index.json lists every tensor once (~100 KB for 70B). */
#define DC_SAFETENSORS_INDEX_MAX_BYTES (16u * 1024u * 1024u)

typedef enum
{
  DC_SAFETENSORS_F32,
  DC_SAFETENSORS_F16,
  DC_SAFETENSORS_BF16,
} DcSafetensorsDtype;

typedef struct
{
  char               *name;
  DcSafetensorsDtype  dtype;
  guint               rank;
  guint64             shape[DC_SAFETENSORS_MAX_RANK];
  guint64             numel;
  guint64             begin;     /* bytes, from the start of the data area */
  guint64             end;
} DcSafetensorsTensor;

typedef struct
{
  guint64      header_len;     /* N, the JSON's length */
  guint64      data_start;     /* 8 + N: where offsets count from in the file */
  guint64      data_size;      /* file size - data_start */
  GPtrArray   *tensors;        /* DcSafetensorsTensor, sorted by begin */
  GHashTable  *by_name;        /* name -> DcSafetensorsTensor (borrowed) */
  GHashTable  *metadata;       /* string -> string; empty without __metadata__ */
} DcSafetensors;

typedef struct
{
  GHashTable  *weight_map;     /* tensor name -> shard file name */
  GPtrArray   *shards;         /* the distinct shard file names, sorted */
  guint64      total_size;     /* metadata.total_size, 0 when absent */
} DcSafetensorsIndex;

gsize          dc_safetensors_dtype_size     (DcSafetensorsDtype   dtype);
const char    *dc_safetensors_dtype_name     (DcSafetensorsDtype   dtype);

gboolean       dc_safetensors_read_prefix    (const guint8        *prefix,
                                              gsize                prefix_len,
                                              guint64              file_size,
                                              guint64             *header_len,
                                              GError             **error);
DcSafetensors *dc_safetensors_parse_header   (const char          *header,
                                              gsize                header_len,
                                              guint64              file_size,
                                              GError             **error);
DcSafetensors *dc_safetensors_new_from_file  (const char          *path,
                                              GError             **error);
const DcSafetensorsTensor *
               dc_safetensors_lookup         (DcSafetensors       *self,
                                              const char          *name);
void           dc_safetensors_free           (DcSafetensors       *self);

DcSafetensorsIndex *
               dc_safetensors_index_parse    (const char          *json,
                                              gssize               len,
                                              GError             **error);
void           dc_safetensors_index_free     (DcSafetensorsIndex  *self);

float          dc_f16_to_f32                 (guint16              h);
float          dc_bf16_to_f32                (guint16              b);
void           dc_widen_to_f32               (DcSafetensorsDtype   dtype,
                                              const guint8        *src,
                                              float               *dst,
                                              gsize                n);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcSafetensors, dc_safetensors_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcSafetensorsIndex, dc_safetensors_index_free)

G_END_DECLS
