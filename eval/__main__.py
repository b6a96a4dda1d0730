"""``python -m eval``: Evaluate arms (distilled, doctrine, baselines) on held-out decisions, the Session Marathon and recall probes.

The same commands are ``dtw eval``, ``dtw report``, ``dtw probes``, ... (``pipeline/dtw.py``).
"""

from __future__ import annotations

import sys

from plumbing.subcommands import Command

COMMANDS: dict[str, Command] = {
    "run": Command("eval.cli:register_run", "run (or resume) an eval recipe: RECIPE.yaml --out DIR"),
    "report": Command("eval.cli:register_report", "build the report of a run: RUN_DIR [--vs OTHER]"),
    "rescore": Command("eval.cli:register_rescore", "re-score a run's recorded held-out replies: SRC --out DIR"),
    "policy-table": Command("eval.policy_table:register", "the policy-arm table of finished runs: RUN_DIR ..."),
    "probes": Command("eval.probes_cli:register",
                      "recall probes on recorded trajectories: extract questions, report a run"),
    "fixtures": Command("eval.workloads.fixtures:register_fixtures", "write the seeded held-out fixture rows (JSONL)"),
}


def main(argv: list[str] | None = None) -> int:
    from plumbing.subcommands import run

    return run("python -m eval", __doc__, COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
