"""Training throughput of the loss-preserving variants against the current demo recipe.

    python benchmarks/train_throughput.py [--data runs/learn/data] [--steps 3] [--model SPEC] [--only NAME ...]
    python benchmarks/train_throughput.py --recipes [--steps 10]

``--recipes`` compares whole recipes, each on its own curriculum, in one run: the learn
recipe (configs/train/learn.yaml on the wide curriculum, configs/data/learn.yaml: 2-6K-token
samples) and the pocket recipe (configs/train/pocket.yaml on configs/data/pocket.yaml:
samples of at most ~2.2K tokens), printing target tokens/s, tokens/s and steps/min for each
(the curricula are built into a temp folder where --learn-data / --pocket-data are absent).

Uses the demo curriculum (built into a temp folder with configs/data/demo.yaml when --data
is absent or incomplete) and configs/train/demo.yaml. Every variant trains the same first
--steps optimizer steps (same seed, so the same samples) in a process of its own, so that
its peak memory (RSS, max resident set of that process: model, data and training) is its
own; this script runs them one after another and prints target tokens/s (label tokens
trained on), total tokens/s (every token the model processed), peak RSS, the mean loss of
those steps and the ratio of target tokens/s to the current demo recipe. The loss column
is the check that a variant trains the same thing: the batch-1 variants take the same
optimizer steps on the same samples and match the baseline's loss to float tolerance; the
batch-2 variant takes half the steps over the same samples, so its loss differs by design,
and a shared-prefix step is one merged sequence of a session's samples (other samples, so
its loss differs too; its tok/s counts merged tokens, each computed once). Figures, not
assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# name -> recipe overrides on configs/train/demo.yaml. "demo" pins the demo recipe as it was
# before these switches existed (TRL's loss, gradient checkpointing, one padded sample a step).
BASELINE = ["trainer.target_only_logits=false", "model.gradient_checkpointing=true",
            "data.padding_free=false", "data.packing=false", "trainer.bf16=false", "lora.layers=null"]
VARIANTS: dict[str, list[str]] = {
    "demo": BASELINE,
    "target-only": [*BASELINE, "trainer.target_only_logits=true"],
    "target-only, no-ckpt": [*BASELINE, "trainer.target_only_logits=true", "model.gradient_checkpointing=false"],
    # bf16 autocast on the CPU (AVX512-BF16 / AMX kernels where the CPU has them): matmuls in
    # bf16, LoRA weights, optimizer and loss in float32; the loss moves by rounding only. On a
    # CPU without them (AVX2 only) bf16 is emulated and far slower than float32: the recipes
    # say `bf16: auto`, and these rows are worth running only where the CPU has native bf16.
    "target-only, bf16": [*BASELINE, "trainer.target_only_logits=true", "trainer.bf16=true"],
    "target-only, no-ckpt, bf16": [*BASELINE, "trainer.target_only_logits=true", "model.gradient_checkpointing=false",
                                   "trainer.bf16=true"],
    # Adapters on the upper decoder layers only: backward stops at the lowest adapted layer, so
    # the lower layers run forward only. Not the same model as the rows above (fewer adapted
    # layers), so its loss is not expected to match; the learning curve is its check.
    "target-only, no-ckpt, bf16, LoRA upper 15 layers": [
        *BASELINE, "trainer.target_only_logits=true", "model.gradient_checkpointing=false", "trainer.bf16=true",
        "lora.layers=[15,16,17,18,19,20,21,22,23,24,25,26,27,28,29]"],
    "target-only, no-ckpt, bf16, LoRA upper 10 layers": [
        *BASELINE, "trainer.target_only_logits=true", "model.gradient_checkpointing=false", "trainer.bf16=true",
        "lora.layers=[20,21,22,23,24,25,26,27,28,29]"],
    "target-only, no-ckpt, LoRA upper 10 layers": [
        *BASELINE, "trainer.target_only_logits=true", "model.gradient_checkpointing=false",
        "lora.layers=[20,21,22,23,24,25,26,27,28,29]"],
    # A session's decision points in one merged sequence along their shared prefix (data.shared_prefix):
    # a step is one such sequence (1-5 samples), so steps hold different samples from the
    # rows above and the loss column is not comparable; tok/s counts the merged tokens.
    "shared-prefix, target-only, no-ckpt, LoRA upper 10 layers": [
        *BASELINE, "trainer.target_only_logits=true", "model.gradient_checkpointing=false",
        "lora.layers=[20,21,22,23,24,25,26,27,28,29]", "data.shared_prefix=true"],
    # Two samples a step, back to back in one row: the same tokens per second at best on a
    # CPU (no padding to skip at batch 1); its point is a GPU's larger batches.
    "padding-free x2, target-only, no-ckpt": [
        *BASELINE, "trainer.target_only_logits=true", "model.gradient_checkpointing=false",
        "data.padding_free=true", "trainer.per_device_train_batch_size=2"],
}


# name -> (train recipe, data recipe) for --recipes: whole recipes, each on its own curriculum.
RECIPES: dict[str, tuple[str, str]] = {
    "learn recipe (wide curriculum)": ("configs/train/learn.yaml", "configs/data/learn.yaml"),
    "pocket recipe (pocket curriculum)": ("configs/train/pocket.yaml", "configs/data/pocket.yaml"),
}


def run_one(name: str, data: Path, steps: int, model: str, out: Path) -> dict:
    import resource

    from plumbing.recipe_loader import load_config
    from train.recipe import TrainRecipe
    from train.sft import run_training

    train_recipe, overrides = (RECIPES[name][0], []) if name in RECIPES else ("configs/train/demo.yaml", VARIANTS[name])
    recipe = load_config(ROOT / train_recipe, TrainRecipe, [
        f"data.dir={data}", f"model.spec={model}", f"trainer.max_steps={steps}", "trainer.save_steps=100000",
        "trainer.save_total_limit=null", "trainer.eval_steps=null", "trainer.logging_steps=1", *overrides])
    stage = run_training(recipe, out, log=lambda *a: None)
    m = json.loads((stage / "metrics.json").read_text())
    steps_logged = [h for h in m["log_history"] if "loss" in h]
    return {
        "variant": name, "steps": m["global_step"], "seconds": m["train_runtime_s"],
        "tokens": max(float(h.get("num_tokens", 0)) for h in steps_logged),
        "target_tokens": max(float(h.get("num_target_tokens", 0)) for h in steps_logged),
        "mean_loss": sum(m["losses"]) / len(m["losses"]),
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        # The machine's 1-minute load at the end: above the core count, another job shared the CPU.
        "load_1min": os.getloadavg()[0],
    }


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--data", default=str(ROOT / "runs/learn/data"))
    p.add_argument("--recipes", action="store_true", help="compare the learn and pocket recipes (see above)")
    p.add_argument("--learn-data", default=str(ROOT / "runs/learn/data"))
    p.add_argument("--pocket-data", default=str(ROOT / "runs/pocket/data"))
    p.add_argument("--steps", type=int, default=3, help="optimizer steps per variant (batch-1 variants)")
    p.add_argument("--model", default="embedded:smollm2-135m-instruct")
    p.add_argument("--only", nargs="*", choices=list(VARIANTS), help="run these variants only")
    p.add_argument("--one", choices=[*VARIANTS, *RECIPES], help=argparse.SUPPRESS)  # child process
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()

    if args.one:
        print("RESULT " + json.dumps(run_one(args.one, Path(args.data), args.steps, args.model, Path(args.out))))
        return 0

    from plumbing.recipe_loader import load_config
    from plumbing.runs import stage_complete

    tmp = Path(tempfile.mkdtemp(prefix="dtw-bench-train-"))

    def curriculum(path: str, data_recipe: str) -> Path:
        if stage_complete(Path(path)):
            return Path(path)
        from data_gen.build import build_curriculum
        from data_gen.recipe import DataRecipe

        out = tmp / Path(data_recipe).stem
        t0 = time.time()
        build_curriculum(load_config(ROOT / data_recipe, DataRecipe), out, progress=False)
        print(f"built {data_recipe} in {time.time() - t0:.1f}s -> {out}")
        return out

    if args.recipes:
        names = list(RECIPES)
        datas = {names[0]: curriculum(args.learn_data, RECIPES[names[0]][1]),
                 names[1]: curriculum(args.pocket_data, RECIPES[names[1]][1])}
    else:
        names = args.only or list(VARIANTS)
        data = curriculum(args.data, "configs/data/learn.yaml")
        datas = {n: data for n in names}
    results = []
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    for i, name in enumerate(names):
        data = datas[name]
        # A batch-2 variant covers the baseline's samples in half the steps.
        batch = 2 if "x2" in name else 1
        steps = max(1, args.steps // batch)
        cmd = [sys.executable, __file__, "--one", name, "--data", str(data), "--steps", str(steps),
               "--model", args.model, "--out", str(tmp / f"v{i}")]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
        if proc.returncode or line is None:
            print(f"{name}: failed (exit {proc.returncode})\n{proc.stderr[-3000:]}")
            continue
        r = json.loads(line[len("RESULT "):])
        results.append(r)
        print(f"{name:<40} {r['steps']} steps {r['seconds']:7.1f}s  {r['target_tokens'] / r['seconds']:6.1f} target tok/s  "
              f"{r['tokens'] / r['seconds']:7.1f} tok/s  {60 * r['steps'] / r['seconds']:5.1f} steps/min  peak RSS {r['peak_rss_gb']:5.1f} GB  loss {r['mean_loss']:.4f}  load {r['load_1min']:.1f}",
              flush=True)
    base = next((r for r in results if r["variant"] == ("demo" if not args.recipes else names[0])), None)
    if base:
        base_tps = base["target_tokens"] / base["seconds"]
        for r in results:
            print(f"ratio {r['variant']:<40} {r['target_tokens'] / r['seconds'] / base_tps:5.2f}x target tokens/s, "
                  f"{r['steps'] / r['seconds'] / (base['steps'] / base['seconds']):5.2f}x steps/min")
    print(json.dumps({"data": str(data), "steps": args.steps, "model": args.model, "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
