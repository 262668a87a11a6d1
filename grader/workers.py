"""Trusted helper processes (the replay, the feedback renderer), each job bounded in time and memory.

One process per grading thread, started on first use and kept for the next
student (importing a framework costs seconds). A job that runs past its time, an
answer too large, a process that dies or runs out of memory: the process is
killed, the job answers ``{"ok": False, "error": ...}``, and the next job starts
a fresh one. Nothing a student's notebook does can make the grader wait longer.
"""
from __future__ import annotations

import json
import os
import resource
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_ANSWER_BYTES = 8 * 1024 * 1024


def trusted_env() -> dict:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("COURSE_THREADS", "1")  # one thread per student: --jobs runs students side by side
    env.setdefault("OMP_NUM_THREADS", env["COURSE_THREADS"])
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.setdefault("MPLBACKEND", "Agg")
    return env


def memory_limit(limit_bytes: int):
    """A soft address-space limit for a trusted process (its hard limit stays, so the runner can
    still give the sandbox its own limit through prlimit)."""
    def apply() -> None:
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        soft = limit_bytes if hard == resource.RLIM_INFINITY else min(limit_bytes, hard)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


class Workers:
    """``python -m <module> --serve`` processes, one per thread, answering one JSON line per job."""

    def __init__(self, module: str, timeout_s: float, memory_bytes: int = 8 * 1024**3) -> None:
        self.module, self.timeout_s, self.memory_bytes = module, timeout_s, memory_bytes
        self.local = threading.local()
        self.all: list[subprocess.Popen] = []
        self.lock = threading.Lock()

    def _start(self) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-m", self.module, "--serve"], cwd=ROOT, env=trusted_env(),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                preexec_fn=memory_limit(self.memory_bytes), start_new_session=True)
        with self.lock:
            self.all.append(proc)
        return proc

    def _kill(self, proc: subprocess.Popen) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.wait()
        self.local.proc = None

    def ask(self, job: dict, timeout_s: float | None = None) -> dict:
        proc = getattr(self.local, "proc", None)
        if proc is None or proc.poll() is not None:
            proc = self.local.proc = self._start()
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        try:
            proc.stdin.write((json.dumps(job) + "\n").encode())
            proc.stdin.flush()
        except OSError:
            self._kill(proc)
            return {"ok": False, "error": "the helper process stopped"}
        fd, buf = proc.stdout.fileno(), bytearray()
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            ready = select.select([fd], [], [], max(0.0, left))[0] if left > 0 else []
            if not ready:
                self._kill(proc)
                return {"ok": False, "error": f"timed out after {timeout_s or self.timeout_s:g} s", "timeout": True}
            chunk = os.read(fd, 1 << 16)
            if not chunk or len(buf) + len(chunk) > MAX_ANSWER_BYTES:
                self._kill(proc)
                return {"ok": False, "error": "the helper process stopped (out of memory?)" if not chunk
                        else "the helper's answer was too large"}
            buf += chunk
        try:
            answer = json.loads(buf.split(b"\n", 1)[0])
        except (ValueError, RecursionError):
            self._kill(proc)
            return {"ok": False, "error": "the helper's answer could not be read"}
        return answer if isinstance(answer, dict) else {"ok": False, "error": "the helper's answer could not be read"}

    def close(self) -> None:
        for proc in self.all:
            try:
                proc.stdin.close()
                proc.wait(timeout=10)
            except Exception:  # noqa: BLE001
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    pass
