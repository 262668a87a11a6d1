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

.PHONY: hub hub-deps install lab test assignments grade feedback report similarity export bench compat clean-grading book book-deps

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

# Autograde every submission of one assignment, each in its own sandbox, and
# write feedback and grades:
#   make grade ASSIGNMENT=01_soft_attention_pytorch [JOBS=N] [UNSAFE=1]
grade: install
	@test -n "$(ASSIGNMENT)" || { echo "usage: make grade ASSIGNMENT=<id> [JOBS=N]  (ids: $$(ls solutions | tr '\n' ' '))"; exit 2; }
	$(RUN) -m grader "$(ASSIGNMENT)" $(if $(JOBS),--jobs $(JOBS)) $(if $(UNSAFE),--unsafe) \
		$(if $(STUDENT),--student "$(STUDENT)") $(if $(FORCE),--force) $(if $(SCHEDULER),--scheduler "$(SCHEDULER)")

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
#   make export LMS=canvas|moodle ROSTER=roster.csv [TO=file.csv]
export: install
	@test -n "$(ROSTER)" || { echo "usage: make export LMS=canvas|moodle ROSTER=roster.csv [TO=file.csv]"; exit 2; }
	$(RUN) -m nbgrader export --exporter=grader.export.$(if $(filter moodle,$(LMS)),Moodle,Canvas)Export \
		--$(if $(filter moodle,$(LMS)),Moodle,Canvas)Export.roster="$(ROSTER)" $(if $(TO),--to="$(TO)")

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
# Runs as root (the hub starts each user's server as that user); the users must exist:
#   sudo make hub STUDENTS=ann,bob INSTRUCTORS=teacher PASSWORD=... [PORT=8000] [EXCHANGE=/srv/nbgrader/exchange]
HUB_DEPS := $(VENV)/.hub-installed
hub-deps: $(HUB_DEPS)
$(HUB_DEPS): $(STAMP)
	$(BIN)/python -m pip install -q -e ".[dev,hub]"
	touch $(HUB_DEPS)

hub: install $(HUB_DEPS)
	@test "$$(id -u)" = 0 || { echo "make hub: run it as root (sudo): the hub starts each user's server as that user"; exit 2; }
	@test -n "$(STUDENTS)" -a -n "$(INSTRUCTORS)" -a -n "$(PASSWORD)" || { echo "usage: sudo make hub STUDENTS=a,b INSTRUCTORS=t PASSWORD=... [PORT=8000] [EXCHANGE=/srv/nbgrader/exchange] [GRADERS=attention-graders]"; exit 2; }
	deploy/setup_exchange.sh "$(or $(EXCHANGE),/srv/nbgrader/exchange)" attention-course "$(firstword $(subst $(comma), ,$(INSTRUCTORS)))" "$(or $(GRADERS),attention-graders)"
	COURSE_STUDENTS="$(STUDENTS)" COURSE_INSTRUCTORS="$(INSTRUCTORS)" HUB_TRIAL_PASSWORD="$(PASSWORD)" \
		HUB_PORT="$(or $(PORT),8000)" COURSE_EXCHANGE="$(or $(EXCHANGE),/srv/nbgrader/exchange)" \
		PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/jupyterhub -f deploy/jupyterhub_config.py
