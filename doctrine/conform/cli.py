"""``python -m doctrine conform``: score a summary file against a JSONL source range.

    python -m doctrine conform --source range.jsonl --summary summary.md [--tier 2] [--table]

The source holds one message per line (OpenAI chat format, or flat kernel messages). The
report is printed as JSON (``score``, ``passed``, ``classes``, ``drop_violations``,
``limits``, ``compression_ratio``, ``reasons``), or as a table with ``--table``. The exit
status is 0 whether the summary passes or not; 2 means the input could not be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["read_jsonl", "register", "run"]


class InputError(ValueError):
    """Unreadable input; the message names the file (and line)."""


def register(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The ``conform`` command's arguments (``func=run``)."""
    p.description = __doc__
    p.add_argument("--source", required=True, metavar="SRC.jsonl", help="source messages, one JSON object per line")
    p.add_argument("--summary", required=True, metavar="SUMMARY.md", help="the summary text")
    p.add_argument("--tier", type=int, choices=[1, 2, 3], default=1, help="block tier (default 1)")
    p.add_argument("--table", action="store_true", help="print a readable table instead of JSON")
    p.add_argument("--version", default="v1", help="doctrine version (default: v1)")
    p.add_argument("--root", default=None, help="folder holding the doctrine versions")
    p.set_defaults(func=run)
    return p


def read_jsonl(path: str | Path, line_numbers: list[int] | None = None) -> list[dict]:
    """Messages of a JSONL file; :class:`InputError` names the file and line of a bad one.

    If ``line_numbers`` is given, the file line of each message is appended to it.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read ({exc})") from None
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}:{n}: malformed JSON ({exc.msg}, column {exc.colno})") from None
        except RecursionError:
            raise InputError(f"{path}:{n}: malformed JSON (nested too deeply)") from None
        except ValueError as exc:  # e.g. a number past int()'s 4,300-digit limit
            why = "a number with too many digits" if "digits" in str(exc) else str(exc).splitlines()[0][:200]
            raise InputError(f"{path}:{n}: malformed JSON ({why})") from None
        if not isinstance(obj, dict):
            raise InputError(f"{path}:{n}: expected a JSON object (one message per line)")
        out.append(obj)
        if line_numbers is not None:
            line_numbers.append(n)
    if not out:
        raise InputError(f"{path}: no messages")
    return out


def _table(report: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    verdict = "[green]PASS[/green]" if report.passed else "[red]FAIL[/red]"
    console.print(f"score {report.score:.3f}  {verdict}  tier {report.tier}  doctrine {report.doctrine_version}  "
                  f"ratio {report.compression_ratio}  tokens {report.summary_tokens}/{report.source_tokens}")
    t = Table(title="KEEP classes")
    for col in ("class", "found", "kept", "recall", "min", "missed (first)"):
        t.add_column(col, overflow="fold")
    for name, r in report.classes.items():
        low = r.found and r.recall < r.min_recall
        recall = f"[red]{r.recall:.2f}[/red]" if low else f"{r.recall:.2f}"
        t.add_row(name, str(r.found), str(r.kept), recall if r.found else "-", f"{r.min_recall:.2f}",
                  r.missed[0][:80] if r.missed else "")
    console.print(t)
    if report.drop_violations:
        d = Table(title=f"DROP violations ({report.drop_share:.0%} of summary)")
        for col in ("kind", "chars", "excerpt"):
            d.add_column(col, overflow="fold")
        for v in report.drop_violations:
            d.add_row(v.kind, str(v.chars), v.excerpt)
        console.print(d)
    u = report.usability
    console.print(f"usability: {u.lines} lines, {u.share:.0%} unusable; fragments {len(u.fragments)}, duplicates "
                  f"{len(u.duplicates)}, invented numbers {u.invented_numbers or 'none'}, altered values "
                  f"{u.altered_values or 'none'}, stale values {u.stale_values or 'none'}")
    lim = report.limits
    console.print(f"limits: {lim.get('chars')} chars, {lim.get('tokens')} tokens; violations: "
                  f"{', '.join(lim.get('violations', [])) or 'none'}")
    for r in report.reasons:
        console.print(f"- {r}")


def run(args: argparse.Namespace) -> int:
    """Run the check; 0 on pass or fail, 2 for unreadable input (message on stderr)."""
    from doctrine.spec import DoctrineError, load_doctrine

    from . import check_summary
    from .messages import MessageFormatError
    from .settings import ConformanceConfigError

    try:
        lines: list[int] = []
        messages = read_jsonl(args.source, lines)
        try:
            summary = Path(args.summary).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"{args.summary}: cannot read ({exc})") from None
        doctrine = load_doctrine(getattr(args, "version", "v1"), root=getattr(args, "root", None))
        try:
            report = check_summary(messages, summary, tier=args.tier, doctrine=doctrine)
        except MessageFormatError as exc:
            where = f":{lines[exc.index]}" if exc.index is not None and exc.index < len(lines) else ""
            raise InputError(f"{args.source}{where}: {exc}") from None
    except (InputError, DoctrineError, ConformanceConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if getattr(args, "table", False):
        _table(report)
    else:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    return 0
