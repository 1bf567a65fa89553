#!/usr/bin/env python3
"""PyTorch's f32 speed on a Llama-family model in the Hub layout: the reference that
`daisychain-cli bench decode` runs beside itself, in the same sitting.

A plain Llama forward with a KV cache (RMSNorm, RoPE, grouped-query attention, SwiGLU,
tied or untied head), weights widened to f32, CPU, torch.set_num_threads(THREADS):
prefill of a PROMPT-token prompt (ids from a fixed seed), then DECODE greedy steps,
one token at a time; the median of RUNS runs. Reads model.safetensors with numpy
(Debian's python3-torch has no safetensors module). Checked against transformers: on the
llama-tiny fixture its first-step top-3 logits equal reference.json's to 4 decimals.
Prints one JSON line:
{"torch", "threads", "prefill_tok_s", "decode_tok_s", "peak_rss_mib"}.

Usage: python3 bench-decode-torch.py MODEL_DIR [--threads N] [--prompt 64] [--decode 128] [--runs 5]
"""
import argparse
import json
import os
import resource
import statistics
import struct
import time

import numpy as np
import torch


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        raw = np.frombuffer(data[b:e], dtype={"F32": np.float32, "F16": np.float16,
                                              "BF16": np.uint16}[t["dtype"]])
        if t["dtype"] == "BF16":
            a = (raw.astype(np.uint32) << 16).view(np.float32)
        else:
            a = raw.astype(np.float32)
        out[name] = torch.from_numpy(a.reshape(t["shape"]).copy())
    return out


class Llama:
    def __init__(self, folder):
        with open(os.path.join(folder, "config.json")) as f:
            c = json.load(f)
        self.c = c
        w = load_safetensors(os.path.join(folder, "model.safetensors"))
        self.w = w
        self.h = c["num_attention_heads"]
        self.kv = c.get("num_key_value_heads", self.h)
        self.d = c.get("head_dim") or c["hidden_size"] // self.h
        self.eps = c["rms_norm_eps"]
        self.layers = c["num_hidden_layers"]
        theta = c.get("rope_theta") or c.get("rope_parameters", {}).get("rope_theta", 10000.0)
        inv = 1.0 / (theta ** (torch.arange(0, self.d, 2, dtype=torch.float32) / self.d))
        pos = torch.arange(c["max_position_embeddings"], dtype=torch.float32)
        ang = torch.outer(pos, inv)
        self.cos, self.sin = torch.cos(ang), torch.sin(ang)
        self.head = w.get("lm_head.weight", w["model.embed_tokens.weight"])

    def norm(self, x, g):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * g

    def rope(self, x, p0):
        t = x.shape[1]
        cos = self.cos[p0:p0 + t].unsqueeze(0)
        sin = self.sin[p0:p0 + t].unsqueeze(0)
        x1, x2 = x[..., : self.d // 2], x[..., self.d // 2:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)

    @torch.no_grad()
    def forward(self, ids, cache):
        w = self.w
        p0 = cache["len"]
        x = w["model.embed_tokens.weight"][ids]
        t = len(ids)
        for l in range(self.layers):
            p = f"model.layers.{l}."
            a = self.norm(x, w[p + "input_layernorm.weight"])
            q = (a @ w[p + "self_attn.q_proj.weight"].T).view(t, self.h, self.d).transpose(0, 1)
            k = (a @ w[p + "self_attn.k_proj.weight"].T).view(t, self.kv, self.d).transpose(0, 1)
            v = (a @ w[p + "self_attn.v_proj.weight"].T).view(t, self.kv, self.d).transpose(0, 1)
            q, k = self.rope(q, p0), self.rope(k, p0)
            kc, vc = cache["k"][l], cache["v"][l]
            kc[:, p0:p0 + t] = k
            vc[:, p0:p0 + t] = v
            keys = kc[:, : p0 + t].repeat_interleave(self.h // self.kv, 0)
            vals = vc[:, : p0 + t].repeat_interleave(self.h // self.kv, 0)
            s = q @ keys.transpose(1, 2) / (self.d ** 0.5)
            mask = torch.full((t, p0 + t), float("-inf")).triu(p0 + 1)
            o = torch.softmax(s + mask, -1) @ vals
            x = x + o.transpose(0, 1).reshape(t, -1) @ w[p + "self_attn.o_proj.weight"].T
            a = self.norm(x, w[p + "post_attention_layernorm.weight"])
            g = torch.nn.functional.silu(a @ w[p + "mlp.gate_proj.weight"].T)
            x = x + (g * (a @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
        cache["len"] = p0 + t
        x = self.norm(x[-1:], w["model.norm.weight"])
        return (x @ self.head.T)[0]

    def new_cache(self, n):
        return {"len": 0,
                "k": [torch.zeros(self.kv, n, self.d) for _ in range(self.layers)],
                "v": [torch.zeros(self.kv, n, self.d) for _ in range(self.layers)]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--decode", type=int, default=128)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    m = Llama(args.model)
    g = torch.Generator().manual_seed(64)
    prompt = torch.randint(0, m.c["vocab_size"], (args.prompt,), generator=g)
    pre, dec = [], []
    for _ in range(args.runs):
        cache = m.new_cache(args.prompt + args.decode)
        t0 = time.perf_counter()
        logits = m.forward(prompt, cache)
        t1 = time.perf_counter()
        for _ in range(args.decode):
            logits = m.forward(torch.argmax(logits).view(1), cache)
        t2 = time.perf_counter()
        pre.append(args.prompt / (t1 - t0))
        dec.append(args.decode / (t2 - t1))
    print(json.dumps({"torch": torch.__version__, "threads": args.threads,
                      "prefill_tok_s": statistics.median(pre),
                      "decode_tok_s": statistics.median(dec),
                      "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


if __name__ == "__main__":
    main()
