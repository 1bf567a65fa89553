/* dc-train-data.c: resolves --data builtin|DATASET|FILE to training bytes.
 *
 * An existing path is read as raw bytes (each byte one token). "builtin" is
 * the corpus src/data ships. A Hugging Face dataset id is to stream through
 * src/data's DcTextStream; until the trainer takes batches from a stream it
 * fails with a clear message.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-model"

#include "config.h"

#include "dc-train-data.h"

#include "dc-model-error.h"
#include "data/dc-corpus.h"

/**
 * dc_train_data_load:
 * @spec: "builtin", a local file, or a Hugging Face dataset id
 *
 * Returns: (transfer full): the text, or %NULL with @error set
 */
GBytes *
dc_train_data_load (const char  *spec,
                    GError     **error)
{
  g_autoptr(GFile) file = NULL;
  g_autoptr(GFileInfo) info = NULL;
  g_autoptr(GMappedFile) mapped = NULL;

  if (g_str_equal (spec, "builtin"))
    return dc_corpus_dup_builtin ();
  file = g_file_new_for_commandline_arg (spec);
  info = g_file_query_info (file, G_FILE_ATTRIBUTE_STANDARD_SIZE "," G_FILE_ATTRIBUTE_STANDARD_TYPE,
                            G_FILE_QUERY_INFO_NONE, NULL, NULL);
  if (info == NULL)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                   "“%s” is not a file, and Hugging Face datasets are not part of this build "
                   "yet; use --data FILE", spec);
      return NULL;
    }
  if (g_file_info_get_file_type (info) != G_FILE_TYPE_REGULAR
      || (guint64) g_file_info_get_size (info) > DC_TRAIN_DATA_MAX_FILE)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE,
                   "“%s” is not a regular file of at most 1 GiB", spec);
      return NULL;
    }
  if (g_file_peek_path (file) == NULL)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                   "“%s” is not a local file", spec);
      return NULL;
    }
  mapped = g_mapped_file_new (g_file_peek_path (file), FALSE, error);
  if (mapped == NULL)
    return NULL;
  return g_mapped_file_get_bytes (mapped);
}
