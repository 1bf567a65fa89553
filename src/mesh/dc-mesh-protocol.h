/* dc-mesh-protocol.h: the binary wire protocol between peers (docs/PROTOCOL.md).
 *
 * A message is a 16-byte little-endian header followed by its payload. On a
 * data channel it travels as one or more pieces of at most
 * DC_MESH_PIECE_SIZE bytes: the first piece starts with the header, the rest
 * continue the payload. The channel is reliable and ordered and one sender
 * never interleaves two messages, so pieces need no header of their own.
 *
 * Everything here is plain data and thread-agnostic.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define DC_MESH_PROTOCOL_MAGIC    0x504d4344u  /* "DCMP" as bytes on the wire */
#define DC_MESH_PROTOCOL_VERSION  1
#define DC_MESH_HEADER_SIZE       16
/* webrtcbin announces no a=max-message-size, so 64 KiB is the most one
 * data-channel message may carry (docs/PROTOCOL.md). */
#define DC_MESH_PIECE_SIZE        65536
/* The largest payload any message may declare: a full weight sync of the
 * biggest model the training issue plans for fits, a lying header does not
 * make us allocate more than this (and allocation grows with arriving data). */
#define DC_MESH_MAX_PAYLOAD       (256u * 1024u * 1024u)

/**
 * DcMeshMessageType:
 *
 * Message types; the numbers are part of protocol version 1 and never change.
 */
typedef enum
{
  DC_MESH_MSG_HELLO        = 1,   /* DcMeshHello, first message on a channel */
  DC_MESH_MSG_HEARTBEAT    = 2,   /* u64 sequence, u64 sender monotonic µs */
  DC_MESH_MSG_PING         = 3,   /* same body as heartbeat; answered by PONG */
  DC_MESH_MSG_PONG         = 4,   /* echoes the PING body */
  DC_MESH_MSG_BYE          = 5,   /* empty: the sender leaves on purpose */
  DC_MESH_MSG_DATA         = 6,   /* opaque bytes (tests, benchmarks) */
  DC_MESH_MSG_CONFIG       = 7,   /* DcMeshRunConfig (dc-mesh-train-protocol.h) */
  DC_MESH_MSG_STEP_REPORT  = 8,   /* DcMeshStepReport (dc-mesh-train-protocol.h) */
  DC_MESH_MSG_GRADIENTS    = 9,   /* DcMeshChunk of a gradient */
  DC_MESH_MSG_WEIGHTS      = 10,  /* DcMeshChunk of a weight + optimizer-state blob */
  DC_MESH_MSG_CHECKPOINT   = 11,  /* DcMeshChunk of a loaded checkpoint's blob */
  DC_MESH_MSG_ACTIVATIONS  = 12,  /* DcMeshBulkHeader + activation bytes (ring) */
  DC_MESH_MSG_CREDIT       = 13,  /* u64: bytes of pieces received on the channel */
  DC_MESH_MSG_REPAIR_REQUEST = 14, /* DcMeshRepairRequest: ask the leader for a gradient */
  DC_MESH_MSG_REPAIR       = 15,  /* DcMeshChunk of a roster gradient, from the leader */
  DC_MESH_MSG_AUDIT        = 16,  /* DcMeshAudit: a recomputed gradient's hash */
  /* The inference ring (dc-mesh-ring-protocol.h). */
  DC_MESH_MSG_RING_OFFER   = 17,  /* DcMeshRingOffer: a stage's memory and speed */
  DC_MESH_MSG_RING_ASSIGN  = 18,  /* DcMeshRingAssign: the head gives a stage its layers */
  DC_MESH_MSG_RING_READY   = 19,  /* DcMeshRingReady: a stage loaded them, or why not */
  DC_MESH_MSG_RING_HOP     = 20,  /* DcMeshRingHop: activations to the next stage */
  DC_MESH_MSG_RING_TOKEN   = 21,  /* DcMeshRingToken: a token, streamed to every stage */
  DC_MESH_MSG_RING_FETCH   = 22,  /* DcMeshRingFetch: a stage asks the head for weight bytes */
  DC_MESH_MSG_RING_BYTES   = 23,  /* DcMeshRingBytes: the head's bytes, or why not */
  /* An auditor asks an author for its contribution to a shard (the body
   * is the training layer's, src/train/dc-train-wire.h). */
  DC_MESH_MSG_CONTRIB_REQUEST = 24, /* 44 bytes: "your contribution to shard a of step S" */
  /* The ring again: what a stage needs besides weights, so it needs no Hub. */
  DC_MESH_MSG_RING_FILE_FETCH = 25, /* DcMeshRingFileFetch: a stage asks for a model file */
  DC_MESH_MSG_RING_FILE    = 26,  /* DcMeshRingFile: the head's bytes of it, or why not */
  /* A new connection replacing a slow one (DcMesh's renewal, docs/PROTOCOL.md). */
  DC_MESH_MSG_SWITCH       = 27,  /* u64 generation: the last message on the old connection */
  DC_MESH_MSG_SWITCHED     = 28,  /* u64 generation: the old connection's switch was read */
  DC_MESH_MSG_LAST         = DC_MESH_MSG_SWITCHED,
} DcMeshMessageType;

const char *dc_mesh_message_type_to_string (guint type);

/* Limits of the typed bodies. */
#define DC_MESH_HELLO_MAX_STRING   255
/* The hello's optional last field: u64 bytes of memory available for
 * training. Refused above 1 PiB: far beyond any one device (the largest
 * servers hold tens of TiB), so a larger value is garbage or a lie, and
 * sums of 64 such values cannot overflow 64 bits. */
#define DC_MESH_HELLO_MEMORY_SIZE  8
#define DC_MESH_HELLO_MEMORY_MAX   (G_GUINT64_CONSTANT (1) << 50)
#define DC_MESH_HEARTBEAT_SIZE     16
#define DC_MESH_BULK_HEADER_SIZE   32
#define DC_MESH_CREDIT_SIZE        8
#define DC_MESH_SWITCH_SIZE        8

/**
 * DcMeshMessage:
 * @type: a #DcMeshMessageType
 * @payload: the payload after the header (never %NULL; may be empty)
 */
typedef struct
{
  guint   type;
  GBytes *payload;
} DcMeshMessage;

DcMeshMessage *dc_mesh_message_new   (guint          type,
                                      GBytes        *payload);
void           dc_mesh_message_free  (DcMeshMessage *message);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcMeshMessage, dc_mesh_message_free)

gboolean   dc_mesh_message_check_payload (guint           type,
                                          gsize           size,
                                          GError        **error);
GPtrArray *dc_mesh_message_encode_pieces (guint           type,
                                          GBytes         *payload,
                                          GError        **error);
gboolean   dc_mesh_message_verify        (const DcMeshMessage *message,
                                          guint32         checksum,
                                          GError        **error);

/**
 * DcMeshReader:
 *
 * Reassembles messages from the pieces of one data channel. Any error leaves
 * the reader ready for the next message header, so a caller can count faults
 * and decide when to drop the sender.
 */
typedef struct _DcMeshReader DcMeshReader;

DcMeshReader  *dc_mesh_reader_new    (void);
void           dc_mesh_reader_free   (DcMeshReader  *reader);
DcMeshMessage *dc_mesh_reader_push   (DcMeshReader  *reader,
                                      const guint8  *piece,
                                      gsize          size,
                                      GError       **error);
DcMeshMessage *dc_mesh_reader_push_unchecked (DcMeshReader  *reader,
                                              const guint8  *piece,
                                              gsize          size,
                                              guint32       *checksum,
                                              GError       **error);
gboolean       dc_mesh_reader_is_idle (DcMeshReader *reader);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcMeshReader, dc_mesh_reader_free)

/**
 * DcMeshHello:
 * @name: the device's display name (UTF-8)
 * @backend: where its matrix products run ("vulkan", "cpu", …)
 * @probe_hash: hex hash of the engine's probe results
 * @numeric_rule_id: which numeric rules the build follows; peers must agree
 * @memory: bytes of memory the device has available for training (at most
 *   %DC_MESH_HELLO_MEMORY_MAX); 0: not announced (an older build, or a
 *   device that does not train), which a group reads as "the seeds' sizes
 *   only"
 *
 * The engine supplies @backend, @probe_hash and @numeric_rule_id, the
 * training layer @memory; the mesh only carries them.
 */
typedef struct
{
  char    *name;
  char    *backend;
  char    *probe_hash;
  guint32  numeric_rule_id;
  guint64  memory;
} DcMeshHello;

DcMeshHello *dc_mesh_hello_new    (const char   *name,
                                   const char   *backend,
                                   const char   *probe_hash,
                                   guint32       numeric_rule_id);
DcMeshHello *dc_mesh_hello_copy   (const DcMeshHello *hello);
void         dc_mesh_hello_free   (DcMeshHello  *hello);
GBytes      *dc_mesh_hello_encode (const DcMeshHello *hello);
DcMeshHello *dc_mesh_hello_decode (GBytes       *payload,
                                   GError      **error);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcMeshHello, dc_mesh_hello_free)

/* The training bodies (config, step report, chunks, repair, audit) are in
 * dc-mesh-train-protocol.h. */

/**
 * DcMeshBulkHeader:
 * @step: the training step, or the request id for activations
 * @offset: where this message's data starts in the whole object (bytes)
 * @total: the size of the whole object (bytes)
 * @index: shard, layer or tensor index, by message type
 * @flags: reserved, 0 in version 1
 *
 * The first 32 bytes of activation payloads, so that an object larger than
 * one message travels as several.
 */
typedef struct
{
  guint64 step;
  guint64 offset;
  guint64 total;
  guint32 index;
  guint32 flags;
} DcMeshBulkHeader;

GBytes   *dc_mesh_bulk_encode        (const DcMeshBulkHeader *header,
                                      const guint8           *data,
                                      gsize                   size);
gboolean  dc_mesh_bulk_decode        (GBytes                 *payload,
                                      DcMeshBulkHeader       *header,
                                      GBytes                **data,
                                      GError                **error);

/* The heartbeat body, also PING's and PONG's: a sequence number and the
 * sender's monotonic µs. */
GBytes   *dc_mesh_heartbeat_encode   (guint64                 seq,
                                      gint64                  sent_us);
gboolean  dc_mesh_heartbeat_decode   (GBytes                 *payload,
                                      guint64                *seq,
                                      gint64                 *sent_us,
                                      GError                **error);

/* The body of SWITCH and SWITCHED: the new connection's generation (2 for
 * the first renewal of a pair; 0 is refused). */
GBytes   *dc_mesh_switch_encode      (guint64                 generation);
gboolean  dc_mesh_switch_decode      (GBytes                 *payload,
                                      guint64                *generation,
                                      GError                **error);

/* The credit body: bytes of pieces received on the channel so far. */
GBytes   *dc_mesh_credit_encode      (guint64                 received);
gboolean  dc_mesh_credit_decode      (GBytes                 *payload,
                                      guint64                *received,
                                      GError                **error);

G_END_DECLS
