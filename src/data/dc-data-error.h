/* dc-data-error.h: the data layer's error domain.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define DC_DATA_ERROR (dc_data_error_quark ())

/**
 * DcDataError:
 * @DC_DATA_ERROR_FAILED: anything else
 * @DC_DATA_ERROR_CORRUPT: a file is damaged, truncated or not what it claims to be
 * @DC_DATA_ERROR_UNSUPPORTED: a valid feature this reader does not implement (named in the message)
 * @DC_DATA_ERROR_HTTP: the server answered with an unexpected status
 * @DC_DATA_ERROR_UNAUTHORIZED: 401: the file needs a token, or the token was refused
 * @DC_DATA_ERROR_FORBIDDEN: 403: the token may not read this repository (gated or private)
 * @DC_DATA_ERROR_NOT_FOUND: 404: no such repository, revision or file
 * @DC_DATA_ERROR_RANGE_IGNORED: the server sent the whole file in answer to a byte range
 * @DC_DATA_ERROR_NO_TEXT_COLUMN: the dataset has no string column of the wanted name
 * @DC_DATA_ERROR_TOO_LARGE: more bytes than a configured limit allows (the model cache's)
 * @DC_DATA_ERROR_CHANGED: the file on the server changed while it was being read
 */
typedef enum
{
  DC_DATA_ERROR_FAILED,
  DC_DATA_ERROR_CORRUPT,
  DC_DATA_ERROR_UNSUPPORTED,
  DC_DATA_ERROR_HTTP,
  DC_DATA_ERROR_UNAUTHORIZED,
  DC_DATA_ERROR_FORBIDDEN,
  DC_DATA_ERROR_NOT_FOUND,
  DC_DATA_ERROR_RANGE_IGNORED,
  DC_DATA_ERROR_NO_TEXT_COLUMN,
  DC_DATA_ERROR_TOO_LARGE,
  DC_DATA_ERROR_CHANGED,
} DcDataError;

GQuark dc_data_error_quark (void);

G_END_DECLS
