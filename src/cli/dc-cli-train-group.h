/* dc-cli-train-group.h: `train --room …` (dc-cli-train-group.c).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "dc-cli.h"
#include "dc-context.h"
#include "mesh/dc-mesh.h"
#include "train/dc-train-plan.h"

G_BEGIN_DECLS

typedef struct
{
  const char    *room;             /* NULL: generate one and print it */
  const char    *signal_url;
  const char    *name;             /* NULL: the host name */
  DcMeshApprove  approve;
  guint          min_peers;
  char         **ice_addresses;
  const char    *test_probe_hash;  /* tests: claim this probe hash in the hello */
  DcGptModel    *resume;           /* --resume: the run this device starts continues it */
  DcTrainSettings resume_settings;
  guint          load_at;          /* --load-at STEP:FILE: after step STEP (0: never) … */
  DcGptModel    *load;             /* … this checkpoint goes to the group */
  DcTrainSettings load_settings;
} DcCliTrainGroupArgs;

int dc_cli_train_group_run (DcCliOptions              *options,
                            DcContext                 *context,
                            const DcTrainingRequest   *request,
                            gboolean                   seed_given,
                            const DcCliTrainGroupArgs *args);

G_END_DECLS
