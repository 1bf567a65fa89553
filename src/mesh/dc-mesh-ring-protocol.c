/* dc-mesh-ring-protocol.c: the inference ring's bodies (see the header).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-mesh"

#include "config.h"

#include "dc-mesh-ring-protocol.h"

#include <string.h>

#include "dc-mesh-bytes-private.h"
#include "dc-mesh-error.h"

/* ---- writing ---------------------------------------------------------- */

static void
w_u8 (GByteArray *b,
      guint8      v)
{
  g_byte_array_append (b, &v, 1);
}

static void
w_u32 (GByteArray *b,
       guint32     v)
{
  guint8 p[4];

  put_u32 (p, v);
  g_byte_array_append (b, p, 4);
}

static void
w_u64 (GByteArray *b,
       guint64     v)
{
  guint8 p[8];

  put_u64 (p, v);
  g_byte_array_append (b, p, 8);
}

static void
w_str (GByteArray *b,
       const char *s)
{
  gsize len = s != NULL ? strlen (s) : 0;
  guint8 p[2];

  put_u16 (p, (guint16) len);
  g_byte_array_append (b, p, 2);
  g_byte_array_append (b, (const guint8 *) (s != NULL ? s : ""), (guint) len);
}

static GByteArray *
w_start (const guint8 *run_id)
{
  GByteArray *b = g_byte_array_new ();

  w_u8 (b, DC_MESH_RING_BODY_VERSION);
  if (run_id != NULL)
    g_byte_array_append (b, run_id, DC_MESH_RING_RUN_ID_SIZE);
  return b;
}

/* ---- reading ---------------------------------------------------------- */

typedef struct
{
  const guint8 *p;
  gsize         left;
  const char   *what;
  GError      **error;
  gboolean      failed;
} Reader;

static gboolean
r_fail (Reader     *r,
        const char *why)
{
  if (!r->failed)
    g_set_error (r->error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED, "%s message: %s", r->what,
                 why);
  r->failed = TRUE;
  return FALSE;
}

static const guint8 *
r_take (Reader *r,
        gsize   n)
{
  const guint8 *p = r->p;

  if (r->failed)
    return NULL;
  if (n > r->left)
    {
      r_fail (r, "truncated");
      return NULL;
    }
  r->p += n;
  r->left -= n;
  return p;
}

static guint8
r_u8 (Reader *r)
{
  const guint8 *p = r_take (r, 1);

  return p != NULL ? p[0] : 0;
}

static guint32
r_u32 (Reader *r)
{
  const guint8 *p = r_take (r, 4);

  return p != NULL ? get_u32 (p) : 0;
}

static guint64
r_u64 (Reader *r)
{
  const guint8 *p = r_take (r, 8);

  return p != NULL ? get_u64 (p) : 0;
}

/* A UTF-8 string without NUL of at most MAX bytes; NULL on failure. */
static char *
r_str (Reader     *r,
       gsize       max,
       const char *field)
{
  const guint8 *lp = r_take (r, 2);
  const guint8 *s;
  gsize len;

  if (lp == NULL)
    return NULL;
  len = get_u16 (lp);
  if (len > max)
    {
      g_autofree char *why = g_strdup_printf ("%s of %" G_GSIZE_FORMAT " bytes exceeds %"
                                              G_GSIZE_FORMAT, field, len, max);

      r_fail (r, why);
      return NULL;
    }
  if ((s = r_take (r, len)) == NULL)
    return NULL;
  if (memchr (s, 0, len) != NULL || !g_utf8_validate ((const char *) s, (gssize) len, NULL))
    {
      g_autofree char *why = g_strdup_printf ("%s is not UTF-8 text", field);

      r_fail (r, why);
      return NULL;
    }
  return g_strndup ((const char *) s, len);
}

static gboolean
r_begin (Reader        *r,
         GBytes        *payload,
         const char    *what,
         guint8        *run_id,
         GError       **error)
{
  gsize size;

  r->p = g_bytes_get_data (payload, &size);
  r->left = size;
  r->what = what;
  r->error = error;
  r->failed = FALSE;
  if (r->left < 1)
    return r_fail (r, "empty");
  if (r->p[0] != DC_MESH_RING_BODY_VERSION)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_UNSUPPORTED,
                   "%s message: body version %u (this build reads %u)", what, r->p[0],
                   DC_MESH_RING_BODY_VERSION);
      r->failed = TRUE;
      return FALSE;
    }
  r_take (r, 1);
  if (run_id != NULL)
    {
      const guint8 *id = r_take (r, DC_MESH_RING_RUN_ID_SIZE);

      if (id == NULL)
        return FALSE;
      memcpy (run_id, id, DC_MESH_RING_RUN_ID_SIZE);
    }
  return TRUE;
}

static gboolean
r_end (Reader *r)
{
  if (r->failed)
    return FALSE;
  if (r->left != 0)
    return r_fail (r, "trailing bytes");
  return TRUE;
}

/* ---- offer ------------------------------------------------------------ */

GBytes *
dc_mesh_ring_offer_encode (const DcMeshRingOffer *offer)
{
  GByteArray *b = w_start (NULL);
  union { double d; guint64 u; } speed = { .d = offer->gmacs };

  w_u64 (b, offer->memory_bytes);
  w_u64 (b, speed.u);
  w_u32 (b, offer->flags);
  return g_byte_array_free_to_bytes (b);
}

gboolean
dc_mesh_ring_offer_decode (GBytes           *payload,
                           DcMeshRingOffer  *offer,
                           GError          **error)
{
  Reader r;
  union { double d; guint64 u; } speed;

  memset (offer, 0, sizeof *offer);
  if (!r_begin (&r, payload, "ring offer", NULL, error))
    return FALSE;
  offer->memory_bytes = r_u64 (&r);
  speed.u = r_u64 (&r);
  offer->gmacs = speed.d;
  offer->flags = r_u32 (&r);
  if (!r_end (&r))
    return FALSE;
  /* A speed that is not a positive finite number would poison the plan. */
  if (!(offer->gmacs > 0.0 && offer->gmacs < 1e9))
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "ring offer message: speed %g is not a positive number", offer->gmacs);
      return FALSE;
    }
  return TRUE;
}

/* ---- assign ----------------------------------------------------------- */

GBytes *
dc_mesh_ring_assign_encode (const DcMeshRingAssign *assign)
{
  GByteArray *b = w_start (assign->run_id);

  w_u32 (b, assign->first);
  w_u32 (b, assign->last);
  w_u32 (b, assign->context);
  w_u32 (b, assign->stage);
  w_u32 (b, assign->n_stages);
  w_str (b, assign->model);
  w_str (b, assign->next);
  return g_byte_array_free_to_bytes (b);
}

gboolean
dc_mesh_ring_assign_decode (GBytes            *payload,
                            DcMeshRingAssign  *assign,
                            GError           **error)
{
  Reader r;

  memset (assign, 0, sizeof *assign);
  if (!r_begin (&r, payload, "ring assign", assign->run_id, error))
    return FALSE;
  assign->first = r_u32 (&r);
  assign->last = r_u32 (&r);
  assign->context = r_u32 (&r);
  assign->stage = r_u32 (&r);
  assign->n_stages = r_u32 (&r);
  assign->model = r_str (&r, DC_MESH_RING_MODEL_MAX, "model id");
  assign->next = r_str (&r, DC_MESH_RING_MEMBER_ID_MAX, "next member id");
  if (!r_end (&r))
    {
      dc_mesh_ring_assign_clear (assign);
      return FALSE;
    }
  if (assign->first > assign->last || assign->stage == 0 || assign->stage >= assign->n_stages)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "ring assign message: layers %u to %u as stage %u of %u make no sense",
                   assign->first, assign->last, assign->stage, assign->n_stages);
      dc_mesh_ring_assign_clear (assign);
      return FALSE;
    }
  return TRUE;
}

void
dc_mesh_ring_assign_clear (DcMeshRingAssign *assign)
{
  g_clear_pointer (&assign->model, g_free);
  g_clear_pointer (&assign->next, g_free);
}

/* ---- ready ------------------------------------------------------------ */

GBytes *
dc_mesh_ring_ready_encode (const DcMeshRingReady *ready)
{
  GByteArray *b = w_start (ready->run_id);
  g_autofree char *message = NULL;

  w_u64 (b, ready->downloaded);
  w_u8 (b, ready->ok ? 1 : 0);
  /* Cut at a character boundary within the limit. */
  if (ready->message != NULL)
    {
      gsize len = MIN (strlen (ready->message), DC_MESH_RING_MESSAGE_MAX);
      const char *end = NULL;

      g_utf8_validate (ready->message, (gssize) len, &end);
      message = g_strndup (ready->message, end - ready->message);
    }
  w_str (b, message);
  return g_byte_array_free_to_bytes (b);
}

gboolean
dc_mesh_ring_ready_decode (GBytes           *payload,
                           DcMeshRingReady  *ready,
                           GError          **error)
{
  Reader r;
  guint8 ok;

  memset (ready, 0, sizeof *ready);
  if (!r_begin (&r, payload, "ring ready", ready->run_id, error))
    return FALSE;
  ready->downloaded = r_u64 (&r);
  ok = r_u8 (&r);
  ready->message = r_str (&r, DC_MESH_RING_MESSAGE_MAX, "message");
  if (!r_end (&r))
    {
      dc_mesh_ring_ready_clear (ready);
      return FALSE;
    }
  if (ok > 1)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "ring ready message: flag %u is neither 0 nor 1", ok);
      dc_mesh_ring_ready_clear (ready);
      return FALSE;
    }
  ready->ok = ok == 1;
  return TRUE;
}

void
dc_mesh_ring_ready_clear (DcMeshRingReady *ready)
{
  g_clear_pointer (&ready->message, g_free);
}

/* ---- hop -------------------------------------------------------------- */

GBytes *
dc_mesh_ring_hop_encode (const DcMeshRingHop *hop)
{
  GByteArray *b = w_start (hop->run_id);
  gsize count = (gsize) hop->n * hop->width;

  g_return_val_if_fail (hop->n <= DC_MESH_RING_MAX_POSITIONS, NULL);
  g_return_val_if_fail (hop->width <= DC_MESH_RING_MAX_WIDTH, NULL);

  w_u32 (b, hop->turn);
  w_u32 (b, hop->position);
  w_u32 (b, hop->n);
  w_u32 (b, hop->width);
  w_str (b, hop->model);
  for (gsize i = 0; i < count; i++)
    {
      union { float f; guint32 u; } v = { .f = hop->data[i] };

      w_u32 (b, v.u);
    }
  return g_byte_array_free_to_bytes (b);
}

gboolean
dc_mesh_ring_hop_decode (GBytes         *payload,
                         DcMeshRingHop  *hop,
                         GError        **error)
{
  Reader r;
  const guint8 *data;
  gsize count;

  memset (hop, 0, sizeof *hop);
  if (!r_begin (&r, payload, "ring hop", hop->run_id, error))
    return FALSE;
  hop->turn = r_u32 (&r);
  hop->position = r_u32 (&r);
  hop->n = r_u32 (&r);
  hop->width = r_u32 (&r);
  hop->model = r_str (&r, DC_MESH_RING_MODEL_MAX, "model id");
  if (r.failed)
    goto fail;
  if (hop->n == 0 || hop->n > DC_MESH_RING_MAX_POSITIONS || hop->width == 0 ||
      hop->width > DC_MESH_RING_MAX_WIDTH)
    {
      g_autofree char *why = g_strdup_printf ("%u positions of %u floats are outside 1–%u "
                                              "and 1–%u", hop->n, hop->width,
                                              DC_MESH_RING_MAX_POSITIONS,
                                              DC_MESH_RING_MAX_WIDTH);

      r_fail (&r, why);
      goto fail;
    }
  /* Checked against the body's size before allocating. */
  count = (gsize) hop->n * hop->width;
  if (r.left != count * 4)
    {
      r_fail (&r, "the activations' size does not match their count");
      goto fail;
    }
  data = r_take (&r, count * 4);
  hop->data = g_new (float, count);
  for (gsize i = 0; i < count; i++)
    {
      union { float f; guint32 u; } v = { .u = get_u32 (data + 4 * i) };

      hop->data[i] = v.f;
    }
  if (!r_end (&r))
    goto fail;
  return TRUE;

fail:
  dc_mesh_ring_hop_clear (hop);
  return FALSE;
}

void
dc_mesh_ring_hop_clear (DcMeshRingHop *hop)
{
  g_clear_pointer (&hop->model, g_free);
  g_clear_pointer (&hop->data, g_free);
}

/* ---- token ------------------------------------------------------------ */

GBytes *
dc_mesh_ring_token_encode (const DcMeshRingToken *token)
{
  GByteArray *b = w_start (token->run_id);

  g_return_val_if_fail (token->text == NULL || strlen (token->text) <= DC_MESH_RING_TEXT_MAX,
                        NULL);

  w_u32 (b, token->turn);
  w_u32 (b, token->index);
  w_u32 (b, token->id);
  w_u8 (b, token->flags);
  w_str (b, token->text);
  return g_byte_array_free_to_bytes (b);
}

gboolean
dc_mesh_ring_token_decode (GBytes           *payload,
                           DcMeshRingToken  *token,
                           GError          **error)
{
  Reader r;

  memset (token, 0, sizeof *token);
  if (!r_begin (&r, payload, "ring token", token->run_id, error))
    return FALSE;
  token->turn = r_u32 (&r);
  token->index = r_u32 (&r);
  token->id = r_u32 (&r);
  token->flags = r_u8 (&r);
  token->text = r_str (&r, DC_MESH_RING_TEXT_MAX, "text");
  if (!r_end (&r))
    {
      dc_mesh_ring_token_clear (token);
      return FALSE;
    }
  if ((token->flags & ~(DC_MESH_RING_TOKEN_END | DC_MESH_RING_TOKEN_CLOSE)) != 0)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "ring token message: unknown flags 0x%x", token->flags);
      dc_mesh_ring_token_clear (token);
      return FALSE;
    }
  return TRUE;
}

void
dc_mesh_ring_token_clear (DcMeshRingToken *token)
{
  g_clear_pointer (&token->text, g_free);
}

/* ---- fetch ------------------------------------------------------------ */

GBytes *
dc_mesh_ring_fetch_encode (const DcMeshRingFetch *fetch)
{
  GByteArray *b;

  g_return_val_if_fail (fetch->file != NULL && strlen (fetch->file) <= DC_MESH_RING_FILE_MAX,
                        NULL);

  b = w_start (fetch->run_id);
  w_u32 (b, fetch->request);
  w_u64 (b, fetch->offset);
  w_u32 (b, fetch->length);
  w_str (b, fetch->file);
  return g_byte_array_free_to_bytes (b);
}

gboolean
dc_mesh_ring_fetch_decode (GBytes           *payload,
                           DcMeshRingFetch  *fetch,
                           GError          **error)
{
  Reader r;

  memset (fetch, 0, sizeof *fetch);
  if (!r_begin (&r, payload, "ring fetch", fetch->run_id, error))
    return FALSE;
  fetch->request = r_u32 (&r);
  fetch->offset = r_u64 (&r);
  fetch->length = r_u32 (&r);
  fetch->file = r_str (&r, DC_MESH_RING_FILE_MAX, "file name");
  if (!r.failed && (fetch->length == 0 || fetch->length > DC_MESH_RING_CHUNK_MAX))
    {
      g_autofree char *why = g_strdup_printf ("%u bytes asked for, outside 1–%u", fetch->length,
                                              DC_MESH_RING_CHUNK_MAX);

      r_fail (&r, why);
    }
  else if (!r.failed && (*fetch->file == '\0' || fetch->offset > G_MAXUINT64 - fetch->length))
    r_fail (&r, "an empty file name or a range past 2⁶⁴");
  if (!r_end (&r))
    {
      dc_mesh_ring_fetch_clear (fetch);
      return FALSE;
    }
  return TRUE;
}

void
dc_mesh_ring_fetch_clear (DcMeshRingFetch *fetch)
{
  g_clear_pointer (&fetch->file, g_free);
}

/* ---- bytes ------------------------------------------------------------ */

GBytes *
dc_mesh_ring_bytes_encode (const DcMeshRingBytes *bytes)
{
  gsize size = bytes->data != NULL ? g_bytes_get_size (bytes->data) : 0;
  GByteArray *b;

  g_return_val_if_fail (bytes->message == NULL ||
                        strlen (bytes->message) <= DC_MESH_RING_MESSAGE_MAX, NULL);
  g_return_val_if_fail (size <= DC_MESH_RING_CHUNK_MAX, NULL);
  g_return_val_if_fail (size == 0 || bytes->message == NULL || *bytes->message == '\0', NULL);

  b = w_start (bytes->run_id);
  w_u32 (b, bytes->request);
  w_u64 (b, bytes->offset);
  g_byte_array_append (b, bytes->sha256, sizeof bytes->sha256);
  w_str (b, bytes->message);
  if (size > 0)
    g_byte_array_append (b, g_bytes_get_data (bytes->data, NULL), (guint) size);
  return g_byte_array_free_to_bytes (b);
}

gboolean
dc_mesh_ring_bytes_decode (GBytes           *payload,
                           DcMeshRingBytes  *bytes,
                           GError          **error)
{
  Reader r;
  const guint8 *sha;

  memset (bytes, 0, sizeof *bytes);
  if (!r_begin (&r, payload, "ring bytes", bytes->run_id, error))
    return FALSE;
  bytes->request = r_u32 (&r);
  bytes->offset = r_u64 (&r);
  sha = r_take (&r, sizeof bytes->sha256);
  if (sha != NULL)
    memcpy (bytes->sha256, sha, sizeof bytes->sha256);
  bytes->message = r_str (&r, DC_MESH_RING_MESSAGE_MAX, "message");
  if (r.failed)
    goto fail;
  if (r.left > DC_MESH_RING_CHUNK_MAX || (r.left > 0 && *bytes->message != '\0'))
    {
      r_fail (&r, "more bytes than one answer carries, or bytes with a refusal");
      goto fail;
    }
  /* The rest of the body is the data: a slice of the payload, no copy. */
  if (r.left > 0)
    {
      gsize size = g_bytes_get_size (payload);

      bytes->data = g_bytes_new_from_bytes (payload, size - r.left, r.left);
      r_take (&r, r.left);
    }
  if (!r_end (&r))
    goto fail;
  return TRUE;

fail:
  dc_mesh_ring_bytes_clear (bytes);
  return FALSE;
}

void
dc_mesh_ring_bytes_clear (DcMeshRingBytes *bytes)
{
  g_clear_pointer (&bytes->message, g_free);
  g_clear_pointer (&bytes->data, g_bytes_unref);
}

/* ---- file fetch ------------------------------------------------------- */

GBytes *
dc_mesh_ring_file_fetch_encode (const DcMeshRingFileFetch *fetch)
{
  GByteArray *b;

  g_return_val_if_fail (fetch->name != NULL && strlen (fetch->name) <= DC_MESH_RING_FILE_MAX,
                        NULL);

  b = w_start (fetch->run_id);
  w_u32 (b, fetch->request);
  w_u8 (b, fetch->kind);
  w_u64 (b, fetch->offset);
  w_u32 (b, fetch->length);
  w_str (b, fetch->name);
  return g_byte_array_free_to_bytes (b);
}

gboolean
dc_mesh_ring_file_fetch_decode (GBytes               *payload,
                                DcMeshRingFileFetch  *fetch,
                                GError              **error)
{
  Reader r;

  memset (fetch, 0, sizeof *fetch);
  if (!r_begin (&r, payload, "ring file fetch", fetch->run_id, error))
    return FALSE;
  fetch->request = r_u32 (&r);
  fetch->kind = r_u8 (&r);
  fetch->offset = r_u64 (&r);
  fetch->length = r_u32 (&r);
  fetch->name = r_str (&r, DC_MESH_RING_FILE_MAX, "file name");
  if (!r.failed && fetch->kind != DC_MESH_RING_FILE_WHOLE &&
      fetch->kind != DC_MESH_RING_FILE_HEADER)
    r_fail (&r, "an unknown kind of file");
  else if (!r.failed && (fetch->length == 0 || fetch->length > DC_MESH_RING_CHUNK_MAX))
    {
      g_autofree char *why = g_strdup_printf ("%u bytes asked for, outside 1–%u", fetch->length,
                                              DC_MESH_RING_CHUNK_MAX);

      r_fail (&r, why);
    }
  else if (!r.failed && (*fetch->name == '\0' || fetch->offset >= DC_MESH_RING_FILE_TOTAL_MAX))
    r_fail (&r, "an empty file name or an offset past the largest file");
  if (!r_end (&r))
    {
      dc_mesh_ring_file_fetch_clear (fetch);
      return FALSE;
    }
  return TRUE;
}

void
dc_mesh_ring_file_fetch_clear (DcMeshRingFileFetch *fetch)
{
  g_clear_pointer (&fetch->name, g_free);
}

/* ---- file ------------------------------------------------------------- */

GBytes *
dc_mesh_ring_file_encode (const DcMeshRingFile *file)
{
  gsize size = file->data != NULL ? g_bytes_get_size (file->data) : 0;
  GByteArray *b;

  g_return_val_if_fail (file->message == NULL ||
                        strlen (file->message) <= DC_MESH_RING_MESSAGE_MAX, NULL);
  g_return_val_if_fail (size <= DC_MESH_RING_CHUNK_MAX, NULL);
  g_return_val_if_fail (size == 0 || file->message == NULL || *file->message == '\0', NULL);

  b = w_start (file->run_id);
  w_u32 (b, file->request);
  w_u64 (b, file->offset);
  w_u64 (b, file->total);
  w_u64 (b, file->file_size);
  g_byte_array_append (b, file->sha256, sizeof file->sha256);
  w_str (b, file->message);
  if (size > 0)
    g_byte_array_append (b, g_bytes_get_data (file->data, NULL), (guint) size);
  return g_byte_array_free_to_bytes (b);
}

gboolean
dc_mesh_ring_file_decode (GBytes          *payload,
                          DcMeshRingFile  *file,
                          GError         **error)
{
  Reader r;
  const guint8 *sha;

  memset (file, 0, sizeof *file);
  if (!r_begin (&r, payload, "ring file", file->run_id, error))
    return FALSE;
  file->request = r_u32 (&r);
  file->offset = r_u64 (&r);
  file->total = r_u64 (&r);
  file->file_size = r_u64 (&r);
  sha = r_take (&r, sizeof file->sha256);
  if (sha != NULL)
    memcpy (file->sha256, sha, sizeof file->sha256);
  file->message = r_str (&r, DC_MESH_RING_MESSAGE_MAX, "message");
  if (r.failed)
    goto fail;
  if (r.left > DC_MESH_RING_CHUNK_MAX || (r.left > 0 && *file->message != '\0'))
    {
      r_fail (&r, "more bytes than one answer carries, or bytes with a refusal");
      goto fail;
    }
  if (file->total > DC_MESH_RING_FILE_TOTAL_MAX || file->offset > file->total ||
      r.left > file->total - file->offset)
    {
      r_fail (&r, "bytes outside the file's size, or a file past the largest one asked for");
      goto fail;
    }
  /* The rest of the body is the data: a slice of the payload, no copy. */
  if (r.left > 0)
    {
      gsize size = g_bytes_get_size (payload);

      file->data = g_bytes_new_from_bytes (payload, size - r.left, r.left);
      r_take (&r, r.left);
    }
  if (!r_end (&r))
    goto fail;
  return TRUE;

fail:
  dc_mesh_ring_file_clear (file);
  return FALSE;
}

void
dc_mesh_ring_file_clear (DcMeshRingFile *file)
{
  g_clear_pointer (&file->message, g_free);
  g_clear_pointer (&file->data, g_bytes_unref);
}
