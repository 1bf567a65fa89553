#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
# Checks an exported Hugging Face folder without transformers (Debian 12 has
# none): reads model.safetensors by its documented layout, runs GPT-2 with
# config.json's settings in PyTorch (f32, Conv1D weights (in, out), tied head,
# ReLU), and compares the logits of PROMPT with our dumps. Also checks that
# tokenizer.json maps each byte to the id of its value with GPT-2's
# bytes_to_unicode table. Prints one JSON object.
#
# Usage: check-hf-export.py DIR PROMPT LOGITS_F32 LOGITS_INT8
import json
import math
import struct
import sys

import torch
import torch.nn.functional as F

folder, prompt, f32_path, int8_path = sys.argv[1:5]
cfg = json.load(open(folder + "/config.json"))
raw = open(folder + "/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
base = 8 + n
W = {}
for name, spec in header.items():
    if name == "__metadata__":
        continue
    assert spec["dtype"] == "F32", spec
    a, b = spec["data_offsets"]
    W[name] = torch.frombuffer(bytearray(raw[base + a:base + b]), dtype=torch.float32).reshape(spec["shape"])


def gpt2(ids):
    T = len(ids)
    C = cfg["n_embd"]
    H = cfg["n_head"]
    D = C // H
    eps = cfg["layer_norm_epsilon"]
    x = W["transformer.wte.weight"][ids] + W["transformer.wpe.weight"][:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for layer in range(cfg["n_layer"]):
        def p(s):
            return W[f"transformer.h.{layer}.{s}"]
        h = F.layer_norm(x, (C,), p("ln_1.weight"), p("ln_1.bias"), eps)
        q, k, v = (h @ p("attn.c_attn.weight") + p("attn.c_attn.bias")).split(C, dim=-1)
        q, k, v = (t.view(T, H, D).transpose(0, 1) for t in (q, k, v))
        att = (q @ k.transpose(-1, -2)) / math.sqrt(D)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(0, 1).reshape(T, C)
        x = x + y @ p("attn.c_proj.weight") + p("attn.c_proj.bias")
        h = F.layer_norm(x, (C,), p("ln_2.weight"), p("ln_2.bias"), eps)
        x = x + F.relu(h @ p("mlp.c_fc.weight") + p("mlp.c_fc.bias")) @ p("mlp.c_proj.weight") + p("mlp.c_proj.bias")
    x = F.layer_norm(x, (C,), W["transformer.ln_f.weight"], W["transformer.ln_f.bias"], eps)
    return x @ W["transformer.wte.weight"].T


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


tok = json.load(open(folder + "/tokenizer.json"))
table = bytes_to_unicode()
vocab = tok["model"]["vocab"]
tokenizer_ok = len(vocab) == 256 and all(vocab[table[b]] == b for b in range(256))

ids = list(prompt.encode())
with torch.no_grad():
    ref = gpt2(ids)
ours_f32 = torch.frombuffer(bytearray(open(f32_path, "rb").read()), dtype=torch.float32).reshape(len(ids), 256)
ours_int8 = torch.frombuffer(bytearray(open(int8_path, "rb").read()), dtype=torch.float32).reshape(len(ids), 256)
scale = ref.abs().max().item()
print(json.dumps({
    "config_ok": cfg["architectures"] == ["GPT2LMHeadModel"] and cfg["activation_function"] == "relu" and cfg["vocab_size"] == 256,
    "tokenizer_ok": tokenizer_ok,
    "tensors": len(W),
    "logit_scale": scale,
    "max_diff_f32": (ref - ours_f32).abs().max().item(),
    "max_diff_int8": (ref - ours_int8).abs().max().item(),
    "argmax_agree_int8": (ref.argmax(-1) == ours_int8.argmax(-1)).float().mean().item(),
}))
