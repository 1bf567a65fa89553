/* dc-model-error.c: the model layer's error domain.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-model"

#include "config.h"

#include "dc-model-error.h"

G_DEFINE_QUARK (dc-model-error-quark, dc_model_error)
