"""How much of a KEEP item a summary keeps: a credit in [0, 1], one rule per item kind.

Everything is compared after :func:`patterns.norm` (straight quotes, collapsed whitespace,
markdown escapes and backticks undone). Full credit:

* strings (code lines, signatures, test ids, TODOs, user spans, errors): the exact text (an
  error's first 60%, at least 40 characters) is in the summary;
* path with line: ``path:12``, ``path:12:5``, ``path(12,5)``, ``path line 12``,
  ``line 12 of path`` or a tight range ``path:10-14`` containing 12; the summary's path may
  be a suffix of the source path or the reverse, with the same file name. The file named
  without its line keeps half;
* error strings in other words: the exception type and the names in its message (an
  error line with no type: its terms); a pytest id: the test function's name; a jest test:
  the words of its name. The type alone keeps half;
* versions: the number itself, with or without its operator; numbers with units: the number
  with a unit that starts the same (``512Mi`` ~ ``512 MiB``, not ``512 MB``), half without;
* settings: the key with its full value within 24 characters on the line (digit separators
  ignored, ``60_000`` = ``60000``); the value alone keeps half; a cut value keeps nothing;
* test counts: every ``N word`` pair within an 80-character window; some of them, far apart,
  keep part;
* decisions: two thirds of the decision's key terms on one line (or two adjacent lines) with
  a reason on a line that names it (a rationale marker, or the source reason's own terms);
  the terms without a reason keep 0.4;
* goals, constraints, questions and TODOs: the content words (:mod:`.terms`) of the item,
  full at ``full_credit_share`` of them on one summary line; an item that names code keeps
  at most half without that name;
* refs and block ids: cited (for a small range any of its refs).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cached_property

from .items import KeepItem
from .messages import REF_RE
from .patterns import PATH, find_path_lines, norm, norm_path, path_suffix_match
from .prose import RATIONALE_RE
from .terms import _unit_keys, best_share, norm_number, summary_units, terms

__all__ = ["Summary", "item_credit", "item_kept"]

SIGNATURE_NAME = re.compile(
    r"\b(?:def|class|function\*?|interface|type|enum|struct|trait|fn|func|const|let)\s+(?P<name>[A-Za-z_$][\w$]*)")

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

    @cached_property
    def units(self) -> list[set[str]]:
        return summary_units(self.raw)

    @cached_property
    def unit_texts(self) -> list[tuple[str, set[str]]]:
        """Each line of the summary, then each two adjacent lines, with their term keys."""
        lines = [ln for ln in self.raw.split("\n") if ln.strip()]
        texts = lines + [lines[i] + "\n" + lines[i + 1] for i in range(len(lines) - 1)]
        return [(t, _unit_keys(t)) for t in texts]


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
    # A version may carry a leading v (v0.4.47 keeps 0.4.47); other numbers stand alone.
    return r"(?:(?<![\w.])|(?<=(?<![\w.])[vV]))" + re.escape(num)


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


def _decision_credit(summary: Summary, f: dict) -> float:
    """The decision's terms and its reason in one place of the summary (a line, or two).

    The reason counts when a rationale marker (because, since, so that...) is there, or
    when enough of the source's own reason survives in other words.
    """
    dterms = {k: 1.0 for k in (next(iter(terms(x)), x.lower()) for x in f["terms"])}
    reason = {k: w for k, w in terms(f.get("reason", "")).items() if k not in dterms}
    best = 0.0
    for text, keys in summary.unit_texts:
        share = sum(1 for t in dterms if t in keys) / max(1, len(dterms))
        if share == 0:
            continue
        # The reason must sit on a line that names the decision, not merely next to it.
        has_reason = False
        for line in text.split("\n"):
            lk = _unit_keys(line)
            if any(t in lk for t in dterms) and (
                    RATIONALE_RE.search(line) or (reason and best_share(reason, [lk]) >= 0.4)):
                has_reason = True
                break
        best = max(best, min(1.0, share / 0.67) * (1.0 if has_reason else 0.4))
    return round(best, 4)


def _word_credit(needle: str, summary: Summary, full: float) -> float:
    """Share of ``needle``'s load-bearing terms one summary unit keeps, full credit at ``full``.

    When the item names code (a path, an identifier) and the summary keeps none of those
    names, at most half of it is kept: the words around a name do not replace it.
    """
    t = terms(needle)
    if not t:
        return 0.0
    credit = min(1.0, best_share(t, summary.units) / full)
    code = [k for k, w in t.items() if w > 1]
    if code and not any(best_share({k: 1.0}, summary.units) for k in code):
        credit = min(credit, 0.5)
    return credit


_EXC_HEAD = re.compile(r"^(?P<type>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*|TS\d+|npm ERR!|fatal|error|ERROR|FATAL)\s*:\s*(?P<msg>.*)$")


_CODED_ERR = re.compile(r"^(?:error|warning)\[(?P<code>E\d{4})\]:\s*(?P<msg>.*)$")
_EXC_TYPE = re.compile(r"(?:Error|Exception|Exit|Interrupt|Warning|Failure|Fault|Timeout|Refused|Invalid\w*|"
                       r"Iteration)$|^TS\d+$|^[a-z_]+(?:\.[a-z_]+)*\.[A-Z]\w+$")


def _error_credit(item: KeepItem, summary: Summary, full: float) -> float:
    needle = item.fields.get("needle", item.text)
    if _contains(summary, _error_prefix(needle), code=False, case=True):
        return 1.0
    if item.kind == "test_id":
        if " › " in needle:  # a jest test: its name is words
            return _word_credit(needle.split(" › ", 1)[-1], summary, full)
        # A pytest id: the test function's name carries it; the file around it may change.
        name = re.split(r"::", needle)[-1].strip()
        return 1.0 if name and name in summary.text else 0.0
    m = _CODED_ERR.match(_strip(needle, False))
    if m:  # rustc error[E0502]: the code and the message's names, like an exception
        has_code = m.group("code") in summary.text
        rest = _word_credit(m.group("msg"), summary, full)
        return round(0.5 + 0.5 * rest, 4) if has_code else round(0.4 * rest, 4)
    m = _EXC_HEAD.match(_strip(needle, False))
    if m and _EXC_TYPE.search(m.group("type")):
        kind = m.group("type").rsplit(".", 1)[-1]
        has_type = re.search(r"(?<![\w])" + re.escape(kind) + r"(?![\w])", summary.text) is not None
        rest = _word_credit(m.group("msg"), summary, full) if m.group("msg").strip() else 1.0
        return round(0.5 * has_type + 0.5 * rest, 4) if has_type else round(0.4 * rest, 4)
    return _word_credit(needle, summary, full)


def _setting_credit(f: dict, summary: Summary) -> float:
    key, value = f["key"], norm_number(f["value"])
    for m in re.finditer(r"(?<![\w-])" + re.escape(key) + r"(?![\w-])", summary.text):
        tail = summary.text[m.end():m.end() + 40].split("\n", 1)[0]
        tail = norm_number(tail)
        if re.search(r"^[^\n]{0,24}?(?<![\w.])" + re.escape(value) + r"(?![\w]|\.\w)", tail):
            return 1.0
    # The value with no key keeps half of it (``5000 records`` for BATCH_SIZE=5000).
    if re.fullmatch(r"-?[\d.]+\w*", value) and len(value) >= 2 and re.search(
            r"(?<![\w.])" + re.escape(value) + r"(?![\w]|\.\d)", norm_number(summary.text)):
        return 0.5
    return 0.0


def _code_credit(item: KeepItem, summary: Summary, full: float) -> float:
    needle = item.fields.get("needle", item.text)
    if _contains(summary, needle, code=True, case=True):
        return 1.0
    m = SIGNATURE_NAME.search(needle)
    if m:
        # A signature is kept when its name is, the more of the rest the better.
        name = m.group("name")
        if re.search(r"(?<![\w$])" + re.escape(name) + r"(?![\w$])", summary.text) is None:
            return 0.0
        t = terms(needle)
        return round(0.75 + 0.25 * best_share(t, summary.units), 4) if t else 0.75
    return _word_credit(needle, summary, 0.8)


def item_credit(item: KeepItem, summary: Summary, *, counts_window: int = 80, full_share: float = 0.6) -> float:
    """How much of ``item`` the summary keeps, in [0, 1] (rules in the module docstring)."""
    f = item.fields
    kind = item.kind
    if "path" in f and "line" in f:
        if any(ln == f["line"] and path_suffix_match(p, f["path"]) for p, ln in summary.path_lines):
            return 1.0
        name = norm_path(f["path"]).rsplit("/", 1)[-1]
        return 0.5 if name and re.search(r"(?<![\w.-])" + re.escape(name) + r"(?![\w])", summary.text) else 0.0
    if kind == "version":
        return float(re.search(_number_re(f["version"]) + r"(?![\w]|\.\d)", summary.text) is not None)
    if kind == "unit_value":
        num = _number_re(f["number"])
        flat = norm_number(summary.text)  # 15_000 ms is 15000 ms
        for m in re.finditer(num + r"\s?(?P<u>[^\W\d_]+|%)", flat):
            u = m.group("u")
            if u.startswith(f["unit"]) or f["unit"].startswith(u):  # 512Mi ~ 512 MiB, not 512 MB
                return 1.0
        return 0.5 if re.search(num + r"(?![\w.])", flat) else 0.0
    if kind == "setting":
        return _setting_credit(f, summary)
    if kind == "restated":  # a printed number the prose said again: 5_368_709_120 is 5368709120
        return float(re.search(_number_re(f["number"]) + r"(?![\w]|\.\d)", norm_number(summary.text)) is not None)
    if kind == "test_counts":
        if _pairs_in_window(summary, f["counts"], counts_window):
            return 1.0
        got = sum(1 for p in f["counts"] if re.search(_number_re(p.split()[0]) + r"\s" + re.escape(p.split()[1]),
                                                     summary.text))
        # Every count far apart, or some of them: part of the result line survives.
        return round(0.75 * got / len(f["counts"]), 4) if f["counts"] else 0.0
    if kind == "decision":
        return _decision_credit(summary, f)
    if kind in ("ref_first", "ref_last", "ref_any"):
        return float(bool(summary.refs & set(f["refs"])))
    if kind == "block_ref":
        return float(bool(summary.blocks & set(f["refs"])))
    if kind == "hash":
        return float(f["needle"][:7] in summary.text)
    if item.cls == "error_strings":
        return _error_credit(item, summary, full_share)
    if item.cls in ("user_intent", "open_questions"):
        needle = f.get("needle", item.text)
        if _contains(summary, needle, code=False, case=False):
            return 1.0
        return round(_word_credit(needle, summary, full_share), 4)
    return _code_credit(item, summary, full_share)


def item_kept(item: KeepItem, summary: Summary, **kw) -> bool:
    """True if ``summary`` keeps ``item`` whole (:func:`item_credit` of 1)."""
    return item_credit(item, summary, **kw) >= 0.999
