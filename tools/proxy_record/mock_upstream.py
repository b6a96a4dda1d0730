"""A scripted OpenAI-compatible chat-completions server that records what it is sent.

Run by hand (see README.md): it stands where vLLM would stand behind the billion-context
proxy, so every request the proxy sends upstream lands in ``--record`` as one JSON line.
Loopback only; it never opens a connection itself.

Replies come from a queue the driver fills through ``POST /__mock/plan`` (a JSON list of
reply specs, one per upstream request); an empty queue answers with short text. Specs:

* ``{"kind": "text", "text": ...}``
* ``{"kind": "tool", "name": ..., "arguments": {...}}``: a client tool call
* ``{"kind": "compress"}``: a valid ``compress`` call over the first range the request's
  trailing nudge offers, else over the oldest tagged refs (the system message excluded)
* ``{"kind": "compress_raw", "arguments": "<raw text>"}``: a compress call with arguments
  exactly as given (invalid JSON, missing ``content``: the refusal paths)
* ``"when": "nudged"`` on any spec: used only if the request ends with a nudge, else skipped
* ``"sticky": true`` on any spec keeps it at the head of the queue (the retry-loop repro)

Usage is reported the way vLLM reports it (a last chunk with empty ``choices``);
``prompt_tokens`` is the mock's own count: ceil(chars / 4) of the request's messages and
tools serialized as JSON. It is a stand-in for a tokenizer, stated as such in FINDINGS.md.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REF_TAG = re.compile(r"<acp [^>]*>(m\d{5})</acp>")
# One line of the nudge's range list: "  m00002–m00009  7 msgs  1.2K [tool 80% | text 20%]".
BLOCK_LINE = re.compile(r"^\s+(b\d+)\s+\d+ msgs", re.M)  # a tier-2/3 nudge's target block
RANGE_LINE = re.compile(r"^\s+(m\d{5})[–-](m\d{5})\s+\d+ msgs(?!.*PROTECTED)", re.M)
MAX_BODY = 16 * 1024 * 1024


def prompt_tokens(body: dict) -> int:
    text = json.dumps(body.get("messages", []), ensure_ascii=False)
    text += json.dumps(body.get("tools", []), ensure_ascii=False)
    return math.ceil(len(text) / 4)


def _text_of(msg: dict) -> str:
    c = msg.get("content")
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return "".join(p.get("text", "") for p in c if isinstance(p, dict))
    return ""


def nudged(body: dict) -> bool:
    """The request ends with the proxy's nudge: a trailing user message that carries no ref
    tag (the proxy tags every client text message, and appends its nudge after tagging)."""
    msgs = body.get("messages", [])
    return (len(msgs) >= 2 and msgs[-1].get("role") == "user"
            and not _text_of(msgs[-1]).lstrip().startswith("<acp "))


def choose_range(body: dict) -> tuple[str, str] | None:
    """The nudge's offered range (its first unprotected message range, or its tier-2/3
    target blocks first to last), else the oldest tagged non-system refs."""
    msgs = body.get("messages", [])
    if nudged(body):
        text = _text_of(msgs[-1])
        blocks = BLOCK_LINE.findall(text)
        if blocks:
            return blocks[0], blocks[-1]
        m = RANGE_LINE.search(text)
        if m:
            return m.group(1), m.group(2)
    refs = []
    for msg in msgs:
        if msg.get("role") == "system":
            continue
        refs += REF_TAG.findall(_text_of(msg))
    if len(refs) < 4:
        return None
    return refs[0], refs[len(refs) // 2]


class Mock:
    def __init__(self, record_path: str):
        self.lock = threading.Lock()
        self.queue: list[dict] = []
        self.seq = 0
        self.turn = 0  # one per plan the driver posts (one client call)
        self.round = 0  # upstream requests since that plan
        self.record = open(record_path, "a", encoding="utf-8")  # noqa: SIM115 - closed at exit

    def next_spec(self, body: dict) -> dict:
        with self.lock:
            while self.queue and self.queue[0].get("when") == "nudged" and not nudged(body):
                self.queue.pop(0)
            if not self.queue:
                return {"kind": "text", "text": "Done with that step."}
            spec = self.queue[0]
            if not spec.get("sticky"):
                self.queue.pop(0)
            return spec

    def resolve(self, spec: dict, body: dict) -> dict:
        """A spec made concrete for this request: (text, tool call or None)."""
        kind = spec.get("kind")
        if kind == "text":
            return {"text": spec["text"], "call": None}
        if kind == "tool":
            return {"text": "", "call": {"name": spec["name"], "arguments": json.dumps(spec["arguments"])}}
        if kind == "compress_raw":
            return {"text": "", "call": {"name": "compress", "arguments": spec["arguments"]}}
        if kind == "compress":
            rng = choose_range(body)
            if rng is None:
                return {"text": "Nothing to compress yet.", "call": None}
            args = {"content": [{"startId": rng[0], "endId": rng[1], "topic": "earlier steps",
                                 "summary": f"Summary of {rng[0]}..{rng[1]}: files read, the failing "
                                            "test located, the fix planned; nothing left open."}]}
            return {"text": "", "call": {"name": "compress", "arguments": json.dumps(args)}}
        raise ValueError(f"unknown reply kind {kind!r}")

    def log(self, rec: dict) -> None:
        with self.lock:
            self.record.write(json.dumps(rec, ensure_ascii=False) + "\n")
            self.record.flush()


def sse(obj: dict | str) -> bytes:
    data = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False)
    return f"data: {data}\n\n".encode()


def make_handler(mock: Mock):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):  # quiet: the record file is the log
            pass

        def _json(self, code: int, obj: dict) -> None:
            raw = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self):  # noqa: N802
            self._json(200, {"object": "list", "data": [{"id": "mock-coder", "object": "model"}]})

        def do_POST(self):  # noqa: N802
            n = int(self.headers.get("content-length") or 0)
            if n > MAX_BODY:
                self._json(413, {"error": "body too large"})
                return
            try:
                body = json.loads(self.rfile.read(n) or b"{}")
            except ValueError as e:
                self._json(400, {"error": f"bad JSON: {e}"})
                return
            if self.path == "/__mock/plan":
                with mock.lock:
                    mock.queue = list(body)
                    mock.turn += 1
                    mock.round = 0
                self._json(200, {"queued": len(body)})
                return
            if not self.path.endswith("/chat/completions"):
                self._json(404, {"error": f"unknown path {self.path}"})
                return
            with mock.lock:
                mock.seq += 1
                mock.round += 1
                seq, turn, rnd = mock.seq, mock.turn, mock.round
            spec = mock.next_spec(body)
            reply = mock.resolve(spec, body)
            usage = {"prompt_tokens": prompt_tokens(body), "completion_tokens": 20,
                     "total_tokens": prompt_tokens(body) + 20}
            mock.log({"seq": seq, "turn": turn, "round": rnd, "path": self.path, "request": body, "reply": reply, "usage": usage})
            if body.get("stream"):
                self._stream(reply, usage, body.get("model", "mock-coder"), seq)
            else:
                self._whole(reply, usage, body.get("model", "mock-coder"), seq)

        def _whole(self, reply, usage, model, seq):
            msg = {"role": "assistant", "content": reply["text"] or None}
            if reply["call"]:
                msg["tool_calls"] = [{"id": f"call_{seq}", "type": "function", "function": reply["call"]}]
            self._json(200, {"id": f"chatcmpl-mock-{seq}", "object": "chat.completion", "model": model,
                             "choices": [{"index": 0, "message": msg,
                                          "finish_reason": "tool_calls" if reply["call"] else "stop"}],
                             "usage": usage})

        def _stream(self, reply, usage, model, seq):
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("connection", "close")
            self.end_headers()
            base = {"id": f"chatcmpl-mock-{seq}", "object": "chat.completion.chunk", "model": model}
            out = [sse({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                             "finish_reason": None}]})]
            if reply["text"]:
                out.append(sse({**base, "choices": [{"index": 0, "delta": {"content": reply["text"]},
                                                     "finish_reason": None}]}))
            if reply["call"]:
                call = {"index": 0, "id": f"call_{seq}", "type": "function",
                        "function": {"name": reply["call"]["name"], "arguments": reply["call"]["arguments"]}}
                out.append(sse({**base, "choices": [{"index": 0, "delta": {"tool_calls": [call]},
                                                     "finish_reason": None}]}))
            out.append(sse({**base, "choices": [{"index": 0, "delta": {},
                                                 "finish_reason": "tool_calls" if reply["call"] else "stop"}]}))
            out.append(sse({**base, "choices": [], "usage": usage}))
            out.append(sse("[DONE]"))
            self.wfile.write(b"".join(out))
            self.wfile.flush()
            self.close_connection = True

    return Handler


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--record", required=True, help="JSON-lines file every upstream request is appended to")
    a = ap.parse_args(argv)
    mock = Mock(a.record)
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), make_handler(mock))
    print(f"mock upstream on 127.0.0.1:{a.port}, recording to {a.record}", file=sys.stderr, flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
