"""A package CLI whose subcommands register themselves: ``python -m data_gen``, ``python -m eval``.

Each entry of a ``COMMANDS`` dict maps a name to ``"module:function"``; the function adds its
subparser (with ``func`` set). Modules are imported only to build the parser, and each keeps
its heavy imports inside its command function, so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
from importlib import metadata


def build_parser(prog: str, doc: str | None, commands: dict[str, str]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    try:
        version = metadata.version("doctrine-to-weights")
    except metadata.PackageNotFoundError:
        version = "unknown"
    p.add_argument("--version", action="version", version=f"%(prog)s {version}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for target in dict.fromkeys(commands.values()):  # one module may register several commands
        module, _, fn = target.partition(":")
        getattr(importlib.import_module(module), fn)(sub)
    return p


def run(prog: str, doc: str | None, commands: dict[str, str], argv: list[str] | None = None) -> int:
    parser = build_parser(prog, doc, commands)
    # Dotted KEY=VALUE overrides may come after options (`build R.yaml --out X a.b=1`), which
    # argparse cannot interleave with a subcommand's positionals: collect them here.
    from plumbing.recipe_loader import split_override_args

    args, extra = parser.parse_known_args(argv)
    if extra:
        overrides, stray = split_override_args(extra)
        if stray or not hasattr(args, "overrides"):
            parser.error(f"unrecognized arguments: {' '.join(stray or extra)}")
        args.overrides = list(args.overrides or []) + overrides
    if not getattr(args, "func", None):
        parser.print_help()
        return 0 if not commands else 2
    return args.func(args)
