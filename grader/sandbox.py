"""The grading sandbox: one student's kernel in a bubblewrap container, nothing else in reach.

The kernel (and whatever the student's code starts) runs with:

* a fresh mount namespace holding only the system folders, the Python
  installation (read-only), the course's ``utils`` package *as this assignment
  sees it* (read-only, mounted at ``/opt/course``: the functions the assignment
  asks for are absent, see ``grader.reference``) and two small writable
  in-memory folders, ``/home/student`` and ``/tmp``, each with a size limit.
  No course folder, gradebook, ``solutions/``, other students, ``autograded/``,
  ``feedback/``, grader configuration, test code or host folder of any kind;
* no network (an empty network namespace), its own PID namespace (everything it
  starts dies with it), IPC and UTS namespaces, no capabilities;
* a non-root user: when the grader runs as root, each running sandbox leases an
  unprivileged uid no other sandbox on the machine holds at the same time (a lock
  file per uid), so one student's process limit never starves another's, even
  across grading runs started side by side; otherwise bubblewrap's user namespace;
* limits on the whole sandbox that the kernel cannot multiply by starting
  processes: a cgroup per sandbox (``Cgroup``) caps the memory and the number of
  processes (threads included) of everything in it together. cgroup v2 (a
  delegated subtree: ``$GRADER_CGROUP``, or the grader's own cgroup when it may
  enable the memory and pids controllers there, as root in a container) or,
  where the memory and pids controllers are still on cgroup v1 hierarchies, v1.
  Where neither can be written (an instructor's laptop without root), the
  per-process resource limits below are all there is, and the grader says so;
* per-process resource limits (``prlimit``): address space, processes (per uid),
  file size, CPU time.

The notebook runner (``grader.runner``) stays *outside*, as the grader's user:
the kernel cannot signal it, read its memory or write its files. It reaches the
kernel's sockets through ``/proc/<pid>/root``.

Requires bubblewrap (`bwrap`, Debian/Ubuntu package ``bubblewrap``) and
util-linux (``prlimit``, ``setpriv``). ``check()`` says why a sandbox cannot run here.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

BASE_UID = 61000  # sandboxed uids when grading as root: BASE_UID .. BASE_UID + UID_COUNT - 1
UID_COUNT = 512
COURSE_LIB = "/opt/course"  # where the assignment's view of `utils` is mounted (on PYTHONPATH)
HOME = "/home/student"


@dataclass
class Limits:
    memory_bytes: int = 8 * 1024**3  # address space of each process (a backstop: rlimits are per process)
    processes: int = 256  # every process and thread of the sandbox together (per uid without a cgroup)
    sandbox_memory_bytes: int = 6 * 1024**3  # memory of every process of the sandbox together (cgroup)
    file_bytes: int = 64 * 1024**2  # largest file a process may write
    home_bytes: int = 64 * 1024**2  # the writable home folder (in memory, counted)
    tmp_bytes: int = 128 * 1024**2  # /tmp (in memory, counted)
    budget_s: float = 300.0  # the whole notebook
    cell_timeout_s: float = 90.0
    max_output_bytes: int = 200_000  # outputs kept from the student's own cells
    report_bytes: int = 16 * 1024**2  # the values all tests of one notebook report


def bwrap() -> str | None:
    return shutil.which("bwrap")


def _parents(path: Path) -> list[str]:
    return [str(p) for p in reversed(path.parents) if str(p) != "/"]


def python_paths() -> list[Path]:
    """The Python installation a kernel needs (never the course folder), outermost paths only."""
    paths = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        paths.add(Path(sysconfig.get_paths()[key]).resolve())
    ordered = sorted(paths, key=lambda p: len(p.parts))
    kept: list[Path] = []
    for p in ordered:
        if p.exists() and not any(p == k or k in p.parents for k in kept):
            kept.append(p)
    return kept


def installed_utils() -> list[Path]:
    """Copies of the course's ``utils`` installed into site-packages (a non-editable install):
    the sandbox covers them with the assignment's view so the full package cannot be read there."""
    found = []
    for key in ("purelib", "platlib"):
        candidate = Path(sysconfig.get_paths()[key]) / "utils"
        if (candidate / "grading.py").is_file() and candidate.resolve() not in found:
            found.append(candidate.resolve())
    return found


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
    Without root there is nothing to lease (bubblewrap's user namespace): yields None.
    """
    if os.geteuid() != 0:
        yield None
        return
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
            _wait_until_gone(uid)
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        return
    raise RuntimeError(f"all {UID_COUNT} sandbox uids are in use: too many sandboxes at once")


def _processes_of(uid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "status").read_text().split("\nUid:\t", 1)[1].split("\t", 1)[0] == str(uid):
                    pids.append(int(entry.name))
            except (OSError, IndexError):
                continue
    return pids


def _wait_until_gone(uid: int, seconds: float = 5.0) -> None:
    """Hand the uid on only once none of its processes is left: kill what is (the uid is leased to
    this sandbox alone, so whatever runs under it is the sandbox's), then wait for them to go."""
    end = time.monotonic() + seconds
    while (pids := _processes_of(uid)) and time.monotonic() < end:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.01)


# Set in every grading kernel: the notebook's self-check cell (utils.grading.check_all, which
# names the same variable) sees it and does not start a check from inside the notebook being graded.
GRADING_ENV = "COURSE_GRADING"


CGROUP_ENV = "GRADER_CGROUP"  # a delegated cgroup v2 folder the grader may create sandboxes' cgroups in
CGROUP_DIR = "course-grader"  # the grader's own subtree, made under the grader's cgroup


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, file system type, super options) of each cgroup mount."""
    found = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
            found.append((fields[4].replace("\\040", " "), tail[0], set(tail[2].split(","))))
    return found


def _own_cgroups() -> dict[str, str]:
    """controller (or "" for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    own = {}
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for name in (controllers.split(",") if controllers else [""]):
                own[name] = path
    except (OSError, ValueError):
        pass
    return own


def _write(path: Path, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


class Cgroup:
    """One sandbox's cgroup: its memory and process limits hold for all its processes together.

    ``Cgroup.create(limits)`` makes it (None where cgroups cannot be used here: ``support()``
    says why); ``join_command`` is the prefix that moves the sandbox's first process into it
    before bubblewrap starts; ``hit()`` says which limit the sandbox ran into; ``kill()``
    ends every process in it; ``remove()`` kills and deletes it.
    """

    def __init__(self, kind: str, folders: list[Path], memory_bytes: int, processes: int) -> None:
        self.kind, self.folders, self.memory_bytes, self.processes = kind, folders, memory_bytes, processes

    # -- where sandboxes' cgroups can go ------------------------------------------------------------

    @staticmethod
    def _v2_parent() -> tuple[Path | None, str]:
        """The grader's cgroup v2 subtree: under ``$GRADER_CGROUP`` (delegated), else under the grader's own
        cgroup, else (root, e.g. under systemd, whose own cgroup holds processes) under the hierarchy's root."""
        mounts = [m for m in _mounts() if m[1] == "cgroup2"]
        delegated = os.environ.get(CGROUP_ENV)
        if delegated:
            bases = [Path(delegated)]
        elif mounts:
            bases = [Path(mounts[0][0] + _own_cgroups().get("", "/"))]
            if os.geteuid() == 0 and bases[0] != Path(mounts[0][0]):
                bases.append(Path(mounts[0][0]))
        else:
            return None, "no cgroup v2 file system is mounted"
        why = ""
        for base in bases:
            try:
                controllers = set((base / "cgroup.controllers").read_text().split())
            except OSError:
                why = f"cannot read {base}/cgroup.controllers"
                continue
            if not {"memory", "pids"} <= controllers:
                why = f"the memory and pids controllers are not available in {base} (cgroup v2)"
                continue
            parent = base / CGROUP_DIR
            try:
                if not {"memory", "pids"} <= set((base / "cgroup.subtree_control").read_text().split()):
                    _write(base / "cgroup.subtree_control", "+memory +pids")
                parent.mkdir(exist_ok=True)
                if not {"memory", "pids"} <= set((parent / "cgroup.subtree_control").read_text().split()):
                    _write(parent / "cgroup.subtree_control", "+memory +pids")
            except OSError as exc:
                why = (f"cannot create cgroups under {base} ({exc.strerror or exc}); delegate one to the grader "
                       f"(e.g. systemd-run --user -p Delegate=yes ...) and set {CGROUP_ENV} to it")
                continue
            return parent, ""
        return None, why

    @staticmethod
    def _v1_parents() -> tuple[list[Path] | None, str]:
        own = _own_cgroups()
        parents = []
        for controller in ("memory", "pids"):
            mount = next((m for m in _mounts() if m[1] == "cgroup" and controller in m[2]), None)
            if mount is None:
                return None, f"no {controller} controller is mounted (cgroup v1 or v2)"
            parent = Path(mount[0] + own.get(controller, "/")) / CGROUP_DIR
            try:
                parent.mkdir(exist_ok=True)
            except OSError as exc:
                return None, f"cannot create cgroups under {parent.parent} ({exc.strerror or exc})"
            parents.append(parent)
        return parents, ""

    @classmethod
    def support(cls) -> tuple[str | None, str]:
        """("v2" | "v1" | None, why not, when None): how sandboxes' limits are enforced here."""
        parent, why2 = cls._v2_parent()
        if parent is not None:
            return "v2", ""
        parents, why1 = cls._v1_parents()
        if parents is not None:
            return "v1", ""
        return None, f"{why2}; {why1}"

    @staticmethod
    def _sweep(parent: Path) -> None:
        """Remove the cgroups of runners that are gone (killed before they could): empty, so rmdir works."""
        with contextlib.suppress(OSError):
            for folder in parent.glob("sandbox-*"):
                pid = folder.name.split("-")[1]
                if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                    with contextlib.suppress(OSError):
                        folder.rmdir()

    @classmethod
    def create(cls, limits: Limits) -> Cgroup | None:
        name = f"sandbox-{os.getpid()}-{time.monotonic_ns()}"
        memory, processes = int(limits.sandbox_memory_bytes), int(limits.processes)
        parent, _ = cls._v2_parent()
        try:
            if parent is not None:
                cls._sweep(parent)
                folder = parent / name
                folder.mkdir()
                _write(folder / "memory.max", str(memory))
                _write(folder / "pids.max", str(processes))
                with contextlib.suppress(OSError):
                    _write(folder / "memory.swap.max", "0")
                return cls("v2", [folder], memory, processes)
            parents, _ = cls._v1_parents()
            if parents is None:
                return None
            folders = [p / name for p in parents]
            for folder in folders:
                cls._sweep(folder.parent)
                folder.mkdir()
            _write(folders[0] / "memory.limit_in_bytes", str(memory))
            with contextlib.suppress(OSError):
                _write(folders[0] / "memory.memsw.limit_in_bytes", str(memory))
            _write(folders[1] / "pids.max", str(processes))
            return cls("v1", folders, memory, processes)
        except OSError:
            return None

    # -- one sandbox's cgroup ---------------------------------------------------------------------

    def join_command(self) -> list[str]:
        """A prefix for the sandbox's command: the first process enters the cgroup, then runs the rest
        (everything it starts is in the cgroup from its first instruction)."""
        procs = [str(f / "cgroup.procs") for f in self.folders]
        script = 'for f; do [ "$f" = -- ] && break; echo 0 > "$f" || exit 125; shift; done; shift; exec "$@"'
        return ["/bin/sh", "-c", script, "sh", *procs, "--"]

    def _read(self, name: str) -> str:
        for folder in self.folders:
            with contextlib.suppress(OSError):
                return (folder / name).read_text()
        return ""

    def _field(self, name: str, key: str) -> int:
        for line in self._read(name).splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == key and parts[1].isdigit():
                return int(parts[1])
        return 0

    def hit(self) -> dict[str, bool]:
        """Which of the sandbox's limits it ran into: memory (a process killed for memory) and processes
        (a fork or thread refused)."""
        if self.kind == "v2":
            memory = self._field("memory.events", "oom_kill") > 0
            processes = self._field("pids.events", "max") > 0
        else:
            memory = self._field("memory.oom_control", "oom_kill") > 0
            processes = self._field("pids.events", "max") > 0
        return {"memory": memory, "processes": processes}

    def pids(self) -> list[int]:
        out = []
        for folder in self.folders:
            with contextlib.suppress(OSError):
                out += [int(x) for x in (folder / "cgroup.procs").read_text().split()]
        return sorted(set(out))

    def kill(self, seconds: float = 5.0) -> None:
        """SIGKILL every process in the cgroup (whatever it does with signals), until none is left."""
        if self.kind == "v2":
            with contextlib.suppress(OSError):
                _write(self.folders[0] / "cgroup.kill", "1")
        end = time.monotonic() + seconds
        while (left := self.pids()) and time.monotonic() < end:
            for pid in left:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)

    def remove(self) -> None:
        self.kill()
        for folder in self.folders:
            for _ in range(100):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


def enforcement(limits: Limits) -> str:
    """One line for the grading log: how the sandbox's memory and process limits are enforced here."""
    kind, why = Cgroup.support()
    if kind is not None:
        return (f"[sandbox limits] cgroup {kind}, {limits.sandbox_memory_bytes // 2**20} MiB of memory and "
                f"{limits.processes} processes for each sandbox as a whole")
    return (f"[sandbox limits] NO cgroup ({why}), per-process limits only ({limits.memory_bytes // 2**20} MiB of "
            f"address space per process, {limits.processes} processes per sandbox uid"
            + ("" if os.geteuid() == 0 else ", not enforced without root")
            + "), so a notebook can hold that memory in each of its processes")


def limits_note(hit: dict, limits: Limits) -> str:
    """The student's note for the sandbox limits their notebook ran into ("" for none)."""
    parts = []
    if hit.get("memory"):
        parts.append(f"your notebook used more than {limits.sandbox_memory_bytes // 2**20} MiB of memory "
                     "(all its processes together), and a process of it was stopped")
    if hit.get("processes"):
        parts.append(f"your notebook tried to run more than {limits.processes} processes and threads at once; "
                     "the ones past that limit were refused")
    return "; ".join(parts)


def kernel_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The whole environment of a sandboxed process (nothing of the grader's leaks in)."""
    env = {
        GRADING_ENV: "1",
        "HOME": HOME, "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "PYTHONPATH": COURSE_LIB, "TMPDIR": "/tmp", "IPYTHONDIR": "/tmp/ipython",
        "JUPYTER_RUNTIME_DIR": "/tmp/jupyter", "JUPYTER_DATA_DIR": "/tmp/jupyter-data",
        "MPLCONFIGDIR": "/tmp/matplotlib", "ATTENTION_COURSE_CACHE": "/tmp/course-cache",
        "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg", "LANG": "C.UTF-8",
    }
    for name in ("COURSE_PROFILE", "COURSE_THREADS", "OMP_NUM_THREADS", "KERAS_BACKEND",
                 "TF_CPP_MIN_LOG_LEVEL", "TF_ENABLE_ONEDNN_OPTS", "HF_HUB_OFFLINE"):
        if name in os.environ:
            env[name] = os.environ[name]
    # One thread per student: parallel grading comes from --jobs, not from threads fighting for cores.
    env.setdefault("COURSE_THREADS", "1")
    env.setdefault("OMP_NUM_THREADS", env["COURSE_THREADS"])
    env.update(extra or {})
    return env


def command(argv: list[str], lib: Path, limits: Limits, uid: int | None = None,
            files: dict[str, Path] | None = None, env: dict[str, str] | None = None,
            cgroup: Cgroup | None = None) -> list[str]:
    """The command line that runs ``argv`` in a sandbox.

    ``lib`` is the folder holding the assignment's ``utils`` (mounted read-only at
    /opt/course); ``files`` maps paths inside the sandbox to host files bound there
    read-only (e.g. the kernel's connection file); ``uid`` is the leased uid (root only);
    ``cgroup`` the sandbox's cgroup (its limits hold for all its processes together).
    """
    exe = bwrap()
    if not exe:
        raise RuntimeError("bubblewrap (bwrap) is not installed")
    prlimit = shutil.which("prlimit") or "/usr/bin/prlimit"
    cpu = int(limits.budget_s * 4) + 60  # a backstop; the wall budget is the real limit
    cmd = cgroup.join_command() if cgroup is not None else []
    cmd += [prlimit, f"--as={limits.memory_bytes}", f"--fsize={limits.file_bytes}", "--core=0", f"--cpu={cpu}"]
    if os.geteuid() == 0:  # counted per (sandbox) uid; root itself is exempt
        cmd.append(f"--nproc={limits.processes}")
    cmd += ["--", exe, "--die-with-parent", "--unshare-pid", "--unshare-net", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        p = Path(top)
        if p.is_symlink():
            cmd += ["--symlink", os.readlink(top), top]
        elif p.is_dir():
            cmd += ["--ro-bind", top, top]
    cmd += ["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc", "--proc", "/proc", "--dev", "/dev",
            "--size", str(limits.tmp_bytes), "--perms", "1777", "--tmpfs", "/tmp"]
    made = {"/tmp", "/usr", "/etc", "/proc", "/dev"}

    def parents(path: str) -> None:
        nonlocal cmd
        for parent in _parents(Path(path)):
            if parent not in made:
                cmd += ["--perms", "0755", "--dir", parent]
                made.add(parent)

    for path in python_paths():
        if str(path).startswith(("/usr/", "/etc/")):
            continue
        parents(str(path))
        cmd += ["--ro-bind", str(path), str(path)]
    for copy in installed_utils():  # a full copy in site-packages is covered by the assignment's view
        cmd += ["--ro-bind", str(lib / "utils"), str(copy)]
    parents(COURSE_LIB + "/x")
    cmd += ["--ro-bind", str(lib), COURSE_LIB]
    for inside, host in (files or {}).items():
        parents(inside)
        cmd += ["--ro-bind", str(host), inside]
    parents(HOME)
    cmd += ["--size", str(limits.home_bytes), "--perms", "0777", "--tmpfs", HOME, "--chdir", HOME, "--clearenv"]
    for key, value in kernel_env(env).items():
        cmd += ["--setenv", key, value]
    if uid is not None:
        cmd += ["--", shutil.which("setpriv") or "/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}",
                "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--"]
    else:
        cmd += ["--unshare-user", "--uid", "65534", "--gid", "65534", "--"]
    return cmd + argv


def namespace_root(pid: int, seconds: float = 10.0) -> int | None:
    """The host pid of the first process inside bubblewrap's PID namespace (its ``/proc/<pid>/root``
    is the sandbox's file system); None if it did not appear in time."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(stat[1]) == pid:
                return int(entry)
        time.sleep(0.01)
    return None


def run(argv: list[str], lib: Path, limits: Limits, timeout: float | None = None,
        hit: dict | None = None) -> tuple[int | None, str]:
    """Run one command in a sandbox and wait for it (killed after ``timeout`` s):
    (its exit status, or None if it was killed, and the tail of its output). ``hit``, if given,
    receives which of the sandbox's cgroup limits it ran into."""
    with uid_lease() as uid:
        cgroup = Cgroup.create(limits)
        try:
            proc = subprocess.Popen(command(argv, lib, limits, uid, cgroup=cgroup), stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
            try:
                out, _ = proc.communicate(timeout=timeout)
                code = proc.returncode
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # bubblewrap's PID namespace takes every child with it
                out, _ = proc.communicate()
                code = None
            if hit is not None and cgroup is not None:
                hit.update(cgroup.hit())
        finally:
            if cgroup is not None:
                cgroup.remove()
    return code, out.decode("utf-8", "replace")[-4000:]


def check(lib: Path | None = None) -> str | None:
    """None when a sandbox runs here; otherwise why not and what to install."""
    if sys.platform != "linux":
        return "the grading sandbox needs Linux (bubblewrap)"
    if not bwrap():
        return ("bubblewrap is not installed: `sudo apt-get install bubblewrap` (Debian/Ubuntu) "
                "or `sudo dnf install bubblewrap` (Fedora)")
    for tool in ("prlimit",) + (("setpriv",) if os.geteuid() == 0 else ()):
        if not shutil.which(tool):
            return f"{tool} (util-linux) is missing: `apt-get install util-linux`"
    from grader import reference

    with tempfile.TemporaryDirectory(prefix="sandbox-check-") as tmp:
        os.chmod(tmp, 0o755)
        lib = lib or reference.view(Path(tmp) / "lib", None)
        probe = "import utils, os; print('sandbox-ok', os.getuid(), utils.__file__)"
        try:
            _, out = run([sys.executable, "-c", probe], lib, Limits(), timeout=60)
        except (OSError, RuntimeError) as exc:
            return f"bubblewrap could not start a sandbox: {exc}"
        if "sandbox-ok" not in out:
            return "bubblewrap could not start a sandbox here: " + out.strip()[-500:]
        uid_seen, where = out.split("sandbox-ok", 1)[1].split()[:2]
        if uid_seen == "0":
            return "the sandbox would run as root"
        if not where.startswith(COURSE_LIB + "/"):
            return f"the sandbox imports the course's utils from {where}, not from the assignment's view"
    return None
