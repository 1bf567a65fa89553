/* dc-gpt-vk-forward.h: the GPT forward pass resident on a Vulkan device, up
 * to the logits and the loss, bit for bit dc_gpt_run_forward ()'s.
 *
 * Weights and every activation live in one device buffer; the whole pass
 * (embedding, layer norms, quantization, every INT8 product, biases,
 * attention with its softmax, ReLU, residual adds, the tied head, the loss)
 * is recorded once into one command buffer and replayed per call: tokens
 * in, logits and the mean loss out, one submission.
 * shaders/resident-forward.comp and resident-loss.comp hold the operations;
 * the pass is gated when made (each operation on fixed inputs, then a small
 * model's logits and loss against the CPU's).
 *
 * dc_gpt_vk_forward_new_training () records the backward pass after the loss
 * (shaders/resident-backward.comp and the same products, transposed as
 * dc-gpt.c's backward quantizes them): weights and tokens in, every gradient
 * and the loss out, one submission, bit for bit dc_gpt_run_backward ()'s.
 *
 * Not thread-safe: one thread owns it and its Vulkan context.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

#include "dc-gpt-config.h"
#include "engine/dc-vk-context.h"

G_BEGIN_DECLS

typedef struct _DcGptVkForward DcGptVkForward;

/**
 * DcGptVkForwardTimes:
 * @passes: replays
 * @host_ns: time writing the weights and tokens into, and the gradients out
 *   of, the mapped staging buffers (host memory traffic)
 * @device_ns: time from submission to the fence (the weights' upload, every
 *   kernel, the results' download)
 */
typedef struct
{
  guint64 passes;
  guint64 host_ns;
  guint64 device_ns;
} DcGptVkForwardTimes;

/**
 * DcGptVkForwardMemory:
 * @f_bytes: F, one storage-buffer binding (weights, gradients, activations)
 * @q_bytes: the products' int8 operands
 * @e_bytes: their exponents (host-visible)
 * @tokens_bytes: the tokens and targets, and (a training pass) their token
 *   lists: host-visible, and copied to device-local T each replay
 * @staging_bytes: the weights in, the logits or gradients out (host-visible)
 * @device_bytes: device-local: F, Q and T
 * @host_bytes: host-visible: the rest
 *
 * What a resident pass allocates (dc_gpt_vk_forward_measure ()).
 */
typedef struct
{
  guint64 f_bytes;
  guint64 q_bytes;
  guint64 e_bytes;
  guint64 tokens_bytes;
  guint64 staging_bytes;
  guint64 device_bytes;
  guint64 host_bytes;
} DcGptVkForwardMemory;

void            dc_gpt_vk_forward_measure (const DcGptConfig     *config,
                                           guint                  batch,
                                           gboolean               backward,
                                           DcGptVkForwardMemory  *out);
void            dc_gpt_vk_train_memory    (const DcGptConfig     *config,
                                           guint                  batch,
                                           guint64               *device_bytes,
                                           guint64               *host_bytes);
gboolean        dc_gpt_vk_forward_fits    (const DcGptVkForwardMemory  *memory,
                                           guint32                      max_storage_buffer_range,
                                           const char                  *device_name,
                                           GError                     **error);
DcGptVkForward *dc_gpt_vk_forward_new   (const DcGptConfig  *config,
                                         guint               batch,
                                         GError            **error);
void            dc_gpt_vk_forward_free  (DcGptVkForward     *self);
gboolean        dc_gpt_vk_forward_run   (DcGptVkForward     *self,
                                         const float        *params,
                                         const guint8       *inputs,
                                         const guint8       *targets,
                                         float              *logits,
                                         float              *loss,
                                         GError            **error);
DcGptVkForward *dc_gpt_vk_forward_new_training (const DcGptConfig  *config,
                                                guint               batch,
                                                GError            **error);
gboolean        dc_gpt_vk_forward_gradients (DcGptVkForward     *self,
                                             const float        *params,
                                             const guint8       *inputs,
                                             const guint8       *targets,
                                             float              *grads,
                                             float              *loss,
                                             GError            **error);
guint64         dc_gpt_vk_forward_get_n_dispatches (DcGptVkForward *self);
const char     *dc_gpt_vk_forward_get_device_name  (DcGptVkForward *self);
const char     *dc_gpt_vk_forward_get_arithmetic   (DcGptVkForward *self);
const char     *dc_gpt_vk_forward_get_products     (DcGptVkForward *self);
const char     *dc_gpt_vk_forward_get_quantize     (DcGptVkForward *self);
const char     *dc_gpt_vk_forward_get_softmax      (DcGptVkForward *self);
const char     *dc_gpt_vk_forward_get_column_sums  (DcGptVkForward *self);
const char     *dc_gpt_vk_forward_get_fused        (DcGptVkForward *self);
void            dc_gpt_vk_forward_get_times        (DcGptVkForward      *self,
                                                    DcGptVkForwardTimes *out);
gboolean        dc_gpt_vk_forward_coop_offered     (const DcVkFeatures  *features,
                                                    gboolean            *khr,
                                                    char               **why);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcGptVkForward, dc_gpt_vk_forward_free)

G_END_DECLS
