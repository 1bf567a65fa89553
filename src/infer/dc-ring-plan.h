/* dc-ring-plan.h: which device of a group holds which layers of a model
 * too big for one (docs/ARCHITECTURE.md, "The inference ring").
 *
 * Pure arithmetic on what the devices say about themselves (memory offered,
 * measured speed, kernel probe) and on the model's shape: no network, no
 * model, so it is tested on its own.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The lap budget: a plan whose estimated time per token exceeds this is
 * refused before anything is downloaded (the seed's 120 seconds: past it a
 * 60-token answer takes two hours, which nobody waits for). */
#define DC_RING_PLAN_MAX_LAP_MS 120000.0
/* A room holds at most 64 members (docs/PROTOCOL.md). */
#define DC_RING_PLAN_MAX_DEVICES 64

/**
 * DcRingDevice:
 * @id: the device's member id ("" for this device, the head)
 * @name: its display name
 * @probe_hash: its kernel probe hash (from its hello)
 * @memory_bytes: the memory it offers to the ring
 * @gmacs: its measured speed: billions of INT8 multiply-adds per second
 */
typedef struct
{
  const char *id;
  const char *name;
  const char *probe_hash;
  guint64     memory_bytes;
  double      gmacs;
} DcRingDevice;

/**
 * DcRingShape:
 * @n_layers: the model's layers
 * @layer_bytes: memory one layer takes on a device, its KV cache included
 * @layer_download: bytes of one layer's tensors in the checkpoint
 * @ends_bytes: memory of the embedding, final norm and head
 * @ends_download: their bytes in the checkpoint
 * @layer_macs: multiply-adds of one layer for one token
 * @ends_macs: multiply-adds of the head for one token
 * @hop_ms: the estimated time of one hop between devices
 */
typedef struct
{
  guint    n_layers;
  guint64  layer_bytes;
  guint64  layer_download;
  guint64  ends_bytes;
  guint64  ends_download;
  double   layer_macs;
  double   ends_macs;
  double   hop_ms;
} DcRingShape;

/**
 * DcRingStage:
 * @device: index into the devices given to dc_ring_plan_new()
 * @first: its first layer
 * @last: one past its last layer (@first == @last: no layers)
 * @ends: it holds the embedding, final norm and head (the head)
 * @download_bytes: what it downloads
 * @hold_bytes: what it holds
 * @ms_per_token: its estimated compute per token
 */
typedef struct
{
  guint    device;
  guint    first;
  guint    last;
  gboolean ends;
  guint64  download_bytes;
  guint64  hold_bytes;
  double   ms_per_token;
} DcRingStage;

/**
 * DcRingPlan:
 * @stages: (element-type DcRingStage): in ring order, the head first
 * @excluded: (element-type utf8): one line per device left out, and why
 * @lap_ms: the estimated time per token of the whole ring
 * @hop_ms: the hop cost it assumed (the shape's)
 */
typedef struct
{
  GArray    *stages;
  GPtrArray *excluded;
  double     lap_ms;
  double     hop_ms;
} DcRingPlan;

/* DEVICES[0] is the head. Devices whose probe hash differs from the head's
 * stay out; a head that can hold the whole model runs alone. Fails with a
 * clear message when the devices cannot hold the model or the lap estimate
 * exceeds DC_RING_PLAN_MAX_LAP_MS. */
DcRingPlan *dc_ring_plan_new   (const DcRingShape  *shape,
                                const DcRingDevice *devices,
                                guint               n_devices,
                                GError            **error);
void        dc_ring_plan_free  (DcRingPlan         *plan);
const DcRingStage *dc_ring_plan_get_stage (const DcRingPlan *plan,
                                           guint             i);
guint       dc_ring_plan_get_n_stages (const DcRingPlan *plan);
/* The stage holding LAYER, or -1. */
int         dc_ring_plan_find_layer (const DcRingPlan *plan,
                                     guint             layer);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcRingPlan, dc_ring_plan_free)

G_END_DECLS
