# The course's commands. The first two are all a student needs:
#   make lab    set up (first time only) and open the course in JupyterLab
#   make test   set up (first time only) and run the whole test suite
#   make book   build the read-only HTML edition in build/book/html/
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.course-installed
RUN := PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python
PYTEST_ARGS ?= -n 2 --dist loadgroup --durations=30
ASSIGNMENT ?=
PROFILE ?= cpu
LESSONS ?=
BOOK_STAMP := $(VENV)/.book-installed
comma := ,

.PHONY: hub hub-deps hub-env install lab test assignments check grade feedback report similarity export dask-certs bench compat clean-grading book book-deps

install: $(STAMP)

# (Re)install when the dependency files change; the venv itself is reused.
$(STAMP): pyproject.toml requirements/local.txt requirements/nodeps.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements/local.txt -e ".[dev]"
	@if grep -qv '^\s*\(#\|$$\)' requirements/nodeps.txt; then \
		$(BIN)/python -m pip install -q --no-deps -r requirements/nodeps.txt; fi
	touch $(STAMP)

lab: install
	$(RUN) -m jupyter lab --notebook-dir="$(CURDIR)" $(LAB_ARGS)

test: install
	$(RUN) -m pytest $(PYTEST_ARGS) $(TEST_ARGS)

# Regenerate the student releases in assignments/ from solutions/ (instructors).
assignments: install
	@for d in solutions/*/; do id=$$(basename "$$d"); \
		$(RUN) -m nbgrader generate_assignment "$$id" --force --log-level=WARN || exit 1; done
	$(RUN) -m tools.sync_notebooks

# Check your own notebook with the course's grader, hidden tests included (no class needed): the
# score per exercise, each failed test's message, the feedback page in build/check/<id>/:
#   make check ASSIGNMENT=01_soft_attention_pytorch [NOTEBOOK=path/to/your.ipynb] [OUT=build/check/<id>]
check: install
	@test -n "$(ASSIGNMENT)" || { echo "usage: make check ASSIGNMENT=<id> [NOTEBOOK=path]  (ids: $$(ls assignments | tr '\n' ' '))"; exit 2; }
	$(RUN) -m grader.check "$(ASSIGNMENT)" $(if $(NOTEBOOK),--notebook "$(NOTEBOOK)") $(if $(OUT),--out "$(OUT)")

# Autograde every submission of one assignment, each in its own sandbox, and
# write feedback and grades:
#   make grade ASSIGNMENT=01_soft_attention_pytorch [JOBS=N] [UNSAFE=1]
grade: install
	@test -n "$(ASSIGNMENT)" || { echo "usage: make grade ASSIGNMENT=<id> [JOBS=N]  (ids: $$(ls solutions | tr '\n' ' '))"; exit 2; }
	$(RUN) -m grader "$(ASSIGNMENT)" $(if $(JOBS),--jobs $(JOBS)) $(if $(UNSAFE),--unsafe) \
		$(if $(STUDENT),--student "$(STUDENT)") $(if $(FORCE),--force) $(if $(SCHEDULER),--scheduler "$(SCHEDULER)") \
		$(if $(TLS),--tls-ca-file "$(TLS)/ca.pem" --tls-cert "$(TLS)/cert.pem" --tls-key "$(TLS)/key.pem")

# The Dask cluster's TLS files (grader/distributed.py): dask-tls/ca.pem, cert.pem, key.pem (owner-only folder).
# Whoever holds key.pem runs code as root on the workers.
dask-certs: install
	$(RUN) -m grader.distributed --certificates $(or $(TLS),dask-tls)

# After grading the written answers by hand in nbgrader's formgrader: the final CSV and feedback
# pages (with your comments), from the gradebook; no notebook runs again.
#   make feedback ASSIGNMENT=07_bert_pytorch
feedback: install
	@test -n "$(ASSIGNMENT)" || { echo "usage: make feedback ASSIGNMENT=<id>"; exit 2; }
	$(RUN) -m grader "$(ASSIGNMENT)" --after-hand-grading $(if $(JOBS),--jobs $(JOBS))

# Submissions whose code is unusually alike (copydetect): grades/<id>-similarity.html
#   make similarity ASSIGNMENT=<id> [THRESHOLD=0.5]
similarity: install
	@test -n "$(ASSIGNMENT)" || { echo "usage: make similarity ASSIGNMENT=<id> [THRESHOLD=0.5]"; exit 2; }
	$(RUN) -m grader.similarity "$(ASSIGNMENT)" $(if $(THRESHOLD),--threshold $(THRESHOLD))

# Grades for the LMS, through nbgrader's exporter plug-ins (grader/export.py):
#   make export LMS=canvas|moodle ROSTER=roster.csv [TO=file.csv] [ALLOW_PROVISIONAL=1]  (provisional scores: refused unless allowed)
export: install
	@test -n "$(ROSTER)" || { echo "usage: make export LMS=canvas|moodle ROSTER=roster.csv [TO=file.csv] [ALLOW_PROVISIONAL=1]"; exit 2; }
	$(RUN) -m grader.export $(if $(filter moodle,$(LMS)),moodle,canvas) --roster "$(ROSTER)" $(if $(TO),--to "$(TO)") \
		$(if $(ALLOW_PROVISIONAL),--allow-provisional)

# The term so far: grades/report/index.html (the class) and one page per student, from every graded assignment.
report: install
	$(RUN) -m grader.report

# Quality and speed runs too long for CI; results are recorded under benchmarks/.
bench: install
	$(RUN) -m benchmarks $(BENCH_ARGS)

# The book's tool (Jupyter Book 1), kept out of `make install`: only who builds the book pays.
book-deps: $(BOOK_STAMP)

$(BOOK_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install -q -e ".[book]"
	touch $(BOOK_STAMP)

# The course as a static HTML book, readable offline: build/book/html/index.html
#   make book [PROFILE=cpu|smoke|gpu] [LESSONS=01_soft_attention,04_positional_encoding]
# Executed notebooks are cached in build/book/executed/; only changed lessons re-run.
book: book-deps
	$(RUN) -m tools.book --profile $(PROFILE) --fetch-mathjax $(if $(LESSONS),--lessons $(LESSONS)) $(BOOK_ARGS)

# The tests (but grading and browser) in two extra environments under build/compat/:
# the lowest versions pyproject.toml declares, and the newest ones; Python 3.12.
# Several GB of downloads; not part of `make test`, never run by CI. Results:
# benchmarks/results/compat.json.  make compat COMPAT_ARGS="--env lowest --fresh"
compat:
	$(PYTHON) -m tools.compat $(COMPAT_ARGS)

clean-grading:
	rm -rf gradebook.db submitted autograded feedback exchange

# The course under JupyterHub on this machine, for a trial (deploy/, docs/jupyterhub.md).
# Runs as root (the hub starts each user's server as that user); the users must exist. First the
# environment every user's server runs, OUTSIDE the course folder (students cannot read the course
# folder): root's, read-only to users, the course's package copied in (not an editable install):
#   sudo make hub-env [HUB_ENV=/opt/attention-course-env]
#   sudo make hub STUDENTS=ann,bob INSTRUCTORS=teacher PASSWORD=... [PORT=8000] [EXCHANGE=/srv/nbgrader/exchange]
HUB_DEPS := $(VENV)/.hub-installed
HUB_ENV ?= /opt/attention-course-env
hub-deps: $(HUB_DEPS)
$(HUB_DEPS): $(STAMP)
	$(BIN)/python -m pip install -q -e ".[dev,hub]"
	touch $(HUB_DEPS)

hub-env:
	@test "$$(id -u)" = 0 || { echo "make hub-env: run it as root (sudo): the environment is root's, read-only to every user"; exit 2; }
	@case "$(abspath $(HUB_ENV))/" in "$(CURDIR)/"*) echo "make hub-env: HUB_ENV=$(HUB_ENV) is inside the course folder, which students cannot read: put it outside (default /opt/attention-course-env)"; exit 2;; esac
	test -x "$(HUB_ENV)/bin/python" || $(PYTHON) -m venv "$(HUB_ENV)"
	"$(HUB_ENV)/bin/python" -m pip install -q --upgrade pip
	"$(HUB_ENV)/bin/python" -m pip install -q -r requirements/local.txt ".[hub]"
	@if grep -qv '^\s*\(#\|$$\)' requirements/nodeps.txt; then \
		"$(HUB_ENV)/bin/python" -m pip install -q --no-deps -r requirements/nodeps.txt; fi
	chown -R root:root "$(HUB_ENV)"
	chmod -R go-w,a+rX "$(HUB_ENV)"

hub: install
	@test "$$(id -u)" = 0 || { echo "make hub: run it as root (sudo): the hub starts each user's server as that user"; exit 2; }
	@test -n "$(STUDENTS)" -a -n "$(INSTRUCTORS)" -a -n "$(PASSWORD)" || { echo "usage: sudo make hub STUDENTS=a,b INSTRUCTORS=t PASSWORD=... [PORT=8000] [EXCHANGE=/srv/nbgrader/exchange] [GRADERS=attention-graders] [HUB_ENV=/opt/attention-course-env]"; exit 2; }
	@test -x "$(HUB_ENV)/bin/jupyterhub" || { echo "make hub: no students' environment at HUB_ENV=$(HUB_ENV): run sudo make hub-env first"; exit 2; }
	deploy/setup_course.sh "$(CURDIR)" "$(firstword $(subst $(comma), ,$(INSTRUCTORS)))" "$(or $(GRADERS),attention-graders)"
	deploy/setup_exchange.sh "$(or $(EXCHANGE),/srv/nbgrader/exchange)" attention-course "$(firstword $(subst $(comma), ,$(INSTRUCTORS)))" "$(or $(GRADERS),attention-graders)"
	COURSE_STUDENTS="$(STUDENTS)" COURSE_INSTRUCTORS="$(INSTRUCTORS)" HUB_TRIAL_PASSWORD="$(PASSWORD)" \
		HUB_PORT="$(or $(PORT),8000)" COURSE_EXCHANGE="$(or $(EXCHANGE),/srv/nbgrader/exchange)" COURSE_ENV="$(HUB_ENV)" \
		PATH="$(HUB_ENV)/bin:$$PATH" "$(HUB_ENV)/bin/jupyterhub" -f deploy/jupyterhub_config.py
