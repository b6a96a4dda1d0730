"""Changes a range records (``2.4.1 => 2.6.3``) and a summary that records another outcome.

Package managers, migrations and edits print a change as an old value, an arrow and a new one:
composer ``Upgrading northwind/currency (2.4.1 => 2.6.3)``, cargo ``Updating serde v1.0.1 ->
v1.0.3``, ``retries 2 -> 4``, npm's "from 1.2.0 to 1.4.1". A summary that writes the same old
value with a different new one (``2.4.1 => 3.1.0``: the major the tool refused) reports an
outcome that did not happen, even when every number it writes is somewhere in the range.

A quoted line is a record too: ```UInt64(millis) * 1_000``` where the edit wrote ``* 1_000_000``
matches a source line in everything but its numbers (``altered_quotes``).

A quote can be altered without a number: two names swapped (``(created_at, customer_id)`` for
the migration's ``(customer_id, created_at)``) or one name replaced (``(keyword tier)`` for the
edit's ``(name tier)``) in a span that otherwise matches a source line token for token
(``misquoted``); a shortened quote (tokens left out) is no misquote.

A test run's counts are outcomes too: a summary's ``9 examples, 0 failures`` where every run in
the range printed ``1 failure`` reports a green run that never happened (``altered_counts``).
"""

from __future__ import annotations

import re

from .attribution import json_unescaped
from .patterns import CODE_SPAN
from .terms import norm_number

__all__ = ["altered_changes", "altered_counts", "altered_quotes", "changes", "misquoted"]

_VALUE = r"[vV]?(?P<{}>\d+(?:[_,]\d{{3}})*(?:\.\d+)*(?:[-+][\w.]+)?)"
_ARROW = re.compile(r"(?<![\w.])" + _VALUE.format("old") + r"\s*(?:=>|->|→)\s*" + _VALUE.format("new")
                    + r"(?![\w])")
_FROM_TO = re.compile(r"\bfrom\s+" + _VALUE.format("old") + r"\s+to\s+" + _VALUE.format("new") + r"(?![\w])",
                      re.I)


def changes(text: str) -> list[tuple[str, str]]:
    """Every ``old -> new`` change written in ``text``, in order (numbers normalised)."""
    flat = norm_number(text)
    found = []
    for rx in (_ARROW, _FROM_TO):
        for m in rx.finditer(flat):
            pair = (m.group("old"), m.group("new"))
            if pair[0] != pair[1] and pair not in found:
                found.append(pair)
    return found


def altered_changes(summary: str, source_texts: list[str]) -> list[str]:
    """The summary's changes whose old value the range changed to something else."""
    source = [p for t in source_texts for p in changes(t)]
    outcomes: dict[str, list[str]] = {}
    for old, new in source:
        outcomes.setdefault(old, []).append(new)
    out = []
    for old, new in changes(summary):
        if old in outcomes and new not in outcomes[old]:
            out.append(f"{old} -> {new} (source: {old} -> {', '.join(outcomes[old])})")
    return out


_COUNT_NOUN = {"failed": "failed", "failure": "failed", "failures": "failed", "failing": "failed",
               "passed": "passed", "passing": "passed", "error": "error", "errors": "error",
               "skipped": "skipped"}
_NOUNS = "|".join(sorted(_COUNT_NOUN, key=len, reverse=True))
# "1 failure", "0 failed" (not "changed=3 failed=0": a key=value row is read the other way).
_NUM_NOUN = re.compile(r"(?<![\w.=:])(?P<n>\d+)\s+(?P<w>" + _NOUNS + r")\b(?![=:])", re.I)
_NOUN_NUM = re.compile(r"\b(?P<w>" + _NOUNS + r")(?:\(s\))?(?:\s*[:=]\s*|\s+)(?P<n>\d+)\b", re.I)


def _counts(text: str, both_orders: bool) -> list[tuple[str, str]]:
    found = [(_COUNT_NOUN[m.group("w").lower()], m.group("n")) for m in _NUM_NOUN.finditer(text)]
    if both_orders:  # "Failed:     1, Passed:    17" (dotnet), "Tests: 7, Failures: 1" (PHPUnit)
        found += [(_COUNT_NOUN[m.group("w").lower()], m.group("n")) for m in _NOUN_NUM.finditer(text)]
    return found


def altered_counts(summary: str, source_texts: list[str]) -> list[str]:
    """The summary's test counts (``0 failures``) that no run in the range printed for that kind."""
    seen: dict[str, set[str]] = {}
    for t in source_texts:
        for kind, n in _counts(t, both_orders=True):
            seen.setdefault(kind, set()).add(n)
    out = []
    for kind, n in _counts(summary, both_orders=False):
        if kind in seen and n not in seen[kind]:
            got = f"{n} {kind} (source: {', '.join(sorted(seen[kind], key=int))})"
            if got not in out:
                out.append(got)
    return out


_QUOTE = re.compile(r"`([^`\n]{12,})`")
# A line that proposes ("Next: use `${{ matrix.version }}`", "should read `timeout = 60`") quotes
# what is to be written, not what the range holds.
_PROPOSES = re.compile(r"\b(?:next|propos\w*|will|would|should|could|suggest\w*|plan\w*|instead|to be|todo)\b", re.I)


def _recorded_quotes(summary: str):
    """The backticked quotes of the summary's lines that record rather than propose."""
    for line in summary.split("\n"):
        if not _PROPOSES.search(CODE_SPAN.sub(" ", line)):
            yield from _QUOTE.finditer(line)
_QUOTE_NUM = re.compile(r"\d+(?:[_,]\d+)*(?:\.\d+)?")


def altered_quotes(summary: str, source_texts: list[str]) -> list[str]:
    """Backticked quotes that match a source text except for their numbers."""
    flat = [" ".join(norm_number(json_unescaped(t)).split()) for t in source_texts]
    out = []
    for m in _recorded_quotes(summary):
        quote = " ".join(norm_number(m.group(1)).split())
        nums = _QUOTE_NUM.findall(quote)
        if not nums or any(quote in t for t in flat):
            continue
        parts = _QUOTE_NUM.split(quote)
        if sum(len(p.strip()) for p in parts) < 10:  # mostly numbers: no shape to match
            continue
        pat = re.compile(r"(?<![\d.])" + r"(\d+(?:[_,]\d+)*(?:\.\d+)?)".join(map(re.escape, parts)) + r"(?![\d])")
        hit = next((h for t in flat for h in pat.finditer(t)), None)
        if hit is not None:
            out.append(f"`{quote[:60]}` (source: `{hit.group(0)[:60]}`)")
    return out


_TOKEN = re.compile(r"\w+|[^\w\s]")


def misquoted(summary: str, source_texts: list[str]) -> list[str]:
    """Backticked quotes that match a run of a source line's tokens but for two swapped tokens
    or one replaced name (numbers are :func:`altered_quotes`'s)."""
    quotes = []
    flat = [" ".join(json_unescaped(t).split()) for t in source_texts]
    for m in _recorded_quotes(summary):
        q = " ".join(m.group(1).split())
        toks = _TOKEN.findall(q)
        words = {t for t in toks if t[0].isalpha() or t[0] == "_"}
        if len(toks) >= 5 and len(words) >= 2 and not any(q in t for t in flat):
            quotes.append((q, toks, words))
    if not quotes:
        return []
    lines = [(ln, _TOKEN.findall(ln)) for t in flat for ln in json_unescaped(t).split("\n") if ln.strip()]
    lines = [(ln, toks, set(toks)) for ln, toks in lines]
    out = []
    for q, toks, words in quotes:
        n = len(toks)
        for _ln, ltoks, lset in lines:
            if len(words - lset) > 1 or len(ltoks) < n:
                continue
            hit = None
            wins = [ltoks[i:i + n] for i in range(len(ltoks) - n + 1)]
            if toks in wins:  # the quote is there, spaced otherwise
                break
            for win in wins:
                diff = [k for k in range(n) if win[k] != toks[k]]
                if len(diff) == 2 and sorted(win) == sorted(toks) and all(win[k][0].isalpha() for k in diff):
                    hit = win  # two names swapped
                elif len(diff) == 1 and 0 < diff[0] < n - 1 and win[diff[0]][0].isalpha() \
                        and toks[diff[0]][0].isalpha():
                    hit = win  # one name replaced inside the quote (its edges are where quoting starts)
                if hit:
                    break
            if hit:
                out.append(f"`{q[:60]}` (source: `{' '.join(hit)[:60]}`)")
                break
    return out
