"""Per-turn table of one structural fixture (markdown), for FINDINGS.md and by hand.

    python -m tools.proxy_record.summarize tests/doctrine/kernel/fixtures/proxy_record/tuned-8k.jsonl.gz
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path


def load(path: str | Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def offered(nudge: dict) -> str:
    if nudge["target_blocks"]:
        return ", ".join(b["block"] for b in nudge["target_blocks"])
    return ", ".join(f"{r['start']}-{r['end']}" + (" (protected)" if r["protected"] else "")
                     for r in nudge["ranges"]) or "-"


def table(recs: list[dict]) -> str:
    rows = ["| turn | context (proxy's count) | prev. upstream prompt_tokens | limit | decision | nudge kind "
            "| refs offered | rounds | compress results | client finish |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    turns = [r for r in recs if r["type"] == "turn"]
    ups = [r for r in recs if r["type"] == "upstream"]
    for t in turns:
        mine = [u for u in ups if u["turn"] == t["turn"]]
        d = t["proxy_decision"] or {}
        nudge = next((m["nudge"] for m in mine[0]["messages"] if "nudge" in m), None) if mine else None
        results = [m.get("result_kind") for u in mine[1:] for m in u["messages"][-1:] if m["role"] == "tool"]
        decision = (f"inject T{d['tier']} ({d['reason']})" if d.get("inject") else f"idle ({d.get('reason')})")
        rows.append(f"| {t['turn']} | {d.get('token_count')} | {t['prev_upstream_prompt_tokens']} | {d.get('limit')} "
                    f"| {decision} | {nudge['kind'] if nudge else '-'} | {offered(nudge) if nudge else '-'} "
                    f"| {len(mine)} | {', '.join(results) or '-'} | {t['client_reply']['finish_reason']} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or not Path(argv[0]).is_file():
        print("usage: python -m tools.proxy_record.summarize FIXTURE.jsonl.gz", file=sys.stderr)
        return 2
    print(table(load(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
