/* dc-corpus.c: the built-in training corpus, always available offline.
 *
 * The text is a GResource of libdc-core. It is looked up in the resource
 * object directly (not the global registry), which also keeps the linker
 * from dropping the resource out of the static library.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-data"

#include "config.h"

#include "dc-corpus.h"

#include <gio/gio.h>

#include "dc-data-resources.h"

/**
 * dc_corpus_dup_builtin:
 *
 * Returns: (transfer full): the corpus, UTF-8 text
 */
GBytes *
dc_corpus_dup_builtin (void)
{
  g_autoptr(GError) error = NULL;
  GBytes *bytes = g_resource_lookup_data (dc_data_get_resource (),
                                          RESOURCE_BASE "/data/corpus/persuasion.txt",
                                          G_RESOURCE_LOOKUP_FLAGS_NONE, &error);

  /* The resource is compiled in: failing here is a build defect. */
  g_assert_no_error (error);
  return bytes;
}
