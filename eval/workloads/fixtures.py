"""Small, seeded, hand-shaped sessions and held-out rows for smoke runs and tests.

Real workloads come from ``data_gen`` (synthetic families, replayed curricula); these only
need the right shape: task steps whose tool output introduces exact facts used later,
long consumed tool results worth folding, and probe steps that ask for early facts.
"""

from __future__ import annotations

import json
import random
from typing import Any

from doctrine.session import Fact, Session, Step

TASK_TOOLS = [{"type": "function", "function": {
    "name": "bash", "description": "Run a shell command.",
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}}]


def _call(cid: str, cmd: str) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"cmd": cmd})}}


def demo_session(seed: int = 0, steps: int = 8, output_chars: int = 1800, probe_every: int = 4) -> Session:
    """A session of ``steps`` task steps (each: a command, a long output with one exact error
    string, a short conclusion) with a probe step after every ``probe_every`` task steps that
    asks for the error found ``probe_every`` steps earlier."""
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent working in a Python repository."},
        {"role": "user", "content": "Find and fix the failing checks in the parser package, one module at a time."},
    ]
    step_list: list[Step] = []
    facts: list[Fact] = []
    start = 1
    errors: list[str] = []
    for k in range(steps):
        line = rng.randint(10, 400)
        err = f"ValueError: bad token {rng.randint(1000, 9999)} at src/parser/mod_{k}.py:{line}"
        errors.append(err)
        filler = " ".join(f"ok test_{k}_{j}" for j in range(output_chars // 12))
        cid = f"c{seed}_{k}"
        if k > 0:
            messages.append({"role": "user", "content": f"Next, check module mod_{k}."})
        messages.append({"role": "assistant", "content": "", "tool_calls": [_call(cid, f"pytest -q tests/test_mod_{k}.py")]})
        messages.append({"role": "tool", "tool_call_id": cid, "name": "bash",
                         "content": f"{filler}\nFAILED tests/test_mod_{k}.py::test_parse - {err}\n1 failed"})
        fact_msg = len(messages) - 1
        uses = [f"f{k - 1}"] if k > 0 else []
        messages.append({"role": "assistant", "content": f"mod_{k} fails with one bad token; fixing it next."})
        step_list.append(Step(index=len(step_list), start=start, end=len(messages), uses=uses))
        facts.append(Fact(id=f"f{k}", text=err, kind="error_strings", message=fact_msg,
                          used_at=[len(step_list)] if k + 1 < steps else []))
        start = len(messages)
        if probe_every and (k + 1) % probe_every == 0:
            asked = k + 1 - probe_every
            messages.append({"role": "user", "content": f"Quick check from memory: what exact error did mod_{asked} report?"})
            messages.append({"role": "assistant", "content": errors[asked]})
            step_list.append(Step(index=len(step_list), start=start, end=len(messages), uses=[f"f{asked}"], kind="probe"))
            start = len(messages)
    # used_at were written as "the next step index"; recompute from the steps' uses.
    by_id = {f.id: f for f in facts}
    for f in facts:
        f.used_at = []
    for s in step_list:
        for u in s.uses:
            by_id[u].used_at.append(s.index)
    return Session(session_id=f"demo_{seed}", family="demo", seed=seed, messages=messages, steps=step_list,
                   facts=facts, tools=TASK_TOOLS, source="synthetic").validate()


def held_out_rows(doctrine: Any, n: int = 6) -> list[dict[str, Any]]:
    """Decision rows ``{messages, tools, meta}`` in data_gen's shape (distilled mode)."""
    from doctrine.kernel.profile import resolve_profile
    from doctrine.render.prompts import NudgeView, RangeView, render_nudge
    from doctrine.render.request import request_frame

    frame = request_frame(resolve_profile(6000, "aggressive"), doctrine, task_tools=TASK_TOOLS)
    kinds = ["nudged_compress", "refusal", "ordinary"]
    rows = []
    for i in range(n):
        kind = kinds[i % 3]
        err = f"ValueError: bad token {100 + i} at src/parser/mod_{i}.py:{20 + i}"
        ctx = [
            {"role": "system", "content": frame.system},
            {"role": "user", "content": f'<acp tokens="30" type="text">m00001</acp>\nFix the failing test in mod_{i}.'},
            {"role": "assistant", "content": "", "tool_calls": [_call(f"c{i}", f"pytest -q tests/test_mod_{i}.py")]},
            {"role": "tool", "tool_call_id": f"c{i}", "name": "bash", "content": "ok " * 300 + f"\nFAILED - {err}"},
            {"role": "assistant", "content": f'<acp tokens="12" type="text">m00004</acp>\nFound the bad token in mod_{i}.'},
        ]
        if kind != "ordinary":
            view = NudgeView(1, "gentle", [RangeView("m00002", "m00004", 3, 420, 1700, tool_pct=90, text_pct=10)],
                             {"system": 300, "tool": 400, "text": 40}, growth=420)
            ctx.append({"role": "user", "content": render_nudge(view, doctrine, "distilled")})
        if kind == "nudged_compress":
            args = {"topic": f"mod_{i} failure", "content": [{"startId": "m00002", "endId": "m00004",
                    "summary": f"Ran pytest on tests/test_mod_{i}.py: {err}; the rest of the output passed."}]}
            target = {"role": "assistant", "content": "", "tool_calls": [
                {"id": f"t{i}", "type": "function", "function": {"name": "compress", "arguments": json.dumps(args)}}]}
        elif kind == "refusal":
            target = {"role": "assistant", "content": f"Not yet: I still need the traceback for mod_{i}."}
        else:
            target = {"role": "assistant", "content": "", "tool_calls": [_call(f"t{i}", f"sed -n 1,40p src/parser/mod_{i}.py")]}
        rows.append({"messages": ctx + [target], "tools": [dict(t) for t in frame.tools],
                     "meta": {"kind": kind, "source": "fixture", "session_id": f"h{i}", "step": 1,
                              "window": 6000, "gate": "aggressive", "host": "proxy",
                              "serving_profile": frame.profile.sha256,
                              "doctrine_version": doctrine.version, "doctrine_sha256": doctrine.sha256,
                              "labeler": "fixture", "prompt_mode": "distilled"}})
    return rows


# The smoke recipe's held-out rows: real data_gen rows (configs/eval/fixtures/held_out/test/rows.jsonl),
# one replayed session, a row of each decision kind and two recoveries, each with its kernel input.
FIXTURE_SESSION = ("log_triage", 0, 4096, "aggressive")  # family, seed, window, gate
FIXTURE_PICKS = ("emergency", "tier2", "refusal", "ordinary", "recovery", "recovery")


def held_out_fixture_rows(doctrine: Any) -> list[dict[str, Any]]:
    """The rows of ``configs/eval/fixtures/held_out/test/rows.jsonl``: ``FIXTURE_SESSION``
    replayed by data_gen, the first row of each kind in ``FIXTURE_PICKS`` (recoveries: the
    search/decompress calls), in that order. Rewrite the file with
    ``python -m eval.workloads.fixtures configs/eval/fixtures/held_out/test/rows.jsonl``."""
    from data_gen.replay import replay_session
    from data_gen.synthetic import generate

    family, seed, window, gate = FIXTURE_SESSION
    samples = list(replay_session(generate(family, seed), window=window, gate=gate, doctrine=doctrine))
    out, used = [], set()
    for kind in FIXTURE_PICKS:
        for i, smp in enumerate(samples):
            calls = smp.messages[-1].get("tool_calls") or []
            if i in used or smp.meta["kind"] != kind or (kind == "recovery" and not calls):
                continue
            used.add(i)
            out.append(json.loads(smp.to_json()))
            break
        else:
            raise ValueError(f"{family} seed {seed} at {window} ({gate}) has no {kind} row left")
    return out


def register_fixtures(p) -> None:
    """``dtw fixtures OUT.jsonl`` / ``python -m eval fixtures``: the seeded held-out rows of the smoke runs."""
    p.add_argument("out", help="JSONL file to write (atomically)")
    p.set_defaults(func=cmd_fixtures)


def cmd_fixtures(args) -> int:
    from doctrine.spec import resolve_doctrine
    from plumbing.runs import atomic_write_text

    rows = held_out_fixture_rows(resolve_doctrine("v1"))
    atomic_write_text(args.out, "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in rows))
    print(f"{args.out}: {len(rows)} rows")
    return 0


def main(argv: list[str] | None = None) -> int:  # python -m eval.workloads.fixtures OUT.jsonl (= dtw fixtures)
    from plumbing.subcommands import run_command

    return run_command("python -m eval.workloads.fixtures", "Write the seeded held-out fixture rows (JSONL).",
                       register_fixtures, argv)


if __name__ == "__main__":
    raise SystemExit(main())
