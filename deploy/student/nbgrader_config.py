"""nbgrader as a student meets it on the course's JupyterHub (deploy/jupyterhub_config.py puts
this folder on the student's JUPYTER_CONFIG_PATH).

Students see the Assignments tab and Validate, never the formgrader (student/labconfig and
student/jupyter_server_config.json switch those off). Their submissions go through
``PrivateSubmit`` (deploy/private_exchange.py): readable by the course's graders' group only.
"""
import os
import sys

c = get_config()  # noqa: F821  (provided by nbgrader)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from private_exchange import PrivateSubmit  # noqa: E402  (deploy/private_exchange.py)

c.CourseDirectory.course_id = os.environ.get("COURSE_ID", "attention-course")
c.Exchange.root = os.environ.get("COURSE_EXCHANGE", "/srv/nbgrader/exchange")
c.ExchangeFactory.submit = PrivateSubmit
