# bench-torch.py: the PyTorch reference for `daisychain-cli bench gemm`.
#
# Run by the benchmark itself (compiled into it as a resource) in the same
# invocation: f32 matmul of the same shapes on the CPU with all cores, and,
# where CUDA is available, torch._int_mm (int8 → int32) on the GPU.
# Prints one JSON object per line. Exit status 3 means PyTorch is missing;
# nothing is ever installed.
#
# SPDX-License-Identifier: GPL-3.0-or-later
import json
import os
import sys
import time

try:
    import torch
except ImportError:
    print(json.dumps({"error": "no-torch"}), flush=True)
    sys.exit(3)


def timed(fn, min_time):
    fn()
    reps, start = 0, time.perf_counter()
    while True:
        fn()
        reps += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_time or reps >= 200:
            return elapsed / reps


def main():
    threads = int(sys.argv[1])
    min_time = float(sys.argv[2])
    shapes = [tuple(int(v) for v in s.split(",")) for s in sys.argv[3:]]
    torch.set_num_threads(threads)
    cuda = torch.cuda.is_available()
    print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(),
                      "cuda": torch.cuda.get_device_name(0) if cuda else None}), flush=True)
    for m, n, k in shapes:
        a = torch.randn(m, k)
        b = torch.randn(k, n)
        seconds = timed(lambda: torch.matmul(a, b), min_time)
        row = {"m": m, "n": n, "k": k, "gflops": 2.0 * m * n * k / seconds / 1e9}
        # torch._int_mm needs m > 16 and k, n multiples of 8.
        if cuda and m > 16 and k % 8 == 0 and n % 8 == 0:
            ai = torch.randint(-127, 128, (m, k), dtype=torch.int8, device="cuda")
            bi = torch.randint(-127, 128, (k, n), dtype=torch.int8, device="cuda")

            def int_mm():
                torch._int_mm(ai, bi)
                torch.cuda.synchronize()

            row["int8_gops"] = 2.0 * m * n * k / timed(int_mm, min_time) / 1e9
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
