"""``make gpu-check``: the first thing to run on a GPU machine; on one without, a line and exit 0.

    python benchmarks/gpu_check.py [--out runs/gpu-check] [--steps 5] [--data DIR]
        [--accelerate configs/accelerate/single_gpu.yaml] [--gpu-flops 989]

With a CUDA device it runs, each through the project's own entry points:

1. the real curriculum (``python -m data_gen build configs/data/reference.yaml``; ``--data DIR``
   reuses one already built);
2. ``--steps`` optimizer steps of ``configs/train/gpu_8b.yaml`` under ``accelerate launch``
   (GPU memory sampled with nvidia-smi while it runs), then ``python -m train export``;
3. the vLLM eval of the adapter on the held-out decisions (``python -m eval run
   configs/eval/reference.yaml`` with the held_out workload, the distilled and doctrine arms,
   then ``python -m eval report``);
4. ``benchmarks/vllm_lora_throughput.py`` on the adapter: generation tokens/s with and without
   it and vLLM's prefix-cache hit rate;

and writes ``OUT/gpu_check.json``: MFU (model FLOPs a token from ``train plan`` times the
measured tokens/s over the GPUs' peak), target tokens/s, peak GPU memory, the adapter's
throughput over the base's, the prefix-cache hit rate, next to what ``train plan`` predicted.
Stages that fail are recorded with their return code; the check goes on where it can.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RECIPE = "configs/train/gpu_8b.yaml"
EVAL_RECIPE = "configs/eval/reference.yaml"


def has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available() and torch.cuda.device_count() > 0


class GpuMemory(threading.Thread):
    """Peak ``memory.used`` of the fullest GPU (nvidia-smi, sampled every ``every_s``)."""

    def __init__(self, every_s: float = 1.0):
        super().__init__(daemon=True)
        self.every_s, self.peak_mib, self._done = every_s, 0, threading.Event()

    def run(self):
        while not self._done.is_set():
            try:
                out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                                     capture_output=True, text=True, timeout=10).stdout
                self.peak_mib = max([self.peak_mib, *(int(x) for x in out.split() if x.strip().isdigit())])
            except (OSError, subprocess.SubprocessError):
                pass
            self._done.wait(self.every_s)

    def stop(self) -> float:
        self._done.set()
        self.join(timeout=15)
        return round(self.peak_mib / 1024, 2)


def step(name: str, cmd: list[str], log_dir: Path, stages: dict) -> bool:
    print(f"[gpu-check] {name}: {' '.join(cmd)}", flush=True)
    t0 = time.time()
    with (log_dir / f"{name}.log").open("w") as log:
        rc = subprocess.run(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT).returncode
    stages[name] = {"rc": rc, "seconds": round(time.time() - t0, 1), "log": str(log_dir / f"{name}.log")}
    if rc:
        print(f"[gpu-check] {name} failed (rc {rc}); see {log_dir / f'{name}.log'}", flush=True)
    return rc == 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="runs/gpu-check")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--data", help="an already built curriculum (skips data_gen build)")
    p.add_argument("--data-recipe", default="configs/data/reference.yaml")
    p.add_argument("--accelerate", default="configs/accelerate/single_gpu.yaml")
    p.add_argument("--gpu-flops", type=float, default=989.0, help="dense bf16 TFLOPS per GPU (H100 SXM: 989)")
    args = p.parse_args(argv)
    if not has_cuda():
        print("gpu-check: no CUDA GPU on this machine; nothing was run")
        return 0

    import torch

    from plumbing.recipe_loader import load_config
    from plumbing.runs import atomic_write_json
    from train.plan import plan
    from train.recipe import TrainRecipe

    out = (ROOT / args.out).resolve()
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    accelerate = str(Path(py).parent / "accelerate")
    gpus = torch.cuda.device_count() if "single" not in Path(args.accelerate).name else 1
    gpu_gb = torch.cuda.get_device_properties(0).total_memory / 1e9
    stages: dict = {}
    result: dict = {"device": torch.cuda.get_device_name(0), "gpus": gpus, "gpu_memory_gb": round(gpu_gb, 1),
                    "recipe": RECIPE, "accelerate_config": args.accelerate, "steps": args.steps, "stages": stages}

    data = Path(args.data).resolve() if args.data else out / "data"
    if not args.data:
        step("data", [py, "-m", "data_gen", "build", args.data_recipe, "--out", str(data)], logs, stages)

    overrides = [f"data.dir={data}", f"trainer.max_steps={args.steps}", "trainer.save_steps=100000",
                 "trainer.eval_steps=null", "trainer.logging_steps=1", "trainer.report_to=[none]"]
    recipe = load_config(ROOT / RECIPE, TrainRecipe, overrides)
    planned = plan(recipe, gpus=gpus, gpu_memory_gb=gpu_gb, gpu_tflops=args.gpu_flops,
                   sharded=any(k in args.accelerate for k in ("fsdp", "zero3")))
    result["plan"] = planned

    monitor = GpuMemory()
    monitor.start()
    trained = step("train", [accelerate, "launch", "--config_file", args.accelerate, "-m", "train", RECIPE,
                             "--out", str(out), *overrides], logs, stages)
    result["peak_gpu_memory_gb"] = monitor.stop()
    if trained:
        metrics = json.loads((out / "train" / "metrics.json").read_text())
        last = [h for h in metrics["log_history"] if "num_tokens" in h]
        runtime = metrics.get("train_runtime_s") or stages["train"]["seconds"]
        tokens = last[-1]["num_tokens"] if last else None
        target = last[-1].get("num_target_tokens") if last else None
        tok_s = tokens / runtime if tokens else None
        result.update({
            "train_runtime_s": runtime, "tokens": tokens, "target_tokens": target,
            "tokens_per_s": round(tok_s, 1) if tok_s else None,
            "target_tokens_per_s": round(target / runtime, 1) if target else None,
            "mfu": round(tok_s * planned["model_flops_per_token"] / (gpus * args.gpu_flops * 1e12), 4)
            if tok_s else None,
        })
        step("export", [py, "-m", "train", "export", str(out)], logs, stages)

    adapter = out / "adapter"
    if (adapter / "manifest.json").is_file():
        if step("eval", [py, "-m", "eval", "run", EVAL_RECIPE, "--out", str(out / "eval"), f"data_dir={data}",
                         f"backend.adapter_dir={adapter}", "arms=[distilled, doctrine]",
                         "workloads=[{name: held_out, settings: {split: heldout}}]"], logs, stages):
            step("report", [py, "-m", "eval", "report", str(out / "eval"), "--out", str(out / "report"),
                            "--quiet"], logs, stages)
            result["eval_report"] = str(out / "report")
        rank = json.loads((adapter / "manifest.json").read_text())["adapter"]["max_lora_rank"]
        if step("vllm_lora", [py, "benchmarks/vllm_lora_throughput.py", "--model", recipe.model.spec,
                              "--adapter", str(adapter), "--max-lora-rank", str(rank)], logs, stages):
            text = (logs / "vllm_lora.log").read_text()
            try:
                bench = json.loads(text[text.index("{"):text.rindex("}") + 1])
                result.update({"vllm": bench, "vllm_adapter_over_base": bench.get("adapter_over_base"),
                               "prefix_cache_hit_rate": bench.get("prefix_cache_hit_rate")})
            except ValueError:
                result["vllm"] = "no JSON in the benchmark's output"
    atomic_write_json(out / "gpu_check.json", result)
    failed = [k for k, v in stages.items() if v["rc"]]
    print(f"[gpu-check] {out / 'gpu_check.json'}" + (f" (failed: {', '.join(failed)})" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
