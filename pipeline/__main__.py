"""``python -m pipeline RECIPE.yaml`` (= ``dtw run RECIPE.yaml``): see :mod:`pipeline.runner`."""

import sys

from plumbing.subcommands import Command

COMMANDS = {"run": Command("pipeline.runner:add_run", "run a pipeline recipe stage by stage (the default command)")}


def main(argv: list[str] | None = None) -> int:
    from plumbing.subcommands import run

    return run("python -m pipeline", __doc__, COMMANDS, argv, default="run")


if __name__ == "__main__":
    sys.exit(main())
