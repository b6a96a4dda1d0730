"""The ``openai`` backend: any OpenAI-compatible ``/chat/completions`` endpoint (stdlib only).

Base URL, model names and the *name* of the environment variable holding the key come from
config (``api_key_env``); the key itself is read from the environment at call time and is
never stored, logged or written to a manifest. ``adapter_model`` is the model name that
selects the adapter (a vLLM ``--lora-modules NAME=DIR`` name); requests with
``use_adapter`` use it. A vLLM server needs ``--enable-auto-tool-choice --tool-call-parser
hermes`` to accept tools with the default (auto) tool choice; the parser reads the same
``<tool_call>`` form the adapter is trained on. Tool calls come back structured; a server that returns the text
form instead is parsed with ``plumbing.tool_format``. vLLM's ``/metrics`` prefix-cache
counters are read when the server exposes them.

One HTTP behaviour for every caller (:func:`http_call`): ``timeout_s`` is the deadline of
the whole call, not of one read; a redirect is never followed (the key is sent to
``base_url`` only); a transport fault or a reply that is not a chat completion (not JSON,
no choices, a null message, wrong types) is a :class:`BackendError`, which an eval counts
as an unfinished case (retried by the next run) and the teacher as a rejected point.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import threading
import time
import urllib.parse
from typing import Any

from plumbing.chat_backend import Backend, BackendError, Completion, Request, reply_from_text
from plumbing.secret_scan import env_name_error

MAX_REPLY_BYTES = 32 << 20  # a reply larger than this is a fault of the server, not an answer


class OpenAIBackend(Backend):
    name = "openai"

    def __init__(self, base_url: str, model: str, adapter_model: str | None = None,
                 api_key_env: str | None = None, timeout_s: float = 120.0,
                 temperature: float = 0.0, tool_choice: str | None = None, **_: Any):
        if not base_url or not model:
            raise BackendError("openai backend needs base_url and model")
        if api_key_env is not None and (problem := env_name_error(api_key_env)):
            raise BackendError(problem)
        if urllib.parse.urlsplit(base_url).scheme not in ("http", "https"):
            raise BackendError("openai backend: base_url must start with http:// or https://")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.adapter_model = adapter_model
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s
        self.temperature = temperature
        self.tool_choice = tool_choice  # sent only when set ("auto" needs server-side tool parsing)

    def _key(self) -> str | None:
        if not self.api_key_env:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise BackendError(f"environment variable {self.api_key_env} (api_key_env) is not set")
        return key

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        key = self._key()
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        raw = http_call("POST", self.base_url + path, json.dumps(body).encode(), headers, self.timeout_s,
                        secret=key)
        try:
            data = json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError):  # a huge number, nesting past the recursion limit
            raise BackendError(f"{self.base_url}{path}: the reply is not JSON ({_snippet(raw, key)})") from None
        if not isinstance(data, dict):
            raise BackendError(f"{self.base_url}{path}: the reply is JSON but not an object "
                               f"({type(data).__name__})")
        return data

    def _complete(self, request: Request) -> Completion:
        if request.use_adapter and not self.adapter_model:
            raise BackendError("a request asked for the adapter but adapter_model is not configured")
        model = self.adapter_model if request.use_adapter else self.model
        body: dict[str, Any] = {"model": model, "messages": request.messages,
                                "temperature": self.temperature, "max_tokens": request.max_tokens}
        if request.tools:
            body["tools"] = request.tools
            if self.tool_choice:
                body["tool_choice"] = self.tool_choice
        t0 = time.perf_counter()
        data = self._post("/chat/completions", body)
        latency = time.perf_counter() - t0
        msg, pt, ct = _reply_parts(data)
        content = msg.get("content") or ""
        calls = msg.get("tool_calls") or []
        if not calls and "<tool_call>" in content:
            return reply_from_text(content, prompt_tokens=pt, completion_tokens=ct, latency_s=latency)
        errors, clean = [], []
        for i, c in enumerate(calls):
            fn = c.get("function")
            args = fn.get("arguments")
            if not isinstance(fn.get("name"), str):
                errors.append(f"tool call {i + 1}: no function name")
                continue
            if not isinstance(args, str):
                args = json.dumps(args if args is not None else {})
            try:
                ok = isinstance(json.loads(args or "{}"), dict)
            except (ValueError, RecursionError):
                ok = False
            if not ok:
                errors.append(f"tool call {i + 1} ({fn['name']}): arguments are not a JSON object")
                continue
            clean.append({"id": c.get("id") if isinstance(c.get("id"), str) and c.get("id") else f"call_{i}",
                          "type": "function", "function": {"name": fn["name"], "arguments": args}})
        out: dict[str, Any] = {"role": "assistant", "content": content}
        if clean:
            out["tool_calls"] = clean
        from plumbing.tool_format import format_assistant_text

        return Completion(out, format_assistant_text(content, clean), clean, errors, pt, ct, latency)

    def stats(self) -> dict[str, Any]:
        """vLLM's prefix-cache counters from ``<server>/metrics`` (empty when absent)."""
        root = re.sub(r"/v1$", "", self.base_url)
        try:
            raw = http_call("GET", root + "/metrics", None, {}, min(10.0, self.timeout_s))
        except BackendError:
            return {}
        return parse_prefix_cache_metrics(raw.decode("utf-8", "replace"))

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "base_url": self.base_url, "model": self.model,
                "adapter_model": self.adapter_model, "api_key_env": self.api_key_env}


def parse_prefix_cache_metrics(text: str) -> dict[str, float]:
    """Sum ``vllm:prefix_cache_hits`` / ``_queries`` counters in Prometheus text format."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"vllm:(prefix_cache_(?:hits|queries))(?:_total)?(?:\{[^}]*\})?\s+([0-9.eE+-]+)", line)
        if m:
            out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(2))
    return out


def http_call(method: str, url: str, body: bytes | None, headers: dict[str, str], timeout_s: float,
              *, secret: str | None = None) -> bytes:
    """One HTTP exchange with the deadline ``timeout_s`` for the whole call (connect, headers,
    body: a server that drips a byte a second fails at the deadline, not per read). Only a
    2xx reply is an answer: a redirect is an error naming its Location and is never followed
    (the ``Authorization`` header goes to ``url`` only); any other status, a connection
    closed mid-reply or a reply over :data:`MAX_REPLY_BYTES` is a :class:`BackendError`.
    ``secret`` (the key sent) is masked in every error message."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BackendError(f"{url}: not an http(s) URL")
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = cls(parts.hostname, parts.port, timeout=timeout_s)
    done, expired = threading.Event(), threading.Event()

    def watchdog() -> None:  # at the deadline, cut the socket: a blocked read returns at once
        if done.wait(timeout_s):
            return
        expired.set()
        while not done.is_set():
            sock = conn.sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            done.wait(0.05)  # connect() may still be creating the socket

    threading.Thread(target=watchdog, name="http-deadline", daemon=True).start()
    try:
        conn.request(method, target, body=body, headers=headers)
        resp = conn.getresponse()
        chunks, size = [], 0
        while chunk := resp.read(1 << 16):
            size += len(chunk)
            if size > MAX_REPLY_BYTES:
                raise BackendError(f"{url}: the reply is larger than {MAX_REPLY_BYTES >> 20} MiB")
            chunks.append(chunk)
        raw = b"".join(chunks)
        if resp.length:  # the connection closed before the bytes Content-Length promised
            raise http.client.IncompleteRead(raw, resp.length)
        if expired.is_set():
            raise OSError("deadline")
    except BackendError:
        raise
    except (OSError, http.client.HTTPException, ValueError) as exc:
        if expired.is_set():
            raise BackendError(f"{url}: no complete reply within timeout_s={timeout_s:g}s") from None
        what = str(exc) or type(exc).__name__
        raise BackendError(_mask(f"{url}: transport failed ({type(exc).__name__}: {what})", secret)) from None
    finally:
        done.set()
        conn.close()
    if 300 <= resp.status < 400:
        where = resp.getheader("Location") or "no Location"
        raise BackendError(_mask(f"{url}: HTTP {resp.status} redirect to {where[:200]}; redirects are not "
                                 "followed (point base_url at the server itself)", secret))
    if not 200 <= resp.status < 300:
        raise BackendError(f"{url}: HTTP {resp.status}: {_snippet(raw, secret, 500)}")
    return raw


def _mask(text: str, secret: str | None) -> str:
    return text.replace(secret, "***") if secret else text


def _snippet(raw: bytes, secret: str | None, limit: int = 200) -> str:
    """The start of a reply body for an error message, with the key masked."""
    return _mask(raw[:limit].decode("utf-8", "replace"), secret).strip() or "empty body"


def _reply_parts(data: dict[str, Any]) -> tuple[dict[str, Any], int, int]:
    """The message and token usage of a chat completion; any part of the wrong type is a
    :class:`BackendError` (a malformed reply is a fault of the server, never an empty answer)."""
    def bad(what: str) -> BackendError:
        return BackendError(f"malformed chat completion: {what}")

    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise bad("no choices" if not choices else "choices[0] is not an object")
    msg = choices[0].get("message")
    if not isinstance(msg, dict):
        raise bad(f"choices[0].message is {type(msg).__name__ if msg is not None else 'null'}")
    if msg.get("content") is not None and not isinstance(msg["content"], str):
        raise bad(f"message.content is {type(msg['content']).__name__}, not a string")
    calls = msg.get("tool_calls")
    if calls is not None and not (isinstance(calls, list)
                                  and all(isinstance(c, dict) and isinstance(c.get("function"), dict)
                                          for c in calls)):
        raise bad("message.tool_calls is not a list of {function: {...}} objects")
    usage = data.get("usage") or {}
    if not isinstance(usage, dict):
        raise bad("usage is not an object")
    counts = []
    for key in ("prompt_tokens", "completion_tokens"):
        n = usage.get(key) or 0
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise bad(f"usage.{key} is not a count")
        counts.append(n)
    return msg, counts[0], counts[1]


def make_openai(settings: dict[str, Any] | None = None, **_: Any) -> OpenAIBackend:
    return OpenAIBackend(**(settings or {}))
