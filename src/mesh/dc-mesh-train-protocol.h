/* dc-mesh-train-protocol.h: the bodies of the training messages (docs/PROTOCOL.md).
 *
 * The mesh knows no model: every body here is a typed container of numbers,
 * hashes, short strings and opaque bytes. The training layer decides what
 * they mean and whether their values make sense for a model; the decoders
 * only make sure that a body is well formed (body version, sizes, counts,
 * string lengths and encodings, no trailing bytes) before anything is
 * allocated for it.
 *
 * Large objects (a gradient, a weight and optimizer-state blob) travel as
 * chunks that each fit one data-channel piece, so that small messages
 * (heartbeats, step reports, credits) are never stuck behind megabytes and a
 * lost chunk can be asked for again. A DcMeshChunkAssembler collects the
 * chunks of one object.
 *
 * Everything here is plain data and thread-agnostic.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

#include "dc-mesh-protocol.h"

G_BEGIN_DECLS

/* Every training body starts with this byte; others are refused (UNSUPPORTED).
 * 2: every chunk carries the SHA-256 of its own data (120-byte chunk header).
 * 3: the step exchange is sharded (reduce-scatter, then all-gather): a
 *    GRADIENTS object is a shard ("DRS1", src/train/dc-train-wire.h), not a
 *    whole gradient, so a version-2 peer would misread every one.
 * 4: the step report's weight and optimizer hashes are the piece-wise state
 *    hash (docs/VERIFICATION.md, "State hash"), not SHA-256 of the whole
 *    state: a version-3 peer's hashes would never match, and each would
 *    take the other for diverged.
 * 5: a summed shard lists its contribution hashes after its values, not
 *    before (so that a reducer can send its sum chunk by chunk as the
 *    contributions come: the streamed reduce, 2026-12-03); a version-4
 *    peer would read values as hashes. */
#define DC_MESH_TRAIN_BODY_VERSION    5

#define DC_MESH_RUN_ID_SIZE           16
#define DC_MESH_HASH_SIZE             32   /* SHA-256 */

/* Strings of the config and step report. */
/* A dataset spec may be a local path: PATH_MAX on Linux is 4096. */
#define DC_MESH_DATASET_SPEC_MAX      4096
/* As the hello's strings, so the probe hash of any hello fits. */
#define DC_MESH_PROBE_HASH_MAX        255
/* Member ids are 16 hex digits today; 64 leaves room for a longer scheme. */
#define DC_MESH_MEMBER_ID_MAX         64
/* A room holds at most 64 members (docs/PROTOCOL.md), so no roster is longer. */
#define DC_MESH_ROSTER_MAX            64

#define DC_MESH_CONFIG_FIXED_SIZE     92
/* The fixed part, then three strings each with a u16 length. */
#define DC_MESH_CONFIG_MAX_SIZE       (DC_MESH_CONFIG_FIXED_SIZE + 2 + DC_MESH_DATASET_SPEC_MAX \
                                       + 2 + DC_MESH_PROBE_HASH_MAX + 2 + DC_MESH_MEMBER_ID_MAX)
#define DC_MESH_STEP_REPORT_FIXED_SIZE 128
#define DC_MESH_STEP_REPORT_MAX_SIZE  (DC_MESH_STEP_REPORT_FIXED_SIZE \
                                       + DC_MESH_ROSTER_MAX * (1 + DC_MESH_MEMBER_ID_MAX))
#define DC_MESH_REPAIR_REQUEST_SIZE   32
#define DC_MESH_AUDIT_SIZE            64
/* Its body is read by the training layer (dc_train_contrib_request_parse ()). */
#define DC_MESH_CONTRIB_REQUEST_SIZE  44

/* Chunks: the header, then the data. One chunk message is exactly one piece
 * at most (65,536 − 16 frame header − 120 = 65,400 data bytes). The header
 * ends with the SHA-256 of the chunk's own data, so that each chunk is
 * checked as it arrives, not only once its whole object has come. */
#define DC_MESH_CHUNK_HEADER_SIZE     120
#define DC_MESH_CHUNK_DATA_MAX        (DC_MESH_PIECE_SIZE - DC_MESH_HEADER_SIZE \
                                       - DC_MESH_CHUNK_HEADER_SIZE)
/* The largest gradient (and repaired gradient): the biggest model the
 * config allows (width 128, 12 layers) has about 2.4 M parameters, 9.5 MB of
 * f32; 64 MiB leaves room for growth and bounds what a lying peer costs. */
#define DC_MESH_GRADIENT_MAX_TOTAL    (64u * 1024u * 1024u)
/* Weights plus both Adam moments are three times a gradient; the frame
 * limit (256 MiB) already bounds them. */
#define DC_MESH_WEIGHTS_MAX_TOTAL     DC_MESH_MAX_PAYLOAD
/* What a caller that knows the run may raise those caps to
 * (dc_mesh_chunk_decode_capped (), dc_mesh_chunk_assembler_new ()): the
 * training layer's Advanced range ends at the GPT-2-small shape (width 768,
 * 12 layers, 1,024 positions: 86,039,040 parameters), whose whole f32
 * gradient is 328.2 MiB (a shard object adds at most 2 KiB of header and
 * hashes) and whose weights with both Adam moments are 984.6 MiB; 384 MiB
 * and 1 GiB hold those with a little room and nothing more. Objects are
 * chunks of one piece each, so the frame limit does not bound them. */
#define DC_MESH_GRADIENT_CEILING_TOTAL (384u * 1024u * 1024u)
#define DC_MESH_WEIGHTS_CEILING_TOTAL  (1024u * 1024u * 1024u)

/**
 * DcMeshRunConfig:
 * @run_id: 16 random bytes naming the run; every other training message carries them
 * @width: model width
 * @seq: sequence length
 * @batch: sequences per device and step
 * @steps: the run's last step
 * @lr_x1000: learning rate × 1000
 * @n_layer: layers (1 byte on the wire); 0: derived from @width, as the
 *   seeds' sizes are. Only a config of an Advanced size names it, so that
 *   an older build, which reads the byte as reserved, refuses that config
 *   instead of training another model
 * @n_head: attention heads (1 byte); 0: derived from @width
 * @numeric_rule_id: the numeric rules the starter's build follows
 * @run_seed: seeds the weights and every device's data slice
 * @start_step: the step the run begins at (0, or a checkpoint's step)
 * @resume: whether devices start from a checkpoint instead of fresh weights
 * @resume_hash: SHA-256 of that checkpoint's weights (all zero unless @resume)
 * @dataset_spec: the dataset as the starter named it ("" for the built-in corpus)
 * @probe_hash: the starter's probe hash, as in its hello
 * @starter_id: the member id of the device that started the run
 * @gradient_bf16: gradients go on the wire as bfloat16 instead of float32
 *   (flag 0x02; the training layer rounds every device's values the same way)
 * @gradient_int8: gradients go on the wire as blocks of 8-bit values
 *   (flag 0x04, never with 0x02; the training layer's int8 wire)
 * @chunks_zstd: chunk messages of the run may carry their data compressed
 *   with zstd (flag 0x08, since 2026-12-05; dc_mesh_chunk_frames_encode_coded
 *   ()): a build from before refuses the config, so it never receives one
 *
 * The run config the starter sends to the group (type CONFIG). The mesh
 * checks only the shape; the training layer checks the values.
 */
typedef struct
{
  guint8   run_id[DC_MESH_RUN_ID_SIZE];
  guint32  width;
  guint32  seq;
  guint32  batch;
  guint32  steps;
  guint32  lr_x1000;
  guint8   n_layer;
  guint8   n_head;
  guint32  numeric_rule_id;
  guint64  run_seed;
  guint64  start_step;
  gboolean resume;
  guint8   resume_hash[DC_MESH_HASH_SIZE];
  char    *dataset_spec;
  char    *probe_hash;
  char    *starter_id;
  gboolean gradient_bf16;
  gboolean gradient_int8;
  gboolean chunks_zstd;
} DcMeshRunConfig;

DcMeshRunConfig *dc_mesh_run_config_new    (void);
void             dc_mesh_run_config_free   (DcMeshRunConfig        *config);
GBytes          *dc_mesh_run_config_encode (const DcMeshRunConfig  *config,
                                            GError                **error);
DcMeshRunConfig *dc_mesh_run_config_decode (GBytes                 *payload,
                                            GError                **error);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcMeshRunConfig, dc_mesh_run_config_free)

/**
 * DcMeshStepReport:
 * @run_id: the run
 * @step: the step just finished
 * @loss_bits: the loss as IEEE-754 binary32 bits (compared, never computed on)
 * @weights_hash: SHA-256 of the weights after the step
 * @optimizer_hash: SHA-256 of the optimizer state after the step
 * @compute_us: time spent computing the gradient (µs)
 * @send_us: time spent sending it (µs)
 * @wait_us: time spent waiting for the others' gradients (µs)
 * @combine_us: time spent summing and stepping (µs)
 * @roster: (array zero-terminated=1): the member ids of the step, in canonical order
 *
 * Sent by every device after each step (type STEP_REPORT), for the sync guard
 * and the view.
 */
typedef struct
{
  guint8   run_id[DC_MESH_RUN_ID_SIZE];
  guint64  step;
  guint32  loss_bits;
  guint8   weights_hash[DC_MESH_HASH_SIZE];
  guint8   optimizer_hash[DC_MESH_HASH_SIZE];
  guint64  compute_us;
  guint64  send_us;
  guint64  wait_us;
  guint64  combine_us;
  GStrv    roster;
} DcMeshStepReport;

DcMeshStepReport *dc_mesh_step_report_new    (void);
void              dc_mesh_step_report_free   (DcMeshStepReport        *report);
GBytes           *dc_mesh_step_report_encode (const DcMeshStepReport  *report,
                                              GError                 **error);
DcMeshStepReport *dc_mesh_step_report_decode (GBytes                  *payload,
                                              GError                 **error);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcMeshStepReport, dc_mesh_step_report_free)

/**
 * DcMeshRepairRequest:
 *
 * Asks the leader for the roster gradient of @rank at @step (type
 * REPAIR_REQUEST); the answer comes as REPAIR chunks.
 */
typedef struct
{
  guint8  run_id[DC_MESH_RUN_ID_SIZE];
  guint64 step;
  guint32 rank;
} DcMeshRepairRequest;

GBytes   *dc_mesh_repair_request_encode (const DcMeshRepairRequest *request);
gboolean  dc_mesh_repair_request_decode (GBytes                    *payload,
                                         DcMeshRepairRequest       *request,
                                         GError                   **error);

/**
 * DcMeshAudit:
 *
 * The hash an auditor got when it recomputed the gradient of @rank at @step
 * (type AUDIT).
 */
typedef struct
{
  guint8  run_id[DC_MESH_RUN_ID_SIZE];
  guint64 step;
  guint32 rank;
  guint8  gradient_hash[DC_MESH_HASH_SIZE];
} DcMeshAudit;

GBytes   *dc_mesh_audit_encode (const DcMeshAudit *audit);
gboolean  dc_mesh_audit_decode (GBytes            *payload,
                                DcMeshAudit       *audit,
                                GError           **error);

/**
 * DcMeshChunk:
 * @run_id: the run
 * @step: the step of a gradient; the step a weight blob or checkpoint belongs to
 * @rank: whose gradient this is (for REPAIR: the original sender's rank, not
 *   the leader's); for WEIGHTS and CHECKPOINT the sender's rank
 * @index: this chunk's index, < @count
 * @count: the number of chunks, exactly ⌈@total / %DC_MESH_CHUNK_DATA_MAX⌉
 * @total: the size of the whole object in bytes (≥ 1, ≤ the type's cap)
 * @position: the data position of a WEIGHTS or CHECKPOINT blob (tokens read
 *   so far); 0 for GRADIENTS and REPAIR
 * @hash: the object's hash: SHA-256 of its chunks' hashes (@chunk_hash of
 *   chunk 0, 1, …, in order), see dc_mesh_chunk_object_hash(). The last
 *   chunk always carries it; an earlier one carries it or zeros, so that a
 *   sender may send chunks before it has hashed the whole object
 * @chunk_hash: SHA-256 of this chunk's @data; dc_mesh_chunk_encode()
 *   computes it (the caller's value is ignored), dc_mesh_chunk_decode()
 *   refuses a chunk whose data does not match it
 * @data: (nullable): this chunk's bytes: %DC_MESH_CHUNK_DATA_MAX bytes for
 *   every chunk but the last, which holds the rest
 *
 * One chunk of a GRADIENTS, WEIGHTS, CHECKPOINT or REPAIR message.
 */
typedef struct
{
  guint8  run_id[DC_MESH_RUN_ID_SIZE];
  guint64 step;
  guint32 rank;
  guint32 index;
  guint32 count;
  guint64 total;
  guint64 position;
  guint8  hash[DC_MESH_HASH_SIZE];
  guint8  chunk_hash[DC_MESH_HASH_SIZE];
  GBytes *data;
} DcMeshChunk;

void       dc_mesh_chunk_clear  (DcMeshChunk       *chunk);
gboolean   dc_mesh_chunk_decode (guint              type,
                                 GBytes            *payload,
                                 DcMeshChunk       *chunk,
                                 GError           **error);
gboolean   dc_mesh_chunk_decode_capped (guint        type,
                                        GBytes      *payload,
                                        guint64      max_total,
                                        DcMeshChunk *chunk,
                                        GError     **error);
gboolean   dc_mesh_chunk_decode_prehashed (guint         type,
                                           GBytes       *payload,
                                           guint64       max_total,
                                           const guint8 *data_hash,
                                           DcMeshChunk  *chunk,
                                           GError      **error);
gboolean   dc_mesh_chunk_data_hash (guint           type,
                                    GBytes         *payload,
                                    guint8          hash[DC_MESH_HASH_SIZE]);
GBytes    *dc_mesh_chunk_encode (guint              type,
                                 const DcMeshChunk *chunk,
                                 GError           **error);
GPtrArray *dc_mesh_chunks_split (guint              type,
                                 const DcMeshChunk *info,
                                 GBytes            *object,
                                 GError           **error);
guint64    dc_mesh_chunk_max_total (guint           type);
GPtrArray *dc_mesh_chunk_frames_encode (guint      type,
                                       GPtrArray *bodies,
                                       GError   **error);
GPtrArray *dc_mesh_chunk_frames_encode_coded (guint      type,
                                             GPtrArray *bodies,
                                             gboolean   compress,
                                             GError   **error);
GBytes    *dc_mesh_chunk_body_compress (GBytes     *body);
GBytes    *dc_mesh_chunk_expand (guint              type,
                                 GBytes            *payload,
                                 GError           **error);
gboolean   dc_mesh_chunk_is_compressed (guint      type,
                                        GBytes    *payload);
guint64    dc_mesh_chunk_ceiling_total (guint       type);
void       dc_mesh_train_hash   (GBytes            *object,
                                 guint8             hash[DC_MESH_HASH_SIZE]);
void       dc_mesh_chunk_object_hash (GBytes       *object,
                                      guint8        hash[DC_MESH_HASH_SIZE]);

/**
 * DcMeshChunkAssembler:
 *
 * Collects the chunks of one object (one (step, rank) gradient, one weight
 * blob). The first chunk fixes what the object is (run, step, rank, total,
 * count, position, hash); later chunks must agree. Memory grows with the
 * chunks that arrive: at most the declared total (capped) plus 120 bytes of
 * header per chunk, and the total once more while joining at completion.
 */
typedef struct _DcMeshChunkAssembler DcMeshChunkAssembler;

DcMeshChunkAssembler *dc_mesh_chunk_assembler_new          (guint                  type,
                                                            guint64                max_total);
void                  dc_mesh_chunk_assembler_free         (DcMeshChunkAssembler  *self);
gboolean              dc_mesh_chunk_assembler_push         (DcMeshChunkAssembler  *self,
                                                            const DcMeshChunk     *chunk,
                                                            GBytes               **object,
                                                            GError               **error);
guint                 dc_mesh_chunk_assembler_get_received (DcMeshChunkAssembler  *self);
guint                 dc_mesh_chunk_assembler_get_count    (DcMeshChunkAssembler  *self);
gboolean              dc_mesh_chunk_assembler_is_complete  (DcMeshChunkAssembler  *self);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcMeshChunkAssembler, dc_mesh_chunk_assembler_free)

G_END_DECLS
