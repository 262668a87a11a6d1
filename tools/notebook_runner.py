"""Execute course notebooks headless, the way the tests and benchmarks need it."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import nbformat

from grader.steady import SteadyClient

ROOT = Path(__file__).resolve().parent.parent  # the course folder
FRAMEWORK_MODULES = ("torch", "tensorflow", "keras")
_PROBE = (
    "import sys as _s, json as _j, time as _t\n"
    f"print('__MODULES__' + _j.dumps(sorted(m for m in {FRAMEWORK_MODULES!r} if m in _s.modules)))\n"
    "print('__CPU__' + repr(_t.process_time()))"
)


def run_notebook(
    path: Path,
    profile: str = "smoke",
    timeout: int = 600,
    record_file: Path | None = None,
    inline_plots: bool = False,
    pin_threads: bool = True,
) -> dict:
    """Execute a notebook in its own folder; return the frameworks it imported and the time taken.

    ``seconds`` is the wall time of the whole run (kernel start included); ``cpu_seconds``
    is the CPU time the kernel process used (all its threads), read by a last probe cell.

    ``pin_threads`` gives each kernel one thread: on 2 cores, kernels running
    side by side with default thread counts were several times slower.
    """
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(_PROBE))
    env = {
        "COURSE_PROFILE": profile,
        "MPLBACKEND": "module://matplotlib_inline.backend_inline" if inline_plots else "Agg",
        "TQDM_DISABLE": "1",
        "COURSE_SELF_CHECK": "off",  # an assignment's last cell does not check the notebook again
    }
    if pin_threads:
        env.update(COURSE_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    if record_file is not None:
        env["COURSE_RECORD_FILE"] = str(record_file)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    start = time.perf_counter()
    try:
        client = SteadyClient(
            nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
        )
        client.execute()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    seconds = time.perf_counter() - start
    text = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.get("output_type") == "stream")
    modules = json.loads(text.split("__MODULES__", 1)[1].splitlines()[0])
    cpu_seconds = float(text.split("__CPU__", 1)[1].splitlines()[0])
    return {"modules": modules, "seconds": seconds, "cpu_seconds": cpu_seconds, "notebook": nb}


def headings(path: Path) -> list[str]:
    """The markdown section headings (##, ###) of a notebook, in order."""
    nb = nbformat.read(path, as_version=4)
    out = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            out += [line.strip() for line in cell.source.splitlines() if line.startswith("##")]
    return out
