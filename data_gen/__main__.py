"""``python -m data_gen``: Build the SFT curriculum: session sources, replay through the kernel, labeling, samples.

Subcommands are registered in COMMANDS as they land (see the README's pipeline table).
"""

from __future__ import annotations

import sys

# Subcommand name -> "module:register" (the register function adds the subparser).
COMMANDS: dict[str, str] = {
    "build": "data_gen.cli_build:register_build",
    "inspect": "data_gen.cli_build:register_inspect",
    "validate-trajectories": "data_gen.cli_trajectories:register",
    "synthetic": "data_gen.cli_synthetic:register",
}


def main(argv: list[str] | None = None) -> int:
    from plumbing.subcommands import run

    return run("python -m data_gen", __doc__, COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
