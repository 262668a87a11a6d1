"""Time per decoding step of lesson 8's GPT with and without the KV cache, and lesson 6's decoders.

    python -m benchmarks.gpt_decoding --json benchmarks/results/gpt_decoding.json

Each framework runs in its own process at the lesson's sizes (1,024 pieces, a context of
64, D = 64, 4 heads, 4 layers) and as the lesson times it: 32 sequences written greedily
at once, from a one-piece prompt to the full context, with ``utils.gpt``'s ``generate``
(``use_cache=True`` and ``False``), ``--threads`` threads (default 2, a laptop's). The
weights are GPT-2's initial values (``init_weights``): a step's time depends on the sizes,
not on the values. Each way runs ``--repeats`` times and each step keeps its fastest run,
so the hiccups of a busy machine drop out; the speed-up is the ratio of the mean step
times of the last 8 steps (the longest prefixes), the figure lesson 8's cpu profile checks.
Both ways must write the same pieces. Then lesson 6's ``greedy_decode`` and ``beam_search``
(beam 4) on 64 random sources of 12 tokens, 30 steps, untrained, with and without the cache:
wall seconds of each, and whether the tokens agree.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

FRAMEWORKS = ("pytorch", "tensorflow")
TAIL = 8  # the last steps, whose mean time is compared


def measure(framework: str, max_len: int, layers: int, batch: int, repeats: int, sources: int) -> dict:
    """Time ``generate`` both ways in this process, and lesson 6's decoders."""
    from utils import runtime

    runtime.setup(framework, seed=0, verbose=False)
    from utils.gpt.common import GPTConfig, decode_macs, init_weights
    from utils.transformer.common import TransformerConfig

    if framework == "pytorch":
        from utils.gpt import torch_impl as G
        from utils.transformer import torch_impl as X
    else:
        from utils.gpt import keras_impl as G
        from utils.transformer import keras_impl as X
    config = GPTConfig(vocab_size=1024, max_len=max_len, d_model=64, num_heads=4, num_layers=layers)
    model = G.GPT(config)
    G.load_weights(model, init_weights(config, 0))
    prompt = np.full((batch, 1), 7, dtype=np.int64)
    G.generate(model, prompt, 4)  # warm-up: traces, allocations
    G.generate(model, prompt, 4, use_cache=False)
    steps, written = {}, {}
    for use_cache in (False, True):
        runs = []
        for _ in range(repeats):
            seconds: list = []
            written[use_cache] = G.generate(model, prompt, max_len, temperature=0, use_cache=use_cache, step_seconds=seconds)
            runs.append(seconds)
        steps[use_cache] = np.min(runs, axis=0)[1:] * 1000.0  # ms; step 0 reads the prompt
    tail = slice(-min(TAIL, max_len - 1), None)
    out = {
        "framework": framework,
        "step_ms_recomputed": [round(float(x), 3) for x in steps[False]],
        "step_ms_cached": [round(float(x), 3) for x in steps[True]],
        "longest_ms_recomputed": round(float(steps[False][tail].mean()), 3),
        "longest_ms_cached": round(float(steps[True][tail].mean()), 3),
        "speedup_at_longest": round(float(steps[False][tail].mean() / steps[True][tail].mean()), 2),
        "total_s_recomputed": round(float(steps[False].sum()) / 1000, 3),
        "total_s_cached": round(float(steps[True].sum()) / 1000, 3),
        "macs_ratio_at_longest": round(decode_macs(config, max_len, False) / decode_macs(config, max_len, True), 2),
        "same_pieces": bool((written[True] == written[False]).all()),
    }
    runtime.seed_everything(0)
    translator = X.Transformer(TransformerConfig(40, 40, d_model=64, num_heads=4, d_ff=128, max_len=64, dropout=0.0))
    if framework == "pytorch":
        translator.eval()
    src = np.random.default_rng(0).integers(4, 40, size=(sources, 12))
    for name, decode in (("greedy", X.greedy_decode), ("beam4", lambda *a, **k: X.beam_search(*a, beam_size=4, **k))):
        tokens = {}
        for use_cache in (False, True):
            start = time.perf_counter()
            tokens[use_cache] = decode(translator, src, 30, use_cache=use_cache)
            out[f"lesson6_{name}_s_{'cached' if use_cache else 'recomputed'}"] = round(time.perf_counter() - start, 3)
        out[f"lesson6_{name}_same_tokens"] = bool((tokens[True] == tokens[False]).all())
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-len", type=int, default=64, help="the context: the longest prefix written")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sources", type=int, default=64, help="lesson 6's decoders: sources decoded")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--frameworks", nargs="+", choices=FRAMEWORKS, default=list(FRAMEWORKS))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--one", choices=FRAMEWORKS, help=argparse.SUPPRESS)  # the child process's own run
    args = parser.parse_args(argv)
    if args.max_len < 2:
        parser.error(f"--max-len {args.max_len}: expected at least 2")
    if args.one:
        print(json.dumps(measure(args.one, args.max_len, args.layers, args.batch, args.repeats, args.sources)))
        return {}
    rows = []
    threads = str(args.threads)
    env = {**os.environ, "COURSE_THREADS": threads, "OMP_NUM_THREADS": threads, "TQDM_DISABLE": "1"}
    load_before = [round(x, 2) for x in os.getloadavg()]
    for fw in args.frameworks:
        cmd = [sys.executable, "-m", "benchmarks.gpt_decoding", "--one", fw, "--max-len", str(args.max_len),
               "--layers", str(args.layers), "--batch", str(args.batch), "--repeats", str(args.repeats),
               "--sources", str(args.sources)]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent)
        if done.returncode:
            raise SystemExit(f"gpt_decoding: the {fw} run failed:\n{done.stderr[-2000:]}")
        row = json.loads(done.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(f"{fw:<10} at prefix {args.max_len}: {row['longest_ms_recomputed']:8.2f} ms per step recomputing, "
              f"{row['longest_ms_cached']:7.2f} ms with the cache: {row['speedup_at_longest']:.1f}x "
              f"(same pieces: {row['same_pieces']}); lesson 6 greedy {row['lesson6_greedy_s_recomputed']:.2f} -> "
              f"{row['lesson6_greedy_s_cached']:.2f} s, beam 4 {row['lesson6_beam4_s_recomputed']:.2f} -> "
              f"{row['lesson6_beam4_s_cached']:.2f} s", flush=True)
    out = {"results": rows, "threads": args.threads, "load_average_before": load_before,
           "load_average_after": [round(x, 2) for x in os.getloadavg()], "cpu_count": os.cpu_count(),
           "command": "python -m benchmarks.gpt_decoding " + " ".join(argv if argv is not None else sys.argv[1:]),
           "date": time.strftime("%Y-%m-%d")}
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return out


if __name__ == "__main__":
    main()
