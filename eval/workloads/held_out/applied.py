"""Score a held-out reply by applying it to the row's kernel state, as the host would.

A row built by data_gen carries its kernel input (``meta.kernel_input``, see
``doctrine.render.snapshot``). From it the turn is run again under the row's serving profile and
the reply's calls go through the kernel:

* compress: ``compress_tool_call`` on what the host hands it (its messages or the view);
  each block the kernel made is a range whose source is what the kernel folded: the raw
  messages it covers directly plus the summaries of the blocks it consumed (the same
  source the labeler checked its own summary against); the block's tier is the kernel's.
  Kernel errors (a range that failed) and warnings (a range snapped, skipped, partly in the
  protected zone) are counted.
* search_context / decompress: run on the same state the way the profile's host runs them,
  judged by whether they reach a block that holds what the row's next step needs.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from typing import Any

from doctrine.kernel.compress_args import compress_tool_call, parse_compress_args
from doctrine.kernel.decompress import decompress
from doctrine.kernel.search import build_message_docs, search_active_blocks, search_context
from doctrine.label.summaries import source_dicts
from doctrine.render.snapshot import Rebuilt
from plumbing.tool_format import arguments_object

__all__ = ["Applied", "apply_compress", "apply_recovery", "fold_source"]


@dataclass
class Applied:
    """What the kernel did with a reply's compress calls."""

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # One entry per block made, in order: (start, end, summary, tier, source dicts)
    blocks: list[tuple[str, str, str, int, list[dict[str, Any]]]] = field(default_factory=list)
    ranges: int = 0  # ranges asked for
    calls: int = 0


def fold_source(block: Any, before: Any, messages: list[Any], state: Any) -> list[dict[str, Any]]:
    """What the kernel folded into ``block``: the summaries of the blocks it consumed (as
    they were in ``before``) and the raw messages it covers directly, as the checker reads them."""
    src = []
    for bid in block.direct_block_ids:
        b = before.block(bid)
        if b is not None:
            src.append({"id": b.block_id, "role": "assistant", "content_type": "text", "text": b.summary})
    first: dict[str, Any] = {}
    for m in messages:
        first.setdefault(m.id, m)
    raw = [first[x] for x in block.direct_message_ids if x in first]
    return src + source_dicts(raw, state)


def apply_compress(rebuilt: Rebuilt, reply: dict[str, Any]) -> Applied:
    """Every compress call of ``reply`` applied in order, each to the state the last left."""
    out = Applied()
    prof = rebuilt.profile
    state = rebuilt.state
    for i, call in enumerate(reply.get("tool_calls") or []):
        fn = call.get("function") or {}
        if fn.get("name") != "compress":
            continue
        args = fn.get("arguments") or ""
        out.calls += 1
        out.ranges += len(parse_compress_args(args).ranges)
        res = compress_tool_call(args, rebuilt.compress_messages, state, prof.kernel,
                                 call_id=call.get("id") or f"eval_call_{i}", count_tokens=prof.count_tokens)
        out.errors += res.errors
        out.warnings += res.warnings
        for bid in res.new_block_ids:
            b = res.state.block(bid)
            if b is not None:
                out.blocks.append((str(b.start_ref), str(b.end_ref), b.summary, int(b.tier),
                                   fold_source(b, state, rebuilt.compress_messages, res.state)))
        if res.blocks_created:
            state = res.state
    return out


def apply_recovery(rebuilt: Rebuilt, reply: dict[str, Any]) -> dict[str, Any]:
    """Run the reply's search_context / decompress calls on the rebuilt state under the
    profile's host. Returns ``recover_success`` (a call reached a needed block: a search
    whose top hit holds it, a decompress that restored it, or a result that shows a needed
    fact), ``recover_calls``, ``recover_errors`` and ``restored`` (block ids restored)."""
    needed = rebuilt.needed or {}
    blocks = set(needed.get("blocks") or [])
    facts = [f for f in needed.get("facts") or [] if f]
    state = rebuilt.state
    host = rebuilt.profile.variant.tools_host
    ok, errors, restored, calls = False, 0, [], 0

    def holds(text: str) -> bool:
        return any(f in text for f in facts)

    for call in reply.get("tool_calls") or []:
        fn = call.get("function") or {}
        name, args = fn.get("name"), arguments_object(fn.get("arguments") or "{}")
        if name == "search_context":
            calls += 1
            query = str(args.get("query") or "")
            if host == "proxy":
                found = search_active_blocks(query, state, limit=5)
                top = found[0].block_id if found else None
                text = "\n".join(b.summary for b in found[:1])
            else:
                docs = build_message_docs(rebuilt.flat, state, only_folded=True, count_tokens=rebuilt.profile.count_tokens)
                res = search_context(query, state, docs)
                top = (res[0].ref if res[0].kind == "block" else res[0].block_id) if res else None
                text = ""
            if top is None:
                errors += 1
            ok = ok or (top in blocks) or holds(text)
        elif name == "decompress":
            calls += 1
            target = str(args.get("blockId") or "")
            with tempfile.TemporaryDirectory(prefix="dtw-eval-") as tmp:
                try:
                    res = decompress(state, target, rebuilt.flat, run_dir=tmp, style=rebuilt.profile.variant.decompress,
                                     inline=args.get("inline") if isinstance(args.get("inline"), bool) else None)
                except (ValueError, KeyError, OSError):
                    errors += 1
                    continue
                body = res.text
                if res.file_path and os.path.isfile(res.file_path):
                    with open(res.file_path, encoding="utf-8") as fh:
                        body += "\n" + fh.read()
            if not res.ok:
                errors += 1
                continue
            owner = res.block_id or _owner(state, res.message_id)
            restored.append(owner or target)
            ok = ok or (owner in blocks) or holds(body)
            state = res.state
    return {"recover_success": ok, "recover_calls": calls, "recover_errors": errors, "restored": restored}


def _owner(state: Any, raw_id: str | None) -> str | None:
    if not raw_id:
        return None
    for b in state.blocks:
        if raw_id in b.effective_message_ids:
            return b.block_id
    return None
