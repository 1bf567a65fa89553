/* test-json-bounds.c: the size and depth checker that runs before json-glib
 * on every JSON text from outside (suite core).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>
#include <json-glib/json-glib.h>

#include "dc-json-bounds.h"

static gboolean
check (const char *text,
       gsize       max_bytes,
       guint       max_depth,
       int         expected_code)
{
  g_autoptr(GError) error = NULL;
  gboolean ok = dc_json_check_bounds (text, strlen (text), max_bytes, max_depth, &error);

  if (expected_code < 0)
    {
      g_assert_no_error (error);
      g_assert_true (ok);
    }
  else
    {
      g_assert_error (error, DC_JSON_ERROR, expected_code);
      g_assert_false (ok);
      g_test_message ("%s", error->message);
    }
  return ok;
}

static void
test_depth (void)
{
  check ("1", 100, 0, -1);
  check ("\"x\"", 100, 0, -1);
  check ("{}", 100, 0, DC_JSON_ERROR_TOO_DEEP);
  check ("{}", 100, 1, -1);
  check ("[[]]", 100, 1, DC_JSON_ERROR_TOO_DEEP);
  check ("[[]]", 100, 2, -1);
  /* Depth is the deepest point, not the number of brackets. */
  check ("[[],[],{\"a\":[]},[[]]]", 100, 3, -1);
  check ("[[],[],{\"a\":[]},[[[]]]]", 100, 3, DC_JSON_ERROR_TOO_DEEP);
  check ("{\"a\":{\"b\":[1,2,{\"c\":null}]}}", 100, 4, -1);
  check ("{\"a\":{\"b\":[1,2,{\"c\":null}]}}", 100, 3, DC_JSON_ERROR_TOO_DEEP);
  check ("]", 100, 4, DC_JSON_ERROR_INVALID);
  check ("[]]", 100, 4, DC_JSON_ERROR_INVALID);
}

/* Exactly at each limit passes; one over fails. */
static void
test_limits (void)
{
  guint depth = 64;
  g_autoptr(GString) text = g_string_new (NULL);

  for (guint i = 0; i < depth; i++)
    g_string_append_c (text, '[');
  for (guint i = 0; i < depth; i++)
    g_string_append_c (text, ']');
  check (text->str, text->len, depth, -1);
  check (text->str, text->len - 1, depth, DC_JSON_ERROR_TOO_LARGE);
  check (text->str, text->len, depth - 1, DC_JSON_ERROR_TOO_DEEP);
  check ("", 0, 0, -1);
  check ("12345", 5, 0, -1);
  check ("123456", 5, 0, DC_JSON_ERROR_TOO_LARGE);
}

static void
test_strings (void)
{
  /* Brackets in strings do not count, escaped quotes do not end them. */
  check ("[\"[[[[[[[[{{{{\"]", 100, 1, -1);
  check ("[\"\\\"[[[[[[\"]", 100, 1, -1);
  check ("[\"\\\\\",[[]]]", 100, 2, DC_JSON_ERROR_TOO_DEEP);
  check ("[\"\\\\\",[[]]]", 100, 3, -1);
  check ("{\"a]}\":\"}]\"}", 100, 1, -1);
  /* An escaped backslash before a quote ends the string: the brackets after
   * it count. */
  check ("[\"\\\\\"[[]]]", 100, 2, DC_JSON_ERROR_TOO_DEEP);
  /* Unterminated strings, and a text ending on a backslash. */
  check ("[\"abc", 100, 4, DC_JSON_ERROR_INVALID);
  check ("\"abc\\\"", 100, 4, DC_JSON_ERROR_INVALID);
  check ("\"abc\\", 100, 4, DC_JSON_ERROR_INVALID);
  /* Quotes json-glib might read where the checker would not: single
   * quotes and comments are refused outright. */
  check ("['\"', [[[[[[]]]]]], '\"']", 100, 1, DC_JSON_ERROR_INVALID);
  check ("/* \" */ [[[[]]]] /* \" */", 100, 1, DC_JSON_ERROR_INVALID);
  check ("[\"a\nb\"]", 100, 1, DC_JSON_ERROR_INVALID);
  check ("[\"a\\\nb\"]", 100, 1, DC_JSON_ERROR_INVALID);
  check ("[true, false, null, -1.5e+3]", 100, 1, -1);
}

/* Only the escapes JSON defines pass, and only UTF-8 text: json-glib reads
 * `\7` as an octal byte and never checks UTF-8, so a string that is not
 * UTF-8 reached g_regex_new and PCRE2 read past it (fuzz-tokenizer-json). */
static void
test_escapes_and_utf8 (void)
{
  check ("[\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u00e9 \\uD83D\\uDE00\"]", 100, 1, -1);
  check ("[\"a\\777b\"]", 100, 1, DC_JSON_ERROR_INVALID);
  check ("[\"a\\x41\"]", 100, 1, DC_JSON_ERROR_INVALID);
  check ("[\"a\\u12\"]", 100, 1, DC_JSON_ERROR_INVALID);
  check ("[\"a\\u12G4\"]", 100, 1, DC_JSON_ERROR_INVALID);
  check ("[\"caf\xc3\xa9\"]", 100, 1, -1);
  check ("[\"caf\xc3\"]", 100, 1, DC_JSON_ERROR_INVALID);
  check ("[\"\xff\"]", 100, 1, DC_JSON_ERROR_INVALID);
}

static void
test_nul (void)
{
  g_autoptr(GError) error = NULL;

  g_assert_false (dc_json_check_bounds ("[\"a\0[[[[\"]", 11, 100, 1, &error));
  g_assert_error (error, DC_JSON_ERROR, DC_JSON_ERROR_INVALID);
  g_clear_error (&error);
  g_assert_false (dc_json_check_bounds ("[1]\0[[[[", 8, 100, 1, &error));
  g_assert_error (error, DC_JSON_ERROR, DC_JSON_ERROR_INVALID);
}

/* The case that crashes json-glib 1.6 unchecked: 200 KB of brackets, also
 * inside a string where they are harmless. */
static void
test_parse_deep (void)
{
  gsize n = 200 * 1000;
  g_autofree char *deep = g_strnfill (n, '[');
  g_autofree char *quoted = g_strdup_printf ("[\"%s\"]", deep);
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) node = NULL;

  node = dc_json_parse_bounded (deep, -1, 256 * 1024, 64, &error);
  g_assert_error (error, DC_JSON_ERROR, DC_JSON_ERROR_TOO_DEEP);
  g_assert_null (node);
  g_clear_error (&error);

  node = dc_json_parse_bounded (quoted, -1, 256 * 1024, 1, &error);
  g_assert_no_error (error);
  g_assert_true (JSON_NODE_HOLDS_ARRAY (node));
  g_assert_cmpuint (strlen (json_array_get_string_element (json_node_get_array (node), 0)), ==,
                    n);
  g_clear_pointer (&node, json_node_unref);

  node = dc_json_parse_bounded (quoted, -1, n, 1, &error);
  g_assert_error (error, DC_JSON_ERROR, DC_JSON_ERROR_TOO_LARGE);
  g_assert_null (node);
}

static void
test_parse (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) node = NULL;

  node = dc_json_parse_bounded ("{\"a\":[1,2]}", -1, 100, 2, &error);
  g_assert_no_error (error);
  g_assert_cmpint (json_array_get_int_element (json_object_get_array_member (
                     json_node_get_object (node), "a"), 1), ==, 2);
  g_clear_pointer (&node, json_node_unref);

  /* json-glib's own errors come back in the same domain. */
  node = dc_json_parse_bounded ("{\"a\":}", -1, 100, 2, &error);
  g_assert_error (error, DC_JSON_ERROR, DC_JSON_ERROR_INVALID);
  g_assert_null (node);
  g_clear_error (&error);

  node = dc_json_parse_bounded ("  ", -1, 100, 2, &error);
  g_assert_error (error, DC_JSON_ERROR, DC_JSON_ERROR_INVALID);
  g_assert_null (node);
  g_clear_error (&error);

  /* A length stops at the given byte, as json-glib's does. */
  node = dc_json_parse_bounded ("[1][[[[[", 3, 100, 1, &error);
  g_assert_no_error (error);
  g_assert_true (JSON_NODE_HOLDS_ARRAY (node));
}

int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/dc/json/bounds/depth", test_depth);
  g_test_add_func ("/dc/json/bounds/limits", test_limits);
  g_test_add_func ("/dc/json/bounds/strings", test_strings);
  g_test_add_func ("/dc/json/bounds/nul", test_nul);
  g_test_add_func ("/dc/json/bounds/escapes-and-utf8", test_escapes_and_utf8);
  g_test_add_func ("/dc/json/parse/deep", test_parse_deep);
  g_test_add_func ("/dc/json/parse/errors", test_parse);

  return g_test_run ();
}
