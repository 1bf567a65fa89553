/* dc-data-error.c: the data layer's error domain.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-data"

#include "config.h"

#include "dc-data-error.h"

G_DEFINE_QUARK (dc-data-error-quark, dc_data_error)
