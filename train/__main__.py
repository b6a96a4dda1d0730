"""``python -m train``: LoRA SFT runs, adapter export and model tools.

    python -m train configs/train/demo.yaml --out runs/demo [KEY=VALUE ...] [--resume]
    accelerate launch --config_file configs/accelerate/cpu.yaml -m train configs/train/demo.yaml --out runs/demo
    python -m train export runs/demo [--merge]
    python -m train model-info embedded:smollm2-135m-instruct
    python -m train model-info HuggingFaceTB/SmolLM2-135M-Instruct@<rev> --json
    python -m train tiny-model /tmp/tiny
    python -m train plan configs/train/gpu_8b.yaml --gpus 8 --gpu-memory 80 [--gpu-flops 989] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys


def _cmd_model_info(args: argparse.Namespace) -> int:
    from plumbing.models import ModelSpecError, model_info

    try:
        info = model_info(args.spec)
    except ModelSpecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    rows = [
        ("spec", info["spec"]),
        ("path", info["path"]),
        ("model id", info["model_id"] + (f"@{info['revision']}" if info["revision"] else "")),
        ("architecture", info["architecture"]),
        ("parameters", f"{info['parameters']:,} ({info['parameters_human']})"),
        ("context length", info["context_length"]),
        ("layers / hidden", f"{info['layers']} / {info['hidden_size']}"),
        ("chat template", "yes" if info["chat_template"] else "no"),
    ]
    if info.get("source_sha256"):
        rows.append(("source sha256", info["source_sha256"]))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    return 0


def _cmd_tiny_model(args: argparse.Namespace) -> int:
    from plumbing.tiny_model import TinyModelConfig, build_tiny_model

    out = build_tiny_model(args.out, TinyModelConfig(layers=args.layers, hidden_size=args.hidden,
                                                     seed=args.seed))
    print(out)
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from plumbing.runs import RunFolderError

    from .export import ExportError, export_adapter

    try:
        export_adapter(args.run, merge=args.merge)
    except (ExportError, RunFolderError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def _cmd_plan(args: argparse.Namespace) -> int:
    from .plan import main_plan

    return main_plan(args)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m train", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    mi = sub.add_parser("model-info", help="resolve a model spec and print what it is")
    mi.add_argument("spec", help="embedded:NAME, ORG/NAME[@REV] or a local folder")
    mi.add_argument("--json", action="store_true", help="print JSON instead of a table")
    mi.set_defaults(func=_cmd_model_info)
    ex = sub.add_parser("export", help="write runs/<name>/adapter for vLLM serving")
    ex.add_argument("run", help="the run folder, runs/<name>")
    ex.add_argument("--merge", action="store_true", help="also write merged full weights (safetensors)")
    ex.set_defaults(func=_cmd_export)
    tm = sub.add_parser("tiny-model", help="build the tiny test model into OUT")
    tm.add_argument("out")
    tm.add_argument("--layers", type=int, default=2)
    tm.add_argument("--hidden", type=int, default=64)
    tm.add_argument("--seed", type=int, default=0)
    tm.set_defaults(func=_cmd_tiny_model)
    pl = sub.add_parser("plan", help="per-device memory, fit and step time of a recipe on N GPUs")
    pl.add_argument("recipe", help="a configs/train/*.yaml recipe")
    pl.add_argument("overrides", nargs="*", help="dotted KEY=VALUE overrides of the recipe")
    pl.add_argument("--gpus", type=int, required=True, help="GPUs (processes)")
    pl.add_argument("--gpu-memory", type=float, required=True, help="memory per GPU, GB")
    pl.add_argument("--gpu-flops", type=float, default=989.0,
                    help="dense bf16 TFLOPS per GPU (default 989: H100 SXM)")
    pl.add_argument("--mfu", type=float, default=0.35, help="model FLOPs utilisation assumed (default 0.35)")
    pl.add_argument("--sharded", action="store_true",
                    help="weights sharded over the GPUs (FSDP / ZeRO-3); default replicated (DDP)")
    pl.add_argument("--target-tokens", type=int, default=256,
                    help="target (assistant) tokens a sample, for target-only logits and target tokens/s")
    pl.add_argument("--json", action="store_true", help="print JSON")
    pl.set_defaults(func=_cmd_plan)
    return p


SUBCOMMANDS = ("model-info", "tiny-model", "export", "plan")


def _train_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m train RECIPE.yaml", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("recipe", help="a configs/train/*.yaml recipe")
    p.add_argument("overrides", nargs="*", help="dotted KEY=VALUE overrides, e.g. trainer.max_steps=5")
    p.add_argument("--out", help="run folder (runs/<name>); outputs go to <out>/train")
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint")
    p.add_argument("--print-config", action="store_true", help="print the resolved recipe and exit")
    return p


def _cmd_train(argv: list[str]) -> int:
    from plumbing.recipe_loader import load_for_cli, split_override_args

    from .recipe import TrainRecipe

    parser = _train_parser()
    args, extra = parser.parse_known_intermixed_args(argv)
    overrides, stray = split_override_args(extra)
    if stray:
        parser.error(f"unrecognized arguments: {' '.join(stray)}")
    args.overrides = list(args.overrides or []) + overrides
    recipe = load_for_cli(args.recipe, TrainRecipe, args.overrides, args.print_config)
    if isinstance(recipe, int):
        return recipe
    if not args.out:
        print("error: --out runs/<name> is required", file=sys.stderr)
        return 2
    import os
    from pathlib import Path

    from plumbing.runs import RunFolderError, claim_run_folder

    from .data import DataError
    from .sft import NonFiniteTraining, run_training

    try:  # <out>/train: a new folder or one training wrote, and no linked checkpoints/final folder
        # Under accelerate launch only the first process claims it: a second one checking at
        # the same time sees the first one's marker half-written (its temp file, no marker
        # yet) and refuses the folder. The others write nothing there before it has.
        if os.environ.get("LOCAL_RANK", "0") == "0" and os.environ.get("RANK", "0") == "0":
            claim_run_folder(Path(args.out) / "train", "train", writes=("checkpoints", "final"),
                             legacy=("checkpoints", "final"))
    except RunFolderError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        run_training(recipe, args.out, resume=args.resume)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except NonFiniteTraining as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and not argv[0].startswith("-") and argv[0] not in SUBCOMMANDS:
        return _cmd_train(argv)
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
