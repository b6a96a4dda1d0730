"""Play the scripted session through the billion-context proxy as an OpenAI-style client.

Run by hand from run.sh (the proxy and the mock upstream must be listening). Per client
turn it tells the mock what the model "answers" (a compress call first when the proxy
nudged, then the scripted step), sends the whole history to the proxy with stream=true,
reads the SSE reply the way a client does, and appends what the client would keep: the
assistant message (text and tool calls) and the tool result (with ``name``, so we can see
whether the proxy passes it on). Every client request and reply goes to ``--client-log``.

Scenarios: ``session`` (the 24-step session; compress on nudge), ``fold-early`` (the same,
plus an unprompted compress at steps 6 and 12), ``ignore`` (the model never compresses),
``retry-loop`` (one request whose model
answer is a compress call with invalid JSON every time: the proxy's retry loop).
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.request

from tools.proxy_record import session as S

TIMEOUT_S = 60


def post(url: str, body: dict, headers: dict | None = None) -> bytes:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"content-type": "application/json", **(headers or {})})
    with urllib.request.urlopen(req, timeout=TIMEOUT_S) as r:  # noqa: S310 - loopback only
        return r.read()


def read_sse(raw: bytes) -> dict:
    """Fold an OpenAI chat-completions SSE stream into text, tool calls, finish reason, usage."""
    text, calls, finish, usage = "", {}, None, None
    for block in raw.decode("utf-8").split("\n\n"):
        line = next((x for x in block.split("\n") if x.startswith("data:")), None)
        if line is None:
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            continue
        ev = json.loads(data)
        usage = ev.get("usage") or usage
        for ch in ev.get("choices") or []:
            d = ch.get("delta") or {}
            text += d.get("content") or ""
            for tc in d.get("tool_calls") or []:
                c = calls.setdefault(tc.get("index", 0), {"id": "", "name": "", "arguments": ""})
                c["id"] = tc.get("id") or c["id"]
                fn = tc.get("function") or {}
                c["name"] = fn.get("name") or c["name"]
                c["arguments"] += fn.get("arguments") or ""
            finish = ch.get("finish_reason") or finish
    return {"text": text, "tool_calls": [calls[k] for k in sorted(calls)], "finish_reason": finish,
            "usage": usage}


def plan_for(scenario: str, i: int, step: dict) -> list[dict]:
    plan = [] if scenario == "ignore" else [{"kind": "compress", "when": "nudged"}]
    if scenario == "fold-early" and i in (6, 12):
        plan = [{"kind": "compress"}]
    if step["kind"] == "tool":
        plan.append({"kind": "tool", "name": step["name"], "arguments": step["arguments"]})
    else:
        plan.append({"kind": "text", "text": step["text"]})
    return plan


def run(proxy: str, mock: str, upstream: str, scenario: str, window_note: str, log) -> int:
    url = f"{proxy}/bili/{upstream}/v1/chat/completions"
    headers = {"x-acp-session": f"record-{scenario}"}
    messages = [{"role": "system", "content": S.SYSTEM}, {"role": "user", "content": S.TASK}]
    steps = S.steps()
    if scenario == "retry-loop":
        post(f"{mock}/__mock/plan", [{"kind": "compress_raw", "arguments": '{"content": [{"startId": "m00002"',
                                      "sticky": True}])
        steps = steps[:1]
    for i, step in enumerate(steps, start=1):
        if scenario != "retry-loop":
            post(f"{mock}/__mock/plan", plan_for(scenario, i, step))
        body = {"model": "mock-coder", "stream": True, "max_tokens": 512, "messages": messages,
                "tools": S.TOOLS}
        reply = read_sse(post(url, body, headers))
        log.write(json.dumps({"turn": i, "scenario": scenario, "window": window_note,
                              "request": body, "reply": reply}, ensure_ascii=False) + "\n")
        log.flush()
        asst = {"role": "assistant", "content": reply["text"] or None}
        if reply["tool_calls"]:
            asst["tool_calls"] = [{"id": c["id"], "type": "function",
                                   "function": {"name": c["name"], "arguments": c["arguments"]}}
                                  for c in reply["tool_calls"]]
        messages = messages + [asst]
        if step["kind"] == "tool" and reply["tool_calls"]:
            c = reply["tool_calls"][0]
            messages.append({"role": "tool", "tool_call_id": c["id"], "name": c["name"],
                             "content": step["result"]})
        else:
            messages.append({"role": "user", "content": step.get("then_user") or "Please continue."})
        print(f"turn {i:2d}: finish={reply['finish_reason']} calls={[c['name'] for c in reply['tool_calls']]} "
              f"prompt_tokens={(reply['usage'] or {}).get('prompt_tokens')}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Play the scripted session through the proxy.")
    ap.add_argument("--proxy", required=True, help="e.g. http://127.0.0.1:18787")
    ap.add_argument("--mock", required=True, help="e.g. http://127.0.0.1:18790")
    ap.add_argument("--scenario", choices=("session", "fold-early", "ignore", "retry-loop"), default="session")
    ap.add_argument("--window", default="", help="recorded with the client log only")
    ap.add_argument("--client-log", required=True)
    a = ap.parse_args(argv)
    with open(a.client_log, "a", encoding="utf-8") as log:
        return run(a.proxy, a.mock, a.mock, a.scenario, a.window, log)


if __name__ == "__main__":
    sys.exit(main())
