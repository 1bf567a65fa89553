/* dc-ring-server.h: this device as a stage of another device's inference
 * ring (`daisychain-cli join --serve-layers`; docs/ARCHITECTURE.md, "The
 * inference ring").
 *
 * It offers its memory and measured speed to every peer; when a head
 * assigns it layers it fetches only their tensors (through its own Hub
 * client and cache), then runs every hop it is sent through them, with a
 * KV cache of its own, and passes the result to the next device of the
 * ring. Hops that are not finite or belong to another model are refused.
 * Main thread; the layers run on a worker thread, except a decoded
 * token's hop after a hop computed in under 8 ms, which runs at once on
 * the main thread (two thread hand-offs fewer a lap).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "dc-context.h"
#include "mesh/dc-group.h"

G_BEGIN_DECLS

#define DC_TYPE_RING_SERVER (dc_ring_server_get_type ())
G_DECLARE_FINAL_TYPE (DcRingServer, dc_ring_server, DC, RING_SERVER, GObject)

DcRingServer *dc_ring_server_new   (DcContext *context,
                                    DcGroup   *group,
                                    guint64    memory_bytes);
/* The speed it offers, measured when it was made (billions of INT8
 * multiply-adds a second). */
double        dc_ring_server_get_gmacs (DcRingServer *self);

/* Decoded tokens' hops (one position) this stage passed on since it was
 * assigned: how many, and per hop the wait from its arrival on the main
 * thread to the start of its computation, the computation, and from its
 * end to the send to the next device, in ms. */
guint         dc_ring_server_get_hop_times (DcRingServer *self,
                                            double       *queue_ms,
                                            double       *compute_ms,
                                            double       *send_ms);

/* Tests: offer SPEED instead of the measured one (before any peer joins). */
void          _dc_ring_server_set_gmacs (DcRingServer *self,
                                         double        gmacs);

/* Measures this device's INT8 speed: a short product on BACKEND. */
double        dc_ring_measure_gmacs (DcGemmBackend *backend);

/* The memory a device offers by default: half of what is installed. */
guint64       dc_ring_default_memory_bytes (void);

G_END_DECLS
