/* dc-group-page.h: the Devices view: this device's group and its peers.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <adwaita.h>

#include "mesh/dc-group.h"

G_BEGIN_DECLS

#define DC_TYPE_GROUP_PAGE (dc_group_page_get_type ())

G_DECLARE_FINAL_TYPE (DcGroupPage, dc_group_page, DC, GROUP_PAGE, AdwBin)

void     dc_group_page_set_group  (DcGroupPage *self,
                                   DcGroup     *group);
DcGroup *dc_group_page_get_group  (DcGroupPage *self);
void     dc_group_page_set_settings (DcGroupPage *self,
                                     GSettings   *settings);

G_END_DECLS
