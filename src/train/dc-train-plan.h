/* dc-train-plan.h: a training request turned into a validated plan, and the
 * session that runs it.
 *
 * The one place where a run is assembled, for the app (DcTrainingRun) and
 * the CLI (`train`) alike: dc_train_plan_new () checks the request on the
 * caller's thread (settings, model size, group size) and takes the model to
 * continue from, if any; dc_train_plan_prepare () does the slow part (reads
 * the data, which may mean the network; builds the model and trainer) and is
 * meant for a worker thread; dc_train_session_step () takes one step.
 *
 * A session is solo, or a group simulated in this process
 * (simulate_peers > 1: docs/VERIFICATION.md, "Group step"). The group
 * coordinator of the mesh issue plugs in at dc_train_session_step (): where
 * the simulated ranks' gradients are combined, it will combine this
 * device's gradient with its peers' instead (same canonical order, same
 * division), then apply the same Adam step.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "dc-context.h"
#include "dc-token-source.h"
#include "dc-train-wire.h"
#include "model/dc-gpt.h"
#include "model/dc-gpt-model.h"
#include "model/dc-gpt-trainer.h"

G_BEGIN_DECLS

/* The most devices `train --simulate-peers` runs in one process. Each
 * simulated rank holds one gradient buffer (4 bytes a parameter: 16 × the
 * largest model's ≈ 4 MB is ≈ 64 MB) and costs one step's time, and a real
 * group of more than 16 devices is beyond the full mesh this program builds. */
#define DC_TRAIN_SIMULATE_PEERS_MAX 16

/* What a run starts from; the ranges are the seeds' (dc_train_settings_validate),
 * or with @advanced the Advanced range of the model's size (dc-gpt-config.h). */
typedef struct
{
  guint    width;
  guint    seq;
  guint    batch;
  guint    steps;
  guint    lr_x1000;
  guint64  seed;
  guint    n_threads;  /* 0: every core; results do not depend on it */
  char    *data;       /* "builtin", a Hugging Face dataset id, or a file */
  guint    stop_at;    /* 0: run all @steps; else stop after this step, as the
                        * CLI's --stop-at does (a stop that does not race the
                        * worker) */
  guint    simulate_peers;  /* 0 or 1: alone; n: n devices simulated in this
                             * process (the CLI's --simulate-peers) */
  gboolean advanced;   /* sizes beyond the seeds' range may be asked for (a run
                        * on this device alone; a group keeps the seeds' range) */
  guint    n_layer;    /* 0: derived from the width (dc_gpt_config_init_derived) */
  guint    n_head;     /* 0: derived from the width */
  gboolean group;      /* trains with a group (src/train/dc-train-group*.c): the
                        * audits' memory is counted too (DcTrainPlan.audit_bytes) */
  DcTrainWire gradient_wire;  /* a group's gradients on the wire (f32 by default),
                               * rounded the same way in --simulate-peers */
} DcTrainingRequest;

typedef struct
{
  DcGptConfig      config;
  DcTrainSettings  settings;
  guint            n_threads;   /* resolved: never 0 */
  char            *data;        /* the data spec, "builtin" by default */
  guint64          stop;        /* the step after which the run ends */
  guint            n_ranks;     /* 1 alone, else simulated devices */
  gboolean         group_step;  /* step as a group (compute, combine, apply),
                                 * even of one: simulate_peers was given */
  DcTrainWire      gradient_wire;  /* group step: every rank's gradient and the
                                    * sum rounded to it (bf16) before use */
  DcGptModel      *resume;      /* owned (nullable): the model to continue */
  DcGemmBackend   *backend;     /* borrowed from the context (nullable: CPU) */
  guint64          offload_min;
  DcHfClient      *hub;         /* owned (nullable): the context's client, whose
                                 * server and token a dataset is read with */
  DcGptMemory      memory;      /* what the run needs, every simulated rank's
                                 * gradient included in grads_bytes and total */
  guint64          available;   /* this device's available memory when planned
                                 * (0: unknown) */
  guint64          audit_bytes; /* a group's audits, included in memory.total_bytes
                                 * (0 alone): dc_train_plan_audit_bytes () */
  guint64          resident_device_bytes; /* what the resident Vulkan step keeps in a
                                           * GPU's memory, and in host-visible */
  guint64          resident_host_bytes;   /* memory, if it trains there
                                           * (dc_gpt_vk_train_memory ()) */
  guint            resident_max_batch;    /* the largest batch whose forward and
                                           * backward passes can be resident on
                                           * any Vulkan device (one storage
                                           * binding under 4 GiB; 0: none); above
                                           * it only the Adam step is */
} DcTrainPlan;

typedef struct _DcTrainSession DcTrainSession;

DcTrainPlan     *dc_train_plan_new             (const DcTrainingRequest  *request,
                                                DcGptModel               *resume,
                                                const DcTrainSettings    *resume_settings,
                                                GError                  **error);
gboolean         dc_train_plan_check_memory    (const DcTrainPlan        *self,
                                                GError                  **error);
guint64          dc_train_available_memory     (void);
guint64          dc_train_plan_audit_bytes     (const DcGptMemory        *memory);
void             dc_train_plan_set_context     (DcTrainPlan              *self,
                                                DcContext                *context);
void             dc_train_plan_free            (DcTrainPlan              *self);
DcTrainSession  *dc_train_plan_prepare         (DcTrainPlan              *self,
                                                GCancellable             *cancellable,
                                                GError                  **error);

gboolean         dc_train_session_step         (DcTrainSession           *self,
                                                float                    *loss,
                                                GError                  **error);
DcGptModel      *dc_train_session_get_model    (DcTrainSession           *self);
DcGptTrainer    *dc_train_session_get_trainer  (DcTrainSession           *self);
DcGptTrainer    *dc_train_session_get_audit_trainer (DcTrainSession        *self,
                                                     GError               **error);
gboolean         dc_train_session_used_fallback (DcTrainSession          *self);
guint            dc_train_session_get_n_ranks  (DcTrainSession           *self);
gboolean         dc_train_session_round        (DcTrainSession           *self,
                                                float                    *values,
                                                gsize                     n,
                                                GError                  **error);
gboolean         dc_train_session_round_gradient (DcTrainSession         *self,
                                                  float                  *grads,
                                                  guint                   n_ranks,
                                                  GError                **error);
void             dc_train_session_free         (DcTrainSession           *self);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcTrainPlan, dc_train_plan_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcTrainSession, dc_train_session_free)

G_END_DECLS
