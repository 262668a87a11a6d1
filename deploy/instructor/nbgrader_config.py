"""nbgrader for the course's instructors on the JupyterHub (on their JUPYTER_CONFIG_PATH).

The course's own nbgrader_config.py (gradebook, late penalties, feedback settings) is loaded from
the course folder, then the exchange is moved to the class's shared one. Instructors' servers open
in the folder that holds the course folder (nbgrader's formgrader serves only a course inside it),
not in the course folder itself: there the course's nbgrader_config.py would be
read last and put the exchange back inside the course folder.
Commands run inside the course folder read its config last, so give them the exchange:
``nbgrader collect <id> --Exchange.root=$COURSE_EXCHANGE`` (docs/jupyterhub.md).
"""
import os

c = get_config()  # noqa: F821  (provided by nbgrader)

course = os.environ.get("COURSE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
load_subconfig(os.path.join(course, "nbgrader_config.py"))  # noqa: F821  (provided by traitlets)
c.Exchange.root = os.environ.get("COURSE_EXCHANGE", "/srv/nbgrader/exchange")
c.Exchange.cache = os.path.join(os.path.expanduser("~"), ".local", "share", "jupyter", "nbgrader_cache")
