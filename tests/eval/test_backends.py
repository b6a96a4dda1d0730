"""Backends: the oracle with a stub policy, openai against a local stdlib server, hf on the
tiny model (greedy determinism, batching, adapter loading)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from eval.backends import BACKENDS, BackendError, Request, make_backend
from plumbing.openai_backend import OpenAIBackend, parse_prefix_cache_metrics

MSGS = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "List the files."}]
TOOLS = [{"type": "function", "function": {"name": "bash", "description": "Run a command.",
          "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}}]


def test_registry_names():
    assert set(BACKENDS) == {"hf", "vllm", "openai", "oracle", "never_compress", "first_range"}
    with pytest.raises(BackendError, match="unknown backend"):
        make_backend("nope")


def test_oracle_stub_policy_and_usage():
    from eval.backends.oracle import OracleBackend

    def stub(req):
        return {"role": "assistant", "content": "ok", "tool_calls": [
            {"id": "x", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "ls"}'}}]}

    be = OracleBackend(policy=stub)
    out = be.complete(Request(MSGS, TOOLS))
    assert out.tool_calls[0]["function"]["name"] == "bash"
    assert "<tool_call>" in out.raw_text and out.prompt_tokens > 0 and out.completion_tokens > 0
    # Without a policy the oracle echoes the workload's hint.
    hint = {"role": "assistant", "content": "from hindsight"}
    assert make_backend("oracle").complete(Request(MSGS, meta={"oracle_reply": hint})).message["content"] == "from hindsight"


# ----------------------------------------------------------------------------- openai (stdlib server)


class _Handler(BaseHTTPRequestHandler):
    seen: list = []
    mode = "structured"

    def log_message(self, *a):  # keep test output quiet
        pass

    def do_GET(self):
        body = (b"# HELP x\nvllm:prefix_cache_queries_total{model=\"m\"} 40.0\n"
                b"vllm:prefix_cache_hits_total{model=\"m\"} 30.0\n")
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        n = int(self.headers["Content-Length"])
        req = json.loads(self.rfile.read(n))
        type(self).seen.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": req})
        if type(self).mode == "structured":
            msg = {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_9", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "ls -la"}'}}]}
        elif type(self).mode == "text":
            msg = {"role": "assistant", "content": 'Sure.\n<tool_call>\n{"name": "bash", "arguments": {"cmd": "pwd"}}\n</tool_call>'}
        else:
            msg = {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "bash", "arguments": "{not json"}}]}
        data = json.dumps({"choices": [{"message": msg}], "usage": {"prompt_tokens": 17, "completion_tokens": 5}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture()
def server():
    srv = HTTPServer(("127.0.0.1", 0), _Handler)
    _Handler.seen = []
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()
    srv.server_close()


def test_openai_tool_calls_usage_and_key(server, monkeypatch):
    monkeypatch.setenv("DTW_TEST_KEY", "sk-test-0123456789")
    be = OpenAIBackend(base_url=server, model="base", adapter_model="dtw", api_key_env="DTW_TEST_KEY")
    _Handler.mode = "structured"
    out = be.complete(Request(MSGS, TOOLS, use_adapter=True, max_tokens=32))
    assert out.tool_calls == [{"id": "call_9", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "ls -la"}'}}]
    assert (out.prompt_tokens, out.completion_tokens) == (17, 5) and not out.parse_errors
    sent = _Handler.seen[-1]
    assert sent["path"] == "/v1/chat/completions" and sent["body"]["model"] == "dtw"
    assert sent["body"]["tools"] == TOOLS and sent["body"]["temperature"] == 0.0
    assert sent["auth"] == "Bearer sk-test-0123456789"
    be.complete(Request(MSGS))
    assert _Handler.seen[-1]["body"]["model"] == "base"
    assert "sk-test" not in json.dumps(be.describe())
    assert be.stats() == {"prefix_cache_queries": 40.0, "prefix_cache_hits": 30.0}


def test_openai_text_form_and_malformed(server):
    be = OpenAIBackend(base_url=server, model="m")
    _Handler.mode = "text"
    out = be.complete(Request(MSGS, TOOLS))
    assert out.message["content"] == "Sure." and out.tool_calls[0]["function"]["arguments"] == '{"cmd": "pwd"}'
    _Handler.mode = "malformed"
    bad = be.complete(Request(MSGS, TOOLS))
    assert bad.parse_errors and not bad.tool_calls


def test_openai_missing_key_and_dead_server(monkeypatch):
    monkeypatch.delenv("DTW_NOT_SET", raising=False)
    with pytest.raises(BackendError, match="DTW_NOT_SET"):
        OpenAIBackend(base_url="http://127.0.0.1:9", model="m", api_key_env="DTW_NOT_SET").complete(Request(MSGS))
    with pytest.raises(BackendError):
        OpenAIBackend(base_url="http://127.0.0.1:9", model="m", timeout_s=2).complete(Request(MSGS))
    with pytest.raises(BackendError, match="adapter_model"):
        OpenAIBackend(base_url="http://127.0.0.1:9", model="m").complete(Request(MSGS, use_adapter=True))


def test_prefix_cache_metric_parsing():
    text = "vllm:prefix_cache_hits_total{engine=\"0\"} 3\nvllm:prefix_cache_hits_total{engine=\"1\"} 2\nvllm:prefix_cache_queries 10\n"
    assert parse_prefix_cache_metrics(text) == {"prefix_cache_hits": 5.0, "prefix_cache_queries": 10.0}


# ----------------------------------------------------------------------------- hf (tiny model)


@pytest.fixture(scope="module")
def tiny_adapter(tiny_model_dir, tmp_path_factory):
    """A LoRA adapter on the tiny model with non-zero B, so it really changes the outputs."""
    import torch
    from peft import LoraConfig, get_peft_model

    from plumbing.models import load_model

    torch.manual_seed(1)
    model = load_model(str(tiny_model_dir), dtype="float32")
    peft_model = get_peft_model(model, LoraConfig(r=4, lora_alpha=32, target_modules=["q_proj", "v_proj"],
                                                  init_lora_weights=False))
    out = tmp_path_factory.mktemp("adapter") / "adapter"
    peft_model.save_pretrained(str(out))
    return out


@pytest.fixture(scope="module")
def hf_backend(tiny_model_dir, tiny_adapter):
    return make_backend("hf", {"model": str(tiny_model_dir), "adapter_dir": str(tiny_adapter)})


def test_hf_greedy_deterministic_batched_and_adapter(hf_backend):
    req = Request(MSGS, TOOLS, max_tokens=12)
    a, b = hf_backend.complete(req), hf_backend.complete(req)
    assert a.raw_text == b.raw_text and a.completion_tokens == b.completion_tokens > 0
    assert a.prompt_tokens == hf_backend.count_tokens(hf_backend.render(req))
    other = Request(MSGS[:1] + [{"role": "user", "content": "A much longer question about the parser module?"}],
                    max_tokens=12)
    batch = hf_backend.complete_batch([req, other])
    assert batch[0].raw_text == a.raw_text  # left padding leaves greedy output unchanged
    assert batch[1].raw_text == hf_backend.complete(other).raw_text
    with_adapter = hf_backend.complete(Request(MSGS, TOOLS, use_adapter=True, max_tokens=12))
    assert with_adapter.raw_text != a.raw_text


def test_hf_adapter_required_for_adapter_requests(tiny_model_dir):
    be = make_backend("hf", {"model": str(tiny_model_dir)})
    with pytest.raises(BackendError, match="adapter"):
        be.complete(Request(MSGS, use_adapter=True, max_tokens=4))


def test_hf_reuses_the_kv_cache_of_a_shared_prefix(hf_backend):
    first = Request(MSGS, TOOLS, max_tokens=8)
    hf_backend.complete(first)
    longer = Request(MSGS + [{"role": "assistant", "content": "Done."}, {"role": "user", "content": "Again, please."}],
                     TOOLS, max_tokens=8)
    before = hf_backend.stats()
    reused = hf_backend.complete(longer)
    after = hf_backend.stats()
    assert reused.extra.get("cached_prompt_tokens", 0) > 0
    assert after["prefix_cache_hits"] - before["prefix_cache_hits"] == reused.extra["cached_prompt_tokens"]
    assert after["prefix_cache_queries"] - before["prefix_cache_queries"] == reused.prompt_tokens
    hf_backend.reuse_prefix_cache = False
    try:
        fresh = hf_backend.complete(longer)
    finally:
        hf_backend.reuse_prefix_cache = True
    assert fresh.raw_text == reused.raw_text and "cached_prompt_tokens" not in fresh.extra
    # A call with the adapter never reuses the base model's cache.
    with_adapter = hf_backend.complete(Request(longer.messages, TOOLS, use_adapter=True, max_tokens=8))
    assert "cached_prompt_tokens" not in with_adapter.extra
