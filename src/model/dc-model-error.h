/* dc-model-error.h: the model layer's error domain.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define DC_MODEL_ERROR (dc_model_error_quark ())

/**
 * DcModelError:
 * @DC_MODEL_ERROR_FORMAT: the file is not in the expected format (bad zip, pickle, JSON)
 * @DC_MODEL_ERROR_UNSUPPORTED: well formed but uses something this build refuses
 *   (a pickle opcode or global, a dtype, a compression method)
 * @DC_MODEL_ERROR_TOO_LARGE: a size beyond the limits this build accepts
 * @DC_MODEL_ERROR_TOKENIZER: the checkpoint's tokenizer is not ours ("tokenizer mismatch")
 * @DC_MODEL_ERROR_DIMS: dimensions outside the supported ranges ("bad dims in checkpoint")
 * @DC_MODEL_ERROR_INVALID: a setting outside its range
 */
typedef enum
{
  DC_MODEL_ERROR_FORMAT,
  DC_MODEL_ERROR_UNSUPPORTED,
  DC_MODEL_ERROR_TOO_LARGE,
  DC_MODEL_ERROR_TOKENIZER,
  DC_MODEL_ERROR_DIMS,
  DC_MODEL_ERROR_INVALID,
} DcModelError;

GQuark dc_model_error_quark (void);

G_END_DECLS
