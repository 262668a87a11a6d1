"""Date normalisation: many human ways of writing a date, one ISO answer.

``"Tuesday, the 3rd of March 1998"``, ``"tue 03/03/98"``, ``"1998 Mar 3"`` all
map to ``"1998-03-03"``. It is the course's offline sequence-to-sequence task:
the output is short and fixed in form, but which input characters matter for
each output character depends on the format, so a decoder that can look back
at the input (attention) has an easy time and one that must squeeze the whole
input into one vector has a harder one.

Conventions (so the task has one right answer):

* Numeric forms with ``/``, ``.`` or ``-`` are day-month-year (``03/04/98`` is
  the 3rd of April); ISO-like forms that start with the year are year-month-day.
* Two-digit years: ``50``-``99`` mean 1950-1999, ``00``-``49`` mean 2000-2049.
  Dates range over 1950-01-01 .. 2049-12-31.

Everything is generated from a seed with NumPy: no download, no framework.
"""
from __future__ import annotations

import datetime as _dt
from typing import Callable, Sequence

import numpy as np

__all__ = [
    "FORMATS",
    "MONTHS",
    "WEEKDAYS",
    "format_date",
    "random_dates",
    "make_dates",
    "date_splits",
    "SOURCE_CHARS",
    "TARGET_CHARS",
]

MONTHS = ("January", "February", "March", "April", "May", "June", "July",
          "August", "September", "October", "November", "December")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

FIRST_DAY = _dt.date(1950, 1, 1)
LAST_DAY = _dt.date(2049, 12, 31)


def _ordinal(day: int) -> str:
    if 10 <= day % 100 <= 20:
        return f"{day}th"
    suffix = {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


# Each format is a function of the date's parts. Names say what they produce for 1998-03-03.
FORMATS: dict[str, Callable[[_dt.date], str]] = {
    "D Month YYYY": lambda d: f"{d.day} {MONTHS[d.month - 1]} {d.year}",           # 3 March 1998
    "Dth of Month YYYY": lambda d: f"{_ordinal(d.day)} of {MONTHS[d.month - 1]} {d.year}",  # 3rd of March 1998
    "Weekday Dth of Month YYYY": lambda d: (
        f"{WEEKDAYS[d.weekday()]} {_ordinal(d.day)} of {MONTHS[d.month - 1]} {d.year}"),
    "Weekday, the Dth of Month, YYYY": lambda d: (
        f"{WEEKDAYS[d.weekday()]}, the {_ordinal(d.day)} of {MONTHS[d.month - 1]}, {d.year}"),
    "Month D YYYY": lambda d: f"{MONTHS[d.month - 1]} {d.day} {d.year}",            # March 3 1998
    "Month D, YYYY": lambda d: f"{MONTHS[d.month - 1]} {d.day}, {d.year}",          # March 3, 1998
    "Wkd, Month Dth, YYYY": lambda d: (
        f"{WEEKDAYS[d.weekday()][:3]}, {MONTHS[d.month - 1]} {_ordinal(d.day)}, {d.year}"),
    "YYYY Mon D": lambda d: f"{d.year} {MONTHS[d.month - 1][:3]} {d.day}",          # 1998 Mar 3
    "D Mon YY": lambda d: f"{d.day} {MONTHS[d.month - 1][:3]} {d.year % 100:02d}",  # 3 Mar 98
    "Mon D, YYYY": lambda d: f"{MONTHS[d.month - 1][:3]} {d.day}, {d.year}",        # Mar 3, 1998
    "Wkd, DD/MM/YY": lambda d: f"{WEEKDAYS[d.weekday()][:3]}, {d.day:02d}/{d.month:02d}/{d.year % 100:02d}",
    "DD/MM/YYYY": lambda d: f"{d.day:02d}/{d.month:02d}/{d.year}",                  # 03/03/1998
    "D/M/YY": lambda d: f"{d.day}/{d.month}/{d.year % 100:02d}",                    # 3/3/98
    "DD.MM.YYYY": lambda d: f"{d.day:02d}.{d.month:02d}.{d.year}",                  # 03.03.1998
    "DD-MM-YY": lambda d: f"{d.day:02d}-{d.month:02d}-{d.year % 100:02d}",          # 03-03-98
    "YYYY/MM/DD": lambda d: f"{d.year}/{d.month:02d}/{d.day:02d}",                  # 1998/03/03
    "YYYYMMDD": lambda d: f"{d.year}{d.month:02d}{d.day:02d}",                      # 19980303
    "Weekday D Month YYYY": lambda d: f"{WEEKDAYS[d.weekday()]} {d.day} {MONTHS[d.month - 1]} {d.year}",
}

_CASES = ("as is", "lower", "upper")
_CASE_P = (0.6, 0.3, 0.1)

# Every character any format can produce (letters in both cases), so a source
# vocabulary built from it covers every generated string.
SOURCE_CHARS = "".join(sorted(set(
    "0123456789 ,./-"
    + "".join(MONTHS) + "".join(WEEKDAYS) + "stndrdthofe"
    + "".join(MONTHS).lower() + "".join(WEEKDAYS).lower()
    + "".join(MONTHS).upper() + "".join(WEEKDAYS).upper() + "STNDRDTHOFE"
)))
TARGET_CHARS = "-0123456789"


def format_date(date: _dt.date, fmt: str, case: str = "as is") -> str:
    """Write ``date`` in the human format ``fmt`` (a key of ``FORMATS``).

    Shapes: one date -> one string.
    >>> format_date(_dt.date(1998, 3, 3), "Weekday Dth of Month YYYY")
    'Tuesday 3rd of March 1998'
    """
    if fmt not in FORMATS:
        raise ValueError(f"fmt: expected one of {sorted(FORMATS)}, got {fmt!r}")
    if case not in _CASES:
        raise ValueError(f"case: expected one of {_CASES}, got {case!r}")
    text = FORMATS[fmt](date)
    return text.lower() if case == "lower" else text.upper() if case == "upper" else text


def random_dates(n: int, seed: int = 0) -> list[_dt.date]:
    """``n`` dates drawn uniformly from 1950-01-01 .. 2049-12-31 (with repeats)."""
    if not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"n: expected a non-negative int, got {n!r}")
    rng = np.random.default_rng(seed)
    span = (LAST_DAY - FIRST_DAY).days + 1
    return [FIRST_DAY + _dt.timedelta(days=int(k)) for k in rng.integers(0, span, size=n)]


def make_dates(n: int, seed: int = 0, formats: Sequence[str] | None = None) -> list[tuple[str, str]]:
    """``n`` (human, ISO) pairs with random dates, formats and letter case.

    Shapes: -> list of n (source, target) string pairs; targets are 10 characters.
    """
    names = list(FORMATS) if formats is None else list(formats)
    unknown = [f for f in names if f not in FORMATS]
    if not names or unknown:
        raise ValueError(f"formats: expected a non-empty list of keys of FORMATS, got {formats!r}")
    rng = np.random.default_rng([seed, 1])
    dates = random_dates(n, seed)
    fmt_idx = rng.integers(0, len(names), size=n)
    case_idx = rng.choice(len(_CASES), size=n, p=_CASE_P)
    return [
        (format_date(d, names[f], _CASES[c]), d.isoformat())
        for d, f, c in zip(dates, fmt_idx, case_idx)
    ]


def date_splits(
    n_train: int, n_test: int, seed: int = 0, formats: Sequence[str] | None = None
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """A training set and a held-out set with no source string in common.

    The held-out pairs are drawn first and every training pair whose source
    string appears among them is dropped (and replaced), so the model is
    judged only on strings it never saw. Deterministic for a seed.

    Shapes: -> (n_train pairs, n_test pairs).
    """
    if n_train < 1 or n_test < 1:
        raise ValueError(f"n_train, n_test: expected positive ints, got {n_train}, {n_test}")
    test = make_dates(n_test, seed=seed * 2 + 1, formats=formats)
    held_out = {src for src, _ in test}
    train: list[tuple[str, str]] = []
    draw = 0
    while len(train) < n_train:
        batch = make_dates(n_train, seed=seed * 2 + 2 + 1000 * draw, formats=formats)
        train.extend(p for p in batch if p[0] not in held_out)
        draw += 1
    return train[:n_train], test
