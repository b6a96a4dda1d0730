"""``python -m doctrine.kernel replay SCRIPT.jsonl`` (replay a scripted session) and
``python -m doctrine.kernel profile --window W`` (print a serving profile); also ``dtw kernel ...``."""

from __future__ import annotations

import argparse
import json
import sys

from plumbing.subcommands import Command


def add_replay(p: argparse.ArgumentParser) -> None:
    p.add_argument("script", help="path to the .jsonl script")
    p.add_argument("--structural", action="store_true",
                   help="print the structural records of the acp-kernel differential suite")
    p.add_argument("--timing", action="store_true",
                   help='print {"op", "n", "ms"} per op: the kernel call\'s time (benchmarks/kernel_replay.py)')
    p.set_defaults(func=_replay)


def _replay(args: argparse.Namespace) -> int:
    from doctrine.kernel.replay import replay_file

    return replay_file(args.script, structural=args.structural, timing=args.timing)


def add_profile(p: argparse.ArgumentParser) -> None:
    p.add_argument("--window", type=int, required=True, help="context window in tokens")
    p.add_argument("--preset", default="default", help="gate preset: reference, default, aggressive, pocket")
    p.add_argument("--host", default="proxy", help="host variant: proxy, pi")
    p.add_argument("--prompt-mode", default="distilled", help="doctrine or distilled")
    p.add_argument("--nudge-style", default="list", help="list or none")
    p.set_defaults(func=_profile)


def _profile(args: argparse.Namespace) -> int:
    from doctrine.kernel.profile import resolve_profile

    try:
        prof = resolve_profile(args.window, args.preset, args.host, prompt_mode=args.prompt_mode,
                               nudge_style=args.nudge_style)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(prof.record(), indent=2, sort_keys=True))
    return 0


COMMANDS: dict[str, Command] = {
    "replay": Command("doctrine.kernel.__main__:add_replay",
                      "replay a JSONL script of turns and compress calls; prints one JSON line per op"),
    "profile": Command("doctrine.kernel.__main__:add_profile",
                       "print the serving profile a window resolves to (JSON with its sha256)"),
}


def main(argv: list[str] | None = None) -> int:
    from plumbing.subcommands import run

    return run("python -m doctrine.kernel", "Tools for the Python port of acp-kernel.", COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
