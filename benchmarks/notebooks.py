"""Time every lesson notebook, top to bottom, in a run profile (default: cpu).

    python -m benchmarks.notebooks [--profile cpu] [--lessons 01_soft_attention ...] [--json FILE]
                                   [--no-book-cache]

Each notebook runs in a fresh kernel with the machine's default thread count,
one after another, as a learner would run it. The notebooks' own assertions
(the lesson's quality checks) must pass, or the run stops with the error.

For each notebook it records the wall time (kernel start included), the CPU time of
the kernel process (all its threads: on a busy machine this is the steadier figure)
and the load average before and after. The executed notebooks go into the rendered
edition's cache (``build/book/executed/``), so a ``make book`` afterwards renders
them without running them again.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

from tools import book
from tools.notebook_runner import ROOT
from tools.sync_notebooks import lessons as course_lessons

FRAMEWORKS = ("pytorch", "tensorflow")


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="cpu", choices=["smoke", "cpu", "gpu"])
    parser.add_argument("--lessons", nargs="*", help="lesson folders (default: all)")
    parser.add_argument("--frameworks", nargs="*", default=list(FRAMEWORKS), choices=FRAMEWORKS)
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--timeout", type=int, default=1200, help="seconds per cell (default 1200)")
    parser.add_argument("--no-book-cache", action="store_true",
                        help="do not put the executed notebooks in the book's cache")
    args = parser.parse_args(argv)
    available = course_lessons()
    lessons = args.lessons or available
    unknown = [name for name in lessons if name not in available]
    if unknown:
        parser.error(f"unknown lessons {unknown}; available: {', '.join(available)}")
    cache = book.WORK / "executed"
    results = []
    for lesson in lessons:
        for fw in args.frameworks:
            path = ROOT / "lessons" / lesson / f"{lesson}_{fw}.ipynb"
            load_before = _load()
            try:
                result = book.run(path, args.profile, args.timeout, pin_threads=False, log=lambda _: None)
            except book.BookError as exc:
                print(f"{lesson} {fw}: {exc}", file=sys.stderr)
                return 1
            if not args.no_book_cache:
                book.store(path, args.profile, cache, result)
            row = {"lesson": lesson, "framework": fw, "profile": args.profile,
                   "seconds": round(result["seconds"], 1), "kernel_cpu_seconds": round(result["cpu_seconds"], 1),
                   "load_before": load_before, "load_after": _load()}
            results.append(row)
            print(f"{lesson:<28} {fw:<10} {row['seconds']:7.1f} s wall {row['kernel_cpu_seconds']:7.1f} s kernel CPU"
                  f"  (load {load_before} -> {row['load_after']}; {args.profile})", flush=True)
    if args.json:
        meta = {"machine": f"{platform.machine()}, {os.cpu_count()} cores", "python": sys.version.split()[0],
                "date": time.strftime("%Y-%m-%d"), "threads": "the machine's default (no pinning)",
                "command": "python -m benchmarks.notebooks " + " ".join(argv if argv is not None else sys.argv[1:])}
        args.json.write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
