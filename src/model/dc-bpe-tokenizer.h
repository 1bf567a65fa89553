/* dc-bpe-tokenizer.h: byte-level BPE from a Hugging Face tokenizer.json.
 *
 * What is supported: a BPE model; normalizer none or NFC; pre-tokenizers
 * ByteLevel (with or without its GPT-2 regex), Split (regex or string, every
 * behaviour, invert), Digits and Sequence of them; added and special tokens (split
 * out of the raw text first, longest match, lstrip/rstrip); merges written
 * "a b" or ["a", "b"]; ignore_merges; post-processors ByteLevel and
 * TemplateProcessing (single sequence); the ByteLevel decoder. Anything else
 * (Metaspace/SentencePiece, WordPiece, Unigram, WordLevel, other
 * normalizers) is refused by name. The file is untrusted: its size, depth and
 * counts are bounded and every reference is checked before use.
 *
 * A tokenizer is immutable after loading; encode and decode may run on any
 * thread at once.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* tokenizer.json files on the Hub reach ~35 MB (Gemma's 256k vocabulary); 64 MiB leaves room. */
#define DC_BPE_JSON_MAX_BYTES   (64u * 1024u * 1024u)
/* A tokenizer.json nests about 6 levels (Sequence inside Sequence adds 2 each). */
#define DC_BPE_JSON_MAX_DEPTH   32
/* The largest Hub vocabularies are ~262k tokens; ids past 2^20 are refused. */
#define DC_BPE_MAX_VOCAB        (1u << 20)
/* Merges are at most one per vocabulary entry. */
#define DC_BPE_MAX_MERGES       (1u << 20)
/* Models add at most a few thousand added tokens (Llama 3: 256). */
#define DC_BPE_MAX_ADDED        65536
/* Their contents together (Llama 3's 256 special tokens: 7 KB); bounds the
 * added-token trie at 2^20 nodes (about 40 MB at most). */
#define DC_BPE_MAX_ADDED_BYTES  (1u << 20)
/* Real pre-tokenizer sequences hold 2-4 steps. */
#define DC_BPE_MAX_PRE_STEPS    16

typedef struct _DcBpeTokenizer DcBpeTokenizer;

DcBpeTokenizer *dc_bpe_tokenizer_new_from_json  (const char      *json,
                                                 gssize           len,
                                                 GError         **error);
DcBpeTokenizer *dc_bpe_tokenizer_new_from_file  (const char      *path,
                                                 GError         **error);
void            dc_bpe_tokenizer_free           (DcBpeTokenizer  *self);

GArray         *dc_bpe_tokenizer_encode         (DcBpeTokenizer  *self,
                                                 const char      *text,
                                                 gssize           len,
                                                 gboolean         add_special_tokens,
                                                 GError         **error);
char           *dc_bpe_tokenizer_decode         (DcBpeTokenizer  *self,
                                                 const guint32   *ids,
                                                 gsize            n_ids,
                                                 gboolean         skip_special_tokens,
                                                 GError         **error);
guint           dc_bpe_tokenizer_get_vocab_size (DcBpeTokenizer  *self);
gint64          dc_bpe_tokenizer_token_to_id    (DcBpeTokenizer  *self,
                                                 const char      *token);
/* The bytes token ID stands for (what decode writes for it alone), or NULL when
 * no token has that id. Constrained generation needs them per token. */
guint8         *dc_bpe_tokenizer_dup_token_bytes (DcBpeTokenizer *self,
                                                  guint32         id,
                                                  gsize          *len);
gboolean        dc_bpe_tokenizer_is_special     (DcBpeTokenizer  *self,
                                                 guint32          id);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcBpeTokenizer, dc_bpe_tokenizer_free)

G_END_DECLS
