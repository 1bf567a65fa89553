#!/usr/bin/env python3
# Writes small tokenizer.json files whose pre-tokenizers use the exact Split
# patterns of Qwen2 and Llama 3 (as in their Hub tokenizer.json), for
# tests/test-model-tokenizer.c. The expected ids in the cases below were
# derived BY HAND from the regexes and merges (reasoning written next to each
# case), then checked with the `tokenizers` library 0.23.2
# (make-model-fixtures.py writes its ids to split-check.json): every id agrees.
# Two things the library taught: it reads one merge spelling per file (these
# files mix "a b" and ["a","b"] on purpose, since our reader takes both; the
# check reads a copy with pairs only), and it numbers added tokens that are
# not in the vocabulary with the next free ids, so they are given those ids
# here (263-265), as real tokenizer.json files do.
#
# Vocabulary: id b (0..255) is byte b's ByteLevel character, so a piece that
# no merge touches encodes to its UTF-8 bytes. Extra tokens:
#   256 "Ġ1"  257 "12"  258 "123"  259 "ST"  260 "'S"  261 "!Ċ"  262 "xyz"
# Added tokens: 263 <|im_start|>, 264 <|endoftext|>, 265 <|begin_of_text|>.
# Merges, by rank: "Ġ 1", "1 2", "12 3", "S T", "' S", "! Ċ" (no merge makes xyz).
import json, os, sys

QWEN2 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
LLAMA3 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
# tiktoken's cl100k spelling, with possessive quantifiers (same pieces here).
POSSESSIVE = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""


def byte_chars():
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def tokenizer(pattern, nfc, ignore_merges, bos):
    bc = byte_chars()
    vocab = {bc[b]: b for b in range(256)}
    extra = ["Ġ1", "12", "123", "ST", "'S", "!Ċ", "xyz"]
    for i, t in enumerate(extra):
        vocab[t] = 256 + i
    merges = [["Ġ", "1"], "1 2", ["12", "3"], "S T", ["'", "S"], "! Ċ"]
    added = [
        {"id": 263, "content": "<|im_start|>", "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": False, "special": True},
        {"id": 264, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": False, "special": True},
        {"id": 265, "content": "<|begin_of_text|>", "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": False, "special": True},
    ]
    post = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
            "use_regex": False}
    if bos:
        post = {"type": "Sequence", "processors": [post, {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [],
            "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>",
                                                     "ids": [265],
                                                     "tokens": ["<|begin_of_text|>"]}}}]}
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "NFC"} if nfc else None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
             "use_regex": False}]},
        "post_processor": post,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                    "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": ignore_merges,
                  "vocab": vocab, "merges": merges},
    }


# (text, qwen2 ids, llama3 ids); llama3 ids are without the BOS the template adds.
CASES = [
    # Qwen2 takes digits one by one; Llama 3 up to three: "123" merges 1 2 -> 12, 12 3 -> 123.
    ("a 123", [97, 32, 49, 50, 51], [97, 32, 258]),
    ("12345", [49, 50, 51, 52, 53], [258, 52, 53]),
    # (?i:'s) takes "'S" alone, so "T" is its own piece: [260 'S, 84 T]. Without
    # the (?i:) group, "'ST" would be one piece and "S T" (rank 3) would win: [39, 259].
    ("'ST", [260, 84], [260, 84]),
    # Punctuation keeps its trailing newlines in one piece: "!\n" merges to 261.
    ("hi!\n", [104, 105, 261], [104, 105, 261]),
    # Newlines: "\n\n" is one piece via \s*[\r\n]+ (bytes 10 10 map to Ċ = id 10).
    ("a\n\nb", [97, 10, 10, 98], [97, 10, 10, 98]),
    # A space joins the letters after it: " hello" is one piece, no merges.
    (" hello", [32, 104, 101, 108, 108, 111], [32, 104, 101, 108, 108, 111]),
    # Letters of any script are \p{L}: the UTF-8 bytes of 東京.
    ("東京", [230, 157, 177, 228, 186, 172], [230, 157, 177, 228, 186, 172]),
    # NFC (Qwen2 only): e + U+0301 becomes é (C3 A9). Llama 3 has no normalizer:
    # "e" is a letter piece, U+0301 (a mark, CC 81) a punctuation piece.
    ("e\u0301", [195, 169], [101, 204, 129]),
    # Added tokens are split out first.
    ("x<|im_start|>y", [120, 263, 121], [120, 263, 121]),
    # ignore_merges (Llama 3 only): a piece that is itself in the vocabulary is one token.
    ("xyz", [120, 121, 122], [262]),
    ("", [], []),
]


def main(outdir):
    for name, pattern, nfc, ignore, bos, col in [
        ("qwen2-split", QWEN2, True, False, False, 1),
        ("llama3-split", LLAMA3, False, True, True, 2),
        ("llama3-possessive-split", POSSESSIVE, False, True, True, 2),
    ]:
        os.makedirs(os.path.join(outdir, name), exist_ok=True)
        with open(os.path.join(outdir, name, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(tokenizer(pattern, nfc, ignore, bos), f, ensure_ascii=False, indent=1)
        cases = [{"text": c[0], "ids": c[col]} for c in CASES]
        with open(os.path.join(outdir, name + "-cases.json"), "w", encoding="utf-8") as f:
            json.dump({"source": "derived by hand, see make-split-tokenizers.py",
                       "bos": 265 if bos else None, "nfc": nfc, "cases": cases},
                      f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
