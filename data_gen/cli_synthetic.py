"""``python -m data_gen synthetic``: write seeded synthetic sessions as JSONL.

Examples::

    python -m data_gen synthetic py_bughunt --seed 7                 # JSONL on stdout
    python -m data_gen synthetic all --seed 0 --n 20 --out syn.jsonl  # 20 seeds of each of FAMILIES
    python -m data_gen synthetic log_triage --steps 6 --lines 5,20    # small, for tests

One ``Session.to_json()`` per line; one summary line per session (on stdout when
``--out`` is given, else on stderr so stdout stays pure JSONL).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

__all__ = ["register", "run"]


def register(p: argparse.ArgumentParser) -> None:
    """The ``synthetic`` command's arguments (``func=run``)."""
    from .synthetic import ALL_FAMILIES, SessionSize

    d = SessionSize()
    p.description = __doc__
    p.add_argument("family", choices=[*ALL_FAMILIES, "all"], help="workload family, or all (every full-size family of data_gen.synthetic.FAMILIES; not the pocket or procedural ones)")
    p.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    p.add_argument("--n", type=int, default=1, help="sessions per family: seeds SEED .. SEED+N-1 (default 1)")
    p.add_argument("--steps", type=int, default=d.steps, help=f"task steps per session (default {d.steps})")
    p.add_argument("--probes", type=int, default=d.probes, help=f"probe steps per session (default {d.probes})")
    p.add_argument("--lines", default=f"{d.tool_output_lines[0]},{d.tool_output_lines[1]}", metavar="MIN,MAX",
                   help="line counts bulky tool outputs are drawn from (default %(default)s)")
    p.add_argument("--out", type=Path, help="JSONL file to write (atomically); default stdout")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from .synthetic import FAMILIES, SessionSize, generate, shape_stats

    try:
        lo, hi = (int(v) for v in str(args.lines).split(","))
        size = SessionSize(steps=args.steps, tool_output_lines=(lo, hi), probes=args.probes)
    except ValueError as exc:
        print(f"error: bad size: {exc}", file=sys.stderr)
        return 2
    if args.seed < 0 or args.n < 1:
        print("error: --seed must be >= 0 and --n >= 1", file=sys.stderr)
        return 2
    families = list(FAMILIES) if args.family == "all" else [args.family]
    lines, summaries = [], []
    for family in families:
        for seed in range(args.seed, args.seed + args.n):
            s = generate(family, seed, size)
            lines.append(s.to_json())
            st = shape_stats(s)
            summaries.append(f"{s.session_id}  messages={st['messages']} steps={st['steps']} facts={st['facts']} "
                             f"tokens~{st['tokens']} tool_share={st['tool_share']:.2f} far_uses={st['far_uses']}")
    if args.out is None:
        sys.stdout.write("".join(line + "\n" for line in lines))
        print("\n".join(summaries), file=sys.stderr)
        return 0
    try:
        _write_atomic(args.out, "".join(line + "\n" for line in lines))
    except OSError as exc:
        print(f"error: cannot write {args.out}: {exc}", file=sys.stderr)
        return 1
    print("\n".join(summaries))
    print(f"wrote {len(lines)} sessions to {args.out}")
    return 0


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
