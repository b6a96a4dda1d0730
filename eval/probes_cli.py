"""``dtw probes extract|report`` (also ``python -m eval probes``; registered in ``eval/__main__.py``).

    dtw probes extract PATH --out QUESTIONS.jsonl [--limit 20] [--kinds ...]
    dtw probes report RUN_DIR [--out PROBES.json] [--reference full]

``extract`` reads SWE-rebench OpenHands rows (a parquet / jsonl file, a folder of them, or
a hub id), selects the cases that pass the filters and writes one JSON object per question:
``instance_id``, ``case_id``, ``kind``, ``question``, ``answer`` (the reference, extracted by
code), ``evidence`` and, for ``first_test_run``, ``execution``. ``report`` compares the
arms of a finished eval run on the probes workload (accuracy overall and by kind, relative
to the reference arm, evidence survival).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from plumbing.runs import atomic_write_text


def register(p: argparse.ArgumentParser) -> None:
    """The ``probes`` command's actions, ``extract`` and ``report``."""
    p.description = __doc__
    ps = p.add_subparsers(dest="probes_command", metavar="ACTION")
    e = ps.add_parser("extract", help="write the questions and reference answers of the selected cases")
    e.add_argument("path", help="a .parquet / .jsonl(.gz) file, a folder of them, or a hub dataset id")
    e.add_argument("--out", required=True, help="QUESTIONS.jsonl to write (atomically)")
    e.add_argument("--limit", type=int, default=20, help="cases to select (the first that pass the filters)")
    e.add_argument("--skip", type=int, default=0, help="rows to skip first")
    e.add_argument("--kinds", nargs="+", default=None, help="question kinds (default: all four)")
    e.add_argument("--resolved", choices=("true", "false", "any"), default="any", help="filter on `resolved`")
    e.add_argument("--one-per-repo", action="store_true", help="at most one case per repository")
    e.add_argument("--min-messages", type=int, default=0)
    e.add_argument("--max-messages", type=int, default=None)
    e.add_argument("--max-chars", type=int, default=None, help="skip trajectories longer than this")
    e.add_argument("--min-questions", type=int, default=1)
    e.set_defaults(func=cmd_extract)
    r = ps.add_parser("report", help="per-arm probe accuracy of an eval run (JSON + a markdown table)")
    r.add_argument("run_dir", help="an eval output folder (runs/<name>/eval)")
    r.add_argument("--out", default=None, help="JSON file to write (default: RUN_DIR/probes_report.json)")
    r.add_argument("--reference", default="full", help="the reference arm (default: full)")
    r.set_defaults(func=cmd_report)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def cmd_extract(args: argparse.Namespace) -> int:
    from data_gen.sources.swe_rebench import TrajectorySourceError
    from eval.workloads.probes.cases import KINDS, select_cases

    filters: dict = {"limit": args.limit, "skip": args.skip, "min_messages": args.min_messages,
                     "min_questions": args.min_questions, "one_per_repo": args.one_per_repo}
    if args.resolved != "any":
        filters["resolved"] = args.resolved == "true"
    if args.max_messages is not None:
        filters["max_messages"] = args.max_messages
    if args.max_chars is not None:
        filters["max_chars"] = args.max_chars
    stats: dict = {}
    try:
        cases = select_cases(args.path, filters, tuple(args.kinds or KINDS), stats)
    except TrajectorySourceError as exc:
        print(f"probes extract: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"probes extract: {exc}", file=sys.stderr)
        return 2
    lines = [json.dumps(q.to_dict(), ensure_ascii=False, sort_keys=True) for c in cases for q in c.questions]
    atomic_write_text(Path(args.out), "".join(line + "\n" for line in lines))
    print(f"probes extract: {stats['cases']} cases, {len(lines)} questions {stats['questions']} -> {args.out} "
          f"(rows read {stats['rows']}, rejected {sum(stats['rejected'].values())}, "
          f"filtered {sum(stats['filtered'].values())})")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from eval.harness import CaseFileError, load_results
    from eval.workloads.probes.workload import probe_report

    run_dir = Path(args.run_dir)
    if not (run_dir / "cases").is_dir():
        print(f"probes report: {run_dir} has no cases/ folder (not an eval run)", file=sys.stderr)
        return 1
    try:
        rows = load_results(run_dir)
    except CaseFileError as exc:
        print(f"probes report: {exc}", file=sys.stderr)
        return 1
    rep = probe_report(rows, args.reference)
    if not rep["arms"]:
        print(f"probes report: no probes results in {run_dir}", file=sys.stderr)
        return 1
    out = Path(args.out) if args.out else run_dir / "probes_report.json"
    atomic_write_text(out, json.dumps(rep, indent=2, sort_keys=True) + "\n")
    print(f"| arm | accuracy | clean (vs {args.reference}) | {args.reference} also failed | evidence survived |")
    print("|---|---|---|---|---|")
    for arm, a in rep["arms"].items():
        v = a["vs_reference"]
        print(f"| {arm} | {a['correct']}/{a['questions']} | {v['clean_correct']}/{v['clean_questions']} | "
              f"{v['reference_failed_correct']}/{v['reference_failed_questions']} | "
              f"{a['evidence_survival']:.2f} |")
    print(f"probes report: {out}")
    return 0
