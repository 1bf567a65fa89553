/* dc-training-run-private.h: what the tests reach of DcTrainingRun.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "dc-training-run.h"

G_BEGIN_DECLS

void _dc_training_run_set_snapshot_hook (DcTrainingRun *self,
                                         GFunc          hook,
                                         gpointer       user_data);

G_END_DECLS
