"""``python -m data_gen validate-trajectories``: count usable recorded trajectories.

    python -m data_gen validate-trajectories tests/data_gen/fixtures/swe_rebench/trajectories.parquet
    python -m data_gen validate-trajectories rows.jsonl.gz --batch-rows 16
    python -m data_gen validate-trajectories nebius/SWE-rebench-openhands-trajectories --limit 200

PATH is a ``.parquet``, ``.jsonl`` or ``.jsonl.gz`` file (or a folder of them), or a hub id
streamed at a pinned revision. Rows are read page by page (``--batch-rows``), converted
and built into sessions; the counts are printed as JSON: ``rows``, ``accepted``,
``rejected`` (reason -> count), ``repaired`` (rule -> count) and ``first_rejects`` (the
first row rejected for each reason). Exit status 0 whatever the counts; 2 when the source
cannot be read at all.
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["register", "run"]


def register(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The ``validate-trajectories`` command's arguments (``func=run``)."""
    p.description = __doc__
    p.add_argument("path", metavar="PATH", help="parquet / JSONL file, folder, or hub dataset id")
    p.add_argument("--batch-rows", type=int, default=64, metavar="N", help="rows read per page (default 64)")
    p.add_argument("--revision", default=None, help="hub revision (default: the pinned one)")
    p.add_argument("--split", default="train", help="hub split (default: train)")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="stop after N rows")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    # Imported here so that ``python -m data_gen --help`` does not pay for it.
    from data_gen.sources.swe_rebench import DEFAULT_REVISION, TrajectorySourceError, validate_path

    if args.batch_rows < 1:
        print("validate-trajectories: --batch-rows must be at least 1", file=sys.stderr)
        return 2
    try:
        report = validate_path(args.path, batch_rows=args.batch_rows, revision=args.revision or DEFAULT_REVISION,
                               split=args.split, limit=args.limit)
    except TrajectorySourceError as exc:
        print(f"validate-trajectories: {exc}", file=sys.stderr)
        return 2
    report = {"path": str(args.path), **report}
    print(json.dumps(report, indent=2, ensure_ascii=False))
    return 0
