"""``python -m eval run`` and ``python -m eval report`` (registered in ``eval/__main__.py``).

Nothing heavy is imported here: ``--help`` stays fast; backends import torch or vLLM only
when a run builds them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register_run(sub) -> None:
    p = sub.add_parser("run", help="run (or resume) an eval recipe: python -m eval run RECIPE.yaml --out DIR",
                       description="Run every (arm x case x window x seed) of RECIPE into --out. Finished "
                                   "cases are skipped on a rerun; manifest.json appears when all are done.")
    p.add_argument("recipe", help="configs/eval/*.yaml")
    p.add_argument("overrides", nargs="*", help="dotted key=value overrides, e.g. seeds=[0,1]")
    p.add_argument("--out", help="output folder (runs/<name>/eval); default: the recipe's output")
    p.add_argument("--max-cases", type=int, default=None, help="stop after this many new cases")
    p.add_argument("--print-config", action="store_true", help="print the resolved recipe and exit")
    p.add_argument("--force", action="store_true",
                   help="discard the cases already in --out (needed when the recipe changed)")
    p.set_defaults(func=cmd_run)


def register_report(sub) -> None:
    p = sub.add_parser("report", help="build the report of a run: python -m eval report RUN_DIR [--vs OTHER]",
                       description="Markdown, self-contained HTML and JSON from saved case results.")
    p.add_argument("run_dir", help="an eval output folder (runs/<name>/eval)")
    p.add_argument("--vs", dest="vs", default=None, help="a second eval folder for a side-by-side")
    p.add_argument("--out", default=None, help="report folder (default: RUN_DIR/../report)")
    p.add_argument("--quiet", action="store_true", help="print only the report folder, not the results table")
    p.set_defaults(func=cmd_report)


def cmd_run(args: argparse.Namespace) -> int:
    from eval.recipe import EvalRecipe
    from plumbing.recipe_loader import load_for_cli

    recipe = load_for_cli(args.recipe, EvalRecipe, args.overrides, args.print_config)
    if isinstance(recipe, int):
        return recipe
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
