"""``python -m data_gen``: Build the SFT curriculum: session sources, replay through the kernel, labeling, samples.

The same commands are ``dtw data``, ``dtw inspect``, ``dtw audit``, ... (``pipeline/dtw.py``).
"""

from __future__ import annotations

import sys

from plumbing.subcommands import Command

COMMANDS: dict[str, Command] = {
    "build": Command("data_gen.cli_build:add_build", "build an SFT curriculum from a configs/data recipe"),
    "inspect": Command("data_gen.cli_build:add_inspect",
                       "print stats and N samples (of one kind) as the model sees them"),
    "audit": Command("data_gen.audit:add_audit", "print the curriculum audit of a data folder (JSON)"),
    "validate-trajectories": Command("data_gen.cli_trajectories:register",
                                     "convert recorded trajectories and count rejects by reason"),
    "synthetic": Command("data_gen.cli_synthetic:register", "write seeded synthetic sessions (JSONL)"),
}


def main(argv: list[str] | None = None) -> int:
    from plumbing.subcommands import run

    return run("python -m data_gen", __doc__, COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
