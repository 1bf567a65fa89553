/* dc-mesh-ring-protocol.h: the bodies of the inference ring's messages
 * (docs/PROTOCOL.md, "The inference ring").
 *
 * The mesh knows no model: these are typed containers of numbers, short
 * strings and f32 arrays. The decoders check that a body is well formed
 * (body version, sizes, counts, string lengths and encodings, no trailing
 * bytes) before anything is allocated for it; whether the values make sense
 * (a finite activation, the right model) is for src/infer/dc-infer-ring.c.
 *
 * Everything here is plain data and thread-agnostic.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

#include "dc-mesh-protocol.h"

G_BEGIN_DECLS

/* Every ring body starts with this byte; others are refused (UNSUPPORTED). */
#define DC_MESH_RING_BODY_VERSION   1
#define DC_MESH_RING_RUN_ID_SIZE    16

/* A model id is a Hub repo id with its revision: the Hub allows 96
 * characters for owner/name, a revision is a branch, tag or 40-digit hash;
 * 512 bytes leaves room and bounds what a peer makes us keep. */
#define DC_MESH_RING_MODEL_MAX      512
/* Member ids are 16 hex digits today; 64 as in the training messages. */
#define DC_MESH_RING_MEMBER_ID_MAX  64
/* A stage's failure, shown to the user: a sentence, not a log. */
#define DC_MESH_RING_MESSAGE_MAX    1024
/* One token's text is a few bytes; 1024 bounds a lying head. */
#define DC_MESH_RING_TEXT_MAX       1024
/* Positions one hop carries: the prefill chunk of the session (16) fits, and
 * so do the model's own chunks (DC_HF_MODEL_CHUNK, 64). */
#define DC_MESH_RING_MAX_POSITIONS  64
/* Floats per position: past the hidden size of the largest models (Llama
 * 3.1 405B: 16,384). 64 × 16,384 × 4 bytes = 4 MiB a hop at most. */
#define DC_MESH_RING_MAX_WIDTH      16384

/* A weight file's name in a checkpoint ("model-00001-of-00004.safetensors"):
 * 255 bytes, a file name's limit on common file systems. */
#define DC_MESH_RING_FILE_MAX       255
/* Weight bytes one ring-bytes answer carries: 4 MiB, the size of the
 * largest hop, which the ring's channels already carry; a 16 MiB cached
 * piece is four requests. */
#define DC_MESH_RING_CHUNK_MAX      (4u * 1024u * 1024u)

#define DC_MESH_RING_OFFER_SIZE     21
#define DC_MESH_RING_ASSIGN_FIXED   (1 + DC_MESH_RING_RUN_ID_SIZE + 4 * 5 + 2 + 2)
#define DC_MESH_RING_ASSIGN_MAX     (DC_MESH_RING_ASSIGN_FIXED + DC_MESH_RING_MODEL_MAX \
                                     + DC_MESH_RING_MEMBER_ID_MAX)
#define DC_MESH_RING_READY_FIXED    (1 + DC_MESH_RING_RUN_ID_SIZE + 8 + 1 + 2)
#define DC_MESH_RING_READY_MAX      (DC_MESH_RING_READY_FIXED + DC_MESH_RING_MESSAGE_MAX)
#define DC_MESH_RING_HOP_FIXED      (1 + DC_MESH_RING_RUN_ID_SIZE + 4 * 4 + 2)
#define DC_MESH_RING_HOP_MAX        (DC_MESH_RING_HOP_FIXED + DC_MESH_RING_MODEL_MAX \
                                     + 4u * DC_MESH_RING_MAX_POSITIONS * DC_MESH_RING_MAX_WIDTH)
#define DC_MESH_RING_TOKEN_FIXED    (1 + DC_MESH_RING_RUN_ID_SIZE + 4 * 3 + 1 + 2)
#define DC_MESH_RING_TOKEN_MAX      (DC_MESH_RING_TOKEN_FIXED + DC_MESH_RING_TEXT_MAX)
#define DC_MESH_RING_FETCH_FIXED    (1 + DC_MESH_RING_RUN_ID_SIZE + 4 + 8 + 4 + 2)
#define DC_MESH_RING_FETCH_MAX      (DC_MESH_RING_FETCH_FIXED + DC_MESH_RING_FILE_MAX)
#define DC_MESH_RING_BYTES_FIXED    (1 + DC_MESH_RING_RUN_ID_SIZE + 4 + 8 + 32 + 2)
#define DC_MESH_RING_BYTES_MAX      (DC_MESH_RING_BYTES_FIXED + DC_MESH_RING_MESSAGE_MAX \
                                     + DC_MESH_RING_CHUNK_MAX)
/* The largest file a stage asks the head for: a safetensors header may be
 * 100 MiB (the format's own cap, DC_SAFETENSORS_MAX_HEADER) after its 8-byte
 * length; tokenizer.json's cap is 64 MiB. The stage checks its own, smaller
 * cap per file before it allocates anything. */
#define DC_MESH_RING_FILE_TOTAL_MAX (100u * 1024u * 1024u + 8u)
#define DC_MESH_RING_FILE_FETCH_FIXED (1 + DC_MESH_RING_RUN_ID_SIZE + 4 + 1 + 8 + 4 + 2)
#define DC_MESH_RING_FILE_FETCH_MAX (DC_MESH_RING_FILE_FETCH_FIXED + DC_MESH_RING_FILE_MAX)
#define DC_MESH_RING_FILE_FIXED     (1 + DC_MESH_RING_RUN_ID_SIZE + 4 + 8 + 8 + 8 + 32 + 2)
#define DC_MESH_RING_FILE_BODY_MAX  (DC_MESH_RING_FILE_FIXED + DC_MESH_RING_MESSAGE_MAX \
                                     + DC_MESH_RING_CHUNK_MAX)

/**
 * DcMeshRingOffer:
 * @memory_bytes: what the device offers to hold
 * @gmacs: its measured speed (billions of INT8 multiply-adds a second)
 * @flags: %DC_MESH_RING_OFFER_ASK or 0 (other bits are ignored)
 *
 * A `join --serve-layers` device's offer, sent to each peer that joins. With
 * %DC_MESH_RING_OFFER_ASK it is a head asking the devices already there for
 * theirs (its memory and speed are then not an offer).
 */
#define DC_MESH_RING_OFFER_ASK 1
typedef struct
{
  guint64 memory_bytes;
  double  gmacs;
  guint32 flags;
} DcMeshRingOffer;

/**
 * DcMeshRingAssign:
 * @run_id: names the ring run; every later ring message carries it
 * @first: the first layer the stage holds
 * @last: one past its last
 * @context: the KV cache's positions
 * @stage: the stage's place in the ring (1 …; the head is 0)
 * @n_stages: stages in the ring, the head included
 * @model: the model id (repo id and revision) to fetch the layers of
 * @next: the member id the stage sends its activations to
 *
 * The head's assignment to a stage; an empty @model releases the stage.
 */
typedef struct
{
  guint8   run_id[DC_MESH_RING_RUN_ID_SIZE];
  guint32  first;
  guint32  last;
  guint32  context;
  guint32  stage;
  guint32  n_stages;
  char    *model;
  char    *next;
} DcMeshRingAssign;

/**
 * DcMeshRingReady:
 * @downloaded: bytes the stage fetched for its layers
 * @ok: loaded; else @message says why not
 */
typedef struct
{
  guint8    run_id[DC_MESH_RING_RUN_ID_SIZE];
  guint64   downloaded;
  gboolean  ok;
  char     *message;
} DcMeshRingReady;

/**
 * DcMeshRingHop:
 * @turn: the prompt being generated
 * @position: the first position the activations are for
 * @n: positions
 * @width: floats per position (the hidden size)
 * @model: the model id the activations belong to
 * @data: n × width f32, little-endian
 */
typedef struct
{
  guint8   run_id[DC_MESH_RING_RUN_ID_SIZE];
  guint32  turn;
  guint32  position;
  guint32  n;
  guint32  width;
  char    *model;
  float   *data;
} DcMeshRingHop;

/* Token flags. */
#define DC_MESH_RING_TOKEN_END   1   /* the turn ended (no token) */
#define DC_MESH_RING_TOKEN_CLOSE 2   /* the ring is over: stages release their layers */

/**
 * DcMeshRingToken:
 * @turn: the prompt
 * @index: the token's place in the answer
 * @id: the token id
 * @flags: DC_MESH_RING_TOKEN_*
 * @text: the text it completes (UTF-8)
 */
typedef struct
{
  guint8   run_id[DC_MESH_RING_RUN_ID_SIZE];
  guint32  turn;
  guint32  index;
  guint32  id;
  guint8   flags;
  char    *text;
} DcMeshRingToken;

/**
 * DcMeshRingFetch:
 * @request: the stage's number for the request, echoed in the answer
 * @offset: the first byte wanted, counted from the start of @file's data
 *   area (the offsets of its safetensors header)
 * @length: bytes wanted, 1 … %DC_MESH_RING_CHUNK_MAX
 * @file: the weight file ("model.safetensors" or a shard's name)
 *
 * A stage asks the head for bytes of its layers' tensors from the head's
 * model cache (docs/PROTOCOL.md, "The inference ring").
 */
typedef struct
{
  guint8   run_id[DC_MESH_RING_RUN_ID_SIZE];
  guint32  request;
  guint64  offset;
  guint32  length;
  char    *file;
} DcMeshRingFetch;

/**
 * DcMeshRingBytes:
 * @request: the ring-fetch this answers
 * @offset: the offset of @data, as asked
 * @sha256: of @data
 * @message: empty when @data holds the bytes; else why the head refuses
 *   (then @data is empty)
 * @data: (nullable): the bytes
 */
typedef struct
{
  guint8   run_id[DC_MESH_RING_RUN_ID_SIZE];
  guint32  request;
  guint64  offset;
  guint8   sha256[32];
  char    *message;
  GBytes  *data;
} DcMeshRingBytes;

/* What a ring-file-fetch asks for. */
typedef enum
{
  DC_MESH_RING_FILE_WHOLE  = 1,   /* a small file of the model by name: config.json, … */
  DC_MESH_RING_FILE_HEADER = 2,   /* a weight file's 8-byte header length and its header */
} DcMeshRingFileKind;

/**
 * DcMeshRingFileFetch:
 * @request: the stage's number for the request, echoed in the answer
 * @kind: a #DcMeshRingFileKind
 * @offset: the first byte wanted, counted from the start of what @kind names
 * @length: bytes wanted, 1 … %DC_MESH_RING_CHUNK_MAX
 * @name: the file ("config.json", or for a header "model.safetensors")
 *
 * A stage asks the head for a file it needs besides weight bytes, so that
 * it needs no Hub (docs/PROTOCOL.md, "The inference ring").
 */
typedef struct
{
  guint8   run_id[DC_MESH_RING_RUN_ID_SIZE];
  guint32  request;
  guint8   kind;
  guint64  offset;
  guint32  length;
  char    *name;
} DcMeshRingFileFetch;

/**
 * DcMeshRingFile:
 * @request: the ring-file-fetch this answers
 * @offset: the offset of @data, as asked
 * @total: the size of the whole of what was asked for
 *   (≤ %DC_MESH_RING_FILE_TOTAL_MAX)
 * @file_size: for a header, the size of the whole weight file; else @total
 * @sha256: of @data
 * @message: empty when @data holds the bytes; else why the head refuses
 *   (then @data is empty)
 * @data: (nullable): the bytes, within @total
 */
typedef struct
{
  guint8   run_id[DC_MESH_RING_RUN_ID_SIZE];
  guint32  request;
  guint64  offset;
  guint64  total;
  guint64  file_size;
  guint8   sha256[32];
  char    *message;
  GBytes  *data;
} DcMeshRingFile;

GBytes   *dc_mesh_ring_offer_encode  (const DcMeshRingOffer *offer);
gboolean  dc_mesh_ring_offer_decode  (GBytes *payload, DcMeshRingOffer *offer, GError **error);

GBytes   *dc_mesh_ring_assign_encode (const DcMeshRingAssign *assign);
gboolean  dc_mesh_ring_assign_decode (GBytes *payload, DcMeshRingAssign *assign,
                                      GError **error);
void      dc_mesh_ring_assign_clear  (DcMeshRingAssign *assign);

GBytes   *dc_mesh_ring_ready_encode  (const DcMeshRingReady *ready);
gboolean  dc_mesh_ring_ready_decode  (GBytes *payload, DcMeshRingReady *ready, GError **error);
void      dc_mesh_ring_ready_clear   (DcMeshRingReady *ready);

GBytes   *dc_mesh_ring_hop_encode    (const DcMeshRingHop *hop);
gboolean  dc_mesh_ring_hop_decode    (GBytes *payload, DcMeshRingHop *hop, GError **error);
void      dc_mesh_ring_hop_clear     (DcMeshRingHop *hop);

GBytes   *dc_mesh_ring_token_encode  (const DcMeshRingToken *token);
gboolean  dc_mesh_ring_token_decode  (GBytes *payload, DcMeshRingToken *token, GError **error);
void      dc_mesh_ring_token_clear   (DcMeshRingToken *token);

GBytes   *dc_mesh_ring_fetch_encode  (const DcMeshRingFetch *fetch);
gboolean  dc_mesh_ring_fetch_decode  (GBytes *payload, DcMeshRingFetch *fetch, GError **error);
void      dc_mesh_ring_fetch_clear   (DcMeshRingFetch *fetch);

GBytes   *dc_mesh_ring_bytes_encode  (const DcMeshRingBytes *bytes);
gboolean  dc_mesh_ring_bytes_decode  (GBytes *payload, DcMeshRingBytes *bytes, GError **error);
void      dc_mesh_ring_bytes_clear   (DcMeshRingBytes *bytes);

GBytes   *dc_mesh_ring_file_fetch_encode (const DcMeshRingFileFetch *fetch);
gboolean  dc_mesh_ring_file_fetch_decode (GBytes *payload, DcMeshRingFileFetch *fetch,
                                          GError **error);
void      dc_mesh_ring_file_fetch_clear  (DcMeshRingFileFetch *fetch);

GBytes   *dc_mesh_ring_file_encode   (const DcMeshRingFile *file);
gboolean  dc_mesh_ring_file_decode   (GBytes *payload, DcMeshRingFile *file, GError **error);
void      dc_mesh_ring_file_clear    (DcMeshRingFile *file);

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (DcMeshRingFileFetch, dc_mesh_ring_file_fetch_clear)
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (DcMeshRingFile, dc_mesh_ring_file_clear)
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (DcMeshRingFetch, dc_mesh_ring_fetch_clear)
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (DcMeshRingBytes, dc_mesh_ring_bytes_clear)
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (DcMeshRingAssign, dc_mesh_ring_assign_clear)
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (DcMeshRingReady, dc_mesh_ring_ready_clear)
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (DcMeshRingHop, dc_mesh_ring_hop_clear)
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (DcMeshRingToken, dc_mesh_ring_token_clear)

G_END_DECLS
