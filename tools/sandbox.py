"""The grading sandbox: one submission, one bubblewrap container, nothing else in reach.

A submission runs (tools/sandbox_runner.py, its kernel and whatever the student
starts) with:

* a fresh mount namespace holding only the system folders, the Python
  installation, the course's ``utils`` package (all read-only) and one writable
  folder with that single notebook: no course folder, gradebook, ``solutions/``,
  other students, ``autograded/``, ``feedback/`` or grader configuration;
* no network (an empty network namespace), its own PID namespace (everything it
  starts dies with it), IPC and UTS namespaces, no capabilities;
* a non-root user: when the grader runs as root, each running sandbox leases an
  unprivileged uid no other sandbox on the machine holds at the same time (a lock
  file per uid), so one student's process limit never starves another's, even
  across grading runs started side by side; otherwise bubblewrap's user namespace;
* resource limits: address space, number of processes, file size, CPU time, and
  a wall-clock budget for the whole notebook enforced from outside.

Requires bubblewrap (`bwrap`, Debian/Ubuntu package ``bubblewrap``). ``check()``
says why a sandbox cannot run here.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import resource
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNNER = Path(__file__).resolve().parent / "sandbox_runner.py"
BASE_UID = 61000  # sandboxed uids when grading as root: BASE_UID .. BASE_UID + UID_COUNT - 1
UID_COUNT = 512


@dataclass
class Limits:
    memory_bytes: int = 8 * 1024**3  # address space of each process
    processes: int = 256
    file_bytes: int = 256 * 1024**2
    budget_s: float = 300.0  # the whole notebook
    cell_timeout_s: float = 90.0
    max_output_bytes: int = 200_000


@dataclass
class Outcome:
    returncode: int | None
    timed_out: bool
    log: str


def bwrap() -> str | None:
    return shutil.which("bwrap")


def _parents(path: Path) -> list[str]:
    return [str(p) for p in reversed(path.parents) if str(p) != "/"]


def _read_only_paths() -> list[Path]:
    """The Python installation and the course package: what a kernel needs to import."""
    import utils

    paths = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), Path(utils.__file__).resolve().parent}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        paths.add(Path(sysconfig.get_paths()[key]).resolve())
    # Keep only the outermost of nested paths.
    ordered = sorted(paths, key=lambda p: len(p.parts))
    kept: list[Path] = []
    for p in ordered:
        if p.exists() and not any(p == k or k in p.parents for k in kept):
            kept.append(p)
    return kept


def _lock_dir() -> Path:
    """Where uid leases are kept: a root-only folder no sandbox can see."""
    for candidate in (Path("/run/lock"), Path(tempfile.gettempdir())):
        if candidate.is_dir() and os.access(candidate, os.W_OK):
            return candidate
    raise RuntimeError("no writable folder for the sandbox's uid leases (/run/lock or the temp folder)")


@contextlib.contextmanager
def uid_lease():
    """Hold a sandbox uid that no other sandbox on this machine is using, until the block ends.

    The process limit (RLIMIT_NPROC) is counted per uid, machine-wide: two sandboxes
    sharing a uid would share it, and a student who starts processes up to the limit
    would stop the other's kernel from starting threads. The lease is an advisory lock
    on one file per uid, so it also holds across separate grading processes.
    """
    folder = _lock_dir()
    for uid in range(BASE_UID, BASE_UID + UID_COUNT):
        fd = os.open(folder / f"course-sandbox-uid-{uid}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        try:
            yield uid
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        return
    raise RuntimeError(f"all {UID_COUNT} sandbox uids are in use: too many sandboxes at once")


def _processes_of(uid: int) -> int:
    count = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "status").read_text().split("\nUid:\t", 1)[1].split("\t", 1)[0] == str(uid):
                    count += 1
            except (OSError, IndexError):
                continue
    return count


def _wait_until_gone(uid: int, seconds: float = 5.0) -> None:
    """The namespace's processes die with it, a moment later: hand the uid on only once they have."""
    end = time.monotonic() + seconds
    while _processes_of(uid) and time.monotonic() < end:
        time.sleep(0.05)


def command(workdir: Path, argv: list[str], uid: int = BASE_UID) -> list[str]:
    """The bwrap command line that runs ``argv`` with ``workdir`` as the only writable folder."""
    exe = bwrap()
    if not exe:
        raise RuntimeError("bubblewrap (bwrap) is not installed")
    cmd = [exe, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net", "--unshare-ipc",
           "--unshare-uts", "--unshare-cgroup-try"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        p = Path(top)
        if p.is_symlink():
            cmd += ["--symlink", os.readlink(top), top]
        elif p.is_dir():
            cmd += ["--ro-bind", top, top]
    cmd += ["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc",
            "--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp"]
    made = {"/tmp", "/usr", "/etc", "/proc", "/dev"}
    for path in _read_only_paths():
        if str(path).startswith(("/usr/", "/etc/")):
            continue
        for parent in _parents(path):
            if parent not in made:
                cmd += ["--perms", "0755", "--dir", parent]
                made.add(parent)
        cmd += ["--ro-bind", str(path), str(path)]
    cmd += ["--perms", "0755", "--dir", "/opt", "--perms", "0755", "--dir", "/opt/grader",
            "--ro-bind", str(RUNNER), "/opt/grader/sandbox_runner.py",
            "--perms", "0755", "--dir", "/home", "--bind", str(workdir), "/home/student",
            "--chdir", "/home/student", "--clearenv"]
    env = {
        "HOME": "/home/student", "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "TMPDIR": "/tmp", "IPYTHONDIR": "/tmp/ipython", "JUPYTER_RUNTIME_DIR": "/tmp/jupyter",
        "JUPYTER_DATA_DIR": "/tmp/jupyter-data", "MPLCONFIGDIR": "/tmp/matplotlib",
        "ATTENTION_COURSE_CACHE": "/tmp/course-cache", "PYTHONDONTWRITEBYTECODE": "1",
        "COURSE_GRADING_RECORD": "/home/student/out/record.jsonl", "MPLBACKEND": "Agg",
        "LANG": "C.UTF-8",
    }
    for name in ("COURSE_PROFILE", "COURSE_THREADS", "OMP_NUM_THREADS", "KERAS_BACKEND",
                 "TF_CPP_MIN_LOG_LEVEL", "TF_ENABLE_ONEDNN_OPTS", "HF_HUB_OFFLINE"):
        if name in os.environ:
            env[name] = os.environ[name]
    # One thread per student: parallel grading comes from --jobs, not from threads fighting for cores.
    env.setdefault("COURSE_THREADS", "1")
    env.setdefault("OMP_NUM_THREADS", env["COURSE_THREADS"])
    for key, value in env.items():
        cmd += ["--setenv", key, value]
    if os.geteuid() == 0:
        cmd += ["--", shutil.which("setpriv") or "/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}",
                "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--"]
    else:
        cmd += ["--unshare-user", "--uid", "65534", "--gid", "65534", "--"]
    return cmd + argv


def _limit(limits: Limits):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        cpu = int(limits.budget_s * 4) + 60  # a backstop; the wall budget is the real limit
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
        if os.geteuid() == 0:  # counted per (sandbox) uid; root itself is exempt
            resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
    return apply


def run(workdir: Path, argv: list[str], limits: Limits, grace_s: float = 30.0) -> Outcome:
    """Run ``argv`` in the sandbox; kill everything after the budget (plus a grace period)."""
    with (uid_lease() if os.geteuid() == 0 else contextlib.nullcontext(None)) as uid:
        if uid is not None:
            os.chown(workdir, uid, uid)
            for p in workdir.rglob("*"):
                os.chown(p, uid, uid)
        log_path = workdir.parent / f"{workdir.name}.log"
        with log_path.open("wb") as log:
            proc = subprocess.Popen(command(workdir, argv, uid if uid is not None else BASE_UID), stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=_limit(limits),
                                    start_new_session=True)
            timed_out = False
            try:
                proc.wait(timeout=limits.budget_s + grace_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                os.killpg(proc.pid, signal.SIGKILL)  # bwrap's PID namespace takes every child with it
                proc.wait()
        if uid is not None:
            _wait_until_gone(uid)
    with log_path.open("rb") as fh:
        fh.seek(max(0, log_path.stat().st_size - 4000))
        tail = fh.read().decode("utf-8", "replace")
    return Outcome(proc.returncode, timed_out, tail)


def runner_argv(notebook: str, limits: Limits, outdir: str = "/home/student/out",
                runner: str = "/opt/grader/sandbox_runner.py", guard: str = "") -> list[str]:
    argv = [sys.executable, runner, notebook, outdir, "--cell-timeout", str(limits.cell_timeout_s),
            "--budget", str(limits.budget_s), "--max-output-bytes", str(limits.max_output_bytes)]
    return argv + (["--guard", guard] if guard else [])


def check() -> str | None:
    """None when a sandbox runs here; otherwise why not and what to install."""
    if sys.platform != "linux":
        return "the grading sandbox needs Linux (bubblewrap)"
    if not bwrap():
        return ("bubblewrap is not installed: `sudo apt-get install bubblewrap` (Debian/Ubuntu) "
                "or `sudo dnf install bubblewrap` (Fedora)")
    if os.geteuid() == 0 and not shutil.which("setpriv"):
        return "setpriv (util-linux) is missing: `apt-get install util-linux`"
    with tempfile.TemporaryDirectory(prefix="sandbox-check-") as tmp:
        work = Path(tmp) / "w"
        work.mkdir()
        os.chmod(tmp, 0o755)
        try:
            out = run(work, [sys.executable, "-c", "import utils, os; print('sandbox-ok', os.getuid())"],
                      Limits(budget_s=60), grace_s=0)
        except (OSError, RuntimeError) as exc:
            return f"bubblewrap could not start a sandbox: {exc}"
        if "sandbox-ok" not in out.log:
            return "bubblewrap could not start a sandbox here: " + out.log.strip()[-500:]
        if out.log.split("sandbox-ok", 1)[1].split()[0] == "0":
            return "the sandbox would run as root"
    return None
