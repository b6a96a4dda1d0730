"""Seeded phrasing: the same label content in varied words, reproducibly.

Every choice goes through a ``random.Random`` seeded from a sha256 of the labeler seed and
the decision point's identity, so the same inputs give the same text (Python's ``hash`` is
salted per process and is never used).
"""

from __future__ import annotations

import hashlib
import random


def rng_for(seed: int, *parts: object) -> random.Random:
    """A private generator for one decision point (or one part of it)."""
    key = ":".join(str(p) for p in (seed, *parts))
    return random.Random(int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big"))


def short(text: str, limit: int = 70) -> str:
    """One line of ``text``, cut at a word boundary; a quoted span is never left open (the
    cut goes before it), so what stays quoted is verbatim."""
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    cut = line[:limit]
    sp = cut.rfind(" ")
    cut = cut[:sp] if sp > limit // 2 else cut
    if cut.count("`") % 2:
        cut = cut[:cut.rfind("`")].rstrip()
    return cut.rstrip(" ,;:") + "..."


def clip(text: str, limit: int) -> str:
    """One line of ``text`` in at most ``limit`` characters, cut where a clause ends (``; ``
    or ``, `` outside a quoted span, in the second half) so the line still reads as a
    sentence; :func:`short` where no clause ends in reach."""
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    for sep in ("; ", ", "):
        k = line.rfind(sep, limit // 2, limit)
        while k > 0 and line[:k].count("`") % 2:
            k = line.rfind(sep, limit // 2, k)
        if k > 0:
            return line[:k].rstrip(".") + "."
    return short(line, limit)


REFUSALS = (
    "Not folding {span} yet: the current work still needs {what}. Continuing with the task; I'll compress at the next step boundary.",
    "I'll hold off on compressing {span}, since {what} is still in use for this step.",
    "Declining the fold for now: {span} holds {what}, which the next steps rely on. I'll fold it once they are done.",
    "Keeping {span} as it is for the moment (still needed: {what}); compressing it later.",
    "Skipping this compression: {what} in {span} is part of what I'm working on right now.",
)

COMPRESS_LEADS = (
    "",
    "Folding consumed output before the next step.",
    "The {topic} part is finished; compressing its raw history.",
    "Compressing what this work no longer needs ({n} range(s)).",
    "",
    "Freeing the finished {topic} output.",
)

EMERGENCY_LEADS = (
    "Compressing now, oldest consumed tool output first.",
    "Folding consumed tool output immediately before continuing.",
    "Compression first: the spent tool output goes into summaries.",
)

SPONTANEOUS_LEADS = (
    "That phase is done; folding its output before moving on.",
    "Compressing the consumed output of the finished step.",
    "",
    "The earlier results are captured; compressing the raw output.",
)

TIER_LEADS = (
    "Distilling the older blocks into one.",
    "",
    "Folding the accumulated summaries into a higher-tier block.",
)

SEARCH_LEADS = (
    "I need the exact {what} from earlier; it was compressed. Searching for it.",
    "The exact detail is no longer in view. Looking it up in the compressed history.",
    "Before relying on a summary, let me find the original.",
)

DECOMPRESS_LEADS = (
    "Restoring {target} to get the exact detail back.",
    "The summary is not enough here; restoring {target}.",
    "Let me restore {target} before I rely on it.",
)

RESTORED_PREFIX = (
    "From the restored {where}: {quote}",
    "Restored ({where}): {quote}",
    "The original ({where}) says: {quote}",
)

HEADINGS = {
    "goal": ("Goal", "Task", "Objective"),
    "decisions": ("Decisions", "Decided", "Choices made"),
    "artifacts": ("Exact details", "Artifacts", "Files, code and errors"),
    "state": ("State", "Findings", "Status"),
    "steps": ("What was done", "Steps", "Work so far"),
    "open": ("Open", "Open items", "Still open"),
    "dropped": ("Dropped", "Left out", "Not kept"),
    "refs": ("Refs", "Restore from", "Source refs"),
}

STEP_VERBS = {
    "ran": ("Ran", "Ran", "Executed"),
    "edited": ("Edited", "Changed", "Edited"),
    "read": ("Read", "Viewed", "Opened"),
}

HEADING_STYLES = ("{h}:", "## {h}", "{H}", "**{h}**")
BULLETS = ("- ", "* ", "- ")

DROP_NOTES = (
    "{refs}: {what}; result kept above",
    "{refs}: {what} (dropped, outcome noted)",
    "{refs}: {what}, no longer needed",
)
