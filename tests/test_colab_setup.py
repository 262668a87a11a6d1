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

NOTEBOOK = ROOT / "lessons" / "01_soft_attention" / "01_soft_attention_pytorch.ipynb"
COURSE_DIST = "attention-course"  # the course's own distribution: the only one the cell may add

FAKE_COLAB = '''"""A stand-in for google.colab.output: records that the widget manager was enabled."""
import os


def enable_custom_widget_manager() -> None:
    open(os.environ["FAKE_COLAB_FLAG"], "w").write("enabled")
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


@pytest.mark.notebook
def test_colab_cell_installs_the_course_and_keeps_the_preinstalled_frameworks(tmp_path: Path) -> None:
    _require("git")
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing to clone")
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
    flag = tmp_path / "widget-manager-enabled"

    # A kernel of that environment.
    kernels = tmp_path / "jupyter" / "kernels" / "colabsim"
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "simulated Colab", "language": "python",
    }))

    nb = nbformat.read(NOTEBOOK, as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert first.source == sync.colab_cell_source(), "the notebook's first cell is not the Colab set-up cell"
    clone = tmp_path / "content" / "attention-course"
    first.source = sync.colab_cell_source(url=str(served), clone_dir=str(clone))
    probe_cell = nbformat.v4.new_code_cell(
        "import utils, sys\nprint('__UTILS__' + utils.__file__)\nprint('__EXE__' + sys.executable)")
    nb.cells.insert(nb.cells.index(first) + 1, probe_cell)

    from grader.steady import SteadyClient

    env = {"JUPYTER_PATH": str(tmp_path / "jupyter"), "PYTHONPATH": str(fake), "FAKE_COLAB_FLAG": str(flag),
           "COURSE_PROFILE": "smoke", "MPLBACKEND": "Agg", "TQDM_DISABLE": "1",
           "COURSE_THREADS": "1", "OMP_NUM_THREADS": "1"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        SteadyClient(nb, timeout=900, kernel_name="colabsim",
                     resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)

    printed = "".join(o.get("text", "") for o in probe_cell.outputs if o.get("output_type") == "stream")
    utils_file = printed.split("__UTILS__", 1)[1].splitlines()[0]
    assert Path(utils_file).resolve().is_relative_to(clone.resolve()), f"utils came from {utils_file}, not the clone"
    assert printed.split("__EXE__", 1)[1].splitlines()[0] == str(python), "the notebook did not run in the simulated Colab"
    assert flag.exists(), "the set-up cell did not enable Colab's custom widget manager"

    after = _freeze(python)
    changed = {name: (before.get(name), after.get(name)) for name in set(before) | set(after)
               if before.get(name) != after.get(name) and name != COURSE_DIST}
    assert not changed, f"the Colab set-up cell changed preinstalled packages (before, after): {changed}"
    assert COURSE_DIST in after, f"the course package is not installed after the set-up cell: {sorted(after)}"
