"""The README and the docs/ pages: the README stays a front door (at most 10 KB) that
links every guide; every relative link resolves; and every command in a fenced block
is real. Cheap commands run (``make -n <target>``, ``python -m <module> --help``);
the others are checked to exist (an nbgrader subcommand, a program of the course's
environment)."""
from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_LIMIT = 10 * 1024
FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```", re.M | re.S)
SHELL_LANGS = {"", "bash", "sh", "shell", "console"}
BIN = Path(sys.executable).parent


def pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def fenced_commands(text: str) -> list[str]:
    """Each command line of the shell blocks of a markdown text: comments dropped,
    a ``$`` prompt dropped, optional ``[ARG=...]`` parts dropped."""
    commands = []
    for lang, body in FENCE.findall(text):
        if lang.lower() not in SHELL_LANGS:
            continue
        for line in body.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            line = re.sub(r"\s*\[[^\]]*\]", "", line.removeprefix("$ "))
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


def _all_commands() -> list[tuple[str, str]]:
    return [(p.relative_to(ROOT).as_posix(), c) for p in pages() for c in fenced_commands(p.read_text(encoding="utf-8"))]


def test_fenced_commands_are_extracted():
    text = "a\n```bash\nmake lab     # opens it\n# a comment\n$ make grade ASSIGNMENT=x [JOBS=N]\n```\n```python\nx = 1\n```\n"
    assert fenced_commands(text) == ["make lab", "make grade ASSIGNMENT=x"]


def test_a_line_that_only_sets_a_variable_is_no_command_and_no_crash():
    problems, ran = check_commands([("x.md", "ALLOW_PROVISIONAL=1"), ("x.md", "VENV=/opt/env make no-such-target")])
    assert ran == 0 and problems == ["x.md: `VENV=/opt/env make no-such-target`: no make target 'no-such-target'"]


def test_readme_is_a_front_door():
    size = len(README.read_bytes())
    assert size <= README_LIMIT, f"README.md is {size:,} bytes; keep it under {README_LIMIT:,}: move details to docs/"
    text = README.read_text(encoding="utf-8")
    for wanted in ("make lab", "make test", "Handing in", "make grade", "make feedback", "nbgrader release_assignment",
                   "nbgrader collect"):
        assert wanted in text, f"the README's front door lost {wanted!r}"
    guides = sorted(DOCS.glob("*.md"))
    assert len(guides) >= 6, f"docs/ holds {len(guides)} pages"
    unlinked = [g.name for g in guides if f"(docs/{g.name})" not in text]
    assert not unlinked, f"the README links no door to {unlinked}"


def test_relative_links_resolve():
    broken = []
    for page in pages():
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
                continue
            if not (page.parent / target.partition("#")[0]).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, "links to nothing:\n" + "\n".join(broken)


def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([A-Za-z][\w-]*):(?!=)", text, re.M))


def _nbgrader_subcommands() -> str:
    done = subprocess.run([str(BIN / "nbgrader"), "--help"], capture_output=True, text=True, timeout=120)
    return done.stdout + done.stderr


def check_commands(commands: list[tuple[str, str]]) -> tuple[list[str], int]:
    """What is wrong with each (page, command), and how many commands ran."""
    targets = _make_targets()
    nbgrader_help = None
    problems, ran = [], 0
    for where, command in commands:
        argv = shlex.split(command)
        while argv and (argv[0] == "sudo" or re.match(r"^[A-Z_]+=", argv[0])):
            argv = argv[1:]
        if not argv:  # a line that only sets variables (`export` aside), e.g. `ALLOW_PROVISIONAL=1`
            continue
        program, args = argv[0], argv[1:]
        if program == "make":
            target = next((a for a in args if "=" not in a and not a.startswith("-")), None)
            if target is None or target not in targets:
                problems.append(f"{where}: `{command}`: no make target {target!r}")
                continue
            done = subprocess.run(["make", "-n", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)
            ran += 1
            if done.returncode != 0:
                problems.append(f"{where}: `make -n {' '.join(args)}` failed: {done.stderr.strip()[-300:]}")
        elif program in ("python", "python3") or program.endswith("/python"):
            if args[:1] != ["-m"] or len(args) < 2:
                problems.append(f"{where}: `{command}`: expected python -m <module>")
                continue
            done = subprocess.run([sys.executable, "-m", args[1], "--help"], cwd=ROOT, capture_output=True, text=True,
                                  timeout=120)
            ran += 1
            if done.returncode != 0:
                problems.append(f"{where}: `python -m {args[1]} --help` failed: {done.stderr.strip()[-300:]}")
        elif program == "nbgrader":
            nbgrader_help = nbgrader_help or _nbgrader_subcommands()
            if not args or not re.search(rf"^\s*{re.escape(args[0])}\b", nbgrader_help, re.M):
                problems.append(f"{where}: `{command}`: nbgrader has no subcommand {args[:1]}")
        elif program.startswith(".venv/bin/"):
            name = program.removeprefix(".venv/bin/")
            if not (BIN / name).exists():
                problems.append(f"{where}: `{command}`: the course's environment has no {name}")
        else:
            problems.append(f"{where}: `{command}`: not a make target, a module or a known program; "
                            "teach tests/test_docs.py how to check it")
    return problems, ran


def test_every_fenced_command_is_real():
    commands = _all_commands()
    assert len(commands) >= 15, f"only {len(commands)} fenced commands found: is the extraction broken?"
    problems, ran = check_commands(commands)
    assert not problems, "\n".join(problems)
    assert ran >= 10, f"only {ran} commands were run"


@pytest.mark.parametrize("bad", ["make no-such-target", "make grade ASSIGNMENT=x FOO", "python -m no_such_module_x",
                                 "nbgrader no_such_sub", ".venv/bin/no-such-tool run", "rm -rf x"])
def test_a_wrong_command_is_caught(bad):
    """The check names a command that does not exist (so the test above can fail)."""
    problems, _ = check_commands([("x.md", bad)])
    assert len(problems) == 1 and problems[0].startswith("x.md: "), problems
