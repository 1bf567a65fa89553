/* fuzz-json-bounds.c: libFuzzer target for the JSON size and depth check.
 *
 * The first input byte picks the depth limit (0–255), the rest is the text;
 * the size limit is fixed. Whatever the checker accepts goes to json-glib,
 * which must not crash, and the tree it builds must be within the limits:
 * that is the property the check exists for (json-glib 1.6 recurses once per
 * bracket and overflows the stack at about 80,000 levels), so a text where
 * the checker and json-glib disagree about strings aborts here.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <json-glib/json-glib.h>

#include "dc-json-bounds.h"

/* Big enough for the fuzzer's inputs to reach json-glib's crash depth. */
#define MAX_BYTES (256 * 1024)

int LLVMFuzzerTestOneInput (const guint8 *data, gsize size);

/* Depth of a parsed tree as the checker counts it: a scalar is 0, each array
 * or object one more than its deepest child. Recursion is bounded by the
 * depth limit (at most 255) once the checker has passed the text. */
static guint
node_depth (JsonNode *node)
{
  guint deepest = 0;

  if (JSON_NODE_HOLDS_ARRAY (node))
    {
      JsonArray *array = json_node_get_array (node);

      for (guint i = 0; i < json_array_get_length (array); i++)
        {
          guint depth = node_depth (json_array_get_element (array, i));

          deepest = MAX (deepest, depth);
        }
      return deepest + 1;
    }
  if (JSON_NODE_HOLDS_OBJECT (node))
    {
      JsonObjectIter iter;
      JsonNode *member;

      json_object_iter_init (&iter, json_node_get_object (node));
      while (json_object_iter_next (&iter, NULL, &member))
        {
          guint depth = node_depth (member);

          deepest = MAX (deepest, depth);
        }
      return deepest + 1;
    }
  return 0;
}

int
LLVMFuzzerTestOneInput (const guint8 *data,
                        gsize         size)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) root = NULL;
  const char *text;
  guint max_depth;
  gsize len;

  if (size < 1)
    return 0;
  max_depth = data[0];
  text = (const char *) data + 1;
  len = size - 1;

  if (!dc_json_check_bounds (text, len, MAX_BYTES, max_depth, &error))
    {
      g_assert (error != NULL && error->domain == DC_JSON_ERROR);
      return 0;
    }
  g_assert_no_error (error);
  g_assert (len <= MAX_BYTES);

  root = dc_json_parse_bounded (text, (gssize) len, MAX_BYTES, max_depth, &error);
  g_assert ((root == NULL) == (error != NULL));
  if (root != NULL)
    g_assert (node_depth (root) <= max_depth);
  return 0;
}
