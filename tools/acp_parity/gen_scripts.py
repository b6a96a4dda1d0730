"""Seeded random replay scripts for the acp-kernel differential suite (run by hand).

    python tools/acp_parity/gen_scripts.py --out tests/doctrine/kernel/fixtures/acp_parity --n 36

Each script is a `python -m doctrine.kernel replay` script in the incremental form. The
sessions mix user / assistant text, reasoning, tool calls with results of every size,
protected tools, CJK text and compress calls of every outcome: recommended ranges (success),
random spans (protected-zone warnings), block-ref tier folds, message ranges over earlier
blocks (nested), consumed and unknown refs, overlapping ranges, summaries too short / long.
The Python kernel is used only to see the refs a model would see when picking a range; the
expected outputs come from acp-kernel itself (`driver.mjs`, see README.md).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from doctrine.kernel.config import KernelConfig
from doctrine.kernel.messages import Message
from doctrine.kernel.state import CompressionState
from doctrine.kernel.turn import process_turn
from plumbing.tokens import default_count_tokens

WORDS = ("the build fails in parser.ts line 42 because the token stream ends early; "
         "retry with cache off CACHE_TTL_MS = 60_000 value error decided to keep the old api "
         "TODO migrate config loader test passes now refactor done").split()
CJK = "上下文压缩摘要测试文件错误修复完成"
TOOLS = ("read_file", "bash", "grep", "edit_file", "run_tests", "search_context")


def words(rng: random.Random, n: int) -> str:
    s = " ".join(rng.choice(WORDS) for _ in range(n))
    if rng.random() < 0.08:
        s += " " + "".join(rng.choice(CJK) for _ in range(rng.randint(5, 60)))
    return s


def tool_output(rng: random.Random) -> str:
    size = rng.choice((40, 150, 500, 1500, 3000, 7000))
    lines = []
    while sum(len(x) + 1 for x in lines) < size:
        lines.append(f"{rng.randint(1, 999):>4}: " + words(rng, rng.randint(3, 14)))
    return "\n".join(lines)


def config_line(rng: random.Random, long: bool) -> dict:
    limit = rng.choice((6000, 8000, 12000, 16000, 24000))
    g = limit // rng.choice((10, 16, 25))
    cfg: dict = {
        "model_context_limit": limit,
        "nudge": {"growthFloor": g, "growthCap": g, "minGrowthFloor": g // 3,
                  "growthRatio": rng.choice((0.05, 0.1))},
        "compress": {"minCompressRange": rng.choice((0, 400, 1500, 4000)),
                     "maxSummaryLength": rng.choice((20000, 20000, 400)),
                     "minSummaryLength": rng.choice((50, 50, 20))},
        "preserveRecentMessages": rng.choice((2, 5, 8)),
        "preserveRecentTokens": rng.choice((300, 1000, 3000)),
    }
    if rng.random() < 0.35:
        cfg["protectedTools"] = rng.sample(TOOLS[:4], rng.randint(1, 2))
    if rng.random() < 0.3:
        cfg["truncate"] = {"threshold": rng.choice((0.8, 0.9))}
    if long:
        cfg["model_context_limit"] = 32000
    return cfg


class Session:
    def __init__(self, rng: random.Random, cfg: dict):
        self.rng = rng
        limit = cfg["model_context_limit"]
        self.limit = limit
        self.kcfg = KernelConfig.for_limit(limit, **{k: v for k, v in cfg.items() if k != "model_context_limit"})
        self.state = CompressionState.initial()
        self.history: list[Message] = []
        self.view: list[Message] = []
        self.last_nudge = None
        self.n = 0
        self.calls = 0
        self.pending: list[dict] = []
        self.tags = "text-only" if rng.random() < 0.25 else "all"

    def new_id(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def step_messages(self) -> list[dict]:
        rng = self.rng
        out: list[dict] = []
        if not self.history or rng.random() < 0.25:
            out.append({"id": self.new_id("u"), "role": "user", "content_type": "text",
                        "text": words(rng, rng.randint(4, 60))})
        for _ in range(rng.randint(1, 3)):
            if rng.random() < 0.2:
                out.append({"id": self.new_id("r"), "role": "assistant", "content_type": "reasoning",
                            "text": words(rng, rng.randint(5, 40))})
            if rng.random() < 0.7:
                tool = rng.choice(TOOLS)
                cid = f"call_{self.new_id('t')}"
                out.append({"id": self.new_id("a"), "role": "assistant", "content_type": "tool-call",
                            "tool_name": tool, "tool_call_id": cid,
                            "text": json.dumps({"path": f"src/f{rng.randint(1, 9)}.ts"})})
                if rng.random() < 0.95:  # an occasional call without its result (orphan strip)
                    out.append({"id": self.new_id("o"), "role": "tool", "content_type": "tool-result",
                                "tool_name": tool, "tool_call_id": cid, "text": tool_output(rng)})
            else:
                out.append({"id": self.new_id("a"), "role": "assistant", "content_type": "text",
                            "text": words(rng, rng.randint(3, 80))})
        return out

    def token_count(self, appended: list[Message]) -> int:
        base = sum(default_count_tokens(m.text) for m in self.view) + sum(
            default_count_tokens(m.text) for m in appended)
        r = self.rng.random()
        if r < 0.06:
            return int(self.limit * self.rng.uniform(0.95, 1.05))  # emergency band
        if r < 0.14:
            return int(self.limit * self.rng.uniform(0.75, 0.94))  # pressure band
        return max(1, int(base * self.rng.uniform(0.85, 1.2)))

    def turn(self) -> dict:
        msgs = self.pending + self.step_messages()
        self.pending = []
        parsed = [Message.from_dict(m) for m in msgs]
        tc = self.token_count(parsed)
        self.history = self.history + parsed
        res = process_turn(self.history, self.state, self.kcfg, tc, render_tags=self.tags)
        self.state = res.state
        self.view = res.messages
        self.last_nudge = res.nudge
        op = {"op": "turn", "append": msgs, "token_count": tc}
        if self.tags != "all":
            op["render_tags"] = self.tags
        return op

    # ------------------------------------------------------------------ compress choices
    def visible_refs(self) -> list[str]:
        refs = []
        for m in self.view:
            r = self.state.by_raw.get(m.id)
            if r and r != "BLOCKED":
                refs.append(r)
        return refs

    def summary(self) -> str:
        rng = self.rng
        k = rng.random()
        if k < 0.05:
            return ""
        if k < 0.12:
            return "short"
        if k < 0.18:
            return words(rng, 120)  # long; fails where maxSummaryLength is small
        return words(rng, rng.randint(12, 40))

    def compress_op(self) -> dict | None:
        rng = self.rng
        refs = self.visible_refs()
        if len(refs) < 2:
            return None
        active = [b for b in self.state.blocks if b.active]
        choice = rng.random()
        ranges: list[dict] = []
        nudge = self.last_nudge
        if choice < 0.4 and nudge is not None and nudge.recommended_ranges:
            picks = nudge.recommended_ranges
            if rng.random() < 0.5:
                picks = rng.sample(picks, rng.randint(1, len(picks)))
            ranges = [{"startId": r.start_ref, "endId": r.end_ref, "summary": self.summary()} for r in picks]
        elif choice < 0.55 and len([b for b in active if b.tier == 1]) >= 2:
            t1 = [b for b in active if b.tier == 1]
            a, b = sorted(rng.sample(range(len(t1)), 2))
            ranges = [{"startId": t1[a].block_id, "endId": t1[b].block_id, "summary": self.summary()}]
        elif choice < 0.62 and len([b for b in active if b.tier == 2]) >= 2:
            t2 = [b for b in active if b.tier == 2]
            ranges = [{"startId": t2[0].block_id, "endId": t2[-1].block_id, "summary": self.summary()}]
        elif choice < 0.7 and active:
            b = rng.choice(active)  # a message range around an earlier block (nested)
            i = rng.randint(0, max(0, len(refs) // 2))
            j = rng.randint(len(refs) // 2, len(refs) - 1)
            ranges = [{"startId": refs[i], "endId": refs[j], "summary": self.summary()}]
            if rng.random() < 0.3 and b.effective_message_ids:  # a consumed ref as boundary
                raw = rng.choice(b.effective_message_ids)
                ref = self.state.by_raw.get(raw)
                if ref and ref != "BLOCKED":
                    ranges[0]["startId"] = ref
        elif choice < 0.78 and self.state.blocks:
            # Stale refs: a message ref some block already covers, or the ref of a block
            # that a higher tier consumed (snapped to its owner, or reported consumed).
            b = rng.choice(self.state.blocks)
            if b.active and b.effective_message_ids and rng.random() < 0.6:
                ref = self.state.by_raw.get(rng.choice(b.effective_message_ids)) or refs[0]
            else:
                ref = b.block_id
            other = rng.choice(refs) if rng.random() < 0.7 else ref
            ranges = [{"startId": ref, "endId": other, "summary": self.summary()}]
        elif choice < 0.84:
            bad = rng.choice(("m99999", "foo", "b99", refs[0], " M00001 "))
            ranges = [{"startId": bad, "endId": rng.choice(refs), "summary": self.summary()}]
        else:
            n = rng.randint(1, 3)
            for _ in range(n):  # random spans, possibly overlapping or reversed
                i, j = rng.randint(0, len(refs) - 1), rng.randint(0, len(refs) - 1)
                ranges.append({"startId": refs[i], "endId": refs[j], "summary": self.summary()})
        if rng.random() < 0.3:
            ranges[0]["topic"] = "topic " + words(rng, 2)
        self.calls += 1
        call_id = f"cc{self.calls}"
        from doctrine.kernel.compress import apply_compression
        from doctrine.kernel.compress_args import parse_compress_args
        on = "view" if rng.random() < 0.4 else "history"
        parsed = parse_compress_args({"content": ranges})
        if not parsed.errors:
            msgs = self.view if on == "view" else self.history
            res = apply_compression(parsed.ranges, msgs, self.state, self.kcfg, compress_call_id=call_id)
            self.state = res.state
            text = res.text
        else:
            text = "error"
        # The host records the call and its result in the history the next turn sees.
        self.pending = [
            {"id": self.new_id("a"), "role": "assistant", "content_type": "tool-call", "tool_name": "compress",
             "tool_call_id": call_id, "text": json.dumps({"content": ranges})},
            {"id": self.new_id("o"), "role": "tool", "content_type": "tool-result", "tool_name": "compress",
             "tool_call_id": call_id, "text": text},
        ]
        return {"op": "compress", "call_id": call_id, "ranges": ranges, "on": on}


def make_script(seed: int, turns: int) -> list[dict]:
    rng = random.Random(seed)
    cfg = config_line(rng, long=turns > 100)
    s = Session(rng, cfg)
    lines: list[dict] = [cfg]
    for _ in range(turns):
        lines.append(s.turn())
        nudge = s.last_nudge
        p = 0.6 if (nudge is not None and nudge.should_inject) else 0.12
        if rng.random() < p:
            op = s.compress_op()
            if op is not None:
                lines.append(op)
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=36)
    ap.add_argument("--seed", type=int, default=1000)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for k in range(a.n):
        turns = 160 if k % 12 == 11 else 20 + (k * 7) % 40
        lines = make_script(a.seed + k, turns)
        (out / f"script_{k:02d}.jsonl").write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines))


if __name__ == "__main__":
    main()
