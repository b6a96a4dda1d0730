"""Logged decisions: compressions a production kernel applied, as labeled samples.

Each tier-1 block of a state file (acp-kernel state, billion-context proxy session, Pi
sidecar with its session log) whose source messages are available becomes one decision:

- context: the flat messages up to the block's range end plus the recent zone that followed
  it (the kernel never folds the last few messages), with the blocks that existed before it
  folded in, rendered by the kernel as the host would show it (tags, retained compress
  calls, the nudge when the kernel's gate would have injected one at that point);
- target: the compress call the production model made: the block's range and its summary.

The summary is scored by the conformance checker; below the threshold (the doctrine
version's pass verdict unless ``min_score`` is set) the decision is dropped or, with
``relabel``, its summary is recomposed by the doctrine's labeler. Every outcome is counted.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["logged_samples"]

RECENT_AFTER = 5  # messages kept after the range: the kernel's preserveRecentMessages


def _paths(paths: list[str]) -> Iterator[Path]:
    for p in map(Path, paths):
        if p.is_dir():
            yield from sorted(x for x in p.rglob("*.json") if not x.name.startswith((".tmp-", ".acp-tmp-")))
        else:
            yield p


def _block_number(block_id: str) -> int:
    return int(block_id[1:]) if block_id[1:].isdigit() else 0


def logged_samples(paths: list[str], *, doctrine, prompt_mode: str, window: int,
                   min_score: float | None, below_threshold: str, rejects: Counter,
                   nudge_style: str = "list", gate: str = "default", host: str = "proxy",
                   profiles: list | None = None) -> Iterator[dict[str, Any]]:
    """Samples ``{messages, tools, meta}`` from every usable block in ``paths``, rendered
    under the serving profile ``(window, gate, host, prompt_mode, nudge_style)`` by the one
    request renderer (``profiles``, if given, collects the profile used)."""
    from doctrine.kernel.profile import resolve_profile
    from doctrine.kernel.readers import StateError, read_state_file
    from doctrine.render.request import request_frame

    profile = resolve_profile(window, gate, host, prompt_mode=prompt_mode, nudge_style=nudge_style)
    if profiles is not None:
        profiles.append(profile)
    frame = request_frame(profile, doctrine)
    tools = frame.tools
    for path in _paths(paths):
        try:
            logged = read_state_file(path)
        except StateError as exc:  # the reader's one-line error (bad JSON, UTF-8, types, nesting)
            rejects[f"logged:{type(exc).__name__}"] += 1
            continue
        except (OSError, ValueError, TypeError, RecursionError):
            rejects["logged:unreadable"] += 1
            continue
        try:
            yield from _file_samples(logged, path, frame=frame, tools=tools, doctrine=doctrine, profile=profile,
                                     prompt_mode=prompt_mode, window=window, min_score=min_score,
                                     below_threshold=below_threshold, rejects=rejects, gate=gate, host=host)
        except (TypeError, ValueError, AttributeError, KeyError, RecursionError) as exc:
            # A malformed file is counted; the build goes on with the next one.
            rejects[f"logged:malformed_{type(exc).__name__}"] += 1


def _file_samples(logged, path, *, frame, tools, doctrine, profile, prompt_mode: str, window: int,
                  min_score: float | None, below_threshold: str, rejects: Counter, gate: str,
                  host: str) -> Iterator[dict[str, Any]]:
    """The samples of one state file already read (see logged_samples)."""
    from doctrine.conform import check_summary
    from doctrine.kernel import CompressionState
    from doctrine.render.request import render_request

    if not logged.messages:
        rejects["logged:no_messages"] += len(logged.state.blocks) or 1
        return
    index = {m.id: i for i, m in enumerate(logged.messages)}
    blocks = sorted(logged.state.blocks, key=lambda b: (_block_number(b.block_id), b.created_at))
    for n, block in enumerate(blocks):
        if block.tier != 1:
            rejects["logged:not_tier1"] += 1
            continue
        ids = [i for i in block.direct_message_ids if i in index]
        if not ids or len(ids) < len(block.direct_message_ids):
            rejects["logged:source_messages_missing"] += 1
            continue
        first, last = min(index[i] for i in ids), max(index[i] for i in ids)
        source = [logged.messages[index[i]].to_dict() for i in sorted(ids, key=index.get)]
        summary = block.summary
        report = check_summary(source, summary, tier=1, doctrine=doctrine)
        ok = report.passed if min_score is None else report.score >= min_score
        relabeled = False
        if not ok:
            if below_threshold != "relabel":
                rejects["logged:below_threshold"] += 1
                continue
            summary = _relabel(source, doctrine, seed=n)
            if summary is None:
                rejects["logged:relabel_failed"] += 1
                continue
            report = check_summary(source, summary, tier=1, doctrine=doctrine)
            relabeled = True
        # The state as it was before this block: earlier blocks only, none consumed yet.
        earlier = CompressionState.initial()
        earlier.blocks = [b.copy() if hasattr(b, "copy") else b for b in blocks[:n] if b.tier == 1]
        visible = logged.messages[:min(len(logged.messages), last + 1 + RECENT_AFTER)]
        try:
            req = render_request(frame, visible, earlier)
            view = req.view
        except Exception as exc:  # a corrupt log never stops the build
            rejects[f"logged:render_{type(exc).__name__}"] += 1
            continue
        refs = view.state.by_raw
        start, end = refs.get(logged.messages[first].id), refs.get(logged.messages[last].id)
        if not start or not end or start == "BLOCKED":
            rejects["logged:no_ref"] += 1
            continue
        call = {"id": f"logged_{block.block_id}", "type": "function", "function": {
            "name": "compress", "arguments": json.dumps({"topic": block.topic or "", "content": [
                {"startId": start, "endId": end, "summary": summary}]}, ensure_ascii=False)}}
        messages = [*req.messages, {"role": "assistant", "content": "", "tool_calls": [call]}]
        yield {"messages": messages, "tools": tools, "meta": {
            "kind": "nudged_compress" if view.nudge_shown else "spontaneous_compress",
            "source": "logged", "family": f"logged:{logged.host}", "session_id": f"{logged.host}:{logged.session_id}",
            "step": n, "window": window, "gate": gate, "host": host, "serving_profile": profile.sha256,
            "doctrine_version": doctrine.version,
            "doctrine_sha256": doctrine.sha256, "labeler": "production" if not relabeled else "doctrine-labeler",
            "labeler_version": "-", "prompt_mode": prompt_mode, "license": "operator logs",
            "conformance": {"score": report.score, "passed": report.passed},
            "block_id": block.block_id, "relabeled": relabeled, "source_file": str(path)}}


def _relabel(source: list[dict], doctrine, seed: int) -> str | None:
    """Recompose a summary with the doctrine's labeler (None when it is not available)."""
    try:
        from doctrine.label.summaries import compose_summary
    except ImportError:
        return None
    try:
        return compose_summary(source, doctrine=doctrine, seed=seed)
    except Exception:
        return None
