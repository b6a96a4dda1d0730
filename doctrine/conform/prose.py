"""KEEP candidates from prose: user intent, decisions with rationale, open questions."""

from __future__ import annotations

import re

from .items import Collector
from .patterns import content_words, norm, sentences, truncate

__all__ = [
    "DECISION_RE",
    "RATIONALE_RE",
    "decision_terms",
    "scan_assistant_prose",
    "scan_user_text",
    "resolve_question",
    "unanswered",
]

S_GOAL = 1.0  # first sentence of the task (first user message), or its first ask
S_CONTEXT = 0.6  # a first sentence that only sets the scene for a later ask
S_CONSTRAINT_FIRST = 0.85  # constraint sentences in the first user message
S_CONSTRAINT_LATER = 0.9  # constraints added by later user messages (goal evolution)
S_ASK = 0.9  # an imperative request in the first user message ("Fix it so that ...")
S_LATER_GOAL = 0.7  # the first sentence of a later user message
S_QUESTION = 0.8  # user questions not answered later in the range
S_DECISION = 0.8
S_DECISION_CODE = 0.9  # decisions naming code (backticks, identifiers, paths)
S_DECISION_AGREED = 0.95  # a proposal the user approved
S_OPEN = 0.75  # "still need to", "next:", "TODO" in the agent's prose
S_OPEN_LAST = 0.85  # the same in the last assistant message of the range

DECISION_RE = re.compile(
    r"\b(?:decided|decide to|decision|will use|I'll use|we'll use|going to use|chose|choose|chosen|"
    r"instead of|switch(?:ed|ing)? to|opt(?:ed)? for|go(?:ing)? with|rather than|prefer(?:red)?|"
    r"settled on|picked|recommend(?:ed|s)?|suggest(?:ed)?|I'd go with|we should|let's go with|"
    r"(?:best|better|safer|simpler) (?:option|choice|fix|approach))\b",
    re.I,
)
# "I'll X because Y": a stated intent with its reason is a decision too.
INTENT_RE = re.compile(r"^(?:I'll|I will|We'll|We will|Let's|I'm going to|I am going to|I'd)\b", re.I)
# A user reply that only approves what was proposed ("OK, do that.", "Agreed, go with Redis.").
AGREE_RE = re.compile(r"^(?:ok(?:ay)?|agreed|yes|yep|sounds good|go ahead|do that|let's do (?:it|that)|fine|"
                      r"approved|great|perfect|makes sense|go with)\b", re.I)
# Rationale markers, used both to find decisions in the source and to see that a summary
# kept a reason next to the decision's terms.
RATIONALE_RE = re.compile(
    r"\b(?:because|since|so that|due to|given that|as it|as this|to avoid|in order to|"
    r"otherwise|which means|the reason|so (?:that|a|the|it|we)|for (?:safety|speed|simplicity))\b",
    re.I,
)
_CONSTRAINT_RE = re.compile(
    r"\b(?:must|must not|mustn't|don't|do not|never|always|keep|only|should not|shouldn't|"
    r"without|avoid|make sure|ensure|no more than|at most|at least|required?|cannot|can't)\b",
    re.I,
)
_OPEN_RE = re.compile(
    r"\b(?:(?:still need to|still needs|need to (?:check|verify|confirm|decide|find out)|todo|fixme|"
    r"not yet|left to do|open question|unclear (?:whether|if|why)|tbd)\b|(?:next(?: step)?|remaining)\s*:)",
    re.I,
)
_ASK_RE = re.compile(
    r"^(?:please |can you |could you |i want |i need |we need |the goal is |your task is )?"
    r"(?:fix|add|make|implement|change|update|remove|rename|refactor|write|create|support|ensure|"
    r"investigate|find|bump|upgrade|migrate|port|speed up|reduce|increase|handle|allow|prevent|stop|lower|raise|"
    r"set|revert|move|return|get|debug|diagnose|explain|clean up|split|merge|replace|convert|enable|disable)\b",
    re.I,
)
_ISSUE = re.compile(r"<issue_description>\s*(.*?)\s*(?:</issue_description>|$)", re.S)
_TAG_LINE = re.compile(r"^[ \t]*</?[A-Za-z_][\w-]*>[ \t]*$", re.M)
_TAGGY = re.compile(r"^<[^>]+>$|^</?[a-z_]+>")
_CODE_TERM = re.compile(r"`([^`\n]{2,60})`|\b([A-Za-z_]\w*(?:\.\w+)+|\w+_\w+|[a-z]+[A-Z]\w*|\w+\(\))")


def decision_terms(text: str, limit: int = 4) -> list[str]:
    """Key terms of a decision: code-like tokens first, then the longest content words.

    Only the part before the rationale marker counts (the decision itself); the terms are
    what a summary must repeat, near a rationale marker, to keep the decision.
    """
    m = RATIONALE_RE.search(text)
    head = text[: m.start()] if m and m.start() > 10 else text
    terms: list[str] = []
    for cm in _CODE_TERM.finditer(head):
        t = (cm.group(1) or cm.group(2)).strip()
        if t and t.lower() not in (x.lower() for x in terms):
            terms.append(t)
    words = [w for w in content_words(head) if not DECISION_RE.fullmatch(w)]
    marker_words = {"decided", "decide", "decision", "chose", "choose", "chosen", "instead", "switch",
                    "switched", "prefer", "preferred", "rather", "settled", "picked", "opted", "going"}
    words = [w for w in words if w not in marker_words]
    for w in sorted(dict.fromkeys(words), key=lambda w: (-len(w), words.index(w))):
        if len(terms) >= limit:
            break
        if all(w not in t.lower() for t in terms):
            terms.append(w)
    return terms[:limit]


def reason_of(text: str) -> str:
    """The part of a decision that gives its reason (after the rationale marker)."""
    m = RATIONALE_RE.search(text)
    return text[m.end():].strip(" ,.") if m else ""


def add_decision(sents: list[str], n: int, msg: str, c: Collector, salience: float | None = None) -> bool:
    """Add sentence ``n`` as a decision if it, or one of the next two sentences, gives a reason."""
    s = sents[n]
    both = s
    if not RATIONALE_RE.search(s):
        for k in (1, 2):
            if n + k < len(sents) and RATIONALE_RE.search(sents[n + k]):
                both = " ".join(sents[n:n + k + 1])  # "I recommend X. Y changes, so Z." style
                break
        else:
            return False
    terms = decision_terms(both)
    if len(terms) < 2:
        return False
    s_val = salience or (S_DECISION_CODE if _CODE_TERM.search(both) else S_DECISION)
    c.add("decisions", "decision", truncate(both, 300), msg, s_val, terms=terms, reason=truncate(reason_of(both), 200))
    return True


def _is_prose(sentence: str) -> bool:
    return bool(sentence) and not _TAGGY.match(sentence) and len(re.findall(r"[A-Za-z]{2,}", sentence)) >= 2


def scan_user_text(text: str, msg: str, c: Collector, *, first: bool) -> list[str]:
    """Goal and constraint spans of a user message; returns its question sentences."""
    issue = _ISSUE.search(text)
    # Lines that are only a tag (<uploaded_files>, ...) are framing, not words.
    body = _TAG_LINE.sub("\n", issue.group(1) if issue else text)
    sents = [s for s in sentences(body) if _is_prose(s)]
    if issue:
        # Constraints in the framing around an issue (e.g. "don't modify the tests") count too.
        outside = _TAG_LINE.sub("\n", text[: issue.start()] + "\n\n" + text[issue.end():])
        sents += [s for s in sentences(outside) if _is_prose(s) and _CONSTRAINT_RE.search(s)]
    questions = []
    # When the task opens with context ("Pages show stale prices.") and asks in a later
    # sentence, the ask is the goal and the context a weaker item.
    lead_is_ask = not first or not sents or _ASK_RE.match(sents[0]) or not any(_ASK_RE.match(x) for x in sents[1:3])
    for n, s in enumerate(sents):
        span = truncate(s, 200)
        if not first and AGREE_RE.match(s) and len(s.split()) <= 6:
            continue  # approval of a proposal: it resolves a question, it states no new goal
        if first and n == 0:
            c.add("user_intent", "goal", span, msg, S_GOAL if lead_is_ask else S_CONTEXT)
        elif first and not lead_is_ask and _ASK_RE.match(s) and n <= 2:
            lead_is_ask = True
            c.add("user_intent", "goal", span, msg, S_GOAL)
        elif _CONSTRAINT_RE.search(s):
            c.add("user_intent", "constraint", span, msg, S_CONSTRAINT_FIRST if first else S_CONSTRAINT_LATER)
        elif first and _ASK_RE.match(s):
            c.add("user_intent", "ask", span, msg, S_ASK)
        elif (n == 0 or _ASK_RE.match(s)) and not s.endswith("?"):
            # Later questions are open questions (below), not a change of goal.
            c.add("user_intent", "later_goal", span, msg, S_LATER_GOAL)
        if s.endswith("?"):
            questions.append(span)
    return questions


# The agent's remarks on its own context upkeep ("Declining the fold for now: m00002–m00009
# holds ...", "I'll fold it once they are done") are no decisions or open items of the task.
_FOLD = r"(?:fold(?:s|ed|ing)?|compress(?:es|ed|ing|ion)?|decompress\w*)"
UPKEEP_RE = re.compile(
    rf"\b{_FOLD}\b[^.]{{0,60}}\b(?:m\d{{5}}|b\d+)\b|\b(?:m\d{{5}}|b\d+)\b[^.]{{0,60}}\b{_FOLD}\b"
    rf"|\b{_FOLD}\s+(?:it|this|that|them|these)\b|\b(?:the|no|this) (?:fold|compression)\b"
    r"|\bworth (?:folding|compressing)\b|\bnudges?\b|\bcontext (?:maintenance|upkeep)\b", re.I)


def scan_assistant_prose(text: str, msg: str, c: Collector, *, last: bool) -> None:
    """Decisions with a rationale, and open items, in the agent's own text (remarks on
    context upkeep left out)."""
    sents = [s for s in sentences(text) if _is_prose(s) and not UPKEEP_RE.search(s)]
    for n, s in enumerate(sents):
        if DECISION_RE.search(s) or (INTENT_RE.match(s) and RATIONALE_RE.search(s)):
            add_decision(sents, n, msg, c)
        m = _OPEN_RE.search(s)
        if m:
            needle = norm(s[m.end():]).strip(" :-") or s
            c.add("open_questions", "open_item", truncate(s, 200), msg, S_OPEN_LAST if last else S_OPEN,
                  needle=truncate(needle, 160))


def unanswered(question: str, later_assistant_texts: list[str]) -> bool:
    """A question counts as answered if a later assistant text repeats most of its terms."""
    terms = set(content_words(question))
    if not terms:
        return True
    for text in later_assistant_texts:
        words = set(content_words(text))
        if len(terms & words) >= max(1, (len(terms) + 1) // 2):
            return False
    return True


def resolve_question(question: str, reply: str | None, approval: str | None, msg: str, c: Collector) -> bool:
    """A user question the next assistant reply settles (a recommendation or an answer with a
    reason, sharing a term with the question) becomes a decision; returns True if settled.

    An approval by the user right after the reply ("OK, do that.") makes the decision stronger.
    """
    if not reply:
        return False
    q_terms = set(content_words(question))
    sents = [s for s in sentences(reply) if _is_prose(s) and not UPKEEP_RE.search(s)]
    for n, s in enumerate(sents[:3]):
        if not (q_terms & set(content_words(" ".join(sents[n:n + 3])))):
            continue
        if DECISION_RE.search(s) or RATIONALE_RE.search(" ".join(sents[n:n + 3])):
            strength = S_DECISION_AGREED if approval and AGREE_RE.match(approval.strip()) else None
            if add_decision(sents, n, msg, c, strength):
                return True
    return False
