/* dc-pt-writer.h: writes PyTorch checkpoint files (.pt) that
 * torch.load (path, weights_only=True) opens.
 *
 * The value is emitted as a pickle (protocol 2) through a small builder, with
 * float32 tensors as torch._utils._rebuild_tensor_v2 calls over "storages"
 * (raw little-endian data in archive/data/N). Only what weights_only allows
 * is ever written: dicts (plain or collections.OrderedDict), str, int,
 * bool and contiguous float32 tensors. No pickle floats: torch 1.13's
 * weights_only loader (Debian 12) refuses BINFLOAT, so a float setting is
 * written as a 0-dimensional float32 tensor. docs/ARCHITECTURE.md ("Checkpoint format") has the layout.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

#define DC_PT_MAX_DIMS 8

typedef struct _DcPtWriter DcPtWriter;

DcPtWriter *dc_pt_writer_new          (void);
void        dc_pt_writer_free         (DcPtWriter    *self);
void        dc_pt_writer_begin_dict   (DcPtWriter    *self,
                                       gboolean       ordered);
void        dc_pt_writer_end_dict     (DcPtWriter    *self);
void        dc_pt_writer_string       (DcPtWriter    *self,
                                       const char    *value);
void        dc_pt_writer_int          (DcPtWriter    *self,
                                       gint64         value);
void        dc_pt_writer_bool         (DcPtWriter    *self,
                                       gboolean       value);
/* data is a contiguous row-major float32 array of the given shape; it is copied. */
void        dc_pt_writer_tensor_f32   (DcPtWriter    *self,
                                       const float   *data,
                                       guint          n_dims,
                                       const gint64  *sizes);
GBytes     *dc_pt_writer_finish       (DcPtWriter    *self,
                                       const char    *archive_name,
                                       GError       **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcPtWriter, dc_pt_writer_free)

G_END_DECLS
