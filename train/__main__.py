"""``python -m train``: model resolution tools (and, with the train issue, training).

    python -m train model-info embedded:smollm2-135m-instruct
    python -m train model-info HuggingFaceTB/SmolLM2-135M-Instruct@<rev> --json
    python -m train tiny-model /tmp/tiny
"""

from __future__ import annotations

import argparse
import json
import sys


def _cmd_model_info(args: argparse.Namespace) -> int:
    from .models import ModelSpecError, model_info

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
    from .tiny import TinyModelConfig, build_tiny_model

    out = build_tiny_model(args.out, TinyModelConfig(layers=args.layers, hidden_size=args.hidden,
                                                     seed=args.seed))
    print(out)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m train", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    mi = sub.add_parser("model-info", help="resolve a model spec and print what it is")
    mi.add_argument("spec", help="embedded:NAME, ORG/NAME[@REV] or a local folder")
    mi.add_argument("--json", action="store_true", help="print JSON instead of a table")
    mi.set_defaults(func=_cmd_model_info)
    tm = sub.add_parser("tiny-model", help="build the tiny test model into OUT")
    tm.add_argument("out")
    tm.add_argument("--layers", type=int, default=2)
    tm.add_argument("--hidden", type=int, default=64)
    tm.add_argument("--seed", type=int, default=0)
    tm.set_defaults(func=_cmd_tiny_model)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
