"""A student's submission that only the course's graders can read.

nbgrader's own ``ExchangeSubmit`` leaves each submission world-readable (files 0644, its folder
0777) and hides it from other students only by its name, which ends in a random string, inside an
inbound folder they cannot list (0733). Anyone who learns the name (a shell history, a log, a
screenshot) can read, change or delete it. ``PrivateSubmit`` closes that: the submission ends up
owned by the student and the graders' group, with no rights at all for other users.

How: deploy/setup_exchange.sh makes the inbound folder belong to the graders' group and
set-group-id, so whatever is created directly in it gets that group. nbgrader's copy loses it on
the way (``shutil.copytree`` copies the student's folder mode over the new one, which drops
set-group-id, and the files nbgrader writes afterwards get the student's own group), and a student
cannot give a file a group they are not in. So the submission is copied once more into a fresh
folder made in inbound (which has the graders' group from the start), and replaces the first.
"""
from __future__ import annotations

import os
import shutil
import stat

from nbgrader.exchange.default.submit import ExchangeSubmit

FILE_MODE = stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP  # 0640
DIR_MODE = stat.S_IRWXU | stat.S_IRWXG  # 0770: the graders may also clean up


class PrivateSubmit(ExchangeSubmit):
    """nbgrader's submit, then: the submission's group is the graders', other users get nothing."""

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
