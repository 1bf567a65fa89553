/* dc-json-constraint.c: a streaming JSON grammar and the token mask built on it.
 *
 * The grammar is a pushdown automaton: MODE says what may come next, the
 * stack (one bit per level) which containers are open. Every state it can
 * reach has a completion (the distance is finite), so a prefix it accepts
 * can always be finished; that is what lets the mask promise valid output.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-infer"

#include "config.h"

#include "dc-json-constraint.h"

#include <string.h>

enum
{
  M_VALUE,          /* a value must come (top level, after ':', after ',' in an array) */
  M_ARRAY_FIRST,    /* after '[': a value or ']' */
  M_OBJECT_FIRST,   /* after '{': a key or '}' */
  M_KEY,            /* after ',' in an object: a key */
  M_COLON,          /* after a key */
  M_AFTER,          /* after a value inside a container: ',' or its closer */
  M_DONE,           /* the top-level value is complete: whitespace only */
  M_STRING,
  M_ESCAPE,         /* after '\' */
  M_HEX,            /* in \uXXXX; aux digits read */
  M_UTF8,           /* aux continuation bytes left; hex holds the next one's range */
  M_NUM_MINUS,
  M_NUM_ZERO,
  M_NUM_INT,
  M_NUM_DOT,
  M_NUM_FRAC,
  M_NUM_E,
  M_NUM_ESIGN,
  M_NUM_EXP,
  M_LITERAL,        /* flags: which literal; aux: bytes matched */
  M_FAILED,
};

#define FLAG_KEY 1  /* the string being read is an object's key */

static const char *const literals[] = { "true", "false", "null" };

void
dc_json_state_init (DcJsonState *state)
{
  memset (state, 0, sizeof *state);
  state->mode = M_VALUE;
}

static inline gboolean
is_ws (guint8 c)
{
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static inline int
hex_value (guint8 c)
{
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

static inline gboolean
top_is_object (const DcJsonState *s)
{
  return s->depth > 0 && (s->stack >> (s->depth - 1)) & 1;
}

static inline void
end_value (DcJsonState *s)
{
  s->mode = s->depth == 0 ? M_DONE : M_AFTER;
}

static inline gboolean
push (DcJsonState *s,
      gboolean     object)
{
  if (s->depth >= DC_JSON_CONSTRAINT_MAX_DEPTH)
    return FALSE;
  if (object)
    s->stack |= G_GUINT64_CONSTANT (1) << s->depth;
  else
    s->stack &= ~(G_GUINT64_CONSTANT (1) << s->depth);
  s->depth++;
  s->mode = object ? M_OBJECT_FIRST : M_ARRAY_FIRST;
  return TRUE;
}

static inline void
pop (DcJsonState *s)
{
  s->depth--;
  s->stack &= ~(G_GUINT64_CONSTANT (1) << s->depth);
  end_value (s);
}

static gboolean
start_value (DcJsonState *s,
             guint8       c)
{
  switch (c)
    {
    case '{':
      return push (s, TRUE);
    case '[':
      return push (s, FALSE);
    case '"':
      s->mode = M_STRING;
      s->flags = 0;
      return TRUE;
    case '-':
      s->mode = M_NUM_MINUS;
      return TRUE;
    case '0':
      s->mode = M_NUM_ZERO;
      return TRUE;
    case 't':
    case 'f':
    case 'n':
      s->mode = M_LITERAL;
      s->flags = c == 't' ? 0 : c == 'f' ? 1 : 2;
      s->aux = 1;
      return TRUE;
    default:
      if (c >= '1' && c <= '9')
        {
          s->mode = M_NUM_INT;
          return TRUE;
        }
      return FALSE;
    }
}

/* The first byte of a multi-byte UTF-8 sequence: how many follow and the
 * range of the next (which rules out overlong forms and surrogates). */
static gboolean
start_utf8 (DcJsonState *s,
            guint8       c)
{
  guint8 lo = 0x80, hi = 0xbf, n;

  if (c >= 0xc2 && c <= 0xdf)
    n = 1;
  else if (c >= 0xe0 && c <= 0xef)
    {
      n = 2;
      if (c == 0xe0)
        lo = 0xa0;
      else if (c == 0xed)
        hi = 0x9f;
    }
  else if (c >= 0xf0 && c <= 0xf4)
    {
      n = 3;
      if (c == 0xf0)
        lo = 0x90;
      else if (c == 0xf4)
        hi = 0x8f;
    }
  else
    return FALSE;
  s->mode = M_UTF8;
  s->aux = n;
  s->hex = (guint16) (lo | hi << 8);
  return TRUE;
}

static gboolean
feed_byte (DcJsonState *s,
           guint8       c)
{
  switch (s->mode)
    {
    case M_VALUE:
      return is_ws (c) || start_value (s, c);

    case M_ARRAY_FIRST:
      if (is_ws (c))
        return TRUE;
      if (c == ']')
        {
          pop (s);
          return TRUE;
        }
      return start_value (s, c);

    case M_OBJECT_FIRST:
    case M_KEY:
      if (is_ws (c))
        return TRUE;
      if (c == '}' && s->mode == M_OBJECT_FIRST)
        {
          pop (s);
          return TRUE;
        }
      if (c != '"')
        return FALSE;
      s->mode = M_STRING;
      s->flags = FLAG_KEY;
      return TRUE;

    case M_COLON:
      if (is_ws (c))
        return TRUE;
      if (c != ':')
        return FALSE;
      s->mode = M_VALUE;
      return TRUE;

    case M_AFTER:
      if (is_ws (c))
        return TRUE;
      if (c == ',')
        {
          s->mode = top_is_object (s) ? M_KEY : M_VALUE;
          return TRUE;
        }
      if (c == (top_is_object (s) ? '}' : ']'))
        {
          pop (s);
          return TRUE;
        }
      return FALSE;

    case M_DONE:
      return is_ws (c);

    case M_STRING:
      if (c == '"')
        {
          if (s->flags & FLAG_KEY)
            s->mode = M_COLON;
          else
            end_value (s);
          return TRUE;
        }
      if (c == '\\')
        {
          s->mode = M_ESCAPE;
          return TRUE;
        }
      if (c < 0x20)
        return FALSE;
      if (c < 0x80)
        return TRUE;
      return start_utf8 (s, c);

    case M_ESCAPE:
      if (c == 'u')
        {
          s->mode = M_HEX;
          s->aux = 0;
          s->hex = 0;
          return TRUE;
        }
      if (strchr ("\"\\/bfnrt", c) == NULL || c == '\0')
        return FALSE;
      s->mode = M_STRING;
      return TRUE;

    case M_HEX:
      {
        int v = hex_value (c);

        if (v < 0)
          return FALSE;
        s->hex = (guint16) (s->hex << 4 | v);
        s->aux++;
        /* \uD800-\uDFFF: a lone half is refused by json-glib, and a pair is
         * the raw character written longer; known after two digits. */
        if (s->aux == 2 && s->hex >= 0xd8 && s->hex <= 0xdf)
          return FALSE;
        if (s->aux == 4)
          s->mode = M_STRING;
        return TRUE;
      }

    case M_UTF8:
      if (c < (s->hex & 0xff) || c > (s->hex >> 8))
        return FALSE;
      s->hex = 0x80 | 0xbf << 8;
      if (--s->aux == 0)
        s->mode = M_STRING;
      return TRUE;

    case M_NUM_MINUS:
      if (c == '0')
        s->mode = M_NUM_ZERO;
      else if (c >= '1' && c <= '9')
        s->mode = M_NUM_INT;
      else
        return FALSE;
      return TRUE;

    case M_NUM_INT:
      if (c >= '0' && c <= '9')
        return TRUE;
      G_GNUC_FALLTHROUGH;
    case M_NUM_ZERO:
      if (c == '.')
        {
          s->mode = M_NUM_DOT;
          return TRUE;
        }
      G_GNUC_FALLTHROUGH;
    case M_NUM_FRAC:
      if (s->mode == M_NUM_FRAC && c >= '0' && c <= '9')
        return TRUE;
      if (c == 'e' || c == 'E')
        {
          s->mode = M_NUM_E;
          return TRUE;
        }
      G_GNUC_FALLTHROUGH;
    case M_NUM_EXP:
      if (s->mode == M_NUM_EXP && c >= '0' && c <= '9')
        return TRUE;
      /* The number ended: the byte belongs to what follows it. */
      end_value (s);
      return feed_byte (s, c);

    case M_NUM_DOT:
      if (c < '0' || c > '9')
        return FALSE;
      s->mode = M_NUM_FRAC;
      return TRUE;

    case M_NUM_E:
      if (c == '+' || c == '-')
        {
          s->mode = M_NUM_ESIGN;
          return TRUE;
        }
      G_GNUC_FALLTHROUGH;
    case M_NUM_ESIGN:
      if (c < '0' || c > '9')
        return FALSE;
      s->mode = M_NUM_EXP;
      return TRUE;

    case M_LITERAL:
      {
        const char *lit = literals[s->flags];

        if (c != (guint8) lit[s->aux])
          return FALSE;
        if (lit[++s->aux] == '\0')
          end_value (s);
        return TRUE;
      }

    default:
      return FALSE;
    }
}

gboolean
dc_json_state_feed (DcJsonState  *state,
                    const guint8 *bytes,
                    gsize         len)
{
  g_return_val_if_fail (state != NULL, FALSE);
  g_return_val_if_fail (bytes != NULL || len == 0, FALSE);

  for (gsize i = 0; i < len; i++)
    if (state->mode == M_FAILED || !feed_byte (state, bytes[i]))
      {
        state->mode = M_FAILED;
        return FALSE;
      }
  return state->mode != M_FAILED;
}

gboolean
dc_json_state_is_failed (const DcJsonState *state)
{
  return state->mode == M_FAILED;
}

gboolean
dc_json_state_is_complete (const DcJsonState *state)
{
  switch (state->mode)
    {
    case M_DONE:
      return TRUE;
    case M_NUM_ZERO:
    case M_NUM_INT:
    case M_NUM_FRAC:
    case M_NUM_EXP:
      return state->depth == 0;
    default:
      return FALSE;
    }
}

/* What the innermost unfinished thing still needs, before the closers;
 * its length is the distance less the depth. */
static const char *
local_closing (const DcJsonState *s,
               guint8            *utf8_first)
{
  *utf8_first = 0;
  switch (s->mode)
    {
    case M_VALUE:
    case M_NUM_MINUS:
    case M_NUM_DOT:
    case M_NUM_E:
    case M_NUM_ESIGN:
      return "0";
    case M_KEY:
      return "\"\":0";
    case M_COLON:
      return ":0";
    case M_STRING:
      return s->flags & FLAG_KEY ? "\":0" : "\"";
    case M_ESCAPE:
      return s->flags & FLAG_KEY ? "n\":0" : "n\"";
    case M_HEX:
      {
        static const char *const key[] = { "0000\":0", "000\":0", "00\":0", "0\":0" };
        static const char *const value[] = { "0000\"", "000\"", "00\"", "0\"" };

        return (s->flags & FLAG_KEY ? key : value)[s->aux];
      }
    case M_UTF8:
      *utf8_first = (guint8) (s->hex & 0xff);
      return s->flags & FLAG_KEY ? "\":0" : "\"";
    case M_LITERAL:
      return literals[s->flags] + s->aux;
    default:
      return "";
    }
}

guint
dc_json_state_distance (const DcJsonState *state)
{
  guint8 utf8_first;
  gsize local;

  g_return_val_if_fail (state != NULL, G_MAXUINT);

  if (state->mode == M_FAILED)
    return G_MAXUINT;
  if (state->mode == M_DONE || dc_json_state_is_complete (state))
    return 0;
  local = strlen (local_closing (state, &utf8_first));
  if (state->mode == M_UTF8)
    local += state->aux;
  /* Every open container closes with one byte (an empty object's '{' too). */
  return (guint) local + state->depth;
}

void
dc_json_state_append_closing (const DcJsonState *state,
                              GString           *out)
{
  guint8 utf8_first;
  const char *local;

  g_return_if_fail (state != NULL && out != NULL);
  g_return_if_fail (state->mode != M_FAILED);

  if (dc_json_state_is_complete (state))
    return;
  local = local_closing (state, &utf8_first);
  if (state->mode == M_UTF8)
    {
      g_string_append_c (out, (char) utf8_first);
      for (guint i = 1; i < state->aux; i++)
        g_string_append_c (out, (char) 0x80);
    }
  g_string_append (out, local);
  for (guint d = state->depth; d > 0; d--)
    g_string_append_c (out, (state->stack >> (d - 1)) & 1 ? '}' : ']');
}

/* ---------------------------------------------------------------------- */

struct _DcJsonConstraint
{
  guint         vocab_size;
  guint8      **bytes;      /* vocab_size entries; NULL: never text */
  guint16      *lengths;    /* capped: tokens are short (the longest on the Hub ~ 256 bytes) */
  /* 1: the bytes are plain string content (valid UTF-8, no control
   * character, no '"' or '\'): inside a string they change nothing, so
   * one test decides them all, and most of a vocabulary is such tokens. */
  guint8       *plain;
  /* Ids whose first byte is B, so a state that cannot take B rejects them in one test. */
  guint32      *by_first;   /* ids, grouped by first byte */
  guint32       first_start[257];
  gint64        end_id;
  DcJsonState   state;
};

/* A token's bytes beyond this are not text a model writes at once (the
 * longest tokens on the Hub are runs of ~256 spaces or dashes); longer
 * ones are never allowed, which keeps the lengths in 16 bits. */
#define MAX_TOKEN_BYTES 4096

static DcJsonConstraint *
constraint_new (guint vocab_size,
                gint64 end_id)
{
  DcJsonConstraint *self = g_new0 (DcJsonConstraint, 1);

  self->vocab_size = vocab_size;
  self->bytes = g_new0 (guint8 *, vocab_size);
  self->lengths = g_new0 (guint16, vocab_size);
  self->plain = g_new0 (guint8, vocab_size);
  self->by_first = g_new0 (guint32, MAX (vocab_size, 1));
  self->end_id = end_id >= 0 && (guint64) end_id < vocab_size ? end_id : -1;
  dc_json_state_init (&self->state);
  return self;
}

/* Groups the ids that have bytes by their first byte (a counting sort). */
static void
constraint_index (DcJsonConstraint *self)
{
  guint count[256] = { 0 }, fill[256];

  for (guint i = 0; i < self->vocab_size; i++)
    if (self->bytes[i] != NULL)
      count[self->bytes[i][0]]++;
  self->first_start[0] = 0;
  for (guint b = 0; b < 256; b++)
    {
      self->first_start[b + 1] = self->first_start[b] + count[b];
      fill[b] = self->first_start[b];
    }
  for (guint i = 0; i < self->vocab_size; i++)
    if (self->bytes[i] != NULL)
      self->by_first[fill[self->bytes[i][0]]++] = i;
}

static void
constraint_set (DcJsonConstraint *self,
                guint             id,
                const guint8     *bytes,
                gsize             len)
{
  if (bytes == NULL || len == 0 || len > MAX_TOKEN_BYTES || (gint64) id == self->end_id)
    return;
  self->bytes[id] = g_memdup2 (bytes, len);
  self->lengths[id] = (guint16) len;
  self->plain[id] = g_utf8_validate_len ((const char *) bytes, len, NULL);
  for (gsize i = 0; i < len && self->plain[id]; i++)
    if (bytes[i] < 0x20 || bytes[i] == '"' || bytes[i] == '\\')
      self->plain[id] = 0;
}

DcJsonConstraint *
dc_json_constraint_new (GPtrArray *tokens,
                        gint64     end_id)
{
  DcJsonConstraint *self;

  g_return_val_if_fail (tokens != NULL, NULL);

  self = constraint_new (tokens->len, end_id);
  for (guint i = 0; i < tokens->len; i++)
    {
      GBytes *b = g_ptr_array_index (tokens, i);
      gsize len = 0;
      const guint8 *data = b != NULL ? g_bytes_get_data (b, &len) : NULL;

      constraint_set (self, i, data, len);
    }
  constraint_index (self);
  return self;
}

DcJsonConstraint *
dc_json_constraint_new_for_tokenizer (DcBpeTokenizer *tokenizer,
                                      guint           vocab_size,
                                      gint64          end_id)
{
  DcJsonConstraint *self;

  g_return_val_if_fail (tokenizer != NULL, NULL);

  self = constraint_new (vocab_size, end_id);
  for (guint i = 0; i < vocab_size; i++)
    {
      g_autofree guint8 *bytes = NULL;
      gsize len = 0;

      if (dc_bpe_tokenizer_is_special (tokenizer, i))
        continue;
      bytes = dc_bpe_tokenizer_dup_token_bytes (tokenizer, i, &len);
      constraint_set (self, i, bytes, len);
    }
  constraint_index (self);
  return self;
}

void
dc_json_constraint_free (DcJsonConstraint *self)
{
  if (self == NULL)
    return;
  for (guint i = 0; i < self->vocab_size; i++)
    g_free (self->bytes[i]);
  g_free (self->bytes);
  g_free (self->lengths);
  g_free (self->plain);
  g_free (self->by_first);
  g_free (self);
}

void
dc_json_constraint_reset (DcJsonConstraint *self)
{
  g_return_if_fail (self != NULL);

  dc_json_state_init (&self->state);
}

gsize
dc_json_constraint_allowed (DcJsonConstraint *self,
                            guint             remaining,
                            guint8           *allowed)
{
  gsize n_allowed = 0;
  gboolean in_string, plain_fits;

  g_return_val_if_fail (self != NULL && allowed != NULL, 0);

  memset (allowed, 0, self->vocab_size);
  if (remaining == 0 || dc_json_state_is_failed (&self->state))
    return 0;
  in_string = self->state.mode == M_STRING;
  plain_fits = in_string && dc_json_state_distance (&self->state) <= remaining - 1;
  for (guint b = 0; b < 256; b++)
    {
      DcJsonState first = self->state;
      guint8 byte = (guint8) b;

      if (self->first_start[b] == self->first_start[b + 1]
          || !dc_json_state_feed (&first, &byte, 1))
        continue;
      for (guint k = self->first_start[b]; k < self->first_start[b + 1]; k++)
        {
          guint32 id = self->by_first[k];
          DcJsonState s = first;

          if (in_string && self->plain[id])
            {
              allowed[id] = plain_fits;
              n_allowed += plain_fits;
              continue;
            }
          if (dc_json_state_feed (&s, self->bytes[id] + 1, self->lengths[id] - 1u)
              && dc_json_state_distance (&s) <= remaining - 1)
            {
              allowed[id] = 1;
              n_allowed++;
            }
        }
    }
  if (self->end_id >= 0 && dc_json_state_is_complete (&self->state))
    {
      allowed[self->end_id] = 1;
      n_allowed++;
    }
  return n_allowed;
}

gboolean
dc_json_constraint_accept (DcJsonConstraint *self,
                           guint32           id)
{
  DcJsonState s;

  g_return_val_if_fail (self != NULL, FALSE);

  if (id >= self->vocab_size)
    return FALSE;
  if ((gint64) id == self->end_id)
    return dc_json_state_is_complete (&self->state);
  if (self->bytes[id] == NULL)
    return FALSE;
  s = self->state;
  if (!dc_json_state_feed (&s, self->bytes[id], self->lengths[id]))
    return FALSE;
  self->state = s;
  return TRUE;
}

gboolean
dc_json_constraint_is_complete (DcJsonConstraint *self)
{
  g_return_val_if_fail (self != NULL, FALSE);

  return dc_json_state_is_complete (&self->state);
}

guint
dc_json_constraint_get_vocab_size (DcJsonConstraint *self)
{
  g_return_val_if_fail (self != NULL, 0);

  return self->vocab_size;
}
