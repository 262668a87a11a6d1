"""Grading beyond one machine: each student's grading is a task on a Dask distributed scheduler.

    make grade ASSIGNMENT=<id> SCHEDULER=tls://scheduler-host:8786 TLS=dask-tls
    (python -m grader <id> --scheduler tls://scheduler-host:8786 --tls-ca-file dask-tls/ca.pem
                           --tls-cert dask-tls/cert.pem --tls-key dask-tls/key.pem)

A worker runs what ``make grade`` runs for one student on one machine (the
sandbox, the runner outside it, the trusted decider) and returns the result
and the notebook to record; the machine that asked records everything (the
gradebook, the CSV, the pages), so the results are the same as a local run's.
Each worker needs the course's environment, bubblewrap, and the course folder
at the same path as on the machine that asks (a shared file system). Workers
run as root (each sandbox gets a uid of its own, which only root can lease),
so whoever can send a task to the scheduler or a worker runs code as root on
every worker: off one machine the cluster speaks TLS with certificates only
the instructors hold (``python -m grader.distributed --certificates dask-tls``,
``make dask-certs``), and the grader refuses a plain ``tcp://`` scheduler that
is not on this machine's loopback (``--insecure-scheduler`` to insist):

    .venv/bin/dask scheduler --host 127.0.0.1 --protocol tls --tls-ca-file dask-tls/ca.pem \\
        --tls-cert dask-tls/cert.pem --tls-key dask-tls/key.pem
    .venv/bin/dask worker tls://127.0.0.1:8786 --nworkers 2 --nthreads 1 --tls-ca-file dask-tls/ca.pem \\
        --tls-cert dask-tls/cert.pem --tls-key dask-tls/key.pem

Neither the scheduler nor the workers need the grader on their path: every
task carries the grader's folder (grader/_on_worker.py, sent by value) and
imports the grader from there, and a check on every worker before the first
task says which worker cannot see it.

A task whose worker dies is run again on another worker by the scheduler; a
task that fails (an exception in the grader on that worker) is retried once,
then that student, and only that student, gets a row saying so.
"""
from __future__ import annotations

import argparse
import atexit
import ipaddress
import os
import pickle
import shutil
import socket
import sys
import tempfile
import threading
import uuid
from pathlib import Path

import nbformat

from grader import _on_worker

ROOT = Path(__file__).resolve().parent.parent  # the grader's folder, the same path on every worker
_VIEWS: dict[tuple, tuple] = {}
_LOCK = threading.Lock()


def _prepared(course: str, assignment: str, unsafe: bool):
    """Per worker process, once per assignment: the notebooks, the assignment's view of utils (built
    here, from the course folder), a sandbox check and the decider's processes."""
    from grader import reference, sandbox
    from grader.workers import Workers

    key = (course, assignment, unsafe)
    with _LOCK:
        if key not in _VIEWS:
            root = Path(course)
            source = nbformat.read(root / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
            release = nbformat.read(root / "assignments" / assignment / f"{assignment}.ipynb", as_version=4)
            workroot = Path(tempfile.mkdtemp(prefix="course-view-"))
            atexit.register(shutil.rmtree, workroot, True)
            lib = reference.view(workroot / "lib", reference.policy_of(source, assignment))  # this worker's utils
            workroot.chmod(0o711)
            if not unsafe:
                reason = sandbox.check(lib)
                if reason:
                    raise RuntimeError(f"this worker cannot grade safely: {reason}")
            from grader.grade import REPLAY_TIMEOUT_S

            _VIEWS[key] = (release, source, workroot, lib, Workers("grader.replay", REPLAY_TIMEOUT_S))
        return _VIEWS[key]


def grade_remote(course: str, assignment: str, limits: dict, unsafe: bool, student: str) -> tuple:
    """One student's grading on a worker: (Result, the notebook to record as JSON text, or None)."""
    import time

    from grader import sandbox
    from grader.grade import Settings, grade_one

    release, source, workroot, lib, replays = _prepared(course, assignment, unsafe)
    settings = Settings(Path(course), assignment, sandbox.Limits(**limits), unsafe, workroot, lib)
    began = time.monotonic()
    result, nb = grade_one(student, settings, release, source, replays, threading.get_ident() % 1000)
    result.seconds = round(time.monotonic() - began, 1)
    return result, (nbformat.writes(nb) if nb is not None else None)


def remote_call(name: str, *args) -> bytes:
    """``grader.distributed.<name>(*args)`` on a worker, as a payload for ``pickle.loads`` (see
    grader/_on_worker.py): neither the scheduler nor the worker needs the grader on its path."""
    import cloudpickle

    cloudpickle.register_pickle_by_value(_on_worker)
    return cloudpickle.dumps(_on_worker.Call(str(ROOT), "grader.distributed", name, args))


def grade_students(scheduler, settings, students: list[str], progress: bool) -> dict:
    """Every student's grading as a task on the scheduler at ``scheduler`` (an address, or a
    distributed Client); their outcomes, keyed by student."""
    from distributed import Client, as_completed

    from grader.grade import Result, progress_bar

    client = scheduler if isinstance(scheduler, Client) else connect(scheduler)
    run = uuid.uuid4().hex[:8]
    outcomes = {}
    bar = progress_bar(len(students), progress, settings.assignment)
    try:
        check_workers(client)
        futures = {client.submit(pickle.loads, remote_call("grade_remote", str(settings.course), settings.assignment,
                                                           settings.limits.__dict__, settings.unsafe, student),
                                 key=f"grade-{settings.assignment}-{run}-{i}", pure=False, retries=1): student
                   for i, student in enumerate(students)}
        for future in as_completed(futures):
            student = futures[future]
            try:
                result, text = future.result()
                outcomes[student] = (result, nbformat.reads(text, as_version=4) if text else None)
            except Exception as exc:  # noqa: BLE001 - one student's task, not the run
                outcomes[student] = (Result(student, status="failed", note=(
                    f"the grader failed on this notebook on a worker ({type(exc).__name__}: {str(exc)[:200]}); "
                    "grade it again")), None)
            bar.update(1)
    finally:
        bar.close()
        if client is not scheduler:
            client.close()
    return outcomes


def scheduler_info(address: str) -> dict:
    """Workers and threads a scheduler has (for the log and the benchmark)."""
    with connect(address) as client:
        workers = client.scheduler_info()["workers"]
        return {"workers": len(workers), "threads": sum(w["nthreads"] for w in workers.values())}


# --- how the grader connects ------------------------------------------------------------------------

_TLS: dict[str, str] = {}  # --tls-ca-file, --tls-cert, --tls-key of this run (configure)
_INSECURE = [False]


def configure(address: str | None = None, tls_ca_file: str | None = None, tls_cert: str | None = None,
              tls_key: str | None = None, insecure: bool = False) -> None:
    """The grader's own TLS files (else Dask's configuration: distributed.comm.tls.*), and whether a plain
    tcp:// scheduler off this machine is accepted; ``address`` is checked against them now, before any
    grading (SystemExit saying why, if it cannot be used)."""
    given = {"tls_ca_file": tls_ca_file, "tls_client_cert": tls_cert, "tls_client_key": tls_key}
    _TLS.clear()
    _TLS.update({k: str(Path(v).resolve()) for k, v in given.items() if v})
    if _TLS and len(_TLS) != 3:
        raise SystemExit("--tls-ca-file, --tls-cert and --tls-key go together (make dask-certs writes all three)")
    for name, path in _TLS.items():
        if not Path(path).is_file():
            raise SystemExit(f"no file {path} (--{name.replace('_client', '').replace('_', '-')})")
    _INSECURE[0] = insecure
    if address:
        from distributed.comm import parse_address

        refuse_plain(address, "at")
        _security(parse_address(address)[0])


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine's loopback (127.0.0.0/8, ::1)."""
    host = host.strip("[]")
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        found = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    return bool(found) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in found)


def _security(scheme: str):
    from distributed.security import Security

    security = Security(require_encryption=True, **_TLS) if _TLS else Security()
    if scheme == "tls" and not (security.tls_ca_file and security.tls_client_cert and security.tls_client_key):
        raise SystemExit("a tls:// scheduler needs the cluster's certificates: --tls-ca-file, --tls-cert and "
                         "--tls-key (make grade ... TLS=dask-tls; make dask-certs writes them), or Dask's "
                         "configuration (distributed.comm.tls.ca-file, .client.cert, .client.key)")
    return security


def refuse_plain(address: str, where: str) -> None:
    from distributed.comm import parse_address
    from distributed.comm.addressing import parse_host_port

    scheme, location = parse_address(address)
    if scheme in ("tls", "inproc") or _INSECURE[0]:
        return
    host = parse_host_port(location)[0] if location else ""
    if not is_loopback(host):
        raise SystemExit(
            f"refusing the scheduler {where} {address}: plain {scheme}:// off this machine's loopback has no "
            "encryption and no authentication, and Dask's workers run as root, so whoever reaches that port "
            "runs code as root on every worker. Start the cluster with TLS (see README: Grading on a Dask "
            "cluster; make dask-certs) and pass --tls-ca-file/--tls-cert/--tls-key (make grade ... TLS=dask-tls), "
            "or bind it to 127.0.0.1; --insecure-scheduler grades there anyway, on a network you trust")


def connect(address: str):
    """A distributed Client for ``address``: TLS with the cluster's certificates for tls://, and a plain
    scheduler only on this machine's loopback (see ``refuse_plain``)."""
    from distributed import Client
    from distributed.comm import parse_address

    scheme = parse_address(address)[0]
    refuse_plain(address, "at")
    client = Client(address, timeout=60, security=_security(scheme))
    try:
        refuse_plain(client.scheduler_info()["address"], "listening at")  # e.g. a 0.0.0.0 scheduler reached on 127.0.0.1
    except BaseException:
        client.close()
        raise
    return client


def check_workers(client) -> None:
    """Every worker can import this grader from the shared course folder (else: which, and why)."""
    import cloudpickle

    cloudpickle.register_pickle_by_value(_on_worker)  # the check travels by value too
    problems = {w: why for w, why in client.run(_on_worker.check, str(ROOT)).items() if why}
    if problems:
        raise SystemExit("these Dask workers cannot grade:\n" + "\n".join(f"  {w}: {why}" for w, why in problems.items()))


def make_certificates(folder: Path) -> list[Path]:
    """A key and a self-signed certificate (its own CA) for the scheduler, the workers and the grader, as
    distributed's Security.temporary makes them, written to ``folder`` (key readable by its owner only)."""
    from distributed.security import Security

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    temporary = Security.temporary()
    written = []
    for name, text, mode in (("ca.pem", temporary.tls_ca_file, 0o644), ("cert.pem", temporary.tls_client_cert, 0o644),
                             ("key.pem", temporary.tls_client_key, 0o600)):
        path = folder / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.chmod(path, mode)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--certificates", type=Path, metavar="FOLDER", required=True,
                        help="write the cluster's TLS files there: ca.pem, cert.pem, key.pem (valid a year)")
    args = parser.parse_args(argv)
    for path in make_certificates(args.certificates):
        print(path)
    print("Whoever holds key.pem can run code as root on the workers: keep the folder to the instructors.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
