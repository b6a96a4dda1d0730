"""Rendered sample lengths in a model's own tokens, by split and kind.

    python -m data_gen inspect runs/pocket/data --lengths [--model embedded:smollm2-135m-instruct]

The build filters samples by the kernel's chars/4 estimate; what training pays for is the
sample rendered through the model's training chat template, tool schemas included. This
renders every row that way (``plumbing.chat_templates.tokenize_sample``, the trainer's own
tokenisation) and reports per split and kind: rows, distinct targets, and the p50, p95 and
max of the whole sample and of its target (the final assistant turn).
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from plumbing.chat_templates import SampleRejected, tokenize_sample

__all__ = ["length_table", "sample_lengths"]


def _pct(xs: list[int], q: float) -> int:
    if not xs:
        return 0
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def sample_lengths(row: dict[str, Any], tokenizer: Any, template: str) -> tuple[int, int]:
    """(sample tokens, target tokens) of one row as the trainer tokenises it."""
    tools = row["tools"]
    tools = json.loads(tools) if isinstance(tools, str) else tools
    out = tokenize_sample(tokenizer, row["messages"], tools, template)
    return len(out["input_ids"]), sum(out["assistant_masks"])


def length_table(rows: list[dict[str, Any]], tokenizer: Any, template: str) -> list[dict[str, Any]]:
    """One dict per (split, kind), plus an ``all`` kind per split; rows that cannot be
    tokenised are counted under ``rejected``."""
    groups: dict[tuple[str, str], list[tuple[int, int, str]]] = defaultdict(list)
    rejected: dict[tuple[str, str], int] = defaultdict(int)
    for r in rows:
        split, kind = r["meta"].get("split", "?"), r["meta"]["kind"]
        try:
            n, t = sample_lengths(r, tokenizer, template)
        except SampleRejected:
            rejected[(split, kind)] += 1
            continue
        target = json.dumps(r["messages"][-1], sort_keys=True, default=str)
        groups[(split, kind)].append((n, t, target))
        groups[(split, "all")].append((n, t, target))
    out = []
    for (split, kind), xs in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] == "all", kv[0][1])):
        tot = [x[0] for x in xs]
        tgt = [x[1] for x in xs]
        out.append({"split": split, "kind": kind, "rows": len(xs), "distinct_targets": len({x[2] for x in xs}),
                    "p50": _pct(tot, 0.5), "p95": _pct(tot, 0.95), "max": max(tot),
                    "target_p50": _pct(tgt, 0.5), "target_max": max(tgt),
                    "rejected": rejected.get((split, kind), 0)})
    return out


def format_table(table: list[dict[str, Any]]) -> str:
    cols = ("split", "kind", "rows", "distinct_targets", "p50", "p95", "max", "target_p50", "target_max", "rejected")
    lines = [" ".join(f"{c:>16}" if i > 1 else f"{c:<12}" for i, c in enumerate(cols))]
    for r in table:
        lines.append(" ".join(f"{r[c]:>16}" if i > 1 else f"{r[c]:<12}" for i, c in enumerate(cols)))
    return "\n".join(lines)
