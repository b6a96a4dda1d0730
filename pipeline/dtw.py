"""``dtw``: one command line for every stage and tool of the project.

    dtw run configs/pipeline/demo.yaml              # the whole pipeline (what `make demo` runs)
    dtw data configs/data/demo.yaml --out runs/demo/data
    dtw train configs/train/demo.yaml --out runs/demo
    dtw export runs/demo
    dtw eval configs/eval/demo.yaml --out runs/demo/eval
    dtw report runs/demo/eval
    dtw inspect runs/demo/data --kind refusal --n 2
    dtw doctrine show --mode distilled --part nudge-gentle
    dtw kernel profile --window 8192

A stage of a pipeline recipe is the command of the same name (stage ``adapter`` is
``dtw export``, which writes ``runs/<name>/adapter``). Every command is also
``python -m <package> ...`` (each entry of COMMANDS names its module), and training under
accelerate is ``accelerate launch -m train RECIPE ...``. Each command imports its package
only when it runs, so ``dtw --help`` is instant.
"""

from __future__ import annotations

import sys

from plumbing.subcommands import Command

COMMANDS: dict[str, Command] = {
    # The stages, in pipeline order (the doctrine stage runs inside `dtw run`).
    "run": Command("pipeline.runner:add_run", "run a pipeline recipe stage by stage, resuming where it stopped"),
    "data": Command("data_gen.cli_build:add_build", "stage data: build an SFT curriculum from a configs/data recipe"),
    "train": Command("train.__main__:add_run", "stage train: train a LoRA adapter from a configs/train recipe"),
    "grpo": Command("rl.__main__:add_run", "stage train, after SFT: GRPO with the evaluator's scores as reward"),
    "on-policy": Command("rl.__main__:add_on_policy", "stage data, after SFT: the adapter plays new sessions, the "
                         "doctrine labels the states it visits (an on-policy round)"),
    "export": Command("train.__main__:add_export", "stage adapter: write runs/<name>/adapter for vLLM serving"),
    "eval": Command("eval.cli:register_run", "stage eval: run (or resume) an eval recipe into --out"),
    "report": Command("eval.cli:register_report", "stage report: Markdown, HTML and JSON of an eval folder"),
    # Tools.
    "doctrine": Command("doctrine.cli:COMMANDS", "doctrine texts: show, hash, export-prompt-set, conform, conform-bench"),
    "kernel": Command("doctrine.kernel.__main__:COMMANDS", "the compression kernel: replay a script, print a profile"),
    "inspect": Command("data_gen.cli_build:add_inspect", "print a data folder's stats and samples as the model sees them"),
    "audit": Command("data_gen.audit:add_audit", "print the curriculum audit of a data folder (JSON)"),
    "synthetic": Command("data_gen.cli_synthetic:register", "write seeded synthetic sessions (JSONL)"),
    "validate-trajectories": Command("data_gen.cli_trajectories:register",
                                     "convert recorded trajectories and count rejects by reason"),
    "probes": Command("eval.probes_cli:register", "recall probes on recorded trajectories: extract, report"),
    "rescore": Command("eval.cli:register_rescore", "re-score an eval's recorded held-out replies with today's scorer"),
    "policy-table": Command("eval.policy_table:register", "the policy-arm table (Markdown) of finished eval runs"),
    "fixtures": Command("eval.workloads.fixtures:register_fixtures", "write the seeded held-out fixture rows (JSONL)"),
    "model-info": Command("train.__main__:add_model_info", "resolve a model spec and print what it is"),
    "tiny-model": Command("train.__main__:add_tiny_model", "build the tiny test model into OUT"),
    "plan": Command("train.__main__:add_plan", "per-device memory, fit and step time of a train recipe on N GPUs"),
    "vllm-check": Command("train.vllm_check:register", "load an exported adapter in vLLM and generate with it"),
}


def main(argv: list[str] | None = None) -> int:
    from plumbing.subcommands import run

    return run("dtw", __doc__, COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
