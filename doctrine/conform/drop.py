"""DROP violations: tool output pasted into a summary, and repeated status lines.

Copied output is found on whitespace-normalised text in two ways:

* character runs: every ``kgram``-character window of the tool outputs at positions that
  are multiples of ``step`` is indexed; each summary position is looked up, and a hit is
  extended left and right to the longest common run. Any common run of at least
  ``kgram + step - 1`` characters contains an indexed window, so runs of the reported
  length are never missed. A run counts when, after removing the characters that KEEP
  items matched inside it, at least ``min_run_chars`` remain.
* lines: ``min_run_lines`` or more consecutive summary lines that are each a verbatim
  tool-output line (at least 8 characters) and not themselves a KEEP item.

Repeated status lines are summary lines that occur ``repeat_min`` or more times once
digits are masked ("retry 1/5", "retry 2/5", ...).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass

from .patterns import norm

__all__ = ["DropViolation", "find_drop_violations"]


@dataclass
class DropViolation:
    """One offending span: ``kind`` is ``copied_output``, ``copied_lines`` or ``repeated_lines``."""

    kind: str
    chars: int
    excerpt: str
    message: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def _runs(summary: str, sources: list[tuple[str, str]], kgram: int, step: int) -> list[tuple[int, int, int]]:
    """Maximal (start, end, source_index) runs of ``summary`` found verbatim in a source."""
    index: dict[str, list[tuple[int, int]]] = {}
    for si, (_key, text) in enumerate(sources):
        for pos in range(0, max(0, len(text) - kgram + 1), step):
            bucket = index.setdefault(text[pos:pos + kgram], [])
            if len(bucket) < 4:  # highly repetitive output: a few anchors are enough
                bucket.append((si, pos))
    runs: list[tuple[int, int, int]] = []
    i = 0
    n = len(summary)
    while i + kgram <= n:
        hits = index.get(summary[i:i + kgram])
        if not hits:
            i += 1
            continue
        best = None
        for si, pos in hits:
            src = sources[si][1]
            a, b = i, pos
            while a > 0 and b > 0 and summary[a - 1] == src[b - 1]:
                a, b = a - 1, b - 1
            e, f = i + kgram, pos + kgram
            while e < n and f < len(src) and summary[e] == src[f]:
                e, f = e + 1, f + 1
            if best is None or e - a > best[1] - best[0]:
                best = (a, e, si)
        if runs and best[0] < runs[-1][1]:
            if best[1] > runs[-1][1]:
                runs[-1] = (runs[-1][0], best[1], runs[-1][2])
        else:
            runs.append(best)
        i = max(i + 1, best[1] - kgram + 1)
    return runs


def _covered(start: int, end: int, keep_spans: list[tuple[int, int]]) -> int:
    total = 0
    for a, b in keep_spans:
        lo, hi = max(a, start), min(b, end)
        if hi > lo:
            total += hi - lo
    return total


def _excerpt(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def find_drop_violations(
    summary: str,
    tool_outputs: list[tuple[str, str]],
    keep_texts: list[str],
    *,
    min_run_chars: int,
    min_run_lines: int,
    kgram: int,
    repeat_min: int,
    report_chars: int,
) -> tuple[list[DropViolation], float]:
    """Violations and the share (0..1) of the normalised summary they cover.

    ``tool_outputs`` is ``[(message_key, text)]``; ``keep_texts`` are the texts of the KEEP
    items the summary kept, which may be copied without counting against it.
    """
    text = norm(summary)
    if not text:
        return [], 0.0
    sources = [(k, norm(t)) for k, t in tool_outputs if t and t.strip()]
    keep_spans: list[tuple[int, int]] = []
    for kt in {norm(k) for k in keep_texts if k and len(norm(k)) >= 4}:
        for m in re.finditer(re.escape(kt), text):
            keep_spans.append((m.start(), m.end()))
    step = max(1, min_run_chars - kgram) if min_run_chars > kgram else 1
    flagged = [False] * len(text)
    out: list[DropViolation] = []
    for a, b, si in _runs(text, sources, kgram, step):
        excess = (b - a) - _covered(a, b, keep_spans)
        if excess >= min_run_chars:
            out.append(DropViolation("copied_output", b - a, _excerpt(text[a:b], report_chars), sources[si][0]))
            for p in range(a, b):
                flagged[p] = True

    # Line runs, on the summary's own lines.
    src_lines = {norm(ln) for _k, t in tool_outputs for ln in t.split("\n") if len(norm(ln)) >= 8}
    keep_norm = [norm(k) for k in keep_texts if k]
    run: list[str] = []
    lines = [norm(ln) for ln in summary.split("\n")]

    def close_run() -> None:
        if len(run) >= min_run_lines:
            joined = " ".join(run)
            before = sum(flagged)
            marks = flagged[:]
            _flag(text, joined, marks)
            # Report only what a character run did not already cover.
            if sum(marks) - before >= 0.5 * len(joined):
                out.append(DropViolation("copied_lines", len(joined), _excerpt(joined, report_chars)))
            flagged[:] = marks
        run.clear()

    for ln in lines:
        bare = re.sub(r"^(?:[-*>]\s+|`+)|`+$", "", ln).strip()
        if bare in src_lines and _keep_coverage(bare, keep_norm) < 0.6:
            run.append(bare)
        elif ln:
            close_run()
    close_run()

    # KEEP lines (a list of failing test ids, say) may share a shape; only the rest counts.
    status = [ln for ln in lines if len(ln) >= 8 and _keep_coverage(ln, keep_norm) < 0.6]
    masked = Counter(re.sub(r"\d+", "#", ln) for ln in status)
    for skel, n in sorted(masked.items()):
        if n >= repeat_min:
            sample = next(ln for ln in status if re.sub(r"\d+", "#", ln) == skel)
            out.append(DropViolation("repeated_lines", len(sample) * n, _excerpt(f"{n}x {sample}", report_chars)))
            for ln in status:
                if re.sub(r"\d+", "#", ln) == skel:
                    _flag(text, ln, flagged)
    share = sum(flagged) / len(text)
    return out, round(share, 4)


def _keep_coverage(line: str, keep_norm: list[str]) -> float:
    """Share of ``line`` covered by KEEP item texts that occur in it."""
    if not line:
        return 0.0
    marks = [False] * len(line)
    for k in keep_norm:
        if len(k) < 4:
            continue
        for m in re.finditer(re.escape(k), line):
            for p in range(m.start(), m.end()):
                marks[p] = True
    return sum(marks) / len(line)


def _flag(text: str, piece: str, flagged: list[bool]) -> None:
    for m in re.finditer(re.escape(piece), text):
        for p in range(m.start(), m.end()):
            flagged[p] = True
