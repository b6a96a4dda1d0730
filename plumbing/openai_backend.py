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
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.request
from typing import Any

from plumbing.chat_backend import Backend, BackendError, Completion, Request, reply_from_text


class OpenAIBackend(Backend):
    name = "openai"

    def __init__(self, base_url: str, model: str, adapter_model: str | None = None,
                 api_key_env: str | None = None, timeout_s: float = 120.0,
                 temperature: float = 0.0, tool_choice: str | None = None, **_: Any):
        if not base_url or not model:
            raise BackendError("openai backend needs base_url and model")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.adapter_model = adapter_model
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s
        self.temperature = temperature
        self.tool_choice = tool_choice  # sent only when set ("auto" needs server-side tool parsing)

    def _headers(self) -> dict[str, str]:
        h = {"Content-Type": "application/json"}
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise BackendError(f"environment variable {self.api_key_env} (api_key_env) is not set")
            h["Authorization"] = f"Bearer {key}"
        return h

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        req = urllib.request.Request(self.base_url + path, data=json.dumps(body).encode(),
                                     headers=self._headers(), method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                return json.loads(resp.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:500]
            raise BackendError(f"{self.base_url}{path}: HTTP {exc.code}: {detail}") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise BackendError(f"{self.base_url}{path}: {exc}") from None

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
        try:
            msg = data["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            raise BackendError(f"unexpected response shape: {str(data)[:300]}") from None
        usage = data.get("usage") or {}
        pt, ct = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        content = msg.get("content") or ""
        calls = msg.get("tool_calls") or []
        if not calls and "<tool_call>" in content:
            return reply_from_text(content, prompt_tokens=pt, completion_tokens=ct, latency_s=latency)
        errors, clean = [], []
        for i, c in enumerate(calls):
            fn = (c or {}).get("function") or {}
            args = fn.get("arguments")
            if not isinstance(fn.get("name"), str):
                errors.append(f"tool call {i + 1}: no function name")
                continue
            if not isinstance(args, str):
                args = json.dumps(args if args is not None else {})
            try:
                ok = isinstance(json.loads(args or "{}"), dict)
            except ValueError:
                ok = False
            if not ok:
                errors.append(f"tool call {i + 1} ({fn['name']}): arguments are not a JSON object")
                continue
            clean.append({"id": c.get("id") or f"call_{i}", "type": "function",
                          "function": {"name": fn["name"], "arguments": args}})
        out: dict[str, Any] = {"role": "assistant", "content": content}
        if clean:
            out["tool_calls"] = clean
        from plumbing.tool_format import format_assistant_text

        return Completion(out, format_assistant_text(content, clean), clean, errors, pt, ct, latency)

    def stats(self) -> dict[str, Any]:
        """vLLM's prefix-cache counters from ``<server>/metrics`` (empty when absent)."""
        root = re.sub(r"/v1$", "", self.base_url)
        try:
            with urllib.request.urlopen(root + "/metrics", timeout=10) as resp:
                text = resp.read().decode("utf-8", "replace")
        except (urllib.error.URLError, OSError):
            return {}
        return parse_prefix_cache_metrics(text)

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


def make_openai(settings: dict[str, Any] | None = None, **_: Any) -> OpenAIBackend:
    return OpenAIBackend(**(settings or {}))
