"""``dtw policy-table RUN_DIR ...`` (also ``python -m eval policy-table``, ``python -m
eval.policy_table``): the policy-arm table of eval/README.md.

Per workload and arm of finished eval runs (``python -m eval report RUN_DIR`` first: the
probe figures and their intervals are the report's own, from its ``report.json``):
billed tokens per case (mean, with the report's small-n interval rule,
``eval.metrics.mean_ci``), peak context, probe score (marathon: ``probe_score``; probes:
``accuracy``) with its interval, refetches, and the recovery tools' calls / recoveries /
refetches. Prints markdown.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from eval.arm_names import ARM_NAMES
from eval.harness import load_results
from eval.metrics import mean, mean_ci, metric_scale
from eval.report import default_report_dir

SCORE = {"marathon": "probe_score", "probes": "accuracy"}


def _iv(ci: list[float] | None, fmt: str) -> str:
    return f" [{fmt.format(ci[0])}, {fmt.format(ci[1])}]" if ci and len(ci) == 2 else ""


def table(run_dir: str | Path) -> str:
    run = Path(run_dir)
    report = json.loads((default_report_dir(run) / "report.json").read_text(encoding="utf-8"))
    rows = load_results(run)
    out = []
    for wl, entry in report["workloads"].items():
        score = SCORE.get(wl)
        out.append(f"{wl} ({run}):\n")
        out.append("| arm | cases | billed tokens per case | peak context | probe score | refetches | "
                   "recovery calls / recoveries / re-opened |")
        out.append("|---|---|---|---|---|---|---|")
        order = {a: k for k, a in enumerate(ARM_NAMES)}
        for arm, a in sorted(entry["arms"].items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])):
            billed = [r["metrics"]["billed_tokens"] for r in rows if r.get("arm") == arm and r.get("workload") == wl]
            ci = mean_ci([float(b) for b in billed], metric_scale("billed_tokens", billed))
            sc = a.get(score)
            sc_txt = "–" if sc is None else f"{sc:.3f}{_iv((a.get('ci95') or {}).get(score), '{:.3f}')}"
            out.append(f"| {arm} | {a['cases']} | {mean(billed):,.0f}{_iv(ci, '{:,.0f}')} | {a.get('peak_context', 0):,} "
                       f"| {sc_txt} | {a.get('refetches', '–')} | {a.get('recovery_calls', 0)} / "
                       f"{a.get('recoveries', 0)} / {a.get('recovery_refetches', 0)} |")
        out.append("")
    return "\n".join(out)


def register(p) -> None:
    """``dtw policy-table RUN_DIR ...`` / ``python -m eval policy-table``."""
    p.description = ("Print the policy-arm table (billed tokens, peak context, probe score with its interval, "
                     "refetches, recovery-tool use) of finished eval runs as Markdown; run dtw report first.")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="eval folders with a report")
    p.set_defaults(func=lambda args: main(args.run_dirs))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m eval.policy_table RUN_DIR [RUN_DIR ...]", file=sys.stderr)
        return 2
    for d in args:
        try:
            print(table(d))
        except (OSError, ValueError, KeyError) as exc:
            print(f"error: {d}: no readable report ({exc}); run python -m eval report {d} first", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
