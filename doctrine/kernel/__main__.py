"""``python -m doctrine.kernel replay SCRIPT.jsonl`` (replay a scripted session) and
``python -m doctrine.kernel profile --window W`` (print a serving profile)."""

from __future__ import annotations

import argparse
import json
import sys

from doctrine.kernel.replay import replay_file


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m doctrine.kernel",
                                description="Tools for the Python port of acp-kernel.")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("replay", help="replay a JSONL script of turns and compress calls; "
                                      "prints one JSON line per op")
    r.add_argument("script", help="path to the .jsonl script")
    r.add_argument("--structural", action="store_true",
                   help="print the structural records of the acp-kernel differential suite")
    r.add_argument("--timing", action="store_true",
                   help='print {"op", "n", "ms"} per op: the kernel call\'s time (benchmarks/kernel_replay.py)')
    pr = sub.add_parser("profile", help="print the serving profile a window resolves to (JSON with its sha256)")
    pr.add_argument("--window", type=int, required=True, help="context window in tokens")
    pr.add_argument("--preset", default="default", help="gate preset: reference, default, aggressive, pocket")
    pr.add_argument("--host", default="proxy", help="host variant: proxy, pi")
    pr.add_argument("--prompt-mode", default="distilled", help="doctrine or distilled")
    pr.add_argument("--nudge-style", default="list", help="list or none")
    args = p.parse_args(argv)
    if args.cmd == "replay":
        return replay_file(args.script, structural=args.structural, timing=args.timing)
    if args.cmd == "profile":
        from doctrine.kernel.profile import resolve_profile

        try:
            prof = resolve_profile(args.window, args.preset, args.host, prompt_mode=args.prompt_mode,
                                   nudge_style=args.nudge_style)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(json.dumps(prof.record(), indent=2, sort_keys=True))
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
