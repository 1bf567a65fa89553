/* dc-gpt-vk-step.h: the training step resident on a Vulkan device.
 *
 * Stage 1 of issue 15: the optimizer. The weights and both Adam moments live
 * in device memory; the step is recorded once in a command buffer (gradients
 * in, the Adam kernel, the new state out) and replayed, one submission per
 * step. The kernel computes dc_gpt_model_adam_step ()'s bits exactly, in
 * integer arithmetic (shaders/include/f32-exact.glsl), and is gated at
 * start-up against the CPU function. The forward and backward passes are
 * resident too where their own gates pass (dc-gpt-vk-forward.h, the
 * trainer's resident pass), in their own submission; the step then shares
 * their weights and gradients on the device (dc_gpt_vk_step_new_shared ()).
 * docs/ARCHITECTURE.md ("Resident training step") says what is resident and
 * what remains.
 *
 * Not thread-safe: one thread owns a step and its Vulkan context.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

#include "dc-gpt-model.h"
#include "dc-gpt-vk-forward.h"

G_BEGIN_DECLS

typedef struct _DcGptVkStep DcGptVkStep;

/**
 * DcGptVkStepTimes:
 * @steps: optimizer steps replayed
 * @host_ns: time copying gradients into and the state out of the mapped
 *   staging buffers (host memory traffic)
 * @device_ns: time from submission to the fence (transfers and kernel)
 * @state_downloads: times the weights and both Adam moments were read back
 *   (every step unless lazy; the tests count them)
 * @weight_downloads: times the weights alone were read back
 * @uploads: times the host's weights and moments were written to the
 *   device (when made, and when the host changed them)
 * @hashes: state hashes whose pieces were digested on the device
 *   (dc_gpt_vk_step_dup_hashes ())
 *
 * Totals since the step was made; `bench train` reports them.
 */
typedef struct
{
  guint64 steps;
  guint64 host_ns;
  guint64 device_ns;
  guint64 state_downloads;   /* weights and both moments read back */
  guint64 weight_downloads;  /* the weights alone read back */
  guint64 uploads;           /* weights and moments written from the host */
  guint64 hashes;            /* state hashes digested on the device */
} DcGptVkStepTimes;

DcGptVkStep *dc_gpt_vk_step_new              (const DcGptModel  *model,
                                              GError           **error);
DcGptVkStep *dc_gpt_vk_step_new_shared       (const DcGptModel  *model,
                                              DcGptVkForward    *pass,
                                              GError           **error);
void         dc_gpt_vk_step_free             (DcGptVkStep       *self);
gboolean     dc_gpt_vk_step_get_shared       (DcGptVkStep       *self);
void         dc_gpt_vk_step_set_lazy         (DcGptVkStep       *self,
                                              gboolean           lazy);
gboolean     dc_gpt_vk_step_sync_host        (DcGptVkStep       *self,
                                              DcGptModel        *model,
                                              gboolean           moments,
                                              GError           **error);
gboolean     dc_gpt_vk_step_prepare          (DcGptVkStep       *self,
                                              DcGptModel        *model,
                                              GError           **error);
const char  *dc_gpt_vk_step_get_device_name  (DcGptVkStep       *self);
const char  *dc_gpt_vk_step_get_resident     (DcGptVkStep       *self);
const char  *dc_gpt_vk_step_get_arithmetic   (DcGptVkStep       *self);
gboolean     dc_gpt_vk_step_apply_gradients  (DcGptVkStep       *self,
                                              DcGptModel        *model,
                                              const float       *grads,
                                              float              lr,
                                              GError           **error);
gboolean     dc_gpt_vk_step_can_hash         (DcGptVkStep       *self);
gboolean     dc_gpt_vk_step_dup_hashes       (DcGptVkStep       *self,
                                              const DcGptModel  *model,
                                              char             **weights,
                                              char             **optimizer,
                                              GError           **error);
void         dc_gpt_vk_step_get_times        (DcGptVkStep       *self,
                                              DcGptVkStepTimes  *out);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcGptVkStep, dc_gpt_vk_step_free)

G_END_DECLS
