"""Does a summary keep a KEEP item? One rule per item kind, all exact after normalisation.

Accepted forms (everything is compared after :func:`patterns.norm`: straight quotes, runs
of whitespace collapsed, markdown escapes undone):

* strings (code lines, signatures, test ids, TODOs, user spans): the item's text is
  a substring of the summary. Trailing ``.``/``,``/``;``/``:`` and, for code, a trailing
  ``{`` are ignored. User intent and open items compare case-insensitively; code and
  errors are case-sensitive.
* path with line: ``path:12``, ``path:12:5``, ``path(12,5)``, ``path line 12``,
  ``path, line 12``, ``path (line 12)``, ``line 12 of path`` and a tight range
  ``path:10-14`` (at most 20 lines) containing 12. The summary's path may be a suffix of
  the source path or the reverse, at a component boundary (``src/a.py`` ~
  ``/repo/src/a.py``), but the file name must be the same.
* versions: the number itself (``4.17.21``), with or without the source's operator
  (``^``, ``==``, ``~``); not as part of a longer version.
* numbers with units: the number and the unit, optionally one space apart (``512 MiB`` ~
  ``512MiB``).
* settings: the key, then within 24 characters on the same line the value (``KEY=v``,
  ``KEY: v``, ``KEY set to v``).
* test counts: every ``N word`` pair of the line (``1 failed``, ``49 passed``) within an
  80-character window, in any order.
* decisions: at least max(2, two thirds of) the decision's key terms, the first one included,
  within a window of ``decision_window_chars`` that also holds a rationale marker.
* refs: the ref (``m00012``, also written ``m12``) is cited; for a small range any of its
  refs is enough. Block ids (``b3``) likewise.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cached_property

from .items import KeepItem
from .messages import REF_RE
from .patterns import PATH, find_path_lines, norm, path_suffix_match
from .prose import RATIONALE_RE

__all__ = ["Summary", "item_kept"]

_TRAIL = ".,;: "
_RANGE = re.compile(PATH.replace("((", "(?P<path>(", 1) + r":(?P<a>\d+)-(?P<b>\d+)")
_BLOCK = re.compile(r"(?<![A-Za-z0-9_])b(\d{1,9})(?![A-Za-z0-9_])")


@dataclass
class Summary:
    """A summary prepared once for many item checks."""

    raw: str

    @cached_property
    def text(self) -> str:
        return norm(self.raw)

    @cached_property
    def lower(self) -> str:
        return self.text.lower()

    @cached_property
    def path_lines(self) -> list[tuple[str, int]]:
        out = [(p, ln) for p, ln, _ in find_path_lines(self.text)]
        for m in _RANGE.finditer(self.text):
            a, b = int(m.group("a")), int(m.group("b"))
            if 0 <= b - a <= 20:
                out += [(m.group("path"), n) for n in range(a, b + 1)]
        return out

    @cached_property
    def refs(self) -> set[str]:
        return {f"m{int(g):05d}" for g in REF_RE.findall(self.text)}

    @cached_property
    def blocks(self) -> set[str]:
        return {f"b{int(g)}" for g in _BLOCK.findall(self.text)}


def _strip(s: str, code: bool) -> str:
    s = norm(s).rstrip(_TRAIL)
    if code:
        s = s.rstrip("{").rstrip(_TRAIL)
    return s


def _contains(summary: Summary, needle: str, *, code: bool, case: bool) -> bool:
    needle = _strip(needle, code)
    if not needle:
        return False
    return needle in summary.text if case else needle.lower() in summary.lower


def _error_prefix(needle: str) -> str:
    """The part of an error string a summary must quote: its first 60%, at least 40 chars."""
    needle = _strip(needle, False)
    k = max(min(len(needle), 40), math.ceil(0.6 * len(needle)))
    return needle[:k]


def _number_re(num: str) -> str:
    return r"(?<![\w.])" + re.escape(num)


def _pairs_in_window(summary: Summary, pairs: list[str], window: int) -> bool:
    if not pairs:
        return False
    hits = []
    for p in pairs:
        pos = [m.start() for m in re.finditer(_number_re(p.split()[0]) + r"\s" + re.escape(p.split()[1]) + r"\b",
                                             summary.text)]
        if not pos:
            return False
        hits.append(pos)
    return any(all(any(abs(q - p0) <= window for q in ps) for ps in hits[1:]) for p0 in hits[0])


def _decision_kept(summary: Summary, terms: list[str], window: int) -> bool:
    if len(terms) < 1:
        return False
    need = max(2, math.ceil(2 * len(terms) / 3)) if len(terms) >= 2 else 1
    low = summary.lower
    first = terms[0].lower()
    for m in re.finditer(re.escape(first), low):
        lo, hi = max(0, m.start() - window), m.end() + window
        span = low[lo:hi]
        if not RATIONALE_RE.search(span):
            continue
        if sum(1 for t in terms if t.lower() in span) >= need:
            return True
    return False


def item_kept(item: KeepItem, summary: Summary, *, decision_window: int = 240,
              counts_window: int = 80) -> bool:
    """True if ``summary`` keeps ``item`` under the rule for its kind (module docstring)."""
    f = item.fields
    kind = item.kind
    if "path" in f and "line" in f:
        return any(ln == f["line"] and path_suffix_match(p, f["path"]) for p, ln in summary.path_lines)
    if kind == "version":
        return re.search(_number_re(f["version"]) + r"(?![\w]|\.\d)", summary.text) is not None
    if kind == "unit_value":
        pat = _number_re(f["number"]) + r"\s?" + re.escape(f["unit"]) + r"(?![\w])"
        return re.search(pat, summary.text) is not None
    if kind == "setting":
        pat = (r"(?<![\w-])" + re.escape(f["key"]) + r"(?![\w-])[^\n]{0,24}?"
               + r"(?<![\w.])" + re.escape(f["value"]) + r"(?![\w]|\.\w)")
        return re.search(pat, summary.text) is not None
    if kind == "test_counts":
        return _pairs_in_window(summary, f["counts"], counts_window)
    if kind == "decision":
        return _decision_kept(summary, f["terms"], decision_window)
    if kind in ("ref_first", "ref_last", "ref_any"):
        return bool(summary.refs & set(f["refs"]))
    if kind == "block_ref":
        return bool(summary.blocks & set(f["refs"]))
    needle = f.get("needle", item.text)
    if item.cls == "error_strings":
        return _contains(summary, _error_prefix(needle), code=False, case=True)
    if item.cls in ("user_intent", "open_questions"):
        return _contains(summary, needle, code=False, case=False)
    return _contains(summary, needle, code=item.cls == "signatures", case=True)
