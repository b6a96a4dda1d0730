"""What a summary's lines look like, and whether its exact items come from its source.

    from data_gen.summary_figures import content_lines, exact_items, missing_items
    missing_items(summary, source_text)      # [] when every exact item occurs in the source

* **content lines**: the summary's non-empty lines without their bullet, leaving out
  section headings (``**Findings**``, ``What was done:``) and lines that only name refs
  (``**Source refs** m00015–m00020``, ``Restore from: m00012–m00017``);
* a **bare value**: a content line that is one token (``2.18.5``, ``==0.27.0``, ``8x``);
* **exact items** (the doctrine's KEEP-verbatim classes that can be checked as text):
  ``path:line`` mentions, error strings (a quoted ``SomethingError: ...``), settings
  (``KEY=value`` or a quoted ``key: value``, the full value) and signatures (a quoted
  ``def``/``class``/``function`` head). An item occurs in its source when the source holds
  it: the same file (path suffix) and line, the same text (whitespace-normalised), the same
  key with the same full value.
"""

from __future__ import annotations

import re

from doctrine.conform.patterns import find_path_lines, norm, path_suffix_match
from doctrine.label.handoff import grep_file

__all__ = ["bare_value", "content_lines", "empty_promise", "exact_items", "lone_location", "missing_items",
           "setting_in", "upkeep_remark"]

_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
_HEADING = re.compile(r"^(?:\*\*[^*]+\*\*|#+ .+|[A-Z][\w ,'/-]{0,40}:|[A-Z][A-Z ]{1,40})\s*$")
_REFS_ONLY = re.compile(r"^(?:\*\*[^*]+\*\*|#+ [\w ]+|[A-Z][\w ]{0,30}:?)?\s*"
                        r"(?:[mb]\d+(?:\s*(?:–|-|\.\.)\s*[mb]\d+)?[,;\s]*)+$")
_QUOTED = re.compile(r"`([^`\n]+)`")
_ERROR = re.compile(r"^(?:[\w.]*(?:Error|Exception|Warning|Failure)|error(?:\[\w+\])?|FAIL(?:ED)?|panic):\s?\S")
_SIGNATURE = re.compile(r"^(?:async\s+def|def|class|(?:export\s+)?(?:async\s+)?function|fn|func)\s+\w+")
_SETTING_QUOTED = re.compile(r"^(?P<key>--?[\w.-]+|[A-Za-z_][\w.-]*)\s*(?P<sep>=|:)\s*(?P<value>\S(?:.*\S)?)$")
_LITERAL = re.compile(r"^(?:\"[^\"]*\"|'[^']*'|[\w.+\-:/@%=]+)[,;]?$")  # a value, not an expression
_SETTING_BARE = re.compile(r"(?<![\w`$-])(?P<key>[A-Z][A-Z0-9_]{2,})=(?P<value>[^\s`,;)]+)")


def content_lines(summary: str) -> list[str]:
    out = []
    for raw in summary.split("\n"):
        line = _BULLET.sub("", raw.strip()).strip()
        if not line or _HEADING.match(line) or _REFS_ONLY.match(line):
            continue
        out.append(line)
    return out


def bare_value(line: str) -> bool:
    """One token and no sentence around it (``2.18.5``, ``==0.27.0``, ``8x``)."""
    return len(line.split()) == 1


# A line that stops where its item should begin: the text before a closing ``...`` ends on
# a colon or a ref, on a word that announces an item, or has at most two words after its
# last announcement (``The exact error (from m00009)...``, ``it failed with...``,
# ``what it showed: p99 connection...``). A verbatim prefix (``...`cut`...``) is an item.
_ANNOUNCE = {"with", "was", "were", "is", "are", "reads", "found", "printed", "holds", "defines", "sets", "uses",
             "names", "at", "showed", "records", "adds", "the", "a", "an", "of", "to", "and", "for", "in", "on",
             "from", "by", "as", "now", "its", "it", "that", "which", "says", "shows", "gives", "returns"}


def empty_promise(line: str) -> bool:
    """A content line that announces an item and then cuts it away (see above)."""
    t = line.rstrip()
    if not t.endswith("...") or t.endswith("`..."):
        return False
    body = t[:-3].rstrip(" .")
    if not body or body.endswith((":", ";", ",", "(", "—")) or re.search(r"\((?:from )?m\d{5}(?:, m\d{5})*\)$", body):
        return True
    words = re.sub(r"`[^`]*`", "Q", body).split()
    if words and words[-1].lower() in _ANNOUNCE:
        return True
    return len(re.split(r":\s|\)\s|`", body)[-1].split()) < 3


_LOCATION_WORDS = {"the", "location", "from", "at", "in", "line", "see"}


def lone_location(line: str) -> bool:
    """A content line whose only item is a ``path:line`` with nothing said about what is
    there (``inkwell/sync.py:17``, ``The location (from m00004): `a.py:28` ``, a tier-3
    ``[a.py:28] — a.py:28``)."""
    if not find_path_lines(line):
        return False
    rest = line
    for p, n, _ in find_path_lines(line):
        rest = rest.replace(f"{p}:{n}", " ")
    rest = re.sub(r"\(?(?:from )?[mb]\d+\)?|[`\[\]—:().,;*-]", " ", rest)
    return not [w for w in rest.split() if w.lower() not in _LOCATION_WORDS]


def upkeep_remark(line: str) -> bool:
    """A content line that carries the agent's remarks on its own context upkeep (a decline
    of a nudge, a lead of a compress or restore call, "I'll fold it later") as if they were
    facts of the task. Process lines a summary is meant to have (``restore m00012 if its
    raw text is needed``, ``Restore b2 for the full detail``) are not remarks."""
    from doctrine.label.phrasing import UPKEEP_TEMPLATES

    low = " ".join(line.split())
    for t in UPKEEP_TEMPLATES:
        for part in re.split(r"\{\w+\}", t):
            part = part.strip(" .,;:")
            if len(part) >= 14 and part in low:
                return True
    return bool(re.search(r"\b(?:I(?:'ll| will|'m| am)|[Ll]et me|[Ww]e(?:'ll| will))\b[^.;]{0,40}"
                          r"\b(?:fold|compress|decompress)\w*|\bnudges?\b", low))


def _settings(summary: str) -> list[tuple[str, str]]:
    out = []
    for span in _QUOTED.findall(summary):
        m = _SETTING_QUOTED.match(span.strip())
        if m and not _SIGNATURE.match(span) and not _ERROR.match(span) and _LITERAL.match(m.group("value")):
            if m.group("sep") == ":" and not re.search(r"\d", m.group("value")):
                continue  # `note: text` reads as prose, not a setting
            out.append((m.group("key"), m.group("value").rstrip(",;")))
    outside = _QUOTED.sub(" ", summary)
    out += [(m.group("key"), m.group("value").rstrip(".,;:")) for m in _SETTING_BARE.finditer(outside)]
    return out


def exact_items(summary: str) -> list[tuple[str, str]]:
    """``(class, text)`` of every exact item in ``summary``, in order."""
    items = [("paths_with_lines", f"{p}:{n}") for p, n, _ in find_path_lines(summary)]
    for span in _QUOTED.findall(summary):
        s = span.strip()
        if _ERROR.match(s):
            items.append(("error_strings", s))
        elif _SIGNATURE.match(s):
            items.append(("signatures", s.rstrip(":{ ")))
    items += [("exact_values", f"{k}={v}") for k, v in _settings(summary)]
    return items


def setting_in(key: str, value: str, text: str) -> bool:
    """``text`` sets ``key`` to exactly ``value`` (``=``/``:``, optional spaces and quotes)."""
    # The value ends at anything but more of a number: "32." ends a sentence, "32..." a cut
    # line; "32.5" and "32_000" are other values.
    pat = (rf"(?<![\w-]){re.escape(key)}[\"']?\s*[=:]\s*[\"']?{re.escape(value)}"
           rf"(?!\w|\.\d|_\d)")
    return re.search(pat, text) is not None


_COMMAND = re.compile(r'"command":\s*"((?:[^"\\]|\\.)*)"')
_GREP_ROW = re.compile(r"^(\d+)[:-]", re.M)
_NUMBERED = re.compile(r"^\s*(\d+)\t", re.M)  # a `cat -n` listing row (edit and view results)
_HUNK_FILE = re.compile(r"^\+\+\+ (?:b/)?(\S+)", re.M)
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", re.M)


def _source_lines(source: str) -> list[tuple[str, int]]:
    """``(path, line)`` places the source shows: ``path:line`` mentions in any form, rows of a
    numbered listing of a file the source names (an edit's or view's ``cat -n`` result) and
    the lines of a diff hunk under its ``+++`` file."""
    out = [(p, n) for p, n, _ in find_path_lines(source)]
    # grep -n over one file prints "12:text": the row is line 12 of the file the command names.
    grepped = [f for c in _COMMAND.findall(source) for f in [grep_file(c)] if f]
    if grepped:
        out += [(f, int(n)) for f in grepped for n in _GREP_ROW.findall(source)]
    listed = {int(n) for n in _NUMBERED.findall(source)}
    if listed:
        out += [(p, n) for p in re.findall(r'"path":\s*"([^"]+)"', source) for n in listed]
    for part in re.split(r"(?=^\+\+\+ )", source, flags=re.M):
        f = _HUNK_FILE.match(part)
        if f:
            for h in _HUNK.finditer(part):
                start, count = int(h.group(1)), int(h.group(2) or 1)
                out += [(f.group(1), n) for n in range(start, start + max(count, 1))]
    return out


def missing_items(summary: str, source: str) -> list[str]:
    """The exact items of ``summary`` that do not occur in ``source`` (a tool call's JSON
    arguments are read with their string escapes undone)."""
    source = source.replace("\\n", "\n").replace("\\t", "\t").replace('\\"', '"')
    src_paths = _source_lines(source)
    src_norm = norm(source)
    bad = []
    for p, n, _ in find_path_lines(summary):
        if not any(line == n and path_suffix_match(p, q) for q, line in src_paths):
            bad.append(f"{p}:{n}")
    for span in _QUOTED.findall(summary):
        s = span.strip()
        if _ERROR.match(s) and norm(s) not in src_norm:
            bad.append(s)
        elif _SIGNATURE.match(s) and norm(s.rstrip(":{ ")) not in src_norm:
            bad.append(s)
    for k, v in _settings(summary):
        if not setting_in(k, v, source):
            bad.append(f"{k}={v}")
    return bad
