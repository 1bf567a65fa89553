/* dc-json-constraint.h: output that is valid JSON, by masking tokens.
 *
 * DcJsonState is a streaming JSON grammar (RFC 8259: objects, arrays,
 * strings with escapes and UTF-8 checked, numbers, true/false/null,
 * whitespace) advanced one byte at a time: it knows whether the bytes so far
 * are a prefix of some valid JSON text, whether they are one already, and
 * the fewest bytes that would complete them (and which). It is a small plain
 * struct, copied to try a token.
 *
 * DcJsonConstraint applies it to a vocabulary: before each draw it marks the
 * tokens whose bytes keep the output a valid prefix that the tokens left can
 * still complete (one single-byte token per missing byte, which every
 * byte-level vocabulary has), so the completion is valid JSON even when the
 * token limit cuts it short. Once the value is complete only end-of-text and
 * whitespace remain. Special tokens are never text, so never allowed inside.
 *
 * Stricter than json-glib where the two differ (no leading zeros, no
 * control characters in strings, no \u escapes of surrogates, whose lone
 * halves json-glib rejects), so whatever is accepted here json-glib parses.
 *
 * Not thread-safe; one per generation.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

#include "model/dc-bpe-tokenizer.h"

G_BEGIN_DECLS

/* Nesting is bounded so the stack fits one 64-bit word and nothing that
 * reads the output recurses deep (json-glib 1.6 crashes near 80,000 levels);
 * model outputs rarely nest past 10. */
#define DC_JSON_CONSTRAINT_MAX_DEPTH 64

typedef struct
{
  guint64 stack;    /* bit d set: the container at depth d + 1 is an object */
  guint16 hex;      /* the \u escape's digits so far */
  guint8  depth;
  guint8  mode;
  guint8  aux;      /* per mode: digits read, continuation bytes left, literal position */
  guint8  flags;
} DcJsonState;

void     dc_json_state_init            (DcJsonState        *state);
/* FALSE when the bytes cannot continue a valid JSON text; STATE is then
 * failed and stays so. */
gboolean dc_json_state_feed            (DcJsonState        *state,
                                        const guint8       *bytes,
                                        gsize               len);
gboolean dc_json_state_is_failed       (const DcJsonState  *state);
/* The bytes so far are a whole JSON text (trailing whitespace allowed). */
gboolean dc_json_state_is_complete     (const DcJsonState  *state);
/* The fewest bytes that make the text complete: what append_closing writes. */
guint    dc_json_state_distance        (const DcJsonState  *state);
void     dc_json_state_append_closing  (const DcJsonState  *state,
                                        GString            *out);

typedef struct _DcJsonConstraint DcJsonConstraint;

/* TOKENS: GBytes* per id (NULL: an id that is never text, such as a special
 * token or one the tokenizer lacks); END_ID: the end-of-text id, or -1. */
DcJsonConstraint *dc_json_constraint_new               (GPtrArray         *tokens,
                                                        gint64             end_id);
/* VOCAB_SIZE is the model's (it may pass the tokenizer's: padding ids). */
DcJsonConstraint *dc_json_constraint_new_for_tokenizer (DcBpeTokenizer    *tokenizer,
                                                        guint              vocab_size,
                                                        gint64             end_id);
void              dc_json_constraint_free              (DcJsonConstraint  *self);
void              dc_json_constraint_reset             (DcJsonConstraint  *self);
/* Sets ALLOWED (vocab_size bytes) to 1 for the ids that may come next with
 * REMAINING tokens left (this one included), 0 for the rest; returns how
 * many are allowed. */
gsize             dc_json_constraint_allowed           (DcJsonConstraint  *self,
                                                        guint              remaining,
                                                        guint8            *allowed);
/* Advances by token ID's bytes; FALSE if they do not fit (the state is then unchanged). */
gboolean          dc_json_constraint_accept            (DcJsonConstraint  *self,
                                                        guint32            id);
gboolean          dc_json_constraint_is_complete       (DcJsonConstraint  *self);
guint             dc_json_constraint_get_vocab_size    (DcJsonConstraint  *self);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcJsonConstraint, dc_json_constraint_free)

G_END_DECLS
