"""Doctrine conformance checker: how well does a summary follow the compression doctrine?

Used to filter curriculum labels, to score model summaries in evaluation and (later) as
a reward, so it is deterministic, pure Python + ``re``, and reads every threshold from
the doctrine version (``doctrine/versions/<v>/conformance.json``).

    from doctrine.conform import check_summary, extract_keep_items
    report = check_summary(messages, summary, tier=1)   # messages: chat or flat kernel
    report.score, report.passed, report.classes["error_strings"].recall

CLI: ``python -m doctrine conform --source SRC.jsonl --summary SUMMARY.md [--tier N] [--table]``.

How candidates are chosen
-------------------------
Not every number in a 2,000-line log is a KEEP item. Each candidate gets a salience in
[0, 1] from where it was found (constants named ``S_*`` in :mod:`.outputs`, :mod:`.code`,
:mod:`.prose`, :mod:`.extract`); candidates under ``min_salience`` are dropped and each
class keeps its top ``cap`` (both from conformance.json), so recall is measured over what
a summary could reasonably keep. The main choices:

* errors: the last exception line of a traceback (1.0) over earlier ones (0.9); pytest
  ``FAILED path::test`` ids and jest ``●`` names (0.9); ``error TS2345: ...`` diagnostics
  (0.9); the first ``E   `` line of a pytest failure (0.75); ``TypeError: ...``,
  ``fatal: ...``, ``npm ERR!``, shell errors and ERROR/FATAL log messages (0.7, log
  prefixes such as timestamps and ``[worker-3]`` removed); warnings are weak (0.3).
* paths with lines: the innermost project frame of a traceback, compiler/pytest failure
  locations and where an edit landed (0.8-0.85); paths the user or agent wrote (0.7);
  other project frames (0.5); grep-style hits in output (0.3); library frames
  (site-packages, stdlib, node_modules: 0.15, i.e. never).
* signatures and code lines: the first changed line of an edit (``new_str`` lines not in
  ``old_str``, 0.85; two more at 0.6), signatures inside an edit (0.75), the code line under
  the failing frame (0.6), signatures of a created file (0.55), diff ``+`` lines (0.4) and
  signatures seen in a file view (0.35).
* exact values: the range's last test-count line (``1 failed, 49 passed``: 0.95, earlier
  ones 0.5); settings and values an edit changed (0.7-0.8); values in prose (0.6); values
  in shell commands (0.45); versions and numbers with units in output only on lines that
  name a threshold (timeout, limit, latency, memory...: 0.45) or as versions (0.35).
* decisions: an assistant sentence with a decision marker (decided, will use, chose,
  instead of, switch to, rather than...) and a rationale marker (because, since, so that,
  due to, to avoid...) in it or opening the next sentence (0.8, 0.9 when it names code).
* user intent: the first sentence of the task (1.0; the issue text for OpenHands-style
  prompts), constraint sentences (must, don't, never, keep, only...: 0.85, later user
  messages 0.9) and the first sentence of later user messages (0.7).
* open questions: user questions no later assistant text answers (0.8), "still need
  to"/"next:"/"TODO" in the agent's prose (0.75, 0.85 in its last message), TODO/FIXME
  written in edits (0.8).
* message refs: the first and last ref of the range (any one for a range of <= 3 refs);
  for tier-2/3 sources, each source block id.

* resolution: a user question that the next assistant reply settles (a recommendation, or
  an answer with a reason, sharing its terms) is a decision (0.95 when the user then
  approves it, "OK, do that"), not an open question; approvals add no user-intent item.

* restatement (:mod:`.relevance`): when the range's prose says printed values again (the
  agent's report quotes ``Expected: 3221225472``), those values are needed (0.6; a bare
  printed number so restated, 0.55, keeps the field name it was printed under) and the
  printed values the prose leaves out, under 0.5, were read in passing (a banner's version, a
  per-test timing, a config view's other rows: dropped under the floor). A range whose prose
  restates nothing keeps the reading above.

A repeated candidate keeps its best salience plus a small log-count boost.

How a summary is scored
-----------------------
Each item gets a credit in [0, 1] (:mod:`.match`): exact forms score 1; otherwise the item's
load-bearing parts decide (:mod:`.terms`): a path with its line, an error's type and the
names in its message, a setting's key with its full value (``60_000`` = ``60000``), a
signature's name, a decision's terms next to a reason, the content words of a goal or TODO
on one summary line. A class's recall is the salience-weighted mean credit; a class weighs
in the score by how many items it has (``full_weight_items``), so one partly kept item is one
item, not the fate of the whole summary. Then :mod:`.usability` reads the summary as a
reader would: fragment lines (no sentence, one anchor), duplicated lines, numbers the source
never had, values altered from the source (a labelled number given another label's value, a
change written with an outcome the range does not record: :mod:`.changes`) or superseded ones
given as current, and a step the range's closing text leaves to come written as done
(:mod:`.pending`); DROP
detection (pasted output) is in :mod:`.drop`; limits and the final score in
:func:`check_summary`. :mod:`.agreement` measures all of this against hand-labelled verdicts
and :mod:`.judge` asks a model for a second opinion.
"""

from __future__ import annotations

from .check import ClassResult, ConformanceReport, check_summary
from .drop import DropViolation
from .extract import extract_keep_items
from .items import CLASSES, KeepItem
from .messages import MessageFormatError, SourceMessage, normalise_messages
from .settings import ConformanceConfigError, ConformanceSettings, settings_for

__all__ = [
    "CLASSES",
    "ClassResult",
    "ConformanceConfigError",
    "ConformanceReport",
    "ConformanceSettings",
    "DropViolation",
    "KeepItem",
    "MessageFormatError",
    "SourceMessage",
    "check_summary",
    "extract_keep_items",
    "normalise_messages",
    "settings_for",
]
