"""Pages the grader writes, safe to open whatever a submission holds.

Two layers:

* ``safe_markdown`` rewrites a student's markdown (answer cells, cells they
  added) before it enters an autograded notebook, so nothing that renders it
  (nbgrader's formgrader, in the instructor's Jupyter origin, or the feedback
  page) meets raw HTML or a script link: ``<``, ``>`` and ``&`` are escaped and
  ``javascript:`` / ``vbscript:`` / ``data:`` schemes are broken.
* ``sanitize_page`` rebuilds every HTML page the grader writes: the body goes
  through an allow-list sanitizer (nh3: no script, no event handler, no
  ``javascript:`` link, images only from ``data:image/`` or http(s)), the head
  keeps only the page's title, character set and style sheets, and the one
  script that remains is the grader's own MathJax loader, with MathJax's ``safe``
  extension (no script links from TeX either).
"""
from __future__ import annotations

import html
import re

import nh3

_SCHEME = re.compile(r"(?i)(j\s*a\s*v\s*a|v\s*b)\s*s\s*c\s*r\s*i\s*p\s*t\s*:|d\s*a\s*t\s*a\s*:")
TAGS = {
    "a", "abbr", "b", "blockquote", "br", "code", "dd", "div", "dl", "dt", "em", "h1", "h2", "h3", "h4", "h5",
    "h6", "hr", "i", "img", "kbd", "li", "ol", "p", "pre", "s", "samp", "small", "span", "strong", "sub", "sup",
    "table", "tbody", "td", "tfoot", "th", "thead", "tr", "u", "ul",
}
ATTRIBUTES = {"*": {"class", "id", "title"}, "a": {"href", "name"}, "img": {"src", "alt", "width", "height"},
              "td": {"colspan", "rowspan"}, "th": {"colspan", "rowspan"}}
MATHJAX = (
    "<script>window.MathJax = {loader: {load: ['ui/safe']}, "
    "tex: {inlineMath: [['$', '$'], ['\\\\(', '\\\\)']], processEscapes: true}, "
    "options: {safeOptions: {allow: {URLs: 'safe', classes: 'safe', cssIDs: 'safe', styles: 'safe'}}}};</script>\n"
    '<script src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-chtml-full.js" async></script>\n'
)


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
    if tag == "img" and attribute == "src":
        return value if value.startswith(("data:image/png", "data:image/jpeg", "data:image/gif", "https://", "http://")) \
            and not value.startswith("data:image/svg") else None
    return value


def sanitize_body(fragment: str) -> str:
    return nh3.clean(fragment, tags=TAGS, attributes=ATTRIBUTES, url_schemes={"http", "https", "mailto", "data"},
                     attribute_filter=_attribute_filter, link_rel="noopener noreferrer", strip_comments=True)


def sanitize_page(page: str, title: str = "Feedback") -> str:
    """A whole HTML page rebuilt from its style sheets and its sanitized body."""
    head = re.search(r"<head[^>]*>(.*?)</head>", page, re.S | re.I)
    body = re.search(r"<body[^>]*>(.*)</body>", page, re.S | re.I)
    styles = re.findall(r"<style[^>]*>(.*?)</style>", head.group(1) if head else "", re.S | re.I)
    found_title = re.search(r"<title[^>]*>(.*?)</title>", head.group(1) if head else "", re.S | re.I)
    title = html.unescape(re.sub(r"<[^>]+>", "", found_title.group(1))) if found_title else title
    css = "".join(f"<style>{s}</style>\n" for s in styles if "<" not in s)
    return ("<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n{css}{MATHJAX}</head>\n<body>\n"
            f"{sanitize_body(body.group(1) if body else page)}\n</body>\n</html>\n")


def simple_page(title: str, paragraphs: list[str], items: list[str] | None = None) -> str:
    """A plain page from text (escaped here), e.g. the page of a notebook that could not be graded."""
    body = f"<h1>{html.escape(title)}</h1>" + "".join(f"<p>{html.escape(p)}</p>" for p in paragraphs)
    if items:
        body += "<ul>" + "".join(f"<li>{html.escape(i)}</li>" for i in items) + "</ul>"
    return sanitize_page(f"<html><head><title>{html.escape(title)}</title></head><body>{body}</body></html>", title)
