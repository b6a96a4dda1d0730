"""The conform command: JSON and table output, exit codes, bad input."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from doctrine.conform.cli import register, run

REPO = Path(__file__).resolve().parents[3]


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command").add_parser("conform"))
    return parser.parse_args(["conform", *argv])


def test_register_adds_conform_with_run():
    args = parse(["--source", "a.jsonl", "--summary", "b.md", "--tier", "2"])
    assert args.func is run and args.tier == 2 and args.table is False


@pytest.mark.parametrize("which,passed", [("good", True), ("bad_paraphrase", False)])
def test_json_report_exit_zero_pass_or_fail(which, passed, fixtures_dir, capsys):
    d = fixtures_dir / "pytest_failure"
    rc = run(parse(["--source", str(d / "source.jsonl"), "--summary", str(d / f"{which}.md")]))
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    assert report["passed"] is passed
    assert 0.0 <= report["score"] <= 1.0
    assert report["classes"]["error_strings"]["found"] >= 1


def test_table_output(fixtures_dir, capsys):
    d = fixtures_dir / "log_triage"
    rc = run(parse(["--source", str(d / "source.jsonl"), "--summary", str(d / "bad_log_paste.md"), "--table"]))
    out = capsys.readouterr().out
    assert rc == 0
    assert "error_strings" in out and "FAIL" in out and "DROP violations" in out


def test_bad_jsonl_line_names_file_and_line(tmp_path, capsys):
    src = tmp_path / "src.jsonl"
    src.write_text('{"role": "user", "content": "fix the bug please"}\n\n{"role": "tool", "content": oops}\n')
    summ = tmp_path / "s.md"
    summ.write_text("x" * 80)
    assert run(parse(["--source", str(src), "--summary", str(summ)])) == 2
    err = capsys.readouterr().err
    assert f"{src}:3" in err and "malformed JSON" in err


def test_bad_message_names_its_line(tmp_path, capsys):
    src = tmp_path / "src.jsonl"
    src.write_text('{"role": "user", "content": "fix the bug please"}\n\n\n{"content": "no role"}\n')
    summ = tmp_path / "s.md"
    summ.write_text("x" * 80)
    assert run(parse(["--source", str(src), "--summary", str(summ)])) == 2
    err = capsys.readouterr().err
    assert f"{src}:4" in err and "role" in err


@pytest.mark.parametrize("case", ["no_source", "no_summary", "empty_source", "not_object"])
def test_unreadable_input_exits_2(case, tmp_path, capsys):
    src, summ = tmp_path / "src.jsonl", tmp_path / "s.md"
    src.write_text({"empty_source": "\n\n", "not_object": "[1, 2]\n"}.get(case, '{"role": "user", "content": "hi"}\n'))
    summ.write_text("x" * 80)
    if case == "no_source":
        src.unlink()
    if case == "no_summary":
        summ.unlink()
    assert run(parse(["--source", str(src), "--summary", str(summ)])) == 2
    assert "error:" in capsys.readouterr().err


def test_python_dash_m_doctrine_conform(fixtures_dir):
    d = fixtures_dir / "dependency_bump"
    proc = subprocess.run(
        [sys.executable, "-m", "doctrine", "conform", "--source", str(d / "source.jsonl"),
         "--summary", str(d / "good.md")], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["passed"] is True and set(report) >= {"score", "passed", "classes"}


@pytest.mark.parametrize("line, reason", [
    ("[" * 100000 + "]" * 100000, "nested too deeply"),
    ('{"role": "user", "content": "x", "n": ' + "1" * 5000 + "}", "too many digits"),
    (b'{"role": "user", "content": "\xff"}', "cannot read"),
    ('{"role": 5, "content": ["x", 3]}', "role"),
    ('{"role": "user", "content": [{"type": "text", "text": 5}]}', ""),
])
def test_malformed_sources_are_one_line_errors(tmp_path, capsys, line, reason):
    src = tmp_path / "src.jsonl"
    first = b'{"role": "user", "content": "fix the bug please"}\n'
    src.write_bytes(first + (line if isinstance(line, bytes) else line.encode()) + b"\n")
    summ = tmp_path / "s.md"
    summ.write_text("fix the bug")
    rc = run(parse(["--source", str(src), "--summary", str(summ)]))
    err = capsys.readouterr().err
    assert rc in (0, 2) and "Traceback" not in err
    if rc == 2:
        assert err.count("\n") == 1 and reason in err and str(src) in err
    else:
        assert not reason  # a readable range is scored, not refused
