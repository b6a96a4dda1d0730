"""``python -m rl``: GRPO after SFT (also ``dtw grpo``) and on-policy rounds (``dtw on-policy``).

    python -m rl configs/train/grpo_pocket.yaml --out runs/pocket_grpo [KEY=VALUE ...] [--resume]
    python -m rl on-policy configs/on_policy/pocket.yaml --out runs/pocket_proc/round1 student.adapter_dir=DIR
    accelerate launch --config_file configs/accelerate/single_gpu.yaml -m rl configs/train/grpo_8b.yaml --out runs/reference_grpo

The recipe is a train recipe with a ``grpo:`` section (train/grpo_recipe.py). This package sits
above eval because its rewards are the held-out scorer's: a fold the kernel applies, the
conformance checker's score, values found in view (rl/rewards.py).
"""

from __future__ import annotations

import argparse
import sys

from plumbing.subcommands import Command


def _cmd_grpo(args: argparse.Namespace, recipe) -> int:
    if not args.out:
        print("error: --out runs/<name> is required", file=sys.stderr)
        return 2
    if recipe.grpo is None:
        print(f"error: {args.recipe} has no grpo: section; an SFT recipe runs with `dtw train`",
              file=sys.stderr)
        return 2
    if args.force and args.resume:
        print("error: --force trains afresh and --resume goes on; give one", file=sys.stderr)
        return 2
    from train.__main__ import claim_train_folder
    from train.data import DataError
    from train.sft import NonFiniteTraining

    from .grpo import GrpoError, run_grpo

    if not claim_train_folder(args.out):
        return 2
    try:
        run_grpo(recipe, args.out, resume=args.resume, force=args.force)
    except (GrpoError, DataError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except NonFiniteTraining as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def add_run(p: argparse.ArgumentParser) -> None:
    from plumbing.subcommands import recipe_command

    recipe_command(p, "train.recipe:TrainRecipe", _cmd_grpo, recipe_help="a configs/train/grpo_*.yaml recipe",
                   overrides_help="dotted KEY=VALUE overrides, e.g. grpo.init_adapter=runs/x/train/final")
    p.add_argument("--out", help="run folder (runs/<name>); outputs go to <out>/train")
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint")
    p.add_argument("--force", action="store_true",
                   help="train afresh although <out>/train holds a run (its checkpoints and adapter are deleted)")


def _cmd_on_policy(args: argparse.Namespace, recipe) -> int:
    from plumbing.stage import run_once

    from .on_policy import WRITES, OnPolicyError, round_fingerprint, run_round

    if not args.out:
        print("error: --out runs/<name>/round1 is required", file=sys.stderr)
        return 2
    return run_once(args.out, round_fingerprint(recipe), lambda: run_round(recipe, args.out), name="on-policy",
                    stage="data", writes=WRITES, force=args.force,
                    hint="use --force to play the round again, or a new --out", errors=(OnPolicyError,))


def add_on_policy(p: argparse.ArgumentParser) -> None:
    from plumbing.subcommands import recipe_command

    recipe_command(p, "rl.on_policy:OnPolicyRecipe", _cmd_on_policy,
                   recipe_help="a configs/on_policy/*.yaml round recipe",
                   overrides_help="dotted KEY=VALUE overrides, e.g. student.adapter_dir=runs/x/train/final")
    p.add_argument("--out", help="the round's data folder (runs/<name>/round1)")
    p.add_argument("--force", action="store_true", help="play the round again although its folder is complete")


COMMANDS: dict[str, Command] = {
    "run": Command("rl.__main__:add_run", "GRPO after SFT from a configs/train recipe with grpo: (the default command)"),
    "on-policy": Command("rl.__main__:add_on_policy", "an on-policy round: the adapter plays new sessions, the "
                         "doctrine labels the states it visits, into a data folder"),
}


def main(argv: list[str] | None = None) -> int:
    from plumbing.subcommands import run

    return run("python -m rl", __doc__, COMMANDS, argv, default="run")


if __name__ == "__main__":
    sys.exit(main())
