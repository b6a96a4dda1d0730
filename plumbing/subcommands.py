"""Every command line of the project is built here, one way: ``dtw`` and ``python -m <package>``.

A CLI is a table ``{name: Command(target, help)}``. ``target`` is ``"module:function"``: the
function adds the command's arguments to its parser and sets ``func`` (what runs); or
``"module:TABLE"``, another table (a group such as ``dtw doctrine show``). Only the command
being run has its module imported; the others are listed by their help line, so ``--help``
imports no package and stays fast. A table may name a default command, run when the first
argument is not a command name (``python -m train RECIPE`` is ``python -m train run RECIPE``).

Commands that read a recipe (``RECIPE.yaml [KEY=VALUE ...] [--print-config] [--explain]``) are built
with :func:`recipe_command`, which loads and validates the recipe before the command runs.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any

__all__ = ["Command", "CommandError", "build_parser", "error_line", "import_target", "recipe_command", "run",
           "run_command"]


class CommandError(ValueError):
    """An expected failure of a command (bad input, a folder it may not use): :func:`run` prints
    its message as one ``error:`` line and exits 2, whichever command raised it."""


def error_line(exc: BaseException) -> str | None:
    """The one line a user sees for an expected failure, or None for a bug (whose traceback
    is the useful report). Expected: a :class:`CommandError`, and any OSError (a disk full, a
    file that is not there or not readable): what the machine refused, not what the code did."""
    import errno

    if isinstance(exc, CommandError):
        return " ".join(str(exc).split("\n"))
    if not isinstance(exc, OSError):
        return None
    where = f"{exc.filename}: " if exc.filename else ""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return (f"{where}no space left on the device; nothing half-written was kept and the stage is not "
                "marked complete (its manifest is written last): free space and rerun the same command")
    return f"{where}{exc.strerror or exc}"


@dataclass(frozen=True)
class Command:
    """One subcommand: ``target`` (``"module:function"`` or ``"module:TABLE"``) and its help line."""

    target: str
    help: str


def import_target(target: str) -> Any:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def _chosen(argv: list[str]) -> str | None:
    return next((a for a in argv if not a.startswith("-")), None)


def _add_commands(parser: argparse.ArgumentParser, commands: dict[str, Command], argv: list[str],
                  depth: int = 0) -> None:
    sub = parser.add_subparsers(dest=f"command{depth or ''}", metavar="COMMAND")
    chosen = _chosen(argv)
    for name, cmd in commands.items():
        p = sub.add_parser(name, help=cmd.help, description=cmd.help,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        if name != chosen:
            continue  # listed by its help line; its module is imported only when it runs
        target = import_target(cmd.target)
        if isinstance(target, dict):  # a group: without one of its commands it shows them
            p.set_defaults(func=lambda _args, p=p: (p.print_help(), 2)[1])
            _add_commands(p, target, argv[argv.index(name) + 1:], depth + 1)
        else:
            target(p)


def build_parser(prog: str, doc: str | None, commands: dict[str, Command],
                 argv: list[str] | tuple[str, ...] = ()) -> argparse.ArgumentParser:
    """The parser of ``prog``; of the commands only the one ``argv`` names is built in full."""
    p = argparse.ArgumentParser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    try:
        version = metadata.version("doctrine-to-weights")
    except metadata.PackageNotFoundError:
        version = "unknown"
    p.add_argument("--version", action="version", version=f"%(prog)s {version}")
    _add_commands(p, commands, list(argv))
    return p


def run(prog: str, doc: str | None, commands: dict[str, Command], argv: list[str] | None = None,
        *, default: str | None = None) -> int:
    """Parse ``argv`` (default: ``sys.argv[1:]``) and run the chosen command; its exit status."""
    import sys

    argv = list(sys.argv[1:] if argv is None else argv)
    if default and argv and not argv[0].startswith("-") and argv[0] not in commands:
        argv = [default, *argv]
    parser = build_parser(prog, doc, commands, argv)
    return _parse_and_run(parser, argv)


def _parse_and_run(parser: argparse.ArgumentParser, argv: list[str]) -> int:
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
        return 2
    try:
        return int(args.func(args) or 0)
    except (CommandError, OSError) as exc:  # every command's expected failures: one line, exit 2
        import sys

        if (line := error_line(exc)) is None:
            raise
        print(f"error: {line}", file=sys.stderr)
        return 2


def recipe_command(p: argparse.ArgumentParser, schema: str, handler: Callable[[argparse.Namespace, Any], int],
                   *, recipe_help: str = "a recipe YAML under configs/",
                   overrides_help: str = "dotted KEY=VALUE overrides of the recipe") -> argparse.ArgumentParser:
    """Make ``p`` a recipe command: ``RECIPE.yaml [KEY=VALUE ...] [--print-config] [--explain]``.
    When it runs, the recipe is loaded into ``schema`` (``"module:Class"``, imported then) with
    the overrides; a bad recipe is a one-line error (exit 2), ``--print-config`` prints it and
    ``--explain`` prints it with each key's meaning and default (exit 0), else
    ``handler(args, recipe)`` runs. Returns ``p`` for the command's own options."""
    p.add_argument("recipe", help=recipe_help)
    p.add_argument("overrides", nargs="*", help=overrides_help)
    p.add_argument("--print-config", action="store_true", help="print the resolved recipe and exit")
    p.add_argument("--explain", action="store_true",
                   help="print the resolved recipe with each key's meaning and default, and exit")

    def func(args: argparse.Namespace) -> int:
        from plumbing.recipe_loader import load_for_cli

        recipe = load_for_cli(args.recipe, import_target(schema), args.overrides, args.print_config,
                              args.explain)
        return recipe if isinstance(recipe, int) else handler(args, recipe)

    p.set_defaults(func=func)
    return p



def run_command(prog: str, doc: str | None, add: Callable[[argparse.ArgumentParser], None],
                argv: list[str] | None = None) -> int:
    """Run a module that is one command (``python -m train.vllm_check RUN``); ``add`` builds its
    parser, as it does when the command is one of ``dtw``'s."""
    import sys

    p = argparse.ArgumentParser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    add(p)
    return _parse_and_run(p, list(sys.argv[1:] if argv is None else argv))
