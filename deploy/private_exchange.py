"""The course's nbgrader exchange on the hub: submissions private, under their author's id, sealed.

nbgrader's own ``ExchangeSubmit`` leaves each submission world-readable (files 0644, its folder
0777) and hides it from other students only by its name, which ends in a random string, inside an
inbound folder they cannot list (0733). It accepts any ``--student`` id, and it leaves the student
owning the submission and its ``timestamp.txt``: a student could read another's work by its name,
submit under another's id, and rewrite their own time or notebook until collection. Here:

``PrivateSubmit`` (students' servers, deploy/student/nbgrader_config.py)
    refuses a ``--student`` id other than the user's own; makes the submission the graders'
    group's, with no rights for other users (below); marks it ready for the course's submission
    desk (deploy/seal_submissions.py) and waits until the desk has taken it out of the student's
    hands, into ``sealed/``, with the desk's own time in ``timestamp.txt``.

``ReadableReleaseFeedback`` (instructors: the course's nbgrader_config.py)
    nbgrader's release_feedback copies each page with its mode, and the course folder's pages are
    closed to students (deploy/setup_course.sh): the released copy is made readable (0644), in an
    exchange folder nobody can list, under a name only its student can compute.

``SealedCollect`` (instructors: the course's nbgrader_config.py)
    collects from ``sealed/`` only, after checking each file against the SHA-256 the desk recorded;
    a submission changed since is refused and reported, and so is anything left in ``inbound/``
    (submitted under another student's id, or never marked ready). An exchange without
    ``sealed/`` (a course on one machine, no hub) is collected as nbgrader does.

The group: deploy/setup_exchange.sh makes the inbound folder belong to the graders' group and
set-group-id, so whatever is created directly in it gets that group. nbgrader's copy loses it on
the way (``shutil.copytree`` copies the student's folder mode over the new one, which drops
set-group-id, and the files nbgrader writes afterwards get the student's own group), and a student
cannot give a file a group they are not in. So the submission is copied once more into a fresh
folder made in inbound (which has the graders' group from the start), and replaces the first.
"""
from __future__ import annotations

import glob
import hashlib
import json
import os
import pwd
import shutil
import stat
import time

from nbgrader.exchange.default.collect import ExchangeCollect, groupby
from nbgrader.exchange.default.release_feedback import ExchangeReleaseFeedback
from nbgrader.exchange.default.submit import ExchangeSubmit
from nbgrader.api import Gradebook, MissingEntry
from traitlets import Float

FILE_MODE = stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP  # 0640
DIR_MODE = stat.S_IRWXU | stat.S_IRWXG  # 0770: the desk (a grader) reads and then removes it
READY, RECORD = ".ready", ".seal.json"  # as in deploy/seal_submissions.py


def _own_name() -> str:
    """The login name of the user this process runs as (not $USER or $JUPYTERHUB_USER: those are settable)."""
    return pwd.getpwuid(os.getuid()).pw_name


class PrivateSubmit(ExchangeSubmit):
    """nbgrader's submit under the user's own id, readable by the graders only, sealed by the desk."""

    # The Assignments tab waits for the submit: the desk takes a submission within a second.
    seal_timeout = Float(15.0, help="Seconds to wait for the course's submission desk to take the submission").tag(config=True)

    def init_dest(self):
        own, asked = _own_name(), self.coursedir.student_id
        if asked not in ("*", "", own):
            self.fail(f"You are logged in as {own!r}: a submission is accepted only under your own id, "
                      f"not {asked!r}. Submit without --student.")
        super().init_dest()

    def copy_files(self):
        super().copy_files()
        dest = os.path.join(self.inbound_path, self.assignment_filename)
        group = os.stat(self.inbound_path).st_gid
        fresh = dest + ".private"
        os.mkdir(fresh, 0o700)  # created in inbound: the graders' group, set-group-id
        shutil.copytree(dest, fresh, dirs_exist_ok=True, copy_function=shutil.copyfile)
        shutil.rmtree(dest)
        os.rename(fresh, dest)
        for dirpath, _, filenames in os.walk(dest, topdown=False):
            for name in filenames:
                os.chmod(os.path.join(dirpath, name), FILE_MODE)
            os.chmod(dirpath, DIR_MODE)
        wrong = [os.path.join(d, n) for d, ds, fs in os.walk(dest) for n in [".", *fs]
                 if os.stat(os.path.join(d, n)).st_gid != group]
        if wrong:
            self.fail(f"the submission's files {wrong} did not get the graders' group of {self.inbound_path}: "
                      "is it set-group-id? (run deploy/setup_exchange.sh)")
        sealed = os.path.join(os.path.dirname(self.inbound_path), "sealed")
        if not os.path.isdir(sealed):
            return  # an exchange without the desk (not the course's hub): nbgrader's behaviour
        # Complete: the desk may take it. Until it has, the submission is not the course's.
        # (An empty mark, left 0644: the folder lost set-group-id to chmod, so it gets the student's group.)
        fd = os.open(os.path.join(dest, READY), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.close(fd)
        deadline = time.monotonic() + self.seal_timeout
        while os.path.lexists(dest):
            if time.monotonic() > deadline:
                self.fail(f"The course's submission desk has not taken your submission in {self.seal_timeout:.0f} s; "
                          "it stays waiting in the exchange and counts from when the desk takes it. "
                          "Please tell your instructor (the hub's submission-desk service may be down).")
            time.sleep(0.2)
        self.log.info("The course's submission desk has received your submission; its time is the desk's.")


def verify_sealed(path: str) -> list[str]:
    """What is wrong with the sealed submission at ``path`` against the desk's record; [] when intact."""
    try:
        with open(os.path.join(path, RECORD)) as fh:
            record = json.load(fh)
        expected = dict(record["sha256"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        return [f"no readable record of the desk ({e})"]
    problems = []
    name = os.path.basename(path)
    if not name.startswith(f"{record.get('student')}+{record.get('assignment')}+"):
        problems.append(f"renamed: the desk sealed it as {record.get('student')}+{record.get('assignment')}")
    found = {}
    for dirpath, _, filenames in os.walk(path):
        for fn in filenames:
            full = os.path.join(dirpath, fn)
            rel = os.path.relpath(full, path)
            if rel == RECORD:
                continue
            with open(full, "rb") as fh:
                found[rel] = hashlib.sha256(fh.read()).hexdigest()
    for rel in sorted(set(expected) | set(found)):
        if rel not in found:
            problems.append(f"{rel} removed")
        elif rel not in expected:
            problems.append(f"{rel} added")
        elif found[rel] != expected[rel]:
            problems.append(f"{rel} changed")
    return problems


class SealedCollect(ExchangeCollect):
    """nbgrader's collect, from the submissions the course's desk sealed, each checked against its record."""

    def init_src(self):
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        sealed = os.path.join(self.course_path, "sealed")
        if not os.path.isdir(sealed):
            return super().init_src()  # no desk: a course on one machine
        inbound = os.path.join(self.course_path, "inbound")
        student_id = self.coursedir.student_id if self.coursedir.student_id else "*"
        aid = self.coursedir.assignment_id
        # Left in inbound: submitted under another's id, never marked ready, or the desk is down.
        for path in sorted(glob.glob(os.path.join(inbound, f"{student_id}+{aid}+*"))):
            name = os.path.basename(path)
            try:
                owner = pwd.getpwuid(os.lstat(path).st_uid).pw_name
            except (KeyError, OSError):
                owner = "an unknown user"
            if owner != name.split("+", 1)[0]:
                self.log.error(f"Refused: {name!r} was submitted by {owner!r} under the id "
                               f"{name.split('+', 1)[0]!r}: a submission counts only under its author's own id")
            else:
                self.log.warning(f"Not sealed, not collected: {name!r} is still in inbound/ "
                                 "(never marked ready, or the hub's submission-desk service is not running)")
        records = []
        for path in glob.glob(os.path.join(sealed, f"{student_id}+{aid}+*")):
            problems = verify_sealed(path)
            if problems:
                self.log.error(f"Refused: the sealed submission {os.path.basename(path)!r} was changed after the "
                               f"desk received it ({'; '.join(problems)})")
                continue
            records.append(self._path_to_record(path))
        self.inbound_path = sealed  # what copy_files reads from
        self.check_owner = False  # the desk owns sealed submissions; it checked their authors
        usergroups = groupby(records, lambda item: item["username"])
        duedate = None
        if self.before_duedate:
            with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
                try:
                    duedate = gb.find_assignment(aid).duedate
                except MissingEntry:
                    pass
        self.src_records = []
        for group in usergroups.values():
            ordered = self._sort_by_timestamp(group)
            on_time = [r for r in ordered if duedate is not None and r["timestamp"] <= duedate]
            self.src_records.append((on_time or ordered)[0])

    def do_copy(self, src, dest, log=None):
        super().do_copy(src, dest, log)
        record = os.path.join(dest, RECORD)
        if os.path.exists(record):
            os.remove(record)



class ReadableReleaseFeedback(ExchangeReleaseFeedback):
    """nbgrader's release_feedback, each released page readable by the student who can name it."""

    def copy_files(self):
        super().copy_files()
        for page in glob.glob(os.path.join(self.dest_path, "*.html")):
            if os.stat(page).st_uid == os.getuid():
                os.chmod(page, 0o644)
