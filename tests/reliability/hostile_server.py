"""A small OpenAI-compatible server on 127.0.0.1 that misbehaves on request.

``HostileServer(mode=...)`` serves ``POST .../chat/completions`` (and ``GET /metrics``) and
records every request it sees (path and headers). Modes:

- ``ok``: a well-formed completion whose message is :attr:`HostileServer.reply`;
- ``redirect``: ``302`` to :attr:`HostileServer.location` (another server's URL);
- ``drip``: the whole reply, one byte every :attr:`drip_interval_s` seconds, for at most
  :attr:`drip_max_s` seconds (then the connection is closed: nothing here can hang);
- ``close_mid``: headers promising a body, half of it, then the connection closed;
- ``null_message``, ``no_choices``, ``wrong_types``: JSON that is not a chat completion;
- ``non_json``: ``200`` with an HTML body;
- ``echo_key``: a completion whose text is the ``Authorization`` header it was sent (or
  :attr:`reply` with ``{key}`` replaced by the key), as a hostile teacher would answer.

Every request is answered on its own thread; :meth:`close` stops the server. Test files of
``tests/reliability`` get it from the ``hostile`` fixture (conftest.py).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODES = ("ok", "redirect", "drip", "close_mid", "null_message", "no_choices", "wrong_types", "non_json",
         "echo_key")


def completion(message: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3}}


class HostileServer:
    def __init__(self, mode: str = "ok", *, reply: dict[str, Any] | None = None, location: str = "",
                 drip_interval_s: float = 1.0, drip_max_s: float = 6.0):
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")
        self.mode, self.location = mode, location
        self.reply: dict[str, Any] = reply or {"role": "assistant", "content": "ok"}
        self.drip_interval_s, self.drip_max_s = drip_interval_s, drip_max_s
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def do_GET(self):  # noqa: N802
                outer._record(self, None)
                outer._answer(self)

            def do_POST(self):  # noqa: N802
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                outer._record(self, body)
                outer._answer(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ recording

    def _record(self, handler: BaseHTTPRequestHandler, body: bytes | None) -> None:
        with self._lock:
            self.requests.append({"method": handler.command, "path": handler.path,
                                  "headers": dict(handler.headers), "body": body})

    @property
    def auth_headers(self) -> list[str]:
        """Every ``Authorization`` header this server was sent."""
        return [h for r in self.requests for k, h in r["headers"].items() if k.lower() == "authorization"]

    # ------------------------------------------------------------------ answers

    def _message(self, handler: BaseHTTPRequestHandler) -> dict[str, Any]:
        if self.mode != "echo_key":
            return self.reply
        auth = handler.headers.get("Authorization") or ""
        key = auth.removeprefix("Bearer ").strip()
        text = json.dumps(self.reply).replace("{key}", key) if "{key}" in json.dumps(self.reply) else None
        return json.loads(text) if text else {"role": "assistant", "content": f"Your header was: {auth}"}

    def _answer(self, h: BaseHTTPRequestHandler) -> None:
        mode = self.mode
        if mode == "redirect":
            h.send_response(302)
            h.send_header("Location", self.location)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        if mode == "non_json":
            self._send(h, b"<html><body>502 Bad Gateway</body></html>", "text/html")
            return
        if mode == "null_message":
            data = completion(None)
        elif mode == "no_choices":
            data = {"object": "chat.completion", "choices": []}
        elif mode == "wrong_types":
            data = completion({"role": "assistant", "content": ["not", "a", "string"]})
        else:
            data = completion(self._message(h))
        body = json.dumps(data).encode()
        if mode == "close_mid":
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body[:len(body) // 2])
            h.wfile.flush()
            h.close_connection = True
            return
        if mode == "drip":
            head = (f"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
                    ).encode()
            stop = time.monotonic() + self.drip_max_s
            try:
                for i in range(len(head) + len(body)):
                    if time.monotonic() > stop:
                        break
                    h.wfile.write((head + body)[i:i + 1])
                    h.wfile.flush()
                    time.sleep(self.drip_interval_s)
            except OSError:  # the client gave up: that is the point
                pass
            h.close_connection = True
            return
        self._send(h, body, "application/json")

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, body: bytes, ctype: str) -> None:
        h.send_response(200)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
