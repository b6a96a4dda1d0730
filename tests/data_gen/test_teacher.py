"""Teacher labels from an OpenAI-compatible endpoint (a local server started here)."""

from __future__ import annotations

import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from data_gen.replay import replay_session
from data_gen.sources.teacher import TEACHER_KINDS, TeacherLabeler
from data_gen.synthetic import SessionSize, generate
from doctrine.label import LabelSkipped
from doctrine.spec import load_doctrine
from plumbing.openai_backend import OpenAIBackend


class FakeTeacher:
    """Serves /v1/chat/completions with whatever reply the test sets; records requests."""

    def __init__(self):
        self.reply: dict = {"content": "ok"}
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                outer.headers.append(dict(self.headers))
                msg = {"role": "assistant", **outer.reply}
                data = json.dumps({"choices": [{"message": msg}],
                                   "usage": {"prompt_tokens": 100, "completion_tokens": 20}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


@pytest.fixture
def teacher(monkeypatch):
    monkeypatch.setenv("DTW_TEST_TEACHER_KEY", "sk-test-teacher-0123456789")
    srv = FakeTeacher()
    yield srv
    srv.close()


@pytest.fixture(scope="module")
def points():
    """Decision points where the doctrine's labeler compresses, with its reference labels."""
    doc = load_doctrine("v1")
    out = []
    for family in ("py_bughunt", "dep_migration", "ts_repo"):
        session = generate(family, 0, SessionSize(steps=8, tool_output_lines=(8, 40)))
        for s in replay_session(session, window=4096, gate="aggressive", doctrine=doc):
            if s.label.kind in TEACHER_KINDS and s.label.action["type"] == "compress":
                out.append(s)
    assert out
    return doc, out


def labeler(srv, counts):
    backend = OpenAIBackend(base_url=srv.url, model="teacher-x", api_key_env="DTW_TEST_TEACHER_KEY")
    return TeacherLabeler(backend, model_name="teacher-x", counts=counts)


def call(args) -> dict:
    return {"content": "", "tool_calls": [{"id": "t1", "type": "function", "function": {
        "name": "compress", "arguments": json.dumps(args) if not isinstance(args, str) else args}}]}


def test_a_valid_teacher_compress_becomes_the_label(teacher, points):
    doc, samples = points
    sample = samples[0]
    ref = sample.label
    teacher.reply = {"content": "", "tool_calls": ref.message["tool_calls"]}
    counts = Counter()
    label = labeler(teacher, counts)(sample.point, doctrine=doc, horizon=2, seed=0)
    assert label.labeler == "teacher:teacher-x" and label.kind == ref.kind
    assert label.conformance["passed"] and label.action["type"] == "compress"
    assert counts["teacher:accepted_compress"] == 1
    sent = teacher.requests[-1]
    # The teacher's view is doctrine mode: the full rules are in its system prompt.
    assert doc.sections["how-to-compress"].strip().splitlines()[0] in sent["messages"][0]["content"]
    assert {t["function"]["name"] for t in sent["tools"]} >= {"compress", "decompress", "search_context"}
    assert teacher.headers[-1]["Authorization"] == "Bearer sk-test-teacher-0123456789"


@pytest.mark.parametrize("reply,reason", [
    ({"content": '<tool_call>{"name": "compress", "arguments": {oops'}, "unparseable"),
    ({"content": "", "tool_calls": [{"id": "t", "type": "function", "function": {"name": "execute_bash",
                                                                                   "arguments": "{}"}}]},
     "not_a_compress_call"),
    (call({"content": [{"startId": "m90000", "endId": "m90010", "summary": "x" * 80}]}), "kernel_error"),
    (call({"topic": "no content"}), "bad_arguments"),
])
def test_bad_teacher_output_is_rejected_and_counted(teacher, points, reply, reason):
    doc, samples = points
    teacher.reply = reply
    counts = Counter()
    with pytest.raises(LabelSkipped) as err:
        labeler(teacher, counts)(samples[0].point, doctrine=doc, horizon=2, seed=0)
    assert err.value.reason == f"teacher_{reason}"
    assert counts[f"teacher:{reason}"] == 1


def test_a_summary_that_loses_the_doctrine_is_rejected(teacher, points):
    doc, samples = points
    args = json.loads(samples[0].label.message["tool_calls"][0]["function"]["arguments"])
    for entry in args["content"]:
        entry["summary"] = "We looked at some files and ran a few commands; things mostly worked out fine."
    teacher.reply = call(args)
    counts = Counter()
    with pytest.raises(LabelSkipped):
        labeler(teacher, counts)(samples[0].point, doctrine=doc, horizon=2, seed=0)
    assert counts["teacher:conformance"] == 1


def test_a_teacher_refusal_is_kept_with_the_task_action(teacher, points):
    doc, samples = points
    gentle = next(s for s in samples if s.point.nudge.voice == "gentle")
    teacher.reply = {"content": "Not yet: I still need the traceback for the fix."}
    label = labeler(teacher, Counter())(gentle.point, doctrine=doc, horizon=2, seed=0)
    assert label.kind == "refusal" and label.message["content"].startswith("Not yet")


def test_a_build_with_a_broken_teacher_fails_and_counts(teacher, tmp_path):
    from pathlib import Path

    from data_gen.build import TeacherFailed, build_curriculum
    from data_gen.recipe import DataRecipe
    from plumbing.recipe_loader import load_config

    teacher.reply = {"content": '<tool_call>{"name": "compress", "arguments": {oops'}
    root = Path(__file__).resolve().parents[2]
    recipe = load_config(root / "configs/data/learn.yaml", DataRecipe, [
        "sources.synthetic.families=[py_bughunt]", "sources.synthetic.sessions_per_family=1",
        "sources.swe_rebench=null", "replay.windows=[4096]", "replay.gates=[aggressive]",
        "sources.teacher.enabled=true", f"sources.teacher.base_url={teacher.url}",
        "sources.teacher.api_key_env=DTW_TEST_TEACHER_KEY"])
    with pytest.raises(TeacherFailed, match=r"kept 0 of \d+ replies; rejected: unparseable \d+") as err:
        build_curriculum(recipe, tmp_path / "data", log=lambda *a: None, progress=False)
    assert "sk-test-teacher" not in str(err.value)
    assert not (tmp_path / "data/manifest.json").exists() and not list(tmp_path.glob("data/*/*.parquet"))
