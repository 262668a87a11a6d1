#!/usr/bin/env bash
# Close the course folder to everyone but its instructors and graders.
#   sudo deploy/setup_course.sh COURSE_DIR INSTRUCTOR GRADERS_GROUP
# e.g. sudo deploy/setup_course.sh /srv/attention-course teacher attention-graders
#
# The course folder holds what students must never read: solutions/ (hidden tests), the gradebook,
# submitted/ and autograded/ (every student's work), feedback/ (every student's page), grades/.
#   COURSE_DIR            2770 INSTRUCTOR:GRADERS  only the instructor and the graders' group enter it;
#                                                  set-group-id: what they create belongs to the group
#   everything inside     group GRADERS, g+rX, nothing for other users (o-rwx)
# Students never need it: their servers run from an environment outside it (make hub-env) and read
# only the exchange (deploy/setup_exchange.sh). Add a grader with `usermod -aG GRADERS name`.
# Run it again at any time (after a `git pull` or a grading run as root): it only sets owners and modes.
set -euo pipefail
if [ $# -ne 3 ]; then
  sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
course=$1 instructor=$2 graders=$3
if [ "$(id -u)" != 0 ]; then echo "setup_course.sh: run it as root (it sets owners)" >&2; exit 1; fi
test -d "$course" || { echo "setup_course.sh: $course is not a folder" >&2; exit 1; }
id "$instructor" >/dev/null
getent group "$graders" >/dev/null || groupadd "$graders"
id -nG "$instructor" | tr ' ' '\n' | grep -qx "$graders" || usermod -aG "$graders" "$instructor"
# Owners: the instructor's and the graders' (a venv inside, if any, is the course's tools: the
# instructors' own; the students' environment is elsewhere).
chown -R "$instructor:$graders" "$course"
chmod -R g+rX,o-rwx "$course"
find "$course" -type d -exec chmod g+s {} +
chmod 2770 "$course"
stat -c '%A %U:%G %n' "$course"
