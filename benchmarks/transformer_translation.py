"""Train the course's Transformer on a parallel corpus within a time budget and report corpus BLEU.

    python -m benchmarks.transformer_translation --framework pytorch \
        --train-src train.en --train-tgt train.es --test-src test.en --test-tgt test.es \
        [--minutes 30] [--bleu-at 10] [--subwords bpe] [--json FILE]
    python -m benchmarks.transformer_translation --framework tensorflow \
        --train-tsv train.tsv --test-tsv test.tsv [--columns 0 1]

Files are read with ``utils.data.parallel.read_parallel`` (one sentence per line
in two files, or one tab-separated file per split). Tokens are lower-cased words
and punctuation marks, or with ``--subwords bpe`` (or ``wordpiece``) pieces of
those words learned from the training split (``utils.data.parallel.Subwords``,
``--max-vocab`` pieces per language), joined back into words before scoring;
``--bleu-at M ...`` also scores the test split when the budget's clock first
passes M minutes (the decoding time is left out of the budget). BLEU (sacrebleu, default 13a tokeniser) compares the
detokenised-by-spaces output with the test references tokenised the same way.
Prints BLEU, a few translations and the seconds taken; ``--json`` writes
``{"framework", "bleu", "seconds", "train_pairs", ...}``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--framework", choices=("pytorch", "tensorflow"), required=True)
    p.add_argument("--train-src"), p.add_argument("--train-tgt")
    p.add_argument("--test-src"), p.add_argument("--test-tgt")
    p.add_argument("--train-tsv"), p.add_argument("--test-tsv")
    p.add_argument("--holdout", type=int, default=0,
                   help="with --train-tsv and no test file: shuffle the pairs (seeded) and hold out this many for test")
    p.add_argument("--columns", type=int, nargs=2, default=(0, 1), help="source and target columns of a TSV file")
    p.add_argument("--minutes", type=float, default=30.0, help="training budget in minutes (evaluation not included)")
    p.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                   help="what the budget counts: this process's CPU time (default; fair on a shared machine) or wall time")
    p.add_argument("--max-len", type=int, default=20, help="drop pairs longer than this many tokens")
    p.add_argument("--max-vocab", type=int, default=8000, help="words (or subword pieces) per language")
    p.add_argument("--subwords", choices=("none", "bpe", "wordpiece"), default="none",
                   help="split words into pieces learned from the training split (default: whole words, rare ones <unk>)")
    p.add_argument("--bleu-at", type=float, nargs="*", default=[], metavar="MINUTES",
                   help="also decode and score the test split when the training clock passes these minutes")
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--warmup", type=int, default=1000)
    p.add_argument("--lr-scale", type=float, default=1.0)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--beam", type=int, default=0, help="beam size (0 = greedy decoding)")
    p.add_argument("--max-test", type=int, default=2000, help="evaluate on at most this many test pairs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json")
    args = p.parse_args(argv)
    two_files = args.train_src and args.train_tgt and args.test_src and args.test_tgt
    tsv = args.train_tsv and (args.test_tsv or args.holdout > 0)
    if not (two_files or tsv):
        p.error("give --train-src/--train-tgt/--test-src/--test-tgt, or --train-tsv with --test-tsv or --holdout N")
    bad = [m for m in args.bleu_at if not 0 < m < args.minutes]
    if bad:
        p.error(f"--bleu-at: expected minutes between 0 and --minutes {args.minutes:g} (the end is always scored), got {bad[0]:g}")
    return args


class CheckpointClock:
    """The training budget's clock, which also runs ``evaluate(minutes)`` the first time it passes each checkpoint.

    The loop reads its clock after every step, so a checkpoint is evaluated between
    two steps; the seconds that ``evaluate`` takes are left out of the time this
    clock reports, so the budget counts training only. Results are kept in
    ``self.results`` in checkpoint order.
    """

    def __init__(self, base, minutes: list[float], evaluate) -> None:
        self.base, self.pending, self.evaluate = base, sorted(minutes), evaluate
        self.start, self.paused, self.results = None, 0.0, []

    def __call__(self) -> float:
        now = self.base()
        if self.start is None:
            self.start = now
        elapsed = now - self.start - self.paused
        if self.pending and elapsed >= 60 * self.pending[0]:
            self.results.append(self.evaluate(self.pending.pop(0)))
            self.paused += self.base() - now
        return elapsed


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    try:  # fail now, not after the training budget has been spent
        import sacrebleu
    except ImportError:
        raise SystemExit("transformer_translation needs sacrebleu for BLEU: pip install 'sacrebleu>=2.3' "
                         "(it comes with the course's dev extras: pip install -e '.[dev]')") from None
    from utils import runtime
    from utils.data.parallel import Subwords, load_parallel, read_parallel, tokenize

    runtime.setup(args.framework, seed=args.seed)
    if args.framework == "pytorch":
        from utils.transformer import torch_impl as X
    else:
        from utils.transformer import keras_impl as X
    from utils.transformer.common import TransformerConfig

    start = time.perf_counter()
    cols = tuple(args.columns)
    if args.train_tsv:
        train_pairs = read_parallel(args.train_tsv, columns=cols)
        if args.test_tsv:
            test_pairs = read_parallel(args.test_tsv, columns=cols)
        else:
            if args.holdout >= len(train_pairs):
                raise SystemExit(f"--holdout {args.holdout}: {args.train_tsv} has only {len(train_pairs)} pairs")
            order = np.random.default_rng(args.seed).permutation(len(train_pairs))
            shuffled = [train_pairs[i] for i in order]
            test_pairs, train_pairs = shuffled[: args.holdout], shuffled[args.holdout:]
    else:
        train_pairs = read_parallel(args.train_src, args.train_tgt)
        test_pairs = read_parallel(args.test_src, args.test_tgt)
    src_sub = tgt_sub = None
    if args.subwords != "none":  # learned from the training split's words only
        src_sub = Subwords.train([tokenize(s, lower=True) for s, _ in train_pairs], args.max_vocab, args.subwords)
        tgt_sub = Subwords.train([tokenize(t, lower=True) for _, t in train_pairs], args.max_vocab, args.subwords)
    train = load_parallel(train_pairs, lower=True, max_vocab=args.max_vocab, max_len=args.max_len,
                          src_subwords=src_sub, tgt_subwords=tgt_sub)
    test_pairs = test_pairs[: args.max_test]
    test = load_parallel(test_pairs, lower=True, src_vocab=train.src_vocab, tgt_vocab=train.tgt_vocab,
                         src_subwords=src_sub, tgt_subwords=tgt_sub)
    unk = train.src_vocab.unk_id
    print(f"train pairs {len(train)} (of {len(train_pairs)}, max_len {args.max_len} words), test pairs {len(test)}, "
          f"vocab ({args.subwords if src_sub else 'words'}) {len(train.src_vocab)} / {len(train.tgt_vocab)}, "
          f"<unk> in test sources {np.mean(test.src[test.src > 0] == unk):.2%}, "
          f"tokens per training source {np.mean((train.src > 0).sum(1)):.1f}")
    config = TransformerConfig(
        len(train.src_vocab), len(train.tgt_vocab), d_model=args.d_model, num_heads=args.heads,
        d_ff=4 * args.d_model, num_encoder_layers=args.layers, num_decoder_layers=args.layers,
        max_len=max(train.src.shape[1], test.src.shape[1], train.tgt_in.shape[1], 2 * args.max_len) + 2,
        dropout=args.dropout, tie_embeddings=True,
    )
    model = X.Transformer(config)
    if args.framework == "pytorch":
        model = model.to(runtime.device("pytorch"))
    max_out = min(config.max_len - 1, test.tgt_out.shape[1] + 10)
    # references: the raw test sentences, lower-cased and tokenised like the output, with every
    # word kept (out-of-vocabulary words are NOT mapped to <unk>, which would inflate BLEU)
    refs = [" ".join(tokenize(t, "word", lower=True)) for _, t in test.pairs]

    def score() -> tuple[float, list[str], float, float]:
        t1, c1 = time.perf_counter(), time.process_time()
        if args.beam > 0:
            ids = X.beam_search(model, test.src, max_out, beam_size=args.beam, alpha=0.6)
        else:
            ids = X.greedy_decode(model, test.src, max_out)
        hyps = [train.decode_target(row) for row in ids]
        return sacrebleu.corpus_bleu(hyps, [refs]).score, hyps, time.perf_counter() - t1, time.process_time() - c1

    def checkpoint(minutes: float) -> dict:
        bleu, _, secs, cpu_secs = score()
        if args.framework == "pytorch":
            model.train()  # the decoder switched dropout off; training goes on
        print(f"  BLEU {bleu:.2f} after {minutes:g} {args.clock} minutes of training (decoding {secs:.0f} s)")
        return {"minutes": minutes, "bleu": round(bleu, 2), "decode_seconds": round(secs, 1),
                "decode_cpu_seconds": round(cpu_secs, 1)}

    base = time.process_time if args.clock == "cpu" else time.perf_counter
    clock = CheckpointClock(base, args.bleu_at, checkpoint)
    t0, c0 = time.perf_counter(), time.process_time()
    history = X.train_transformer(
        model, train.src, train.tgt_in, train.tgt_out, epochs=10_000, batch_size=args.batch_size,
        warmup_steps=args.warmup, lr_scale=args.lr_scale, smoothing=0.1, seed=args.seed,
        max_seconds=args.minutes * 60, clock=clock, progress=sys.stderr.isatty(),
        on_epoch_end=lambda e: print(f"  epoch {e + 1}: {time.perf_counter() - t0:7.1f} s") or {},
    )
    train_seconds = time.perf_counter() - t0 - sum(r["decode_seconds"] for r in clock.results)
    train_cpu_seconds = time.process_time() - c0 - sum(r["decode_cpu_seconds"] for r in clock.results)
    for e, (loss, s) in enumerate(zip(history["loss"], history["seconds"]), 1):
        print(f"epoch {e:3d}  loss {loss:.4f}  at {s:7.1f} s ({args.clock} clock)")
    bleu, hyps, decode_seconds, _ = score()
    seconds = time.perf_counter() - start
    print("\nexamples:")
    for (s, t), h in list(zip(test.pairs, hyps))[:8]:
        print(f"  src: {s}\n  ref: {t}\n  out: {h}\n")
    print(f"BLEU {bleu:.2f}  ({'beam ' + str(args.beam) if args.beam else 'greedy'}) on {len(test)} test pairs; "
          f"training {train_seconds:.0f} s wall, {train_cpu_seconds:.0f} s CPU ({len(history['loss'])} epochs, {len(history['lr'])} steps), "
          f"decoding {decode_seconds:.0f} s, total {seconds:.0f} s")
    result = {
        "framework": args.framework, "bleu": round(bleu, 2), "seconds": round(seconds, 1),
        "train_pairs": len(train), "test_pairs": len(test), "train_seconds": round(train_seconds, 1),
        "train_cpu_seconds": round(train_cpu_seconds, 1), "budget_clock": args.clock,
        "decode_seconds": round(decode_seconds, 1), "epochs": len(history["loss"]), "steps": len(history["lr"]),
        "final_loss": round(history["loss"][-1], 4), "minutes_budget": args.minutes, "decoding": f"beam {args.beam}" if args.beam else "greedy",
        "references": "raw test sentences, lower-cased, word-tokenised (no <unk> mapping)",
        "subwords": args.subwords, "max_len_words": args.max_len,
        "bleu_at": clock.results + [{"minutes": args.minutes, "bleu": round(bleu, 2), "decode_seconds": round(decode_seconds, 1)}],
        "config": config.to_dict(), "threads": os.environ.get("COURSE_THREADS"),
        "examples": [{"src": s, "ref": t, "out": h} for (s, t), h in list(zip(test.pairs, hyps))[:5]],
    }
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=1, ensure_ascii=False))
    return result


if __name__ == "__main__":
    main()
