"""Training tokens per second for the demo recipe, with and without packing / padding-free.

    python benchmarks/train_throughput.py [--data runs/demo/data] [--steps 8] [--max-length 4096] [--model SPEC]

Uses the demo curriculum (built into a temp folder with configs/data/demo.yaml when
--data is absent or incomplete) and configs/train/demo.yaml, runs a few optimizer steps per
variant and prints tokens/s (all tokens the model processed, from TRL's num_tokens) and the
ratio to the unpacked run. Figures, not assertions.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--data", default=str(ROOT / "runs/demo/data"))
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--model", default="embedded:smollm2-135m-instruct")
    # Packed rows are always max_length long; on the CPU, attention at 6K tokens per row
    # needs ~16 GB (seen: OOM-killed beside another job on a 24 GB machine), so the
    # benchmark compares the variants at 4K.
    p.add_argument("--max-length", type=int, default=4096)
    args = p.parse_args()

    from doctrine.config import load_config
    from doctrine.runs import stage_complete
    from train.recipe import TrainRecipe
    from train.sft import run_training

    tmp = Path(tempfile.mkdtemp(prefix="dtw-bench-train-"))
    data = Path(args.data)
    if not stage_complete(data):
        from data_gen.build import build_curriculum
        from data_gen.recipe import DataRecipe

        data = tmp / "data"
        t0 = time.time()
        build_curriculum(load_config(ROOT / "configs/data/demo.yaml", DataRecipe), data, progress=False)
        print(f"built the demo curriculum in {time.time() - t0:.1f}s -> {data}")
    variants = [("unpacked", []), ("packing (bfd)", ["data.packing=true"]),
                ("padding-free", ["data.padding_free=true"])]
    results = {}
    for name, extra in variants:
        recipe = load_config(ROOT / "configs/train/demo.yaml", TrainRecipe, [
            f"data.dir={data}", f"model.spec={args.model}", f"trainer.max_steps={args.steps}",
            f"data.max_length={args.max_length}",
            "trainer.save_steps=100000", "trainer.eval_steps=null", "trainer.logging_steps=1", *extra])
        stage = run_training(recipe, tmp / name.split()[0], log=lambda *a: None)
        m = json.loads((stage / "metrics.json").read_text())
        tokens = max(float(h.get("num_tokens", 0)) for h in m["log_history"])
        secs = m["train_runtime_s"]
        results[name] = tokens / secs
        print(f"{name:<14} {int(float(tokens)):>8} tokens in {secs:7.1f}s  {results[name]:8.1f} tokens/s")
    base = results["unpacked"]
    for name, tps in results.items():
        print(f"ratio {name:<14} {tps / base:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
