"""``python -m doctrine``: show rendered prompts, print or update hashes, export prompt sets.

    python -m doctrine show --mode distilled --part nudge-gentle
    python -m doctrine show --part system --tokens
    python -m doctrine show --override nudge-gentle=my-header.md
    python -m doctrine show --prompt-set exported/ --acknowledge-risk
    python -m doctrine hash --version v1
    python -m doctrine hash --update          # after editing a section text
    python -m doctrine export-prompt-set --mode distilled out/prompt-set
    python -m doctrine conform ...            # the conformance checker (its own module)
    python -m doctrine conform-bench --lines 2000

The same commands are ``dtw doctrine show``, ``dtw doctrine hash``, ... (``pipeline/dtw.py``).

Nothing heavy is imported at start-up; ``--tokens`` loads the embedded tokenizer on use.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from doctrine.spec import DoctrineError
from plumbing.subcommands import Command

TOKENIZER_SPEC = "embedded:smollm2-135m-instruct"


def _token_counter():
    """Return ``count(text) -> int`` using the embedded SmolLM2 tokenizer (loaded lazily)."""
    from plumbing.models import load_tokenizer

    tok = load_tokenizer(TOKENIZER_SPEC)
    return lambda text: len(tok.encode(text, add_special_tokens=False))


def _parse_overrides(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, sep, fname = item.partition("=")
        if not sep or not name.strip() or not fname.strip():
            raise DoctrineError(f"--override {item!r}: expected SECTION=FILE")
        try:
            out[name.strip()] = Path(fname.strip()).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise DoctrineError(f"--override {name.strip()}: file {fname.strip()} not found") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise DoctrineError(f"--override {name.strip()}: cannot read {fname.strip()} ({exc})") from None
    return out


def _resolve(args: argparse.Namespace):
    from doctrine.spec import resolve_doctrine

    return resolve_doctrine(
        args.version,
        overrides=_parse_overrides(getattr(args, "override", None) or []),
        prompt_set=getattr(args, "prompt_set", None),
        acknowledge_risk=getattr(args, "acknowledge_risk", False),
        root=args.root,
    )


def _read_base_prompt(fname: str) -> str:
    try:
        return Path(fname).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DoctrineError(f"--base-prompt: file {fname} not found") from None
    except UnicodeDecodeError as exc:
        raise DoctrineError(f"--base-prompt: {fname} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise DoctrineError(f"--base-prompt: cannot read {fname} ({exc.strerror or exc})") from None


def cmd_show(args: argparse.Namespace) -> int:
    from doctrine.render.prompts import render_part

    doc = _resolve(args)
    base = _read_base_prompt(args.base_prompt) if args.base_prompt else ""
    text = render_part(doc, args.mode, args.part, base_prompt=base, nudge_style=args.nudge_style, host=args.host)
    sys.stdout.write(text + ("\n" if text else ""))
    if args.tokens:
        try:
            count = _token_counter()
        except ImportError as exc:
            raise DoctrineError(f"--tokens needs plumbing.models and transformers ({exc})") from None
        print(f"# {args.mode} {args.part}: chars={len(text)} tokens={count(text)} ({TOKENIZER_SPEC})")
    return 0


def cmd_hash(args: argparse.Namespace) -> int:
    from doctrine.spec import list_versions, load_doctrine, update_manifest_hash

    versions = list_versions(args.root) if args.all else [args.version]
    for version in versions:
        if args.update:
            update_manifest_hash(version, root=args.root)
        print(f"{version} {load_doctrine(version, root=args.root).sha256}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from doctrine.acp_prompt_set import export_prompt_set

    doc = _resolve(args)
    print(export_prompt_set(doc, args.mode, args.out_dir))
    return 0


def _add_common(p: argparse.ArgumentParser, overrides: bool = True) -> None:
    p.add_argument("--version", default="v1", help="doctrine version folder (default: v1)")
    p.add_argument("--root", default=None, help="folder holding the version folders (default: the packaged ones)")
    if overrides:
        p.add_argument("--override", action="append", default=[], metavar="SECTION=FILE",
                       help="replace a section's text with a file's (repeatable)")
        p.add_argument("--prompt-set", default=None, metavar="DIR", help="apply an acp-kernel prompt set as a layer")
        p.add_argument("--acknowledge-risk", action="store_true",
                       help="allow overriding load-bearing sections (the compression rules)")


def add_show(p: argparse.ArgumentParser) -> None:
    _add_common(p)
    p.add_argument("--mode", choices=["doctrine", "distilled"], default="doctrine")
    p.add_argument("--part", default="system",
                   choices=["system", "nudge-gentle", "nudge-emergency", "nudge-tier2", "nudge-tier3", "tools"])
    p.add_argument("--nudge-style", choices=["list", "none"], default="list",
                   help="'none' suppresses nudges (prints nothing for nudge parts)")
    p.add_argument("--host", choices=["proxy", "pi"], default="proxy", help="tool-argument shapes for --part tools")
    p.add_argument("--base-prompt", default=None, metavar="FILE", help="host system prompt to prepend")
    p.add_argument("--tokens", action="store_true", help="also print chars and tokens (embedded tokenizer)")
    p.set_defaults(func=_guarded(cmd_show))


def add_hash(p: argparse.ArgumentParser) -> None:
    _add_common(p, overrides=False)
    p.add_argument("--all", action="store_true", help="every version under --root")
    p.add_argument("--update", action="store_true", help="rewrite the manifest's texts_sha256 after editing texts")
    p.set_defaults(func=_guarded(cmd_hash))


def add_export_prompt_set(p: argparse.ArgumentParser) -> None:
    _add_common(p)
    p.add_argument("--mode", choices=["doctrine", "distilled"], default="distilled")
    p.add_argument("out_dir")
    p.set_defaults(func=_guarded(cmd_export))


def _guarded(cmd):
    """``cmd`` with a doctrine error (or an unreadable file) as one line on stderr and exit 1."""
    def run(args: argparse.Namespace) -> int:
        try:
            return int(cmd(args) or 0)
        except (DoctrineError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    return run


COMMANDS: dict[str, Command] = {
    "show": Command("doctrine.cli:add_show", "print a rendered prompt part"),
    "hash": Command("doctrine.cli:add_hash", "print '<version> <sha256>'"),
    "export-prompt-set": Command("doctrine.cli:add_export_prompt_set",
                                 "write a mode's texts as an acp-kernel prompt set"),
    "conform": Command("doctrine.conform.cli:register", "score a summary against the source range it replaces"),
    "conform-bench": Command("doctrine.conform.bench:register", "speed figures for the conformance checker"),
}


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (1 for a doctrine error, with the message on stderr)."""
    from plumbing.subcommands import run

    return run("python -m doctrine", "Versioned compression doctrine tools.", COMMANDS, argv)
