"""Speed figures for the conformance checker (prints; asserts nothing).

    python -m doctrine.conform.bench [--lines 2000] [--repeat 5]

Builds a synthetic session (a pytest failure, a long service log of ``--lines`` lines, a
file view and an edit), then times :func:`extract_keep_items` and :func:`check_summary`
on a doctrine-style summary and on one that pastes the log.
"""

from __future__ import annotations

import argparse
import json
import time

from . import check_summary, extract_keep_items


def synthetic_session(lines: int) -> list[dict]:
    log = []
    for n in range(lines):
        log.append(f"2026-12-01T10:{n // 60 % 60:02d}:{n % 60:02d}.{n % 1000:03d}Z INFO [worker-{n % 4}] "
                   f"processed job {n} in {100 + n % 50}ms (queue depth {n % 7}, mem {300 + n % 20} MiB)")
        if n % 97 == 13:
            log.append(f"2026-12-01T10:{n // 60 % 60:02d}:{n % 60:02d}Z ERROR [db] deadlock detected on jobs, retry {n % 5}")
    view = "\n".join(f"{i:6d}\t" + (f"def f{i}(x):" if i % 10 == 0 else f"    return x + {i}") for i in range(1, 400))

    def call(i, name, args):
        return {"id": f"m{i:05d}", "role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}

    def res(i, name, text):
        return {"id": f"m{i + 1:05d}", "role": "tool", "tool_call_id": f"c{i}", "name": name, "content": text}

    return [
        {"id": "m00001", "role": "user", "content": "Find why jobs deadlock. Don't touch the schema."},
        call(2, "execute_bash", {"command": "kubectl logs deploy/worker --since=1h"}),
        res(2, "execute_bash", "\n".join(log)),
        call(4, "str_replace_editor", {"command": "view", "path": "/repo/worker/jobs.py"}),
        res(4, "str_replace_editor", "Here's the result of running `cat -n` on /repo/worker/jobs.py:\n" + view),
        call(6, "str_replace_editor", {"command": "str_replace", "path": "/repo/worker/jobs.py",
                                        "old_str": "    return x + 10", "new_str": "    return x + 10  # locked"}),
        res(6, "str_replace_editor", "The file /repo/worker/jobs.py has been edited."),
        {"id": "m00008", "role": "assistant", "content": "I will retry with jitter instead of a fixed delay, "
                                                         "because the workers collide on the same rows."},
    ]


def register(p: argparse.ArgumentParser) -> None:
    """The command's arguments (``dtw doctrine conform-bench``, ``python -m doctrine.conform.bench``)."""
    p.description = __doc__
    p.add_argument("--lines", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=5)
    p.set_defaults(func=bench)


def main(argv: list[str] | None = None) -> int:
    from plumbing.subcommands import run_command

    return run_command("python -m doctrine.conform.bench", __doc__, register, argv)


def bench(a: argparse.Namespace) -> int:
    msgs = synthetic_session(a.lines)
    chars = sum(len(m.get("content") or "") for m in msgs)
    items = extract_keep_items(msgs)
    good = "\n".join(f"- {it.text}" for v in items.values() for it in v)
    pasted = good + "\n" + msgs[2]["content"][:15000]

    def timed(fn) -> float:
        best = float("inf")
        for _ in range(a.repeat):
            t = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t)
        return best * 1000

    print(f"source: {len(msgs)} messages, {chars} chars, {a.lines} log lines")
    print(f"extract_keep_items: {timed(lambda: extract_keep_items(msgs)):.1f} ms")
    print(f"check_summary (doctrine-style, {len(good)} chars): {timed(lambda: check_summary(msgs, good)):.1f} ms")
    print(f"check_summary (pasted log, {len(pasted)} chars): {timed(lambda: check_summary(msgs, pasted)):.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
