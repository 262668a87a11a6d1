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


MUTANT_OF: dict[str, tuple[str, str]] = {}  # student -> (the mutated cell, its mistake message)


def report_check(course: Path, assignment: str, kinds: dict[str, str]) -> dict:
    """Does the class report count each mutant's mistake, in the mutant's own exercise, as often as it was submitted?

    A mutant's student must be told the mutant's message by a test of the mutant's exercise; the
    report names that message in its own words (``grader.report.mistake_of``), and its row for that
    exercise and name must count at least the students who submitted the mutant. It may count more
    (a mistake made in exercise 1 also fails exercise 3, which uses it; a blank notebook leaves a
    find-and-fix exercise's bug in place), but never more than the students who submitted a mutant
    with that message plus those who wrote nothing of their own (blank, broken, hostile).
    Keys are "exercise :: mistake as the report names it"."""
    from grader.report import exercise_of_cells, mistake_of

    report = json.loads((course / "grades" / f"{assignment}-report.json").read_text(encoding="utf-8"))
    graded = json.loads((course / "grades" / f"{assignment}.json").read_text(encoding="utf-8"))["students"]
    source = nbformat.read(course / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
    exercise_of = exercise_of_cells(source)  # tests and answer cells
    shown = {e["exercise"]: {m["mistake"]: m["students"] for m in e["mistakes"]} for e in report["exercises"]}
    expected: dict[str, int] = {}
    untold: list[str] = []
    for student, (cell, message) in sorted(MUTANT_OF.items()):
        if student not in kinds:
            continue
        exercise = exercise_of[cell]
        told = [t[2] for gid, t in graded.get(student, {}).get("tests", {}).items()
                if exercise_of.get(gid) == exercise and t[0] < t[1] and message in t[2]]
        if not told:
            untold.append(f"{student} ({message[:60]})")
            continue
        key = f"{exercise} :: {mistake_of(told[0])}"
        expected[key] = expected.get(key, 0) + 1
    own_code_absent = sum(1 for k in kinds.values() if k.split(":")[0] in ("blank", "broken", "hostile"))
    reported = {key: shown.get(key.split(" :: ", 1)[0], {}).get(key.split(" :: ", 1)[1], 0) for key in expected}
    ceiling = {key: sum(n for k, n in expected.items() if k.split(" :: ", 1)[1] == key.split(" :: ", 1)[1])
               + own_code_absent for key in expected}
    ok = not untold and all(expected[k] <= reported[k] <= ceiling[k] for k in expected)
    return {"expected": expected, "reported": reported, "untold": untold, "all_counted": ok}


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
            MUTANT_OF[student] = (m["cell"], m["message"])
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


def run_nbgrader(course: Path, args) -> None:
    """nbgrader's own autograde and feedback, as an instructor without the sandbox runs them."""
    gs.nbgrader(["autograde", args.assignment, "--force", f"--Execute.timeout={args.timeout}"], course,
                check=False, timeout=24 * 3600)
    gs.nbgrader(["generate_feedback", args.assignment, "--force"], course, check=False, timeout=3600)


def timed_run(count: int, run) -> tuple[object, dict]:
    """Run ``run()`` and return its result with the bookkeeping every row records: wall seconds, the
    load at start and end, submissions a minute, and the CPU time of the child processes it waited for."""
    load = os.getloadavg()[0]
    start, cpu = time.monotonic(), os.times()
    result = run()
    seconds = time.monotonic() - start
    return result, {"seconds": round(seconds, 1), "load_at_start": round(load, 1),
                    "load_at_end": round(os.getloadavg()[0], 1), "per_minute": round(count / seconds * 60, 1),
                    "child_cpu_s": round(os.times().children_user - cpu.children_user, 1)}


def mean_by_kind(score_of: dict[str, float], kinds: dict[str, str]) -> dict[str, float]:
    """The mean score of each kind of submission (correct, a mutant, blank, hostile:...)."""
    by_kind: dict[str, list[float]] = {}
    for student, kind in kinds.items():
        by_kind.setdefault(kind, []).append(score_of.get(student, 0.0))
    return {k: round(sum(v) / len(v), 2) for k, v in sorted(by_kind.items())}


def alternate(args) -> dict:
    """nbgrader and the sandboxed grader in alternating pairs (A B, B A, ...): on a machine whose load drifts,
    both see the same load on average, so the ratio of their totals is the sandbox's cost."""
    work = Path(tempfile.mkdtemp(prefix="grading-ab-"))
    rows = []
    try:
        for r in range(args.ab):
            for who in (("nbgrader", "grader") if r % 2 == 0 else ("grader", "nbgrader")):
                course, _ = fresh_course(work, args.assignment, args.count, f"{who}{r}")
                _, row = timed_run(args.count, (lambda: run_nbgrader(course, args)) if who == "nbgrader" else
                                   (lambda: grade(args.assignment, course, timeout=args.timeout, jobs=1)))
                rows.append({"round": r, "grader": who, "seconds": row["seconds"], "load_at_start": row["load_at_start"]})
                print(rows[-1], flush=True)
                shutil.rmtree(course.parent, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    totals = {w: round(sum(x["seconds"] for x in rows if x["grader"] == w), 1) for w in ("nbgrader", "grader")}
    out = {"assignment": args.assignment, "count_per_run": args.count, "rounds": args.ab, "cell_timeout_s": args.timeout,
           "machine": f"{platform.machine()}, {os.cpu_count()} cores", "rows": rows, "totals": totals,
           "sandbox_cost": round(totals["grader"] / totals["nbgrader"] - 1, 3)}
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return out


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
    parser.add_argument("--ab", type=int, default=0, metavar="ROUNDS",
                        help="instead: nbgrader against `python -m grader --jobs 1` in ROUNDS alternating pairs "
                             "(A B, B A, ...) of --count submissions each, for their cost ratio at equal load")
    parser.add_argument("--keep", action="store_true",
                        help="keep the graded course folders (printed at the end), e.g. to open the class report")
    args = parser.parse_args(argv)
    os.environ.setdefault("COURSE_PROFILE", "smoke")
    os.environ.setdefault("COURSE_THREADS", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.ab:
        return alternate(args)
    work = Path(tempfile.mkdtemp(prefix="grading-bench-"))
    runs = {}
    try:
        if not args.skip_nbgrader:
            course, kinds = fresh_course(work, args.assignment, args.count, "nbgrader")
            _, row = timed_run(args.count, lambda: run_nbgrader(course, args))
            scores = gs.scores(course, args.assignment)
            row["graded"] = len(scores)
            row["mean_score_by_kind"] = mean_by_kind({s: v[0] for s, v in scores.items()}, kinds)
            runs["nbgrader_autograde"] = row
            print("nbgrader autograde", row, flush=True)
        for jobs in args.jobs:
            course, kinds = fresh_course(work, args.assignment, args.count, f"jobs{jobs}")
            results, row = timed_run(args.count, lambda: grade(args.assignment, course, timeout=args.timeout, jobs=jobs))
            row["graded"] = len(results)
            row["mean_score_by_kind"] = mean_by_kind({r.student: r.score for r in results}, kinds)
            row["report"] = report_check(course, args.assignment, kinds)
            runs[f"grader_jobs{jobs}"] = row
            print(f"grader --jobs {jobs}", row, flush=True)
        if args.dask_workers:
            from distributed import LocalCluster

            course, kinds = fresh_course(work, args.assignment, args.count, "dask")
            with LocalCluster(n_workers=args.dask_workers, threads_per_worker=1, processes=True,
                              dashboard_address=None) as cluster:
                results, row = timed_run(args.count, lambda: grade(args.assignment, course, timeout=args.timeout,
                                                                   scheduler=cluster.scheduler_address))
            row.pop("child_cpu_s")  # the workers are not this process's children
            row["per_worker_minute"] = round(row["per_minute"] / args.dask_workers, 1)
            row["graded"] = len(results)
            row["mean_score_by_kind"] = mean_by_kind({r.student: r.score for r in results}, kinds)
            row["report"] = report_check(course, args.assignment, kinds)
            key = f"grader_dask_local_{args.dask_workers}_workers"
            runs[key] = row
            print(key, row, flush=True)
    finally:
        if args.keep:
            print(f"course folders kept under {work}", flush=True)
        else:
            shutil.rmtree(work, ignore_errors=True)
    out = {"assignment": args.assignment, "count": args.count, "cell_timeout_s": args.timeout,
           "machine": f"{platform.machine()}, {os.cpu_count()} cores", "load_at_end": os.getloadavg(), "runs": runs}
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
