"""The course's submission desk: takes each submission out of its student's hands and records when.

nbgrader's submit runs in the student's own process: it writes the submission, its
``timestamp.txt`` included, as the student, who owns it afterwards and could rewrite the time or
the notebook until the instructor collects. And it names the submission after whatever student id
it is given. This desk closes both:

* A student's submit (``PrivateSubmit``, deploy/private_exchange.py) writes into the exchange's
  ``inbound/`` as today, then leaves a ``.ready`` mark in its folder and waits.
* The desk, a process the student does not control (deploy/jupyterhub_config.py runs it as a
  JupyterHub service, as the exchange's owner, the instructor), sees the mark, checks that the
  folder was created by the student it is named after (its owner: a user cannot create a file
  owned by someone else), copies the student's own regular files into ``sealed/``, which students
  cannot read or write, with ``timestamp.txt`` replaced by the desk's own clock, taken after the
  last byte was read, and a record of each file's SHA-256 (``.seal.json``); then it removes the
  student's folder from ``inbound/``.
* ``SealedCollect`` (deploy/private_exchange.py) collects from ``sealed/`` only, checks every file
  against its record, and reports what was refused or left unsealed in ``inbound/``.

So the late penalty reads a time the desk wrote, a submission under another student's name is
refused, and nothing can change a sealed submission without the record saying so. Files are read
through directory descriptors without following links, and only files the student owns, so a
link to another file cannot make the desk copy what the student could not read.

    python deploy/seal_submissions.py EXCHANGE_ROOT COURSE_ID [--interval 0.5] [--once]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import pwd
import re
import secrets
import shutil
import stat
import sys
import time
from datetime import datetime, timezone

READY = ".ready"  # left by PrivateSubmit when the submission is complete
RECORD = ".seal.json"  # written by the desk inside each sealed submission
# nbgrader's submission names: student+assignment+timestamp+random
NAME = re.compile(r"^(?P<student>[^+/]+)\+(?P<assignment>[^+/]+)\+(?P<stamp>[^+/]+)\+(?P<random>[^+/]+)$")
FILE_MODE, DIR_MODE = 0o640, 0o2750
MAX_BYTES = 200 * 1024 * 1024  # per submission
MAX_FILES = 2000
MAX_DEPTH = 16  # folders inside a submission


class Refused(Exception):
    """A submission the desk will not seal, with the reason."""


def nbgrader_time(t: datetime) -> str:
    """The time as nbgrader writes it in ``timestamp.txt`` and in submission names."""
    return t.strftime("%Y-%m-%d %H:%M:%S.%f %Z")


def _read_tree(dir_fd: int, uid: int, prefix: str, files: dict[str, bytes], total: list[int]) -> None:
    """Every regular file under ``dir_fd`` that ``uid`` owns, by relative path; links are never followed."""
    for name in sorted(os.listdir(dir_fd)):
        rel = f"{prefix}{name}"
        if rel == READY:
            continue  # the student's mark, not part of the submission
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if st.st_uid != uid:
            raise Refused(f"{rel} belongs to uid {st.st_uid}, not to the student")
        if stat.S_ISDIR(st.st_mode):
            if rel.count("/") >= MAX_DEPTH:
                raise Refused(f"folders nested deeper than {MAX_DEPTH}")
            fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
            try:
                _read_tree(fd, uid, rel + "/", files, total)
            finally:
                os.close(fd)
        elif stat.S_ISREG(st.st_mode):
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
            try:
                st = os.fstat(fd)  # the file opened, not the name looked at before
                if not stat.S_ISREG(st.st_mode) or st.st_uid != uid:
                    raise Refused(f"{rel} changed while it was read")
                chunks, size = [], 0
                while chunk := os.read(fd, 1 << 20):
                    chunks.append(chunk)
                    size += len(chunk)
                    if total[0] + size > MAX_BYTES:
                        raise Refused(f"larger than {MAX_BYTES // 2**20} MiB")
            finally:
                os.close(fd)
            total[0] += size
            files[rel] = b"".join(chunks)
            if len(files) > MAX_FILES:
                raise Refused(f"more than {MAX_FILES} files")
        else:
            raise Refused(f"{rel} is not a regular file or folder")


def _write_sealed(sealed: str, name: str, files: dict[str, bytes], record: dict) -> str:
    """The files in a fresh folder in ``sealed``, renamed into place at once; returns its path."""
    tmp = os.path.join(sealed, f".sealing-{secrets.token_hex(6)}")
    os.mkdir(tmp, DIR_MODE)
    try:
        for rel, data in files.items():
            path = os.path.join(tmp, rel)
            os.makedirs(os.path.dirname(path), mode=DIR_MODE, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        with open(os.path.join(tmp, RECORD), "w") as fh:
            json.dump(record, fh, indent=1)
        os.chmod(os.path.join(tmp, RECORD), FILE_MODE)
        for dirpath, dirnames, _ in os.walk(tmp):
            for d in dirnames:
                os.chmod(os.path.join(dirpath, d), DIR_MODE)
        os.chmod(tmp, DIR_MODE)
        dest = os.path.join(sealed, name)
        os.rename(tmp, dest)
        return dest
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def seal_one(inbound: str, sealed: str, name: str, now=lambda: datetime.now(timezone.utc)) -> str | None:
    """Seal the submission ``inbound/name`` if it is complete; its sealed path, None if not ready yet.

    Raises Refused when the submission is not its named student's or cannot be taken."""
    m = NAME.match(name)
    if not m:
        raise Refused("not a submission name (student+assignment+time+random)")
    path = os.path.join(inbound, name)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise Refused("not a folder")
    try:
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        owner = f"uid {st.st_uid}"
    if owner != m["student"]:
        raise Refused(f"submitted under the id {m['student']!r} by {owner!r}: a submission is accepted "
                      "only under its author's own id")
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        if os.fstat(fd).st_uid != st.st_uid:
            raise Refused("replaced while it was read")
        try:
            os.stat(READY, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return None  # the student's submit is still writing it
        files: dict[str, bytes] = {}
        _read_tree(fd, st.st_uid, "", files, [0])
    finally:
        os.close(fd)
    # The time the submission was received: after its last byte was read, so nothing in it is later.
    t = now()
    claimed = files.get("timestamp.txt", b"").decode("utf-8", "replace")[:100]
    files["timestamp.txt"] = nbgrader_time(t).encode()
    record = {"student": m["student"], "assignment": m["assignment"], "received": nbgrader_time(t),
              "claimed": claimed, "inbound_name": name, "uid": st.st_uid,
              "sha256": {rel: digest(data) for rel, data in sorted(files.items())}}
    return _write_sealed(sealed, f"{m['student']}+{m['assignment']}+{nbgrader_time(t)}+{m['random']}", files, record)


def sealed_names(sealed: str) -> set[str]:
    """The inbound names already sealed (their records say), so a restart seals nothing twice."""
    done = set()
    for entry in os.scandir(sealed):
        try:
            with open(os.path.join(entry.path, RECORD)) as fh:
                done.add(json.load(fh)["inbound_name"])
        except (OSError, ValueError, KeyError):
            pass
    return done


def sweep(inbound: str, sealed: str, done: set[str], refused: dict[str, str], log=print) -> int:
    """One pass over ``inbound``: seal what is ready; the number sealed."""
    count = 0
    for name in sorted(os.listdir(inbound)):
        if name.startswith(".") or name in refused:
            continue
        path = os.path.join(inbound, name)
        if name not in done:
            try:
                dest = seal_one(inbound, sealed, name)
            except FileNotFoundError:
                continue  # removed meanwhile
            except (Refused, OSError) as e:
                refused[name] = str(e)
                log(f"refused {name!r}: {e}")
                continue
            except Exception as e:  # noqa: BLE001 - one odd submission must not stop the desk for everyone
                refused[name] = f"{type(e).__name__}: {e}"
                log(f"refused {name!r}: {refused[name]}")
                continue
            if dest is None:
                continue
            done.add(name)
            count += 1
            log(f"sealed {name!r} as {os.path.basename(dest)!r}")
        # Out of the student's hands: the student's copy goes (the inbound folder is the desk
        # owner's, so the sticky bit lets it remove what students created in it).
        try:
            shutil.rmtree(path)
        except FileNotFoundError:
            pass
        except OSError as e:
            if name not in refused:
                refused[name] = f"sealed, but its inbound copy could not be removed: {e}"
                log(f"{name!r}: {refused[name]}")
    return count


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("exchange", help="nbgrader's exchange root")
    ap.add_argument("course_id")
    ap.add_argument("--interval", type=float, default=0.5, help="seconds between looks at inbound/")
    ap.add_argument("--once", action="store_true", help="one pass, then exit")
    args = ap.parse_args(argv)
    course = os.path.join(args.exchange, args.course_id)
    inbound, sealed = os.path.join(course, "inbound"), os.path.join(course, "sealed")
    for path in (inbound, sealed):
        if not os.path.isdir(path):
            sys.exit(f"seal_submissions.py: {path} is missing: run deploy/setup_exchange.sh")
    if os.stat(sealed).st_mode & 0o007:
        sys.exit(f"seal_submissions.py: {sealed} is open to every user: run deploy/setup_exchange.sh")
    done, refused = sealed_names(sealed), {}

    def log(message: str) -> None:
        print(f"[submission desk {datetime.now(timezone.utc):%H:%M:%S}] {message}", flush=True)

    log(f"watching {inbound} (as {pwd.getpwuid(os.geteuid()).pw_name}); sealed submissions go to {sealed}")
    try:
        while True:
            sweep(inbound, sealed, done, refused, log)
            if args.once:
                return 0
            time.sleep(args.interval)
    except KeyboardInterrupt:  # the hub stops its services with SIGINT
        log("stopped")
        return 0


if __name__ == "__main__":
    sys.exit(main())
