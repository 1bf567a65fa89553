/* dc-corpus.h: the built-in training corpus, always available offline.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define DC_CORPUS_NAME "Persuasion (Jane Austen, 1817; public domain)"

GBytes *dc_corpus_dup_builtin (void);

G_END_DECLS
