"""``python -m eval``: Evaluate arms (distilled, doctrine, baselines) on held-out decisions, the Session Marathon and recall probes.

Subcommands are registered in COMMANDS as they land (see the README's pipeline table).
"""

from __future__ import annotations

import sys

# Subcommand name -> "module:register" (the register function adds the subparser).
COMMANDS: dict[str, str] = {"run": "eval.cli:register_run", "report": "eval.cli:register_report",
                            "probes": "eval.cli_probes:register"}


def main(argv: list[str] | None = None) -> int:
    from plumbing.subcommands import run

    return run("python -m eval", __doc__, COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
