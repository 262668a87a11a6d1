"""Time every lesson notebook, top to bottom, in a run profile (default: cpu).

    python -m benchmarks.notebooks [--profile cpu] [--lessons 01_soft_attention ...] [--json FILE]

Each notebook runs in a fresh kernel with the machine's default thread count,
one after another, as a learner would run it. The notebooks' own assertions
(the lesson's quality checks) must pass, or the run stops with the error.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

from tools.notebook_runner import ROOT, run_notebook


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="cpu", choices=["smoke", "cpu", "gpu"])
    parser.add_argument("--lessons", nargs="*", help="lesson folders (default: all)")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    lessons = args.lessons or sorted(p.name for p in (ROOT / "lessons").iterdir() if p.is_dir())
    results = []
    for lesson in lessons:
        for fw in ("pytorch", "tensorflow"):
            path = ROOT / "lessons" / lesson / f"{lesson}_{fw}.ipynb"
            start = time.perf_counter()
            run_notebook(path, profile=args.profile, pin_threads=False)
            seconds = time.perf_counter() - start
            results.append({"lesson": lesson, "framework": fw, "profile": args.profile, "seconds": round(seconds, 1)})
            print(f"{lesson:<28} {fw:<10} {seconds:7.1f} s  ({args.profile})", flush=True)
    if args.json:
        meta = {"machine": f"{platform.machine()}, {os.cpu_count()} cores", "python": sys.version.split()[0],
                "date": time.strftime("%Y-%m-%d")}
        args.json.write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
