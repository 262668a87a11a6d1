"""Lesson 2 benchmark: date normalisation with and without attention.

    python -m benchmarks.seq2seq_dates --framework pytorch --json benchmarks/results/seq2seq_dates_pytorch.json
    python -m benchmarks.seq2seq_dates --framework tensorflow --json benchmarks/results/seq2seq_dates_tensorflow.json

Trains the same encoder-decoder twice on the same generated dates (same sizes
as the lesson's ``cpu`` profile unless told otherwise): once with additive
(Bahdanau) attention, once with the one fixed context vector. Prints the
exact-match accuracy on held-out strings, the accuracy per input length, and
the training seconds (decoding the test set is not counted).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

# The lesson's cpu-profile settings (the notebooks use the same numbers).
CONFIG = dict(n_train=20000, n_test=2000, epochs=2, batch_size=128, lr=3e-3, d_embed=32, d_hidden=64, d_attn=64)
LENGTH_BINS = [6, 12, 16, 20, 24, 28, 40]
TARGET_LEN = 11  # ten ISO characters and <eos>


def run(framework: str, attention: str, cfg: dict, seed: int = 0) -> dict:
    from utils import runtime
    from utils.data import dates, parallel
    from utils.seq2seq import metrics

    runtime.setup(framework, seed=seed, verbose=False)
    if framework == "pytorch":
        from utils.seq2seq import torch_impl as impl
    else:
        from utils.seq2seq import keras_impl as impl
    train, test = dates.date_splits(cfg["n_train"], cfg["n_test"], seed=seed)
    src_vocab, tgt_vocab = parallel.Vocab(dates.SOURCE_CHARS), parallel.Vocab(dates.TARGET_CHARS)
    tr = parallel.load_parallel(train, "char", "char", src_vocab=src_vocab, tgt_vocab=tgt_vocab)
    te = parallel.load_parallel(test, "char", "char", src_vocab=src_vocab, tgt_vocab=tgt_vocab)
    model = impl.Seq2Seq(len(src_vocab), len(tgt_vocab), cfg["d_embed"], cfg["d_hidden"], attention, cfg["d_attn"])
    start = time.perf_counter()
    history = impl.train_seq2seq(model, tr.src, tr.tgt_in, tr.tgt_out, epochs=cfg["epochs"],
                                 batch_size=cfg["batch_size"], lr=cfg["lr"], seed=seed, progress=False)
    seconds = time.perf_counter() - start
    tokens, _ = impl.greedy_decode(model, te.src, TARGET_LEN)
    correct = metrics.exact_match_per_example(tokens, te.tgt_out)
    labels, acc, count = metrics.accuracy_by_length(correct, [len(s) for s, _ in test], LENGTH_BINS)
    return {
        "exact_match": float(correct.mean()),
        "seconds": round(seconds, 1),
        "final_loss": history["loss"][-1],
        "by_length": {lab: {"exact_match": None if np.isnan(a) else float(a), "n": int(c)}
                      for lab, a, c in zip(labels, acc, count)},
    }


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--framework", choices=["pytorch", "tensorflow"], required=True)
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--epochs", type=int, default=CONFIG["epochs"])
    parser.add_argument("--n-train", type=int, default=CONFIG["n_train"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    cfg = {**CONFIG, "epochs": args.epochs, "n_train": args.n_train}
    result: dict = {"framework": args.framework}
    for name, kind in (("attention", "additive"), ("no_attention", "none")):
        result[name] = run(args.framework, kind, cfg, args.seed)
        r = result[name]
        print(f"{args.framework:10s} {name:13s} exact match {r['exact_match']:.4f}  training {r['seconds']:.1f} s")
        print("    by input length: " + "  ".join(
            f"{k}: {_fmt(v['exact_match'])} (n={v['n']})" for k, v in r["by_length"].items()))
    result["config"] = cfg
    result["machine"] = {
        "cpu_count": os.cpu_count(),
        "threads": os.environ.get("COURSE_THREADS", "default"),
        "platform": platform.platform(),
        "note": os.environ.get("BENCH_NOTE", ""),
    }
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
