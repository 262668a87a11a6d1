"""CSV files a spreadsheet opens without running anything a student wrote.

A cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is
a formula to Excel, LibreOffice and Google Sheets (``=HYPERLINK(...)`` in a
student id or a notebook name becomes a live link, or worse). As OWASP's
guidance on CSV injection says, such a cell is written with a single quote in
front, which spreadsheets show as text. A cell that is a plain number (``-3``,
``+1.5``, ``2e-3``) is left as it is: a spreadsheet reads it as the number, and
no formula can hide in it. Every CSV the grader writes goes through ``writer``.
"""
from __future__ import annotations

import csv
import re

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def cell(value) -> str:
    """One cell's text, safe to open in a spreadsheet."""
    text = "" if value is None else str(value)
    if text.startswith(FORMULA_START) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


class _Writer:
    def __init__(self, out, **kwargs) -> None:
        self._writer = csv.writer(out, **kwargs)

    def writerow(self, row) -> None:
        self._writer.writerow([cell(v) for v in row])

    def writerows(self, rows) -> None:
        for row in rows:
            self.writerow(row)


def writer(out, **kwargs) -> _Writer:
    """``csv.writer(out)`` whose every cell goes through ``cell``."""
    return _Writer(out, **kwargs)
