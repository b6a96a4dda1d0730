"""Load-bearing terms of a piece of text, and how much of them a summary line keeps.

A faithful paraphrase changes the words around an item but keeps what carries its meaning:
identifiers, paths, quoted literals, numbers and the content words. :func:`terms` reads
those out of a text (identifiers whole, plain words lightly stemmed so ``parsing`` meets
``parse``), and :func:`best_share` finds the summary unit (a line, or two adjacent lines)
that holds the largest weighted share of them. Identifiers and numbers weigh twice a word.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["best_share", "norm_number", "stem", "summary_units", "terms"]

_STOP = set(
    "a an the and or but of to in on at for with by from as is are was were be been being it its "
    "this that these those i we you he she they me us my our your their will would should can "
    "could may might must shall do does did done not no so than then there here what which who "
    "when where why how all any some more most other into over under about also just only very "
    "use using used let lets ll ve re s t going want need have has had get got make now still "
    "yet one two new same such each both per via out up down off again once if else".split()
)
# Code-like tokens kept whole: dotted names, snake_case, CamelCase, calls, paths, versions.
_TOKEN = re.compile(
    r"[A-Za-z_$][\w$]*(?:(?:\.|::|/)[A-Za-z_$][\w$]*)+(?:\(\))?"  # dotted / path-like names
    r"|[A-Za-z_$][\w$]*\(\)"  # calls
    r"|\d+(?:[_,]\d{3})*(?:\.\d+)*[A-Za-z%]*"  # numbers (with separators and a unit)
    r"|[A-Za-z_$][\w$]*"  # words and identifiers
)
_CODE = re.compile(r"[_$.:/()]|[a-z][A-Z]|\d")
_SUFFIX = re.compile(r"(?:ing|ed|es|e|s)$")


@lru_cache(maxsize=8192)
def stem(word: str) -> str:
    """A crude stem: lower-case, one common suffix off, at most six characters."""
    w = word.lower()
    if len(w) > 4:
        w = _SUFFIX.sub("", w)
    return w[:6]


def norm_number(tok: str) -> str:
    """``60_000`` / ``60,000`` -> ``60000``; other tokens unchanged."""
    return re.sub(r"(?<=\d)[_,](?=\d{3})", "", tok)


def _key(tok: str) -> tuple[str, bool]:
    if _CODE.search(tok):
        return norm_number(tok).lower().rstrip("()"), True
    return stem(tok), False


def terms(text: str) -> dict[str, float]:
    """The weighted terms of ``text``: ``{term: weight}`` (2 for code-like, 1 for words).

    A hyphenated word also counts by its parts (``top-level`` ~ ``top level``).
    """
    out: dict[str, float] = {}
    for raw in _TOKEN.findall(text.replace("`", " ")):
        if raw.lower() in _STOP or (len(raw) < 3 and not raw[0].isdigit()):
            continue
        key, code = _key(raw)
        if not key:
            continue
        out[key] = max(out.get(key, 0.0), 2.0 if code else 1.0)
    return out


def _unit_keys(text: str) -> set[str]:
    keys = set()
    for raw in _TOKEN.findall(text.replace("`", " ")):
        key, code = _key(raw)
        keys.add(key)
        if code:
            # A dotted name also offers its last part (``decimal.InvalidOperation`` ~ ``InvalidOperation``).
            for part in re.split(r"[./:]+", key):
                if part:
                    keys.add(part)
                    keys.add(stem(part))
    return keys


_UNIT_SPLIT = re.compile(r"\n+|(?<=[.;!?])\s+(?=[A-Z(\"'`-])")


def summary_units(summary: str) -> list[set[str]]:
    """Term sets of the summary's lines, and of the sentences within them: an item is kept
    where one line says it, not by words gathered from all over the summary."""
    lines = [ln for ln in summary.split("\n") if ln.strip()]
    parts = [p for p in _UNIT_SPLIT.split(summary) if p.strip()]
    return [_unit_keys(p) for p in dict.fromkeys(lines + parts)]


def best_share(item_terms: dict[str, float], units: list[set[str]]) -> float:
    """The largest weighted share of ``item_terms`` that one summary unit holds."""
    total = sum(item_terms.values())
    if not total or not units:
        return 0.0
    best = 0.0
    for u in units:
        got = sum(w for t, w in item_terms.items() if t in u)
        if got > best:
            best = got
            if best >= total:
                break
    return best / total
