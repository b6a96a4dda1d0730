"""``python -m data_gen``: Build the SFT curriculum: session sources, replay through the kernel, labeling, samples.

Subcommands are registered in COMMANDS as they land (see the README's pipeline table).
"""

from __future__ import annotations

import argparse
import sys
from importlib import metadata

# Subcommand name -> "module:register" (the register function adds the subparser).
COMMANDS: dict[str, str] = {
    "build": "data_gen.cli_build:register_build",
    "inspect": "data_gen.cli_build:register_inspect",
    "validate-trajectories": "data_gen.cli_trajectories:register",
    "synthetic": "data_gen.cli_synthetic:register",
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m data_gen", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    try:
        version = metadata.version("doctrine-to-weights")
    except metadata.PackageNotFoundError:
        version = "unknown"
    p.add_argument("--version", action="version", version=f"%(prog)s {version}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    import importlib

    for target in COMMANDS.values():
        module, _, fn = target.partition(":")
        getattr(importlib.import_module(module), fn)(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0 if not COMMANDS else 2
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
