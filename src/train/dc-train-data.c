/* dc-train-data.c: resolves --data builtin|DATASET|FILE to training bytes.
 *
 * "builtin" is the corpus src/data ships. An existing path is read as raw
 * bytes (each byte one token). Anything else is a Hugging Face dataset id,
 * "owner/name[/folder]": this device's seeded share of its row groups is read
 * through src/data's DcTextStream (only the text column's chunks travel) until
 * DC_TRAIN_DATA_DATASET_BYTES of text are gathered; when the dataset cannot be
 * reached the stream falls back to the built-in corpus, and so does this.
 *
 * A dataset read blocks on the network: call this from a worker thread.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-train"

#include "config.h"

#include "dc-train-data.h"

#include "model/dc-model-error.h"
#include "dc-regular-file.h"
#include "data/dc-corpus.h"
#include "data/dc-dataset.h"

static GBytes *
load_file (GFile   *file,
           GError **error)
{
  g_autoptr(GMappedFile) mapped = NULL;

  if (g_file_peek_path (file) == NULL)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                   "“%s” is not a local file", g_file_peek_path (file));
      return NULL;
    }
  mapped = dc_regular_file_map (g_file_peek_path (file), error);
  if (mapped == NULL)
    return NULL;
  return g_mapped_file_get_bytes (mapped);
}

static GBytes *
load_dataset (const DcDatasetSpec  *spec,
              guint64               seed,
              DcHfClient           *hub,
              gboolean             *used_fallback,
              GCancellable         *cancellable,
              GError              **error)
{
  /* A client of this thread's own (it reports to this thread's context),
   * on the hub's server and with its token, if one was given. */
  g_autoptr(DcHfClient) client = dc_hf_client_new (hub != NULL ? dc_hf_client_get_base_url (hub)
                                                               : NULL);
  g_autoptr(DcTextStream) stream = NULL;
  /* Sized once: the text never grows past DC_TRAIN_DATA_DATASET_BYTES, so
   * the array never doubles past it either. */
  g_autoptr(GByteArray) text = g_byte_array_sized_new (DC_TRAIN_DATA_DATASET_BYTES);

  if (hub != NULL)
    dc_hf_client_share_token (client, hub);

  /* One device for now: rank 0 of 1. The mesh issue passes each device's
   * rank and the group's size so that the shares are disjoint. */
  stream = dc_text_stream_new_for_spec (client, spec, "text", 0, 1, seed);

  /* The stream hands on one row group a slice at a time; stop as soon as
   * enough text is gathered, cutting the last text to fit. */
  while (text->len < DC_TRAIN_DATA_DATASET_BYTES)
    {
      g_autoptr(GBytes) piece = dc_text_stream_next (stream, cancellable, error);
      gsize room;
      gsize len;

      if (piece == NULL)
        return NULL;
      if (dc_text_stream_is_builtin (stream))
        {
          /* The stream logged "dataset unreachable — using built-in corpus". */
          *used_fallback = TRUE;
          return dc_corpus_dup_builtin ();
        }
      if (text->len > 0)
        g_byte_array_append (text, (const guint8 *) "\n\n",
                             (guint) MIN (2, DC_TRAIN_DATA_DATASET_BYTES - text->len));
      room = DC_TRAIN_DATA_DATASET_BYTES - text->len;
      len = MIN (g_bytes_get_size (piece), room);
      g_byte_array_append (text, g_bytes_get_data (piece, NULL), (guint) len);
      if (dc_text_stream_get_epoch (stream) > 0)
        break;  /* this device's share of a small dataset is all read */
    }

  return g_byte_array_free_to_bytes (g_steal_pointer (&text));
}

/**
 * dc_train_data_load:
 * @spec: "builtin", a local file, or a Hugging Face dataset id
 * @seed: the run's seed, which orders the dataset's row groups
 * @used_fallback: (out): set when a dataset was unreachable and the built-in
 *   corpus is used instead
 *
 * Returns: (transfer full): the text, or %NULL with @error set
 */
GBytes *
dc_train_data_load (const char    *spec,
                    guint64        seed,
                    gboolean      *used_fallback,
                    GCancellable  *cancellable,
                    GError       **error)
{
  return dc_train_data_load_with_hub (spec, seed, NULL, used_fallback, cancellable, error);
}

/**
 * dc_train_data_load_with_hub:
 * @hub: (nullable): the client whose server and token a dataset is read
 *   with (the app's, holding the token its token dialog took); %NULL for
 *   the default server without a token
 *
 * As dc_train_data_load(). A dataset refused with 401/403 fails with
 * %DC_DATA_ERROR_UNAUTHORIZED / %DC_DATA_ERROR_FORBIDDEN (no fallback).
 */
GBytes *
dc_train_data_load_with_hub (const char    *spec,
                             guint64        seed,
                             DcHfClient    *hub,
                             gboolean      *used_fallback,
                             GCancellable  *cancellable,
                             GError       **error)
{
  g_autoptr(GFile) file = NULL;
  g_autoptr(GFileInfo) info = NULL;
  g_autoptr(DcDatasetSpec) dataset = NULL;

  g_return_val_if_fail (spec != NULL, NULL);
  g_return_val_if_fail (used_fallback != NULL, NULL);

  *used_fallback = FALSE;

  if (g_str_equal (spec, "builtin"))
    return dc_corpus_dup_builtin ();

  file = g_file_new_for_commandline_arg (spec);
  info = g_file_query_info (file, G_FILE_ATTRIBUTE_STANDARD_SIZE "," G_FILE_ATTRIBUTE_STANDARD_TYPE,
                            G_FILE_QUERY_INFO_NONE, NULL, NULL);
  if (info != NULL)
    {
      if (g_file_info_get_file_type (info) != G_FILE_TYPE_REGULAR
          || (guint64) g_file_info_get_size (info) > DC_TRAIN_DATA_MAX_FILE)
        {
          g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE,
                       "“%s” is not a regular file of at most 1 GiB", spec);
          return NULL;
        }
      return load_file (file, error);
    }

  /* Not a file: a dataset id, or a mistyped path. */
  dataset = dc_dataset_spec_parse (spec, NULL);
  if (dataset == NULL || g_path_is_absolute (spec) || g_str_has_prefix (spec, "."))
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                   "“%s” is neither a file nor a Hugging Face dataset id (owner/name)", spec);
      return NULL;
    }
  /* Parsed once, here: the stream takes the parsed spec. */
  return load_dataset (dataset, seed, hub, used_fallback, cancellable, error);
}
