/* dc-hf-model-private.h: DcHfModel internals for tests.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "dc-hf-model.h"

G_BEGIN_DECLS

/* With REPACK, every query packs V's columns from the f32 values instead of
 * taking them from the cache's quantized columns: the tests compare both. */
void _dc_hf_kv_cache_set_repack (DcHfKvCache *cache,
                                 gboolean     repack);

G_END_DECLS
