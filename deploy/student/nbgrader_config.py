"""nbgrader as a student meets it on the course's JupyterHub (deploy/jupyterhub_config.py copies
this folder, with deploy/private_exchange.py beside this file, to HUB_STUDENT_CONFIG outside the
course folder, and puts it on the student's JUPYTER_CONFIG_PATH).

Students see the Assignments tab and Validate, never the formgrader (student/labconfig and
student/jupyter_server_config.json switch those off). Their submissions go through
``PrivateSubmit`` (deploy/private_exchange.py): under their own id only, readable by the course's
graders' group only, and sealed by the course's submission desk with its own time.
"""
import os
import sys

c = get_config()  # noqa: F821  (provided by nbgrader)

here = os.path.dirname(os.path.abspath(__file__))
# The hub's copy has private_exchange.py beside this file; the repository has it in deploy/.
sys.path.insert(0, here if os.path.exists(os.path.join(here, "private_exchange.py")) else os.path.dirname(here))
from private_exchange import PrivateSubmit  # noqa: E402  (deploy/private_exchange.py)

c.CourseDirectory.course_id = os.environ.get("COURSE_ID", "attention-course")
c.Exchange.root = os.environ.get("COURSE_EXCHANGE", "/srv/nbgrader/exchange")
c.ExchangeFactory.submit = PrivateSubmit
