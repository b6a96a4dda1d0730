"""Replay a synthetic 10,000-message session through the kernel, turn by turn.

    .venv/bin/python benchmarks/kernel_replay.py [--messages 10000] [--seed 0]
        [--script OUT.jsonl] [--reference ACP_KERNEL_BUILD]

``--script`` also writes the session as an incremental replay script (each turn appends its
messages; ``python -m doctrine.kernel replay`` reads it). ``--reference`` replays that script
through a built acp-kernel (``tools/acp_parity/driver.mjs`` with ``ACP_TIMING=1``; node
needed, see ``tests/doctrine/kernel/fixtures/acp_parity/README.md``) and prints its per-turn
cost at the same checkpoints and the speed ratio.

Each turn appends a user message, a tool call and its result, and an assistant answer, then
runs ``process_turn`` over the whole history (as a host does before every model call). When
the kernel nudges, a scripted "model" compresses the listed ranges in one call, and the call
and its result join the history. Prints the median time per turn near 1K, 5K and 10K messages
(the cost should grow no faster than linearly with history) and the total wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from doctrine.kernel import (
    CompressionState,
    CompressRange,
    KernelConfig,
    Message,
    apply_compression,
    default_count_tokens,
    process_turn,
)

CHECKPOINTS = (1000, 5000, 10000)
WINDOW = 100  # messages on each side of a checkpoint whose turns are timed (median)


def synthetic_turn(i: int, rnd: random.Random) -> list[Message]:
    cid = f"call{i}"
    tool = rnd.choice(["read", "bash", "grep", "edit"])
    return [
        Message(f"u{i}", "user", "text", f"Step {i}: " + "please continue with the task " * rnd.randint(2, 20)),
        Message(f"c{i}", "assistant", "tool-call", json.dumps({"path": f"src/mod{i % 97}.py"}), tool, cid),
        Message(f"t{i}", "tool", "tool-result", f"output {i}\n" + "x = compute(y)\n" * rnd.randint(20, 400),
                tool, cid),
        Message(f"a{i}", "assistant", "text", "Done with this step; next I will check the tests. " * rnd.randint(1, 6)),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit", type=int, default=200000, help="model context limit")
    ap.add_argument("--script", help="also write the session as an incremental replay script")
    ap.add_argument("--reference", help="a built acp-kernel (its dist/ or tsc output folder) to time side by side")
    args = ap.parse_args()
    ops: list[dict] = [{"model_context_limit": args.limit}]
    sent = 0

    rnd = random.Random(args.seed)
    cfg = KernelConfig.for_limit(args.limit)
    state = CompressionState.initial()
    history: list[Message] = []
    token_count = 0
    samples: dict[int, list[float]] = {c: [] for c in CHECKPOINTS if c <= args.messages}
    compress_times: list[float] = []
    n_turns = nudges = blocks = 0
    t_start = time.perf_counter()
    i = 0
    while len(history) < args.messages:
        history.extend(synthetic_turn(i, rnd))
        ops.append({"op": "turn", "append": [m.to_dict() for m in history[sent:]], "token_count": token_count})
        sent = len(history)
        t0 = time.perf_counter()
        turn = process_turn(history, state, cfg, token_count)
        dt = time.perf_counter() - t0
        n_turns += 1
        state = turn.state
        for c in samples:
            if abs(len(history) - c) <= WINDOW:
                samples[c].append(dt)
        # The host's next estimate: what it just sent (the proxy uses the upstream count).
        token_count = sum(default_count_tokens(m.text) for m in turn.messages) + 1500
        if turn.nudge.should_inject:
            nudges += 1
            ranges = [CompressRange(r.start_ref, r.end_ref,
                                    f"Summary of {r.start_ref}..{r.end_ref}: kept paths, values and decisions. " * 3)
                      for r in turn.nudge.compressible_ranges]
            if turn.nudge.tier in (2, 3) and turn.nudge.tier_target_blocks:
                t = turn.nudge.tier_target_blocks
                ranges = [CompressRange(t[0].block_id, t[-1].block_id, "Tier summary: decisions and outcomes. " * 4)]
            cid = f"compress{i}"
            ops.append({"op": "compress", "call_id": cid, "ranges": [
                {"startId": r.start_ref, "endId": r.end_ref, "summary": r.summary} for r in ranges]})
            t0 = time.perf_counter()
            res = apply_compression(ranges, history, state, cfg, compress_call_id=cid)
            compress_times.append(time.perf_counter() - t0)
            state = res.state
            blocks += res.blocks_created
            history.append(Message(f"pc{i}", "assistant", "tool-call",
                                   json.dumps({"content": [{"startId": r.start_ref, "endId": r.end_ref,
                                                            "summary": r.summary} for r in ranges]}),
                                   "compress", cid))
            history.append(Message(f"pr{i}", "tool", "tool-result", res.text, "compress", cid))
        i += 1
    total = time.perf_counter() - t_start

    print(f"messages={len(history)} turns={n_turns} nudges={nudges} blocks={blocks} "
          f"active_blocks={sum(b.active for b in state.blocks)} last_view={len(turn.messages)} msgs")
    base = None
    for c, xs in samples.items():
        if not xs:
            continue
        ms = statistics.median(xs) * 1000
        base = base or ms / c
        print(f"  at ~{c:>6} messages: {ms:8.2f} ms/turn  ({ms / c * 1000:6.2f} us per message in history,"
              f" x{ms / c / base:4.2f} of the 1K rate)")
    if compress_times:
        print(f"  apply_compression: mean {statistics.mean(compress_times) * 1000:.2f} ms, "
              f"max {max(compress_times) * 1000:.2f} ms over {len(compress_times)} calls")
    print(f"total wall time: {total:.1f} s")
    if not (args.script or args.reference):
        return
    path = Path(args.script) if args.script else Path(tempfile.mkdtemp()) / "session.jsonl"
    path.write_text("".join(json.dumps(o, ensure_ascii=False) + "\n" for o in ops), encoding="utf-8")
    print(f"script: {path} ({path.stat().st_size / 1e6:.1f} MB, {len(ops) - 1} ops)")
    if args.reference:
        reference(path, args.reference, samples)


def _replay_times(cmd: list[str], env: dict[str, str], checkpoints) -> dict[int, list[float]]:
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
    times: dict[int, list[float]] = {c: [] for c in checkpoints}
    for line in out.stdout.splitlines():
        rec = json.loads(line)
        if rec["op"] != "turn":
            continue
        for c in times:
            if abs(rec["n"] - c) <= WINDOW:
                times[c].append(rec["ms"])
    return times


def reference(path: Path, build: str, python_samples: dict[int, list[float]]) -> None:
    """Replay the same script in a fresh process through each kernel (acp-kernel under node,
    ours under ``python -m doctrine.kernel replay --timing``): only the kernel call is timed."""
    import sys

    driver = Path(__file__).resolve().parent.parent / "tools" / "acp_parity" / "driver.mjs"
    js = _replay_times(["node", str(driver), build, str(path)], {**os.environ, "ACP_TIMING": "1"}, python_samples)
    py = _replay_times([sys.executable, "-m", "doctrine.kernel", "replay", "--timing", str(path)], dict(os.environ),
                       python_samples)
    print("the same script replayed in a fresh process (median ms per turn):")
    for c in python_samples:
        if js[c] and py[c]:
            a, b = statistics.median(js[c]), statistics.median(py[c])
            print(f"  at ~{c:>6} messages: acp-kernel v0.0.41 {a:8.2f}  doctrine.kernel {b:8.2f}  (x{a / b:.2f})")


if __name__ == "__main__":
    main()
