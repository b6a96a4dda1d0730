"""How often the conformance checker agrees with a careful reader (prints; asserts nothing).

    python benchmarks/conform_agreement.py [--cases benchmarks/data/conform_agreement] [--verbose]
        [--judge-base-url http://localhost:8000/v1 --judge-model NAME [--judge-api-key-env VAR]]

Runs ``doctrine.conform.check_summary`` on every hand-labelled case (a source range, a
summary, a reader's pass/fail verdict) and prints agreement per style and per set (cases
written after tuning are the ``holdout`` set), every disagreement with the checker's reasons,
Cohen's kappa, and last the line ``agreement: K/N``.

With ``--judge-base-url`` a model on an OpenAI-compatible server also judges every case
(``doctrine.conform.judge``); its agreement with the readers and with the checker, and how
many replies could not be read, are printed above the last line.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from doctrine.conform.agreement import load_cases, score_cases  # noqa: E402


def judge_report(cases, result, a) -> None:
    """Agreement of a model judge with the readers and with the checker."""
    from doctrine.conform.judge import judge_summary
    from plumbing.chat_backend import Request
    from plumbing.openai_backend import OpenAIBackend

    backend = OpenAIBackend(a.judge_base_url, a.judge_model or "judge", api_key_env=a.judge_api_key_env)

    def complete(messages):
        return backend.complete(Request(messages=messages, tools=[], max_tokens=400)).message.get("content") or ""

    by_id = {r["id"]: r for r in result.rows}
    readers = checker = errors = 0
    for c in cases:
        v = judge_summary(c.source, c.summary, complete=complete, tier=c.tier)
        if v.passed is None:
            errors += 1
            continue
        readers += v.passed == (c.verdict == "pass")
        checker += v.passed == (by_id[c.id]["checker"] == "pass")
    n = len(cases) - errors
    print(f"judge {a.judge_model}: agrees with readers {readers}/{n}, with the checker {checker}/{n}, "
          f"unreadable replies {errors}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", default=str(ROOT / "benchmarks" / "data" / "conform_agreement"))
    p.add_argument("--verbose", action="store_true", help="print every case, not only disagreements")
    p.add_argument("--judge-base-url", default=None, help="OpenAI-compatible server for the optional model judge")
    p.add_argument("--judge-model", default=None)
    p.add_argument("--judge-api-key-env", default=None, help="name of the environment variable holding the key")
    a = p.parse_args(argv)
    cases = load_cases(a.cases)
    result = score_cases(cases)
    by_style: dict[str, list[bool]] = defaultdict(list)
    for r in result.rows:
        by_style[r["style"]].append(r["agree"])
    print(f"{'style':<18} {'n':>3} {'agree':>6}")
    for style, xs in sorted(by_style.items()):
        print(f"{style:<18} {len(xs):>3} {sum(xs):>6}")
    print()
    for r in result.rows:
        if a.verbose or not r["agree"]:
            mark = "ok " if r["agree"] else "XX "
            print(f"{mark}{r['id']:<34} reader {r['verdict']:<4} checker {r['checker']:<4} score {r['score']:.3f}")
            if not r["agree"]:
                for why in r["reasons"][:4]:
                    print(f"      - {why}")
    print()
    print(f"passes (reader/checker): {sum(r['verdict'] == 'pass' for r in result.rows)}/"
          f"{sum(r['checker'] == 'pass' for r in result.rows)}")
    for name in sorted({r["set"] for r in result.rows}):
        rows = [r for r in result.rows if r["set"] == name]
        print(f"set {name}: {sum(r['agree'] for r in rows)}/{len(rows)}")
    if a.judge_base_url:
        judge_report(cases, result, a)
    print(f"cohen_kappa: {result.kappa:.3f}")
    print(f"agreement: {result.agree}/{result.n}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
