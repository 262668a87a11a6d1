"""Grading at class scale: mixed submissions, sandboxed grading with 1 and N jobs, plain nbgrader beside it.

    python -m benchmarks.grading --assignment 01_soft_attention_pytorch --count 100 --jobs 1 2 \\
        --json benchmarks/results/grading_01_soft_attention_pytorch.json

The submissions are a fixed mix: 40% correct, 25% with one known mistake (the
assignment's mutants), 10% blank, 10% broken (an exception, a dead kernel, not
JSON), 15% hostile with blank answers (patched checks, an IPython hook that
turns the tests into ``pass``, a process bomb), so any point they get is stolen. The same folder is graded by ``nbgrader autograde``
then ``generate_feedback`` (unsandboxed, in-kernel verdicts: the baseline) and by
``python -m grader`` (which also writes the feedback) with each
``--jobs`` value. Reported: seconds and submissions per minute for each, and
the sandbox's cost over the baseline at one job.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests import grading_support as gs  # noqa: E402
from grader.grade import grade  # noqa: E402

HOSTILE = {
    "patched_checks": ("import numpy, utils.grading as g\nnumpy.allclose = lambda *a, **k: True\n"
                       "for _n in dir(g):\n    if _n.startswith('check_'):\n        setattr(g, _n, lambda *a, **k: None)\n"),
    "skip_tests": 'get_ipython().input_transformers_cleanup.append(lambda lines: ["pass\\n"])\n',
    "process_bomb": ("import subprocess\nkids = []\nfor _ in range(600):\n    try:\n"
                     "        kids.append(subprocess.Popen(['sleep', '60']))\n    except Exception:\n        break\n"),
}


MUTANT_OF: dict[str, str] = {}  # student -> the mistake message of the mutant they submitted


def report_check(course: Path, assignment: str, kinds: dict[str, str]) -> dict:
    """Does the class report count each mutant's mistake as often as it was submitted?"""
    report = json.loads((course / "grades" / f"{assignment}-report.json").read_text(encoding="utf-8"))
    expected: dict[str, int] = {}
    for student, message in MUTANT_OF.items():
        if student in kinds:
            expected[message] = expected.get(message, 0) + 1
    # one mistake can fail the tests of several exercises (a wrong masked_softmax fails every
    # exercise that uses it): count it in the exercise where the most students show it
    counted = {m: max([sum(row["students"] for row in exercise["mistakes"] if m in row["mistake"])
                       for exercise in report["exercises"]] or [0]) for m in expected}
    return {"expected": expected, "reported": counted, "all_counted": counted == expected}


def build(course: Path, assignment: str, count: int) -> dict[str, str]:
    """Write ``count`` submissions; return student -> kind."""
    source = nbformat.read(course / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
    release = nbformat.read(course / "assignments" / assignment / f"{assignment}.ipynb", as_version=4)
    fills = gs.student_fill(source)
    first = next(iter(fills))
    mutants = yaml.safe_load((ROOT / "tests" / "mutants" / f"{assignment}.yml").read_text()) or []
    kinds: dict[str, str] = {}
    for i in range(count):
        student = f"s{i:03d}"
        share = (i * 100) // count
        if share < 40:
            kind, cells = "correct", fills
        elif share < 65:
            m = mutants[i % len(mutants)]
            code = fills[m["cell"]]
            for old, new in m["replace"]:
                code = code.replace(old, new)
            kind, cells = "partial", {**fills, m["cell"]: code}
            MUTANT_OF[student] = m["message"]
        elif share < 75:
            kind, cells = "blank", {}
        elif share < 85:
            variant = i % 3
            if variant == 2:
                folder = course / "submitted" / student / assignment
                folder.mkdir(parents=True)
                (folder / f"{assignment}.ipynb").write_text("{ not a notebook")
                kinds[student] = "broken"
                continue
            bad = 'raise RuntimeError("half done")' if variant == 0 else "import os\nos._exit(1)"
            kind, cells = "broken", {**fills, first: bad}
        else:
            name = list(HOSTILE)[i % len(HOSTILE)]  # with blank answers: any point is a point stolen
            kind, cells = f"hostile:{name}", {first: HOSTILE[name] + "raise NotImplementedError()"}
        gs.write_submission(course, assignment, student, gs.fill_release(release, cells))
        kinds[student] = kind
    return kinds


def fresh_course(work: Path, assignment: str, count: int, name: str) -> tuple[Path, dict]:
    course = gs.make_course(work / name, assignment)
    gs.nbgrader(["generate_assignment", assignment, "--force"], course)
    return course, build(course, assignment, count)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--assignment", default="01_soft_attention_pytorch")
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--timeout", type=int, default=30, help="seconds per cell, for every grader")
    parser.add_argument("--skip-nbgrader", action="store_true")
    parser.add_argument("--dask-workers", type=int, default=0,
                        help="also grade on a local Dask cluster of this many worker processes (one thread each)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    os.environ.setdefault("COURSE_PROFILE", "smoke")
    os.environ.setdefault("COURSE_THREADS", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    work = Path(tempfile.mkdtemp(prefix="grading-bench-"))
    runs = {}
    try:
        if not args.skip_nbgrader:
            course, kinds = fresh_course(work, args.assignment, args.count, "nbgrader")
            start, cpu = time.monotonic(), os.times()
            gs.nbgrader(["autograde", args.assignment, "--force", f"--Execute.timeout={args.timeout}"], course,
                        check=False, timeout=24 * 3600)
            gs.nbgrader(["generate_feedback", args.assignment, "--force"], course, check=False, timeout=3600)
            seconds = time.monotonic() - start
            scores = gs.scores(course, args.assignment)
            runs["nbgrader_autograde"] = {"seconds": round(seconds, 1), "per_minute": round(args.count / seconds * 60, 1),
                                          "graded": len(scores), "child_cpu_s": round(os.times().children_user - cpu.children_user, 1)}
            print("nbgrader autograde", runs["nbgrader_autograde"], flush=True)
            by_kind: dict[str, list[float]] = {}
            for student, kind in kinds.items():
                by_kind.setdefault(kind, []).append(scores.get(student, (0.0, 0.0))[0])
            runs["nbgrader_autograde"]["mean_score_by_kind"] = {k: round(sum(v) / len(v), 2) for k, v in sorted(by_kind.items())}
        for jobs in args.jobs:
            course, kinds = fresh_course(work, args.assignment, args.count, f"jobs{jobs}")
            start, cpu = time.monotonic(), os.times()
            results = grade(args.assignment, course, timeout=args.timeout, jobs=jobs)
            seconds = time.monotonic() - start
            by_kind: dict[str, list[float]] = {}
            for r in results:
                by_kind.setdefault(kinds.get(r.student, "?"), []).append(r.score)
            runs[f"grader_jobs{jobs}"] = {
                "seconds": round(seconds, 1), "per_minute": round(args.count / seconds * 60, 1),
                "graded": len(results), "child_cpu_s": round(os.times().children_user - cpu.children_user, 1),
                "mean_score_by_kind": {k: round(sum(v) / len(v), 2) for k, v in sorted(by_kind.items())},
            }
            runs[f"grader_jobs{jobs}"]["report"] = report_check(course, args.assignment, kinds)
            print(f"grader --jobs {jobs}", runs[f"grader_jobs{jobs}"], flush=True)
        if args.dask_workers:
            from distributed import LocalCluster

            course, kinds = fresh_course(work, args.assignment, args.count, "dask")
            with LocalCluster(n_workers=args.dask_workers, threads_per_worker=1, processes=True,
                              dashboard_address=None) as cluster:
                start, cpu = time.monotonic(), os.times()
                results = grade(args.assignment, course, timeout=args.timeout, scheduler=cluster.scheduler_address)
                seconds = time.monotonic() - start
            by_kind = {}
            for r in results:
                by_kind.setdefault(kinds.get(r.student, "?"), []).append(r.score)
            key = f"grader_dask_local_{args.dask_workers}_workers"
            runs[key] = {
                "seconds": round(seconds, 1), "per_minute": round(args.count / seconds * 60, 1),
                "per_worker_minute": round(args.count / seconds * 60 / args.dask_workers, 1), "graded": len(results),
                "mean_score_by_kind": {k: round(sum(v) / len(v), 2) for k, v in sorted(by_kind.items())},
                "report": report_check(course, args.assignment, kinds),
            }
            print(key, runs[key], flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out = {"assignment": args.assignment, "count": args.count, "cell_timeout_s": args.timeout,
           "machine": f"{platform.machine()}, {os.cpu_count()} cores", "load_before": os.getloadavg(), "runs": runs}
    if "nbgrader_autograde" in runs and "grader_jobs1" in runs:
        out["sandbox_cost_at_jobs1"] = round(runs["grader_jobs1"]["seconds"] / runs["nbgrader_autograde"]["seconds"] - 1, 3)
    if "grader_jobs1" in runs and "grader_jobs2" in runs:
        out["speedup_jobs2"] = round(runs["grader_jobs1"]["seconds"] / runs["grader_jobs2"]["seconds"], 2)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
