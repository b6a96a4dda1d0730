"""How often the conformance checker agrees with a careful reader (prints; asserts nothing).

    python benchmarks/conform_agreement.py [--cases benchmarks/data/conform_agreement] [--verbose]

Runs ``doctrine.conform.check_summary`` on every hand-labelled case (a source range, a
summary, a reader's pass/fail verdict) and prints agreement per style, every disagreement
with the checker's reasons, Cohen's kappa, and last the line ``agreement: K/N``.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from doctrine.conform.agreement import load_cases, score_cases  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", default=str(ROOT / "benchmarks" / "data" / "conform_agreement"))
    p.add_argument("--verbose", action="store_true", help="print every case, not only disagreements")
    a = p.parse_args(argv)
    result = score_cases(load_cases(a.cases))
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
    print(f"cohen_kappa: {result.kappa:.3f}")
    print(f"agreement: {result.agree}/{result.n}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
