"""Lesson 9's claims at larger sizes: memory and time of full, tiled, banded and linear attention.

    python -m benchmarks.efficient_attention                      # both frameworks, T = 512 .. 4096
    python -m benchmarks.efficient_attention --json benchmarks/results/efficient_attention.json
    python -m benchmarks.efficient_attention --frameworks pytorch --seq-lens 256 512 1024

Two kinds of figures:

* **memory** (``memory``): the peak bytes the NumPy references allocate while they run
  (``utils.efficient.measure.peak_bytes``, ``tracemalloc``): full attention (lesson 5's
  ``scaled_dot_product_attention``), tiled attention (64 x 64 tiles), sliding-window attention
  masked (full attention with the window mask) and banded, and linear attention. One head,
  float64, D = 64. Deterministic: a property of the algorithms and the sizes, not of the machine.
* **time** (``time``): per framework, the median wall and CPU seconds of one call of the
  course's full attention, its tiled attention (128 x 128 tiles, Python loops), the
  framework's fused kernel, full attention under the window mask, banded attention and
  linear attention (inference, one sequence of 4 heads of width 64, float32), the
  contenders alternating round by round so that a busy machine slows all of them alike.

For each series the growth exponent p of cost ~ T^p is fitted over the lengths
(``utils.efficient.measure.growth_exponent``); for memory, also that of the increments
(what each doubling of T adds), which shows linear growth under a constant part.
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

HALF_WIDTH = 32  # the sliding window's half width w


def _inputs(t: int, seed: int, lead: tuple = ()) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return tuple(rng.normal(size=(*lead, t, 64)) for _ in range(3))


def bench_memory(seq_lens: list[int]) -> dict:
    """Peak bytes of the NumPy references, one head of width 64, float64."""
    from utils.attention import numpy_ref as att
    from utils.efficient import measure
    from utils.efficient import numpy_ref as eff

    rows: dict[str, list[int]] = {"full": [], "tiled": [], "masked_window": [], "banded": [], "linear": []}
    for t in seq_lens:
        q, k, v = _inputs(t, t)
        window = eff.sliding_window_mask(t, HALF_WIDTH)
        rows["full"].append(measure.peak_bytes(att.scaled_dot_product_attention, q, k, v))
        rows["tiled"].append(measure.peak_bytes(eff.tiled_attention, q, k, v, 64, 64))
        rows["masked_window"].append(measure.peak_bytes(att.scaled_dot_product_attention, q, k, v, window))
        rows["banded"].append(measure.peak_bytes(eff.banded_attention, q, k, v, HALF_WIDTH))
        rows["linear"].append(measure.peak_bytes(eff.linear_attention, q, k, v))
        print(f"memory T={t:5d}: " + "  ".join(f"{n} {r[-1] / 2**20:8.2f} MiB" for n, r in rows.items()), flush=True)
    return {
        "peak_bytes": rows,
        "exponent": {n: round(measure.growth_exponent(seq_lens, r), 3) for n, r in rows.items()},
        "increment_exponent": {n: round(measure.growth_exponent(seq_lens[1:], np.diff(r)), 3) for n, r in rows.items()},
    }


def _time_round_robin(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, dict[str, list[float]]]:
    for fn in fns.values():
        fn()  # warm up
    times = {name: {"wall": [], "cpu": []} for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            wall, cpu = time.perf_counter(), time.process_time()
            fn()
            times[name]["wall"].append(time.perf_counter() - wall)
            times[name]["cpu"].append(time.process_time() - cpu)
    return times


def _contenders(framework: str, t: int) -> dict[str, Callable[[], object]]:
    q_np, k_np, v_np = (x.astype(np.float32) for x in _inputs(t, t, lead=(1, 4)))
    if framework == "pytorch":
        import torch
        import torch.nn.functional as F

        from utils.attention import torch_impl as att
        from utils.efficient import torch_impl as eff

        torch.set_grad_enabled(False)
        q, k, v = (torch.as_tensor(x) for x in (q_np, k_np, v_np))
        fused = lambda: F.scaled_dot_product_attention(q, k, v)  # noqa: E731
        done = lambda x: x  # noqa: E731  torch on the CPU returns when the work is done
    else:
        from utils.runtime import prepare_tensorflow_env

        prepare_tensorflow_env()
        from keras import ops

        from utils.attention import keras_impl as att
        from utils.efficient import keras_impl as eff

        q, k, v = (ops.convert_to_tensor(x) for x in (q_np, k_np, v_np))
        moved = [ops.transpose(x, (0, 2, 1, 3)) for x in (q, k, v)]  # (B, T, H, Dh) for Keras
        fused = lambda: ops.dot_product_attention(*moved)  # noqa: E731
        done = ops.convert_to_numpy  # wait for the result
    window = eff.sliding_window_mask(t, HALF_WIDTH)
    return {
        "full": lambda: done(att.scaled_dot_product_attention(q, k, v)[0]),
        "tiled": lambda: done(eff.tiled_attention(q, k, v, 128, 128)),
        "fused": lambda: done(fused()),
        "masked_window": lambda: done(att.scaled_dot_product_attention(q, k, v, window)[0]),
        "banded": lambda: done(eff.banded_attention(q, k, v, HALF_WIDTH)),
        "linear": lambda: done(eff.linear_attention(q, k, v)),
    }


def bench_time(framework: str, seq_lens: list[int], repeats: int) -> dict:
    from utils.efficient import measure

    threads = os.environ.get("COURSE_THREADS")
    if threads and framework == "pytorch":
        import torch

        torch.set_num_threads(int(threads))
    median: dict[str, dict[str, list[float]]] = {}
    for t in seq_lens:
        times = _time_round_robin(_contenders(framework, t), repeats)
        for name, clocks in times.items():
            for clock, values in clocks.items():
                median.setdefault(name, {"wall": [], "cpu": []})[clock].append(statistics.median(values))
        print(f"{framework} T={t:5d}: " + "  ".join(f"{n} {m['wall'][-1] * 1e3:8.2f} ms" for n, m in median.items()),
              flush=True)
    return {
        "median_seconds": median,
        "exponent": {n: {c: round(measure.growth_exponent(seq_lens, m[c]), 3) for c in m} for n, m in median.items()},
    }


def _time_in_child(framework: str, args: argparse.Namespace) -> dict:
    """Time one framework in a fresh process: torch and TensorFlow are never loaded together."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "time.json"
        subprocess.run([sys.executable, "-m", "benchmarks.efficient_attention", "--time-of", framework,
                        "--repeats", str(args.repeats), "--json", str(out), "--seq-lens", *map(str, args.seq_lens)],
                       check=True)
        return json.loads(out.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frameworks", nargs="*", default=["pytorch", "tensorflow"], choices=["pytorch", "tensorflow"])
    parser.add_argument("--seq-lens", nargs="*", type=int, default=[512, 1024, 2048, 4096])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--time-of", choices=["pytorch", "tensorflow"],
                        help="(used by the run itself) time this framework in this process and write only that")
    args = parser.parse_args(argv)
    if len(args.seq_lens) < 3:
        parser.error("--seq-lens: give at least three lengths (the exponents are fitted over them)")
    if args.time_of:
        args.json.write_text(json.dumps(bench_time(args.time_of, args.seq_lens, args.repeats)))
        return 0
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    result = {"benchmark": "efficient_attention", "seq_lens": args.seq_lens, "half_width": HALF_WIDTH,
              "memory": bench_memory(args.seq_lens),
              "time": {fw: _time_in_child(fw, args) for fw in args.frameworks}}
    result.update(
        seconds=round(time.perf_counter() - start, 1),
        load_before=round(load_before, 2),
        load_after=round(os.getloadavg()[0], 2),
        machine={"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version(),
                 "threads": os.environ.get("COURSE_THREADS", "default")},
    )
    print(json.dumps({"memory exponents": result["memory"]["exponent"],
                      "memory increment exponents": result["memory"]["increment_exponent"],
                      "time exponents (cpu seconds)": {fw: {n: e["cpu"] for n, e in r["exponent"].items()}
                                                       for fw, r in result["time"].items()}}, indent=1))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
