/* dc-mesh-error.h: the mesh layer's error domain.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define DC_MESH_ERROR (dc_mesh_error_quark ())

/**
 * DcMeshError:
 * @DC_MESH_ERROR_MALFORMED: a frame or message from a peer broke the protocol
 * @DC_MESH_ERROR_UNSUPPORTED: a peer speaks a protocol version this build does not
 * @DC_MESH_ERROR_TOO_LARGE: a declared size exceeds a limit
 * @DC_MESH_ERROR_MISSING_PLUGINS: GStreamer elements the mesh needs are missing
 * @DC_MESH_ERROR_SIGNALING: the signaling service failed or refused us
 * @DC_MESH_ERROR_AUTH: a message failed room authentication
 * @DC_MESH_ERROR_DECLINED: the room's host declined this device
 * @DC_MESH_ERROR_NO_ROOM: no room exists for the code and creating one was not allowed
 * @DC_MESH_ERROR_PEER: a peer connection failed
 */
typedef enum
{
  DC_MESH_ERROR_MALFORMED,
  DC_MESH_ERROR_UNSUPPORTED,
  DC_MESH_ERROR_TOO_LARGE,
  DC_MESH_ERROR_MISSING_PLUGINS,
  DC_MESH_ERROR_SIGNALING,
  DC_MESH_ERROR_AUTH,
  DC_MESH_ERROR_DECLINED,
  DC_MESH_ERROR_NO_ROOM,
  DC_MESH_ERROR_PEER,
} DcMeshError;

GQuark dc_mesh_error_quark (void);

G_END_DECLS
