/* dc-mesh-protocol.c: framing, reassembly and typed bodies of the peer protocol.
 *
 * Every byte handled here comes from another device and is untrusted: each
 * size is checked against a limit before anything is allocated, and memory for
 * a long message grows with the data that actually arrives, so a header that
 * lies about its length costs at most one piece of memory.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-mesh"

#include "config.h"

#include "dc-mesh-protocol.h"

#include <string.h>
#include <zlib.h>

#include "dc-mesh-bytes-private.h"
#include "dc-mesh-error.h"
#include "dc-mesh-ring-protocol.h"
#include "dc-mesh-train-protocol.h"

/* The first allocation for a message; it doubles as data arrives. */
#define INITIAL_RESERVE (1024u * 1024u)

const char *
dc_mesh_message_type_to_string (guint type)
{
  switch (type)
    {
    case DC_MESH_MSG_HELLO: return "hello";
    case DC_MESH_MSG_HEARTBEAT: return "heartbeat";
    case DC_MESH_MSG_PING: return "ping";
    case DC_MESH_MSG_PONG: return "pong";
    case DC_MESH_MSG_BYE: return "bye";
    case DC_MESH_MSG_DATA: return "data";
    case DC_MESH_MSG_CONFIG: return "config";
    case DC_MESH_MSG_STEP_REPORT: return "step-report";
    case DC_MESH_MSG_GRADIENTS: return "gradients";
    case DC_MESH_MSG_WEIGHTS: return "weights";
    case DC_MESH_MSG_CHECKPOINT: return "checkpoint";
    case DC_MESH_MSG_ACTIVATIONS: return "activations";
    case DC_MESH_MSG_CREDIT: return "credit";
    case DC_MESH_MSG_REPAIR_REQUEST: return "repair-request";
    case DC_MESH_MSG_REPAIR: return "repair";
    case DC_MESH_MSG_AUDIT: return "audit";
    case DC_MESH_MSG_CONTRIB_REQUEST: return "contribution-request";
    case DC_MESH_MSG_RING_OFFER: return "ring-offer";
    case DC_MESH_MSG_RING_ASSIGN: return "ring-assign";
    case DC_MESH_MSG_RING_READY: return "ring-ready";
    case DC_MESH_MSG_RING_HOP: return "ring-hop";
    case DC_MESH_MSG_RING_TOKEN: return "ring-token";
    case DC_MESH_MSG_RING_FETCH: return "ring-fetch";
    case DC_MESH_MSG_RING_BYTES: return "ring-bytes";
    case DC_MESH_MSG_RING_FILE_FETCH: return "ring-file-fetch";
    case DC_MESH_MSG_RING_FILE: return "ring-file";
    case DC_MESH_MSG_SWITCH: return "switch";
    case DC_MESH_MSG_SWITCHED: return "switched";
    default: return "unknown";
    }
}

/* CRC-32 (zlib's, IEEE polynomial) over header bytes 0..11, then the payload. */
static guint32
frame_checksum (const guint8 *header,
                const guint8 *payload,
                gsize         size)
{
  uLong crc = crc32 (0L, Z_NULL, 0);

  crc = crc32 (crc, header, 12);
  /* zlib takes uInt lengths; feed large payloads in slices. */
  while (size > 0)
    {
      uInt n = (uInt) MIN (size, (gsize) G_MAXINT32);

      crc = crc32 (crc, payload, n);
      payload += n;
      size -= n;
    }
  return (guint32) crc;
}

/* The frame header's first 12 bytes, which the checksum covers: fully
 * determined by the type and the payload's size, since a reader refuses any
 * other magic, version or flags. */
static void
frame_head (guint8  head[12],
            guint   type,
            guint32 size)
{
  put_u32 (head, DC_MESH_PROTOCOL_MAGIC);
  head[4] = DC_MESH_PROTOCOL_VERSION;
  head[5] = (guint8) type;
  head[6] = head[7] = 0;
  put_u32 (head + 8, size);
}

DcMeshMessage *
dc_mesh_message_new (guint   type,
                     GBytes *payload)
{
  DcMeshMessage *message = g_new0 (DcMeshMessage, 1);

  message->type = type;
  message->payload = payload != NULL ? g_bytes_ref (payload) : g_bytes_new (NULL, 0);
  return message;
}

void
dc_mesh_message_free (DcMeshMessage *message)
{
  if (message == NULL)
    return;
  g_clear_pointer (&message->payload, g_bytes_unref);
  g_free (message);
}

/**
 * dc_mesh_message_check_payload:
 *
 * Checks a declared payload size against the limits of its type, before any
 * memory is reserved for it.
 */
gboolean
dc_mesh_message_check_payload (guint    type,
                               gsize    size,
                               GError **error)
{
  gsize min = 0, max = DC_MESH_MAX_PAYLOAD;

  switch (type)
    {
    case DC_MESH_MSG_HELLO:
      min = 7;
      max = 7 + 3 * DC_MESH_HELLO_MAX_STRING + DC_MESH_HELLO_MEMORY_SIZE;
      break;
    case DC_MESH_MSG_HEARTBEAT:
    case DC_MESH_MSG_PING:
    case DC_MESH_MSG_PONG:
      min = max = DC_MESH_HEARTBEAT_SIZE;
      break;
    case DC_MESH_MSG_BYE:
      min = max = 0;
      break;
    case DC_MESH_MSG_DATA:
      break;
    case DC_MESH_MSG_CONFIG:
      min = DC_MESH_CONFIG_FIXED_SIZE + 6;
      max = DC_MESH_CONFIG_MAX_SIZE;
      break;
    case DC_MESH_MSG_STEP_REPORT:
      min = DC_MESH_STEP_REPORT_FIXED_SIZE;
      max = DC_MESH_STEP_REPORT_MAX_SIZE;
      break;
    case DC_MESH_MSG_REPAIR_REQUEST:
      min = max = DC_MESH_REPAIR_REQUEST_SIZE;
      break;
    case DC_MESH_MSG_AUDIT:
      min = max = DC_MESH_AUDIT_SIZE;
      break;
    case DC_MESH_MSG_CONTRIB_REQUEST:
      min = max = DC_MESH_CONTRIB_REQUEST_SIZE;
      break;
    case DC_MESH_MSG_CREDIT:
      min = max = DC_MESH_CREDIT_SIZE;
      break;
    case DC_MESH_MSG_SWITCH:
    case DC_MESH_MSG_SWITCHED:
      min = max = DC_MESH_SWITCH_SIZE;
      break;
    case DC_MESH_MSG_GRADIENTS:
    case DC_MESH_MSG_WEIGHTS:
    case DC_MESH_MSG_CHECKPOINT:
    case DC_MESH_MSG_REPAIR:
      /* A chunk always fits one piece, so it never delays other messages. */
      min = DC_MESH_CHUNK_HEADER_SIZE + 1;
      max = DC_MESH_CHUNK_HEADER_SIZE + DC_MESH_CHUNK_DATA_MAX;
      break;
    case DC_MESH_MSG_ACTIVATIONS:
      min = DC_MESH_BULK_HEADER_SIZE;
      break;
    case DC_MESH_MSG_RING_OFFER:
      min = max = DC_MESH_RING_OFFER_SIZE;
      break;
    case DC_MESH_MSG_RING_ASSIGN:
      min = DC_MESH_RING_ASSIGN_FIXED;
      max = DC_MESH_RING_ASSIGN_MAX;
      break;
    case DC_MESH_MSG_RING_READY:
      min = DC_MESH_RING_READY_FIXED;
      max = DC_MESH_RING_READY_MAX;
      break;
    case DC_MESH_MSG_RING_HOP:
      min = DC_MESH_RING_HOP_FIXED + 4;
      max = DC_MESH_RING_HOP_MAX;
      break;
    case DC_MESH_MSG_RING_TOKEN:
      min = DC_MESH_RING_TOKEN_FIXED;
      max = DC_MESH_RING_TOKEN_MAX;
      break;
    case DC_MESH_MSG_RING_FETCH:
      min = DC_MESH_RING_FETCH_FIXED + 1;
      max = DC_MESH_RING_FETCH_MAX;
      break;
    case DC_MESH_MSG_RING_BYTES:
      min = DC_MESH_RING_BYTES_FIXED;
      max = DC_MESH_RING_BYTES_MAX;
      break;
    case DC_MESH_MSG_RING_FILE_FETCH:
      min = DC_MESH_RING_FILE_FETCH_FIXED + 1;
      max = DC_MESH_RING_FILE_FETCH_MAX;
      break;
    case DC_MESH_MSG_RING_FILE:
      min = DC_MESH_RING_FILE_FIXED;
      max = DC_MESH_RING_FILE_BODY_MAX;
      break;
    default:
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "unknown message type %u", type);
      return FALSE;
    }

  if (size > max)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_TOO_LARGE,
                   "%s message of %" G_GSIZE_FORMAT " bytes exceeds its limit of %"
                   G_GSIZE_FORMAT, dc_mesh_message_type_to_string (type), size, max);
      return FALSE;
    }
  if (size < min)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "%s message of %" G_GSIZE_FORMAT " bytes is shorter than %" G_GSIZE_FORMAT,
                   dc_mesh_message_type_to_string (type), size, min);
      return FALSE;
    }
  return TRUE;
}

/**
 * dc_mesh_message_encode_pieces:
 * @payload: (nullable): the payload
 *
 * Frames a message and cuts it into data-channel pieces of at most
 * %DC_MESH_PIECE_SIZE bytes. Pieces after the first share @payload's memory.
 *
 * Returns: (transfer full) (element-type GBytes): the pieces, in order
 */
GPtrArray *
dc_mesh_message_encode_pieces (guint    type,
                               GBytes  *payload,
                               GError **error)
{
  g_autoptr(GPtrArray) pieces = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  const guint8 *data = NULL;
  gsize size = 0, first, offset;
  guint8 *head;

  if (payload != NULL)
    data = g_bytes_get_data (payload, &size);
  if (!dc_mesh_message_check_payload (type, size, error))
    return NULL;

  first = MIN (size, (gsize) DC_MESH_PIECE_SIZE - DC_MESH_HEADER_SIZE);
  head = g_malloc (DC_MESH_HEADER_SIZE + first);
  frame_head (head, type, (guint32) size);
  put_u32 (head + 12, frame_checksum (head, data, size));
  if (first > 0)
    memcpy (head + DC_MESH_HEADER_SIZE, data, first);
  g_ptr_array_add (pieces, g_bytes_new_take (head, DC_MESH_HEADER_SIZE + first));

  for (offset = first; offset < size; offset += DC_MESH_PIECE_SIZE)
    g_ptr_array_add (pieces, g_bytes_new_from_bytes (payload, offset,
                                                     MIN ((gsize) DC_MESH_PIECE_SIZE,
                                                          size - offset)));
  return g_steal_pointer (&pieces);
}

struct _DcMeshReader
{
  /* The message being reassembled; NULL while waiting for a header. */
  GByteArray *buffer;
  guint8      header[DC_MESH_HEADER_SIZE];
  guint       type;
  gsize       expected;
};

DcMeshReader *
dc_mesh_reader_new (void)
{
  return g_new0 (DcMeshReader, 1);
}

void
dc_mesh_reader_free (DcMeshReader *reader)
{
  if (reader == NULL)
    return;
  g_clear_pointer (&reader->buffer, g_byte_array_unref);
  g_free (reader);
}

gboolean
dc_mesh_reader_is_idle (DcMeshReader *reader)
{
  return reader->buffer == NULL;
}

static gboolean
check_frame (guint          type,
             const guint8  *payload,
             gsize          size,
             guint32        want,
             GError       **error)
{
  guint8 head[12];
  guint32 got;

  frame_head (head, type, (guint32) size);
  got = frame_checksum (head, payload, size);
  if (want != got)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "%s message of %" G_GSIZE_FORMAT " bytes fails its checksum (0x%08x, "
                   "expected 0x%08x)", dc_mesh_message_type_to_string (type), size, got, want);
      return FALSE;
    }
  return TRUE;
}

/**
 * dc_mesh_message_verify:
 * @checksum: the frame's checksum, from dc_mesh_reader_push_unchecked ()
 *
 * The frame check dc_mesh_reader_push () makes, for a message read without
 * it. Any thread: it only reads @message.
 */
gboolean
dc_mesh_message_verify (const DcMeshMessage  *message,
                        guint32               checksum,
                        GError              **error)
{
  gsize size;
  const guint8 *data = g_bytes_get_data (message->payload, &size);

  g_return_val_if_fail (message != NULL, FALSE);
  return check_frame (message->type, data, size, checksum, error);
}

static DcMeshMessage *
finish_message (DcMeshReader  *reader,
                guint32       *checksum,
                GError       **error)
{
  g_autoptr(GByteArray) buffer = g_steal_pointer (&reader->buffer);
  guint32 want = get_u32 (reader->header + 12);
  g_autoptr(GBytes) payload = NULL;

  if (checksum != NULL)
    *checksum = want;
  else if (!check_frame (reader->type, buffer->data, buffer->len, want, error))
    return NULL;
  payload = g_byte_array_free_to_bytes (g_steal_pointer (&buffer));
  return dc_mesh_message_new (reader->type, payload);
}

static DcMeshMessage *reader_push (DcMeshReader *reader, const guint8 *piece, gsize size,
                                   guint32 *checksum, GError **error);

/**
 * dc_mesh_reader_push:
 * @piece: one data-channel message as received
 *
 * Feeds one piece. Returns the message it completes, or %NULL: with @error
 * set when the piece broke the protocol (the partial message is dropped and
 * the next piece must start a new message), without it when more pieces are
 * needed.
 *
 * Returns: (transfer full) (nullable): a complete, checked message
 */
DcMeshMessage *
dc_mesh_reader_push (DcMeshReader  *reader,
                     const guint8  *piece,
                     gsize          size,
                     GError       **error)
{
  return reader_push (reader, piece, size, NULL, error);
}

/**
 * dc_mesh_reader_push_unchecked:
 * @checksum: (out): the frame's checksum, set when a message is returned
 *
 * dc_mesh_reader_push () without the frame checksum (a CRC-32 over the whole
 * payload), which the caller makes with dc_mesh_message_verify () before it
 * uses the message, on whichever thread it likes. Every other check (magic,
 * version, flags, sizes, the type's limits) is made here.
 *
 * Returns: (transfer full) (nullable): a complete message, not yet verified
 */
DcMeshMessage *
dc_mesh_reader_push_unchecked (DcMeshReader  *reader,
                               const guint8  *piece,
                               gsize          size,
                               guint32       *checksum,
                               GError       **error)
{
  g_return_val_if_fail (checksum != NULL, NULL);
  return reader_push (reader, piece, size, checksum, error);
}

static DcMeshMessage *
reader_push (DcMeshReader  *reader,
             const guint8  *piece,
             gsize          size,
             guint32       *checksum,
             GError       **error)
{
  gsize take;

  g_return_val_if_fail (reader != NULL, NULL);
  g_return_val_if_fail (piece != NULL || size == 0, NULL);

  if (size > DC_MESH_PIECE_SIZE)
    {
      g_clear_pointer (&reader->buffer, g_byte_array_unref);
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_TOO_LARGE,
                   "piece of %" G_GSIZE_FORMAT " bytes exceeds %u", size, DC_MESH_PIECE_SIZE);
      return NULL;
    }

  if (reader->buffer == NULL)
    {
      guint32 length;

      if (size < DC_MESH_HEADER_SIZE)
        {
          g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                       "truncated header: %" G_GSIZE_FORMAT " of %d bytes",
                       size, DC_MESH_HEADER_SIZE);
          return NULL;
        }
      if (get_u32 (piece) != DC_MESH_PROTOCOL_MAGIC)
        {
          g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                       "wrong magic 0x%08x", get_u32 (piece));
          return NULL;
        }
      if (piece[4] != DC_MESH_PROTOCOL_VERSION)
        {
          g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_UNSUPPORTED,
                       "protocol version %u, this build speaks %u",
                       piece[4], DC_MESH_PROTOCOL_VERSION);
          return NULL;
        }
      if (piece[6] != 0 || piece[7] != 0)
        {
          g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                       "reserved flags 0x%02x%02x are not zero", piece[7], piece[6]);
          return NULL;
        }
      length = get_u32 (piece + 8);
      if (!dc_mesh_message_check_payload (piece[5], length, error))
        return NULL;
      if (size - DC_MESH_HEADER_SIZE > length)
        {
          g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                       "first piece carries %" G_GSIZE_FORMAT " bytes for a %u-byte payload",
                       size - DC_MESH_HEADER_SIZE, length);
          return NULL;
        }
      if (length > DC_MESH_PIECE_SIZE - DC_MESH_HEADER_SIZE
          && size != DC_MESH_PIECE_SIZE)
        {
          /* Senders fill every piece but the last; anything else is a
           * truncated or foreign stream. */
          g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                       "short first piece (%" G_GSIZE_FORMAT " bytes) of a %u-byte message",
                       size, length);
          return NULL;
        }

      memcpy (reader->header, piece, DC_MESH_HEADER_SIZE);
      reader->type = piece[5];
      reader->expected = length;
      reader->buffer = g_byte_array_sized_new (MIN (length, INITIAL_RESERVE));
      piece += DC_MESH_HEADER_SIZE;
      size -= DC_MESH_HEADER_SIZE;
    }
  else if (size == 0 || size > reader->expected - reader->buffer->len)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "piece of %" G_GSIZE_FORMAT " bytes does not fit the %" G_GSIZE_FORMAT
                   " bytes still expected", size, reader->expected - reader->buffer->len);
      g_clear_pointer (&reader->buffer, g_byte_array_unref);
      return NULL;
    }
  else if (size != DC_MESH_PIECE_SIZE && size != reader->expected - reader->buffer->len)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "short middle piece of %" G_GSIZE_FORMAT " bytes", size);
      g_clear_pointer (&reader->buffer, g_byte_array_unref);
      return NULL;
    }

  take = size;
  g_byte_array_append (reader->buffer, piece, take);
  if (reader->buffer->len == reader->expected)
    return finish_message (reader, checksum, error);
  return NULL;
}

DcMeshHello *
dc_mesh_hello_new (const char *name,
                   const char *backend,
                   const char *probe_hash,
                   guint32     numeric_rule_id)
{
  DcMeshHello *hello = g_new0 (DcMeshHello, 1);

  hello->name = g_strdup (name != NULL ? name : "");
  hello->backend = g_strdup (backend != NULL ? backend : "");
  hello->probe_hash = g_strdup (probe_hash != NULL ? probe_hash : "");
  hello->numeric_rule_id = numeric_rule_id;
  return hello;
}

/**
 * dc_mesh_hello_copy:
 *
 * Returns: (transfer full): a copy of @hello, every field included
 */
DcMeshHello *
dc_mesh_hello_copy (const DcMeshHello *hello)
{
  DcMeshHello *copy = dc_mesh_hello_new (hello->name, hello->backend, hello->probe_hash,
                                         hello->numeric_rule_id);

  copy->memory = hello->memory;
  return copy;
}

void
dc_mesh_hello_free (DcMeshHello *hello)
{
  if (hello == NULL)
    return;
  g_free (hello->name);
  g_free (hello->backend);
  g_free (hello->probe_hash);
  g_free (hello);
}

static void
append_string (GByteArray *out,
               const char *text)
{
  /* Longer strings are cut at a character boundary so the decoder's UTF-8
   * check still passes. */
  gsize len = strlen (text);
  guint8 n;

  if (len > DC_MESH_HELLO_MAX_STRING)
    {
      const char *end = g_utf8_find_prev_char (text, text + DC_MESH_HELLO_MAX_STRING + 1);

      len = end != NULL ? (gsize) (end - text) : 0;
    }
  n = (guint8) len;
  g_byte_array_append (out, &n, 1);
  g_byte_array_append (out, (const guint8 *) text, len);
}

/**
 * dc_mesh_hello_encode:
 *
 * Layout: u32 numeric_rule_id, then name, backend and probe_hash, each as a
 * u8 length and that many UTF-8 bytes, then, only when @hello->memory is
 * not 0, the memory as a u64 (a device that announces none sends the hello
 * older builds read). A memory over %DC_MESH_HELLO_MEMORY_MAX is sent as
 * that maximum.
 */
GBytes *
dc_mesh_hello_encode (const DcMeshHello *hello)
{
  GByteArray *out = g_byte_array_new ();
  guint8 id[4];

  put_u32 (id, hello->numeric_rule_id);
  g_byte_array_append (out, id, 4);
  append_string (out, hello->name);
  append_string (out, hello->backend);
  append_string (out, hello->probe_hash);
  if (hello->memory > 0)
    {
      guint8 memory[DC_MESH_HELLO_MEMORY_SIZE];

      put_u64 (memory, MIN (hello->memory, DC_MESH_HELLO_MEMORY_MAX));
      g_byte_array_append (out, memory, sizeof memory);
    }
  return g_byte_array_free_to_bytes (out);
}

static char *
read_string (const guint8  *data,
             gsize          size,
             gsize         *offset,
             const char    *what,
             GError       **error)
{
  gsize n;

  if (*offset >= size)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "hello ends before its %s", what);
      return NULL;
    }
  n = data[*offset];
  *offset += 1;
  if (n > size - *offset)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "hello %s of %" G_GSIZE_FORMAT " bytes overruns the message", what, n);
      return NULL;
    }
  if (!g_utf8_validate_len ((const char *) data + *offset, n, NULL)
      || memchr (data + *offset, '\0', n) != NULL)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "hello %s is not valid UTF-8 text", what);
      return NULL;
    }
  *offset += n;
  return g_strndup ((const char *) data + *offset - n, n);
}

DcMeshHello *
dc_mesh_hello_decode (GBytes  *payload,
                      GError **error)
{
  g_autoptr(DcMeshHello) hello = g_new0 (DcMeshHello, 1);
  gsize size, offset = 4;
  const guint8 *data = g_bytes_get_data (payload, &size);

  if (!dc_mesh_message_check_payload (DC_MESH_MSG_HELLO, size, error))
    return NULL;
  hello->numeric_rule_id = get_u32 (data);
  if ((hello->name = read_string (data, size, &offset, "name", error)) == NULL
      || (hello->backend = read_string (data, size, &offset, "backend", error)) == NULL
      || (hello->probe_hash = read_string (data, size, &offset, "probe hash", error)) == NULL)
    return NULL;
  /* The memory is optional: older builds end after the probe hash. */
  if (size - offset == DC_MESH_HELLO_MEMORY_SIZE)
    {
      hello->memory = get_u64 (data + offset);
      offset += DC_MESH_HELLO_MEMORY_SIZE;
      if (hello->memory == 0 || hello->memory > DC_MESH_HELLO_MEMORY_MAX)
        {
          g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                       "hello announces %" G_GUINT64_FORMAT " bytes of memory (1 byte to "
                       "%" G_GUINT64_FORMAT ")", hello->memory, DC_MESH_HELLO_MEMORY_MAX);
          return NULL;
        }
    }
  if (offset != size)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "hello has %" G_GSIZE_FORMAT " trailing bytes", size - offset);
      return NULL;
    }
  return g_steal_pointer (&hello);
}

GBytes *
dc_mesh_bulk_encode (const DcMeshBulkHeader *header,
                     const guint8           *data,
                     gsize                   size)
{
  guint8 *out = g_malloc (DC_MESH_BULK_HEADER_SIZE + size);

  put_u64 (out, header->step);
  put_u64 (out + 8, header->offset);
  put_u64 (out + 16, header->total);
  put_u32 (out + 24, header->index);
  put_u32 (out + 28, header->flags);
  if (size > 0)
    memcpy (out + DC_MESH_BULK_HEADER_SIZE, data, size);
  return g_bytes_new_take (out, DC_MESH_BULK_HEADER_SIZE + size);
}

/**
 * dc_mesh_bulk_decode:
 * @data: (out) (transfer full): the bytes after the bulk header
 *
 * Checks that the data lies inside the declared object
 * (offset + size ≤ total, without overflow) and that flags are zero.
 */
gboolean
dc_mesh_bulk_decode (GBytes            *payload,
                     DcMeshBulkHeader  *header,
                     GBytes           **data,
                     GError           **error)
{
  gsize size;
  const guint8 *p = g_bytes_get_data (payload, &size);
  guint64 n;

  if (size < DC_MESH_BULK_HEADER_SIZE)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "bulk message of %" G_GSIZE_FORMAT " bytes is shorter than its header",
                   size);
      return FALSE;
    }
  header->step = get_u64 (p);
  header->offset = get_u64 (p + 8);
  header->total = get_u64 (p + 16);
  header->index = get_u32 (p + 24);
  header->flags = get_u32 (p + 28);
  n = size - DC_MESH_BULK_HEADER_SIZE;
  if (header->flags != 0)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "bulk flags 0x%08x are not zero", header->flags);
      return FALSE;
    }
  if (header->offset > header->total || n > header->total - header->offset)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "bulk data [%" G_GUINT64_FORMAT ", +%" G_GUINT64_FORMAT ") lies outside "
                   "its object of %" G_GUINT64_FORMAT " bytes",
                   header->offset, n, header->total);
      return FALSE;
    }
  *data = g_bytes_new_from_bytes (payload, DC_MESH_BULK_HEADER_SIZE, n);
  return TRUE;
}

GBytes *
dc_mesh_heartbeat_encode (guint64 seq,
                          gint64  sent_us)
{
  guint8 *out = g_malloc (DC_MESH_HEARTBEAT_SIZE);

  put_u64 (out, seq);
  put_u64 (out + 8, (guint64) sent_us);
  return g_bytes_new_take (out, DC_MESH_HEARTBEAT_SIZE);
}

gboolean
dc_mesh_heartbeat_decode (GBytes   *payload,
                          guint64  *seq,
                          gint64   *sent_us,
                          GError  **error)
{
  gsize size;
  const guint8 *p = g_bytes_get_data (payload, &size);

  if (!dc_mesh_message_check_payload (DC_MESH_MSG_HEARTBEAT, size, error))
    return FALSE;
  *seq = get_u64 (p);
  *sent_us = (gint64) get_u64 (p + 8);
  return TRUE;
}

GBytes *
dc_mesh_credit_encode (guint64 received)
{
  guint8 *out = g_malloc (DC_MESH_CREDIT_SIZE);

  put_u64 (out, received);
  return g_bytes_new_take (out, DC_MESH_CREDIT_SIZE);
}

gboolean
dc_mesh_credit_decode (GBytes   *payload,
                       guint64  *received,
                       GError  **error)
{
  gsize size;
  const guint8 *p = g_bytes_get_data (payload, &size);

  if (!dc_mesh_message_check_payload (DC_MESH_MSG_CREDIT, size, error))
    return FALSE;
  *received = get_u64 (p);
  return TRUE;
}

GBytes *
dc_mesh_switch_encode (guint64 generation)
{
  guint8 *out = g_malloc (DC_MESH_SWITCH_SIZE);

  put_u64 (out, generation);
  return g_bytes_new_take (out, DC_MESH_SWITCH_SIZE);
}

gboolean
dc_mesh_switch_decode (GBytes   *payload,
                       guint64  *generation,
                       GError  **error)
{
  gsize size;
  const guint8 *p = g_bytes_get_data (payload, &size);

  /* SWITCHED has the same size rule. */
  if (!dc_mesh_message_check_payload (DC_MESH_MSG_SWITCH, size, error))
    return FALSE;
  *generation = get_u64 (p);
  if (*generation < 2)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "switch to generation %" G_GUINT64_FORMAT ": the first renewal is 2",
                   *generation);
      return FALSE;
    }
  return TRUE;
}
