"""The Colab set-up cell, tested off Colab by simulating Colab.

A fresh virtual environment stands for a Colab runtime: it already has torch,
TensorFlow and the rest of the course's requirements (this machine's course
environment, made visible to it by a ``.pth`` file, the way Colab's packages are
there before the notebook starts), a fake ``google.colab`` module, and a clone
of this repository served from a local path instead of the GitHub address.
Then a lesson notebook runs in a kernel of that environment, its first cell
being the real set-up cell with only the address and the clone folder changed:

* the cell installs the course (``utils`` imports from the clone) and turns on
  Colab's widget manager;
* it leaves every preinstalled package as it was (``pip freeze`` before and
  after; only the course's own package may appear or change);
* the rest of the notebook then runs (smoke profile).

In the same simulated Colab, without bubblewrap (hidden from the kernel's PATH, as Colab
has none), an assignment notebook with a mistake only a hidden test catches runs top to
bottom; its last cell, ``grading.check_all``, reads the notebook from the (fake) front end,
grades it with the course's own grader from the clone, says it ran without a sandbox, and
shows the hidden test's verdict and message and the feedback page.

Needs ``git`` and a package index for pip (the editable install builds the
course package); under ``CI=true`` it must run.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import nbformat
import pytest

from tools import sync_notebooks as sync
from tools.notebook_runner import ROOT

pytestmark = pytest.mark.xdist_group("colab")  # one simulated Colab (clone, environment) for both tests
NOTEBOOK = ROOT / "lessons" / "01_soft_attention" / "01_soft_attention_pytorch.ipynb"
COURSE_DIST = "attention-course"  # the course's own distribution: the only one the cell may add

FAKE_COLAB = '''"""A stand-in for google.colab.output: records that the widget manager was enabled."""
import os


def enable_custom_widget_manager() -> None:
    open(os.environ["FAKE_COLAB_FLAG"], "w").write("enabled")
'''

FAKE_MESSAGE = '''"""A stand-in for google.colab._message: the front end's answer to get_ipynb (the notebook)."""
import json
import os


def blocking_request(request_type, request="", timeout_sec=5, parent=None):
    if request_type != "get_ipynb":
        raise ValueError(f"the fake front end answers get_ipynb only, not {request_type!r}")
    with open(os.environ["FAKE_COLAB_IPYNB"], encoding="utf-8") as fh:
        return {"ipynb": json.load(fh)}
'''


def _freeze(python: Path) -> dict[str, str]:
    out = subprocess.run([str(python), "-m", "pip", "freeze", "--all"], capture_output=True, text=True, check=True)
    versions = {}
    for line in out.stdout.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        if line.startswith("-e "):  # an editable install: "-e <location>", named on the comment line before
            versions.setdefault(COURSE_DIST, line)
            continue
        name, _, version = line.partition("==")
        if not version:
            name, _, version = line.partition(" @ ")
        versions[name.strip().lower().replace("_", "-")] = version.strip()
    return versions


def _require(tool: str) -> None:
    if shutil.which(tool) is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{tool} is needed to simulate Colab (CI=true: this test must run)")
        pytest.skip(f"{tool} not found: the simulated-Colab test needs it")


@pytest.fixture(scope="module")
def colab(tmp_path_factory) -> dict:
    """A simulated Colab runtime: the served clone, a fresh environment with the frameworks,
    a fake google.colab, and a kernel of that environment (shared by the tests below)."""
    _require("git")
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing to clone")
    tmp_path = tmp_path_factory.mktemp("colab")
    # The repository as Colab would clone it (committed files only).
    served = tmp_path / "served"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(served)], check=True)

    # A fresh environment that already has the frameworks, as Colab does.
    env_dir = tmp_path / "colab-env"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True)
    python = env_dir / "bin" / "python"
    env_site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   capture_output=True, text=True, check=True).stdout.strip())
    preinstalled = Path(sysconfig.get_paths()["purelib"])
    (env_site / "_colab_preinstalled.pth").write_text(f"{preinstalled}\n")
    # setuptools' distutils shim, active in Colab's own site-packages (a .pth there), is not
    # run for a folder added by a .pth line: on Python 3.12 (no distutils) TensorFlow 2.16
    # and 2.17, which import distutils, need it. It sorts after the line above.
    shim = preinstalled / "distutils-precedence.pth"
    if shim.exists():
        (env_site / shim.name).write_text(shim.read_text())
    probe = "import torch, tensorflow, numpy; print(torch.__version__, tensorflow.__version__)"
    subprocess.run([str(python), "-c", probe], check=True, capture_output=True)
    before = _freeze(python)
    assert "torch" in before and ("tensorflow" in before or "tensorflow-cpu" in before), sorted(before)

    # google.colab, faked; a namespace package `google`, so google.protobuf still imports.
    fake = tmp_path / "fake-colab"
    (fake / "google" / "colab").mkdir(parents=True)
    (fake / "google" / "colab" / "__init__.py").write_text("")
    (fake / "google" / "colab" / "output.py").write_text(FAKE_COLAB)
    (fake / "google" / "colab" / "_message.py").write_text(FAKE_MESSAGE)

    # A kernel of that environment.
    kernels = tmp_path / "jupyter" / "kernels" / "colabsim"
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "simulated Colab", "language": "python",
    }))
    return {"tmp": tmp_path, "served": served, "python": python, "fake": fake, "before": before,
            "clone": tmp_path / "content" / "attention-course"}


def _run_on_colab(colab: dict, nb, extra_env: dict | None = None) -> None:
    """Run ``nb`` in the simulated Colab, its first code cell replaced by the real set-up cell
    pointed at the served clone."""
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert first.source == sync.colab_cell_source(), "the notebook's first cell is not the Colab set-up cell"
    first.source = sync.colab_cell_source(url=str(colab["served"]), clone_dir=str(colab["clone"]))
    from grader.steady import SteadyClient

    tmp_path = colab["tmp"]
    # Jupyter's data files (nbconvert's templates, which the grader's feedback page uses) of the
    # preinstalled packages, where Colab's own Python keeps them.
    jupyter_path = os.pathsep.join([str(tmp_path / "jupyter"), str(Path(sys.prefix) / "share" / "jupyter")])
    env = {"JUPYTER_PATH": jupyter_path, "PYTHONPATH": str(colab["fake"]),
           "FAKE_COLAB_FLAG": str(tmp_path / "widget-manager-enabled"),
           "COURSE_PROFILE": "smoke", "MPLBACKEND": "Agg", "TQDM_DISABLE": "1",
           "COURSE_THREADS": "1", "OMP_NUM_THREADS": "1", **(extra_env or {})}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        SteadyClient(nb, timeout=900, kernel_name="colabsim",
                     resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


def _path_without(tool: str, mirror: Path) -> str:
    """$PATH with ``tool`` gone: a folder that holds it is replaced by a mirror of its other programs."""
    parts = []
    for i, folder in enumerate(os.environ.get("PATH", "").split(os.pathsep)):
        here = Path(folder)
        if folder and (here / tool).exists():
            copy = mirror / str(i)
            copy.mkdir(parents=True, exist_ok=True)
            for entry in here.iterdir():
                if entry.name != tool and not (copy / entry.name).exists():
                    (copy / entry.name).symlink_to(entry)
            parts.append(str(copy))
        else:
            parts.append(folder)
    return os.pathsep.join(parts)


@pytest.mark.notebook
def test_colab_cell_installs_the_course_and_keeps_the_preinstalled_frameworks(colab: dict) -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "code")
    probe_cell = nbformat.v4.new_code_cell(
        "import utils, sys\nprint('__UTILS__' + utils.__file__)\nprint('__EXE__' + sys.executable)")
    nb.cells.insert(nb.cells.index(first) + 1, probe_cell)
    _run_on_colab(colab, nb)

    clone, python = colab["clone"], colab["python"]
    printed = "".join(o.get("text", "") for o in probe_cell.outputs if o.get("output_type") == "stream")
    utils_file = printed.split("__UTILS__", 1)[1].splitlines()[0]
    assert Path(utils_file).resolve().is_relative_to(clone.resolve()), f"utils came from {utils_file}, not the clone"
    assert printed.split("__EXE__", 1)[1].splitlines()[0] == str(python), "the notebook did not run in the simulated Colab"
    assert (colab["tmp"] / "widget-manager-enabled").exists(), "the set-up cell did not enable Colab's custom widget manager"

    before, after = colab["before"], _freeze(python)
    changed = {name: (before.get(name), after.get(name)) for name in set(before) | set(after)
               if before.get(name) != after.get(name) and name != COURSE_DIST}
    assert not changed, f"the Colab set-up cell changed preinstalled packages (before, after): {changed}"
    assert COURSE_DIST in after, f"the course package is not installed after the set-up cell: {sorted(after)}"


@pytest.mark.notebook
def test_the_last_cell_checks_the_notebook_on_colab_without_a_sandbox(colab: dict) -> None:
    from tests.test_self_check import ASSIGNMENTS, HIDDEN_MESSAGE, HIDDEN_TEST, _notebooks

    assignment = ASSIGNMENTS[0]
    path = _notebooks(assignment, colab["tmp"])["mistaken"]  # what the fake front end hands over
    nb = nbformat.read(path, as_version=4)
    last = nb.cells[-1]
    assert f'grading.check_all("{assignment}")' in last.source, "the assignment's last cell is not the self-check"
    _run_on_colab(colab, nb, {"FAKE_COLAB_IPYNB": str(path),
                              "PATH": _path_without("bwrap", colab["tmp"] / "path-without-bwrap")})

    printed = "".join(o.get("text", "") for o in last.outputs if o.get("output_type") == "stream")
    shown = "".join(o.get("data", {}).get("text/html", "") for o in last.outputs if o.get("output_type") == "display_data")
    assert "the notebook as it is in your browser" in printed, printed[-3000:]
    assert "NO SANDBOX: bubblewrap is not installed" in printed, printed[-3000:]
    line = next((ln for ln in printed.splitlines() if f" {HIDDEN_TEST} " in f" {ln} "), "")
    assert line.split()[:1] == ["FAILED"] and HIDDEN_MESSAGE in line, printed[-3000:]
    assert "Every test passes" not in printed
    page = colab["clone"].resolve() / "build" / "check" / assignment / f"{assignment}.html"
    assert page.is_file() and HIDDEN_MESSAGE in page.read_text(encoding="utf-8")
    assert str(page) in shown, f"no link to the page in the cell's output: {shown!r}"
