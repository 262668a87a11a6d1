"""What to reteach: a class report per assignment, and the term's reports across assignments.

``make grade`` writes, beside the CSV, ``grades/<id>-report.html`` (readable in a
browser from the disk) and its data ``grades/<id>-report.json``: the score
distribution, each test's pass rate, for each exercise the mistakes the tests
recognised with how many students made each, the submissions that crashed or
ran out of time, who waits for hand grading, and the grading time. No student
code and no test text is in it: mistakes are the tests' own names for them, and
what a student's code raised is shown only as "their code raised <a built-in
exception's name>", never its text.

    python -m grader.report            (make report)

writes ``grades/report/index.html`` (the class over the term) and one page per
student in ``grades/report/students/`` (their scores over the term), from every
``grades/<id>.json`` there is.
"""
from __future__ import annotations

import base64
import builtins
import html
import io
import json
import re
import sys
import urllib.parse
from collections import Counter
from pathlib import Path


from grader import pages, plan
from grader.feedback import write_atomic

ROOT = Path(__file__).resolve().parent.parent


def _meta(cell) -> dict:
    return cell.metadata.get("nbgrader", {}) or {}


def exercise_of_cells(source) -> dict[str, str]:
    """Every nbgrader cell's exercise (the last '## ' heading above it), by grade_id: tests and answer cells alike."""
    out, title = {}, "Before the first exercise"
    for cell in source.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("## "):
                    title = line[3:].strip()
        grade_id = _meta(cell).get("grade_id")
        if grade_id:
            out[grade_id] = title
    return out


def exercises_of(source) -> dict[str, dict]:
    """Each test's exercise (the last '## ' heading above it), points and whether it is hidden."""
    exercise = exercise_of_cells(source)
    return {_meta(cell)["grade_id"]: {"exercise": exercise[_meta(cell)["grade_id"]],
                                      "points": float(_meta(cell).get("points", 0)),
                                      "hidden": plan.is_hidden(cell.source)}
            for cell in source.cells if cell.cell_type != "markdown" and plan.is_test(cell)}


def mistake_of(message: str) -> str:
    """A failed test's message reduced to the mistake it names (never student text).

    What follows "calling it raised" is the student's own output (their exception's text): it is
    never read for a mistake's name, and only a built-in exception's name is shown."""
    raised = re.search(r"calling it raised (.*)", message, re.S)
    if raised:
        name = re.match(r"[A-Za-z_][A-Za-z0-9_]*", raised.group(1))
        kind = getattr(builtins, name.group(0), None) if name else None
        if isinstance(kind, type) and issubclass(kind, BaseException):
            return f"their code raised {kind.__name__}"
        return "their code raised an exception of its own"
    if "not available while your notebook is graded" in message:  # the kernel's text after it: never shown
        return "called the course's own version instead of writing it"
    found = re.search(r"They match what you get when (.+?)\.(\s|$)", message)
    if found:
        return found.group(1)
    hint = re.search(r"(?:^|\s)Hint: (.+)", message)  # a check's own guess at the cause
    if hint:
        return hint.group(1).strip()
    if "not implemented yet" in message:
        return "not implemented"
    if "which this check cannot follow" in message:
        return "code the own-code check cannot follow (eval, exec, a computed name)"
    if "asks you to write it yourself" in message:
        return "called the framework's own function instead of writing it"
    if "sent no results for this test" in message or "sent this test's results more than once" in message:
        return "no results reached the grader (the test's code did not run as written)"
    if "did not run" in message or "produced no result" in message:
        return "the test did not run (the notebook stopped before it)"
    if "expected shape" in message:
        return "a wrong shape"
    if "contains NaN" in message:
        return "NaN in the result"
    named = re.match(r"[\w.\-]+(?: [\w.\-]+){0,8}: (NaN [^.]{3,150})\.", message)
    if named:  # a check's own sentence about where the NaN comes from
        return named.group(1)
    if "values differ from the reference" in message:
        return "wrong values (no known mistake matched)"
    if "test is broken" in message:
        return "the test itself is broken (fix the assignment)"
    return "another failed check"


def summarize(source, results: dict, meta: dict) -> dict:
    """The report's data (JSON-able)."""
    tests = exercises_of(source)
    graded = [r for r in results.values() if r.status != "failed"]
    scores = sorted(round(r.score - r.penalty, 2) for r in results.values())
    per_test = []
    for gid, info in tests.items():
        seen = [r.tests[gid] for r in graded if gid in r.tests]
        passed = sum(1 for t in seen if t[1] == 0 or t[0] >= t[1]) if info["points"] else \
            sum(1 for t in seen if not t[2])
        per_test.append({"test": gid, **info, "students": len(seen),
                         "pass_rate": round(passed / len(seen), 3) if seen else None})
    mistakes: dict[str, Counter] = {}
    for r in graded:
        made: set[tuple[str, str]] = set()
        for gid, (points, maximum, message) in r.tests.items():
            if gid in tests and (points < maximum or (maximum == 0 and message)):
                made.add((tests[gid]["exercise"], mistake_of(message)))
        for exercise, mistake in made:
            mistakes.setdefault(exercise, Counter())[mistake] += 1
    order = list(dict.fromkeys(info["exercise"] for info in tests.values()))
    return {
        **{k: meta.get(k) for k in ("assignment", "graded_at", "seconds", "graded_now", "kept", "jobs", "scheduler")},
        "students": len(results), "max_score": meta.get("max_score"), "scores": scores,
        "mean": round(sum(scores) / len(scores), 2) if scores else None,
        "tests": per_test,
        "exercises": [{"exercise": e, "mistakes": [{"mistake": m, "students": n}
                                                   for m, n in mistakes.get(e, Counter()).most_common()]}
                      for e in order],
        "did_not_finish": sorted([{"student": r.student, "status": r.status, "note": r.note}
                                  for r in results.values()
                                  if r.status == "failed" or any(p in r.note for p in ("budget", "kernel died",
                                                                                      "could not be run"))],
                                 key=lambda row: row["student"]),
        "hand_grading_pending": sorted(r.student for r in results.values() if r.status == "provisional"),
        "late": sorted([{"student": r.student, "penalty": r.penalty} for r in results.values() if r.penalty],
                       key=lambda row: row["student"]),
    }


def _png(fig) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _figures(data: dict) -> tuple[str, str]:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.0))
    top = float(data["max_score"] or max(data["scores"] or [1]))
    ax.hist(data["scores"], bins=[x - 0.5 for x in range(int(top) + 2)], color="#4c72b0", edgecolor="white")
    ax.set_xlabel("score (after late penalties)")
    ax.set_ylabel("students")
    ax.set_title(f"{data['assignment']}: scores of {data['students']} submissions")
    histogram = _png(fig)
    rows = [t for t in data["tests"] if t["pass_rate"] is not None]
    fig, ax = plt.subplots(figsize=(6.4, 0.32 * len(rows) + 1.0))
    names = [t["test"] + (" (hidden)" if t["hidden"] else "") + ("" if t["points"] else " [0 pts]") for t in rows]
    ax.barh(names[::-1], [t["pass_rate"] for t in rows][::-1], color="#55a868")
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of students who passed")
    ax.set_title("each test's pass rate")
    return histogram, _png(fig)


def assignment_page(data: dict) -> str:
    e = html.escape
    histogram, rates = _figures(data)
    parts = [f"<h1>{e(data['assignment'])}: class report</h1>",
             f"<p>{data['students']} submissions, mean score {data['mean']} of {data['max_score']:g}; graded "
             f"{e(str(data['graded_at']))} in {data['seconds']} s ({data['graded_now']} graded now, {data['kept']} "
             f"kept from the last run).</p>",
             f'<img src="{histogram}" alt="score histogram">', f'<img src="{rates}" alt="pass rate per test">',
             "<h2>What to reteach: the mistakes the tests recognised</h2>"]
    for ex in data["exercises"]:
        parts.append(f"<h3>{e(ex['exercise'])}</h3>")
        if ex["mistakes"]:
            parts.append("<table><tr><th>students</th><th>mistake</th></tr>" + "".join(
                f"<tr><td>{m['students']}</td><td>{e(m['mistake'])}</td></tr>" for m in ex["mistakes"]) + "</table>")
        else:
            parts.append("<p>No failed test.</p>")
    parts.append("<h2>Submissions that did not run to their end</h2>")
    parts.append("<ul>" + "".join(f"<li>{e(r['student'])}: {e(r['note'] or r['status'])}</li>"
                                  for r in data["did_not_finish"]) + "</ul>" if data["did_not_finish"] else "<p>None.</p>")
    parts.append("<h2>Waiting for hand grading</h2>")
    parts.append("<p>" + (e(", ".join(data["hand_grading_pending"])) or "Nobody.") + "</p>")
    if data["late"]:
        parts.append("<h2>Late submissions</h2><ul>" + "".join(
            f"<li>{e(r['student'])}: {r['penalty']:g} point(s) off</li>" for r in data["late"]) + "</ul>")
    title = f"{data['assignment']}: class report"
    return pages.sanitize_page(f"<html><head><title>{e(title)}</title><style>{STYLE}</style></head>"
                               f"<body>{''.join(parts)}</body></html>", title)


STYLE = ("body{font-family:sans-serif;max-width:60em;margin:2em auto;padding:0 1em}"
         "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left}"
         "img{display:block;margin:1em 0;max-width:100%}")


def write_assignment_report(course: Path, assignment: str, source, results: dict, meta: dict) -> dict:
    data = summarize(source, results, meta)
    write_atomic(course / "grades" / f"{assignment}-report.json", json.dumps(data, indent=1, ensure_ascii=False))
    write_atomic(course / "grades" / f"{assignment}-report.html", assignment_page(data))
    return data


def student_file(student: str) -> str:
    return urllib.parse.quote(student, safe="") + ".html"


def term_report(course: Path) -> Path:
    """grades/report/: the class over the term and one page per student; returns the index page."""
    e = html.escape
    runs = {}
    for path in sorted((course / "grades").glob("*.json")):
        if path.name.endswith("-report.json"):
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            runs[data["assignment"]] = data
        except (ValueError, KeyError):
            continue
    if not runs:
        raise SystemExit(f"no graded assignment under {course / 'grades'}: run make grade first")
    students = sorted({row["student"] for data in runs.values() for row in data["students"].values()})
    out = course / "grades" / "report"
    table = {s: {} for s in students}
    for aid, data in runs.items():
        for row in data["students"].values():
            table[row["student"]][aid] = (row["score"] - row.get("penalty", 0.0), row["max_score"], row["status"])
    for s in students:
        rows = "".join(
            f"<tr><td>{e(aid)}</td><td>{table[s][aid][0]:g} / {table[s][aid][1]:g}</td><td>{e(table[s][aid][2])}</td></tr>"
            if aid in table[s] else f"<tr><td>{e(aid)}</td><td>no submission</td><td></td></tr>" for aid in runs)
        total = sum(v[0] for v in table[s].values())
        possible = sum(data.get("max_score") or 0 for data in runs.values())
        body = (f"<h1>{e(s)}: the term so far</h1><p>{total:g} of {possible:g} points over {len(runs)} assignments "
                f"({len(table[s])} submitted).</p><table><tr><th>assignment</th><th>score</th><th>status</th></tr>"
                f"{rows}</table><p><a href=\"../index.html\">the class</a></p>")
        write_atomic(out / "students" / student_file(s), pages.sanitize_page(
            f"<html><head><title>{e(s)}</title><style>{STYLE}</style></head><body>{body}</body></html>", s))
    summary = "".join(
        f"<tr><td>{e(aid)}</td><td>{len(data['students'])}</td><td>"
        f"{_mean([r['score'] - r.get('penalty', 0.0) for r in data['students'].values()])}</td>"
        f"<td>{data.get('max_score') or 0:g}</td></tr>" for aid, data in runs.items())
    links = "".join(f'<li><a href="students/{urllib.parse.quote(student_file(s))}">{e(s)}</a></li>' for s in students)
    body = (f"<h1>The class over the term</h1><table><tr><th>assignment</th><th>submissions</th><th>mean</th>"
            f"<th>out of</th></tr>{summary}</table><h2>Students</h2><ul>{links}</ul>")
    index = out / "index.html"
    write_atomic(index, pages.sanitize_page(
        f"<html><head><title>The class</title><style>{STYLE}</style></head><body>{body}</body></html>", "The class"))
    return index


def _mean(values: list[float]) -> str:
    return f"{sum(values) / len(values):.2f}" if values else "-"


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--course", type=Path, default=ROOT)
    args = parser.parse_args(argv)
    print(term_report(args.course.resolve()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
