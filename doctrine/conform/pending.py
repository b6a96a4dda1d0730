"""A step the range left to come, written in the summary as done.

When the range ends on the agent saying what is not done ("the next step is to run ALTER ROLE
...", "switching to quotRem would fix it; should I?", "the test invoke still returns
FunctionError"), a summary that reports that step or that outcome as done ("Fixed: ran ALTER
ROLE ... and restarted api", "the invoke succeeded") tells the next reader to skip work that is
still to do. Every value in such a line can be in the range, so no KEEP item shows it; this
rule reads the step itself.

* Pending: a sentence of the range's last agent text, with no tool call after it in the range.
  An *action* still to come: a next step, a plan (I will, with your approval), a proposal or
  a question (I propose, would fix, I can, should I, can you run), a step not done (has not
  been run). An *outcome* not reached:
  something still fails, was refused, is not verified yet.
* Claimed done: a summary line that, outside its quotes and its restated goal, shares content
  words with the sentence (a third of them, 3 to 4), says nothing of it being still to come
  (next, will, proposed, not yet, asked ...), and says it happened: with the action's own verb
  in the past (run -> ran, switch -> switched, restart -> restarted) for an action, with a
  success word (succeeded, confirmed, passes, is gone, applied) for an outcome, in a word the
  range itself never wrote outside its pending sentences (a range that says "the build passes"
  or "was edited" records those events). Or a line that says nothing is left (nothing open, all done, "Done.") while anything
  is pending.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .messages import SourceMessage
from .patterns import CODE_SPAN, content_words

__all__ = ["PendingStep", "claimed_done", "pending_steps"]

_ACTION = re.compile(
    r"\b(?:next step|next:|next,? (?:I|we)(?:'ll| will)|(?:I|we)(?:'ll| will) .{0,80}\b(?:once|if|when|after) you|"
    r"waiting (?:for|on)|until you|once you (?:say|agree|confirm|approve)|not (?:done|applied|run|changed|"
    r"touched|edited) (?:yet|anything)|nothing (?:is |has been )?(?:changed|edited|applied) yet|"
    r"(?:have|has) not (?:been )?(?:changed|touched|edited|applied|run|made|done)|still to do|yet to|"
    r"would (?:fix|solve|resolve)|I can\b|(?:do|should|shall|can|could) (?:you|I|we)\b|"
    r"I (?:propose|suggest|recommend)|with your (?:approval|ok|go-ahead))", re.I)
_OUTCOME = re.compile(
    r"\b(?:still (?:fails?|failing|returns|errors?|warns?|prints|times? out|broken|red)|(?:was|were) refused|"
    r"not (?:verified|confirmed|tested|fixed) yet)\b", re.I)
# Success words a line uses to say an outcome was reached.
_SUCCESS = re.compile(
    r"\b(?:succeeded|succeeds|confirmed|verified|fixed|resolved|applied|passes|passed|works|green|is clean|"
    r"(?:is|are) gone|no longer (?:fails|warns|errors))\b", re.I)
_PAST = re.compile(r"\b[A-Za-z]+(?:ed|ran|set|done)\b|\bran\b", re.I)
_IRREGULAR = {"ran": "run", "set": "set", "done": "do", "made": "make", "wrote": "write", "put": "put"}
_STILL = re.compile(
    r"\b(?:next|will|would|to do|todo|not yet|not done|pending|proposed?|proposal|plan(?:ned)?|waiting|awaiting|"
    r"once|until|should|asked|ask|if you|unless|open|yet)\b", re.I)
_NOTHING_LEFT = re.compile(r"\b(?:nothing (?:is )?(?:open|left|pending|remaining)|no open (?:questions?|items?)|"
                           r"all (?:done|green|fixed)|fully (?:fixed|resolved))\b|(?:^|[.;]\s+)done(?:\.?$|[;,])", re.I)
_GOAL = re.compile(r"^\W*(?:goal|task|user|request|asked|constraints?|rules?|cause|why)\b", re.I)
_SENTENCE = re.compile(r"(?<=[.!?;])\s+")


@dataclass
class PendingStep:
    sentence: str
    outcome: bool  # an outcome not reached (still fails), else an action still to come
    words: frozenset[str]


def pending_steps(msgs: list[SourceMessage]) -> list[PendingStep]:
    """Sentences of the range's closing agent text that leave a step or an outcome to come."""
    last = max((m.index for m in msgs if m.role == "assistant" and m.kind == "text" and m.text.strip()),
               default=None)
    if last is None or any(m.index > last and m.kind == "tool-call" for m in msgs):
        return []
    text = next(m.text for m in msgs if m.index == last)
    out = []
    for s in _SENTENCE.split(" ".join(text.split())):
        outcome = _OUTCOME.search(s) is not None
        if outcome or _ACTION.search(s):
            out.append(PendingStep(s, outcome, frozenset(content_words(s))))
    return out


def _stem(word: str) -> str:
    w = word.lower()
    if w in _IRREGULAR:
        return _IRREGULAR[w]
    return re.sub(r"(?:ied|ed|ing|es|s)$", "", w)[:5]


def _did_the_action(said: str, stems: set[str], recorded: set[str]) -> bool:
    """The line puts one of the pending steps' own verbs in the past (run -> ran, restart ->
    restarted), in a form the range never wrote (``edited`` where the range says the file was
    edited records a past event, not the pending step)."""
    return any(_stem(m.group(0)) in stems and m.group(0).lower() not in recorded for m in _PAST.finditer(said))


def _reached(said: str, recorded: set[str]) -> bool:
    """The line says the outcome was reached, in words the range never used for it."""
    return any(m.group(0).lower() not in recorded for m in _SUCCESS.finditer(said))


def claimed_done(summary: str, msgs: list[SourceMessage]) -> list[str]:
    """Summary lines that report a pending step or outcome (above) as done."""
    pending = pending_steps(msgs)
    if not pending:
        return []
    # The closing text's pending sentences speak of one step in several ("I propose raising it
    # to 200000: `set_policy ...`. I have not applied it."): their verbs are read together.
    stems = {_stem(w) for p in pending if not p.outcome for w in re.findall(r"[A-Za-z]+", p.sentence)}
    actions = frozenset().union(*(p.words for p in pending if not p.outcome))
    steps = [s for s in pending if s.outcome and len(s.words) >= 3]
    if len(actions) >= 3:
        steps.append(PendingStep(" ".join(p.sentence for p in pending if not p.outcome), False, actions))
    # Words the range wrote outside its pending sentences ("I have not applied it" records no
    # "applied").
    left = {p.sentence for p in pending}
    recorded = {w.lower() for m in msgs
                for part in _SENTENCE.split(" ".join(m.text.split())) if part not in left
                for w in re.findall(r"[A-Za-z]+(?: (?:clean|gone))?", part)}
    out = []
    for line in summary.split("\n"):
        body = line.strip(" -*\t")
        if not body:
            continue
        if _NOTHING_LEFT.search(body):
            out.append(body[:120])
            continue
        # What the line itself says: quotes (an error that says "applied") and the user's goal
        # restated ("Goal: get api running after DB_PASSWORD was rotated") are no claims.
        said = CODE_SPAN.sub(" ", body)
        if _GOAL.match(said) or _STILL.search(said):
            continue
        words = set(content_words(body))
        for step in steps:
            if len(words & step.words) < max(3, min(4, -(-len(step.words) // 3))):
                continue
            if _reached(said, recorded) if step.outcome else _did_the_action(said, stems, recorded):
                out.append(body[:120])
                break
    return out
