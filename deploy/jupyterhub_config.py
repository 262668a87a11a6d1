"""JupyterHub for the course: students and instructors, each in their own single-user
JupyterLab, running as their own system user, with nbgrader's exchange between them.

    sudo .venv/bin/jupyterhub -f deploy/jupyterhub_config.py      (or: sudo make hub)

Settings come from the environment (defaults in brackets):
    COURSE_STUDENTS      students' login names, comma-separated (required)
    COURSE_INSTRUCTORS   instructors' login names, comma-separated (required)
    COURSE_DIR           the course folder [this repository]: the instructors' and graders' only
                         (deploy/setup_course.sh); the hub refuses one other users can enter
    COURSE_ENV           the environment every user's server runs [/opt/attention-course-env]
                         (make hub-env): OUTSIDE the course folder, writable by root only, with the
                         course's package installed into it (not an editable install pointing into
                         the course folder); the hub refuses one that is not
    COURSE_ID            nbgrader's course id [attention-course]
    COURSE_EXCHANGE      nbgrader's exchange root [/srv/nbgrader/exchange] (deploy/setup_exchange.sh)
    HUB_STUDENT_CONFIG   where the hub puts the students' Jupyter config, a copy of deploy/student/
                         and deploy/private_exchange.py, root's and read-only
                         [/etc/jupyterhub-attention-course/student]
    HUB_STATE            the hub's database and cookie secret [COURSE_DIR/build/hub]
    HUB_IP, HUB_PORT     where the hub listens [127.0.0.1, 8000]; with the trial password only
                         on this machine (127.0.0.1, ::1 or localhost)
    HUB_API_PORT, HUB_PROXY_API_PORT   the hub's and the proxy's internal ports [8081, 8001]
    HUB_TRIAL_PASSWORD   TRIALS ONLY: the one password every listed user logs in with
    COURSE_EXTRA_CONFIG  a Jupyter config folder read by every user's server after deploy/<role>/
                         (tests/test_hub.py uses it to let the browser see JupyterLab's commands)

Students' servers get neither the course folder's path nor anything from it: the environment,
their Jupyter config and the exchange all live outside it. The hub also runs the course's
submission desk (deploy/seal_submissions.py) as a service, as the exchange's owner: it takes each
submission out of its student's hands and records its time (deploy/private_exchange.py).

The authenticator here is JupyterHub's DummyAuthenticator with one shared password: it is for a
trial on your own machine, never for a class. For a real deployment see docs/jupyterhub.md, "For a
real class, change": PAM or your university's OAuth/LDAP, TLS, the exchange on a shared file system.
The users must exist as system users (the hub starts each server as its user: it runs as root).
"""
import os
import pwd
import shutil
import subprocess
import sys

c = get_config()  # noqa: F821  (provided by JupyterHub)

here = os.path.dirname(os.path.abspath(__file__))
course = os.path.realpath(os.environ.get("COURSE_DIR", os.path.dirname(here)))
env_dir = os.path.realpath(os.environ.get("COURSE_ENV", "/opt/attention-course-env"))
course_id = os.environ.get("COURSE_ID", "attention-course")
exchange = os.path.realpath(os.environ.get("COURSE_EXCHANGE", "/srv/nbgrader/exchange"))
student_config = os.path.realpath(os.environ.get("HUB_STUDENT_CONFIG", "/etc/jupyterhub-attention-course/student"))
state = os.path.abspath(os.environ.get("HUB_STATE", os.path.join(course, "build", "hub")))
hub_ip = os.environ.get("HUB_IP", "127.0.0.1")


def _refuse(message: str) -> None:
    sys.exit(f"jupyterhub_config.py: {message}")


def _inside(path: str, folder: str) -> bool:
    return os.path.commonpath([path, folder]) == folder


# The trial password (DummyAuthenticator, below) only where nobody else can reach the hub.
if hub_ip not in ("127.0.0.1", "::1", "localhost"):
    _refuse(f"HUB_IP={hub_ip}: this configuration logs everyone in with one trial password "
            "(DummyAuthenticator), so it listens on this machine only (127.0.0.1). For a class, use a "
            "real authenticator and TLS (docs/jupyterhub.md, 'For a real class, change').")
# Students must not read the course folder: solutions, gradebook, everyone's submissions and feedback.
if not os.path.isdir(course):
    _refuse(f"COURSE_DIR={course} is not a folder")
if os.stat(course).st_mode & 0o007:
    _refuse(f"the course folder {course} is open to every user (mode {os.stat(course).st_mode & 0o7777:04o}): "
            "students could read its solutions, gradebook and everyone's submissions. "
            "Run `sudo deploy/setup_course.sh COURSE_DIR INSTRUCTOR GRADERS` (mode 2770).")
# ... so the environment their servers run lives outside it, and they cannot change it.
for what, path in (("COURSE_ENV", env_dir), ("HUB_STUDENT_CONFIG", student_config), ("COURSE_EXCHANGE", exchange)):
    if _inside(path, course):
        _refuse(f"{what}={path} is inside the course folder {course}, which students cannot read: "
                "put it outside (the environment: `sudo make hub-env`)")
if not os.access(os.path.join(env_dir, "bin", "jupyterhub-singleuser"), os.X_OK):
    _refuse(f"COURSE_ENV={env_dir} has no bin/jupyterhub-singleuser: build it with `sudo make hub-env`")
for path in (env_dir, os.path.join(env_dir, "bin")):
    if os.stat(path).st_mode & 0o022 or os.stat(path).st_uid != 0:
        _refuse(f"the environment's {path} must be root's and writable by root only "
                f"(owner uid {os.stat(path).st_uid}, mode {os.stat(path).st_mode & 0o7777:04o})")
_spec = subprocess.run([os.path.join(env_dir, "bin", "python"), "-c",
                        "import importlib.util as u; s = u.find_spec('utils'); print(s.origin if s else '')"],
                       capture_output=True, text=True, timeout=60)
if _spec.returncode != 0 or not _spec.stdout.strip():
    _refuse(f"the course's package (utils) is not installed in COURSE_ENV={env_dir}: `sudo make hub-env`")
if _inside(os.path.realpath(_spec.stdout.strip()), course):
    _refuse(f"COURSE_ENV={env_dir} imports the course's package from inside the course folder "
            f"({_spec.stdout.strip()}: an editable install), which students cannot read: `sudo make hub-env` "
            "installs a copy")
# The exchange, with the desk's sealed/ folder (deploy/setup_exchange.sh).
inbound, sealed = (os.path.join(exchange, course_id, d) for d in ("inbound", "sealed"))
if not os.path.isdir(sealed) or os.stat(sealed).st_mode & 0o007:
    _refuse(f"{sealed} is missing or open to every user: run deploy/setup_exchange.sh")
desk_user = pwd.getpwuid(os.stat(inbound).st_uid).pw_name

# The students' Jupyter config, copied where they can read it (the course folder is closed to them).
_copied = set(os.listdir(os.path.join(here, "student"))) | {"private_exchange.py", "__pycache__"}
if os.path.isdir(student_config) and not set(os.listdir(student_config)) <= _copied:
    _refuse(f"HUB_STUDENT_CONFIG={student_config} holds files the hub did not put there "
            f"({sorted(set(os.listdir(student_config)) - _copied)}): give the students' config a folder of its own")
shutil.rmtree(student_config, ignore_errors=True)
shutil.copytree(os.path.join(here, "student"), student_config)
shutil.copy(os.path.join(here, "private_exchange.py"), student_config)
for dirpath, dirnames, filenames in os.walk(student_config):
    os.chmod(dirpath, 0o755)
    for name in filenames:
        os.chmod(os.path.join(dirpath, name), 0o644)
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
c.JupyterHub.bind_url = f"http://{hub_ip}:{os.environ.get('HUB_PORT', '8000')}"
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
    environment = dict(
        PATH=os.pathsep.join([os.path.join(env_dir, "bin"), "/usr/local/bin", "/usr/bin", "/bin"]),
        COURSE_ID=course_id, COURSE_EXCHANGE=exchange, COURSE_PROFILE=os.environ.get("COURSE_PROFILE", "cpu"),
    )
    if role == "instructor":
        # nbgrader's formgrader serves only a course inside the server's folder; the course folder
        # itself is not that folder, or its nbgrader_config.py would be read last (deploy/instructor/).
        spawner.notebook_dir = os.path.dirname(course)
        config = os.path.join(here, "instructor")
        environment["COURSE_DIR"] = course
    else:
        config = student_config  # a copy outside the course folder: students never need its path
    environment["JUPYTER_CONFIG_PATH"] = os.pathsep.join(
        [config] + ([os.environ["COURSE_EXTRA_CONFIG"]] if os.environ.get("COURSE_EXTRA_CONFIG") else []))
    spawner.environment.update(environment)


c.Spawner.pre_spawn_hook = _course_environment

# The submission desk: seals each submission out of its student's reach, with its own time
# (deploy/seal_submissions.py), as the exchange's owner: not root, not a student.
c.JupyterHub.services = [{
    "name": "submission-desk",
    "command": [os.path.join(env_dir, "bin", "python"), os.path.join(here, "seal_submissions.py"), exchange, course_id],
    "user": desk_user,
    "cwd": "/",
}]
