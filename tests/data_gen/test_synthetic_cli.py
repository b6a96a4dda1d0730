"""``python -m data_gen synthetic`` and determinism across runs and processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from data_gen.__main__ import main
from data_gen.synthetic import FAMILIES, SessionSize, generate
from doctrine.session import Session

TINY = ["--steps", "4", "--lines", "3,9", "--probes", "1"]
TINY_SIZE = SessionSize(steps=4, tool_output_lines=(3, 9), probes=1)


def test_same_inputs_give_identical_json_and_seeds_differ():
    for f in FAMILIES:
        a, b = generate(f, 5, TINY_SIZE).to_json(), generate(f, 5, TINY_SIZE).to_json()
        assert a == b
        assert generate(f, 6, TINY_SIZE).to_json() != a
        assert generate(f, 5, SessionSize(steps=5, tool_output_lines=(3, 9), probes=1)).session_id != json.loads(a)["session_id"]


def test_a_subprocess_with_another_hash_seed_generates_the_same_bytes(project_root):
    env = {**os.environ, "PYTHONHASHSEED": "4242", "TZ": "Pacific/Chatham"}  # no hash(), no local time
    out = subprocess.run([sys.executable, "-m", "data_gen", "synthetic", "all", "--seed", "3", "--n", "2", *TINY],
                         capture_output=True, text=True, env=env, cwd=project_root, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    expected = [generate(f, seed, TINY_SIZE).to_json() for f in FAMILIES for seed in (3, 4)]
    assert lines == expected
    assert len(out.stderr.strip().splitlines()) == len(expected)  # one summary per session, on stderr


def test_out_file_holds_valid_sessions_and_a_summary_per_session(tmp_path, capsys):
    path = tmp_path / "sub" / "syn.jsonl"
    assert main(["synthetic", "py_bughunt", "--seed", "2", "--n", "3", *TINY, "--out", str(path)]) == 0
    rows = path.read_text(encoding="utf-8").splitlines()
    sessions = [Session.from_dict(json.loads(r)).validate() for r in rows]
    assert [s.seed for s in sessions] == [2, 3, 4]
    assert all(s.family == "py_bughunt" and sum(st.kind == "task" for st in s.steps) == 4 for s in sessions)
    out = capsys.readouterr().out.splitlines()
    summaries = [ln for ln in out if ln.startswith("syn-py_bughunt-")]
    assert len(summaries) == 3
    for s, ln in zip(sessions, summaries, strict=True):
        assert ln.startswith(s.session_id) and f"messages={len(s.messages)}" in ln and f"facts={len(s.facts)}" in ln
        assert "tokens~" in ln
    assert not list(tmp_path.glob("sub/.*.tmp")), "no temp file left behind"


@pytest.mark.parametrize("argv", [["--lines", "9"], ["--lines", "0,4"], ["--lines", "a,b"], ["--steps", "2"],
                                  ["--n", "0"], ["--seed", "-1"]])
def test_bad_arguments_fail_with_a_message(argv, capsys):
    assert main(["synthetic", "ts_repo", *argv]) == 2
    assert "error" in capsys.readouterr().err


def test_unknown_family_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit):
        main(["synthetic", "marathon"])
    assert "invalid choice" in capsys.readouterr().err
