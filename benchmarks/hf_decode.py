"""Greedy decoding speed of the hf backend's model with each KV cache, one prompt at a time.

    python benchmarks/hf_decode.py [--model SPEC] [--prompt-tokens 4000] [--new-tokens 64]

For each cache (transformers' concatenating ``DynamicCache``, ``plumbing.kv_cache``'s
``growing_cache``) it times a generate of 1 new token (≈ the prefill) and one of
1 + --new-tokens, and prints the prefill seconds, the milliseconds per decoded token (the
difference over --new-tokens) and whether both caches produced the same tokens. The prompt is
random token ids: decode cost depends on lengths, not content. Figures, not assertions.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="embedded:smollm2-135m-instruct")
    ap.add_argument("--prompt-tokens", type=int, default=4000)
    ap.add_argument("--new-tokens", type=int, default=64)
    args = ap.parse_args(argv)

    import torch

    from plumbing.kv_cache import growing_cache
    from plumbing.models import load_model, resolve_model

    model = load_model(resolve_model(args.model), dtype="float32").eval()
    torch.manual_seed(0)
    ids = torch.randint(100, model.config.vocab_size - 100, (1, args.prompt_tokens))

    def timed(n: int, cache_factory):
        kw = {"past_key_values": cache_factory()} if cache_factory else {}
        t0 = time.perf_counter()
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=n,
                                 min_new_tokens=n, do_sample=False, pad_token_id=0, **kw)
        return time.perf_counter() - t0, out

    timed(1, None)  # warm-up
    print(f"threads {torch.get_num_threads()}, prompt {args.prompt_tokens} tokens, "
          f"{args.new_tokens} decoded tokens")
    print(f"{'cache':<10} {'prefill s':>10} {'ms/token':>10}")
    outs = {}
    for name, factory in (("dynamic", None), ("growing", lambda: growing_cache(model.config))):
        pre, _ = timed(1, factory)
        total, outs[name] = timed(1 + args.new_tokens, factory)
        print(f"{name:<10} {pre:>10.2f} {(total - pre) / args.new_tokens * 1000:>10.1f}")
    print("same tokens:", bool(torch.equal(outs["dynamic"], outs["growing"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
