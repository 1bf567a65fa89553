/* dc-generate.h: text generation from a trained model.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

#include "dc-gpt-model.h"

G_BEGIN_DECLS

#define DC_GENERATE_MAX_TOKENS 4096

gboolean dc_generate (const DcGptModel  *model,
                      const guint8      *prompt,
                      gsize              prompt_len,
                      guint              n_tokens,
                      float              temperature,
                      guint64            seed,
                      GByteArray        *out,
                      GError           **error);

G_END_DECLS
