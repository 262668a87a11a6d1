"""`make bench`: run the benchmarks that need no outside data and record their results.

    python -m benchmarks                 # all of them
    python -m benchmarks notebooks       # only some

Benchmarks that need data you bring (e.g. the real bAbI files) are listed with
their command lines in benchmarks/README.md.
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
    "seq2seq_dates": [["--framework", fw, "--json", str(RESULTS / f"seq2seq_dates_{fw}.json")] for fw in ("pytorch", "tensorflow")],
    "bert_finetune": [["--framework", fw, "--json", str(RESULTS / f"bert_finetune_{fw}.json")] for fw in ("pytorch", "tensorflow")],
    "grading": [["--assignment", a, "--count", "100", "--jobs", "1", "2", "--json", str(RESULTS / f"grading_{a}.json")]
                for a in ("01_soft_attention_pytorch", "05_self_attention_tensorflow")],
}


def main(argv: list[str] | None = None) -> int:
    names = (argv if argv is not None else sys.argv[1:]) or list(RUNS)
    unknown = [n for n in names if n not in RUNS]
    if unknown:
        print(f"unknown benchmark(s) {unknown}; available: {list(RUNS)}", file=sys.stderr)
        return 2
    RESULTS.mkdir(exist_ok=True)
    for name in names:
        module = importlib.import_module(f"benchmarks.{name}")
        for args in RUNS[name]:
            print(f"== python -m benchmarks.{name} {' '.join(args)}", flush=True)
            code = module.main(args)
            if isinstance(code, int) and code:  # some benchmarks return their results instead of a code
                return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
