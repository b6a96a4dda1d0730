"""Read a built curriculum the way the model sees it and measure what its labels teach.

    from data_gen.audit import read_rows, audit
    figures = audit(read_rows("runs/demo/data"))

Everything here reads rows only (``{messages, tools, meta}`` as written to parquet), never
the replay's state: a check that the labels are learnable must look at what the model is
shown, not at what the labeler knew.

* **visible refs** of a row: the refs of the ref tags in its context messages
  (``<acp tokens=.. type=..>m00012</acp>``; with the proxy's ``text-only`` tags a tool
  message carries none) and every ref printed in the trailing nudge (its range list);
* an **invisible boundary**: a compress target's ``startId``/``endId`` that is not a
  visible ref (message refs) or whose block id appears nowhere in the context (block ids);
* a **silent nudge**: a row whose context ends with a nudge while its target neither
  compresses nor says a word about it;
* **summary lines** (``data_gen.summary_figures``): content lines of every summary a
  target writes, how many are a bare value or under four words or leave a quote open (a
  cut inside a quoted item), how many summaries repeat a line, and how many ``KEY=value`` items are altered (no message of the row's context
  sets that key to that full value); how many are **upkeep remarks** (the agent's words on
  folding or declining a nudge copied as task facts), **empty promises** (an item
  announced, then cut away: ``it failed with...``) or **lone locations** (a bare
  ``path:line`` with nothing said about what is there);
* **range topics**: how many compress ranges carry their own ``topic`` and how many of
  those only repeat the call's ``topic`` (the host falls back to it anyway).

``dtw audit DIR`` adds the **memorisation audit** (``data_gen.memorisation``: per split
against train, ``structure_seen``, ``content_seen`` and the (kind, range-shape)
combinations); ``dtw audit DIR --memorisation`` prints only that, one line per split.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .summary_figures import (
    bare_value,
    content_lines,
    empty_promise,
    exact_items,
    lone_location,
    setting_in,
    upkeep_remark,
)

__all__ = ["audit", "compress_ranges", "invisible_boundaries", "nudge_of", "read_rows", "visible_refs"]

_TAG = re.compile(r'^<acp tokens="[^"]*" type="[^"]*">(m\d{5})</acp>')
_REF = re.compile(r"(?<![\w])(m\d{5})(?![\w])")
_BLOCK = re.compile(r"(?<![\w])(b\d+)(?![\w])")
NUDGE_PREFIX = "[ACP]"


def read_rows(data_dir: str | Path, splits: Iterable[str] = ("train", "validation", "test", "heldout")) -> list[dict]:
    """Every row of the named splits, in file order, ``meta.extra`` decoded into ``meta``."""
    from plumbing.runs import stage_files
    from plumbing.shards import ShardError, check_shards, read_shard

    rows = []
    for split in splits:
        files = stage_files(data_dir, split, ("*.parquet",))  # the manifest's shards, unchanged
        check_shards(files)
        for f in files:
            for r in read_shard(f):
                meta = dict(r["meta"])
                try:
                    extra = json.loads(meta.pop("extra") or "{}")
                except (ValueError, RecursionError):
                    extra = None
                if not isinstance(extra, dict):
                    raise ShardError(f"{f}: a row's meta.extra is not a JSON object")
                meta.update(extra)
                meta["split"] = split
                rows.append({"messages": r["messages"], "tools": r["tools"], "meta": meta})
    return rows


def nudge_of(row: dict) -> str:
    """The trailing nudge's text ('' when the context does not end with one)."""
    msgs = row["messages"]
    if len(msgs) >= 2 and msgs[-2]["role"] == "user" and (msgs[-2]["content"] or "").startswith(NUDGE_PREFIX):
        return msgs[-2]["content"] or ""
    return ""


def visible_refs(row: dict) -> set[str]:
    """Message refs the model can see: tagged context messages plus the nudge's refs."""
    out: set[str] = set()
    for m in row["messages"][1:-1]:
        mt = _TAG.match(m["content"] or "")
        if mt:
            out.add(mt.group(1))
    out.update(_REF.findall(nudge_of(row)))
    return out


def _context_text(row: dict) -> str:
    parts = []
    for m in row["messages"][1:-1]:
        parts.append(m["content"] or "")
        parts += [c["function"]["arguments"] for c in m.get("tool_calls") or []]
    return "\n".join(parts)


def compress_ranges(row: dict) -> list[dict]:
    """The ``content`` ranges of the target's compress call(s)."""
    out = []
    for c in row["messages"][-1].get("tool_calls") or []:
        if c["function"]["name"] == "compress":
            out += json.loads(c["function"]["arguments"]).get("content") or []
    return out


def invisible_boundaries(row: dict) -> list[str]:
    """Boundaries of the target's compress ranges the model cannot see in its context."""
    refs = visible_refs(row)
    blocks = set(_BLOCK.findall(_context_text(row)))
    bad = []
    for r in compress_ranges(row):
        for key in ("startId", "endId"):
            ref = str(r.get(key))
            ok = ref in refs if ref.startswith("m") else ref in blocks
            if not ok:
                bad.append(ref)
    return bad


def _silent(row: dict) -> bool:
    """The context ends with a nudge and the target ignores it (no compress, no word on it)."""
    if not nudge_of(row) or compress_ranges(row):
        return False
    return row["meta"]["kind"] in ("ordinary", "recovery") and not row["meta"].get("declined")


def audit(rows: list[dict]) -> dict[str, Any]:
    """Figures of a curriculum: shares per kind, invisible boundaries, silent nudges, tiers."""
    kinds = Counter(r["meta"]["kind"] for r in rows)
    n = max(1, len(rows))
    compress_rows = [r for r in rows if compress_ranges(r)]
    invisible = [r for r in compress_rows if invisible_boundaries(r)]
    boundaries = sum(2 * len(compress_ranges(r)) for r in compress_rows)
    bad_boundaries = sum(len(invisible_boundaries(r)) for r in compress_rows)
    tiers = [r for r in rows if r["meta"]["kind"] in ("tier2", "tier3")]
    single = [r for r in tiers if any(len(x.get("sources") or []) < 2 for x in r["meta"].get("ranges") or [])]
    urgent_ignored = [r for r in rows if "Compression required" in nudge_of(r) and not compress_ranges(r)]
    header_figures = 0
    for r in tiers:
        for rg in compress_ranges(r):
            header_figures += sum(1 for ln in rg["summary"].split("\n")
                                  if re.fullmatch(r"[-*•\s]*[\d.,]+[xK%]?\s*", ln.strip()) and ln.strip())
    lines = short = bare = dup = altered = values = unclosed = 0
    upkeep = empty = lone = topics = redundant_topics = 0
    for r in compress_rows:
        context = _context_text(r).replace("\\n", "\n").replace('\\"', '"')
        for call in r["messages"][-1].get("tool_calls") or []:
            if call["function"]["name"] == "compress":
                args = json.loads(call["function"]["arguments"])
                for rg in args.get("content") or []:
                    topics += "topic" in rg
                    redundant_topics += "topic" in rg and rg["topic"] == args.get("topic")
        for rg in compress_ranges(r):
            cl = content_lines(rg.get("summary") or "")
            upkeep += sum(1 for ln in cl if upkeep_remark(ln))
            empty += sum(1 for ln in cl if empty_promise(ln))
            lone += sum(1 for ln in cl if lone_location(ln))
            lines += len(cl)
            short += sum(1 for ln in cl if len(ln.split()) < 4)
            bare += sum(1 for ln in cl if bare_value(ln))
            unclosed += sum(1 for ln in cl if ln.count("`") % 2)
            dup += len(set(cl)) < len(cl)
            for cls, text in exact_items(rg.get("summary") or ""):
                if cls == "exact_values":
                    values += 1
                    key, _, value = text.partition("=")
                    altered += not setting_in(key, value, context)
    return {
        "rows": len(rows),
        "kinds": dict(sorted(kinds.items())),
        "shares": {k: round(v / n, 3) for k, v in sorted(kinds.items())},
        "compress_rows": len(compress_rows),
        "rows_with_invisible_boundary": len(invisible),
        "invisible_boundaries": bad_boundaries,
        "boundaries": boundaries,
        "tier_rows": len(tiers),
        "tier_single_block": len(single),
        "tier_bare_figure_lines": header_figures,
        "silent_nudge_rows": sum(1 for r in rows if _silent(r)),
        "urgent_nudge_not_compressed": len(urgent_ignored),
        "summary_lines": lines,
        "bare_value_line_share": round(bare / lines, 4) if lines else 0.0,
        "under_four_words_line_share": round(short / lines, 4) if lines else 0.0,
        "unclosed_quote_lines": unclosed,
        "summaries_with_duplicate_lines": dup,
        "key_values": values,
        "altered_key_values": altered,
        "upkeep_remark_lines": upkeep,
        "empty_promise_lines": empty,
        "lone_location_lines": lone,
        "range_topics": topics,
        "range_topics_repeating_the_call": redundant_topics,
    }


def add_audit(p) -> None:
    """``dtw audit`` / ``python -m data_gen audit runs/demo/data``: what the labels teach (:mod:`data_gen.audit`)."""
    p.add_argument("dir", help="a data_gen output folder (runs/<name>/data)")
    p.add_argument("--memorisation", action="store_true",
                   help="print only the memorisation audit, one line per split (data_gen.memorisation)")
    p.set_defaults(func=_audit)


def _audit(args) -> int:
    import sys

    if not Path(args.dir).is_dir():
        print(f"error: {args.dir}: no such data folder", file=sys.stderr)
        return 2
    from plumbing.runs import StageInputError

    from .memorisation import audit_lines, memorisation_audit

    try:
        rows = read_rows(args.dir)
    except StageInputError as exc:  # a shard the manifest does not list, or an edited one
        print(f"error: {exc}", file=sys.stderr)
        return 2
    figures = audit(rows)
    by_split: dict[str, list[dict]] = {}
    for r in rows:
        by_split.setdefault(r["meta"]["split"], []).append(r)
    figures["memorisation"] = memorisation_audit(by_split)
    if args.memorisation:
        print("\n".join(audit_lines(figures["memorisation"])))
        return 0
    print(json.dumps(figures, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:  # python -m data_gen.audit DIR (= dtw audit DIR)
    from plumbing.subcommands import run_command

    return run_command("python -m data_gen.audit", "Print the curriculum audit of a data folder (JSON).",
                       add_audit, argv)


if __name__ == "__main__":
    raise SystemExit(main())
