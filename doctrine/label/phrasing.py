"""Seeded phrasing: the same label content in varied words, reproducibly.

Every choice goes through a ``random.Random`` seeded from a sha256 of the labeler seed and
the decision point's identity, so the same inputs give the same text (Python's ``hash`` is
salted per process and is never used).
"""

from __future__ import annotations

import hashlib
import random
import re


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


# One-line declines for a nudge the label does not act on: never silence (doctrine: decline
# in one line, continue the task). Keyed by why the nudge is not acted on.
DECLINES = {
    "recovery": (
        "Not compressing yet: this step needs a detail I am restoring first.",
        "Holding off on the fold: I need the exact detail back before anything else.",
        "The fold can wait until this restore is done.",
    ),
    "tier": (
        "Not merging blocks now: there is not enough in them yet for a useful digest.",
        "A digest of a single block would only restate it; leaving the blocks as they are.",
        "Skipping the block merge for now; continuing with the task.",
    ),
    "nothing": (
        "Nothing listed is finished with yet, so there is nothing worth folding; continuing.",
        "No fold this time: what is listed is too small or still in use.",
        "Declining the compression: nothing consumed is worth a block yet.",
    ),
}

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

# One surface form per tier: the doctrine asks for "dense bullets grouped by
# subject (goal, files, decisions, state, open items)" and no variation of their form, so a
# tier-1 label always uses these headings, this heading shape, this bullet and these step
# verbs, and tiers 2/3 the same bullet; what varies between labels is their content. (Several
# header styles for one section were a form a small model had to learn once per style.)
HEADINGS = {
    "goal": "Goal",
    "decisions": "Decisions",
    "artifacts": "Exact details",
    "state": "State",
    "steps": "Steps",
    "open": "Open",
    "dropped": "Dropped",
    "refs": "Refs",
}

STEP_VERBS = {"ran": "Ran", "edited": "Edited", "read": "Read"}

HEADING_STYLE = "{h}:"
BULLET = "- "


# ---------------------------------------------------------------------- upkeep remarks
# What the agent says about keeping its own context (folding, declining a nudge, restoring a
# block) is no fact of the task: summaries leave such sentences out. Known: the labeler's
# own lines (the literal parts of the templates above); otherwise a first-person remark on
# folding/compressing, a fold/compress remark naming a ref or block, or one about a nudge.
UPKEEP_TEMPLATES = (REFUSALS + COMPRESS_LEADS + EMERGENCY_LEADS + SPONTANEOUS_LEADS + TIER_LEADS + SEARCH_LEADS
                     + DECOMPRESS_LEADS + tuple(x for v in DECLINES.values() for x in v))
_UPKEEP_WORD = r"(?:fold(?:s|ed|ing)?|compress(?:es|ed|ing|ion)?|decompress\w*|unfold\w*)"
_UPKEEP = re.compile(
    "|".join(re.escape(part.strip(" .,;:")) for t in UPKEEP_TEMPLATES
             for part in re.split(r"\{\w+\}", t) if len(part.strip(" .,;:")) >= 14)
    + rf"|\b(?:I(?:'ll| will|'m| am| need to)|[Ll]et me|[Ww]e(?:'ll| will))\b[^.;]{{0,40}}\b{_UPKEEP_WORD}\b"
    + rf"|\b{_UPKEEP_WORD}\b[^.]{{0,60}}\b(?:m\d{{5}}|b\d+)\b|\b(?:m\d{{5}}|b\d+)\b[^.]{{0,60}}\b{_UPKEEP_WORD}\b"
    + r"|\bnudges?\b|\bcontext maintenance\b")


def upkeep(sentence: str) -> bool:
    """True if ``sentence`` is a remark about context upkeep (folding, declining a nudge,
    restoring a block), not about the task."""
    return bool(_UPKEEP.search(sentence))


# ---------------------------------------------------------------------- lines that keep their item
# Words that announce an item: a line must not end on one (``it failed with...``).
_INTRO = {"with", "was", "were", "is", "are", "reads", "found", "printed", "holds", "defines", "sets", "uses",
          "names", "at", "showed", "records", "adds", "the", "a", "an", "of", "to", "and", "for", "in", "on",
          "from", "by", "as", "now", "its", "it", "that", "which", "says", "shows", "gives", "returns"}
_PROCESS = re.compile(r"^(?P<verb>\S+ )`(?P<cmd>[^`]+)`(?P<cut>\.\.\.)?(?P<ref> \(m\d{5}(?:, m\d{5})*\))(?P<rest>.*)$")


def promise_left(text: str) -> bool:
    """True if ``text`` (a line without its ellipsis) stops where its item should begin: on
    a colon, a ref, an announcing word, or two words or fewer after the last clause mark."""
    t = text.rstrip(" .")
    if not t or t.endswith((":", ";", ",", "(", "—")) or re.search(r"\((?:from )?m\d{5}(?:, m\d{5})*\)$", t):
        return True
    if t.endswith("`"):
        return False
    words = re.sub(r"`[^`]*`", "Q", t).split()
    if words and words[-1].lower() in _INTRO:
        return True
    tail = re.split(r":\s|\)\s|`", t)[-1]  # what follows the last announcement
    return len(tail.split()) < 3


def _quote_prefix(line: str, limit: int) -> str | None:
    """``line`` cut at a space before ``limit``; a quote the cut falls in keeps a verbatim
    prefix of at least three words (closed, the ellipsis outside it), else the cut goes
    before the quote. None when nothing is left."""
    cut = line[:limit]
    sp = cut.rfind(" ")
    cut = cut[:sp] if sp > limit // 2 else cut
    while cut.count("`") % 2:
        q = cut.rfind("`")
        inner = cut[q + 1:].rstrip(" ,;:")
        if len(inner.split()) >= 3 and not re.fullmatch(r"\S+\s*[=:]\s*\S+", inner):
            return cut[:q + 1] + inner + "`..."
        cut = cut[:q].rstrip()
    cut = cut.rstrip(" ,;:")
    return cut + "..." if cut else None


def clip_item(text: str, limit: int, cmd_limit: int = 48) -> str | None:
    """One line of ``text`` in at most ``limit`` characters that still carries its item, or
    None when it cannot (the caller drops the line).

    A ``Verb `command` (mNNNNN): outcome`` line first shortens the command to a verbatim
    prefix (the outcome is what a digest keeps); then the line is cut where a clause ends
    (``; ``, ``, `` outside a quote), else inside a quote as a verbatim prefix; a cut that
    would leave an announcement without its item (``it failed with...``) backs off to the
    previous clause, and a line left with only its process part is dropped."""
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    m = _PROCESS.match(line)
    head_end = 0
    if m:
        cmd = m.group("cmd")
        if len(cmd) > cmd_limit:
            nxt = cmd.find(" ", cmd_limit)  # end on a whole word: the next space, else the last one
            sp = nxt if 0 < nxt <= cmd_limit + 24 else cmd.rfind(" ", 0, cmd_limit)
            part = (cmd[:sp] if sp > cmd_limit // 2 else cmd[:cmd_limit]).rstrip(" ,;:|&")
            line = f"{m.group('verb')}`{part}`...{m.group('ref')}{m.group('rest')}"
            m = _PROCESS.match(line)
        head_end = len(line) - len(m.group("rest")) if m else 0
        if len(line) <= limit:
            return line
    out = None
    for sep in ("; ", ", "):
        k = line.rfind(sep, max(limit // 2, head_end), limit)
        while k > 0 and line[:k].count("`") % 2:
            k = line.rfind(sep, max(limit // 2, head_end), k)
        if k > 0 and not promise_left(line[:k]):
            out = line[:k].rstrip(".") + "."
            break
    if out is None:
        cand = _quote_prefix(line, limit)
        body = cand[:-3] if cand is not None else ""
        clause_end = False
        # An announcement without its item: drop words back to where something is said.
        while body and promise_left(body) and not body.endswith("`"):
            k = body.rfind(" ")
            if k <= head_end:
                body = ""
                break
            body = body[:k]
            clause_end = body.endswith((";", ","))
            body = body.rstrip(" ,;:")
        out = (body + ("." if clause_end else "...")) if body else None
    if out is None or (head_end and len(out.rstrip(".")) <= head_end + 1):
        return None  # only "Ran `cmd` (m00012)" would be left
    return out
