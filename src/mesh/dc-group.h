/* dc-group.h: this device taking part in a group, for the CLI and the
 * application alike.
 *
 * DcGroup orchestrates what DcMesh does not: finding a group on the local
 * network (DcDiscovery), serving signaling in-process when none is found or
 * when asked to create a room (DcSignalServer), announcing that group, and
 * joining a room by code through a signaling URL. It owns at most one DcMesh
 * at a time and re-emits its events. Main thread.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "dc-mesh.h"

G_BEGIN_DECLS

/**
 * DcGroupState:
 * @DC_GROUP_STATE_OFFLINE: in no group, looking for none
 * @DC_GROUP_STATE_SEARCHING: listening for a group on the local network
 * @DC_GROUP_STATE_JOINING: connecting to a room, or waiting for its host's answer
 * @DC_GROUP_STATE_HOST: in a room as its host (approves newcomers)
 * @DC_GROUP_STATE_MEMBER: in a room, admitted by its host
 */
typedef enum
{
  DC_GROUP_STATE_OFFLINE,
  DC_GROUP_STATE_SEARCHING,
  DC_GROUP_STATE_JOINING,
  DC_GROUP_STATE_HOST,
  DC_GROUP_STATE_MEMBER,
} DcGroupState;

GType dc_group_state_get_type (void) G_GNUC_CONST;
#define DC_TYPE_GROUP_STATE (dc_group_state_get_type ())

/* How long a device listens for a group before starting one (plus up to a
 * second at random, so that devices started together rarely both host). */
#define DC_GROUP_DISCOVERY_WAIT_MS 2000
/* How long the byes of a left mesh get before it is dropped. */
#define DC_GROUP_LEAVE_GRACE_MS    200

#define DC_TYPE_GROUP (dc_group_get_type ())
G_DECLARE_FINAL_TYPE (DcGroup, dc_group, DC, GROUP, GObject)

DcGroup      *dc_group_new               (const DcMeshConfig  *config);
gboolean      dc_group_start_discovery   (DcGroup             *self,
                                          guint                port,
                                          const char          *room_code,
                                          GError             **error);
gboolean      dc_group_serve             (DcGroup             *self,
                                          const char          *address,
                                          guint                port,
                                          GError             **error);
gboolean      dc_group_create_room       (DcGroup             *self,
                                          const char          *address,
                                          GError             **error);
gboolean      dc_group_join_room         (DcGroup             *self,
                                          const char          *signal_url,
                                          const char          *room_code,
                                          GError             **error);
void          dc_group_set_serve_address (DcGroup             *self,
                                          const char          *address);
void          dc_group_answer_request    (DcGroup             *self,
                                          const char          *id,
                                          gboolean             accept);
void          dc_group_leave             (DcGroup             *self);
void          dc_group_join_found        (DcGroup             *self,
                                          const char          *url,
                                          const char          *room);

DcGroupState  dc_group_get_state         (DcGroup             *self);
gboolean      dc_group_get_is_host       (DcGroup             *self);
guint         dc_group_get_n_peers       (DcGroup             *self);
const char   *dc_group_get_room_code     (DcGroup             *self);
const char   *dc_group_get_signal_url    (DcGroup             *self);
const char   *dc_group_get_name          (DcGroup             *self);
GListModel   *dc_group_get_peers         (DcGroup             *self);
DcMesh       *dc_group_get_mesh          (DcGroup             *self);
gboolean      dc_group_get_via_lan       (DcGroup             *self);
const char   *dc_group_get_address       (DcGroup             *self);
char         *dc_group_dup_fingerprint   (DcGroup             *self,
                                          gboolean             full);

G_END_DECLS
