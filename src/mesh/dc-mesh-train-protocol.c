/* dc-mesh-train-protocol.c: encoders and strict decoders of the training bodies.
 *
 * Every body comes from another device and is untrusted. A decoder checks
 * the body version, then every length and count against its limit before it
 * copies anything, refuses reserved bits and trailing bytes, and allocates
 * only what the checked sizes allow. Layouts: docs/PROTOCOL.md.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-mesh"

#include "config.h"

#include "dc-mesh-train-protocol.h"

#include <string.h>
#include <zstd.h>

#include "dc-mesh-bytes-private.h"
#include "dc-mesh-error.h"
#include "dc-sha256.h"

static gboolean
all_zero (const guint8 *p,
          gsize         n)
{
  for (gsize i = 0; i < n; i++)
    if (p[i] != 0)
      return FALSE;
  return TRUE;
}

/* The first four bytes of every training body: u8 body version, then
 * reserved bytes [@reserved_from, @reserved_to) that must be zero (the
 * config's flags, layers and heads and the step report's roster count use
 * the others). */
static gboolean
check_body_start (guint          type,
                  const guint8  *p,
                  gsize          size,
                  gsize          reserved_from,
                  gsize          reserved_to,
                  GError       **error)
{
  const char *what = dc_mesh_message_type_to_string (type);

  if (!dc_mesh_message_check_payload (type, size, error))
    return FALSE;
  if (p[0] != DC_MESH_TRAIN_BODY_VERSION)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_UNSUPPORTED,
                   "%s body version %u, this build speaks %u",
                   what, p[0], DC_MESH_TRAIN_BODY_VERSION);
      return FALSE;
    }
  if (!all_zero (p + reserved_from, reserved_to - reserved_from))
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "%s body has reserved bytes that are not zero", what);
      return FALSE;
    }
  return TRUE;
}

/* Whether @text of @len bytes is UTF-8 without NUL; @what names it in errors. */
static gboolean
check_text (guint        type,
            const char  *text,
            gsize        len,
            const char  *what,
            GError     **error)
{
  if (!g_utf8_validate_len (text, len, NULL) || memchr (text, '\0', len) != NULL)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "%s %s is not valid UTF-8 text", dc_mesh_message_type_to_string (type), what);
      return FALSE;
    }
  return TRUE;
}

/* Encoders refuse what the decoder would refuse, so a bug on our side shows
 * up on the sender with a clear message instead of as a peer fault. */
static gboolean
check_out_string (guint        type,
                  const char  *text,
                  gsize        max,
                  gboolean     may_be_empty,
                  const char  *what,
                  GError     **error)
{
  gsize len = text != NULL ? strlen (text) : 0;

  if (len > max)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_TOO_LARGE,
                   "%s %s of %" G_GSIZE_FORMAT " bytes exceeds %" G_GSIZE_FORMAT,
                   dc_mesh_message_type_to_string (type), what, len, max);
      return FALSE;
    }
  if (len == 0 && !may_be_empty)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "%s %s is empty", dc_mesh_message_type_to_string (type), what);
      return FALSE;
    }
  return text == NULL || check_text (type, text, len, what, error);
}

/* Reads a string with a u16 (wide) or u8 length prefix at *offset. */
static char *
read_string (guint          type,
             const guint8  *data,
             gsize          size,
             gsize         *offset,
             gboolean       wide,
             gsize          max,
             gboolean       may_be_empty,
             const char    *what,
             GError       **error)
{
  gsize prefix = wide ? 2 : 1, n;
  const char *name = dc_mesh_message_type_to_string (type);

  if (size - *offset < prefix)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "%s ends before its %s", name, what);
      return NULL;
    }
  n = wide ? get_u16 (data + *offset) : data[*offset];
  *offset += prefix;
  if (n > max)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_TOO_LARGE,
                   "%s %s of %" G_GSIZE_FORMAT " bytes exceeds %" G_GSIZE_FORMAT,
                   name, what, n, max);
      return NULL;
    }
  if (n == 0 && !may_be_empty)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED, "%s %s is empty", name, what);
      return NULL;
    }
  if (n > size - *offset)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "%s %s of %" G_GSIZE_FORMAT " bytes overruns the message", name, what, n);
      return NULL;
    }
  if (!check_text (type, (const char *) data + *offset, n, what, error))
    return NULL;
  *offset += n;
  return g_strndup ((const char *) data + *offset - n, n);
}

static void
append_string (GByteArray *out,
               const char *text,
               gboolean    wide)
{
  gsize len = text != NULL ? strlen (text) : 0;
  guint8 prefix[2];

  if (wide)
    put_u16 (prefix, (guint16) len);
  else
    prefix[0] = (guint8) len;
  g_byte_array_append (out, prefix, wide ? 2 : 1);
  if (len > 0)
    g_byte_array_append (out, (const guint8 *) text, len);
}

static gboolean
check_trailing (guint    type,
                gsize    offset,
                gsize    size,
                GError **error)
{
  if (offset != size)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "%s has %" G_GSIZE_FORMAT " trailing bytes",
                   dc_mesh_message_type_to_string (type), size - offset);
      return FALSE;
    }
  return TRUE;
}

/* Run config. */

#define CONFIG_FLAG_RESUME 0x01
#define CONFIG_FLAG_GRADIENT_BF16 0x02
#define CONFIG_FLAG_GRADIENT_INT8 0x04
#define CONFIG_FLAG_CHUNKS_ZSTD 0x08

DcMeshRunConfig *
dc_mesh_run_config_new (void)
{
  return g_new0 (DcMeshRunConfig, 1);
}

void
dc_mesh_run_config_free (DcMeshRunConfig *config)
{
  if (config == NULL)
    return;
  g_free (config->dataset_spec);
  g_free (config->probe_hash);
  g_free (config->starter_id);
  g_free (config);
}

/**
 * dc_mesh_run_config_encode:
 *
 * Returns: (transfer full) (nullable): the CONFIG body, or %NULL when a
 *   string is too long or not text, or the config is inconsistent
 */
GBytes *
dc_mesh_run_config_encode (const DcMeshRunConfig  *config,
                           GError                **error)
{
  g_autoptr(GByteArray) out = NULL;
  guint8 fixed[DC_MESH_CONFIG_FIXED_SIZE] = { 0 };

  g_return_val_if_fail (config != NULL, NULL);

  if (!check_out_string (DC_MESH_MSG_CONFIG, config->dataset_spec, DC_MESH_DATASET_SPEC_MAX,
                         TRUE, "dataset spec", error)
      || !check_out_string (DC_MESH_MSG_CONFIG, config->probe_hash, DC_MESH_PROBE_HASH_MAX,
                            TRUE, "probe hash", error)
      || !check_out_string (DC_MESH_MSG_CONFIG, config->starter_id, DC_MESH_MEMBER_ID_MAX,
                            FALSE, "starter id", error))
    return NULL;
  if (config->start_step > config->steps
      || (!config->resume && !all_zero (config->resume_hash, DC_MESH_HASH_SIZE)))
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "config is inconsistent (start step past the last step, or a resume "
                   "hash without resume)");
      return NULL;
    }

  fixed[0] = DC_MESH_TRAIN_BODY_VERSION;
  fixed[1] = (config->resume ? CONFIG_FLAG_RESUME : 0)
             | (config->gradient_bf16 ? CONFIG_FLAG_GRADIENT_BF16 : 0)
             | (config->gradient_int8 ? CONFIG_FLAG_GRADIENT_INT8 : 0)
             | (config->chunks_zstd ? CONFIG_FLAG_CHUNKS_ZSTD : 0);
  fixed[2] = config->n_layer;
  fixed[3] = config->n_head;
  memcpy (fixed + 4, config->run_id, DC_MESH_RUN_ID_SIZE);
  put_u32 (fixed + 20, config->width);
  put_u32 (fixed + 24, config->seq);
  put_u32 (fixed + 28, config->batch);
  put_u32 (fixed + 32, config->steps);
  put_u32 (fixed + 36, config->lr_x1000);
  put_u32 (fixed + 40, config->numeric_rule_id);
  put_u64 (fixed + 44, config->run_seed);
  put_u64 (fixed + 52, config->start_step);
  memcpy (fixed + 60, config->resume_hash, DC_MESH_HASH_SIZE);

  out = g_byte_array_sized_new (DC_MESH_CONFIG_MAX_SIZE);
  g_byte_array_append (out, fixed, sizeof fixed);
  append_string (out, config->dataset_spec, TRUE);
  append_string (out, config->probe_hash, TRUE);
  append_string (out, config->starter_id, TRUE);
  return g_byte_array_free_to_bytes (g_steal_pointer (&out));
}

/**
 * dc_mesh_run_config_decode:
 *
 * Returns: (transfer full) (nullable): the config, or %NULL with @error set
 */
DcMeshRunConfig *
dc_mesh_run_config_decode (GBytes  *payload,
                           GError **error)
{
  g_autoptr(DcMeshRunConfig) config = dc_mesh_run_config_new ();
  gsize size, offset = DC_MESH_CONFIG_FIXED_SIZE;
  const guint8 *p = g_bytes_get_data (payload, &size);

  /* Bytes 2 and 3 were reserved before they named layers and heads. */
  if (!check_body_start (DC_MESH_MSG_CONFIG, p, size, 4, 4, error))
    return NULL;
  if ((p[1] & ~(CONFIG_FLAG_RESUME | CONFIG_FLAG_GRADIENT_BF16 | CONFIG_FLAG_GRADIENT_INT8
                | CONFIG_FLAG_CHUNKS_ZSTD)) != 0)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "config flags 0x%02x has unknown bits", p[1]);
      return NULL;
    }
  if ((p[1] & CONFIG_FLAG_GRADIENT_BF16) != 0 && (p[1] & CONFIG_FLAG_GRADIENT_INT8) != 0)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "config flags 0x%02x name two gradient wires (bf16 and int8)", p[1]);
      return NULL;
    }
  config->resume = (p[1] & CONFIG_FLAG_RESUME) != 0;
  config->n_layer = p[2];
  config->n_head = p[3];
  config->gradient_bf16 = (p[1] & CONFIG_FLAG_GRADIENT_BF16) != 0;
  config->gradient_int8 = (p[1] & CONFIG_FLAG_GRADIENT_INT8) != 0;
  config->chunks_zstd = (p[1] & CONFIG_FLAG_CHUNKS_ZSTD) != 0;
  memcpy (config->run_id, p + 4, DC_MESH_RUN_ID_SIZE);
  config->width = get_u32 (p + 20);
  config->seq = get_u32 (p + 24);
  config->batch = get_u32 (p + 28);
  config->steps = get_u32 (p + 32);
  config->lr_x1000 = get_u32 (p + 36);
  config->numeric_rule_id = get_u32 (p + 40);
  config->run_seed = get_u64 (p + 44);
  config->start_step = get_u64 (p + 52);
  memcpy (config->resume_hash, p + 60, DC_MESH_HASH_SIZE);
  if (config->start_step > config->steps)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "config start step %" G_GUINT64_FORMAT " is past its last step %u",
                   config->start_step, config->steps);
      return NULL;
    }
  if (!config->resume && !all_zero (config->resume_hash, DC_MESH_HASH_SIZE))
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "config carries a resume hash without the resume flag");
      return NULL;
    }

  if ((config->dataset_spec = read_string (DC_MESH_MSG_CONFIG, p, size, &offset, TRUE,
                                           DC_MESH_DATASET_SPEC_MAX, TRUE,
                                           "dataset spec", error)) == NULL
      || (config->probe_hash = read_string (DC_MESH_MSG_CONFIG, p, size, &offset, TRUE,
                                            DC_MESH_PROBE_HASH_MAX, TRUE,
                                            "probe hash", error)) == NULL
      || (config->starter_id = read_string (DC_MESH_MSG_CONFIG, p, size, &offset, TRUE,
                                            DC_MESH_MEMBER_ID_MAX, FALSE,
                                            "starter id", error)) == NULL
      || !check_trailing (DC_MESH_MSG_CONFIG, offset, size, error))
    return NULL;
  return g_steal_pointer (&config);
}

/* Step report. */

DcMeshStepReport *
dc_mesh_step_report_new (void)
{
  return g_new0 (DcMeshStepReport, 1);
}

void
dc_mesh_step_report_free (DcMeshStepReport *report)
{
  if (report == NULL)
    return;
  g_strfreev (report->roster);
  g_free (report);
}

static gboolean
roster_has_duplicate (GStrv roster,
                      guint n)
{
  g_autoptr(GHashTable) seen = g_hash_table_new (g_str_hash, g_str_equal);

  for (guint i = 0; i < n; i++)
    if (!g_hash_table_add (seen, roster[i]))
      return TRUE;
  return FALSE;
}

/**
 * dc_mesh_step_report_encode:
 *
 * Returns: (transfer full) (nullable): the STEP_REPORT body, or %NULL when
 *   the roster is empty, too long, or holds a bad or repeated id
 */
GBytes *
dc_mesh_step_report_encode (const DcMeshStepReport  *report,
                            GError                 **error)
{
  g_autoptr(GByteArray) out = NULL;
  guint8 fixed[DC_MESH_STEP_REPORT_FIXED_SIZE] = { 0 };
  guint n = report->roster != NULL ? g_strv_length (report->roster) : 0;

  if (n == 0 || n > DC_MESH_ROSTER_MAX)
    {
      g_set_error (error, DC_MESH_ERROR, n == 0 ? DC_MESH_ERROR_MALFORMED : DC_MESH_ERROR_TOO_LARGE,
                   "step report roster of %u members is outside 1–%u", n, DC_MESH_ROSTER_MAX);
      return NULL;
    }
  for (guint i = 0; i < n; i++)
    if (!check_out_string (DC_MESH_MSG_STEP_REPORT, report->roster[i], DC_MESH_MEMBER_ID_MAX,
                           FALSE, "roster id", error))
      return NULL;
  if (roster_has_duplicate (report->roster, n))
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "step report roster names a member twice");
      return NULL;
    }

  fixed[0] = DC_MESH_TRAIN_BODY_VERSION;
  put_u16 (fixed + 2, (guint16) n);
  put_u32 (fixed + 4, report->loss_bits);
  memcpy (fixed + 8, report->run_id, DC_MESH_RUN_ID_SIZE);
  put_u64 (fixed + 24, report->step);
  memcpy (fixed + 32, report->weights_hash, DC_MESH_HASH_SIZE);
  memcpy (fixed + 64, report->optimizer_hash, DC_MESH_HASH_SIZE);
  put_u64 (fixed + 96, report->compute_us);
  put_u64 (fixed + 104, report->send_us);
  put_u64 (fixed + 112, report->wait_us);
  put_u64 (fixed + 120, report->combine_us);

  out = g_byte_array_sized_new (DC_MESH_STEP_REPORT_MAX_SIZE);
  g_byte_array_append (out, fixed, sizeof fixed);
  for (guint i = 0; i < n; i++)
    append_string (out, report->roster[i], FALSE);
  return g_byte_array_free_to_bytes (g_steal_pointer (&out));
}

/**
 * dc_mesh_step_report_decode:
 *
 * Returns: (transfer full) (nullable): the report, or %NULL with @error set
 */
DcMeshStepReport *
dc_mesh_step_report_decode (GBytes  *payload,
                            GError **error)
{
  g_autoptr(DcMeshStepReport) report = dc_mesh_step_report_new ();
  gsize size, offset = DC_MESH_STEP_REPORT_FIXED_SIZE;
  const guint8 *p = g_bytes_get_data (payload, &size);
  guint n;

  if (!check_body_start (DC_MESH_MSG_STEP_REPORT, p, size, 1, 2, error))
    return NULL;
  n = get_u16 (p + 2);
  if (n == 0 || n > DC_MESH_ROSTER_MAX)
    {
      g_set_error (error, DC_MESH_ERROR, n == 0 ? DC_MESH_ERROR_MALFORMED : DC_MESH_ERROR_TOO_LARGE,
                   "step report roster of %u members is outside 1–%u", n, DC_MESH_ROSTER_MAX);
      return NULL;
    }
  /* Each id takes at least two bytes; a count the body cannot hold is
   * refused before the array is allocated. */
  if ((gsize) n * 2 > size - offset)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "step report of %" G_GSIZE_FORMAT " bytes cannot hold %u roster ids",
                   size, n);
      return NULL;
    }
  report->loss_bits = get_u32 (p + 4);
  memcpy (report->run_id, p + 8, DC_MESH_RUN_ID_SIZE);
  report->step = get_u64 (p + 24);
  memcpy (report->weights_hash, p + 32, DC_MESH_HASH_SIZE);
  memcpy (report->optimizer_hash, p + 64, DC_MESH_HASH_SIZE);
  report->compute_us = get_u64 (p + 96);
  report->send_us = get_u64 (p + 104);
  report->wait_us = get_u64 (p + 112);
  report->combine_us = get_u64 (p + 120);

  report->roster = g_new0 (char *, n + 1);
  for (guint i = 0; i < n; i++)
    if ((report->roster[i] = read_string (DC_MESH_MSG_STEP_REPORT, p, size, &offset, FALSE,
                                          DC_MESH_MEMBER_ID_MAX, FALSE,
                                          "roster id", error)) == NULL)
      return NULL;
  if (!check_trailing (DC_MESH_MSG_STEP_REPORT, offset, size, error))
    return NULL;
  if (roster_has_duplicate (report->roster, n))
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "step report roster names a member twice");
      return NULL;
    }
  return g_steal_pointer (&report);
}

/* Repair request and audit: fixed sizes. */

GBytes *
dc_mesh_repair_request_encode (const DcMeshRepairRequest *request)
{
  guint8 *out = g_malloc0 (DC_MESH_REPAIR_REQUEST_SIZE);

  out[0] = DC_MESH_TRAIN_BODY_VERSION;
  memcpy (out + 4, request->run_id, DC_MESH_RUN_ID_SIZE);
  put_u64 (out + 20, request->step);
  put_u32 (out + 28, request->rank);
  return g_bytes_new_take (out, DC_MESH_REPAIR_REQUEST_SIZE);
}

gboolean
dc_mesh_repair_request_decode (GBytes               *payload,
                               DcMeshRepairRequest  *request,
                               GError              **error)
{
  gsize size;
  const guint8 *p = g_bytes_get_data (payload, &size);

  if (!check_body_start (DC_MESH_MSG_REPAIR_REQUEST, p, size, 1, 4, error))
    return FALSE;
  memcpy (request->run_id, p + 4, DC_MESH_RUN_ID_SIZE);
  request->step = get_u64 (p + 20);
  request->rank = get_u32 (p + 28);
  return TRUE;
}

GBytes *
dc_mesh_audit_encode (const DcMeshAudit *audit)
{
  guint8 *out = g_malloc0 (DC_MESH_AUDIT_SIZE);

  out[0] = DC_MESH_TRAIN_BODY_VERSION;
  memcpy (out + 4, audit->run_id, DC_MESH_RUN_ID_SIZE);
  put_u64 (out + 20, audit->step);
  put_u32 (out + 28, audit->rank);
  memcpy (out + 32, audit->gradient_hash, DC_MESH_HASH_SIZE);
  return g_bytes_new_take (out, DC_MESH_AUDIT_SIZE);
}

gboolean
dc_mesh_audit_decode (GBytes       *payload,
                      DcMeshAudit  *audit,
                      GError      **error)
{
  gsize size;
  const guint8 *p = g_bytes_get_data (payload, &size);

  if (!check_body_start (DC_MESH_MSG_AUDIT, p, size, 1, 4, error))
    return FALSE;
  memcpy (audit->run_id, p + 4, DC_MESH_RUN_ID_SIZE);
  audit->step = get_u64 (p + 20);
  audit->rank = get_u32 (p + 28);
  memcpy (audit->gradient_hash, p + 32, DC_MESH_HASH_SIZE);
  return TRUE;
}

/* Chunks. */

static gboolean
is_chunk_type (guint type)
{
  return type == DC_MESH_MSG_GRADIENTS || type == DC_MESH_MSG_WEIGHTS
         || type == DC_MESH_MSG_CHECKPOINT || type == DC_MESH_MSG_REPAIR;
}

/**
 * dc_mesh_chunk_max_total:
 *
 * Returns: the largest object a chunked message type may declare, 0 for
 *   types that are not chunked
 */
guint64
dc_mesh_chunk_max_total (guint type)
{
  switch (type)
    {
    case DC_MESH_MSG_GRADIENTS:
    case DC_MESH_MSG_REPAIR:
      return DC_MESH_GRADIENT_MAX_TOTAL;
    case DC_MESH_MSG_WEIGHTS:
    case DC_MESH_MSG_CHECKPOINT:
      return DC_MESH_WEIGHTS_MAX_TOTAL;
    default:
      return 0;
    }
}

/**
 * dc_mesh_chunk_ceiling_total:
 *
 * Returns: the most a caller that knows the run may raise
 *   dc_mesh_chunk_max_total () to (DC_MESH_GRADIENT_CEILING_TOTAL for
 *   GRADIENTS and REPAIR, DC_MESH_WEIGHTS_CEILING_TOTAL for WEIGHTS; a
 *   CHECKPOINT keeps its cap), 0 for types that are not chunked
 */
guint64
dc_mesh_chunk_ceiling_total (guint type)
{
  switch (type)
    {
    case DC_MESH_MSG_GRADIENTS:
    case DC_MESH_MSG_REPAIR:
      return DC_MESH_GRADIENT_CEILING_TOTAL;
    case DC_MESH_MSG_WEIGHTS:
      return DC_MESH_WEIGHTS_CEILING_TOTAL;
    default:
      return dc_mesh_chunk_max_total (type);
    }
}

/* The cap of an object of @type when the caller asks for @max_total:
 * 0 is the type's default cap, anything else is bounded by its ceiling. */
static guint64
resolve_cap (guint   type,
             guint64 max_total)
{
  if (max_total == 0)
    return dc_mesh_chunk_max_total (type);
  return MIN (max_total, dc_mesh_chunk_ceiling_total (type));
}

static guint64
chunk_count_for (guint64 total)
{
  return (total + DC_MESH_CHUNK_DATA_MAX - 1) / DC_MESH_CHUNK_DATA_MAX;
}

/* The data length chunk @index of an object of @total bytes must have. */
static gsize
chunk_size_for (guint64 total,
                guint32 index)
{
  guint64 start = (guint64) index * DC_MESH_CHUNK_DATA_MAX;

  if (start >= total)
    return 0;
  return (gsize) MIN ((guint64) DC_MESH_CHUNK_DATA_MAX, total - start);
}

void
dc_mesh_train_hash (GBytes *object,
                    guint8  hash[DC_MESH_HASH_SIZE])
{
  gsize size;
  const guint8 *data = g_bytes_get_data (object, &size);

  G_STATIC_ASSERT (DC_MESH_HASH_SIZE == DC_SHA256_SIZE);
  dc_sha256_digest (data, size, hash);
}

/* Each chunk's hash of an object of @total bytes (@count chunks) into
 * @list, two chunks at a time (interleaved chains with the SHA extensions:
 * dc_sha256_digest_pair ()). */
static void
chunk_data_hashes (const guint8 *data,
                   gsize         total,
                   guint64       count,
                   guint8       *list)
{
  for (guint64 i = 0; i < count; i += 2)
    {
      const guint8 *at = data + i * DC_MESH_CHUNK_DATA_MAX;

      if (i + 1 < count)
        dc_sha256_digest_pair (at, chunk_size_for (total, (guint32) i),
                               at + DC_MESH_CHUNK_DATA_MAX,
                               chunk_size_for (total, (guint32) (i + 1)),
                               list + i * DC_MESH_HASH_SIZE, list + (i + 1) * DC_MESH_HASH_SIZE);
      else
        dc_sha256_digest (at, chunk_size_for (total, (guint32) i), list + i * DC_MESH_HASH_SIZE);
    }
}

/* The object's hash from its chunks' hashes (@count × 32 bytes, in order). */
static void
hash_list_hash (const guint8 *chunk_hashes,
                guint         count,
                guint8        hash[DC_MESH_HASH_SIZE])
{
  dc_sha256_digest (chunk_hashes, (gsize) count * DC_MESH_HASH_SIZE, hash);
}

/**
 * dc_mesh_chunk_object_hash:
 * @object: a whole object, as dc_mesh_chunks_split() would cut it
 *
 * The hash its chunks carry in @hash: SHA-256 over the SHA-256 of each
 * chunk's data, in order. A third party holding some chunks' hashes can
 * check them against it without the rest of the data.
 */
void
dc_mesh_chunk_object_hash (GBytes *object,
                           guint8  hash[DC_MESH_HASH_SIZE])
{
  gsize total;
  const guint8 *data = g_bytes_get_data (object, &total);
  guint64 count = total > 0 ? chunk_count_for (total) : 0;
  g_autofree guint8 *list = g_malloc (MAX (count, 1) * DC_MESH_HASH_SIZE);

  chunk_data_hashes (data, total, count, list);
  hash_list_hash (list, (guint) count, hash);
}

void
dc_mesh_chunk_clear (DcMeshChunk *chunk)
{
  g_clear_pointer (&chunk->data, g_bytes_unref);
}

/* Checks the header fields shared by encoder and decoder. */
static gboolean
check_chunk_fields (guint               type,
                    const DcMeshChunk  *chunk,
                    gsize               data_size,
                    guint64             max,
                    GError            **error)
{
  const char *what = dc_mesh_message_type_to_string (type);

  if (chunk->total == 0)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED, "%s object is empty", what);
      return FALSE;
    }
  if (chunk->total > max)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_TOO_LARGE,
                   "%s object of %" G_GUINT64_FORMAT " bytes exceeds its limit of %"
                   G_GUINT64_FORMAT, what, chunk->total, max);
      return FALSE;
    }
  if (chunk->count != chunk_count_for (chunk->total))
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "%s chunk count %u does not match an object of %" G_GUINT64_FORMAT
                   " bytes (%" G_GUINT64_FORMAT " chunks)",
                   what, chunk->count, chunk->total, chunk_count_for (chunk->total));
      return FALSE;
    }
  if (chunk->index >= chunk->count)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "%s chunk %u is past the last chunk %u", what, chunk->index,
                   chunk->count - 1);
      return FALSE;
    }
  if (data_size != chunk_size_for (chunk->total, chunk->index))
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "%s chunk %u carries %" G_GSIZE_FORMAT " bytes, expected %" G_GSIZE_FORMAT,
                   what, chunk->index, data_size, chunk_size_for (chunk->total, chunk->index));
      return FALSE;
    }
  if ((type == DC_MESH_MSG_GRADIENTS || type == DC_MESH_MSG_REPAIR) && chunk->position != 0)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "%s chunk has a data position, which only weights carry", what);
      return FALSE;
    }
  if (chunk->index == chunk->count - 1 && all_zero (chunk->hash, DC_MESH_HASH_SIZE))
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "%s chunk %u is the last and does not carry its object's hash", what,
                   chunk->index);
      return FALSE;
    }
  return TRUE;
}

/* Chunk data coding (header byte 1). */
#define CHUNK_CODING_RAW  0
#define CHUNK_CODING_ZSTD 1
/* zstd level 1: an int8 gradient's chunks keep 61 % of their bytes at
 * 380 MB/s (decompressed at 1.36 GB/s) on the 2-vCPU EPYC VM, s32; level
 * −1 kept 70 %, level 3 58 % at 210 MB/s. */
#define CHUNK_ZSTD_LEVEL  1
/* Data shorter than this goes raw: zstd's frame would eat what it saves. */
#define CHUNK_ZSTD_MIN    256

static void
free_cctx (gpointer cctx)
{
  ZSTD_freeCCtx (cctx);
}

static void
free_dctx (gpointer dctx)
{
  ZSTD_freeDCtx (dctx);
}

/* One zstd context of each kind per thread that codes chunks, kept for the
 * thread's life: a context is a few hundred KB to set up, a chunk's work
 * some 170 µs. */
static GPrivate cctx_key = G_PRIVATE_INIT (free_cctx);
static GPrivate dctx_key = G_PRIVATE_INIT (free_dctx);

static ZSTD_CCtx *
thread_cctx (void)
{
  ZSTD_CCtx *cctx = g_private_get (&cctx_key);

  if (cctx == NULL)
    {
      cctx = ZSTD_createCCtx ();
      g_private_set (&cctx_key, cctx);
    }
  return cctx;
}

static ZSTD_DCtx *
thread_dctx (void)
{
  ZSTD_DCtx *dctx = g_private_get (&dctx_key);

  if (dctx == NULL)
    {
      dctx = ZSTD_createDCtx ();
      g_private_set (&dctx_key, dctx);
    }
  return dctx;
}

/**
 * dc_mesh_chunk_is_compressed:
 * @payload: a message body
 *
 * Returns: whether @payload is a chunk whose data is zstd-compressed
 */
gboolean
dc_mesh_chunk_is_compressed (guint   type,
                             GBytes *payload)
{
  gsize size;
  const guint8 *p = g_bytes_get_data (payload, &size);

  return is_chunk_type (type) && size > DC_MESH_CHUNK_HEADER_SIZE
         && p[1] == CHUNK_CODING_ZSTD;
}

/**
 * dc_mesh_chunk_body_compress:
 * @body: a chunk body as dc_mesh_chunk_encode () or dc_mesh_chunks_split ()
 *   made it (raw data)
 *
 * The same chunk with its data compressed (zstd, level 1; header byte 1 = 1),
 * where that saves at least a sixteenth of the data; else @body itself. The
 * header, chunk hash included (of the raw data), is unchanged.
 *
 * Returns: (transfer full): the body to send
 */
GBytes *
dc_mesh_chunk_body_compress (GBytes *body)
{
  gsize size, raw, bound, n;
  const guint8 *p = g_bytes_get_data (body, &size);
  ZSTD_CCtx *cctx;
  guint8 *out;

  /* Without a context (zstd's allocation failed) the chunk goes raw. */
  if (size < DC_MESH_CHUNK_HEADER_SIZE + CHUNK_ZSTD_MIN || p[1] != CHUNK_CODING_RAW
      || (cctx = thread_cctx ()) == NULL)
    return g_bytes_ref (body);
  raw = size - DC_MESH_CHUNK_HEADER_SIZE;
  bound = ZSTD_compressBound (raw);
  out = g_malloc (DC_MESH_CHUNK_HEADER_SIZE + bound);
  n = ZSTD_compressCCtx (cctx, out + DC_MESH_CHUNK_HEADER_SIZE, bound,
                         p + DC_MESH_CHUNK_HEADER_SIZE, raw, CHUNK_ZSTD_LEVEL);
  if (ZSTD_isError (n) || n > raw - raw / 16)
    {
      g_free (out);
      return g_bytes_ref (body);
    }
  memcpy (out, p, DC_MESH_CHUNK_HEADER_SIZE);
  out[1] = CHUNK_CODING_ZSTD;
  return g_bytes_new_take (g_realloc (out, DC_MESH_CHUNK_HEADER_SIZE + n),
                           DC_MESH_CHUNK_HEADER_SIZE + n);
}

/**
 * dc_mesh_chunk_expand:
 * @payload: a message body (from a peer: untrusted)
 *
 * A chunk whose data is compressed, with its data decompressed (header byte
 * 1 back to 0); any other body as it is. Nothing is allocated before the
 * header is checked: the raw data must be exactly the size the chunk's
 * total and index give (at most 65,400 bytes, the total at most the type's
 * ceiling), which zstd's frame must declare and decompress to.
 *
 * Returns: (transfer full) (nullable): the raw body, or %NULL with @error
 */
GBytes *
dc_mesh_chunk_expand (guint    type,
                      GBytes  *payload,
                      GError **error)
{
  gsize size, expected, n;
  const guint8 *p = g_bytes_get_data (payload, &size);
  const char *what = dc_mesh_message_type_to_string (type);
  guint64 total, content;
  guint32 index, count;
  ZSTD_DCtx *dctx;
  guint8 *out;

  if (!dc_mesh_chunk_is_compressed (type, payload))
    return g_bytes_ref (payload);
  if (!check_body_start (type, p, size, 2, 4, error))
    return NULL;
  index = get_u32 (p + 32);
  count = get_u32 (p + 36);
  total = get_u64 (p + 40);
  if (total == 0 || total > dc_mesh_chunk_ceiling_total (type) || index >= count
      || count != chunk_count_for (total))
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "compressed %s chunk has an inconsistent header (chunk %u of %u, %"
                   G_GUINT64_FORMAT " bytes)", what, index, count, total);
      return NULL;
    }
  expected = chunk_size_for (total, index);
  content = ZSTD_getFrameContentSize (p + DC_MESH_CHUNK_HEADER_SIZE,
                                      size - DC_MESH_CHUNK_HEADER_SIZE);
  if (content != expected)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "compressed %s chunk %u of %u does not declare its %" G_GSIZE_FORMAT
                   " bytes of data", what, index, count, expected);
      return NULL;
    }
  if ((dctx = thread_dctx ()) == NULL)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_TOO_LARGE,
                   "no memory to decompress a %s chunk", what);
      return NULL;
    }
  out = g_malloc (DC_MESH_CHUNK_HEADER_SIZE + expected);
  n = ZSTD_decompressDCtx (dctx, out + DC_MESH_CHUNK_HEADER_SIZE, expected,
                           p + DC_MESH_CHUNK_HEADER_SIZE, size - DC_MESH_CHUNK_HEADER_SIZE);
  if (ZSTD_isError (n) || n != expected)
    {
      g_free (out);
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "compressed %s chunk %u of %u does not decompress to its %" G_GSIZE_FORMAT
                   " bytes of data", what, index, count, expected);
      return NULL;
    }
  memcpy (out, p, DC_MESH_CHUNK_HEADER_SIZE);
  out[1] = CHUNK_CODING_RAW;
  return g_bytes_new_take (out, DC_MESH_CHUNK_HEADER_SIZE + expected);
}

/**
 * dc_mesh_chunk_decode:
 * @chunk: (out caller-allocates): filled on success; free its data with
 *   dc_mesh_chunk_clear()
 *
 * Decodes one chunk of a GRADIENTS, WEIGHTS, CHECKPOINT or REPAIR message.
 * The chunk's data shares @payload's memory.
 */
gboolean
dc_mesh_chunk_decode (guint         type,
                      GBytes       *payload,
                      DcMeshChunk  *chunk,
                      GError      **error)
{
  return dc_mesh_chunk_decode_capped (type, payload, 0, chunk, error);
}

/**
 * dc_mesh_chunk_decode_capped:
 * @max_total: the largest object to accept: 0 for the type's cap
 *   (dc_mesh_chunk_max_total ()); more is bounded by its ceiling
 *   (dc_mesh_chunk_ceiling_total ()). The caller derives it from what it
 *   knows of the run, never from the chunk
 *
 * dc_mesh_chunk_decode () with the cap on the object's declared total
 * chosen by the caller.
 */
gboolean
dc_mesh_chunk_decode_capped (guint         type,
                             GBytes       *payload,
                             guint64       max_total,
                             DcMeshChunk  *chunk,
                             GError      **error)
{
  return dc_mesh_chunk_decode_prehashed (type, payload, max_total, NULL, chunk, error);
}

/**
 * dc_mesh_chunk_data_hash:
 * @payload: a message body that may be a chunk
 * @hash: (out): SHA-256 of the chunk's data (the body after its header)
 *
 * The hash dc_mesh_chunk_decode () checks against the chunk's own, taken
 * alone: a receiver takes it on a worker, as the chunk arrives, and hands
 * it to dc_mesh_chunk_decode_prehashed (). Nothing else is checked.
 *
 * Returns: whether @type is chunked and @payload long enough to hold a
 *   chunk header, its data not compressed (dc_mesh_chunk_expand () first;
 *   else @hash is untouched)
 */
gboolean
dc_mesh_chunk_data_hash (guint   type,
                         GBytes *payload,
                         guint8  hash[DC_MESH_HASH_SIZE])
{
  gsize size;
  const guint8 *p = g_bytes_get_data (payload, &size);

  if (!is_chunk_type (type) || size < DC_MESH_CHUNK_HEADER_SIZE || p[1] != CHUNK_CODING_RAW)
    return FALSE;
  dc_sha256_digest (p + DC_MESH_CHUNK_HEADER_SIZE, size - DC_MESH_CHUNK_HEADER_SIZE, hash);
  return TRUE;
}

/**
 * dc_mesh_chunk_decode_prehashed:
 * @data_hash: (nullable): dc_mesh_chunk_data_hash () of @payload, taken
 *   elsewhere; %NULL to take it here
 *
 * dc_mesh_chunk_decode_capped () with the SHA-256 of the chunk's data
 * already taken: it is still compared with the hash the chunk carries.
 */
gboolean
dc_mesh_chunk_decode_prehashed (guint          type,
                                GBytes        *payload,
                                guint64        max_total,
                                const guint8  *data_hash_given,
                                DcMeshChunk   *chunk,
                                GError       **error)
{
  gsize size;
  const guint8 *p = g_bytes_get_data (payload, &size);
  DcMeshChunk c;
  guint8 hash[DC_MESH_HASH_SIZE];

  memset (&c, 0, sizeof c);
  if (!is_chunk_type (type))
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "%s messages are not chunked", dc_mesh_message_type_to_string (type));
      return FALSE;
    }
  /* Byte 1 is the data's coding (reserved, 0, before 2026-12-05): a
   * compressed chunk is expanded first and decoded as the raw one. */
  if (size > DC_MESH_CHUNK_HEADER_SIZE && p[1] == CHUNK_CODING_ZSTD)
    {
      g_autoptr(GBytes) raw = dc_mesh_chunk_expand (type, payload, error);

      if (raw == NULL)
        return FALSE;
      return dc_mesh_chunk_decode_prehashed (type, raw, max_total, NULL, chunk, error);
    }
  if (!check_body_start (type, p, size, 2, 4, error))
    return FALSE;
  if (p[1] != CHUNK_CODING_RAW)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "%s chunk data in unknown coding %u", dc_mesh_message_type_to_string (type),
                   p[1]);
      return FALSE;
    }
  memcpy (c.run_id, p + 4, DC_MESH_RUN_ID_SIZE);
  c.step = get_u64 (p + 20);
  c.rank = get_u32 (p + 28);
  c.index = get_u32 (p + 32);
  c.count = get_u32 (p + 36);
  c.total = get_u64 (p + 40);
  c.position = get_u64 (p + 48);
  memcpy (c.hash, p + 56, DC_MESH_HASH_SIZE);
  memcpy (c.chunk_hash, p + 88, DC_MESH_HASH_SIZE);
  if (!check_chunk_fields (type, &c, size - DC_MESH_CHUNK_HEADER_SIZE,
                           resolve_cap (type, max_total), error))
    return FALSE;
  /* Checked here, as it arrives: a receiver may use a chunk before the
   * rest of its object has come. */
  if (data_hash_given != NULL)
    memcpy (hash, data_hash_given, DC_MESH_HASH_SIZE);
  else
    dc_sha256_digest (p + DC_MESH_CHUNK_HEADER_SIZE, size - DC_MESH_CHUNK_HEADER_SIZE, hash);
  if (memcmp (hash, c.chunk_hash, DC_MESH_HASH_SIZE) != 0)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "%s chunk %u of %u (step %" G_GUINT64_FORMAT ", rank %u) fails its hash: "
                   "its data is not what its sender hashed",
                   dc_mesh_message_type_to_string (type), c.index, c.count, c.step, c.rank);
      return FALSE;
    }
  c.data = g_bytes_new_from_bytes (payload, DC_MESH_CHUNK_HEADER_SIZE,
                                   size - DC_MESH_CHUNK_HEADER_SIZE);
  *chunk = c;
  return TRUE;
}

/* dc_mesh_chunk_encode () with the data's hash already taken (@chunk_hash). */
static GBytes *
chunk_encode_hashed (guint               type,
                     const DcMeshChunk  *chunk,
                     const guint8        chunk_hash[DC_MESH_HASH_SIZE],
                     guint64             max,
                     GError            **error)
{
  gsize size = chunk->data != NULL ? g_bytes_get_size (chunk->data) : 0;
  guint8 *out;

  if (!is_chunk_type (type))
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "%s messages are not chunked", dc_mesh_message_type_to_string (type));
      return NULL;
    }
  if (!check_chunk_fields (type, chunk, size, max, error))
    return NULL;

  out = g_malloc0 (DC_MESH_CHUNK_HEADER_SIZE + size);
  out[0] = DC_MESH_TRAIN_BODY_VERSION;
  memcpy (out + 4, chunk->run_id, DC_MESH_RUN_ID_SIZE);
  put_u64 (out + 20, chunk->step);
  put_u32 (out + 28, chunk->rank);
  put_u32 (out + 32, chunk->index);
  put_u32 (out + 36, chunk->count);
  put_u64 (out + 40, chunk->total);
  put_u64 (out + 48, chunk->position);
  memcpy (out + 56, chunk->hash, DC_MESH_HASH_SIZE);
  memcpy (out + 88, chunk_hash, DC_MESH_HASH_SIZE);
  memcpy (out + DC_MESH_CHUNK_HEADER_SIZE, g_bytes_get_data (chunk->data, NULL), size);
  return g_bytes_new_take (out, DC_MESH_CHUNK_HEADER_SIZE + size);
}

/**
 * dc_mesh_chunk_encode:
 *
 * Fills in the chunk's own hash from its data (@chunk->chunk_hash is not
 * read).
 *
 * Returns: (transfer full) (nullable): one chunk message body, or %NULL when
 *   the chunk's fields are inconsistent
 */
GBytes *
dc_mesh_chunk_encode (guint               type,
                      const DcMeshChunk  *chunk,
                      GError            **error)
{
  guint8 chunk_hash[DC_MESH_HASH_SIZE] = { 0 };

  if (chunk->data != NULL)
    dc_mesh_train_hash (chunk->data, chunk_hash);
  return chunk_encode_hashed (type, chunk, chunk_hash, dc_mesh_chunk_max_total (type), error);
}

/**
 * dc_mesh_chunks_split:
 * @info: run id, step, rank and position of the object (other fields ignored)
 * @object: the whole object
 *
 * Cuts @object into chunk message bodies, each of which fits one piece,
 * and fills in index, count, total, each chunk's hash and the object's
 * (dc_mesh_chunk_object_hash()).
 *
 * Returns: (transfer full) (element-type GBytes) (nullable): the bodies in
 *   order, or %NULL when @object is empty or over the type's limit
 */
GPtrArray *
dc_mesh_chunks_split (guint               type,
                      const DcMeshChunk  *info,
                      GBytes             *object,
                      GError            **error)
{
  g_autoptr(GPtrArray) bodies = NULL;
  g_autofree guint8 *list = NULL;
  DcMeshChunk c = *info;
  gsize total = g_bytes_get_size (object);

  if (!is_chunk_type (type))
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "%s messages are not chunked", dc_mesh_message_type_to_string (type));
      return NULL;
    }
  c.total = total;
  /* Checked against the ceiling before the count is computed, so it fits
   * 32 bits. The sender's own object may exceed the type's default cap
   * (an Advanced size's gradient): each receiver caps what it accepts by
   * what it knows of the run. */
  if (total == 0 || total > dc_mesh_chunk_ceiling_total (type))
    {
      c.count = 1;
      c.index = 0;
      c.data = NULL;
      check_chunk_fields (type, &c, 0, dc_mesh_chunk_ceiling_total (type), error);
      return NULL;
    }
  c.count = (guint32) chunk_count_for (total);
  /* Each chunk's hash, then the object's from them: the data is read once. */
  list = g_malloc ((gsize) c.count * DC_MESH_HASH_SIZE);
  chunk_data_hashes (g_bytes_get_data (object, NULL), total, c.count, list);
  hash_list_hash (list, c.count, c.hash);

  bodies = g_ptr_array_new_full (c.count, (GDestroyNotify) g_bytes_unref);
  for (c.index = 0; c.index < c.count; c.index++)
    {
      g_autoptr(GBytes) slice = g_bytes_new_from_bytes (object,
                                                        (gsize) c.index * DC_MESH_CHUNK_DATA_MAX,
                                                        chunk_size_for (total, c.index));
      GBytes *body;

      c.data = slice;
      body = chunk_encode_hashed (type, &c, list + (gsize) c.index * DC_MESH_HASH_SIZE,
                                  dc_mesh_chunk_ceiling_total (type), error);
      if (body == NULL)
        return NULL;
      g_ptr_array_add (bodies, body);
    }
  return g_steal_pointer (&bodies);
}

/**
 * dc_mesh_chunk_frames_encode:
 * @type: GRADIENTS, WEIGHTS, CHECKPOINT or REPAIR
 * @bodies: (element-type GBytes): chunk bodies from dc_mesh_chunks_split()
 *
 * Frames every chunk (dc_mesh_message_encode_pieces (): the copy behind
 * the frame header and its CRC-32) once, for dc_peer_send_frames (). Pure:
 * callable from any thread, so a sender frames a large object on a worker
 * and every peer it goes to shares the same bytes.
 *
 * Returns: (transfer full) (element-type GPtrArray) (nullable): one array
 *   of pieces per chunk, in order
 */
GPtrArray *
dc_mesh_chunk_frames_encode (guint      type,
                             GPtrArray *bodies,
                             GError   **error)
{
  return dc_mesh_chunk_frames_encode_coded (type, bodies, FALSE, error);
}

/**
 * dc_mesh_chunk_frames_encode_coded:
 * @compress: each chunk's data compressed where that pays
 *   (dc_mesh_chunk_body_compress ()): only to devices that expand it, i.e.
 *   in a run whose config says so (#DcMeshRunConfig.chunks_zstd)
 *
 * dc_mesh_chunk_frames_encode () with the data compressed or not; the
 * bodies in @bodies stay as they are.
 */
GPtrArray *
dc_mesh_chunk_frames_encode_coded (guint      type,
                                   GPtrArray *bodies,
                                   gboolean   compress,
                                   GError   **error)
{
  g_autoptr(GPtrArray) frames = NULL;

  g_return_val_if_fail (bodies != NULL, NULL);

  if (!is_chunk_type (type))
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "%s messages are not chunked", dc_mesh_message_type_to_string (type));
      return NULL;
    }
  frames = g_ptr_array_new_full (bodies->len, (GDestroyNotify) g_ptr_array_unref);
  for (guint i = 0; i < bodies->len; i++)
    {
      g_autoptr(GBytes) body = compress ? dc_mesh_chunk_body_compress (g_ptr_array_index (bodies, i))
                                        : g_bytes_ref (g_ptr_array_index (bodies, i));
      GPtrArray *pieces = dc_mesh_message_encode_pieces (type, body, error);

      if (pieces == NULL)
        return NULL;
      g_ptr_array_add (frames, pieces);
    }
  return g_steal_pointer (&frames);
}

/* The assembler. */

struct _DcMeshChunkAssembler
{
  guint        type;
  guint64      max_total;
  /* Fixed by the first chunk; data unused. */
  DcMeshChunk  key;
  gboolean     started;
  gboolean     complete;
  /* The object, filled chunk by chunk at index × DC_MESH_CHUNK_DATA_MAX as
   * each arrives (total ≤ max_total, checked before it is allocated): no
   * whole-object copy when the last one comes, which on the main thread was
   * the longest single piece of a step's receipt (a 114 MB shard). */
  guint8      *buffer;
  guint8      *arrived;       /* count flags: which chunks are in buffer */
  guint8      *chunk_hashes;  /* count × 32 bytes: each chunk's, as decoded */
  guint        received;
};

/**
 * dc_mesh_chunk_assembler_new:
 * @type: GRADIENTS, WEIGHTS, CHECKPOINT or REPAIR
 * @max_total: the largest object to accept; 0 means the type's cap
 *   (dc_mesh_chunk_max_total ()); a larger one is bounded by the type's
 *   ceiling (dc_mesh_chunk_ceiling_total ()): the caller derives it from
 *   the run it knows (an Advanced size's gradient), never from a chunk
 */
DcMeshChunkAssembler *
dc_mesh_chunk_assembler_new (guint   type,
                             guint64 max_total)
{
  DcMeshChunkAssembler *self;

  g_return_val_if_fail (is_chunk_type (type), NULL);

  self = g_new0 (DcMeshChunkAssembler, 1);
  self->type = type;
  self->max_total = resolve_cap (type, max_total);
  return self;
}

static void
assembler_reset (DcMeshChunkAssembler *self)
{
  g_clear_pointer (&self->buffer, g_free);
  g_clear_pointer (&self->arrived, g_free);
  g_clear_pointer (&self->chunk_hashes, g_free);
  self->received = 0;
  self->started = FALSE;
  self->complete = FALSE;
}

void
dc_mesh_chunk_assembler_free (DcMeshChunkAssembler *self)
{
  if (self == NULL)
    return;
  assembler_reset (self);
  g_free (self);
}

guint
dc_mesh_chunk_assembler_get_received (DcMeshChunkAssembler *self)
{
  return self->received;
}

/* Returns: the chunk count once the first chunk fixed it, else 0. */
guint
dc_mesh_chunk_assembler_get_count (DcMeshChunkAssembler *self)
{
  return self->started ? self->key.count : 0;
}

gboolean
dc_mesh_chunk_assembler_is_complete (DcMeshChunkAssembler *self)
{
  return self->complete;
}

static gboolean
same_object (const DcMeshChunk *a,
             const DcMeshChunk *b)
{
  return memcmp (a->run_id, b->run_id, DC_MESH_RUN_ID_SIZE) == 0
         && a->step == b->step && a->rank == b->rank && a->total == b->total
         && a->count == b->count && a->position == b->position
         /* Zeros: a chunk sent before its object was hashed whole. */
         && (all_zero (a->hash, DC_MESH_HASH_SIZE) || all_zero (b->hash, DC_MESH_HASH_SIZE)
             || memcmp (a->hash, b->hash, DC_MESH_HASH_SIZE) == 0);
}

/**
 * dc_mesh_chunk_assembler_push:
 * @chunk: a chunk from dc_mesh_chunk_decode(), which checked its data
 *   against its own hash
 * @object: (out) (transfer full) (optional): the whole object, set when
 *   @chunk completed it and its hash matched
 *
 * Adds one chunk. Refuses a chunk of another object, one over the limit, a
 * duplicate, and anything after completion. When the last chunk arrives the
 * object's hash (over its chunks' hashes, dc_mesh_chunk_object_hash()) is
 * checked; on a mismatch everything collected is
 * dropped (the assembler starts empty again, ready for a repair) and an
 * error is returned.
 *
 * Returns: %TRUE if the chunk was accepted
 */
gboolean
dc_mesh_chunk_assembler_push (DcMeshChunkAssembler  *self,
                              const DcMeshChunk     *chunk,
                              GBytes               **object,
                              GError               **error)
{
  const char *what = dc_mesh_message_type_to_string (self->type);
  gsize size = chunk->data != NULL ? g_bytes_get_size (chunk->data) : 0;
  g_autoptr(GBytes) bytes = NULL;
  guint8 hash[DC_MESH_HASH_SIZE];

  g_return_val_if_fail (self != NULL && chunk != NULL, FALSE);

  if (object != NULL)
    *object = NULL;
  if (self->complete)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "%s chunk %u arrived after its object was complete", what, chunk->index);
      return FALSE;
    }
  /* Decoded chunks are already consistent; this covers callers that build
   * chunks by hand and the assembler's own cap. */
  if (!check_chunk_fields (self->type, chunk, size,
                           MAX (self->max_total, dc_mesh_chunk_max_total (self->type)), error))
    return FALSE;
  if (chunk->total > self->max_total)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_TOO_LARGE,
                   "%s object of %" G_GUINT64_FORMAT " bytes exceeds the %" G_GUINT64_FORMAT
                   " bytes expected", what, chunk->total, self->max_total);
      return FALSE;
    }

  if (!self->started)
    {
      /* total ≤ max_total (above): a bounded request, refused with a
       * message rather than aborting where memory is short. */
      self->buffer = g_try_malloc ((gsize) chunk->total);
      if (self->buffer == NULL)
        {
          g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_TOO_LARGE,
                       "%s object of %" G_GUINT64_FORMAT " bytes: not enough memory to "
                       "collect it", what, chunk->total);
          return FALSE;
        }
      self->key = *chunk;
      self->key.data = NULL;
      self->key.index = 0;
      self->arrived = g_new0 (guint8, chunk->count);
      self->chunk_hashes = g_malloc ((gsize) chunk->count * DC_MESH_HASH_SIZE);
      self->started = TRUE;
    }
  else if (!same_object (&self->key, chunk))
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "%s chunk %u belongs to another object (step %" G_GUINT64_FORMAT
                   ", rank %u) than the one being collected (step %" G_GUINT64_FORMAT
                   ", rank %u)", what, chunk->index, chunk->step, chunk->rank,
                   self->key.step, self->key.rank);
      return FALSE;
    }
  if (self->arrived[chunk->index])
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "%s chunk %u of %u arrived twice", what, chunk->index, chunk->count);
      return FALSE;
    }

  /* The object's hash as soon as a chunk carries it (the last always does). */
  if (all_zero (self->key.hash, DC_MESH_HASH_SIZE))
    memcpy (self->key.hash, chunk->hash, DC_MESH_HASH_SIZE);
  /* size is chunk_size_for (total, index): check_chunk_fields () above. */
  if (size > 0)
    memcpy (self->buffer + (gsize) chunk->index * DC_MESH_CHUNK_DATA_MAX,
            g_bytes_get_data (chunk->data, NULL), size);
  self->arrived[chunk->index] = TRUE;
  memcpy (self->chunk_hashes + (gsize) chunk->index * DC_MESH_HASH_SIZE, chunk->chunk_hash,
          DC_MESH_HASH_SIZE);
  self->received++;
  if (self->received < self->key.count)
    return TRUE;

  bytes = g_bytes_new_take (g_steal_pointer (&self->buffer), (gsize) self->key.total);
  /* Each chunk's data was checked against its own hash as it was decoded;
   * the object's hash binds those hashes together, in order. */
  hash_list_hash (self->chunk_hashes, self->key.count, hash);
  if (memcmp (hash, self->key.hash, DC_MESH_HASH_SIZE) != 0)
    {
      guint64 step = self->key.step;
      guint32 rank = self->key.rank;

      assembler_reset (self);
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "%s object of step %" G_GUINT64_FORMAT " from rank %u fails its hash",
                   what, step, rank);
      return FALSE;
    }
  self->complete = TRUE;
  if (object != NULL)
    *object = g_steal_pointer (&bytes);
  return TRUE;
}
