/* dc-context.h: what the jobs of one front end share.
 *
 * Each front end makes one (DcApplication at startup, daisychain-cli per
 * command) and hands it down: the app's window takes it as a construct-only
 * property and gives it to its pages; the CLI passes it to the command. It
 * owns the GEMM backend chosen for this device (opened once, its kernels'
 * init gates run once, with the probe hash it gives), the Hugging Face
 * client (and its token), and the device's group. It lives at src/ root, not
 * in src/train/, because the inference session (src/infer/) shares the same
 * backend, client and group; it sits above engine/, data/ and mesh/ and is
 * used by train/, infer/, ui/ and cli/.
 *
 * Main thread only, except the backend: a training worker borrows it while
 * it runs (one user at a time, docs/ARCHITECTURE.md).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "dc-types.h"
#include "data/dc-hf-client.h"
#include "engine/dc-gemm-backend.h"
#include "mesh/dc-group.h"
#include "mesh/dc-mesh-protocol.h"

G_BEGIN_DECLS

#define DC_TYPE_CONTEXT (dc_context_get_type ())

G_DECLARE_FINAL_TYPE (DcContext, dc_context, DC, CONTEXT, GObject)

DcContext     *dc_context_new                 (DcBackendKind   kind,
                                               GError        **error);
DcContext     *dc_context_new_for_device      (DcBackendKind   kind,
                                               const char     *device_id,
                                               GError        **error);
DcContext     *dc_context_new_for_preference  (const char     *preference);
DcContext     *dc_context_new_for_settings    (const char     *preference,
                                               const char     *device_id);
void           dc_context_list_vulkan_devices (GStrv          *ids,
                                               GStrv          *labels);
void           dc_context_get_vulkan_devices  (DcContext           *self,
                                               const char * const **ids,
                                               const char * const **labels);
DcGemmBackend *dc_context_get_backend         (DcContext      *self);
DcBackendKind  dc_context_get_backend_kind    (DcContext      *self);
const char    *dc_context_get_device_name     (DcContext      *self);
const char    *dc_context_get_device_id       (DcContext      *self);
const char    *dc_context_get_kernel_name     (DcContext      *self);
const char    *dc_context_get_backend_note    (DcContext      *self);
const char    *dc_context_get_probe_hash      (DcContext      *self);
guint64        dc_context_get_offload_min     (DcContext      *self);
DcHfClient    *dc_context_get_hf_client       (DcContext      *self);
DcGroup       *dc_context_get_group           (DcContext      *self);
void           dc_context_set_group           (DcContext      *self,
                                               DcGroup        *group);
DcMeshHello   *dc_context_new_hello           (DcContext      *self,
                                               const char     *name);

G_END_DECLS
