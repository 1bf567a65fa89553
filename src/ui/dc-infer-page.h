/* dc-infer-page.h: the Infer view.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <adwaita.h>

#include "dc-context.h"
#include "infer/dc-infer-ring.h"
#include "infer/dc-ring-server.h"
#include "infer/dc-model-repo.h"

G_BEGIN_DECLS

#define DC_TYPE_INFER_PAGE (dc_infer_page_get_type ())

G_DECLARE_FINAL_TYPE (DcInferPage, dc_infer_page, DC, INFER_PAGE, AdwBin)

void         dc_infer_page_set_context      (DcInferPage *self,
                                             DcContext   *context);
void         dc_infer_page_set_settings     (DcInferPage *self,
                                             GSettings   *settings);
void         dc_infer_page_set_repo         (DcInferPage *self,
                                             DcModelRepo *repo);
DcModelRepo *dc_infer_page_get_repo         (DcInferPage *self);
void         dc_infer_page_set_prompt       (DcInferPage *self,
                                             const char  *prompt);
char        *dc_infer_page_dup_output       (DcInferPage *self);
const char  *dc_infer_page_get_status       (DcInferPage *self);
const char  *dc_infer_page_get_held         (DcInferPage *self);
guint        dc_infer_page_get_queue_length (DcInferPage *self);
gboolean     dc_infer_page_is_busy          (DcInferPage *self);

/* The ring display: the plan (per device: layers, MB, ms per token), each
 * device's download, the ring's hops and tokens per second, the Verify
 * result. set_ring follows a ring's events and session; the others set the
 * display directly (NAMES: one per stage of PLAN, in plan order). */
void         dc_infer_page_set_ring         (DcInferPage      *self,
                                             DcInferRing      *ring);
void         dc_infer_page_show_ring_plan   (DcInferPage      *self,
                                             const DcRingPlan *plan,
                                             const char * const *names);
void         dc_infer_page_set_ring_downloaded (DcInferPage   *self,
                                                guint          stage,
                                                guint64        bytes);
void         dc_infer_page_set_ring_rate    (DcInferPage      *self,
                                             guint             tokens,
                                             double            tokens_per_s);
void         dc_infer_page_set_ring_verify  (DcInferPage      *self,
                                             const char       *message);
/* What the ring display shows, one line per row ("title: subtitle"), for tests. */
char        *dc_infer_page_dup_ring_text    (DcInferPage      *self);
double       dc_infer_page_get_ring_fraction (DcInferPage     *self,
                                              guint            stage);

/* Running across the group (Run On): the group's devices hold the layers
 * through a DcInferRing the view makes for its model; SERVER shows this
 * device's share of other devices' runs. */
void         dc_infer_page_set_group        (DcInferPage      *self,
                                             DcGroup          *group);
DcInferRing *dc_infer_page_get_group_ring   (DcInferPage      *self);
void         dc_infer_page_set_ring_server  (DcInferPage      *self,
                                             DcRingServer     *server);
const char  *dc_infer_page_get_serving      (DcInferPage      *self);
/* Tests: the memory this device offers as head (before the model is chosen). */
void         _dc_infer_page_set_ring_memory (DcInferPage      *self,
                                             guint64           bytes);

G_END_DECLS
