"""The OpenAI-compatible client (eval ``openai`` backend and data_gen teacher) against a
server that misbehaves: no redirect is followed and the key goes nowhere else; one deadline
covers the whole call; transport faults and malformed bodies are backend errors, which
leave an eval case unfinished, counted and retried by the next run."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from plumbing.chat_backend import BackendError, Request
from plumbing.openai_backend import OpenAIBackend

KEY = "sk-reliability-transport-0123456789abcdef"
MSGS = [{"role": "user", "content": "hello"}]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("DTW_REL_KEY", KEY)
    return KEY


def client(url: str, timeout_s: float = 5.0) -> OpenAIBackend:
    return OpenAIBackend(base_url=url, model="m", api_key_env="DTW_REL_KEY", timeout_s=timeout_s)


def test_a_redirect_is_refused_and_the_key_never_follows(hostile, key):
    other = hostile("ok")  # another port: what a redirect would hand the key and the reply to
    first = hostile("redirect", location=other.url + "/chat/completions")
    with pytest.raises(BackendError, match=r"302 redirect to http://127\.0\.0\.1:\d+/v1/chat/completions") as err:
        client(first.url).complete(Request(MSGS))
    assert "not followed" in str(err.value) and KEY not in str(err.value)
    assert first.auth_headers == [f"Bearer {KEY}"]  # the key went to the configured server only
    assert other.requests == [] and other.auth_headers == []


def test_a_dripping_server_fails_at_the_deadline_of_the_whole_call(hostile, key):
    # One byte every 0.4 s: each read is quick, the call is not. The server stops after 8 s,
    # so a client with a per-read timeout ends too (late), and nothing can hang.
    srv = hostile("drip", drip_interval_s=0.4, drip_max_s=8.0)
    t0 = time.monotonic()
    with pytest.raises(BackendError, match=r"no complete reply within timeout_s=1\.5s"):
        client(srv.url, timeout_s=1.5).complete(Request(MSGS))
    assert time.monotonic() - t0 < 1.5 + 3.0  # the deadline plus slack for a loaded machine, well under 8 s


@pytest.mark.parametrize("mode,message", [
    ("close_mid", r"transport failed \(IncompleteRead"),
    ("null_message", r"choices\[0\]\.message is null"),
    ("non_json", r"the reply is not JSON \(<html>"),
    ("no_choices", r"no choices"),
    ("wrong_types", r"message\.content is list"),
])
def test_transport_faults_and_malformed_bodies_are_backend_errors(hostile, key, mode, message):
    srv = hostile(mode)
    with pytest.raises(BackendError, match=message):
        client(srv.url).complete(Request(MSGS))
    assert len(srv.requests) == 1


def test_a_pasted_key_as_api_key_env_is_refused_without_echo():
    with pytest.raises(BackendError, match="NAME of an environment variable") as err:
        OpenAIBackend(base_url="http://127.0.0.1:9/v1", model="m", api_key_env=KEY)
    assert KEY not in str(err.value)


def test_a_failed_call_leaves_the_eval_case_unfinished_and_a_rerun_retries_it(hostile, key, tmp_path):
    from eval.harness import load_results, run_eval
    from eval.recipe import EvalRecipe
    from plumbing.recipe_loader import load_config
    from plumbing.runs import read_manifest

    smoke = ROOT / "configs/eval/smoke.yaml"
    srv = hostile("null_message")
    settings = {"base_url": srv.url, "api_key_env": "DTW_REL_KEY", "timeout_s": 5.0}
    wl = [{"name": "held_out", "settings": {"data_dir": "fixtures/held_out", "split": "test", "limit": 2}}]
    r = load_config(smoke, EvalRecipe, ["arms=[doctrine]", "concurrency=1", f"workloads={json.dumps(wl)}",
                                        "backend.name=openai", "backend.model=m",
                                        f"backend.settings={json.dumps(settings)}"])
    out = tmp_path / "eval"
    first = run_eval(r, out, base_dir=smoke.parent, log=lambda s: None)
    assert first.total >= 1 and first.done == 0 and len(first.failed) == first.total
    assert not list(out.glob("cases/*/*.json")) and read_manifest(out) is None
    status = json.loads((out / "status.json").read_text())
    assert status["complete"] is False and "message is null" in status["failed"][0]["error"]
    srv.mode = "ok"  # the server recovers: the next run retries every unfinished case
    second = run_eval(r, out, base_dir=smoke.parent, log=lambda s: None)
    assert second.complete and second.ran == first.total
    assert len(load_results(out)) == first.total
