"""``dtw data`` and ``dtw inspect`` (``python -m data_gen build`` and ``python -m data_gen inspect``)."""

from __future__ import annotations

import argparse
import json
import sys


def add_build(p) -> None:
    """``dtw data`` / ``python -m data_gen build RECIPE.yaml --out runs/<name>/data [KEY=VALUE ...]``."""
    from plumbing.subcommands import recipe_command

    recipe_command(p, "data_gen.recipe:DataRecipe", _build, recipe_help="a configs/data/*.yaml recipe",
                   overrides_help="dotted KEY=VALUE overrides, e.g. replay.windows=[8192]")
    p.add_argument("--out", help="output folder (runs/<name>/data)")
    p.add_argument("--force", action="store_true",
                   help="rebuild even if a complete manifest exists (needed when the recipe or doctrine changed)")


def _build(args: argparse.Namespace, recipe) -> int:
    from plumbing.stage import run_once

    if not args.out:
        print("error: --out runs/<name>/data is required", file=sys.stderr)
        return 2
    from doctrine.spec import resolve_doctrine

    from .build import SPLITS, EmptyCurriculum, build_curriculum, data_fingerprint

    # Built from this recipe, doctrine and input files already: skip; from others: refuse.
    fingerprint = data_fingerprint(recipe, resolve_doctrine(recipe.doctrine_version))
    return run_once(args.out, fingerprint, lambda: build_curriculum(recipe, args.out), name="data", stage="data",
                    writes=(*SPLITS, "README.md"), force=args.force, hint="use --force to rebuild it, or a new --out",
                    errors=(EmptyCurriculum,))


def add_inspect(p) -> None:
    """``dtw inspect`` / ``python -m data_gen inspect runs/demo/data --kind refusal --n 2``."""
    p.add_argument("dir", help="a data_gen output folder")
    p.add_argument("--n", type=int, default=2, help="samples to render")
    p.add_argument("--split", default="train")
    p.add_argument("--kind", help="only samples of this kind (nudged_compress, refusal, tier2, ...)")
    p.add_argument("--plain", action="store_true",
                   help="print the messages by role instead of through the model's chat template")
    p.add_argument("--model", default="embedded:smollm2-135m-instruct",
                   help="model spec whose training chat template renders the samples")
    p.add_argument("--lengths", action="store_true",
                   help="print every split's rendered sample lengths in the model's tokens, by kind "
                        "(rows, distinct targets, p50/p95/max), instead of samples")
    p.set_defaults(func=_inspect)


class InspectError(ValueError):
    """A data folder ``inspect`` cannot read (a forged manifest, a truncated shard); one line."""


def _checked_manifest(data_dir: str) -> dict:
    """The folder's manifest, checked for the fields ``inspect`` prints."""
    from plumbing.runs import read_manifest

    manifest = read_manifest(data_dir)
    if manifest is None:
        raise InspectError(f"{data_dir}: no complete manifest.json")
    counts, doc, splits = manifest.get("counts"), manifest.get("doctrine"), manifest.get("splits", [])
    why = ("counts is not a mapping" if not isinstance(counts, dict)
           else "counts.kinds is not a mapping" if not isinstance(counts.get("kinds", {}), dict)
           else "doctrine has no version and sha256" if not (isinstance(doc, dict) and "version" in doc
                                                           and "sha256" in doc)
           else "splits is not a list of names" if not (isinstance(splits, list)
                                                        and all(isinstance(x, str) for x in splits))
           else "")
    if why:
        raise InspectError(f"{data_dir}/manifest.json: not a data manifest ({why})")
    return manifest


def _split_files(data_dir: str, split: str) -> list:
    """The split's shards as the manifest lists them (plumbing.runs.stage_files), one line if not."""
    from plumbing.runs import StageInputError, stage_files

    try:
        return stage_files(data_dir, split, ("*.parquet",))
    except StageInputError as exc:
        raise InspectError(str(exc)) from None


def _shard_rows(path) -> list[dict]:
    """A parquet shard's rows, each checked to be a curriculum row."""
    from plumbing.shards import read_shard

    rows = read_shard(path)  # a ShardError is one line (plumbing.subcommands)
    for i, r in enumerate(rows):
        meta = r.get("meta")
        if not (isinstance(meta, dict) and isinstance(meta.get("kind"), str) and isinstance(r.get("messages"), list)
                and isinstance(r.get("tools"), str)):
            raise InspectError(f"{path}: row {i} is not a curriculum row (messages, tools, meta.kind)")
    return rows


def _inspect(args: argparse.Namespace) -> int:
    try:
        return _inspect_folder(args)
    except InspectError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _inspect_folder(args: argparse.Namespace) -> int:

    manifest = _checked_manifest(args.dir)
    counts = manifest["counts"]
    print(f"doctrine {manifest['doctrine']['version']} {manifest['doctrine']['sha256']}")
    for split in manifest.get("splits", []):
        print(f"{split:<10} {counts.get(split, 0):>6} rows  {json.dumps(counts.get('kinds', {}).get(split, {}))}")
    if counts.get("rejects"):
        print("rejects:", json.dumps(counts["rejects"]))
    if isinstance(counts.get("memorisation"), dict):  # the build's audit (an older build has none)
        from .memorisation import audit_lines

        print("\n".join(audit_lines(counts["memorisation"])))
    if args.lengths:
        from plumbing.chat_templates import choose_template
        from plumbing.models import load_tokenizer

        from .audit import read_rows
        from .lengths import format_table, length_table

        for split in manifest.get("splits") or ():
            for f in _split_files(args.dir, split):
                _shard_rows(f)  # a truncated shard or a forged row is one line, not a traceback
        tok = load_tokenizer(args.model)
        print(f"\nrendered lengths in {args.model} tokens (sample = prompt + tool schemas + target):")
        print(format_table(length_table(read_rows(args.dir, manifest.get("splits") or ()), tok,
                                        choose_template(tok).template)))
        return 0
    files = _split_files(args.dir, args.split)
    if not files or args.n <= 0:
        return 0
    from .recipe import KINDS

    if args.kind and args.kind not in KINDS:
        print(f"error: --kind {args.kind!r}: kinds are {', '.join(KINDS)}", file=sys.stderr)
        return 2
    rows = []
    for f in files:
        rows += [r for r in _shard_rows(f) if not args.kind or r["meta"]["kind"] == args.kind]
        if len(rows) >= args.n:
            break
    rows = rows[:args.n]
    if not rows:
        print(f"no {args.kind} samples in the {args.split} split")
        return 0
    render = _plain if args.plain else _templated(args.model)
    for i, row in enumerate(rows):
        m = row["meta"]
        print(f"\n===== sample {i}: {m['kind']} ({m.get('family')}, window {m.get('window')}, step {m.get('step')}) =====")
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
