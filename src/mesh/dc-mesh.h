/* dc-mesh.h: this device's group: its room, its signaling link and one
 * DcPeer per other device. Main thread.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "dc-peer.h"

G_BEGIN_DECLS

/**
 * DcMeshApprove:
 * @DC_MESH_APPROVE_ASK: emit ::approval-requested and wait for
 *   dc_mesh_answer_request()
 * @DC_MESH_APPROVE_ALL: the host admits every authenticated newcomer
 * @DC_MESH_APPROVE_NONE: the host declines every newcomer
 */
typedef enum
{
  DC_MESH_APPROVE_ASK,
  DC_MESH_APPROVE_ALL,
  DC_MESH_APPROVE_NONE,
} DcMeshApprove;

typedef struct
{
  char          *signal_url;       /* ws:// or wss:// URL of the signaling service */
  char          *room_code;
  char          *room_id_override; /* tests only: present this id with the code's key */
  char          *fingerprint_override; /* tests only: claim this certificate when asking */
  gboolean       create;           /* become host when the room does not exist */
  DcMeshApprove  approve;
  DcMeshHello   *hello;            /* what this device tells its peers */
  DcPeerConfig   peer;
  /* Never replace a slow connection with a new one (docs/ARCHITECTURE.md,
   * "Slow sending"): for `bench channel`, which measures one; the
   * environment's DC_MESH_RENEW=0 does the same for a whole process. */
  gboolean       no_renewal;
} DcMeshConfig;

void dc_mesh_config_clear (DcMeshConfig *config);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (DcMeshConfig, dc_mesh_config_clear)

gboolean dc_mesh_check_plugins (GError **error);

/* A device the host declined gets no new dialog for this long (its
 * certificate, and its address, are refused): long enough that a person is not
 * asked twice in a row, short enough that a wrong click is soon undone. */
#define DC_MESH_DECLINE_COOLDOWN_S        60
/* Requests waiting for the host from one address: a household or office
 * behind one NAT rarely asks more at once; more is a flood of dialogs. */
#define DC_MESH_MAX_PENDING_PER_ADDRESS   4
/* Declines remembered for the cool-down: far more than a person answers in
 * a minute, small enough that a flood of certificates costs no memory. */
#define DC_MESH_MAX_DECLINED              256

#define DC_TYPE_MESH (dc_mesh_get_type ())
G_DECLARE_FINAL_TYPE (DcMesh, dc_mesh, DC, MESH, GObject)

DcMesh    *dc_mesh_new            (const DcMeshConfig  *config);
void       dc_mesh_start          (DcMesh              *self);
void       dc_mesh_leave          (DcMesh              *self);
void       dc_mesh_answer_request (DcMesh              *self,
                                   const char          *id,
                                   gboolean             accept);
GPtrArray *dc_mesh_dup_peers      (DcMesh              *self);
guint      dc_mesh_get_n_peers    (DcMesh              *self);
/* dc_mesh_flush ()'s callback. */
typedef void (*DcMeshFlushed) (gpointer user_data);

void       dc_mesh_flush          (DcMesh              *self,
                                   guint                timeout_ms,
                                   DcMeshFlushed        done,
                                   gpointer             user_data);
void       dc_mesh_get_slow_sending (DcMesh            *self,
                                     guint             *episodes,
                                     gint64            *slow_us);
gboolean   dc_mesh_is_host        (DcMesh              *self);
const char *dc_mesh_get_id        (DcMesh              *self);
guint      dc_mesh_get_renewals  (DcMesh              *self);
const char *dc_mesh_get_address   (DcMesh              *self);
gboolean   dc_mesh_send_object    (DcMesh              *self,
                                   guint                type,
                                   const DcMeshChunk   *info,
                                   GBytes              *object,
                                   guint               *n_peers,
                                   GError             **error);

G_END_DECLS
