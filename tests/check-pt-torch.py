#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
# Opens a DaisyChain checkpoint with torch.load (weights_only=True) and prints
# one JSON object: scalars, and the SHA-256 of every tensor's float32 bytes,
# which test-model-checkpoint compares with the in-memory weights.
import hashlib
import json
import sys

import torch

ckpt = torch.load(sys.argv[1], weights_only=True)


def digest(t):
    assert t.dtype == torch.float32, t.dtype
    return hashlib.sha256(t.contiguous().numpy().tobytes()).hexdigest()


out = {
    "torch": torch.__version__,
    "format": ckpt["format"],
    "step": ckpt["step"],
    "tokenizer": ckpt["tokenizer"],
    "config": ckpt["config"],
    "state_type": type(ckpt["model_state_dict"]).__name__,
    "params": {k: digest(v) for k, v in ckpt["model_state_dict"].items()},
    "shapes": {k: list(v.shape) for k, v in ckpt["model_state_dict"].items()},
    "exp_avg": {k: digest(v) for k, v in ckpt["optimizer"]["exp_avg"].items()},
    "exp_avg_sq": {k: digest(v) for k, v in ckpt["optimizer"]["exp_avg_sq"].items()},
    "beta2": float(ckpt["optimizer"]["beta2"]),
}
print(json.dumps(out))
