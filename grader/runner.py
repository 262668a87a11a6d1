"""Run one submission's code in a sandboxed kernel, from outside the sandbox.

    python -m grader.runner JOB.json RESULT.json

The runner is trusted code running as the grader's user; only the kernel (and
what the student's code starts) is inside the sandbox (grader/sandbox.py). The
kernel cannot signal the runner, read its memory or touch its files: it talks to
it only through the Jupyter protocol, over sockets the runner reaches through
``/proc/<pid>/root``.

The job lists the code to run, in notebook order (grader/plan.py): the
student's cells and the release's own cells as they are, and for each test only
its run part. Around a test's run part the runner asks ``utils.grading`` to
record what the student's code returned (``_begin_test``) and to hand it over
(``_end_test``, a display message of its own type). The runner keeps, for each
test the job names, the one report of that test's own ``_end_test`` call,
checks its size, depth and types, and writes it to RESULT (a folder the sandbox
cannot see), after every test, so a crash later keeps what came before.

Each cell has a hard deadline: its timeout, then an interrupt, then ``INTERRUPT_GRACE_S``;
a kernel still busy then (it ignores SIGINT, say) is killed with everything in its
sandbox (SIGKILL from outside), and the notebook stops there. So a notebook costs at
most one cell timeout and the grace past its last useful cell, and never more than
its budget and the grace. A message from the kernel that the runner cannot read (not
JSON, nested too deep, numbers too long, content that is not an object) is the
submission's doing: the notebook stops there with the state "unreadable output".

RESULT: ``{"state": "finished" | "budget" | "kernel died" | "interrupt ignored" | "unreadable output: ..."
| "runner error: ...",
"cells_run": n, "timeouts": n, "tests": {grade_id: {"entries": [...], "error": ename | None,
"problem": text | None}}, "log": kernel start-up log tail, "cgroup": "v2" | "v1" | None,
"limits_hit": {"memory": bool, "processes": bool}}``.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

# jsonschema (under nbformat) builds a grammar for IRI formats on import: about 1.5 s of
# every runner's start-up, for a format no notebook schema uses.
sys.modules.setdefault("rfc3987_syntax", None)

import nbformat  # noqa: E402
from jupyter_client.kernelspec import KernelSpec  # noqa: E402
from jupyter_client.manager import AsyncKernelManager  # noqa: E402
from nbclient.exceptions import CellTimeoutError, DeadKernelError  # noqa: E402

from grader import sandbox  # noqa: E402
from grader.steady import SteadyClient  # noqa: E402

REPORT_MIME = "application/vnd.attention-course.report+json"
INSIDE_CONNECTION = "/tmp/.kernel/connection.json"
INSIDE_IP = "/tmp/.k"
GRADING = "__import__('utils.grading', fromlist=['grading'])"
MAX_DEPTH = 24
MAX_STRING = 100_000
INTERRUPT_GRACE_S = 5.0  # how long a kernel has to stop after an interrupt before its sandbox is killed


class KernelMessageError(Exception):
    """The kernel sent a message the runner cannot read: the submission's doing, never the grader's."""


def checked(get_msg):
    """A channel's ``get_msg`` that turns a message the runner cannot read into ``KernelMessageError``."""
    async def get_checked(*args, **kwargs):
        try:
            msg = await get_msg(*args, **kwargs)
        except (ValueError, RecursionError, TypeError, KeyError, UnicodeError, OverflowError, MemoryError) as exc:
            raise KernelMessageError(type(exc).__name__) from None
        if not (isinstance(msg, dict) and isinstance(msg.get("header"), dict)
                and isinstance(msg.get("parent_header"), dict) and isinstance(msg.get("content"), dict)
                and isinstance(msg.get("msg_type"), str) and isinstance(msg.get("metadata", {}), dict)):
            raise KernelMessageError("a message that is not a Jupyter message")
        return msg

    get_checked.sliced = getattr(get_msg, "sliced", False)
    return get_checked


class SandboxedKernelManager(AsyncKernelManager):
    """A kernel manager whose kernel runs in the grading sandbox (ipc sockets, message interrupts)."""

    def __init__(self, lib: Path, limits: sandbox.Limits, uid: int | None,
                 cgroup: sandbox.Cgroup | None = None, **kwargs) -> None:
        super().__init__(kernel_name="python3", transport="ipc", ip=INSIDE_IP, **kwargs)
        self.sandbox_lib, self.sandbox_limits, self.sandbox_uid = lib, limits, uid
        self.sandbox_cgroup = cgroup

    @property
    def kernel_spec(self) -> KernelSpec:  # the sandbox's own: this Python, interrupts by message
        return KernelSpec(argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
                                "--InteractiveShell.xmode=Minimal"],
                          display_name="Python 3 (grading sandbox)", language="python", interrupt_mode="message")

    def format_kernel_cmd(self, extra_arguments=None) -> list[str]:
        host = os.path.realpath(self.connection_file)
        os.chmod(host, 0o644)  # the sandbox's uid reads it (its folder is the runner's own)
        argv = [INSIDE_CONNECTION if part == host else part for part in super().format_kernel_cmd(extra_arguments)]
        return sandbox.command(argv, self.sandbox_lib, self.sandbox_limits, self.sandbox_uid,
                               files={INSIDE_CONNECTION: Path(host)}, cgroup=self.sandbox_cgroup)

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw) -> None:
        await super()._async_launch_kernel(kernel_cmd, **kw)
        root = sandbox.namespace_root(self.provisioner.process.pid)
        if root is None:
            raise RuntimeError("the sandbox did not start")
        self.ip = f"/proc/{root}/root{INSIDE_IP}"  # the kernel's sockets, seen from outside
        self.sandbox_root = root

    def end_sandbox(self) -> None:
        """Kill the PID namespace's first process, which takes every process in the sandbox with it.
        (Shutting the kernel down ends bubblewrap's outer process only: the kernel, whose user the
        sandbox changed, would otherwise live on until the runner exits.)"""
        root = getattr(self, "sandbox_root", None)
        if root is not None:
            try:
                os.kill(root, signal.SIGKILL)
            except OSError:
                pass
            self.sandbox_root = None
        if self.sandbox_cgroup is not None:  # and anything that left the namespace's process tree
            self.sandbox_cgroup.kill()


class UnsafeKernelManager(AsyncKernelManager):
    """--unsafe: no sandbox (trusted submissions only); the assignment's view of utils all the same."""

    def __init__(self, lib: Path, **kwargs) -> None:
        super().__init__(kernel_name="python3", **kwargs)
        self.sandbox_lib = lib

    @property
    def kernel_spec(self) -> KernelSpec:
        return KernelSpec(argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
                                "--InteractiveShell.xmode=Minimal"],
                          display_name="Python 3 (grading, unsafe)", language="python",
                          env=sandbox.kernel_env({"PYTHONPATH": str(self.sandbox_lib), "HOME": os.environ.get("HOME", "/tmp"),
                                                  "PATH": os.environ.get("PATH", "")}))


class CappedClient(SteadyClient):
    """nbclient with a cap on what one cell's outputs may hold (a flood costs the student, not the runner),
    reading the kernel's messages through ``checked``."""

    cap = 200_000
    used = 0

    async def async_start_new_kernel_client(self):
        kc = await super().async_start_new_kernel_client()
        for channel in (kc.shell_channel, kc.iopub_channel):
            channel.get_msg = checked(channel.get_msg)
        return kc

    def output(self, outs, msg, display_id, cell_index):
        content = msg.get("content", {})
        size = len(json.dumps(content, default=str)) if msg.get("msg_type") != "status" else 0
        if self.used + size > self.cap:
            if not self.used > self.cap:  # say it once
                outs.append(nbformat.v4.new_output("stream", name="stderr", text="[output cut: too much output]\n"))
            self.used = self.cap + 1
            return None
        self.used += size
        return super().output(outs, msg, display_id, cell_index)


def valid(value, depth: int = 0) -> bool:
    """Plain JSON data within the depth and size the decider accepts."""
    if depth > MAX_DEPTH:
        return False
    if value is None or isinstance(value, (bool, int, float)):
        return True
    if isinstance(value, str):
        return len(value) <= MAX_STRING
    if isinstance(value, list):
        return all(valid(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and valid(v, depth + 1) for k, v in value.items())
    return False


def take_report(outputs: list, gid: str, room: int) -> tuple[list | None, str | None]:
    """The entries of the one report a test's ``_end_test`` published, or (None, why not)."""
    reports = [o["data"][REPORT_MIME] for o in outputs
               if o.get("output_type") in ("display_data", "execute_result") and REPORT_MIME in o.get("data", {})]
    if len(reports) != 1:
        return None, ("your notebook sent no results for this test" if not reports
                      else "your notebook sent this test's results more than once")
    report = reports[0]
    if not isinstance(report, dict) or report.get("test") != gid or not isinstance(report.get("entries"), list):
        return None, "your notebook's results for this test were not the ones the grader asked for"
    entries = report["entries"]
    if len(json.dumps(entries)) > room:
        return None, "your notebook's results for this test are larger than the grader reads"
    if not all(isinstance(e, dict) and e.get("kind") in ("return", "raise", "observe") and valid(e.get("value"))
               for e in entries):
        return None, "your notebook's results for this test could not be read"
    return entries, None


def _write(path: Path, result: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(result))
    os.replace(tmp, path)


async def run(job: dict, out: Path) -> dict:
    limits = sandbox.Limits(**job["limits"])
    lib = Path(job["lib"])
    result = {"state": "starting", "cells_run": 0, "timeouts": 0, "tests": {}, "log": ""}
    room = limits.report_bytes
    conn_dir = Path(tempfile.mkdtemp(prefix="grader-kernel-"))  # the runner's own (0700)
    log_path = conn_dir / "kernel.log"
    cgroup = None if job.get("unsafe") else sandbox.Cgroup.create(limits)
    result["cgroup"] = cgroup.kind if cgroup is not None else None
    with sandbox.uid_lease() as uid, log_path.open("wb") as log:
        if job.get("unsafe"):
            km = UnsafeKernelManager(lib, connection_file=str(conn_dir / "kernel.json"))
        else:
            km = SandboxedKernelManager(lib, limits, uid, cgroup, connection_file=str(conn_dir / "kernel.json"))
        nb = nbformat.v4.new_notebook()
        client = CappedClient(nb, km=km, timeout=int(limits.cell_timeout_s), allow_errors=True,
                              interrupt_on_timeout=True, record_timing=False, shutdown_kernel="immediate",
                              startup_timeout=120, iopub_timeout=10)
        per_cell = max(2_000, limits.max_output_bytes // max(1, len(job["cells"])))
        start = time.monotonic()

        class InterruptIgnored(Exception):
            pass

        def stop_sandbox() -> None:
            if isinstance(km, SandboxedKernelManager):
                km.end_sandbox()
            elif km.has_kernel and km.provisioner is not None and km.provisioner.process is not None:
                with contextlib.suppress(OSError):
                    os.killpg(km.provisioner.process.pid, signal.SIGKILL)

        async def cancel(task) -> None:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

        async def execute(code: str, cap: int) -> nbformat.NotebookNode:
            cell = nbformat.v4.new_code_cell(code)
            nb.cells.append(cell)
            left = limits.budget_s - (time.monotonic() - start)
            client.timeout = max(1, int(min(limits.cell_timeout_s, left)))
            client.cap, client.used = cap, 0
            began = time.monotonic()
            task = asyncio.ensure_future(client.async_execute_cell(cell, len(nb.cells) - 1, store_history=False))
            try:
                done, _ = await asyncio.wait({task}, timeout=client.timeout + INTERRUPT_GRACE_S)
                if not done:  # interrupted at its timeout and still busy: the kernel does not stop
                    result["timeouts"] += 1
                    stop_sandbox()
                    await cancel(task)
                    raise InterruptIgnored
                task.result()
            except CellTimeoutError:
                result["timeouts"] += 1
                cell.setdefault("outputs", []).append(nbformat.v4.new_output(
                    "error", ename="CellTimeoutError", evalue="the cell ran past its time limit", traceback=[]))
            else:
                interrupted = any(o.get("ename") == "KeyboardInterrupt" for o in cell.outputs
                                  if o.get("output_type") == "error")
                if interrupted and client.timeout <= time.monotonic() - began + 1:
                    result["timeouts"] += 1
            return cell

        try:
            extra = {"cwd": str(conn_dir)} if job.get("unsafe") else {}  # never the course folder
            async with client.async_setup_kernel(stdout=log, stderr=log, **extra):
                result["state"] = "running"
                for item in job["cells"]:
                    if limits.budget_s - (time.monotonic() - start) <= 1:
                        result["state"] = "budget"
                        break
                    gid = item.get("test")
                    if gid is None:
                        await execute(item["code"], per_cell)
                    else:
                        await execute(f"{GRADING}._begin_test({gid!r})", 2_000)
                        cell = await execute(item["code"], per_cell)
                        errors = [o.get("ename", "Error") for o in cell.outputs if o.get("output_type") == "error"]
                        end = await execute(f"{GRADING}._end_test()", room + 10_000)
                        entries, problem = take_report(end.outputs, gid, room)
                        if entries is not None:
                            room -= len(json.dumps(entries))
                        result["tests"][gid] = {"entries": entries or [], "error": errors[0] if errors else None,
                                                "problem": problem}
                    result["cells_run"] += 1
                    _write(out, result)
                    if time.monotonic() - start >= limits.budget_s - 1:
                        result["state"] = "budget"
                        break
                else:
                    result["state"] = "finished"
        except InterruptIgnored:
            result["state"] = "interrupt ignored"
        except DeadKernelError:
            result["state"] = "kernel died"
        except KernelMessageError as exc:
            result["state"] = f"unreadable output: {exc}"
        except (RecursionError, ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
            # raised while nbclient handled the kernel's messages during a cell: what the kernel sent
            result["state"] = (f"unreadable output: {type(exc).__name__}" if result["state"] == "running"
                               else f"runner error: {type(exc).__name__}")
        except Exception as exc:  # noqa: BLE001 - reported to the grader as data
            if result["state"] == "starting":
                result["state"] = f"runner error: kernel did not start ({type(exc).__name__})"
            else:
                result["state"] = f"runner error: {type(exc).__name__}"
        finally:
            if isinstance(km, SandboxedKernelManager):
                km.end_sandbox()
            if cgroup is not None:
                result["limits_hit"] = cgroup.hit()
                cgroup.remove()
    try:
        with log_path.open("rb") as fh:
            fh.seek(max(0, log_path.stat().st_size - 3000))
            result["log"] = fh.read().decode("utf-8", "replace")
    except OSError:
        pass
    shutil.rmtree(conn_dir, ignore_errors=True)
    _write(out, result)
    return result


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if len(args) != 2:
        print(__doc__)
        return 2
    job = json.loads(Path(args[0]).read_text())
    asyncio.run(run(job, Path(args[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
