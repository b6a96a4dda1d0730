"""The vllm backend and the openai backend against a real vLLM OpenAI server (vllm-cpu here).

Two engine starts in all: the offline engine (``python -m eval run`` with backend vllm, a
subprocess because vLLM starts workers) and one OpenAI server. Both serve the real embedded
model (vLLM needs its head size) with an adapter trained for 2 steps of
configs/train/demo.yaml on the project-made SFT fixture and exported, as
tests/train/test_vllm_serving.py does. Skipped when vLLM is not importable.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM not installed"),
]

ROOT = Path(__file__).resolve().parents[2]
# Share of host memory vLLM-CPU reserves for its KV cache (0.5, the backend's default, fails
# when other jobs hold memory on a shared machine; 135M parameters need far less).
MEM = os.environ.get("DTW_VLLM_MEMORY", "0.2")


@pytest.fixture(scope="module")
def workdir():
    """A folder outside pytest's basetemp: concurrent pytest runs on a shared machine prune old
    basetemps, which would delete the adapter under a running engine."""
    import shutil
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="dtw-eval-vllm-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def adapter_run(workdir, embedded_model):
    from plumbing.recipe_loader import load_config
    from train.export import export_adapter
    from train.recipe import TrainRecipe
    from train.sft import run_training

    sys.path.insert(0, str(ROOT / "tests" / "train"))
    from conftest import build_sft_data  # the project-made SFT fixture of the train tests

    root = workdir
    data = build_sft_data(root / "data")
    recipe = load_config(ROOT / "configs/train/demo.yaml", TrainRecipe, [
        f"data.dir={data}", "trainer.max_steps=2", "trainer.save_steps=100", "trainer.eval_steps=null",
        "trainer.learning_rate=5e-3", "trainer.gradient_accumulation_steps=1", "lora.r=8",
        "data.max_length=2048"])
    run = root / "run"
    run_training(recipe, run)
    export_adapter(run)
    manifest = json.loads((run / "adapter" / "manifest.json").read_text())
    return {"adapter": run / "adapter", "base": manifest["adapter"]["base_model"]["path"],
            "name": manifest["adapter"]["adapter_name"], "rank": manifest["adapter"]["max_lora_rank"]}


def test_offline_engine_through_the_harness(adapter_run, workdir):
    # Short hand-made decision rows (~1-2K tokens): the replayed smoke rows run to 5-8K
    # SmolLM2 tokens, and with the LoRA request vLLM-CPU refused them as longer than
    # max_model_len=8192 although base requests of the same prompts passed (left open).
    from doctrine.spec import resolve_doctrine
    from eval.workloads.fixtures import held_out_rows

    rows_dir = workdir / "short_rows" / "test"
    rows_dir.mkdir(parents=True, exist_ok=True)
    (rows_dir / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in held_out_rows(resolve_doctrine("v1"), 3)))
    out = workdir / "eval"
    workloads = json.dumps([{"name": "held_out", "settings": {"data_dir": str(workdir / "short_rows"), "split": "test",
                                                               "limit": 3}}])
    cmd = [sys.executable, "-m", "eval", "run", "configs/eval/smoke.yaml", "--out", str(out),
           "backend.name=vllm", f"backend.model={adapter_run['base']}",
           f"backend.adapter_dir={adapter_run['adapter']}",
           f"backend.settings={{max_lora_rank: {adapter_run['rank']}, max_model_len: 4096, "
           f"gpu_memory_utilization: {MEM}}}",
           "arms=[base_slim, distilled]", f"workloads={workloads}", "concurrency=1", "max_tokens=24"]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-4000:]
    from eval.harness import load_results
    from eval.report import summarise_run

    results = load_results(out)
    assert len(results) == 6
    for r in results:
        call = r["calls"][0]
        assert call["prompt_tokens"] > 0 and call["completion_tokens"] > 0 and "raw_text" in call
    by_arm = {a: [r["calls"][0]["raw_text"] for r in results if r["arm"] == a] for a in ("base_slim", "distilled")}
    assert by_arm["base_slim"] != by_arm["distilled"]  # the LoRA request changed the outputs
    arms = summarise_run(out)["workloads"]["held_out"]["arms"]
    for arm in ("base_slim", "distilled"):
        assert arms[arm]["prefix_cache_queries"] > 0
        assert 0.0 <= arms[arm]["prefix_cache_hit_rate"] <= 1.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_openai_backend_on_a_vllm_server(adapter_run, workdir):
    tmp_path = workdir
    from eval.backends import Request
    from plumbing.openai_backend import OpenAIBackend

    port = _free_port()
    log = open(tmp_path / "server.log", "w")
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", adapter_run["base"],
           "--served-model-name", "base", "--enable-lora", "--lora-modules",
           f"{adapter_run['name']}={adapter_run['adapter']}", "--max-lora-rank", str(adapter_run["rank"]),
           "--chat-template", str(adapter_run["adapter"] / "chat_template.jinja"),
           "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
           "--max-model-len", "4096", "--gpu-memory-utilization", MEM, "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        base_url = f"http://127.0.0.1:{port}/v1"
        deadline = time.time() + 600
        while time.time() < deadline:
            assert proc.poll() is None, (tmp_path / "server.log").read_text()[-4000:]
            try:
                with urllib.request.urlopen(base_url + "/models", timeout=5) as r:
                    names = {m["id"] for m in json.loads(r.read())["data"]}
                    break
            except OSError:
                time.sleep(3)
        else:
            pytest.fail("vLLM server did not come up: " + (tmp_path / "server.log").read_text()[-4000:])
        assert {"base", adapter_run["name"]} <= names
        from doctrine.spec import resolve_doctrine
        from eval.workloads.fixtures import held_out_rows

        row = held_out_rows(resolve_doctrine("v1"), 1)[0]
        be = OpenAIBackend(base_url=base_url, model="base", adapter_model=adapter_run["name"])
        base = be.complete(Request(row["messages"][:-1], row["tools"], max_tokens=24))
        lora = be.complete(Request(row["messages"][:-1], row["tools"], use_adapter=True, max_tokens=24))
        for out in (base, lora):
            assert out.prompt_tokens > 500 and 0 < out.completion_tokens <= 24
            assert isinstance(out.message["content"], str)
        again = be.complete(Request(row["messages"][:-1], row["tools"], max_tokens=24))
        assert again.raw_text == base.raw_text  # greedy
        stats = be.stats()
        assert stats["prefix_cache_queries"] > 0 and stats["prefix_cache_hits"] > 0  # the repeated prompt hit
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the server and the workers it started
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
