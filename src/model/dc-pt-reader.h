/* dc-pt-reader.h: reads the .pt subset that dc-pt-writer produces.
 *
 * A checkpoint is untrusted input. The pickle is run by a tiny stack machine
 * that knows only the opcodes of dc-pt-opcodes.h and the globals
 * collections.OrderedDict, torch._utils._rebuild_tensor_v2 and
 * torch.FloatStorage; anything else (another opcode, another global, a
 * malformed call, a tensor that does not fit its storage, sizes beyond the
 * limits below) fails with a message naming it. Nothing is ever executed.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "dc-pt-writer.h"

G_BEGIN_DECLS

/* Limits: a checkpoint of the seeds' largest model is a few MB; of the
 * Advanced range's largest (GPT-2 small's shape, 86 M parameters: weights
 * and both Adam moments) 1,032 MB, which 1 GiB still holds with 41 MB for
 * the pickle and the zip headers (test-model-advanced checks it). */
#define DC_PT_MAX_FILE_SIZE   (G_GUINT64_CONSTANT (1) << 30)
#define DC_PT_MAX_PICKLE_SIZE (16 * 1024 * 1024)
#define DC_PT_MAX_DEPTH       32
/* Values created in one pickle. The largest model (12 layers: 444 tensors
 * with both Adam moments, 22 values each) needs about 10,000; 65,536 leaves
 * six times that and bounds the machine to ~17 MB (~260 bytes a value). */
#define DC_PT_MAX_VALUES      65536
#define DC_PT_MAX_DICT_ITEMS  4096
/* Stack height: one dict's key/value pairs in one SETITEMS batch, plus room
 * for the few pending values of the enclosing levels. */
#define DC_PT_MAX_STACK       (2 * DC_PT_MAX_DICT_ITEMS + 256)
/* Tuples are call arguments (6), persistent ids (5) and shapes (at most
 * DC_PT_MAX_DIMS); nothing longer is ever written. */
#define DC_PT_MAX_TUPLE_ITEMS DC_PT_MAX_DIMS

typedef enum
{
  DC_PT_VALUE_BOOL,
  DC_PT_VALUE_INT,
  DC_PT_VALUE_STRING,
  DC_PT_VALUE_TUPLE,
  DC_PT_VALUE_DICT,
  DC_PT_VALUE_TENSOR,
  /* Only inside the machine: a global reference and a storage handle. */
  DC_PT_VALUE_GLOBAL,
  DC_PT_VALUE_STORAGE,
} DcPtValueType;

typedef struct _DcPtValue DcPtValue;

struct _DcPtValue
{
  DcPtValueType type;
  gint64        i;        /* INT, BOOL; STORAGE: element count */
  char         *s;        /* STRING; GLOBAL: "module.name"; TENSOR/STORAGE: storage key */
  GPtrArray    *items;    /* TUPLE: values; DICT: key, value, key, value… (in order) */
  /* TENSOR */
  gint64        offset;
  guint         n_dims;
  gint64        sizes[DC_PT_MAX_DIMS];
  gint64        strides[DC_PT_MAX_DIMS];
};

typedef struct
{
  DcPtValue   *root;
  GHashTable  *storages;  /* key → GBytes */
  char        *archive;   /* the archive's top folder */
} DcPtFile;

DcPtFile        *dc_pt_file_new_from_bytes (GBytes           *bytes,
                                            GError          **error);
DcPtFile        *dc_pt_file_new_from_path  (const char       *path,
                                            GError          **error);
void             dc_pt_file_free           (DcPtFile         *self);

const DcPtValue *dc_pt_value_lookup        (const DcPtValue  *dict,
                                            const char       *key);
gboolean         dc_pt_file_read_tensor    (DcPtFile         *self,
                                            const DcPtValue  *tensor,
                                            const char       *name,
                                            guint             n_dims,
                                            const gint64     *sizes,
                                            float            *out,
                                            GError          **error);
void             dc_pt_value_free          (DcPtValue        *value);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcPtFile, dc_pt_file_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcPtValue, dc_pt_value_free)

G_END_DECLS
