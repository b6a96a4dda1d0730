"""``dtw eval`` and ``dtw report`` (``python -m eval run`` and ``python -m eval report``).

Nothing heavy is imported here: ``--help`` stays fast; backends import torch or vLLM only
when a run builds them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register_run(p) -> None:
    """``dtw eval`` / ``python -m eval run RECIPE.yaml --out DIR``."""
    from plumbing.subcommands import recipe_command

    p.description = ("Run every (arm x case x window x seed) of RECIPE into --out. Finished "
                     "cases are skipped on a rerun; manifest.json appears when all are done.")
    recipe_command(p, "eval.recipe:EvalRecipe", cmd_run, recipe_help="configs/eval/*.yaml",
                   overrides_help="dotted key=value overrides, e.g. seeds=[0,1]")
    p.add_argument("--out", help="output folder (runs/<name>/eval); default: the recipe's output")
    p.add_argument("--max-cases", type=int, default=None, help="stop after this many new cases")
    p.add_argument("--force", action="store_true",
                   help="discard the cases already in --out (needed when the recipe changed)")


def register_report(p) -> None:
    """``dtw report`` / ``python -m eval report RUN_DIR [--vs OTHER]``."""
    p.description = "Markdown, self-contained HTML and JSON from saved case results."
    p.add_argument("run_dir", help="an eval output folder (runs/<name>/eval)")
    p.add_argument("--vs", dest="vs", default=None, help="a second eval folder for a side-by-side")
    p.add_argument("--out", default=None, help="report folder (default: RUN_DIR/../report)")
    p.add_argument("--quiet", action="store_true", help="print only the report folder, not the results table")
    p.set_defaults(func=cmd_report)


def register_rescore(p) -> None:
    """``dtw rescore SRC --out DIR`` / ``python -m eval rescore``: today's scorer on recorded replies."""
    p.description = ("Re-score the held-out replies a finished eval recorded with this checkout's scorer "
                     "(no model call) into a new eval folder; other workloads' cases are copied. "
                     "Then dtw report DIR.")
    p.add_argument("src", help="a complete eval folder (runs/<name>/eval)")
    p.add_argument("--out", required=True, help="the new eval folder (never SRC)")
    p.add_argument("--data-dir", default=None, help="where the held-out rows are now, if they moved")
    p.set_defaults(func=cmd_rescore)


def cmd_rescore(args: argparse.Namespace) -> int:
    from eval.rescore import RescoreError, rescore
    from plumbing.runs import RunFolderError

    try:
        s = rescore(args.src, args.out, data_dir=args.data_dir, log=lambda line: print(line, file=sys.stderr))
    except (RescoreError, RunFolderError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for note in s.skipped:
        print(f"note: {note}", file=sys.stderr)
    for metric, n in sorted(s.changes.items()):
        print(f"changed: {metric} in {n} case(s)", file=sys.stderr)
    print(args.out, flush=True)
    return 0


def cmd_run(args: argparse.Namespace, recipe) -> int:
    out = args.out or recipe.output
    if not out:
        print("error: --out is required (or set output: in the recipe)", file=sys.stderr)
        return 2
    from plumbing.runs import out_dir_error

    if problem := out_dir_error(out):
        print(f"error: {problem}", file=sys.stderr)
        return 2
    from eval.harness import run_eval
    from plumbing.chat_backend import BackendError

    try:
        summary = run_eval(recipe, out, base_dir=Path(args.recipe).resolve().parent, max_jobs=args.max_cases,
                           log=lambda s: print(s, file=sys.stderr), force=args.force)
    except (BackendError, ValueError) as exc:
        from plumbing.runs import redact_secrets

        print(f"error: {redact_secrets(str(exc), config=recipe)}", file=sys.stderr)
        return 2
    return 0 if summary.complete else 1


def cmd_report(args: argparse.Namespace) -> int:
    from eval.report import ReportError, build_report

    try:
        out = build_report(args.run_dir, vs=args.vs, out=args.out)
    except ReportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(out, flush=True)
    if not args.quiet:
        from eval.glance import print_results

        print_results(out)
    return 0
