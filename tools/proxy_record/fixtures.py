"""Turn raw proxy recordings into structural fixtures (facts, not the proxy authors' prose).

    python -m tools.proxy_record.fixtures RAW_DIR FIXTURE_DIR [--proxy CHECKOUT --kernel CHECKOUT]

RAW_DIR holds one folder per recording (run.sh writes them: upstream.jsonl from the mock,
client.jsonl from the driver, proxy.log, cfg.json). Each becomes FIXTURE_DIR/NAME.jsonl.gz:
a header line, then per client turn one ``turn`` record (the proxy's own nudge decision from
its log, the client-side reply) followed by its ``upstream`` records (one per round).

What is kept: roles and order, ref tags (ref, type, token figure), tool names and the shape
of their parameter schemas, where the nudge sits, its kind, the ranges and blocks it offers
and the form of its example, which compress calls and results are in view, whether tool
results carry ``name``, the usage figures. What is not: any long fixed text of the proxy or
the kernel (system prompt sections, tool descriptions, nudge sentences). Those are stored
as sha256 + length, with a short label (a section heading's first words, or a paragraph's
role), so a change of wording shows up as a changed hash without the wording being here.
The session's own texts (session.py, ours) are hashed too, to keep the fixtures small.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

from plumbing.runs import atomic_write

TAG = re.compile(r'^<acp tokens="([^"]+)" type="([^"]+)">(m\d{5})</acp>\n?')
RANGE_LINE = re.compile(r"^\s+(m\d{5})[–-](m\d{5})\s+(\d+) msgs\s+(\S+)\s+\[(.*)\]", re.M)
BLOCK_LINE = re.compile(r"^\s+(b\d+)\s+(\d+) msgs", re.M)
HEADING = re.compile(r"^([A-Z][A-Za-z ]{2,40}?)(?::|\s+—.*)?$")
NUDGE_LOG = re.compile(r"nudge (INJECT T(\d)|idle): usage=(-?\d+)% \((\d+)/(\d+)\), growth=(-?\d+)/(\d+).*?"
                       r'reason="([A-Za-z-]+)')
SEP = "\n\n---\n\n"


def h(text: str) -> dict:
    return {"len": len(text), "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}


def text_of(msg: dict) -> str:
    c = msg.get("content")
    if isinstance(c, list):
        return "".join(p.get("text", "") for p in c if isinstance(p, dict))
    return c if isinstance(c, str) else ""


def heading_label(line: str) -> str | None:
    """A section heading's label: its first words, at most three (never a sentence)."""
    s = line.strip()
    if not s or len(s) > 60 or s.startswith("-"):
        return None
    m = HEADING.match(s)
    if not m or not (s.isupper() or s.endswith(":") or "—" in s):
        return None
    words = m.group(1).split()
    return " ".join(words[:3])


def sections(block: str) -> list[dict]:
    """Split a fixed prompt block at its headings: label + hash + length of each section."""
    out, cur_label, cur = [], None, []
    for line in block.split("\n"):
        lab = heading_label(line)
        if lab is not None and (lab.isupper() or lab.split()[0][0].isupper()) and cur:
            out.append({"label": cur_label, **h("\n".join(cur))})
            cur = []
        if lab is not None and not cur:
            cur_label = lab
        cur.append(line)
    if cur:
        out.append({"label": cur_label, **h("\n".join(cur))})
    return out


def schema_shape(schema):
    """A JSON schema with every description replaced by its length and hash prefix."""
    if isinstance(schema, dict):
        return {k: (f"<desc len={len(v)} sha={hashlib.sha256(v.encode()).hexdigest()[:12]}>"
                    if k == "description" and isinstance(v, str) else schema_shape(v))
                for k, v in schema.items()}
    if isinstance(schema, list):
        return [schema_shape(x) for x in schema]
    return schema


def nudge_kind(text: str) -> str:
    """gentle | emergency | tierN | tierN-emergency, from the nudge's trigger wording."""
    m = re.search(r"\[(EMERGENCY — )?TIER (\d) ", text)
    if m:
        return f"tier{m.group(2)}" + ("-emergency" if m.group(1) else "")
    first = text.split("\n", 1)[0]
    if "Context limit reached" in first:
        return "emergency"
    if "efficiency nudge" in first:
        return "gentle"
    return "other"


def nudge_structure(text: str, fixed: dict[str, str]) -> dict:
    """Paragraph roles of a nudge; fixed paragraphs by hash (named when they equal a known
    prompt section), dynamic ones (breakdown, ranges, targets, example) by their facts."""
    paras = []
    for p in text.split("\n\n"):
        sha = hashlib.sha256(p.encode()).hexdigest()
        if p.startswith("Context breakdown:"):
            paras.append({"role": "breakdown", "parts": re.findall(r"\d[\d.]*K? (\w+)", p.split("\n")[0]),
                          "growth_line": "\n+" in p})
        elif p.startswith("Compressible ranges ("):
            paras.append({"role": "ranges"})
        elif p.startswith("Target "):
            paras.append({"role": "targets"})
        elif '"startId": "<ID>"' in p or p.startswith("Example:") or "Example: compress(" in p:
            paras.append({"role": "example", "placeholder_ids": "<ID>" in p, **h(p)})
        else:
            paras.append({"role": fixed.get(sha, "fixed"), **h(p)})
    ranges = [{"start": a, "end": b, "count": int(n), "tokens": t, "protected": "PROTECTED" in rest}
              for a, b, n, t, rest in RANGE_LINE.findall(text)]
    ex = re.search(r'startId: "(b\d+|m\d{5})", endId: "(b\d+|m\d{5})"', text)
    return {"kind": nudge_kind(text), **h(text), "paragraphs": paras, "ranges": ranges,
            "target_blocks": [{"block": b, "count": int(n)} for b, n in BLOCK_LINE.findall(text)],
            "example": ({"form": "placeholder"} if '"startId": "<ID>"' in text else
                        {"form": "concrete", "start": ex.group(1), "end": ex.group(2)} if ex else None)}


def message_structure(i: int, msg: dict, fixed: dict[str, str], nudge_at: int | None) -> dict:
    text = text_of(msg)
    out: dict = {"i": i, "role": msg.get("role")}
    m = TAG.match(text)
    if m:
        out["ref"], out["tag_type"], out["tag_tokens"] = m.group(3), m.group(2), m.group(1)
        text = text[m.end():]
    if i == nudge_at:
        out["nudge"] = nudge_structure(text, fixed)
        return out
    if msg.get("role") == "system" and SEP in text:
        head, tail = text.split(SEP, 1)
        out["client_system"] = h(head)
        out["appended"] = {"separator": "\\n\\n---\\n\\n", **h(tail), "sections": sections(tail)}
    elif msg.get("content") is None:
        out["content"] = None
    else:
        out["content"] = h(text)
        if msg.get("role") == "tool":
            first = text.split("\n", 1)[0]
            out["result_kind"] = ("compressed" if first.startswith("[Compressed") else
                                  "failed" if "FAILED" in first else "other")
    if msg.get("role") == "tool":
        out["has_name"] = "name" in msg
        out["name"] = msg.get("name")
        out["tool_call_id"] = bool(msg.get("tool_call_id"))
    calls = msg.get("tool_calls") or []
    if calls:
        out["tool_calls"] = []
        for c in calls:
            fn = c.get("function") or {}
            rec = {"name": fn.get("name")}
            if fn.get("name") == "compress":
                try:
                    a = json.loads(fn.get("arguments") or "")
                    rec["ranges"] = [[r.get("startId"), r.get("endId")] for r in a.get("content", [])]
                except (ValueError, AttributeError):
                    rec["arguments"] = "invalid-json"
            out["tool_calls"].append(rec)
    return out


def is_nudge(msgs: list[dict]) -> bool:
    return (len(msgs) >= 2 and msgs[-1].get("role") == "user"
            and not text_of(msgs[-1]).lstrip().startswith("<acp "))


def fixed_texts(upstream: list[dict]) -> dict[str, str]:
    """Known fixed sections (sha -> label) from the first request's appended system block."""
    first = text_of(upstream[0]["request"]["messages"][0])
    if SEP not in first:
        return {}
    tail = first.split(SEP, 1)[1]
    known = {}
    for part in tail.split("\n\n"):
        lab = heading_label(part.split("\n", 1)[0]) or "system-paragraph"
        known[hashlib.sha256(part.encode()).hexdigest()] = f"system:{lab}"
    return known


def build(raw: Path, name: str, provenance: dict) -> list[dict]:
    upstream = [json.loads(x) for x in (raw / "upstream.jsonl").read_text().splitlines()]
    client = [json.loads(x) for x in (raw / "client.jsonl").read_text().splitlines()]
    decisions = [m.groups() for m in NUDGE_LOG.finditer((raw / "proxy.log").read_text())]
    cfg = json.loads((raw / "cfg.json").read_text())
    cfg.pop("port", None)
    cfg["providers"] = {"<mock>": next(iter(cfg["providers"].values()))}
    fixed = fixed_texts(upstream)
    out = [{"type": "header", "recording": name, "config": cfg, **provenance,
            "turns": len(client), "upstream_requests": len(upstream),
            "mock_prompt_tokens": "ceil(chars/4) of JSON(messages)+JSON(tools)"}]
    by_turn: dict[int, list[dict]] = {}
    for u in upstream:
        by_turn.setdefault(u["turn"], []).append(u)
    prev_prompt = 0
    for c in client:
        t = c["turn"]
        d = decisions[t - 1] if t - 1 < len(decisions) else None
        reply = c["reply"]
        out.append({"type": "turn", "turn": t,
                    "prev_upstream_prompt_tokens": prev_prompt,
                    "proxy_decision": None if d is None else {
                        "inject": d[0] != "idle", "tier": int(d[1]) if d[1] else None,
                        "usage_pct": int(d[2]), "token_count": int(d[3]), "limit": int(d[4]),
                        "growth": int(d[5]), "growth_floor": int(d[6]), "reason": d[7]},
                    "client_reply": {"finish_reason": reply["finish_reason"],
                                     "tool_calls": [x["name"] for x in reply["tool_calls"]],
                                     "marker_lines": re.findall(r"\[ACP\] (\w+)", reply["text"]),
                                     "prompt_tokens": (reply.get("usage") or {}).get("prompt_tokens")}})
        for u in by_turn.get(t, []):
            msgs = u["request"]["messages"]
            nudge_at = len(msgs) - 1 if is_nudge(msgs) else None
            out.append({"type": "upstream", "turn": t, "round": u["round"],
                        "keys": sorted(u["request"]),
                        "stream_options": u["request"].get("stream_options"),
                        "tools": [{"name": x["function"]["name"], **{"description": h(x["function"].get("description", ""))},
                                   "parameters": schema_shape(x["function"].get("parameters"))}
                                  for x in u["request"].get("tools", [])],
                        "messages": [message_structure(i, m, fixed, nudge_at) for i, m in enumerate(msgs)],
                        "reply": {"text": bool(u["reply"]["text"]),
                                  "call": (u["reply"]["call"] or {}).get("name")},
                        "prompt_tokens": u["usage"]["prompt_tokens"]})
            prev_prompt = u["usage"]["prompt_tokens"]
    return out


STATUS = "[proxy status line]"


def client_requests(raw: Path) -> list[dict]:
    """What the client sent per turn: our session texts; the proxy's status line that the
    client kept in an assistant message becomes a placeholder of the same length."""
    out = []
    for line in (raw / "client.jsonl").read_text().splitlines():
        c = json.loads(line)
        msgs = []
        for m in c["request"]["messages"]:
            m = dict(m)
            if m["role"] == "assistant" and "[ACP]" in (m.get("content") or ""):
                n = len(m["content"])
                m["content"] = (STATUS + "." * n)[:n]
                m["status_placeholder"] = True
            msgs.append(m)
        out.append({"turn": c["turn"], "messages": msgs, "tools": [t["function"]["name"] for t in c["request"]["tools"]],
                    "max_tokens": c["request"]["max_tokens"]})
    return out


def provenance(proxy: str | None, kernel: str | None) -> dict:
    def ver(path: str | None) -> str | None:
        if not path:
            return None
        return json.loads((Path(path) / "package.json").read_text()).get("version")

    def rev(path: str | None) -> str | None:
        if not path:
            return None
        try:
            return subprocess.run(["git", "-C", path, "rev-parse", "HEAD"], capture_output=True,
                                  text=True, check=True).stdout.strip() or None
        except (OSError, subprocess.CalledProcessError):
            return None

    return {"proxy": {"name": "billion-context", "version": ver(proxy), "commit": rev(proxy) or "04f15b0"},
            "kernel": {"name": "acp-kernel", "version": ver(kernel), "tag": f"v{ver(kernel)}" if kernel else None}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Structural fixtures from raw proxy recordings.")
    ap.add_argument("raw")
    ap.add_argument("out")
    ap.add_argument("--proxy")
    ap.add_argument("--kernel")
    a = ap.parse_args(argv)
    raw, out = Path(a.raw), Path(a.out)
    if not raw.is_dir():
        print(f"error: {raw} is not a directory of recordings", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    prov = provenance(a.proxy, a.kernel)
    for d in sorted(p for p in raw.iterdir() if (p / "upstream.jsonl").exists()):
        recs = build(d, d.name, prov)
        data = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in recs)
        atomic_write(out / f"{d.name}.jsonl.gz", gzip.compress(data.encode(), mtime=0))
        data = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in client_requests(d))
        atomic_write(out / f"{d.name}.client.jsonl.gz", gzip.compress(data.encode(), mtime=0))
        print(f"{d.name}: {recs[0]['turns']} turns, {recs[0]['upstream_requests']} upstream requests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
