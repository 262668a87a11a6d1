"""CPU time per training step of the course's Transformer, PyTorch against Keras, one thread each.

    python -m benchmarks.transformer_step --json benchmarks/results/transformer_step.json

Each framework runs in its own process (``COURSE_THREADS=1``) on the same
synthetic batches: the translation benchmark's model (width 128, 2 + 2 layers,
4 heads, d_ff 512, dropout 0.1, tied output embeddings, 8,000-token vocabularies)
and batch (64 pairs of about 15 source and 14 target tokens, padded to 22 / 23).
The steps run in ``train_transformer`` with ``clock=time.process_time``, so the
history's per-step times are CPU seconds; the first ``--skip`` steps (traces,
allocator warm-up) are left out and the median of the rest is reported.
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


def measure(framework: str, steps: int, skip: int, vocab: int, d_model: int) -> dict:
    """Train ``steps`` steps in this process; CPU milliseconds per step (run with one thread)."""
    from utils import runtime

    runtime.setup(framework, seed=0)
    from utils.transformer.common import TransformerConfig

    if framework == "pytorch":
        from utils.transformer import torch_impl as X
    else:
        from utils.transformer import keras_impl as X
    batch, ts, tt = 64, 22, 23
    rng = np.random.default_rng(0)
    src = rng.integers(4, vocab, (batch * steps, ts))
    src[:, 15:] = 0  # (N, Ts) about 15 real tokens, then padding
    tgt_in = rng.integers(4, vocab, (batch * steps, tt))
    tgt_in[:, 14:] = 0
    tgt_out = np.roll(tgt_in, -1, axis=1)
    tgt_out[:, -1] = 0
    config = TransformerConfig(vocab, vocab, d_model=d_model, num_heads=4, d_ff=4 * d_model, num_encoder_layers=2,
                               num_decoder_layers=2, max_len=64, dropout=0.1, tie_embeddings=True)
    model = X.Transformer(config)
    history = X.train_transformer(model, src, tgt_in, tgt_out, epochs=1, batch_size=batch, warmup_steps=100,
                                  progress=False, clock=time.process_time)
    per_step = np.diff([0.0] + history["step_seconds"])[skip:] * 1000.0
    return {"framework": framework, "median_ms": round(float(np.median(per_step)), 1),
            "mean_ms": round(float(per_step.mean()), 1), "steps_timed": int(len(per_step)),
            "final_loss": round(history["loss"][-1], 4)}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--skip", type=int, default=10, help="leading steps left out of the timing")
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--one", choices=FRAMEWORKS, help=argparse.SUPPRESS)  # the child process's own run
    args = parser.parse_args(argv)
    if args.steps <= args.skip:
        parser.error(f"--steps {args.steps}: expected more steps than --skip {args.skip}")
    if args.one:
        print(json.dumps(measure(args.one, args.steps, args.skip, args.vocab, args.d_model)))
        return {}
    rows = []
    env = {**os.environ, "COURSE_THREADS": "1", "OMP_NUM_THREADS": "1", "TQDM_DISABLE": "1"}
    for fw in FRAMEWORKS:
        cmd = [sys.executable, "-m", "benchmarks.transformer_step", "--one", fw, "--steps", str(args.steps),
               "--skip", str(args.skip), "--vocab", str(args.vocab), "--d-model", str(args.d_model)]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent)
        if done.returncode:
            raise SystemExit(f"transformer_step: the {fw} run failed:\n{done.stderr[-2000:]}")
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"{fw:<10} {rows[-1]['median_ms']:7.1f} ms CPU per step (median of {rows[-1]['steps_timed']})", flush=True)
    out = {"results": rows, "pytorch_over_tensorflow": round(rows[0]["median_ms"] / rows[1]["median_ms"], 3),
           "threads": 1, "load_average": [round(x, 2) for x in os.getloadavg()],
           "command": "python -m benchmarks.transformer_step " + " ".join(argv if argv is not None else sys.argv[1:]),
           "date": time.strftime("%Y-%m-%d")}
    print(f"PyTorch / TensorFlow: {out['pytorch_over_tensorflow']:.3f}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return out


if __name__ == "__main__":
    main()
