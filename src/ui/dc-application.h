/* dc-application.h
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <adwaita.h>

#include "dc-context.h"
#include "infer/dc-ring-server.h"
#include "mesh/dc-group.h"

G_BEGIN_DECLS

#define DC_TYPE_APPLICATION (dc_application_get_type ())

G_DECLARE_FINAL_TYPE (DcApplication, dc_application, DC, APPLICATION, AdwApplication)

DcApplication *dc_application_new          (void);
GSettings     *dc_application_get_settings (DcApplication *self);
DcGroup       *dc_application_get_group    (DcApplication *self);
DcContext     *dc_application_get_context  (DcApplication *self);
DcRingServer  *dc_application_get_ring_server (DcApplication *self);
void           dc_application_set_group    (DcApplication *self,
                                            DcGroup       *group);

G_END_DECLS
