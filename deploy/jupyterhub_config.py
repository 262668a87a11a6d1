"""JupyterHub for the course: students and instructors, each in their own single-user
JupyterLab, running as their own system user, with nbgrader's exchange between them.

    sudo .venv/bin/jupyterhub -f deploy/jupyterhub_config.py      (or: sudo make hub)

Settings come from the environment (defaults in brackets):
    COURSE_STUDENTS      students' login names, comma-separated (required)
    COURSE_INSTRUCTORS   instructors' login names, comma-separated (required)
    COURSE_DIR           the course folder, owned by an instructor [this repository]
    COURSE_ENV           the course's environment, readable by every user [COURSE_DIR/.venv]
    COURSE_EXCHANGE      nbgrader's exchange root [/srv/nbgrader/exchange] (deploy/setup_exchange.sh)
    HUB_STATE            the hub's database and cookie secret [COURSE_DIR/build/hub]
    HUB_IP, HUB_PORT     where the hub listens [127.0.0.1, 8000]
    HUB_API_PORT, HUB_PROXY_API_PORT   the hub's and the proxy's internal ports [8081, 8001]
    HUB_TRIAL_PASSWORD   TRIALS ONLY: the one password every listed user logs in with
    COURSE_EXTRA_CONFIG  a Jupyter config folder read by every user's server after deploy/<role>/
                         (tests/test_hub.py uses it to let the browser see JupyterLab's commands)

The authenticator here is JupyterHub's DummyAuthenticator with one shared password: it is for a
trial on your own machine, never for a class. For a real deployment see docs/jupyterhub.md, "For a
real class, change": PAM or your university's OAuth/LDAP, TLS, the exchange on a shared file system.
The users must exist as system users (the hub starts each server as its user: it runs as root).
"""
import os
import sys

c = get_config()  # noqa: F821  (provided by JupyterHub)

here = os.path.dirname(os.path.abspath(__file__))
course = os.path.abspath(os.environ.get("COURSE_DIR", os.path.dirname(here)))
env_dir = os.path.abspath(os.environ.get("COURSE_ENV", os.path.join(course, ".venv")))
exchange = os.environ.get("COURSE_EXCHANGE", "/srv/nbgrader/exchange")
state = os.path.abspath(os.environ.get("HUB_STATE", os.path.join(course, "build", "hub")))
os.makedirs(state, mode=0o700, exist_ok=True)


def _names(var: str) -> set[str]:
    names = {n.strip() for n in os.environ.get(var, "").split(",") if n.strip()}
    if not names:
        sys.exit(f"jupyterhub_config.py: set {var} (comma-separated login names)")
    return names


students, instructors = _names("COURSE_STUDENTS"), _names("COURSE_INSTRUCTORS")
if students & instructors:
    sys.exit(f"jupyterhub_config.py: {sorted(students & instructors)} both student and instructor")

# Where the hub listens, where it keeps its state.
c.JupyterHub.bind_url = f"http://{os.environ.get('HUB_IP', '127.0.0.1')}:{os.environ.get('HUB_PORT', '8000')}"
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = int(os.environ.get("HUB_API_PORT", "8081"))
c.JupyterHub.db_url = "sqlite:///" + os.path.join(state, "jupyterhub.sqlite")
c.JupyterHub.cookie_secret_file = os.path.join(state, "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = os.path.join(state, "jupyterhub.pid")
# The proxy: configurable-http-proxy's pure-Python implementation (no Node.js needed).
c.ConfigurableHTTPProxy.command = [os.path.join(env_dir, "bin", "configurable-http-proxy")]
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{os.environ.get('HUB_PROXY_API_PORT', '8001')}"
c.ConfigurableHTTPProxy.pid_file = os.path.join(state, "jupyterhub-proxy.pid")

# Who may log in. TRIALS ONLY: one shared password (see the module's docstring).
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = os.environ.get("HUB_TRIAL_PASSWORD") or sys.exit(
    "jupyterhub_config.py: set HUB_TRIAL_PASSWORD (trials only; a class uses a real authenticator)")
c.Authenticator.allowed_users = students | instructors
c.Authenticator.admin_users = set()  # nobody may open another user's server through the hub

# Each user's JupyterLab, as their own system user, from the course's environment.
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [os.path.join(env_dir, "bin", "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "~"
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120


def _course_environment(spawner) -> None:
    """Students get the Assignments tab and Validate; instructors also the formgrader."""
    role = "instructor" if spawner.user.name in instructors else "student"
    if role == "instructor":
        # nbgrader's formgrader serves only a course inside the server's folder; the course folder
        # itself is not that folder, or its nbgrader_config.py would be read last (deploy/instructor/).
        spawner.notebook_dir = os.path.dirname(course)
    spawner.environment.update(
        PATH=os.pathsep.join([os.path.join(env_dir, "bin"), "/usr/local/bin", "/usr/bin", "/bin"]),
        JUPYTER_CONFIG_PATH=os.pathsep.join(
            [os.path.join(here, role)] + ([os.environ["COURSE_EXTRA_CONFIG"]] if os.environ.get("COURSE_EXTRA_CONFIG") else [])),
        COURSE_DIR=course, COURSE_EXCHANGE=exchange,
        COURSE_PROFILE=os.environ.get("COURSE_PROFILE", "cpu"),
    )


c.Spawner.pre_spawn_hook = _course_environment
