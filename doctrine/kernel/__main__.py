"""``python -m doctrine.kernel replay SCRIPT.jsonl``: replay a scripted session."""

from __future__ import annotations

import argparse
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
    args = p.parse_args(argv)
    if args.cmd == "replay":
        return replay_file(args.script, structural=args.structural)
    return 2


if __name__ == "__main__":
    sys.exit(main())
