"""What a reader cannot use: fragment lines, duplicated lines, invented and altered values.

Each summary line is read on its own (headings, ``Source:`` headers and lines that only cite
refs are skipped):

* **fragment**: fewer than three prose words once the line's anchors are taken out, and
  fewer than two anchors. Anchors are what carry a fact: a path (with or without a line),
  ``line N``, a backticked code span, an error type, a ``key=value`` / ``key: value`` pair, a
  version, a number, a test count. ``* 2.18.5``, ``* private: true``, ``* 512Mi`` and a bare
  ``path:12`` are fragments; ``src/a.py:12 `x = 1``` (a place and its content) is not.
  Two terse shapes are complete statements too: a **change** (an arrow, ``->`` or ``→``
  outside code, with an anchor on each side and at least one that is not a bare number:
  ``'src/app.ts': 'retries = 2' -> 'retries = 4'`` with each part in backticks) and an
  **act** (a line led by an edit verb such as Created, Added, Renamed, Set, with an anchor:
  ``Created 'path' with 'signature'``, backticked). ``2 -> 4`` and ``Fixed.`` stay fragments.
* **duplicate**: a line (8+ characters) that already occurred in the summary.
* **invented number**: a number of two or more digits (or with a decimal point) that
  appears nowhere in the source, after digit separators are removed (``60_000`` = ``60000``).
  Refs, block ids and ``Source:`` header figures are not counted.
* **altered value**: a setting of the source (``KEY=value``, ``key: value``) written in the
  summary with a number that the source never gave that key (``CACHE_TTL_MS=60`` for
  ``60_000``), a labelled number the prose restated given another number (``Expected``
  and ``Actual`` swapped), or a change written with an outcome the range does not record
  (``2.4.1 => 3.1.0`` where composer printed ``2.4.1 => 2.6.3``: ``changes``); **stale
  value**: a key the source changed, written only with an old value.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import asdict, dataclass, field

from .attribution import json_unescaped
from .changes import altered_changes, altered_counts, altered_quotes, misquoted
from .items import KeepItem
from .patterns import CODE_SPAN as _CODE_SPAN
from .patterns import PATH, norm
from .terms import norm_number

__all__ = ["UsabilityReport", "check_usability"]

_CAPS_HEADING = re.compile(r"^[A-Z][A-Z ,&/-]{1,40}:?$")
# A short leading label before refs ("RESTORE FROM m1-m9", "Restore from: m1", "**Refs** m1").
_LABEL = re.compile(r"^(?:\*\*[^*]+\*\*|[A-Za-z][A-Za-z ]{0,20}:|[A-Z][A-Z ]{1,20}(?= ))\s*")
_HEADING = re.compile(r"^\s*(?:#{1,6}\s|\*\*[^*]+\*\*:?\s*$|__[^_]+__\s*$)")
_SOURCE = re.compile(r"^[\s>*_`#-]*(?:Source|Topic):?", re.I)
_BULLET = re.compile(r"^\s*(?:[-*•+>]|\d+[.)])\s+")
_REF = re.compile(r"(?<![\w])[mMbB]\d{1,9}(?:\s*[-–]\s*[mMbB]?\d{1,9})?(?![\w])")
_PATH_RE = re.compile(PATH + r"(?::\d+(?:[:-]\d+)?)?")
_LINE_N = re.compile(r"\blines?\s+\d+\b", re.I)
_ERR_TYPE = re.compile(r"\b(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Warning)\b|\bTS\d{3,5}\b|\bOOMKilled\b")
_PAIR = re.compile(r"(?<![\w-])[A-Za-z_][\w.-]*\s*(?:=|:)\s*[^\s,;]+")
_NUMBER = re.compile(r"(?<![\w.])[-+^~]?\d+(?:[_,]\d{3})*(?:\.\d+)*(?:[A-Za-z%×]+)?(?![\w])")
_TEST_COUNT = re.compile(r"\b\d+ (?:passed|failed|errors?|skipped|total)\b")
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]+")
# A number, or a dotted version read whole (0.4.47, v0.4.47), so a version is never cut
# into an "invented" 0.4.
_NUM_TOKEN = re.compile(r"(?:(?<![\w.])|(?<=(?<![\w.])[vV]))\d+(?:[_,]\d{3})*(?:\.\d+)*(?![\d])")
_CONST = re.compile(r"(?<![\w.-])([A-Z][A-Z0-9]*_[A-Z0-9_]+)\s*[:=]\s*-?\d")
_ARROW = re.compile(r"\s(?:->|→)\s")
_ACT = re.compile(
    r"^(?:Created|Added|Removed|Deleted|Renamed|Moved|Changed|Replaced|Set|Raised|Lowered|Bumped|Reverted|"
    r"Wrote|Rewrote|Edited|Updated|Fixed|Extracted|Split|Merged|Exported|Installed|Upgraded|Downgraded|"
    r"Pinned|Enabled|Disabled|Introduced|Made|Marked|Restored)\b(?!\s*:)")
_HEADER_FIG = re.compile(r"\d+(?:\.\d+)?[Kk]?\s*(?:→|->)\s*\d+(?:\.\d+)?[Kk]?|\d+(?:\.\d+)?x\b")


@dataclass
class UsabilityReport:
    """Per-line findings; ``share`` is the part of the content lines a reader cannot use."""

    lines: int = 0
    fragments: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    invented_numbers: list[str] = field(default_factory=list)
    # Backticked spans (a value, a path, an error line quoted from the source) whose text is
    # in no source message: a quote the summary made up, which a later reader would trust.
    invented_quotes: list[str] = field(default_factory=list)
    # Quotes on a line citing one message that the message does not hold (attribution.py).
    misattributed: list[str] = field(default_factory=list)
    altered_values: list[str] = field(default_factory=list)
    # Lines reporting as done a step the range's closing text left to come (pending.py).
    claimed_done: list[str] = field(default_factory=list)
    stale_values: list[str] = field(default_factory=list)
    share: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


def _statement_kinds(line: str) -> int:
    """1 for a terse change (``a -> b``) or act (``Created `x```) line, else 0 (see the module doc)."""
    if _ACT.match(line) and any(r.search(line) for r in (_CODE_SPAN, _PATH_RE, _ERR_TYPE, _PAIR)):
        return 1
    outside = _CODE_SPAN.sub(lambda m: "`" + "x" * (len(m.group(0)) - 2) + "`", line)
    m = _ARROW.search(outside)
    if not m:
        return 0
    left, right = line[:m.start()], line[m.end():]

    def anchored(part: str, numbers: bool) -> bool:
        res = (_CODE_SPAN, _PATH_RE, _ERR_TYPE, _PAIR) + ((_NUMBER,) if numbers else ())
        return any(r.search(part) for r in res)

    return int(anchored(left, True) and anchored(right, True) and (anchored(left, False) or anchored(right, False)))


def _anchors(line: str) -> tuple[int, str]:
    """Number of anchor kinds in ``line`` and the line with them blanked out."""
    kinds = _statement_kinds(line)
    # A quoted message (an error or log line of four words or more) says what happened: a
    # label before it ("journalctl: `...`") makes a whole statement.
    kinds += any(len(_WORD.findall(q)) >= 4 for q in _CODE_SPAN.findall(line))
    rest = line
    for kind_re in (_CODE_SPAN, _PATH_RE, _LINE_N, _ERR_TYPE, _TEST_COUNT, _PAIR, _NUMBER):
        found = kind_re.findall(rest)
        if found:
            # A test count is a whole statement ("12 passed"); two paths name two places.
            kinds += 2 if kind_re is _TEST_COUNT else min(2, len(set(found))) if kind_re is _PATH_RE else 1
            rest = kind_re.sub(" ", rest)
    return kinds, rest


def _content_lines(summary: str) -> list[str]:
    out = []
    first = True
    for raw in summary.split("\n"):
        line = raw.strip()
        if not line:
            continue
        title, first = first and not _BULLET.match(line), False
        if title or _HEADING.match(line) or _SOURCE.match(line):
            continue
        body = _BULLET.sub("", line).strip()
        if not body or _CAPS_HEADING.match(body):
            continue
        label_free = _LABEL.sub("", body)
        if not _REF.sub("", re.sub(r"\*\*[^*]+\*\*|[(),;:.\s]|refs?", " ", label_free, flags=re.I)).strip():
            continue  # only refs ("m00012-m00020", "**Source refs** m1-m9")
        if body.endswith(":") and len(_WORD.findall(body)) <= 8 and not _NUMBER.search(body):
            continue  # a sub-heading ("Edits in src/a.py:")
        out.append(body)
    return out


# A clock time, a date-time's clock, a hash or a request id: its digit runs are no numbers a
# summary could invent or keep (``08:14:02`` is not a 14; ``42db`` in a UUID is not a 42).
_STAMP = re.compile(r"(?:(?<![\w.:/])|(?<=\dT))\d{1,2}:\d\d(?::\d\d(?:[.,]\d+)?)?Z?(?![:\w])|\b[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}\b|"
                    r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,}\b")


def _unstamped(text: str) -> str:
    return _STAMP.sub(" ", text)


def _source_numbers(texts: list[str]) -> set[str]:
    out: set[str] = set()
    for t in map(_unstamped, texts):
        for m in _NUM_TOKEN.finditer(t):
            n = norm_number(m.group(0)).replace(",", "")
            out.add(n)
            if "." in n:
                out.add(n.rstrip("0").rstrip("."))
    return out


# A code identifier the summary gives a number (``maxAttempts: 40``, ``pool_size 10``): camelCase or
# snake_case, so plain words (line 3, port 80) are not read as keys.
_IDENT_NUMBER = re.compile(r"(?<![\w-])([a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+|[a-z][a-z0-9]*(?:_[a-z0-9]+)+)"
                           r"(?:\s*[:=]\s*|\s+)-?\d")


def _setting_keys(items: list[KeepItem], texts: list[str]) -> set[str]:
    """The settings the checker found, and constants assigned a number anywhere in the source
    (``PHRASE_BOOST = 2.5``)."""
    keys = {it.fields["key"] for it in items if it.kind in ("setting", "restated") and "key" in it.fields}
    return keys | {m.group(1) for t in texts for m in _CONST.finditer(t)}


def _setting_values(keys: set[str], texts: list[str]) -> dict[str, list[str]]:
    """Every value each key takes in the source, in order of appearance (keys with none left out)."""
    out: dict[str, list[str]] = {}
    for k in keys:
        pat = re.compile(r"(?<![\w-])" + re.escape(k) + r"(?![\w-])[^\n\d]{0,12}?(?P<v>-?\d+(?:[_,]\d{3})*(?:\.\d+)*)")
        vals: list[str] = []
        for t in texts:
            for m in pat.finditer(t):
                v = norm_number(m.group("v")).replace(",", "")
                if v in vals:
                    vals.remove(v)
                vals.append(v)
        if vals:
            out[k] = vals
    return out


_SIZE_UNIT = {"k": 1024, "m": 1024 ** 2, "g": 1024 ** 3, "t": 1024 ** 4}


def _same_quantity(key: str, a: str, b: str, texts: list[str]) -> bool:
    """``a`` and ``b`` are one size written in two units somewhere in ``texts`` (``maxmemory
    4294967296``, ``maxmemory 4gb``, ``4.00G``): a restatement, not a change of value."""
    sizes: dict[str, set[float]] = {}
    pat = re.compile(r"(?<![\w-])" + re.escape(key) + r"(?![\w-])[^\n\d]{0,12}?(?P<v>\d+(?:\.\d+)?)\s?(?P<u>[KMGTkmgt])?i?[Bb]?(?![\w])")
    for t in texts:
        for m in pat.finditer(norm_number(t).replace(",", "")):
            scale = _SIZE_UNIT[m.group("u").lower()] if m.group("u") else 1
            sizes.setdefault(m.group("v"), set()).add(float(m.group("v")) * scale)
    return any(abs(x - y) <= 0.05 * max(x, y) for x in sizes.get(a, ()) for y in sizes.get(b, ()))


def _says(key: str, values: list[str], text: str) -> bool:
    pat = r"(?<![\w-])" + re.escape(key) + r"(?![\w-])[^\n\d]{0,12}?(?P<v>-?\d+(?:\.\d+)*)"
    return any(m.group("v") in values for m in re.finditer(pat, text))


def _squash(text: str) -> str:
    return " ".join(text.replace('\\"', '"').split())


def invented_quotes(summary: str, source_texts: list[str]) -> list[str]:
    """The summary's backticked spans with a word no source text has: a quoted value, name,
    path or error the summary made up. Words, not the whole span, so a shortened signature
    (`withRetry(fn, attempts)` for the full one) still counts as quoted from the source."""
    # Tool-call arguments are JSON: their escapes (\\n before a line) are not part of a word.
    known = set(re.findall(r"\w+", json_unescaped("\n".join(source_texts))))
    ordered = sorted(known)
    out: list[str] = []
    for m in _CODE_SPAN.finditer(summary):
        quote = _squash(m.group(0).strip("`"))
        words = [w for w in re.findall(r"\w+", quote) if len(w) >= 2]
        if quote in out or not words:
            continue
        # A long command cut short ends in part of a word: the last word may be a prefix.
        *inner, last = words
        if any(w not in known for w in inner) or not _known_prefix(last, known, ordered):
            out.append(quote)
    return out


def _known_prefix(word: str, known: set[str], ordered: list[str]) -> bool:
    if word in known:
        return True
    i = bisect.bisect_left(ordered, word)
    return i < len(ordered) and ordered[i].startswith(word)


def check_usability(summary: str, source_texts: list[str], items: list[KeepItem]) -> UsabilityReport:
    """The findings above for ``summary`` against its source texts and KEEP items."""
    rep = UsabilityReport()
    lines = _content_lines(summary)
    rep.lines = len(lines)
    seen: set[str] = set()
    bad = 0
    for body in lines:
        key = norm(body).lower().rstrip(".")
        if len(key) >= 8 and key in seen:
            rep.duplicates.append(body)
            bad += 1
            continue
        seen.add(key)
        kinds, rest = _anchors(body)
        words = [w for w in _WORD.findall(rest) if len(w) >= 2]
        if len(words) < 3 and kinds < 2:
            rep.fragments.append(body)
            bad += 1
    rep.share = round(bad / len(lines), 4) if lines else 0.0

    known = _source_numbers(source_texts)
    text = "\n".join(ln for ln in summary.split("\n") if not _SOURCE.match(ln))
    text = _unstamped(_REF.sub(" ", _HEADER_FIG.sub(" ", text)))
    invented = []
    for m in _NUM_TOKEN.finditer(text):
        n = norm_number(m.group(0)).replace(",", "")
        if len(n.replace(".", "")) < 2 and "." not in n:
            continue
        if n in known or n.rstrip("0").rstrip(".") in known:
            continue
        if re.fullmatch(r"(?:19|20)\d\d", n) and any(n in t for t in source_texts):
            continue
        if n not in invented:
            invented.append(n)
    rep.invented_numbers = invented
    rep.invented_quotes = invented_quotes(summary, source_texts)

    flat = _REF.sub(" ", norm_number(summary))
    # A backticked quote of a log or code line says what the source printed, not what holds now.
    unquoted = _CODE_SPAN.sub(" ", flat)
    named = _setting_keys(items, source_texts)
    # Identifiers the summary gives a number are keys too, read where they stand (below).
    keys = named | {m.group(1) for m in _IDENT_NUMBER.finditer(summary)}
    for k, vals in _setting_values(keys, source_texts).items():
        said: list[str] = []
        # An identifier only the summary named is read where it stands with its number.
        gap = r"[^\n\d]{0,12}?" if k in named else r"(?:\s*[:=]\s*|\s+)"
        for m in re.finditer(r"(?<![\w-])" + re.escape(k) + r"(?![\w-])" + gap + r"(?P<v>-?\d+(?:\.\d+)*)", flat):
            said.append(m.group("v"))
        wrong = [v for v in said if v not in vals]
        if wrong:
            rep.altered_values.append(f"{k}={wrong[0]} (source: {', '.join(vals)})")
        elif len(vals) > 1 and vals[-1] not in said and _says(k, vals[:-1], unquoted) and not re.search(
                r"(?<![\w.])" + re.escape(vals[-1]) + r"(?![\w]|\.\d)", flat) \
                and not _same_quantity(k, said[0], vals[-1], source_texts):
            rep.stale_values.append(f"{k}={said[0]} (now {vals[-1]})")
    # A digest's ``Source: b3 (109→70 tok)`` header is bookkeeping, on either side.
    plain = "\n".join(ln for ln in summary.split("\n") if not _SOURCE.match(ln))
    plain_src = ["\n".join(ln for ln in t.split("\n") if not _SOURCE.match(ln)) for t in source_texts]
    rep.altered_values += (altered_changes(plain, plain_src) + altered_counts(plain, plain_src)
                           + altered_quotes(plain, plain_src) + misquoted(plain, plain_src))
    return rep
