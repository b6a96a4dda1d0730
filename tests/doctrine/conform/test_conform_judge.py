"""The optional model judge: prompt, reply parsing, failures, and a round trip over HTTP."""

from __future__ import annotations

import importlib.util
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from doctrine.conform.judge import judge_messages, judge_summary, parse_verdict

ROOT = Path(__file__).resolve().parents[3]


def test_the_prompt_carries_the_rules_the_source_and_the_summary(load_source, load_summary):
    msgs = judge_messages(load_source("pytest_failure"), load_summary("pytest_failure"))
    assert msgs[0]["role"] == "system" and "KEEP VERBATIM" in msgs[0]["content"]
    user = msgs[1]["content"]
    assert "[m00005]" in user and "decimal.InvalidOperation" in user and "SUMMARY (tier 1)" in user
    assert "<acp" not in user  # rendering tags are not content


@pytest.mark.parametrize("reply,passed,error", [
    ('{"verdict": "pass", "reasons": ["complete"]}', True, None),
    ('Sure. {"verdict": "FAIL", "reasons": ["no error kept"]} Hope that helps', False, None),
    ("looks good to me", None, "no JSON object"),
    ('{"verdict": "maybe"}', None, "verdict must be"),
    ('{"verdict": "pass", ', None, "no JSON object"),
    ('{"verdict": pass}', None, "malformed JSON"),
])
def test_replies_are_read_or_rejected_with_a_reason(reply, passed, error):
    v = parse_verdict(reply)
    assert v.passed is passed
    assert (v.error is None) if error is None else (error in v.error)


def test_a_failing_judge_call_is_an_error_verdict_not_a_crash(load_source):
    def broken(_messages):
        raise ConnectionError("server went away")

    v = judge_summary(load_source("pytest_failure"), "x", complete=broken)
    assert v.passed is None and "server went away" in v.error


class _Judge(BaseHTTPRequestHandler):
    """A stand-in OpenAI-compatible judge: passes summaries that keep the first exact error."""

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = body["messages"][1]["content"].split("SUMMARY (tier", 1)[1]
        ok = "InvalidOperation" in text or "TS2345" in text or "OOMKilled" in text
        reply = json.dumps({"verdict": "pass" if ok else "fail", "reasons": ["error kept" if ok else "no error"]})
        out = json.dumps({"choices": [{"message": {"role": "assistant", "content": reply}}],
                          "usage": {"prompt_tokens": 1, "completion_tokens": 1}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *_):
        pass


def test_the_benchmark_reports_judge_agreement_over_http(capsys):
    server = HTTPServer(("127.0.0.1", 0), _Judge)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        spec = importlib.util.spec_from_file_location("conform_agreement", ROOT / "benchmarks" / "conform_agreement.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        mod.main(["--judge-base-url", f"http://127.0.0.1:{server.server_port}/v1", "--judge-model", "stand-in"])
    finally:
        server.shutdown()
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("judge stand-in"))
    assert "unreadable replies 0" in line
    agree = int(line.split("agrees with readers ")[1].split("/")[0])
    assert 0 < agree < int(out.strip().splitlines()[-1].split("/")[-1])  # a crude judge is not a perfect one
    assert out.strip().splitlines()[-1].startswith("agreement: ")
