"""``python -m train``: LoRA SFT runs, adapter export and model tools (also ``dtw train``, ``dtw export``...).

    python -m train configs/train/demo.yaml --out runs/demo [KEY=VALUE ...] [--resume]   (= python -m train run ...)
    accelerate launch --config_file configs/accelerate/cpu.yaml -m train configs/train/demo.yaml --out runs/demo
    python -m train export runs/demo [--merge]
    python -m train model-info embedded:smollm2-135m-instruct
    python -m train model-info HuggingFaceTB/SmolLM2-135M-Instruct@<rev> --json
    python -m train tiny-model /tmp/tiny
    python -m train plan configs/train/gpu_8b.yaml --gpus 8 --gpu-memory 80 [--gpu-flops 989] [--json]
    python -m train vllm-check runs/demo [--max-tokens 64] [--json]

``run`` is the default command: a first argument that is no command name is a recipe.
"""

from __future__ import annotations

import argparse
import json
import sys

from plumbing.subcommands import Command


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
    from plumbing.models import build_tiny_model
    from plumbing.tiny_model import TinyModelConfig

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


def add_model_info(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", help="embedded:NAME, ORG/NAME[@REV] or a local folder")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_cmd_model_info)


def add_export(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", help="the run folder, runs/<name>")
    p.add_argument("--merge", action="store_true", help="also write merged full weights (safetensors)")
    p.set_defaults(func=_cmd_export)


def add_tiny_model(p: argparse.ArgumentParser) -> None:
    p.add_argument("out")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_cmd_tiny_model)


def add_plan(p: argparse.ArgumentParser) -> None:
    p.add_argument("recipe", help="a configs/train/*.yaml recipe")
    p.add_argument("overrides", nargs="*", help="dotted KEY=VALUE overrides of the recipe")
    p.add_argument("--gpus", type=int, required=True, help="GPUs (processes)")
    p.add_argument("--gpu-memory", type=float, required=True, help="memory per GPU, GB")
    p.add_argument("--gpu-flops", type=float, default=989.0,
                   help="dense bf16 TFLOPS per GPU (default 989: H100 SXM)")
    p.add_argument("--mfu", type=float, default=0.35, help="model FLOPs utilisation assumed (default 0.35)")
    p.add_argument("--sharded", action="store_true",
                   help="weights sharded over the GPUs (FSDP / ZeRO-3); default replicated (DDP)")
    p.add_argument("--target-tokens", type=int, default=256,
                   help="target (assistant) tokens a sample, for target-only logits and target tokens/s")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_plan)


def add_run(p: argparse.ArgumentParser) -> None:
    from plumbing.subcommands import recipe_command

    recipe_command(p, "train.recipe:TrainRecipe", _cmd_train, recipe_help="a configs/train/*.yaml recipe",
                   overrides_help="dotted KEY=VALUE overrides, e.g. trainer.max_steps=5")
    p.add_argument("--out", help="run folder (runs/<name>); outputs go to <out>/train")
    p.add_argument("--resume", action="store_true",
                   help="continue from the latest checkpoint even where the recipe changed (more steps); an "
                        "interrupted run of the same recipe and data resumes without it")
    p.add_argument("--force", action="store_true",
                   help="retrain from step 0 even if a complete training exists (needed when the recipe or data changed)")


def claim_train_folder(out: str) -> bool:
    """Claim ``<out>/train`` for a training stage (SFT here, GRPO in rl/): a new folder or one
    training wrote, and no linked checkpoints/final folder. False after printing why not.

    Under accelerate launch only the first process claims it: a second one checking at the same
    time sees the first one's marker half-written (its temp file, no marker yet) and refuses the
    folder. The others write nothing there before it has."""
    import os

    from plumbing.runs import RunFolderError, claim_run_folder, stage_dir

    try:
        if os.environ.get("LOCAL_RANK", "0") == "0" and os.environ.get("RANK", "0") == "0":
            claim_run_folder(stage_dir(out, "train"), "train", writes=("checkpoints", "final"),
                             legacy=("checkpoints", "final"))
    except RunFolderError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return False
    return True


def _cmd_train(args: argparse.Namespace, recipe) -> int:
    if not args.out:
        print("error: --out runs/<name> is required", file=sys.stderr)
        return 2
    if args.force and args.resume:
        print("error: --force starts afresh and --resume continues; give one of them", file=sys.stderr)
        return 2
    if recipe.grpo is not None:  # GRPO scores with the evaluator, a layer above train: rl/
        print(f"error: {args.recipe} has a grpo: section, a GRPO stage after SFT; run it with "
              f"`dtw grpo {args.recipe} --out {args.out}` (python -m rl)", file=sys.stderr)
        return 2
    from .data import DataError
    from .sft import NonFiniteTraining, TrainingChanged, run_training

    if not claim_train_folder(args.out):
        return 2
    try:
        run_training(recipe, args.out, resume=args.resume, force=args.force)
    except (DataError, TrainingChanged) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except NonFiniteTraining as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


COMMANDS: dict[str, Command] = {
    "run": Command("train.__main__:add_run", "train a LoRA adapter from a configs/train recipe (the default command)"),
    "export": Command("train.__main__:add_export", "write runs/<name>/adapter for vLLM serving"),
    "model-info": Command("train.__main__:add_model_info", "resolve a model spec and print what it is"),
    "tiny-model": Command("train.__main__:add_tiny_model", "build the tiny test model into OUT"),
    "plan": Command("train.__main__:add_plan", "per-device memory, fit and step time of a recipe on N GPUs"),
    "vllm-check": Command("train.vllm_check:register",
                          "load an exported adapter in a real vLLM engine and generate with it"),
}


def main(argv: list[str] | None = None) -> int:
    from plumbing.subcommands import run

    return run("python -m train", __doc__, COMMANDS, argv, default="run")


if __name__ == "__main__":
    sys.exit(main())
