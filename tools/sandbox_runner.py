"""Execute one submission inside the grading sandbox (started by tools/sandbox.py).

    python sandbox_runner.py NOTEBOOK OUTDIR --cell-timeout S --budget S --max-output-bytes N

Runs every cell with nbclient in a fresh kernel. Before each graded test cell it
tells ``utils.grading`` which test is running, so the values the test takes from
student code are recorded (``$COURSE_GRADING_RECORD``). After each test cell it
appends the cell's in-kernel outcome to ``OUTDIR/cells.jsonl``. Nothing written
here is trusted by the grader: the kernel runs student code and could rewrite
any of it; the grader decides every test again on its own (tools/replay.py).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

# jsonschema (under nbformat) builds a grammar for IRI formats on import: about 1.5 s of
# every student's start-up, for a format no notebook schema uses. Without it, jsonschema
# simply has no "iri" checker.
sys.modules.setdefault("rfc3987_syntax", None)

import nbformat  # noqa: E402
from nbclient import NotebookClient  # noqa: E402
from nbclient.exceptions import CellTimeoutError, DeadKernelError  # noqa: E402


def _cap_outputs(cell, limit: int) -> int:
    """Cut a cell's outputs to ``limit`` bytes in all; return the bytes kept."""
    kept, used = [], 0
    for out in cell.get("outputs", []):
        size = len(json.dumps(out))
        if used + size > limit:
            kept.append(nbformat.v4.new_output(
                "stream", name="stderr", text=f"[output cut: more than {limit} bytes]\n"))
            break
        kept.append(out)
        used += size
    cell["outputs"] = kept
    return used


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("notebook")
    parser.add_argument("outdir")
    parser.add_argument("--cell-timeout", type=float, default=90)
    parser.add_argument("--budget", type=float, default=300)
    parser.add_argument("--max-output-bytes", type=int, default=200_000)
    parser.add_argument("--guard", default="", help="JSON [modules, names] for utils.grading.guard_reference")
    args = parser.parse_args()
    out = Path(args.outdir)
    out.mkdir(parents=True, exist_ok=True)
    nb = nbformat.read(args.notebook, as_version=4)
    Path(args.notebook).unlink()  # the kernel gets the cells one by one; no copy lies around
    start = time.monotonic()
    status = {"state": "running", "cells_run": 0}

    client = NotebookClient(nb, timeout=args.cell_timeout, kernel_name="python3", allow_errors=True,
                            interrupt_on_timeout=True, record_timing=False, shutdown_kernel="immediate",
                            extra_arguments=["--InteractiveShell.xmode=Minimal"])
    log = (out / "cells.jsonl").open("a", encoding="utf-8")
    per_cell = max(2_000, args.max_output_bytes // max(1, len(nb.cells)))
    try:
        with client.setup_kernel():
            if args.guard:
                modules, names = json.loads(args.guard)
                arm = nbformat.v4.new_code_cell(
                    f"import utils.grading\nutils.grading.guard_reference({modules!r}, {names!r})")
                client.execute_cell(arm, 0, store_history=False)
            for index, cell in enumerate(nb.cells):
                if cell.cell_type != "code":
                    continue
                left = args.budget - (time.monotonic() - start)
                if left <= 1:
                    status["state"] = "budget"
                    break
                client.timeout = max(1, int(min(args.cell_timeout, left)))
                meta = cell.metadata.get("nbgrader", {}) or {}
                gid = meta.get("grade_id")
                if meta.get("grade") and gid:
                    marker = nbformat.v4.new_code_cell(f"import utils.grading\nutils.grading._begin_test({gid!r})")
                    client.execute_cell(marker, index, store_history=False)
                cell_start = time.monotonic()
                try:
                    client.execute_cell(cell, index)
                except CellTimeoutError:
                    status["timeouts"] = status.get("timeouts", 0) + 1
                    cell.setdefault("outputs", []).append(nbformat.v4.new_output(
                        "error", ename="CellTimeoutError", evalue="the cell ran past its time limit", traceback=[]))
                    if time.monotonic() - start >= args.budget - 1:
                        status["state"] = "budget"
                if any(o.get("ename") == "KeyboardInterrupt" for o in cell.get("outputs", [])
                       if o.get("output_type") == "error") and client.timeout <= time.monotonic() - cell_start + 1:
                    status["timeouts"] = status.get("timeouts", 0) + 1
                _cap_outputs(cell, per_cell)
                status["cells_run"] += 1
                if meta.get("grade") and gid:
                    errors = [o.get("ename", "Error") for o in cell.get("outputs", []) if o.get("output_type") == "error"]
                    log.write(json.dumps({"cell": gid, "error": errors[0] if errors else None}) + "\n")
                    log.flush()
                if status["state"] == "budget":
                    break
            else:
                status["state"] = "finished"
    except DeadKernelError:
        status["state"] = "kernel died"
    except Exception as exc:  # noqa: BLE001 - reported to the grader as data
        status["state"] = f"runner error: {type(exc).__name__}"
    log.close()
    nbformat.write(nb, out / "executed.ipynb")
    (out / "status.json").write_text(json.dumps(status))
    return 0


if __name__ == "__main__":
    sys.exit(main())
