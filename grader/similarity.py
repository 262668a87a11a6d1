"""Pairs of submissions whose answers are unusually alike (copydetect: winnowed fingerprints, as MOSS).

    python -m grader.similarity ASSIGNMENT [--threshold 0.5]     (make similarity ASSIGNMENT=...)

Each student's code (their answer cells and the code cells they added, as the
grader rebuilds the notebook) becomes one file. copydetect tokenizes it (names
of variables and functions are abstracted away, so renaming does not hide a
copy), fingerprints every run of ``noise`` tokens and compares every pair of
students. What the release gives everyone (its answer stubs) and the course's
own code (``utils/`` and every lesson's code cells) is boilerplate: matching it
is not counted. A pair is reported when either student's code is at least
``threshold`` of the other's (share of fingerprints in common, 0 to 1; default
0.5). The report, ``grades/<id>-similarity.html`` (and its data as JSON), ranks
the pairs and shows the matched passages side by side. A high score is a reason
to look, never a verdict: short exercises leave few ways to write them.
"""
from __future__ import annotations

import argparse
import html
import json
import os
import sys
import tempfile
from pathlib import Path

import nbformat

from grader import pages
from grader.feedback import write_atomic

ROOT = Path(__file__).resolve().parent.parent
NOISE = 20  # tokens per fingerprinted run: shorter common runs are noise
GUARANTEE = 25  # winnowing window: every common run of this length is found
THRESHOLD = 0.5


def _meta(cell) -> dict:
    return cell.metadata.get("nbgrader", {}) or {}


def student_code(course: Path, assignment: str, student: str, release, source) -> str | None:
    """The code a student wrote: answer cells and added code cells, as the grader rebuilds them."""
    from grader.grade import find_submission, repair

    path, _ = find_submission(course / "submitted" / student / assignment, assignment)
    if path is None:
        return None
    try:
        runnable, _, _, own = repair(nbformat.read(path, as_version=4), release, source)
    except Exception:  # noqa: BLE001 - not a notebook: nothing to compare
        return None
    return "\n\n".join(runnable.cells[i].source for i in sorted(own) if runnable.cells[i].cell_type == "code")


def boilerplate(release, course: Path) -> str:
    """What everyone may share: the release's code cells and the course's own code."""
    parts = [c.source for c in release.cells if c.cell_type == "code"]
    for path in sorted((course / "utils").rglob("*.py")):
        parts.append(path.read_text(encoding="utf-8", errors="replace"))
    for path in sorted((course / "lessons").glob("*/*.ipynb")):
        try:
            parts += [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
        except Exception:  # noqa: BLE001
            continue
    return "\n\n".join(parts)


def compare(course: Path, assignment: str, threshold: float = THRESHOLD) -> dict:
    from copydetect import CopyDetector

    course = Path(course).resolve()
    release = nbformat.read(course / "assignments" / assignment / f"{assignment}.ipynb", as_version=4)
    source = nbformat.read(course / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
    folder = course / "submitted"
    students = sorted(s for s in (os.listdir(folder) if folder.is_dir() else []) if (folder / s / assignment).is_dir())
    with tempfile.TemporaryDirectory(prefix="similarity-") as tmp:
        code_dir, bp_dir = Path(tmp) / "code", Path(tmp) / "boilerplate"
        code_dir.mkdir()
        bp_dir.mkdir()
        names = {}
        for i, student in enumerate(students):
            code = student_code(course, assignment, student, release, source)
            if code and code.strip():
                name = f"s{i:05d}.py"
                names[name] = student
                (code_dir / name).write_text(code, encoding="utf-8")
        (bp_dir / "given.py").write_text(boilerplate(release, ROOT if not (course / "utils").is_dir() else course),
                                         encoding="utf-8")
        detector = CopyDetector(test_dirs=[str(code_dir)], ref_dirs=[str(code_dir)], boilerplate_dirs=[str(bp_dir)],
                                extensions=["py"], noise_t=NOISE, guarantee_t=GUARANTEE, display_t=threshold,
                                autoopen=False, silent=True, out_file=str(Path(tmp) / "copydetect.html"))
        detector.run()
        pairs = []
        for sim_a, sim_b, file_a, file_b, code_a, code_b, tokens in detector.get_copied_code_list():
            a, b = names[Path(file_a).name], names[Path(file_b).name]
            if a == b:
                continue
            pairs.append({"students": sorted([a, b]), "similarity": round(float(max(sim_a, sim_b)), 3),
                          "shares": {a: round(float(sim_a), 3), b: round(float(sim_b), 3)},
                          "common_tokens": int(tokens), "passages": {a: code_a, b: code_b}})
    unique = {}
    for pair in sorted(pairs, key=lambda p: -p["similarity"]):
        unique.setdefault(tuple(pair["students"]), pair)
    return {"assignment": assignment, "threshold": threshold, "students": len(students),
            "compared": len(names), "pairs": list(unique.values())}


def page(data: dict) -> str:
    e = html.escape
    parts = [f"<h1>{e(data['assignment'])}: similar submissions</h1>",
             f"<p>{data['compared']} of {data['students']} submissions had code to compare; pairs at or above "
             f"{data['threshold']:.0%} of shared fingerprints (copydetect, {NOISE}-token runs, the release's and "
             "the course's own code excluded). A high score is a reason to look, not a verdict.</p>"]
    if not data["pairs"]:
        parts.append("<p>No pair above the threshold.</p>")
    for rank, pair in enumerate(data["pairs"], 1):
        a, b = pair["students"]
        parts.append(f"<h2>{rank}. {e(a)} and {e(b)}: {pair['similarity']:.0%}</h2>"
                     f"<p>{e(a)}: {pair['shares'][a]:.0%} of their code is shared; {e(b)}: {pair['shares'][b]:.0%}; "
                     f"{pair['common_tokens']} tokens in common.</p><table><tr><th>{e(a)}</th><th>{e(b)}</th></tr>"
                     f"<tr><td><pre>{pair['passages'][a]}</pre></td><td><pre>{pair['passages'][b]}</pre></td></tr></table>")
    style = ("body{font-family:sans-serif;margin:2em}td{vertical-align:top;border:1px solid #ccc;width:50%}"
             "pre{white-space:pre-wrap;font-size:12px}span.highlight-red{background:#fbb}span.highlight-green{background:#bfb}")
    title = f"{data['assignment']}: similar submissions"
    return pages.sanitize_page(f"<html><head><title>{e(title)}</title><style>{style}</style></head>"
                               f"<body>{''.join(parts)}</body></html>", title)


def write_report(course: Path, assignment: str, threshold: float = THRESHOLD) -> dict:
    data = compare(course, assignment, threshold)
    grades = Path(course) / "grades"
    write_atomic(grades / f"{assignment}-similarity.json", json.dumps(
        {**data, "pairs": [{k: v for k, v in p.items() if k != "passages"} for p in data["pairs"]]}, indent=1,
        ensure_ascii=False))
    write_atomic(grades / f"{assignment}-similarity.html", page(data))
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("assignment")
    parser.add_argument("--threshold", type=float, default=THRESHOLD, help="share of fingerprints (0-1)")
    parser.add_argument("--course", type=Path, default=ROOT)
    args = parser.parse_args(argv)
    data = write_report(args.course, args.assignment, args.threshold)
    for pair in data["pairs"]:
        print(f"{pair['similarity']:.0%}  {pair['students'][0]}  {pair['students'][1]}")
    print(f"{len(data['pairs'])} pair(s) at or above {args.threshold:.0%}: "
          f"{Path(args.course) / 'grades' / (args.assignment + '-similarity.html')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
