"""Generation throughput of vLLM with the LoRA adapter against the base model (GPU).

    python benchmarks/vllm_lora_throughput.py --model embedded:smollm2-135m-instruct \
        --adapter runs/demo/adapter [--prompts 64] [--max-tokens 128] [--rounds 3]

Starts one offline engine (LoRA enabled, prefix caching on), renders ``--prompts`` decision
prompts of the held-out fixture shape (distilled mode, as the adapter is served), and
generates them greedily ``--rounds`` times with and without the adapter. Prints output
tokens per second for both, their ratio, and the prefix-cache hit rate vLLM reports. Skips
with a message (exit 0) when vLLM or a CUDA device is missing: on CPU the figure says
nothing about serving.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def prompts(n: int):
    from doctrine.spec import resolve_doctrine
    from eval.workloads.fixtures import held_out_rows
    from plumbing.chat_backend import Request

    doc = resolve_doctrine("v1")
    rows = held_out_rows(doc, max(3, n))
    return [Request(r["messages"][:-1], r["tools"], max_tokens=0) for r in rows[:n]]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="embedded:smollm2-135m-instruct")
    p.add_argument("--adapter", required=False, help="exported adapter folder (python -m train export)")
    p.add_argument("--prompts", type=int, default=64)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--max-lora-rank", type=int, default=8)
    args = p.parse_args(argv)
    try:
        import torch
        import vllm  # noqa: F401
    except ImportError as exc:
        print(f"skipped: {exc.name} is not installed (install the 'vllm' extra on a GPU machine)")
        return 0
    if not torch.cuda.is_available():
        print("skipped: no CUDA device; this benchmark measures GPU serving throughput")
        return 0
    if not args.adapter:
        print("error: --adapter is required on a GPU machine", file=sys.stderr)
        return 2
    from eval.backends.vllm import VLLMBackend

    t0 = time.time()
    be = VLLMBackend(args.model, adapter_dir=args.adapter, max_lora_rank=args.max_lora_rank,
                     gpu_memory_utilization=0.8)
    start_s = time.time() - t0
    reqs = prompts(args.prompts)
    figures = {}
    for name, flag in (("base", False), ("adapter", True)):
        for r in reqs:
            r.use_adapter, r.max_tokens = flag, args.max_tokens
        be.complete_batch(reqs[:2])  # warm-up (LoRA load, graphs)
        tokens, seconds = 0, 0.0
        for _ in range(args.rounds):
            t = time.perf_counter()
            outs = be.complete_batch(reqs)
            seconds += time.perf_counter() - t
            tokens += sum(o.completion_tokens for o in outs)
        figures[name] = {"output_tokens": tokens, "seconds": round(seconds, 3),
                         "tokens_per_s": round(tokens / seconds, 1) if seconds else None}
    stats = be.stats()
    hit = stats.get("prefix_cache_hits", 0) / stats["prefix_cache_queries"] if stats.get("prefix_cache_queries") else None
    ratio = (figures["adapter"]["tokens_per_s"] / figures["base"]["tokens_per_s"]
             if figures["base"]["tokens_per_s"] else None)
    print(json.dumps({"engine_start_s": round(start_s, 1), "prompts": len(reqs), "max_tokens": args.max_tokens,
                      **figures, "adapter_over_base": round(ratio, 3) if ratio else None,
                      "prefix_cache_hit_rate": round(hit, 3) if hit is not None else None}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
