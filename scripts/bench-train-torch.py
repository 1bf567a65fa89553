#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
# The PyTorch side of `daisychain-cli bench train`: trains the same GPT-2
# (byte vocabulary, learned positions, pre-norm, ReLU MLP of 4·C, tied head,
# Adam lr 0.01) in plain f32 and prints one JSON line per configuration with
# its training tokens per second. Batches are random bytes: speed does not
# depend on the text. Usage: bench-train-torch.py THREADS MIN_TIME
# [--cpu-only] [--no-cpu] W,T,B,L,H ...
import json
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, c, h):
        super().__init__()
        self.h = h
        self.ln_1 = nn.LayerNorm(c, eps=1e-5)
        self.c_attn = nn.Linear(c, 3 * c)
        self.c_proj = nn.Linear(c, c)
        self.ln_2 = nn.LayerNorm(c, eps=1e-5)
        self.c_fc = nn.Linear(c, 4 * c)
        self.mlp_proj = nn.Linear(4 * c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.h, c // self.h).transpose(1, 2) for z in (q, k, v))
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # torch 1.13 (Debian 12)
            att = (q @ k.transpose(-2, -1)) * (1.0 / (k.shape[-1] ** 0.5))
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            y = att.masked_fill(~mask, float("-inf")).softmax(-1) @ v
        x = x + self.c_proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp_proj(F.relu(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, c, t, layers, h):
        super().__init__()
        self.wte = nn.Embedding(256, c)
        self.wpe = nn.Embedding(t, c)
        self.blocks = nn.ModuleList(Block(c, h) for _ in range(layers))
        self.ln_f = nn.LayerNorm(c, eps=1e-5)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t, device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.T
        return F.cross_entropy(logits.reshape(-1, 256), targets.reshape(-1))


def bench(c, t, b, layers, h, min_time, device):
    torch.manual_seed(0)
    model = GPT(c, t, layers, h).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)

    def step():
        idx = torch.randint(0, 256, (b, t + 1), device=device)
        loss = model(idx[:, :-1], idx[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    step()
    if device == "cuda":
        torch.cuda.synchronize()
    steps = 0
    start = time.perf_counter()
    while True:
        step()
        steps += 1
        if device == "cuda":
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
        if elapsed >= min_time and steps >= 2:
            break
    return steps * b * t / elapsed, steps


threads = int(sys.argv[1])
min_time = float(sys.argv[2])
torch.set_num_threads(threads)
specs = sys.argv[3:]
# --cpu-only (bench train --no-vulkan): no CUDA run either.
cpu_only = "--cpu-only" in specs
# --no-cpu (bench train --backends vulkan): CUDA alone.
no_cpu = "--no-cpu" in specs
specs = [s for s in specs if s not in ("--cpu-only", "--no-cpu")]
devices = ([] if no_cpu else ["cpu"]) + (["cuda"] if torch.cuda.is_available() and not cpu_only else [])
for spec in specs:
    c, t, b, layers, h = (int(x) for x in spec.split(","))
    for device in devices:
        tps, steps = bench(c, t, b, layers, h, min_time, device)
        print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(),
                          "device": device, "spec": spec, "tokens_per_s": tps, "steps": steps}),
              flush=True)
