/* fuzz-mesh-protocol.c: libFuzzer target for the peer wire decoder.
 *
 * The input is split into pieces by a leading length byte pair per piece, so
 * the fuzzer explores reassembly across pieces as well as single frames; every
 * complete message is then handed to the typed body decoders, and every
 * decoded chunk to one assembler per chunked type, so duplicates, strangers,
 * completion and the hash check are explored too. A chunk is decoded as it
 * came (the fuzzer rarely writes a matching SHA-256, so this explores the
 * per-chunk hash's refusal) and once more with its own hash recomputed over
 * its data, so that what lies past that check is explored as well. Chunk
 * data in zstd (header byte 1 = 1, since 2026-12-05) is expanded, bounded,
 * and decoded past the hash too; a raw chunk compressed here expands to
 * itself.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>

#include "mesh/dc-mesh-protocol.h"
#include "mesh/dc-mesh-train-protocol.h"

int LLVMFuzzerTestOneInput (const guint8 *data, gsize size);

/* One assembler per chunked type for the whole input. */
typedef struct
{
  DcMeshChunkAssembler *assemblers[4];
} FuzzState;

static DcMeshChunkAssembler *
assembler_for (FuzzState *state,
               guint      type)
{
  guint slot = type == DC_MESH_MSG_GRADIENTS ? 0 : type == DC_MESH_MSG_WEIGHTS ? 1
               : type == DC_MESH_MSG_CHECKPOINT ? 2 : 3;

  if (state->assemblers[slot] == NULL)
    state->assemblers[slot] = dc_mesh_chunk_assembler_new (type, 0);
  return state->assemblers[slot];
}

static void
decode_chunk (FuzzState *state,
              guint      type,
              GBytes    *payload)
{
  g_autoptr(GError) error = NULL;
  DcMeshChunk chunk;

  if (dc_mesh_chunk_decode (type, payload, &chunk, &error))
    {
      g_autoptr(GBytes) object = NULL;
      DcMeshChunkAssembler *assembler = assembler_for (state, type);
      guint8 hash[DC_MESH_HASH_SIZE];

      g_assert (chunk.index < chunk.count);
      /* Accepted only with its data matching its own hash. */
      dc_mesh_train_hash (chunk.data, hash);
      g_assert (memcmp (hash, chunk.chunk_hash, DC_MESH_HASH_SIZE) == 0);
      dc_mesh_chunk_assembler_push (assembler, &chunk, &object, NULL);
      g_assert (object == NULL || g_bytes_get_size (object) == chunk.total);
      dc_mesh_chunk_clear (&chunk);
    }
  /* With the cap raised as far as a caller may: never past the ceiling. */
  if (dc_mesh_chunk_decode_capped (type, payload, G_MAXUINT64, &chunk, NULL))
    {
      g_assert (chunk.total <= dc_mesh_chunk_ceiling_total (type));
      dc_mesh_chunk_clear (&chunk);
    }
}

/* @payload with bytes 88–119 (the chunk's own hash) set to the SHA-256 of
 * what follows them, or NULL when it is too short to have them. */
static GBytes *
chunk_rehashed (GBytes *payload)
{
  gsize size;
  const guint8 *p = g_bytes_get_data (payload, &size);
  g_autoptr(GBytes) data = NULL;
  guint8 *copy;

  if (size < DC_MESH_CHUNK_HEADER_SIZE)
    return NULL;
  copy = g_memdup2 (p, size);
  data = g_bytes_new_static (copy + DC_MESH_CHUNK_HEADER_SIZE, size - DC_MESH_CHUNK_HEADER_SIZE);
  dc_mesh_train_hash (data, copy + DC_MESH_CHUNK_HEADER_SIZE - DC_MESH_HASH_SIZE);
  return g_bytes_new_take (copy, size);
}

static void
decode_body (FuzzState     *state,
             DcMeshMessage *message)
{
  g_autoptr(GError) error = NULL;

  switch (message->type)
    {
    case DC_MESH_MSG_HELLO:
      {
        g_autoptr(DcMeshHello) hello = dc_mesh_hello_decode (message->payload, &error);

        g_assert (hello == NULL || hello->name != NULL);
        /* The optional memory: absent (0) or 1 byte to 1 PiB. */
        g_assert (hello == NULL || hello->memory <= DC_MESH_HELLO_MEMORY_MAX);
      }
      break;
    case DC_MESH_MSG_CONFIG:
      {
        g_autoptr(DcMeshRunConfig) config = dc_mesh_run_config_decode (message->payload, &error);

        g_assert (config == NULL || config->starter_id[0] != '\0');
        g_assert ((config == NULL) == (error != NULL));
      }
      break;
    case DC_MESH_MSG_STEP_REPORT:
      {
        g_autoptr(DcMeshStepReport) report = dc_mesh_step_report_decode (message->payload,
                                                                         &error);

        g_assert (report == NULL
                  || (report->roster != NULL
                      && g_strv_length (report->roster) <= DC_MESH_ROSTER_MAX));
        g_assert ((report == NULL) == (error != NULL));
      }
      break;
    case DC_MESH_MSG_REPAIR_REQUEST:
      {
        DcMeshRepairRequest request;

        dc_mesh_repair_request_decode (message->payload, &request, &error);
      }
      break;
    case DC_MESH_MSG_AUDIT:
      {
        DcMeshAudit audit;

        dc_mesh_audit_decode (message->payload, &audit, &error);
      }
      break;
    case DC_MESH_MSG_GRADIENTS:
    case DC_MESH_MSG_WEIGHTS:
    case DC_MESH_MSG_CHECKPOINT:
    case DC_MESH_MSG_REPAIR:
      {
        g_autoptr(GBytes) rehashed = chunk_rehashed (message->payload);
        g_autoptr(GError) expand_error = NULL;
        g_autoptr(GBytes) expanded = dc_mesh_chunk_expand (message->type, message->payload,
                                                            &expand_error);

        decode_chunk (state, message->type, message->payload);
        if (rehashed != NULL)
          decode_chunk (state, message->type, rehashed);
        /* zstd-coded data (header byte 1 = 1): expanded to at most a
         * chunk's worth, or refused with a reason; then past the hash. */
        g_assert ((expanded == NULL) == (expand_error != NULL));
        if (expanded != NULL && expanded != message->payload)
          {
            g_autoptr(GBytes) expanded_rehashed = chunk_rehashed (expanded);

            g_assert (g_bytes_get_size (expanded)
                      <= DC_MESH_CHUNK_HEADER_SIZE + DC_MESH_CHUNK_DATA_MAX);
            g_assert (!dc_mesh_chunk_is_compressed (message->type, expanded));
            if (expanded_rehashed != NULL)
              decode_chunk (state, message->type, expanded_rehashed);
          }
        /* A raw chunk compressed here expands to itself. */
        if (rehashed != NULL && !dc_mesh_chunk_is_compressed (message->type, rehashed))
          {
            g_autoptr(GBytes) packed = dc_mesh_chunk_body_compress (rehashed);

            if (packed != rehashed)
              {
                g_autoptr(GError) again_error = NULL;
                g_autoptr(GBytes) again = dc_mesh_chunk_expand (message->type, packed,
                                                               &again_error);

                /* Only a chunk whose header is consistent expands. */
                g_assert (again == NULL || g_bytes_equal (again, rehashed));
              }
          }
      }
      break;
    case DC_MESH_MSG_HEARTBEAT:
    case DC_MESH_MSG_PING:
    case DC_MESH_MSG_PONG:
      {
        guint64 seq;
        gint64 sent_us;

        dc_mesh_heartbeat_decode (message->payload, &seq, &sent_us, &error);
      }
      break;
    case DC_MESH_MSG_SWITCH:
    case DC_MESH_MSG_SWITCHED:
      {
        guint64 generation;

        dc_mesh_switch_decode (message->payload, &generation, &error);
      }
      break;
    case DC_MESH_MSG_ACTIVATIONS:
      {
        DcMeshBulkHeader header;
        GBytes *bytes = NULL;

        if (dc_mesh_bulk_decode (message->payload, &header, &bytes, &error))
          g_bytes_unref (bytes);
      }
      break;
    default:
      break;
    }
}

int
LLVMFuzzerTestOneInput (const guint8 *data,
                        gsize         size)
{
  g_autoptr(DcMeshReader) reader = dc_mesh_reader_new ();
  g_autoptr(DcMeshReader) unchecked = dc_mesh_reader_new ();
  FuzzState state = { { NULL } };

  while (size >= 2)
    {
      gsize n = MIN ((gsize) (data[0] | (data[1] << 8)) + 1, size - 2);
      g_autoptr(GError) error = NULL;
      g_autoptr(DcMeshMessage) message = NULL;
      g_autoptr(DcMeshMessage) later = NULL;
      guint32 checksum = 0;

      message = dc_mesh_reader_push (reader, data + 2, n, &error);
      /* DcPeer's way (checks on a worker): the same messages, once
       * verified, with the same chunk verdict from a hash taken apart. */
      later = dc_mesh_reader_push_unchecked (unchecked, data + 2, n, &checksum, NULL);
      if (later != NULL && !dc_mesh_message_verify (later, checksum, NULL))
        g_clear_pointer (&later, dc_mesh_message_free);
      g_assert ((message == NULL) == (later == NULL));
      if (later != NULL)
        {
          guint8 hash[DC_MESH_HASH_SIZE];
          DcMeshChunk a, b;
          gboolean hashed = dc_mesh_chunk_data_hash (later->type, later->payload, hash);
          gboolean ok_a = dc_mesh_chunk_decode_capped (later->type, later->payload, 0, &a, NULL);
          gboolean ok_b = dc_mesh_chunk_decode_prehashed (later->type, later->payload, 0,
                                                          hashed ? hash : NULL, &b, NULL);

          g_assert (g_bytes_equal (message->payload, later->payload));
          g_assert (ok_a == ok_b);
          if (ok_a)
            dc_mesh_chunk_clear (&a);
          if (ok_b)
            dc_mesh_chunk_clear (&b);
        }
      if (message != NULL)
        decode_body (&state, message);
      data += 2 + n;
      size -= 2 + n;
    }
  for (guint i = 0; i < G_N_ELEMENTS (state.assemblers); i++)
    dc_mesh_chunk_assembler_free (state.assemblers[i]);
  return 0;
}
