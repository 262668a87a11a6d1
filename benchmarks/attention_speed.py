"""Speed of the course's multi-head attention against the libraries' layers.

    python -m benchmarks.attention_speed                       # both frameworks, T = 128 and 512
    python -m benchmarks.attention_speed --json benchmarks/results/attention_speed.json
    python -m benchmarks.attention_speed --frameworks pytorch --seq-lens 64 128 256 512 1024

For each framework and sequence length it builds the course's
``MultiHeadAttention``, copies its weights into the library layer
(``torch.nn.MultiheadAttention`` / ``keras.layers.MultiHeadAttention``),
checks that both give the same output (1e-4), then times self-attention
forward passes (inference, no gradient) in the same process, alternating the
contenders round by round so that a noisy, shared machine slows all of them
alike. It reports median seconds per call and the ratio course / library.

Two library timings are recorded:

* ``library_seconds``: the library layer called the way a model calls it, not
  asking for attention weights (torch ``need_weights=False``; Keras without
  ``return_attention_scores``), which lets it take its fastest path.
* ``library_weights_seconds``: the library layer asked for the per-head
  weights, which is the same work the course's layer does (it always returns them).

``ratio`` = ``course_seconds / library_seconds`` (the stricter of the two).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np


def _time_round_robin(fns: dict[str, Callable[[], object]], repeats: int, warmup: int = 2) -> dict[str, list[float]]:
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return times


def bench_pytorch(seq_lens: list[int], batch: int, width: int, heads: int, repeats: int) -> list[dict]:
    import torch

    from utils.attention import torch_impl

    threads = os.environ.get("COURSE_THREADS")
    if threads:
        torch.set_num_threads(int(threads))
    torch.manual_seed(0)
    results = []
    for t in seq_lens:
        ours = torch_impl.MultiHeadAttention(width, heads).eval()
        lib = torch_impl.to_library(ours).eval()
        x = torch.randn(batch, t, width)
        with torch.inference_mode():
            diff = (ours(x, x, x)[0] - lib(x, x, x, need_weights=False)[0]).abs().max().item()
            if diff > 1e-4:
                raise RuntimeError(f"pytorch T={t}: course and library outputs differ by {diff:.3g}")
            times = _time_round_robin(
                {
                    "course": lambda: ours(x, x, x),
                    "library": lambda: lib(x, x, x, need_weights=False),
                    "library_weights": lambda: lib(x, x, x, need_weights=True, average_attn_weights=False),
                },
                repeats,
            )
        results.append(_row("pytorch", t, times, diff))
        print(_line(results[-1]), flush=True)
    return results


def bench_tensorflow(seq_lens: list[int], batch: int, width: int, heads: int, repeats: int) -> list[dict]:
    from utils.runtime import prepare_tensorflow_env

    prepare_tensorflow_env()
    import keras
    from keras import ops

    from utils.attention import keras_impl

    keras.utils.set_random_seed(0)
    results = []
    for t in seq_lens:
        ours = keras_impl.MultiHeadAttention(width, heads)
        lib = keras_impl.to_library(ours)
        x = ops.convert_to_tensor(np.random.default_rng(t).normal(size=(batch, t, width)).astype("float32"))
        diff = float(np.abs(ops.convert_to_numpy(ours(x, x, x)[0] - lib(x, x, x))).max())
        if diff > 1e-4:
            raise RuntimeError(f"tensorflow T={t}: course and library outputs differ by {diff:.3g}")
        times = _time_round_robin(
            {
                "course": lambda: ours(x, x, x),
                "library": lambda: lib(x, x, x),
                "library_weights": lambda: lib(x, x, x, return_attention_scores=True),
            },
            repeats,
        )
        results.append(_row("tensorflow", t, times, diff))
        print(_line(results[-1]), flush=True)
    return results


def _row(framework: str, seq_len: int, times: dict[str, list[float]], diff: float) -> dict:
    course = statistics.median(times["course"])
    library = statistics.median(times["library"])
    library_w = statistics.median(times["library_weights"])
    return {
        "framework": framework,
        "seq_len": seq_len,
        "course_seconds": course,
        "library_seconds": library,
        "ratio": course / library,
        "library_weights_seconds": library_w,
        "ratio_same_work": course / library_w,
        "course_min_seconds": min(times["course"]),
        "library_min_seconds": min(times["library"]),
        "max_abs_diff": diff,
        "repeats": len(times["course"]),
    }


def _line(r: dict) -> str:
    return (
        f"{r['framework']:>10}  T={r['seq_len']:>5}  course {r['course_seconds'] * 1e3:8.1f} ms  "
        f"library {r['library_seconds'] * 1e3:8.1f} ms  ratio {r['ratio']:.2f}   "
        f"(library returning weights {r['library_weights_seconds'] * 1e3:8.1f} ms, ratio {r['ratio_same_work']:.2f})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frameworks", nargs="+", default=["pytorch", "tensorflow"], choices=["pytorch", "tensorflow"])
    parser.add_argument("--seq-lens", nargs="+", type=int, default=[128, 512])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json", type=Path, default=None, help="write the results to this file")
    args = parser.parse_args(argv)
    if args.width % args.heads:
        parser.error(f"--heads: expected a divisor of --width={args.width}, got {args.heads}")
    if min(args.seq_lens) < 1 or args.repeats < 1:
        parser.error("--seq-lens and --repeats must be positive")

    print(f"batch {args.batch}, width {args.width}, heads {args.heads}, {args.repeats} rounds; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}", flush=True)
    results: list[dict] = []
    for fw in args.frameworks:
        bench = bench_pytorch if fw == "pytorch" else bench_tensorflow
        results += bench(args.seq_lens, args.batch, args.width, args.heads, args.repeats)
    print("ratios (course / library):", ", ".join(f"{r['framework']} T={r['seq_len']}: {r['ratio']:.2f}" for r in results))
    if args.json:
        meta = {
            "batch": args.batch,
            "width": args.width,
            "heads": args.heads,
            "cpus": os.cpu_count(),
            "load_average_at_end": os.getloadavg()[0],
            "platform": platform.platform(),
            "python": sys.version.split()[0],
            "course_threads": os.environ.get("COURSE_THREADS"),
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"results": results, "meta": meta}, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
