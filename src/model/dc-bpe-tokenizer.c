/* dc-bpe-tokenizer.c: byte-level BPE from a Hugging Face tokenizer.json.
 *
 * Encoding follows the `tokenizers` library step by step, so that ids match
 * it exactly: added tokens are split out of the raw text (longest match
 * first), each remaining chunk is NFC-normalized when the file asks for it,
 * the pre-tokenizers run in order (Split cuts a piece by a regex; ByteLevel
 * optionally adds a prefix space, cuts by the GPT-2 regex and maps every
 * byte to one printable character), and BPE merges each piece.
 *
 * BPE runs in O(n log n) per piece: symbols form a linked list over an array
 * and candidate pairs sit in a binary heap ordered by (merge rank, position),
 * so the lowest-ranked, leftmost pair merges first, as in `tokenizers`. A
 * popped pair that no longer exists (a neighbour merged first) is skipped.
 * Merge ranks live in an open-addressing table keyed by the pair's ids.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-model"

#include "config.h"

#include "dc-bpe-tokenizer.h"

#include <string.h>
#include <json-glib/json-glib.h>

#include "dc-json-bounds.h"
#include "dc-model-error.h"
#include "dc-regular-file.h"

/* The regex the ByteLevel pre-tokenizer uses when use_regex is true (GPT-2's). */
#define GPT2_PATTERN \
  "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

/* A post-processor template adds a BOS/EOS or two; 64 ids is far beyond any model. */
#define TEMPLATE_MAX_IDS 64

typedef enum
{
  STEP_BYTE_LEVEL,
  STEP_SPLIT,
} StepKind;

typedef enum
{
  BEHAVIOR_REMOVED,
  BEHAVIOR_ISOLATED,
  BEHAVIOR_MERGED_WITH_PREVIOUS,
  BEHAVIOR_MERGED_WITH_NEXT,
  BEHAVIOR_CONTIGUOUS,
} Behavior;

typedef struct
{
  StepKind  kind;
  GRegex   *regex;             /* NULL: ByteLevel without its regex */
  Behavior  behavior;
  guint     add_prefix_space : 1;
  guint     invert : 1;
} PreStep;

typedef struct
{
  char    *content;
  gsize    len;
  guint32  id;
  guint    special : 1;
  guint    lstrip : 1;
  guint    rstrip : 1;
} AddedToken;

typedef struct
{
  guint64 key;    /* (left id + 1) << 32 | (right id + 1); 0 marks an empty slot */
  guint32 rank;
  guint32 result;
} MergeSlot;

struct _DcBpeTokenizer
{
  guint        n_ids;          /* largest id + 1 */
  guint        id_capacity;
  char       **id_to_token;    /* n_ids entries; NULL where no token has that id */
  guint8      *id_special;     /* n_ids entries; 1 for special added tokens */
  GHashTable  *vocab;          /* token (borrowed from id_to_token) -> id + 1 */

  MergeSlot   *merges;         /* open addressing, merge_mask + 1 slots */
  gsize        merge_mask;

  PreStep      steps[DC_BPE_MAX_PRE_STEPS];
  guint        n_steps;

  AddedToken  *added;
  guint        n_added;
  /* A trie of the added tokens' bytes, for longest-match in one walk per
   * position whatever their number: edges (node << 8 | byte) -> child in an
   * open-addressing table; node_token[node] is an index into added, or -1. */
  guint64     *edge_keys;      /* key + 1; 0 marks an empty slot */
  guint32     *edge_children;
  gsize        edge_mask;
  gint32      *node_token;
  guint        n_nodes;
  guint8       first_bytes[256];

  GArray      *template_before;  /* guint32 ids added before the text's ids */
  GArray      *template_after;

  gint64       unk_id;         /* -1: characters outside the vocabulary are dropped */
  guint        nfc : 1;
  guint        ignore_merges : 1;

  char         byte_char[256][3];  /* byte -> its printable character, UTF-8, nul-terminated */
  gint16       char_byte[324];     /* code point < 324 -> byte, or -1 */
};

static void
set_error (GError     **error,
           int          code,
           const char  *format,
           ...) G_GNUC_PRINTF (3, 4);

static void
set_error (GError     **error,
           int          code,
           const char  *format,
           ...)
{
  va_list args;
  g_autofree char *message = NULL;

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  g_set_error (error, DC_MODEL_ERROR, code, "tokenizer.json: %s", message);
}

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the
 * other 68 bytes to U+0100 onwards, in byte order. */
static void
init_byte_map (DcBpeTokenizer *self)
{
  guint next = 256;

  for (guint i = 0; i < G_N_ELEMENTS (self->char_byte); i++)
    self->char_byte[i] = -1;
  for (guint b = 0; b < 256; b++)
    {
      gunichar c;
      gboolean printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);

      c = printable ? b : next++;
      memset (self->byte_char[b], 0, sizeof self->byte_char[b]);
      g_unichar_to_utf8 (c, self->byte_char[b]);
      self->char_byte[c] = (gint16) b;
    }
}

void
dc_bpe_tokenizer_free (DcBpeTokenizer *self)
{
  if (self == NULL)
    return;
  g_clear_pointer (&self->vocab, g_hash_table_unref);
  if (self->id_to_token != NULL)
    for (guint i = 0; i < self->n_ids; i++)
      g_free (self->id_to_token[i]);
  g_free (self->id_to_token);
  g_free (self->id_special);
  g_free (self->merges);
  for (guint i = 0; i < self->n_steps; i++)
    g_clear_pointer (&self->steps[i].regex, g_regex_unref);
  for (guint i = 0; i < self->n_added; i++)
    g_free (self->added[i].content);
  g_free (self->added);
  g_free (self->edge_keys);
  g_free (self->edge_children);
  g_free (self->node_token);
  g_clear_pointer (&self->template_before, g_array_unref);
  g_clear_pointer (&self->template_after, g_array_unref);
  g_free (self);
}

/* ---- merge table ---- */

static inline guint64
merge_key (guint32 a,
           guint32 b)
{
  return ((guint64) a + 1) << 32 | ((guint64) b + 1);
}

static inline gsize
merge_hash (guint64 key)
{
  key ^= key >> 33;
  key *= G_GUINT64_CONSTANT (0xff51afd7ed558ccd);
  key ^= key >> 33;
  return (gsize) key;
}

static const MergeSlot *
merge_lookup (const DcBpeTokenizer *self,
              guint32               a,
              guint32               b)
{
  guint64 key = merge_key (a, b);

  if (self->merges == NULL)
    return NULL;
  for (gsize i = merge_hash (key) & self->merge_mask;; i = (i + 1) & self->merge_mask)
    {
      if (self->merges[i].key == key)
        return &self->merges[i];
      if (self->merges[i].key == 0)
        return NULL;
    }
}

/* ---- loading ---- */

static const char *
get_type (JsonNode *node)
{
  JsonObject *object;
  JsonNode *type;

  if (node == NULL || !JSON_NODE_HOLDS_OBJECT (node))
    return NULL;
  object = json_node_get_object (node);
  type = json_object_get_member (object, "type");
  if (type == NULL || json_node_get_value_type (type) != G_TYPE_STRING)
    return NULL;
  return json_node_get_string (type);
}

static gboolean
get_bool (JsonObject *object,
          const char *member,
          gboolean    fallback)
{
  JsonNode *node = json_object_get_member (object, member);

  if (node == NULL || json_node_get_value_type (node) != G_TYPE_BOOLEAN)
    return fallback;
  return json_node_get_boolean (node);
}

static const char *
get_string (JsonObject *object,
            const char *member)
{
  JsonNode *node = json_object_get_member (object, member);

  if (node == NULL || json_node_get_value_type (node) != G_TYPE_STRING)
    return NULL;
  return json_node_get_string (node);
}

/* Finds Metaspace (SentencePiece's pre-tokenizer and decoder) anywhere under @node. */
static gboolean
mentions_metaspace (JsonNode *node,
                    guint     depth)
{
  if (node == NULL || depth > DC_BPE_JSON_MAX_DEPTH)
    return FALSE;
  if (JSON_NODE_HOLDS_OBJECT (node))
    {
      JsonObject *object = json_node_get_object (node);
      const char *type = get_type (node);
      JsonObjectIter iter;
      JsonNode *child;

      if (g_strcmp0 (type, "Metaspace") == 0)
        return TRUE;
      json_object_iter_init (&iter, object);
      while (json_object_iter_next (&iter, NULL, &child))
        if (mentions_metaspace (child, depth + 1))
          return TRUE;
    }
  else if (JSON_NODE_HOLDS_ARRAY (node))
    {
      JsonArray *array = json_node_get_array (node);

      for (guint i = 0; i < json_array_get_length (array); i++)
        if (mentions_metaspace (json_array_get_element (array, i), depth + 1))
          return TRUE;
    }
  return FALSE;
}

static gboolean
load_normalizer (DcBpeTokenizer  *self,
                 JsonNode        *node,
                 guint            depth,
                 GError         **error)
{
  const char *type;

  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return TRUE;
  type = get_type (node);
  if (type == NULL)
    {
      set_error (error, DC_MODEL_ERROR_FORMAT, "normalizer has no type");
      return FALSE;
    }
  if (strcmp (type, "NFC") == 0)
    {
      self->nfc = TRUE;
      return TRUE;
    }
  if (strcmp (type, "Sequence") == 0 && depth < 4)
    {
      JsonNode *list = json_object_get_member (json_node_get_object (node), "normalizers");
      JsonArray *array;

      if (list == NULL || !JSON_NODE_HOLDS_ARRAY (list))
        {
          set_error (error, DC_MODEL_ERROR_FORMAT, "normalizer Sequence has no list");
          return FALSE;
        }
      array = json_node_get_array (list);
      for (guint i = 0; i < json_array_get_length (array); i++)
        if (!load_normalizer (self, json_array_get_element (array, i), depth + 1, error))
          return FALSE;
      return TRUE;
    }
  set_error (error, DC_MODEL_ERROR_UNSUPPORTED, "normalizer type “%s” is not supported", type);
  return FALSE;
}

/* The longest Split pattern accepted: the real ones (GPT-2, Qwen2, Llama 3)
 * are under 200 bytes; 4 KiB leaves room and bounds PCRE2's compile work. */
#define MAX_PATTERN_BYTES 4096

/* A Split pattern is checked before PCRE2 compiles it. It must be UTF-8:
 * json-glib decodes the non-JSON escape `\777` inside a string as an octal
 * byte, GLib hands the pattern to PCRE2 unchecked, and Debian 12's PCRE2
 * then read past the pattern (fuzz-tokenizer-json under ASan). It must not
 * refer back to a group or spell a character in octal (`\1`, `\g`, `\k`,
 * `\0`, `\o`): tokenizers' patterns never do, and back-references are what
 * makes a regex's matching time explode. */
static gboolean
check_pattern (const char  *pattern,
               GError     **error)
{
  gsize len = strlen (pattern);

  /* GLib hands the pattern to PCRE2 without a UTF-8 check of its own. */
  if (!g_utf8_validate (pattern, -1, NULL))
    {
      set_error (error, DC_MODEL_ERROR_FORMAT, "Split pattern is not valid UTF-8");
      return FALSE;
    }
  if (len > MAX_PATTERN_BYTES)
    {
      set_error (error, DC_MODEL_ERROR_TOO_LARGE,
                 "Split pattern of %" G_GSIZE_FORMAT " bytes, more than %d", len,
                 MAX_PATTERN_BYTES);
      return FALSE;
    }
  for (gsize i = 0; i + 1 < len; i++)
    {
      char next;

      if (pattern[i] != '\\')
        continue;
      next = pattern[++i];  /* the escaped character; `\\` skips both */
      if (g_ascii_isdigit (next) || next == 'g' || next == 'k' || next == 'o')
        {
          set_error (error, DC_MODEL_ERROR_UNSUPPORTED,
                     "Split pattern uses \\%c (a back-reference or octal escape), which "
                     "tokenizer patterns do not", next);
          return FALSE;
        }
    }
  return TRUE;
}

static GRegex *
compile_pattern (const char  *pattern,
                 gboolean     literal,
                 GError     **error)
{
  g_autoptr(GError) local_error = NULL;
  g_autofree char *escaped = NULL;
  GRegex *regex;

  if (literal)
    pattern = escaped = g_regex_escape_string (pattern, -1);
  else if (!check_pattern (pattern, error))
    return NULL;
  regex = g_regex_new (pattern, G_REGEX_OPTIMIZE, 0, &local_error);
  if (regex == NULL)
    set_error (error, DC_MODEL_ERROR_FORMAT, "Split pattern does not compile: %s",
               local_error->message);
  return regex;
}

static gboolean
load_pre_tokenizer (DcBpeTokenizer  *self,
                    JsonNode        *node,
                    guint            depth,
                    GError         **error)
{
  JsonObject *object;
  const char *type;
  PreStep *step;

  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return TRUE;
  type = get_type (node);
  if (type == NULL)
    {
      set_error (error, DC_MODEL_ERROR_FORMAT, "pre_tokenizer has no type");
      return FALSE;
    }
  object = json_node_get_object (node);
  if (strcmp (type, "Sequence") == 0 && depth < 4)
    {
      JsonNode *list = json_object_get_member (object, "pretokenizers");
      JsonArray *array;

      if (list == NULL || !JSON_NODE_HOLDS_ARRAY (list))
        {
          set_error (error, DC_MODEL_ERROR_FORMAT, "pre_tokenizer Sequence has no list");
          return FALSE;
        }
      array = json_node_get_array (list);
      for (guint i = 0; i < json_array_get_length (array); i++)
        if (!load_pre_tokenizer (self, json_array_get_element (array, i), depth + 1, error))
          return FALSE;
      return TRUE;
    }
  if (strcmp (type, "ByteLevel") != 0 && strcmp (type, "Split") != 0 &&
      strcmp (type, "Digits") != 0)
    {
      set_error (error, DC_MODEL_ERROR_UNSUPPORTED, "pre_tokenizer type “%s” is not supported",
                 type);
      return FALSE;
    }
  if (self->n_steps == DC_BPE_MAX_PRE_STEPS)
    {
      set_error (error, DC_MODEL_ERROR_TOO_LARGE, "more than %u pre-tokenizer steps",
                 DC_BPE_MAX_PRE_STEPS);
      return FALSE;
    }
  step = &self->steps[self->n_steps++];
  if (strcmp (type, "Digits") == 0)
    {
      /* As `tokenizers` cuts at char::is_numeric (Unicode N*): each digit
       * alone, or runs of digits kept together. */
      step->kind = STEP_SPLIT;
      step->behavior = BEHAVIOR_ISOLATED;
      step->regex = compile_pattern (get_bool (object, "individual_digits", FALSE) ? "\\p{N}"
                                                                               : "\\p{N}+",
                                     FALSE, error);
      return step->regex != NULL;
    }
  if (strcmp (type, "ByteLevel") == 0)
    {
      step->kind = STEP_BYTE_LEVEL;
      step->add_prefix_space = get_bool (object, "add_prefix_space", TRUE);
      if (get_bool (object, "use_regex", TRUE))
        {
          step->regex = compile_pattern (GPT2_PATTERN, FALSE, error);
          if (step->regex == NULL)
            return FALSE;
        }
      step->behavior = BEHAVIOR_ISOLATED;
      return TRUE;
    }

  {
    JsonNode *pattern = json_object_get_member (object, "pattern");
    const char *behavior = get_string (object, "behavior");
    const char *regex_text = NULL, *string_text = NULL;
    static const struct { const char *name; Behavior value; } behaviors[] = {
      { "Removed", BEHAVIOR_REMOVED },
      { "Isolated", BEHAVIOR_ISOLATED },
      { "MergedWithPrevious", BEHAVIOR_MERGED_WITH_PREVIOUS },
      { "MergedWithNext", BEHAVIOR_MERGED_WITH_NEXT },
      { "Contiguous", BEHAVIOR_CONTIGUOUS },
    };
    gboolean found = FALSE;

    step->kind = STEP_SPLIT;
    if (pattern != NULL && JSON_NODE_HOLDS_OBJECT (pattern))
      {
        regex_text = get_string (json_node_get_object (pattern), "Regex");
        string_text = get_string (json_node_get_object (pattern), "String");
      }
    if ((regex_text == NULL) == (string_text == NULL))
      {
        set_error (error, DC_MODEL_ERROR_FORMAT,
                   "Split pre-tokenizer needs a pattern with one of Regex or String");
        return FALSE;
      }
    for (guint i = 0; behavior != NULL && i < G_N_ELEMENTS (behaviors); i++)
      if (strcmp (behavior, behaviors[i].name) == 0)
        {
          step->behavior = behaviors[i].value;
          found = TRUE;
        }
    if (!found)
      {
        set_error (error, DC_MODEL_ERROR_UNSUPPORTED, "Split behavior “%s” is not supported",
                   behavior != NULL ? behavior : "(none)");
        return FALSE;
      }
    step->invert = get_bool (object, "invert", FALSE);
    step->regex = compile_pattern (regex_text != NULL ? regex_text : string_text,
                                   string_text != NULL, error);
    return step->regex != NULL;
  }
}

static gboolean
set_token (DcBpeTokenizer  *self,
           const char      *token,
           gint64           id,
           GError         **error)
{
  if (id < 0 || id >= (gint64) DC_BPE_MAX_VOCAB)
    {
      set_error (error, DC_MODEL_ERROR_TOO_LARGE,
                 "token “%s” has id %" G_GINT64_FORMAT ", outside 0 to %u", token, id,
                 DC_BPE_MAX_VOCAB - 1);
      return FALSE;
    }
  if ((guint) id >= self->id_capacity)
    {
      guint capacity = MAX ((guint) id + 1, MIN (2 * self->id_capacity, DC_BPE_MAX_VOCAB));

      self->id_to_token = g_renew (char *, self->id_to_token, capacity);
      memset (self->id_to_token + self->id_capacity, 0,
              (capacity - self->id_capacity) * sizeof (char *));
      self->id_capacity = capacity;
    }
  if (self->id_to_token[id] != NULL)
    {
      set_error (error, DC_MODEL_ERROR_FORMAT,
                 "id %" G_GINT64_FORMAT " is given to both “%s” and “%s”", id,
                 self->id_to_token[id], token);
      return FALSE;
    }
  self->id_to_token[id] = g_strdup (token);
  g_hash_table_insert (self->vocab, self->id_to_token[id], GSIZE_TO_POINTER ((gsize) id + 1));
  if ((guint) id + 1 > self->n_ids)
    self->n_ids = (guint) id + 1;
  return TRUE;
}

static gboolean
lookup_token (DcBpeTokenizer *self,
              const char     *token,
              guint32        *id)
{
  gpointer value = g_hash_table_lookup (self->vocab, token);

  if (value == NULL)
    return FALSE;
  *id = (guint32) (GPOINTER_TO_SIZE (value) - 1);
  return TRUE;
}

static gboolean
load_vocab (DcBpeTokenizer  *self,
            JsonObject      *model,
            GError         **error)
{
  JsonNode *node = json_object_get_member (model, "vocab");
  JsonObject *vocab;
  JsonObjectIter iter;
  const char *token;
  JsonNode *value;

  if (node == NULL || !JSON_NODE_HOLDS_OBJECT (node))
    {
      set_error (error, DC_MODEL_ERROR_FORMAT, "model.vocab is not an object");
      return FALSE;
    }
  vocab = json_node_get_object (node);
  if (json_object_get_size (vocab) > DC_BPE_MAX_VOCAB)
    {
      set_error (error, DC_MODEL_ERROR_TOO_LARGE, "vocabulary has %u tokens, more than %u",
                 json_object_get_size (vocab), DC_BPE_MAX_VOCAB);
      return FALSE;
    }
  json_object_iter_init (&iter, vocab);
  while (json_object_iter_next (&iter, &token, &value))
    {
      if (json_node_get_value_type (value) != G_TYPE_INT64)
        {
          set_error (error, DC_MODEL_ERROR_FORMAT, "vocabulary entry “%s” is not an integer id",
                     token);
          return FALSE;
        }
      if (!set_token (self, token, json_node_get_int (value), error))
        return FALSE;
    }
  return TRUE;
}

static gboolean
is_string (JsonNode *node)
{
  return json_node_get_value_type (node) == G_TYPE_STRING;
}

static gboolean
load_merges (DcBpeTokenizer  *self,
             JsonObject      *model,
             GError         **error)
{
  JsonNode *node = json_object_get_member (model, "merges");
  JsonArray *merges;
  guint n, slots = 16;

  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return TRUE;
  if (!JSON_NODE_HOLDS_ARRAY (node))
    {
      set_error (error, DC_MODEL_ERROR_FORMAT, "model.merges is not a list");
      return FALSE;
    }
  merges = json_node_get_array (node);
  n = json_array_get_length (merges);
  if (n > DC_BPE_MAX_MERGES)
    {
      set_error (error, DC_MODEL_ERROR_TOO_LARGE, "%u merges, more than %u", n,
                 DC_BPE_MAX_MERGES);
      return FALSE;
    }
  /* At most half full, so probes stay short. */
  while (slots < 2 * (gsize) n)
    slots *= 2;
  self->merges = g_new0 (MergeSlot, slots);
  self->merge_mask = slots - 1;

  for (guint rank = 0; rank < n; rank++)
    {
      JsonNode *entry = json_array_get_element (merges, rank);
      g_auto(GStrv) pair = NULL;
      g_autofree char *joined = NULL;
      guint32 a, b, result;
      guint64 key;
      gsize i;

      if (json_node_get_value_type (entry) == G_TYPE_STRING)
        {
          pair = g_strsplit (json_node_get_string (entry), " ", -1);
        }
      else if (JSON_NODE_HOLDS_ARRAY (entry) &&
               json_array_get_length (json_node_get_array (entry)) == 2 &&
               is_string (json_array_get_element (json_node_get_array (entry), 0)) &&
               is_string (json_array_get_element (json_node_get_array (entry), 1)))
        {
          JsonArray *array = json_node_get_array (entry);

          pair = g_new0 (char *, 3);
          pair[0] = g_strdup (json_array_get_string_element (array, 0));
          pair[1] = g_strdup (json_array_get_string_element (array, 1));
        }
      if (pair == NULL || g_strv_length (pair) != 2)
        {
          set_error (error, DC_MODEL_ERROR_FORMAT,
                     "merge %u is neither \"a b\" nor [\"a\", \"b\"]", rank);
          return FALSE;
        }
      if (!lookup_token (self, pair[0], &a) || !lookup_token (self, pair[1], &b))
        {
          set_error (error, DC_MODEL_ERROR_FORMAT,
                     "merge %u (“%s” “%s”) names a token that is not in the vocabulary",
                     rank, pair[0], pair[1]);
          return FALSE;
        }
      joined = g_strconcat (pair[0], pair[1], NULL);
      if (!lookup_token (self, joined, &result))
        {
          set_error (error, DC_MODEL_ERROR_FORMAT,
                     "merge %u (“%s” “%s”) makes “%s”, which is not in the vocabulary",
                     rank, pair[0], pair[1], joined);
          return FALSE;
        }
      key = merge_key (a, b);
      for (i = merge_hash (key) & self->merge_mask;
           self->merges[i].key != 0; i = (i + 1) & self->merge_mask)
        if (self->merges[i].key == key)
          {
            set_error (error, DC_MODEL_ERROR_FORMAT, "merge “%s” “%s” appears twice",
                       pair[0], pair[1]);
            return FALSE;
          }
      self->merges[i].key = key;
      self->merges[i].rank = rank;
      self->merges[i].result = result;
    }
  return TRUE;
}

static gint64
edge_lookup (const DcBpeTokenizer *self,
             guint32               node,
             guint8                byte)
{
  guint64 key = ((guint64) node << 8 | byte) + 1;

  for (gsize i = merge_hash (key) & self->edge_mask;; i = (i + 1) & self->edge_mask)
    {
      if (self->edge_keys[i] == key)
        return self->edge_children[i];
      if (self->edge_keys[i] == 0)
        return -1;
    }
}

static gboolean
build_added_trie (DcBpeTokenizer  *self,
                  GError         **error)
{
  gsize total = 0, slots = 16;

  for (guint i = 0; i < self->n_added; i++)
    total += self->added[i].len;
  if (total > DC_BPE_MAX_ADDED_BYTES)
    {
      set_error (error, DC_MODEL_ERROR_TOO_LARGE,
                 "added tokens hold %" G_GSIZE_FORMAT " bytes, more than %u", total,
                 DC_BPE_MAX_ADDED_BYTES);
      return FALSE;
    }
  /* At most one node per content byte, plus the root; the table at most half full. */
  while (slots < 2 * (total + 1))
    slots *= 2;
  self->edge_keys = g_new0 (guint64, slots);
  self->edge_children = g_new (guint32, slots);
  self->edge_mask = slots - 1;
  self->node_token = g_new (gint32, total + 1);
  self->node_token[0] = -1;
  self->n_nodes = 1;
  for (guint i = 0; i < self->n_added; i++)
    {
      const AddedToken *a = &self->added[i];
      guint32 node = 0;

      self->first_bytes[(guchar) a->content[0]] = 1;
      for (gsize j = 0; j < a->len; j++)
        {
          guint8 byte = (guint8) a->content[j];
          gint64 child = edge_lookup (self, node, byte);

          if (child < 0)
            {
              guint64 key = ((guint64) node << 8 | byte) + 1;
              gsize k;

              for (k = merge_hash (key) & self->edge_mask; self->edge_keys[k] != 0;
                   k = (k + 1) & self->edge_mask)
                ;
              child = self->n_nodes++;
              self->edge_keys[k] = key;
              self->edge_children[k] = (guint32) child;
              self->node_token[child] = -1;
            }
          node = (guint32) child;
        }
      self->node_token[node] = (gint32) i;
    }
  return TRUE;
}

static gboolean
load_added_tokens (DcBpeTokenizer  *self,
                   JsonNode        *node,
                   GError         **error)
{
  JsonArray *array;
  guint n;

  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return build_added_trie (self, error);
  if (!JSON_NODE_HOLDS_ARRAY (node))
    {
      set_error (error, DC_MODEL_ERROR_FORMAT, "added_tokens is not a list");
      return FALSE;
    }
  array = json_node_get_array (node);
  n = json_array_get_length (array);
  if (n > DC_BPE_MAX_ADDED)
    {
      set_error (error, DC_MODEL_ERROR_TOO_LARGE, "%u added tokens, more than %u", n,
                 DC_BPE_MAX_ADDED);
      return FALSE;
    }
  self->added = g_new0 (AddedToken, n);
  for (guint i = 0; i < n; i++)
    {
      JsonNode *entry = json_array_get_element (array, i);
      JsonObject *object;
      JsonNode *id_node;
      const char *content;
      AddedToken *added;
      guint32 existing;
      gint64 id;

      if (!JSON_NODE_HOLDS_OBJECT (entry))
        {
          set_error (error, DC_MODEL_ERROR_FORMAT, "added token %u is not an object", i);
          return FALSE;
        }
      object = json_node_get_object (entry);
      content = get_string (object, "content");
      id_node = json_object_get_member (object, "id");
      if (content == NULL || content[0] == '\0' || id_node == NULL ||
          json_node_get_value_type (id_node) != G_TYPE_INT64)
        {
          set_error (error, DC_MODEL_ERROR_FORMAT,
                     "added token %u needs a non-empty content and an integer id", i);
          return FALSE;
        }
      if (get_bool (object, "single_word", FALSE))
        {
          set_error (error, DC_MODEL_ERROR_UNSUPPORTED,
                     "added token “%s” uses single_word, which is not supported", content);
          return FALSE;
        }
      id = json_node_get_int (id_node);
      if (lookup_token (self, content, &existing))
        {
          if (existing != id)
            {
              set_error (error, DC_MODEL_ERROR_FORMAT,
                         "added token “%s” has id %" G_GINT64_FORMAT
                         " but the vocabulary gives it id %u", content, id, existing);
              return FALSE;
            }
        }
      else if (!set_token (self, content, id, error))
        {
          return FALSE;
        }
      added = &self->added[self->n_added++];
      added->content = g_strdup (content);
      added->len = strlen (content);
      added->id = (guint32) id;
      added->special = get_bool (object, "special", FALSE);
      added->lstrip = get_bool (object, "lstrip", FALSE);
      added->rstrip = get_bool (object, "rstrip", FALSE);
    }
  return build_added_trie (self, error);
}

static gboolean
load_post_processor (DcBpeTokenizer  *self,
                     JsonNode        *node,
                     guint            depth,
                     GError         **error)
{
  const char *type;
  JsonObject *object;
  JsonNode *single, *specials;
  gboolean seen_sequence = FALSE;

  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return TRUE;
  type = get_type (node);
  if (type == NULL)
    {
      set_error (error, DC_MODEL_ERROR_FORMAT, "post_processor has no type");
      return FALSE;
    }
  object = json_node_get_object (node);
  if (strcmp (type, "ByteLevel") == 0)
    return TRUE;
  if (strcmp (type, "Sequence") == 0 && depth < 4)
    {
      JsonNode *list = json_object_get_member (object, "processors");

      if (list == NULL || !JSON_NODE_HOLDS_ARRAY (list))
        {
          set_error (error, DC_MODEL_ERROR_FORMAT, "post_processor Sequence has no list");
          return FALSE;
        }
      for (guint i = 0; i < json_array_get_length (json_node_get_array (list)); i++)
        if (!load_post_processor (self, json_array_get_element (json_node_get_array (list), i),
                                  depth + 1, error))
          return FALSE;
      return TRUE;
    }
  if (strcmp (type, "TemplateProcessing") != 0)
    {
      set_error (error, DC_MODEL_ERROR_UNSUPPORTED, "post_processor type “%s” is not supported",
                 type);
      return FALSE;
    }

  single = json_object_get_member (object, "single");
  specials = json_object_get_member (object, "special_tokens");
  if (single == NULL || !JSON_NODE_HOLDS_ARRAY (single) ||
      (specials != NULL && !JSON_NODE_HOLDS_OBJECT (specials)))
    {
      set_error (error, DC_MODEL_ERROR_FORMAT,
                 "TemplateProcessing needs a \"single\" list and a \"special_tokens\" object");
      return FALSE;
    }
  for (guint i = 0; i < json_array_get_length (json_node_get_array (single)); i++)
    {
      JsonNode *item = json_array_get_element (json_node_get_array (single), i);
      JsonObject *item_object = JSON_NODE_HOLDS_OBJECT (item) ? json_node_get_object (item) : NULL;
      JsonNode *special = item_object ? json_object_get_member (item_object, "SpecialToken") : NULL;
      const char *name;
      JsonNode *entry, *ids;

      if (item_object != NULL && json_object_has_member (item_object, "Sequence"))
        {
          seen_sequence = TRUE;
          continue;
        }
      if (special == NULL || !JSON_NODE_HOLDS_OBJECT (special) ||
          (name = get_string (json_node_get_object (special), "id")) == NULL || specials == NULL ||
          (entry = json_object_get_member (json_node_get_object (specials), name)) == NULL ||
          !JSON_NODE_HOLDS_OBJECT (entry) ||
          (ids = json_object_get_member (json_node_get_object (entry), "ids")) == NULL ||
          !JSON_NODE_HOLDS_ARRAY (ids))
        {
          set_error (error, DC_MODEL_ERROR_FORMAT,
                     "TemplateProcessing item %u is neither a Sequence nor a known SpecialToken",
                     i);
          return FALSE;
        }
      for (guint j = 0; j < json_array_get_length (json_node_get_array (ids)); j++)
        {
          JsonNode *id_node = json_array_get_element (json_node_get_array (ids), j);
          GArray *target = seen_sequence ? self->template_after : self->template_before;
          gint64 id;
          guint32 id32;

          if (json_node_get_value_type (id_node) != G_TYPE_INT64 ||
              (id = json_node_get_int (id_node)) < 0 || id >= self->n_ids ||
              self->id_to_token[id] == NULL)
            {
              set_error (error, DC_MODEL_ERROR_FORMAT,
                         "TemplateProcessing token “%s” has an id outside the vocabulary",
                         name);
              return FALSE;
            }
          if (self->template_before->len + self->template_after->len >= TEMPLATE_MAX_IDS)
            {
              set_error (error, DC_MODEL_ERROR_TOO_LARGE,
                         "TemplateProcessing adds more than %u tokens", TEMPLATE_MAX_IDS);
              return FALSE;
            }
          id32 = (guint32) id;
          g_array_append_val (target, id32);
        }
    }
  return TRUE;
}

static gboolean
load_model (DcBpeTokenizer  *self,
            JsonNode        *node,
            GError         **error)
{
  JsonObject *model;
  const char *type, *unk;
  JsonNode *dropout;

  if (node == NULL || !JSON_NODE_HOLDS_OBJECT (node))
    {
      set_error (error, DC_MODEL_ERROR_FORMAT, "it has no model object");
      return FALSE;
    }
  model = json_node_get_object (node);
  type = get_type (node);
  if (type == NULL && json_object_has_member (model, "merges"))
    type = "BPE";
  if (g_strcmp0 (type, "BPE") != 0)
    {
      set_error (error, DC_MODEL_ERROR_UNSUPPORTED, "tokenizer type “%s” is not supported",
                 type != NULL ? type : "(unknown)");
      return FALSE;
    }
  if (get_bool (model, "byte_fallback", FALSE))
    {
      set_error (error, DC_MODEL_ERROR_UNSUPPORTED,
                 "tokenizer type “SentencePiece (BPE with byte_fallback)” is not supported");
      return FALSE;
    }
  /* GPT-2's own file spells "none" as empty strings. */
  if (g_strcmp0 (get_string (model, "continuing_subword_prefix"), "") > 0 ||
      g_strcmp0 (get_string (model, "end_of_word_suffix"), "") > 0)
    {
      set_error (error, DC_MODEL_ERROR_UNSUPPORTED,
                 "BPE with continuing_subword_prefix or end_of_word_suffix is not supported");
      return FALSE;
    }
  dropout = json_object_get_member (model, "dropout");
  if (dropout != NULL && !JSON_NODE_HOLDS_NULL (dropout) &&
      json_node_get_double (dropout) > 0.0)
    {
      set_error (error, DC_MODEL_ERROR_UNSUPPORTED, "BPE dropout is not supported");
      return FALSE;
    }
  self->ignore_merges = get_bool (model, "ignore_merges", FALSE);
  if (!load_vocab (self, model, error) || !load_merges (self, model, error))
    return FALSE;
  unk = get_string (model, "unk_token");
  if (unk != NULL)
    {
      guint32 unk_id;

      if (!lookup_token (self, unk, &unk_id))
        {
          set_error (error, DC_MODEL_ERROR_FORMAT, "unk_token “%s” is not in the vocabulary",
                     unk);
          return FALSE;
        }
      self->unk_id = unk_id;
    }
  return TRUE;
}

/**
 * dc_bpe_tokenizer_new_from_json:
 * @json: the text of a tokenizer.json (untrusted)
 * @len: its length, or -1 when nul-terminated
 *
 * Returns: (transfer full) (nullable): the tokenizer, or %NULL with @error set
 *   (%DC_MODEL_ERROR_UNSUPPORTED names what is not supported)
 */
DcBpeTokenizer *
dc_bpe_tokenizer_new_from_json (const char  *json,
                                gssize       len,
                                GError     **error)
{
  g_autoptr(DcBpeTokenizer) self = NULL;
  g_autoptr(JsonNode) root = NULL;
  g_autoptr(GError) local_error = NULL;
  JsonObject *object;
  JsonNode *model, *decoder;
  const char *decoder_type;
  gboolean has_byte_level = FALSE;

  root = dc_json_parse_bounded (json, len, DC_BPE_JSON_MAX_BYTES, DC_BPE_JSON_MAX_DEPTH,
                                &local_error);
  if (root == NULL)
    {
      set_error (error, DC_MODEL_ERROR_FORMAT, "%s", local_error->message);
      return NULL;
    }
  if (!JSON_NODE_HOLDS_OBJECT (root))
    {
      set_error (error, DC_MODEL_ERROR_FORMAT, "the top level is not an object");
      return NULL;
    }
  object = json_node_get_object (root);

  self = g_new0 (DcBpeTokenizer, 1);
  self->unk_id = -1;
  self->id_capacity = 256;
  self->id_to_token = g_new0 (char *, self->id_capacity);
  self->vocab = g_hash_table_new (g_str_hash, g_str_equal);
  self->template_before = g_array_new (FALSE, FALSE, sizeof (guint32));
  self->template_after = g_array_new (FALSE, FALSE, sizeof (guint32));
  init_byte_map (self);

  /* The model type comes first: a WordPiece or Unigram file is refused by its own name. */
  model = json_object_get_member (object, "model");
  if (model != NULL && JSON_NODE_HOLDS_OBJECT (model))
    {
      const char *type = get_type (model);

      if (type != NULL && strcmp (type, "BPE") != 0)
        {
          set_error (error, DC_MODEL_ERROR_UNSUPPORTED, "tokenizer type “%s” is not supported",
                     type);
          return NULL;
        }
    }
  if (mentions_metaspace (json_object_get_member (object, "pre_tokenizer"), 0) ||
      mentions_metaspace (json_object_get_member (object, "decoder"), 0) ||
      mentions_metaspace (json_object_get_member (object, "normalizer"), 0))
    {
      set_error (error, DC_MODEL_ERROR_UNSUPPORTED,
                 "tokenizer type “Metaspace (SentencePiece)” is not supported");
      return NULL;
    }
  if (!load_model (self, model, error) ||
      !load_normalizer (self, json_object_get_member (object, "normalizer"), 0, error) ||
      !load_pre_tokenizer (self, json_object_get_member (object, "pre_tokenizer"), 0, error) ||
      !load_added_tokens (self, json_object_get_member (object, "added_tokens"), error))
    return NULL;

  for (guint i = 0; i < self->n_steps; i++)
    has_byte_level |= self->steps[i].kind == STEP_BYTE_LEVEL;
  if (!has_byte_level)
    {
      set_error (error, DC_MODEL_ERROR_UNSUPPORTED,
                 "tokenizer type “BPE without a ByteLevel pre-tokenizer” is not supported");
      return NULL;
    }
  decoder = json_object_get_member (object, "decoder");
  decoder_type = get_type (decoder);
  if (g_strcmp0 (decoder_type, "ByteLevel") != 0)
    {
      set_error (error, DC_MODEL_ERROR_UNSUPPORTED, "decoder type “%s” is not supported",
                 decoder_type != NULL ? decoder_type : "(none)");
      return NULL;
    }
  if (!load_post_processor (self, json_object_get_member (object, "post_processor"), 0, error))
    return NULL;

  self->id_special = g_new0 (guint8, MAX (self->n_ids, 1));
  for (guint i = 0; i < self->n_added; i++)
    self->id_special[self->added[i].id] = self->added[i].special;
  return g_steal_pointer (&self);
}

/**
 * dc_bpe_tokenizer_new_from_file:
 * @path: a tokenizer.json (a regular file)
 *
 * Returns: (transfer full) (nullable): the tokenizer, or %NULL with @error set
 */
DcBpeTokenizer *
dc_bpe_tokenizer_new_from_file (const char  *path,
                                GError     **error)
{
  g_autofree char *contents = NULL;
  gsize length = 0;

  if (!dc_regular_file_get_contents (path, DC_BPE_JSON_MAX_BYTES, &contents, &length, error))
    return NULL;
  return dc_bpe_tokenizer_new_from_json (contents, (gssize) length, error);
}

guint
dc_bpe_tokenizer_get_vocab_size (DcBpeTokenizer *self)
{
  g_return_val_if_fail (self != NULL, 0);
  return self->n_ids;
}

/**
 * dc_bpe_tokenizer_token_to_id:
 *
 * Returns: the id of @token (as the vocabulary spells it), or -1
 */
gint64
dc_bpe_tokenizer_token_to_id (DcBpeTokenizer *self,
                              const char     *token)
{
  guint32 id;

  g_return_val_if_fail (self != NULL && token != NULL, -1);
  return lookup_token (self, token, &id) ? (gint64) id : -1;
}

/* ---- encoding ---- */

typedef struct
{
  guint32 rank;
  guint32 left;
  guint32 right;
} Candidate;

typedef struct
{
  guint32 id;
  gint32  prev;
  gint32  next;
  gboolean alive;
} Symbol;

static inline gboolean
candidate_less (const Candidate *a,
                const Candidate *b)
{
  return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void
heap_push (GArray    *heap,
           Candidate  c)
{
  Candidate *h;
  guint i;

  g_array_append_val (heap, c);
  h = (Candidate *) heap->data;
  for (i = heap->len - 1; i > 0 && candidate_less (&h[i], &h[(i - 1) / 2]); i = (i - 1) / 2)
    {
      Candidate tmp = h[i];

      h[i] = h[(i - 1) / 2];
      h[(i - 1) / 2] = tmp;
    }
}

static Candidate
heap_pop (GArray *heap)
{
  Candidate *h = (Candidate *) heap->data;
  Candidate top = h[0];
  guint i = 0, n;

  h[0] = h[heap->len - 1];
  g_array_set_size (heap, heap->len - 1);
  n = heap->len;
  for (;;)
    {
      guint l = 2 * i + 1, r = l + 1, m = i;
      Candidate tmp;

      if (l < n && candidate_less (&h[l], &h[m]))
        m = l;
      if (r < n && candidate_less (&h[r], &h[m]))
        m = r;
      if (m == i)
        break;
      tmp = h[i];
      h[i] = h[m];
      h[m] = tmp;
      i = m;
    }
  return top;
}

static void
push_pair (const DcBpeTokenizer *self,
           GArray               *heap,
           const Symbol         *symbols,
           gint32                left)
{
  const MergeSlot *merge;
  gint32 right = symbols[left].next;

  if (right < 0)
    return;
  merge = merge_lookup (self, symbols[left].id, symbols[right].id);
  if (merge != NULL)
    heap_push (heap, (Candidate) { merge->rank, (guint32) left, (guint32) right });
}

/* @piece is already byte-mapped: every character is one vocabulary symbol. */
static void
bpe_piece (const DcBpeTokenizer *self,
           const char           *piece,
           GArray               *out)
{
  g_autofree Symbol *symbols = NULL;
  g_autoptr(GArray) heap = NULL;
  gint32 n = 0, first = -1;
  gsize len = strlen (piece);
  guint32 id;

  if (len == 0)
    return;
  if (self->ignore_merges && lookup_token ((DcBpeTokenizer *) self, piece, &id))
    {
      g_array_append_val (out, id);
      return;
    }

  symbols = g_new (Symbol, len);
  for (const char *p = piece; *p != '\0'; p = g_utf8_next_char (p))
    {
      char one[8] = { 0 };
      gsize clen = (gsize) (g_utf8_next_char (p) - p);

      memcpy (one, p, MIN (clen, sizeof one - 1));
      if (!lookup_token ((DcBpeTokenizer *) self, one, &id))
        {
          if (self->unk_id < 0)
            continue;   /* as `tokenizers` does without an unk_token */
          id = (guint32) self->unk_id;
        }
      symbols[n] = (Symbol) { id, n - 1, -1, TRUE };
      if (n > 0)
        symbols[n - 1].next = n;
      n++;
    }
  if (n > 0)
    first = 0;

  heap = g_array_sized_new (FALSE, FALSE, sizeof (Candidate), (guint) n);
  for (gint32 i = 0; i + 1 < n; i++)
    push_pair (self, heap, symbols, i);
  while (heap->len > 0)
    {
      Candidate c = heap_pop (heap);
      const MergeSlot *merge;
      Symbol *left = &symbols[c.left], *right = &symbols[c.right];

      /* Skip pairs that a neighbour's merge has broken up. */
      if (!left->alive || !right->alive || left->next != (gint32) c.right)
        continue;
      merge = merge_lookup (self, left->id, right->id);
      if (merge == NULL || merge->rank != c.rank)
        continue;
      left->id = merge->result;
      left->next = right->next;
      if (right->next >= 0)
        symbols[right->next].prev = (gint32) c.left;
      right->alive = FALSE;
      if (left->prev >= 0)
        push_pair (self, heap, symbols, left->prev);
      push_pair (self, heap, symbols, (gint32) c.left);
    }
  for (gint32 i = first; i >= 0; i = symbols[i].next)
    g_array_append_val (out, symbols[i].id);
}

typedef struct
{
  gsize    start;
  gsize    end;
  gboolean match;
} Segment;

/* Cuts @piece at @regex's matches and regroups the parts by @step's
 * behaviour, with the rules of `tokenizers` (SplitDelimiterBehavior): a
 * delimiter joins its neighbour only when that neighbour is not a delimiter
 * itself; Contiguous joins runs of the same kind. Joined parts are adjacent
 * in @piece, so joining only widens a range: linear however many join. */
static void
split_piece (const PreStep *step,
             const char    *piece,
             GPtrArray     *out)
{
  g_autoptr(GArray) segments = g_array_new (FALSE, FALSE, sizeof (Segment));
  g_autoptr(GArray) ranges = g_array_new (FALSE, FALSE, sizeof (Segment));
  g_autoptr(GMatchInfo) info = NULL;
  gsize len = strlen (piece), pos = 0;

  g_regex_match_full (step->regex, piece, (gssize) len, 0, 0, &info, NULL);
  while (g_match_info_matches (info))
    {
      int start, end;

      g_match_info_fetch_pos (info, 0, &start, &end);
      if (end > start)
        {
          if ((gsize) start > pos)
            g_array_append_val (segments, ((Segment) { pos, (gsize) start, FALSE }));
          g_array_append_val (segments, ((Segment) { (gsize) start, (gsize) end, TRUE }));
          pos = (gsize) end;
        }
      if (!g_match_info_next (info, NULL))
        break;
    }
  if (pos < len)
    g_array_append_val (segments, ((Segment) { pos, len, FALSE }));
  for (guint i = 0; i < segments->len; i++)
    g_array_index (segments, Segment, i).match ^= step->invert;

  if (step->behavior == BEHAVIOR_MERGED_WITH_NEXT)
    {
      /* Walk backwards so that a delimiter can join the part after it. */
      for (guint i = segments->len; i-- > 0;)
        {
          Segment s = g_array_index (segments, Segment, i);
          gboolean next_match = i + 1 < segments->len &&
                                g_array_index (segments, Segment, i + 1).match;

          if (s.match && !next_match && ranges->len > 0)
            g_array_index (ranges, Segment, ranges->len - 1).start = s.start;
          else
            g_array_append_val (ranges, s);
        }
      for (guint i = ranges->len; i-- > 0;)
        {
          Segment *r = &g_array_index (ranges, Segment, i);

          g_ptr_array_add (out, g_strndup (piece + r->start, r->end - r->start));
        }
      return;
    }

  for (guint i = 0; i < segments->len; i++)
    {
      Segment s = g_array_index (segments, Segment, i);
      gboolean previous_match = i > 0 && g_array_index (segments, Segment, i - 1).match;
      gboolean join;

      switch (step->behavior)
        {
        case BEHAVIOR_REMOVED:
          if (s.match)
            continue;
          join = FALSE;
          break;
        case BEHAVIOR_ISOLATED:
          join = FALSE;
          break;
        case BEHAVIOR_MERGED_WITH_PREVIOUS:
          join = s.match && !previous_match;
          break;
        case BEHAVIOR_CONTIGUOUS:
          join = s.match == previous_match;
          break;
        case BEHAVIOR_MERGED_WITH_NEXT:
        default:
          g_assert_not_reached ();
        }
      if (join && ranges->len > 0)
        g_array_index (ranges, Segment, ranges->len - 1).end = s.end;
      else
        g_array_append_val (ranges, s);
    }
  for (guint i = 0; i < ranges->len; i++)
    {
      Segment *r = &g_array_index (ranges, Segment, i);

      g_ptr_array_add (out, g_strndup (piece + r->start, r->end - r->start));
    }
}

static GPtrArray *
run_step (const DcBpeTokenizer *self,
          const PreStep        *step,
          GPtrArray            *pieces)
{
  GPtrArray *out = g_ptr_array_new_with_free_func (g_free);

  for (guint i = 0; i < pieces->len; i++)
    {
      const char *piece = pieces->pdata[i];
      g_autofree char *prefixed = NULL;
      g_autoptr(GPtrArray) parts = NULL;

      if (step->kind == STEP_SPLIT)
        {
          split_piece (step, piece, out);
          continue;
        }
      if (step->add_prefix_space && piece[0] != ' ')
        piece = prefixed = g_strconcat (" ", piece, NULL);
      parts = g_ptr_array_new_with_free_func (g_free);
      if (step->regex != NULL)
        split_piece (step, piece, parts);
      else
        g_ptr_array_add (parts, g_strdup (piece));
      for (guint j = 0; j < parts->len; j++)
        {
          const guchar *p = parts->pdata[j];
          GString *mapped = g_string_sized_new (2 * strlen ((const char *) p) + 1);

          for (; *p != '\0'; p++)
            g_string_append (mapped, self->byte_char[*p]);
          g_ptr_array_add (out, g_string_free (mapped, FALSE));
        }
    }
  return out;
}

static void
encode_chunk (const DcBpeTokenizer *self,
              const char           *chunk,
              gsize                 len,
              GArray               *out)
{
  g_autoptr(GPtrArray) pieces = g_ptr_array_new_with_free_func (g_free);

  if (len == 0)
    return;
  if (self->nfc)
    g_ptr_array_add (pieces, g_utf8_normalize (chunk, (gssize) len, G_NORMALIZE_NFC));
  else
    g_ptr_array_add (pieces, g_strndup (chunk, len));
  for (guint i = 0; i < self->n_steps; i++)
    {
      GPtrArray *next = run_step (self, &self->steps[i], pieces);

      g_ptr_array_unref (pieces);
      pieces = next;
    }
  for (guint i = 0; i < pieces->len; i++)
    bpe_piece (self, pieces->pdata[i], out);
}

/* The longest added token at @text, as `tokenizers` matches (leftmost-longest). */
static const AddedToken *
match_added (const DcBpeTokenizer *self,
             const char           *text,
             gsize                 len)
{
  const AddedToken *best = NULL;
  guint32 node = 0;

  for (gsize j = 0; j < len; j++)
    {
      gint64 child = edge_lookup (self, node, (guint8) text[j]);

      if (child < 0)
        break;
      node = (guint32) child;
      if (self->node_token[node] >= 0)
        best = &self->added[self->node_token[node]];
    }
  return best;
}

/**
 * dc_bpe_tokenizer_encode:
 * @text: UTF-8 text (untrusted)
 * @len: its length, or -1 when nul-terminated
 * @add_special_tokens: apply the post-processor's template (BOS and such)
 *
 * Returns: (transfer full) (nullable): an array of guint32 ids, or %NULL with
 *   @error set when @text is not valid UTF-8
 */
GArray *
dc_bpe_tokenizer_encode (DcBpeTokenizer  *self,
                         const char      *text,
                         gssize           len,
                         gboolean         add_special_tokens,
                         GError         **error)
{
  g_autoptr(GArray) out = g_array_new (FALSE, FALSE, sizeof (guint32));
  gsize n, chunk_start = 0, i = 0;

  g_return_val_if_fail (self != NULL, NULL);
  g_return_val_if_fail (text != NULL || len == 0, NULL);

  if (text == NULL)
    text = "";
  n = len < 0 ? strlen (text) : (gsize) len;
  if (!g_utf8_validate (text, (gssize) n, NULL))
    {
      g_set_error_literal (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                           "text to tokenize is not valid UTF-8");
      return NULL;
    }
  if (add_special_tokens)
    g_array_append_vals (out, self->template_before->data, self->template_before->len);

  while (i < n)
    {
      const AddedToken *a = NULL;
      gsize chunk_end = i, after;

      if (self->first_bytes[(guchar) text[i]])
        a = match_added (self, text + i, n - i);
      if (a == NULL)
        {
          i++;
          continue;
        }
      after = i + a->len;
      if (a->lstrip)
        while (chunk_end > chunk_start && g_ascii_isspace (text[chunk_end - 1]))
          chunk_end--;
      if (a->rstrip)
        while (after < n && g_ascii_isspace (text[after]))
          after++;
      encode_chunk (self, text + chunk_start, chunk_end - chunk_start, out);
      g_array_append_val (out, a->id);
      chunk_start = i = after;
    }
  encode_chunk (self, text + chunk_start, n - chunk_start, out);
  if (add_special_tokens)
    g_array_append_vals (out, self->template_after->data, self->template_after->len);
  return g_steal_pointer (&out);
}

/**
 * dc_bpe_tokenizer_decode:
 * @ids: (array length=n_ids): token ids (untrusted)
 * @skip_special_tokens: leave special added tokens out
 *
 * The ByteLevel decoder: every character of a token maps back to one byte; a
 * token with a character outside that map is copied as it is, as `tokenizers`
 * does. Bytes that do not form UTF-8 become U+FFFD.
 *
 * Returns: (transfer full) (nullable): the text, or %NULL with @error set for
 *   an id outside the vocabulary
 */
char *
dc_bpe_tokenizer_decode (DcBpeTokenizer  *self,
                         const guint32   *ids,
                         gsize            n_ids,
                         gboolean         skip_special_tokens,
                         GError         **error)
{
  g_autoptr(GString) bytes = g_string_new (NULL);

  g_return_val_if_fail (self != NULL, NULL);
  g_return_val_if_fail (ids != NULL || n_ids == 0, NULL);

  for (gsize i = 0; i < n_ids; i++)
    {
      const char *token;
      gsize mark = bytes->len;

      if (ids[i] >= self->n_ids || self->id_to_token[ids[i]] == NULL)
        {
          g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                       "token id %u is not in the vocabulary (%u ids)", ids[i], self->n_ids);
          return NULL;
        }
      if (skip_special_tokens && self->id_special[ids[i]])
        continue;
      token = self->id_to_token[ids[i]];
      for (const char *p = token; *p != '\0'; p = g_utf8_next_char (p))
        {
          gunichar c = g_utf8_get_char (p);

          if (c >= G_N_ELEMENTS (self->char_byte) || self->char_byte[c] < 0)
            {
              g_string_truncate (bytes, mark);
              g_string_append (bytes, token);
              break;
            }
          g_string_append_c (bytes, (char) self->char_byte[c]);
        }
    }
  return g_utf8_make_valid (bytes->str, (gssize) bytes->len);
}

/**
 * dc_bpe_tokenizer_dup_token_bytes:
 * @len: (out): the number of bytes
 *
 * Returns: (transfer full) (nullable): the bytes @id decodes to on its own,
 *   nul-terminated (the nul is not counted), or NULL when no token has @id
 */
guint8 *
dc_bpe_tokenizer_dup_token_bytes (DcBpeTokenizer *self,
                                  guint32         id,
                                  gsize          *len)
{
  const char *token;
  GByteArray *bytes;

  g_return_val_if_fail (self != NULL, NULL);
  g_return_val_if_fail (len != NULL, NULL);

  *len = 0;
  if (id >= self->n_ids || self->id_to_token[id] == NULL)
    return NULL;
  token = self->id_to_token[id];
  bytes = g_byte_array_new ();
  /* The same rule as decode: byte-level characters map back to their bytes;
   * a token with any other character (an added token) stands for itself. */
  for (const char *p = token; *p != '\0'; p = g_utf8_next_char (p))
    {
      gunichar c = g_utf8_get_char (p);

      if (c >= G_N_ELEMENTS (self->char_byte) || self->char_byte[c] < 0)
        {
          g_byte_array_set_size (bytes, 0);
          g_byte_array_append (bytes, (const guint8 *) token, strlen (token));
          break;
        }
      g_byte_array_append (bytes, (const guint8 *) &(guint8) { (guint8) self->char_byte[c] }, 1);
    }
  *len = bytes->len;
  g_byte_array_append (bytes, (const guint8 *) "", 1);
  return g_byte_array_free (bytes, FALSE);
}

/* Special tokens (BOS, EOS, chat markers) are control symbols, not text. */
gboolean
dc_bpe_tokenizer_is_special (DcBpeTokenizer *self,
                             guint32         id)
{
  g_return_val_if_fail (self != NULL, FALSE);

  return id < self->n_ids && self->id_special[id];
}
