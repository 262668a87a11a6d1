#!/usr/bin/env bash
# The class's nbgrader exchange, with permissions that keep each submission private and sealed.
#   sudo deploy/setup_exchange.sh EXCHANGE_ROOT COURSE_ID INSTRUCTOR GRADERS_GROUP
# e.g. sudo deploy/setup_exchange.sh /srv/nbgrader/exchange attention-course teacher attention-graders
#
#   EXCHANGE_ROOT                1777 root               anyone may create a course folder, nobody may remove another's
#   EXCHANGE_ROOT/COURSE_ID      0755 INSTRUCTOR:GRADERS
#     outbound/                  0755 INSTRUCTOR:GRADERS released assignments: every student reads them
#     inbound/                   3773 INSTRUCTOR:GRADERS students may enter and create, never list (o=-wx);
#                                                        set-group-id: a submission belongs to the graders' group;
#                                                        sticky: nobody removes or renames another's submission
#     sealed/                    2750 INSTRUCTOR:GRADERS submissions the course's desk took (deploy/seal_submissions.py,
#                                                        run as INSTRUCTOR by the hub): students cannot enter
#     feedback/                  2771 INSTRUCTOR:GRADERS a page is found by a hash of the submission's secret, never listed
# With deploy/private_exchange.py (students' nbgrader config) a submission waits in inbound/ as
# student:GRADERS, folders 0770 and files 0640 (no other student can read it, even knowing its name),
# until the desk copies it into sealed/ (INSTRUCTOR:GRADERS, folders 2750, files 0640, its own time
# in timestamp.txt) and removes it from inbound/.
# Run it again at any time: it only sets owners and modes.
set -euo pipefail
if [ $# -ne 4 ]; then
  sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
root=$1 course=$2 instructor=$3 graders=$4
if [ "$(id -u)" != 0 ]; then echo "setup_exchange.sh: run it as root (it sets owners)" >&2; exit 1; fi
id "$instructor" >/dev/null
getent group "$graders" >/dev/null || groupadd "$graders"
id -nG "$instructor" | tr ' ' '\n' | grep -qx "$graders" || usermod -aG "$graders" "$instructor"
install -d -m 1777 -o root -g root "$root"
for d in "$root/$course" "$root/$course/outbound" "$root/$course/inbound" "$root/$course/sealed" "$root/$course/feedback"; do
  install -d -o "$instructor" -g "$graders" "$d"
  chown "$instructor:$graders" "$d"
done
# `install -d` leaves the mode of a folder that already exists: set every mode here.
chmod 1777 "$root"; chmod 0755 "$root/$course" "$root/$course/outbound"
chmod 3773 "$root/$course/inbound"
chmod 2750 "$root/$course/sealed"
chmod 2771 "$root/$course/feedback"
stat -c '%A %U:%G %n' "$root" "$root/$course" "$root/$course"/{outbound,inbound,sealed,feedback}
