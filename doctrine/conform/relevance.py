"""Which of a range's printed values the task needs: the ones said again in prose.

A tool's output holds many values a reader passes over: a banner's version, a test's timing,
the pool size in a config view beside the rate the task is about. When the agent (or the user)
later writes some of those values in prose, that prose says which ones matter:

* a value a tool printed and later prose restates is needed: its salience rises to at least
  ``S_RESTATED``;
* a number a tool printed that no other rule reads (an assertion's ``Expected: 3221225472``,
  a config default ``"0.05"``) becomes a value to keep when later prose restates it
  (``S_RESTATED_NUMBER``);
* once prose has restated any printed value, the printed values it leaves out whose salience
  is under ``S_PASSING_CEILING`` were read in passing and fall under the keep floor. Stronger
  readings (an error line, a query's one-number answer, a threshold named on its line, a
  value the agent wrote in an edit) are untouched.

A range whose prose restates nothing printed keeps the plain reading: with no one saying what
mattered, every printed value stays a candidate. Places are read the same way: when the prose
names places (``report.ml line 42``), a path:line a tool printed at the weakest reading (a grep
hit, a backtrace's frame in a test harness) that the prose does not name was read in passing.
"""

from __future__ import annotations

import re

from .items import Collector, KeepItem
from .messages import SourceMessage
from .terms import norm_number

__all__ = ["S_PASSING", "S_RESTATED", "S_RESTATED_NUMBER", "weigh_by_restatement"]

S_RESTATED = 0.6  # a printed value the prose said again
S_RESTATED_NUMBER = 0.55  # a bare printed number the prose said again
S_PASSING_CEILING = 0.5  # printed values under this, never restated, were read in passing
S_PASSING = 0.2  # where they go: under the doctrine's 0.3 keep floor

_PRINTED = {"tool-result", "tool-call"}
# A number as a reader restates it: 3221225472, 5_368_709_120, 0.025, 25.00 (not a time's
# 00:04.17, a path's :31, a version's 8.1.27 part or an id's digits).
_NUMBER = re.compile(r"(?<![\w.:/-])\d[\d_,]*(?:\.\d+)?(?![\w]|\.\d|[:/-]\d)")


def _token(num: str) -> re.Pattern[str]:
    return re.compile(r"(?:(?<![\w.])|(?<=(?<![\w.])[vV]))" + re.escape(num) + r"(?![\w]|\.\d)")


def _significant(num: str) -> bool:
    digits = re.sub(r"\D", "", num)
    return len(digits) >= 4 or ("." in num and len(digits) >= 3)


def _label(text: str, num: str) -> str | None:
    """The field name a printed number stands under (``Expected: 3221225472``,
    ``maxmemory = 2147483648``), or None when it stands in prose or a call."""
    for line in norm_number(text).split("\n"):
        m = re.search(r"(?<![\w.-])(?P<key>[A-Za-z_][\w.-]*)[\"']?\s*[:=]\s*[\"']?" + re.escape(num)
                      + r"(?![\w]|\.\d)", line)
        if m:
            return m.group("key")
    return None


def _needle(item: KeepItem) -> re.Pattern[str] | None:
    """How prose restates ``item``: a setting by its key, a number or version as a token."""
    f = item.fields
    if item.kind == "setting" and f.get("key"):
        return re.compile(r"(?<![\w-])" + re.escape(str(f["key"]).lstrip("-")) + r"(?![\w-])", re.I)
    if item.kind == "hash" and f.get("needle"):
        return re.compile(re.escape(str(f["needle"])[:7]))
    for name in ("version", "number"):
        if f.get(name):
            return _token(norm_number(str(f[name])))
    return _token(norm_number(item.text)) if item.text else None


def weigh_by_restatement(msgs: list[SourceMessage], c: Collector) -> None:
    """Apply the rules above to ``c``'s exact values (in place)."""
    prose = [(m.index, norm_number(m.text)) for m in msgs
             if m.kind in ("text", "reasoning") and m.role in ("user", "assistant") and m.text]
    if not prose:
        return
    where = {}
    for m in msgs:
        where.setdefault(m.key, m)

    def restated(after: int, pat: re.Pattern[str]) -> bool:
        return any(i > after and pat.search(t) for i, t in prose)

    printed: list[KeepItem] = []
    said = False
    for item in c.items():
        src = where.get(item.message)
        if item.cls != "exact_values" or src is None or src.kind not in _PRINTED:
            continue
        pat = _needle(item)
        if pat is not None and restated(src.index, pat):
            item.salience = max(item.salience, S_RESTATED)
            said = True
        else:
            printed.append(item)

    # Bare numbers a tool printed and the prose restated; numbers some item already holds
    # (a setting's value, a place's line) are read through that item. A number printed as a
    # labelled field (``Expected: 3221225472``) keeps its label, so a summary that gives the
    # label another of the range's numbers (Expected and Actual swapped) alters a value.
    held = {norm_number(n) for it in c.items() for n in _NUMBER.findall(it.text)}
    held |= {str(it.fields.get("line")) for it in c.items() if "line" in it.fields}
    for m in msgs:
        if m.kind != "tool-result":
            continue
        later = [t for i, t in prose if i > m.index]
        if not later:
            continue
        for num in dict.fromkeys(norm_number(x) for x in _NUMBER.findall(m.text)):
            # A substring test first: a long log prints thousands of numbers the prose never names.
            if not _significant(num) or not any(num in t for t in later) \
                    or not any(_token(num).search(t) for t in later):
                continue
            said = True  # the prose picked this printed number, whichever item holds it
            if num in held:
                continue
            held.add(num)
            label = _label(m.text, num)
            c.add("exact_values", "restated", num, m.key, S_RESTATED_NUMBER, number=num, value=num,
                  **({"key": label} if label else {}))

    if said:
        for item in printed:
            if item.salience < S_PASSING_CEILING:
                item.salience = min(item.salience, S_PASSING)

    # Places: a path:line a tool printed in passing (a grep hit, a backtrace's library frame, a
    # build tool's note: the weakest reading) is read in passing too when the prose names the
    # places that matter and not this one.
    named = [it for it in c.items() if it.cls == "paths_with_lines" and it.kind == "mention"]
    if named:
        for item in c.items():
            src = where.get(item.message)
            if item.cls != "paths_with_lines" or item.kind != "output_path" or src is None:
                continue
            name = str(item.fields.get("path", "")).rsplit("/", 1)[-1]
            pat = re.compile(r"(?<![\w.-])" + re.escape(name) + r"\W{1,12}(?:line\s+)?" + str(item.fields.get("line")) + r"(?!\d)")
            if not restated(src.index, pat):
                item.salience = min(item.salience, S_PASSING)
