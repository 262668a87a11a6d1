"""Pages the grader writes, safe to open whatever a submission holds, and loading nothing from outside.

Two layers:

* ``safe_markdown`` rewrites a student's markdown (answer cells, cells they
  added) before it enters an autograded notebook, so nothing that renders it
  (nbgrader's formgrader, in the instructor's Jupyter origin, or the feedback
  page) meets raw HTML or a script link: ``<``, ``>`` and ``&`` are escaped and
  ``javascript:`` / ``vbscript:`` / ``data:`` schemes are broken.
* ``sanitize_page`` rebuilds every HTML page the grader writes (feedback, the
  class and term reports, similarity): the body goes through an allow-list
  sanitizer (nh3: no script, no event handler, no ``javascript:`` link, no
  iframe, object or link element, images only embedded as ``data:image/``
  PNG, JPEG or GIF: an ``http(s)`` image is dropped), the head keeps only the
  page's title, character set and style sheets (without ``@import`` or any
  ``url()`` that is not ``data:``). The page has no script at all.

**Maths without a script.** TeX in the page's text (``$...$``, ``$$...$$``,
``\\(...\\)``, ``\\[...\\]``; not in code) is turned into MathML here, when the
page is written (latex2mathml), and browsers typeset MathML themselves
(Chromium, Firefox, Safari): a page works offline, alone, and from nbgrader's
exchange, which hands students the one HTML file. The MathML goes through the
same allow-list (MathML's elements, their presentation attributes; no link, no
style). TeX that cannot be converted stays as its source text.
"""
from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from xml.etree import ElementTree

import nh3

_SCHEME = re.compile(r"(?i)(j\s*a\s*v\s*a|v\s*b)\s*s\s*c\s*r\s*i\s*p\s*t\s*:|d\s*a\s*t\s*a\s*:")
TAGS = {
    "a", "abbr", "b", "blockquote", "br", "code", "dd", "div", "dl", "dt", "em", "h1", "h2", "h3", "h4", "h5",
    "h6", "hr", "i", "img", "kbd", "li", "ol", "p", "pre", "s", "samp", "small", "span", "strong", "sub", "sup",
    "table", "tbody", "td", "tfoot", "th", "thead", "tr", "u", "ul",
}
ATTRIBUTES = {"*": {"class", "id", "title"}, "a": {"href", "name"}, "img": {"src", "alt", "width", "height"},
              "td": {"colspan", "rowspan"}, "th": {"colspan", "rowspan"}}
MATH_TAGS = {
    "math", "annotation", "menclose", "merror", "mfenced", "mfrac", "mi", "mmultiscripts", "mn", "mo", "mover",
    "mpadded", "mphantom", "mprescripts", "mroot", "mrow", "ms", "mspace", "msqrt", "mstyle", "msub", "msubsup",
    "msup", "mtable", "mtd", "mtext", "mtr", "munder", "munderover", "none", "semantics",
}
_MATH_ATTRIBUTES = {
    "accent", "accentunder", "close", "columnalign", "columnlines", "columnspacing", "columnspan", "depth",
    "display", "displaystyle", "fence", "form", "frame", "height", "largeop", "linethickness", "lspace",
    "mathcolor", "mathsize", "mathvariant", "maxsize", "minsize", "movablelimits", "notation", "open",
    "rowalign", "rowlines", "rowspacing", "rowspan", "rspace", "scriptlevel", "separator", "separators",
    "stretchy", "symmetric", "voffset", "width",
}
MAX_FORMULAS = 5_000  # per page; beyond that the TeX stays as text
MAX_FORMULA = 2_000  # characters of one formula
_MATH = re.compile(
    r"(?<!\\)\$\$(?P<display>.+?)(?<!\\)\$\$"  # $$ ... $$
    r"|\\\[(?P<display2>.+?)\\\]"  # \[ ... \]
    r"|\\\((?P<inline2>.+?)\\\)"  # \( ... \)
    r"|(?<![\\$])\$(?P<inline>[^\s$](?:[^$\n]*?[^\s$\\])?)\$(?![0-9$])",  # $x$ as pandoc reads it
    re.S)
_SKIP = {"pre", "code", "kbd", "samp", "style", "title", "math"}


MAX_MARKDOWN = 20_000  # characters of one student markdown cell that a page renders (maths parsing
# in nbconvert's markdown is quadratic on some inputs: 20,000 characters stay within seconds)


def safe_markdown(text: str, limit: int = MAX_MARKDOWN) -> str:
    """A student's markdown with raw HTML shown as text, script-capable link schemes broken, and
    cut to ``limit`` characters."""
    text = str(text)
    cut = len(text) - limit
    text = text[:limit].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _SCHEME.sub("blocked-scheme:", text)
    return text + (f"\n\n[cut by the grader: {cut} more characters]" if cut > 0 else "")


def _attribute_filter(tag: str, attribute: str, value: str) -> str | None:
    if tag == "img" and attribute == "src":  # embedded images only: a page loads nothing from outside
        return value if value.startswith(("data:image/png", "data:image/jpeg", "data:image/gif")) else None
    return value


def _clean(fragment: str, tags: set[str], attributes: dict) -> str:
    return nh3.clean(fragment, tags=tags, attributes=attributes, url_schemes={"http", "https", "mailto", "data"},
                     attribute_filter=_attribute_filter, link_rel="noopener noreferrer", strip_comments=True)


def sanitize_body(fragment: str) -> str:
    """The allow-list (no script, no outside resource), then TeX as MathML, then the allow-list again."""
    return _clean(typeset(_clean(fragment, TAGS, ATTRIBUTES)), TAGS | MATH_TAGS,
                  {**ATTRIBUTES, **{tag: _MATH_ATTRIBUTES for tag in MATH_TAGS}})


def _formula(tex: str, display: bool) -> str | None:
    from latex2mathml.converter import convert

    if len(tex) > MAX_FORMULA:
        return None
    try:
        mathml = convert(tex, display="block" if display else "inline")
        # latex2mathml copies \\text{...} as it is: only well-formed MathML, nothing but MathML, is kept
        tree = ElementTree.fromstring(mathml)
    except Exception:  # noqa: BLE001 - TeX latex2mathml cannot read stays as text
        return None
    if any(node.tag.rpartition("}")[2] not in MATH_TAGS for node in tree.iter()):
        return None
    return mathml


def _typeset_text(text: str, budget: list[int]) -> str:
    out, last = [], 0
    for found in _MATH.finditer(text):
        if budget[0] <= 0:
            break
        display = found.group("display") is not None or found.group("display2") is not None
        tex = next(g for g in (found.group("display"), found.group("display2"), found.group("inline2"),
                               found.group("inline")) if g is not None)
        mathml = _formula(tex, display)
        if mathml is None:
            continue
        budget[0] -= 1
        out.append(html.escape(text[last:found.start()], quote=False))
        out.append(mathml)
        last = found.end()
    out.append(html.escape(text[last:], quote=False))
    return "".join(out)


class _Typesetter(HTMLParser):
    """Sanitized HTML in, the same HTML out with the TeX of its text (outside code) as MathML."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.text: list[str] = []
        self.skipping: list[str] = []
        self.budget = [MAX_FORMULAS]

    def _flush(self) -> None:
        if self.text:
            text = "".join(self.text)
            self.out.append(html.escape(text, quote=False) if self.skipping else _typeset_text(text, self.budget))
            self.text = []

    def handle_starttag(self, tag, attrs) -> None:
        self._flush()
        self.out.append(self.get_starttag_text())
        if tag in _SKIP:
            self.skipping.append(tag)

    def handle_startendtag(self, tag, attrs) -> None:
        self._flush()
        self.out.append(self.get_starttag_text())

    def handle_endtag(self, tag) -> None:
        self._flush()
        if tag in self.skipping:
            while self.skipping and self.skipping.pop() != tag:
                pass
        self.out.append(f"</{tag}>")

    def handle_data(self, data) -> None:
        self.text.append(data)

    def close(self) -> str:
        super().close()
        self._flush()
        return "".join(self.out)


def typeset(fragment: str) -> str:
    """TeX in the text of sanitized HTML as MathML (code, pre and existing maths left alone)."""
    if "$" not in fragment and "\\(" not in fragment and "\\[" not in fragment:
        return fragment
    parser = _Typesetter()
    parser.feed(fragment)
    return parser.close()


_CSS_IMPORT = re.compile(r"@import[^;]*;?", re.I)
_CSS_URL = re.compile(r"url\(\s*(?![\"']?\s*data:)[^)]*\)", re.I)


def local_css(css: str) -> str:
    """A style sheet that loads nothing: no @import, no url() but data: ones."""
    return _CSS_URL.sub("none", _CSS_IMPORT.sub("", css))


def sanitize_page(page: str, title: str = "Feedback") -> str:
    """A whole HTML page rebuilt from its style sheets and its sanitized body."""
    head = re.search(r"<head[^>]*>(.*?)</head>", page, re.S | re.I)
    body = re.search(r"<body[^>]*>(.*)</body>", page, re.S | re.I)
    styles = re.findall(r"<style[^>]*>(.*?)</style>", head.group(1) if head else "", re.S | re.I)
    found_title = re.search(r"<title[^>]*>(.*?)</title>", head.group(1) if head else "", re.S | re.I)
    title = html.unescape(re.sub(r"<[^>]+>", "", found_title.group(1))) if found_title else title
    css = "".join(f"<style>{local_css(s)}</style>\n" for s in styles if "<" not in s)
    return ("<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n{css}</head>\n<body>\n"
            f"{sanitize_body(body.group(1) if body else page)}\n</body>\n</html>\n")


def simple_page(title: str, paragraphs: list[str], items: list[str] | None = None) -> str:
    """A plain page from text (escaped here), e.g. the page of a notebook that could not be graded."""
    body = f"<h1>{html.escape(title)}</h1>" + "".join(f"<p>{html.escape(p)}</p>" for p in paragraphs)
    if items:
        body += "<ul>" + "".join(f"<li>{html.escape(i)}</li>" for i in items) + "</ul>"
    return sanitize_page(f"<html><head><title>{html.escape(title)}</title></head><body>{body}</body></html>", title)
