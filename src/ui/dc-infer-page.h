/* dc-infer-page.h
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <adwaita.h>

G_BEGIN_DECLS

#define DC_TYPE_INFER_PAGE (dc_infer_page_get_type ())

G_DECLARE_FINAL_TYPE (DcInferPage, dc_infer_page, DC, INFER_PAGE, AdwBin)

G_END_DECLS
