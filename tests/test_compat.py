"""tools.compat's pure parts: pins from pyproject, pytest's summary line. Builds no environment."""
from __future__ import annotations

from pathlib import Path

import pytest

from tools import compat


def test_lower_bound_of_a_specifier() -> None:
    assert compat.lower_bound(">=8.0,<9") == "8.0"
    assert compat.lower_bound("<9,>=8.0") == "8.0"
    assert compat.lower_bound(">=0.9.6") == "0.9.6"
    assert compat.lower_bound("==3.*") is None
    assert compat.lower_bound("<2") is None
    assert compat.lower_bound("") is None


def test_split_requirement_keeps_extras_and_drops_markers() -> None:
    assert compat.split_requirement("pytest>=8.0,<9") == ("pytest", "", ">=8.0,<9")
    assert compat.split_requirement("foo[bar] >= 1.2 ; python_version<'3.13'") == ("foo", "[bar]", ">=1.2")
    with pytest.raises(ValueError):
        compat.split_requirement("")


def test_lowest_pins_pin_every_lower_bound_exactly() -> None:
    reqs = ["numpy>=1.26", "pytest>=8.0,<9", "keras==3.*", "tensorflow>=2.16.1", "Foo_Bar[x]>=2", "tqdm"]
    assert compat.lowest_pins(reqs) == [
        "numpy==1.26", "pytest==8.0", "keras==3.*", "tensorflow-cpu==2.16.1", "Foo_Bar[x]==2", "tqdm"]
    assert compat.lowest_pins(["tensorflow>=2.16.1"], substitutes={}) == ["tensorflow==2.16.1"]


def test_newest_requirements_keep_upper_bounds() -> None:
    assert compat.newest_requirements(["pytest>=8.0,<9", "tensorflow>=2.16.1"]) == [
        "pytest>=8.0,<9", "tensorflow-cpu>=2.16.1"]


def test_declared_requirements_read_dependencies_and_extras(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\ndependencies = ["numpy>=1.26"]\n'
                         '[project.optional-dependencies]\nframeworks = ["torch>=2.2"]\n'
                         'dev = ["pytest>=8.0,<9"]\ndocs = ["sphinx"]\n')
    assert compat.declared_requirements(pyproject) == ["numpy>=1.26", "torch>=2.2", "pytest>=8.0,<9"]


def test_the_course_declares_a_lower_bound_for_every_dependency() -> None:
    """Every declared dependency gets pinned in the lowest environment (else it is untested)."""
    for req in compat.declared_requirements():
        name, _, spec = compat.split_requirement(req)
        assert compat.lower_bound(spec), f"{name} has no lower bound in pyproject.toml"


def test_requirement_lines_drop_comments(tmp_path: Path) -> None:
    path = tmp_path / "r.txt"
    path.write_text("# a comment\n\nfoo==1.0  # why\n  bar==2\n")
    assert compat.requirement_lines(path) == ["foo==1.0", "bar==2"]


@pytest.mark.parametrize("line, expected", [
    ("===== 3 passed, 1 failed, 2 skipped in 12.34s (0:00:12) =====",
     {"passed": 3, "failed": 1, "skipped": 2, "errors": 0}),
    ("= 10 passed, 1 error, 4 warnings in 1.0s =", {"passed": 10, "failed": 0, "skipped": 0, "errors": 1}),
    ("== 2 failed, 5 passed, 3 deselected, 1 xfailed in 0.5s ==",
     {"passed": 5, "failed": 2, "skipped": 0, "errors": 0, "deselected": 3, "xfailed": 1}),
    ("=== no tests ran in 0.01s ===", {"passed": 0, "failed": 0, "skipped": 0, "errors": 0}),
])
def test_parse_pytest_counts(line: str, expected: dict) -> None:
    output = f"collected 6 items\n\ntests/test_x.py ..F.\nFAILED tests/test_x.py::t - a passed test in\n{line}\n"
    assert compat.parse_pytest_counts(output) == expected


def test_parse_pytest_counts_without_a_summary() -> None:
    assert compat.parse_pytest_counts("ImportError while loading conftest\n") == {}


def test_failed_tests_are_the_short_summary_lines() -> None:
    output = ("FAILED tests/test_a.py::test_x - AssertionError: 1 != 2\n"
              "ERROR tests/test_b.py - ImportError\n  FAILED not at the start\n= 1 failed in 1s =\n")
    assert compat.failed_tests(output) == ["FAILED tests/test_a.py::test_x - AssertionError: 1 != 2",
                                           "ERROR tests/test_b.py - ImportError"]


def test_pytest_command_runs_the_right_tests(tmp_path: Path) -> None:
    python = tmp_path / "python"
    with_xdist = compat.pytest_command(python, {"pytest-xdist": "3.3.0"}, ["-x"])
    assert with_xdist[:5] == [str(python), "-m", "pytest", "-p", "no:cacheprovider"]
    assert "--ignore-glob=tests/test_grading*.py" in with_xdist
    assert "--ignore=tests/test_browser.py" in with_xdist
    assert with_xdist[-5:] == ["-n", "2", "--dist", "loadgroup", "-x"]
    assert "-n" not in compat.pytest_command(python, {"pytest-xdist": None}, [])


def test_find_python_falls_back_loudly(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr(compat, "python_version", lambda python: None)
    python, note = compat.find_python(None, wanted=(3, 99))
    assert "UNTESTED" in note and "3.99" in note
    assert "UNTESTED" in capsys.readouterr().err
