/* dc-json-bounds.c: size and nesting limits on untrusted JSON.
 *
 * The checker is a strict JSON lexer that only follows strings and brackets.
 * json-glib 1.6's scanner also knows single-quoted strings and comments; a
 * quote hidden in one of those would make the two disagree about where
 * strings are and let brackets through uncounted. So outside strings the
 * checker accepts only what RFC 8259 allows there (structure, numbers and
 * the literals' letters) and refuses the rest, which json-glib would refuse
 * anyway for strict JSON.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-core"

#include "config.h"

#include "dc-json-bounds.h"

#include <string.h>

G_DEFINE_QUARK (dc-json-error-quark, dc_json_error)

static gboolean
is_plain_outside_string (guchar c)
{
  /* Letters cover true, false, null (and json-glib's clear error for
   * anything else); digits, sign, dot and exponent cover numbers. */
  return g_ascii_isalnum (c) || c == '-' || c == '+' || c == '.'
         || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',' || c == ':';
}

/**
 * dc_json_check_bounds:
 * @text: the untrusted text; need not be nul-terminated
 * @len: its length in bytes
 * @max_bytes: the largest acceptable @len
 * @max_depth: the deepest acceptable nesting of `[` and `{`; `{}` is depth 1
 *
 * Checks @text against the limits without allocating. Brackets inside
 * strings, escaped quotes included, do not count.
 *
 * Returns: %TRUE when json-glib may parse @text
 */
gboolean
dc_json_check_bounds (const char  *text,
                      gsize        len,
                      gsize        max_bytes,
                      guint        max_depth,
                      GError     **error)
{
  const guchar *p = (const guchar *) text;
  gboolean in_string = FALSE;
  guint depth = 0;
  gsize bad_escape_at = 0;

  g_return_val_if_fail (text != NULL || len == 0, FALSE);

  if (len > max_bytes)
    {
      g_set_error (error, DC_JSON_ERROR, DC_JSON_ERROR_TOO_LARGE,
                   "JSON text of %" G_GSIZE_FORMAT " bytes is over the limit of %"
                   G_GSIZE_FORMAT " bytes", len, max_bytes);
      return FALSE;
    }

  for (gsize i = 0; i < len; i++)
    {
      guchar c = p[i];

      if (in_string)
        {
          if (c == '"')
            {
              in_string = FALSE;
            }
          else if (c == '\\')
            {
              /* The escaped character, a quote included, is string content.
               * Only RFC 8259's escapes: json-glib would also read `\7` as
               * an octal byte and hand on strings that are not UTF-8. */
              i++;
              if (i >= len)
                break;
              if (p[i] < 0x20)
                goto control;
              if (p[i] == 'u')
                {
                  for (guint k = 1; k <= 4; k++)
                    if (i + k >= len || !g_ascii_isxdigit (p[i + k]))
                      {
                        bad_escape_at = i;
                        goto escape;
                      }
                  i += 4;
                }
              else if (strchr ("\"\\/bfnrt", p[i]) == NULL)
                {
                  bad_escape_at = i;
                  goto escape;
                }
            }
          else if (c < 0x20)
            {
              /* RFC 8259 wants control characters escaped; refusing raw
               * ones (NUL included) keeps json-glib from ever ending a
               * string, or the text, where the checker did not. */
              goto control;
            }
          continue;
        }

      switch (c)
        {
        case '"':
          in_string = TRUE;
          break;
        case '[':
        case '{':
          if (depth >= max_depth)
            {
              g_set_error (error, DC_JSON_ERROR, DC_JSON_ERROR_TOO_DEEP,
                           "JSON text nests deeper than the limit of %u levels "
                           "(at byte %" G_GSIZE_FORMAT ")", max_depth, i);
              return FALSE;
            }
          depth++;
          break;
        case ']':
        case '}':
          if (depth == 0)
            {
              g_set_error (error, DC_JSON_ERROR, DC_JSON_ERROR_INVALID,
                           "JSON text closes a bracket it never opened (at byte %"
                           G_GSIZE_FORMAT ")", i);
              return FALSE;
            }
          depth--;
          break;
        default:
          if (!is_plain_outside_string (c))
            {
              g_set_error (error, DC_JSON_ERROR, DC_JSON_ERROR_INVALID,
                           "JSON text has an unexpected byte 0x%02x outside strings "
                           "(at byte %" G_GSIZE_FORMAT ")", c, i);
              return FALSE;
            }
          break;
        }
    }

  if (in_string)
    {
      g_set_error_literal (error, DC_JSON_ERROR, DC_JSON_ERROR_INVALID,
                           "JSON text ends inside a string");
      return FALSE;
    }
  /* RFC 8259 text is UTF-8; json-glib does not check it, and its strings
   * go on to GLib calls that assume it (g_regex_new, g_utf8_*). */
  if (!g_utf8_validate_len (text, len, NULL))
    {
      g_set_error_literal (error, DC_JSON_ERROR, DC_JSON_ERROR_INVALID,
                           "JSON text is not valid UTF-8");
      return FALSE;
    }
  return TRUE;

escape:
  g_set_error (error, DC_JSON_ERROR, DC_JSON_ERROR_INVALID,
               "JSON text has an escape JSON does not define (at byte %" G_GSIZE_FORMAT ")",
               bad_escape_at);
  return FALSE;

control:
  g_set_error_literal (error, DC_JSON_ERROR, DC_JSON_ERROR_INVALID,
                       "JSON text has a raw control character inside a string");
  return FALSE;
}

/**
 * dc_json_parse_bounded:
 * @text: the untrusted text
 * @len: its length in bytes, or -1 when @text is nul-terminated
 * @max_bytes: as in dc_json_check_bounds()
 * @max_depth: as in dc_json_check_bounds()
 *
 * Checks @text with dc_json_check_bounds(), then parses it with json-glib.
 *
 * Returns: (transfer full) (nullable): the root node, or %NULL with @error
 *   set (an empty text is an error too)
 */
JsonNode *
dc_json_parse_bounded (const char  *text,
                       gssize       len,
                       gsize        max_bytes,
                       guint        max_depth,
                       GError     **error)
{
  g_autoptr(JsonParser) parser = NULL;
  g_autoptr(GError) local_error = NULL;
  JsonNode *root;

  g_return_val_if_fail (text != NULL || len == 0, NULL);

  if (text == NULL)
    text = "";
  if (len < 0)
    len = (gssize) strnlen (text, max_bytes + 1);
  if (!dc_json_check_bounds (text, (gsize) len, max_bytes, max_depth, error))
    return NULL;

  parser = json_parser_new ();
  if (!json_parser_load_from_data (parser, text, len, &local_error))
    {
      g_set_error (error, DC_JSON_ERROR, DC_JSON_ERROR_INVALID, "%s", local_error->message);
      return NULL;
    }
  root = json_parser_steal_root (parser);
  if (root == NULL)
    {
      g_set_error_literal (error, DC_JSON_ERROR, DC_JSON_ERROR_INVALID, "JSON text is empty");
      return NULL;
    }
  return root;
}
