"""``python -m data_gen build`` and ``python -m data_gen inspect``."""

from __future__ import annotations

import argparse
import json
import sys


def register_build(sub) -> None:
    p = sub.add_parser("build", help="build an SFT curriculum from a configs/data recipe",
                       description="python -m data_gen build configs/data/demo.yaml --out runs/demo/data [KEY=VALUE ...]")
    p.add_argument("recipe")
    p.add_argument("overrides", nargs="*", help="dotted KEY=VALUE overrides, e.g. replay.windows=[8192]")
    p.add_argument("--out", help="output folder (runs/<name>/data)")
    p.add_argument("--print-config", action="store_true")
    p.add_argument("--force", action="store_true", help="rebuild even if a complete manifest exists")
    p.set_defaults(func=_build)


def _build(args: argparse.Namespace) -> int:
    from pathlib import Path

    from plumbing.recipe_loader import load_for_cli
    from plumbing.runs import out_dir_error, stage_complete

    from .recipe import DataRecipe

    recipe = load_for_cli(args.recipe, DataRecipe, args.overrides, args.print_config)
    if isinstance(recipe, int):
        return recipe
    if not args.out:
        print("error: --out runs/<name>/data is required", file=sys.stderr)
        return 2
    if problem := out_dir_error(args.out):
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if stage_complete(args.out) and not args.force:
        print(f"[skip] data: {Path(args.out) / 'manifest.json'} exists (use --force to rebuild)")
        return 0
    from .build import build_curriculum

    build_curriculum(recipe, args.out)
    return 0


def register_inspect(sub) -> None:
    p = sub.add_parser("inspect", help="print stats and N samples (of one kind) as the model sees them",
                       description="python -m data_gen inspect runs/demo/data --kind refusal --n 2")
    p.add_argument("dir", help="a data_gen output folder")
    p.add_argument("--n", type=int, default=2, help="samples to render")
    p.add_argument("--split", default="train")
    p.add_argument("--kind", help="only samples of this kind (nudged_compress, refusal, tier2, ...)")
    p.add_argument("--plain", action="store_true",
                   help="print the messages by role instead of through the model's chat template")
    p.add_argument("--model", default="embedded:smollm2-135m-instruct",
                   help="model spec whose training chat template renders the samples")
    p.set_defaults(func=_inspect)


def _inspect(args: argparse.Namespace) -> int:
    from pathlib import Path

    from plumbing.runs import read_manifest

    manifest = read_manifest(args.dir)
    if manifest is None:
        print(f"error: {args.dir}: no complete manifest.json", file=sys.stderr)
        return 2
    counts = manifest["counts"]
    print(f"doctrine {manifest['doctrine']['version']} {manifest['doctrine']['sha256']}")
    for split in manifest.get("splits", []):
        print(f"{split:<10} {counts.get(split, 0):>6} rows  {json.dumps(counts['kinds'].get(split, {}))}")
    if counts.get("rejects"):
        print("rejects:", json.dumps(counts["rejects"]))
    files = sorted((Path(args.dir) / args.split).glob("*.parquet"))
    if not files or args.n <= 0:
        return 0
    import pyarrow.parquet as pq

    from .recipe import KINDS

    if args.kind and args.kind not in KINDS:
        print(f"error: --kind {args.kind!r}: kinds are {', '.join(KINDS)}", file=sys.stderr)
        return 2
    rows = []
    for f in files:
        rows += [r for r in pq.read_table(f).to_pylist() if not args.kind or r["meta"]["kind"] == args.kind]
        if len(rows) >= args.n:
            break
    rows = rows[:args.n]
    if not rows:
        print(f"no {args.kind} samples in the {args.split} split")
        return 0
    render = _plain if args.plain else _templated(args.model)
    for i, row in enumerate(rows):
        m = row["meta"]
        print(f"\n===== sample {i}: {m['kind']} ({m['family']}, window {m['window']}, step {m['step']}) =====")
        print(render(row))
    return 0


def _templated(model: str):
    from plumbing.chat_templates import choose_template
    from plumbing.models import load_tokenizer

    tok = load_tokenizer(model)
    template = choose_template(tok).template
    return lambda row: tok.apply_chat_template(row["messages"], tools=json.loads(row["tools"]),
                                               chat_template=template, tokenize=False)


def _plain(row: dict) -> str:
    """The messages by role, tool calls with their arguments, the target marked."""
    out = []
    msgs = row["messages"]
    for k, m in enumerate(msgs):
        head = "TARGET assistant" if k == len(msgs) - 1 else m["role"] + (f" ({m['name']})" if m.get("name") else "")
        out.append(f"--- {head}")
        if m.get("content"):
            out.append(m["content"])
        for c in m.get("tool_calls") or []:
            out.append(f"[call {c['function']['name']}] {c['function']['arguments']}")
    return "\n".join(out)
