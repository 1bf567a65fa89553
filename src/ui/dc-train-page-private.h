/* dc-train-page-private.h: the Train view's hooks for tests.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "dc-train-page.h"

G_BEGIN_DECLS

void _dc_train_page_set_available_memory (DcTrainPage *self,
                                          guint64      bytes);

G_END_DECLS
