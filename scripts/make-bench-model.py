#!/usr/bin/env python3
"""Write a random-weight model shaped like HuggingFaceTB/SmolLM-135M, in the Hub layout.

For `daisychain-cli bench decode` (and its PyTorch reference, bench-decode-torch.py): the
same shape as ../shared/anchors/llamacpp's GGUF, so the three run the same work.

  LlamaForCausalLM: hidden 576, 30 layers, 9 heads (head dim 64), 3 key-value heads,
  FFN 1536, RMSNorm eps 1e-5, RoPE theta 10000, 2048 positions, tied head,
  vocabulary 49,152 (SmolLM's size), stored in BF16 as the Hub's file is.

Weights ~ N(0, 0.02) from a fixed seed, norm weights 1.0. The tokenizer is a synthetic
byte-level BPE of 49,152 tokens (256 bytes, 48,895 merges of random pairs of existing
tokens, at most 16 characters, and <|endoftext|>): valid, so every loader takes it, and
the vocabulary has the real size. Only numpy is needed (Debian's python3-numpy).

Usage: python3 scripts/make-bench-model.py OUT_DIR
"""
import json
import os
import struct
import sys

import numpy as np

SHAPE = dict(hidden=576, layers=30, heads=9, kv_heads=3, ffn=1536, vocab=49152,
             positions=2048, theta=10000.0, eps=1e-5)


def byte_chars():
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for _, c in sorted(zip(bs, cs))]


def tokenizer(vocab_size, rng):
    tokens = byte_chars()
    seen = set(tokens)
    merges = []
    while len(tokens) < vocab_size - 1:
        a = tokens[rng.integers(len(tokens))]
        b = tokens[rng.integers(len(tokens))]
        if len(a) + len(b) > 16 or a + b in seen:
            continue
        tokens.append(a + b)
        seen.add(a + b)
        merges.append([a, b])
    eot = len(tokens)
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": eot, "content": "<|endoftext|>", "single_word": False,
                          "lstrip": False, "rstrip": False, "normalized": False,
                          "special": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False,
                           "trim_offsets": False, "use_regex": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "",
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(tokens) } | {"<|endoftext|>": eot},
                  "merges": merges},
    }, eot


def bf16(a):
    """f32 -> bf16 bits, round to nearest even."""
    u = a.astype(np.float32).view(np.uint32)
    u = u + 0x7FFF + ((u >> 16) & 1)
    return (u >> 16).astype(np.uint16)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    s = SHAPE
    rng = np.random.default_rng(135)
    tok, eot = tokenizer(s["vocab"], rng)
    head_dim = s["hidden"] // s["heads"]
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": s["hidden"], "intermediate_size": s["ffn"],
        "num_hidden_layers": s["layers"], "num_attention_heads": s["heads"],
        "num_key_value_heads": s["kv_heads"], "head_dim": head_dim,
        "max_position_embeddings": s["positions"], "rms_norm_eps": s["eps"],
        "rope_theta": s["theta"], "tie_word_embeddings": True, "vocab_size": s["vocab"],
        "hidden_act": "silu", "attention_bias": False, "mlp_bias": False,
        "bos_token_id": eot, "eos_token_id": eot, "torch_dtype": "bfloat16",
    }
    shapes = [("model.embed_tokens.weight", (s["vocab"], s["hidden"]))]
    for l in range(s["layers"]):
        p = f"model.layers.{l}."
        shapes += [
            (p + "input_layernorm.weight", (s["hidden"],)),
            (p + "self_attn.q_proj.weight", (s["heads"] * head_dim, s["hidden"])),
            (p + "self_attn.k_proj.weight", (s["kv_heads"] * head_dim, s["hidden"])),
            (p + "self_attn.v_proj.weight", (s["kv_heads"] * head_dim, s["hidden"])),
            (p + "self_attn.o_proj.weight", (s["hidden"], s["heads"] * head_dim)),
            (p + "post_attention_layernorm.weight", (s["hidden"],)),
            (p + "mlp.gate_proj.weight", (s["ffn"], s["hidden"])),
            (p + "mlp.up_proj.weight", (s["ffn"], s["hidden"])),
            (p + "mlp.down_proj.weight", (s["hidden"], s["ffn"])),
        ]
    shapes.append(("model.norm.weight", (s["hidden"],)))
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, shape in shapes:
        if name.endswith("norm.weight"):
            data = np.ones(shape, np.float32)
        else:
            data = rng.normal(0.0, 0.02, size=shape).astype(np.float32)
        b = bf16(data).tobytes()
        header[name] = {"dtype": "BF16", "shape": list(shape),
                        "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|endoftext|>",
                   "eos_token": "<|endoftext|>", "model_max_length": s["positions"]}, f)
    n = sum(int(np.prod(sh)) for _, sh in shapes)
    print(json.dumps({"dir": out, "parameters": n, "bytes": offset}))


if __name__ == "__main__":
    main()
