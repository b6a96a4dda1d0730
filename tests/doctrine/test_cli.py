"""``python -m doctrine``: show, hash, export-prompt-set, the conform fallback, fast --help."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from doctrine import cli
from doctrine.render.prompts import EXAMPLE_VIEWS, render_nudge, render_system_prompt
from doctrine.spec import load_doctrine

FIXTURES = Path(__file__).parent / "fixtures" / "versions"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_hash_prints_version_and_sha(capsys):
    rc, out, _ = run(capsys, "hash")
    assert rc == 0
    assert out == f"v1 {load_doctrine('v1').sha256}\n"
    assert re.fullmatch(r"v1 [0-9a-f]{64}\n", out)
    rc, out, _ = run(capsys, "hash", "--root", str(FIXTURES), "--all")
    assert out.split() == ["tiny", load_doctrine("tiny", root=FIXTURES).sha256]


def test_show_system_and_parts(capsys):
    doc = load_doctrine("v1")
    rc, out, _ = run(capsys, "show")
    assert rc == 0 and out == render_system_prompt(doc) + "\n"
    rc, out, _ = run(capsys, "show", "--mode", "distilled", "--part", "nudge-tier3")
    assert out == render_nudge(EXAMPLE_VIEWS["nudge-tier3"], doc, "distilled") + "\n"
    rc, out, _ = run(capsys, "show", "--part", "tools", "--mode", "distilled")
    assert [t["function"]["name"] for t in json.loads(out)] == ["compress", "decompress", "search_context", "acp_status"]
    rc, out, _ = run(capsys, "show", "--part", "nudge-gentle", "--mode", "distilled", "--nudge-style", "none")
    assert rc == 0 and out == ""


def test_show_base_prompt(capsys, tmp_path):
    (tmp_path / "base.txt").write_text("HOST")
    rc, out, _ = run(capsys, "show", "--base-prompt", str(tmp_path / "base.txt"))
    assert out.startswith("HOST\n\n---\n\n")
    rc, _, err = run(capsys, "show", "--base-prompt", str(tmp_path / "missing.txt"))
    assert rc == 1 and "missing.txt" in err


def test_binary_base_prompt_is_a_one_line_error(capsys, tmp_path):
    (tmp_path / "base.bin").write_bytes(b"\xff\xfe\x00\x01binary")
    rc, out, err = run(capsys, "show", "--base-prompt", str(tmp_path / "base.bin"))
    assert rc == 1 and out == ""
    assert err.count("\n") == 1 and "--base-prompt" in err and "not UTF-8" in err and "base.bin" in err


def test_override_load_bearing_without_flag_fails_and_names_it(capsys, tmp_path):
    (tmp_path / "p.md").write_text("PHIL")
    (tmp_path / "h.md").write_text("HEAD")
    rc, out, err = run(capsys, "show", "--override", f"philosophy={tmp_path / 'p.md'}",
                       "--override", f"nudge-gentle={tmp_path / 'h.md'}")
    assert rc != 0 and out == ""
    assert "philosophy" in err and "nudge-gentle" not in err
    rc, out, _ = run(capsys, "show", "--override", f"philosophy={tmp_path / 'p.md'}", "--acknowledge-risk")
    assert rc == 0 and "PHIL" in out
    rc, out, _ = run(capsys, "show", "--part", "nudge-gentle", "--override", f"nudge-gentle={tmp_path / 'h.md'}")
    assert rc == 0 and out.startswith("HEAD\n\n")


def test_bad_override_arguments(capsys, tmp_path):
    rc, _, err = run(capsys, "show", "--override", "philosophy")
    assert rc == 1 and "SECTION=FILE" in err
    rc, _, err = run(capsys, "show", "--override", f"intro={tmp_path / 'nope.md'}")
    assert rc == 1 and "nope.md" in err and "intro" in err


def test_override_exit_status_from_a_real_process(tmp_path):
    (tmp_path / "t.md").write_text("T")
    proc = subprocess.run([sys.executable, "-m", "doctrine", "show", "--override", f"tier2={tmp_path / 't.md'}"],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "tier2" in proc.stderr


def test_tokens_uses_the_counter(capsys, monkeypatch):
    monkeypatch.setattr(cli, "_token_counter", lambda: (lambda text: len(text.split())))
    rc, out, _ = run(capsys, "show", "--mode", "distilled", "--tokens")
    text = render_system_prompt(load_doctrine("v1"), "distilled")
    assert rc == 0
    assert out.splitlines()[-1] == (
        f"# distilled system: chars={len(text)} tokens={len(text.split())} ({cli.TOKENIZER_SPEC})"
    )


def test_tokens_without_tokenizer_is_an_error(capsys, monkeypatch):
    def broken():
        raise ImportError("no plumbing.models")

    monkeypatch.setattr(cli, "_token_counter", broken)
    rc, _, err = run(capsys, "show", "--tokens")
    assert rc == 1 and "plumbing.models" in err


def test_export_prompt_set_roundtrip(capsys, tmp_path):
    rc, out, _ = run(capsys, "export-prompt-set", str(tmp_path / "ps"))
    assert rc == 0 and out.strip().endswith("manifest.json")
    rc, via_set, _ = run(capsys, "show", "--part", "nudge-emergency", "--prompt-set", str(tmp_path / "ps"),
                         "--acknowledge-risk")
    rc, distilled, _ = run(capsys, "show", "--part", "nudge-emergency", "--mode", "distilled")
    assert via_set == distilled
    rc, _, err = run(capsys, "show", "--prompt-set", str(tmp_path / "ps"))
    assert rc == 1 and "how-to-compress" in err


def test_help_is_fast_and_imports_no_torch():
    code = ("import sys; from doctrine.cli import COMMANDS; from plumbing.subcommands import build_parser; "
            "[build_parser('d', None, COMMANDS, [name]) for name in COMMANDS]; "
            "print('torch' in sys.modules, 'transformers' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.split() == ["False", "False"]
    proc = subprocess.run([sys.executable, "-m", "doctrine", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "show" in proc.stdout and "hash" in proc.stdout


def test_unknown_version(capsys):
    rc, _, err = run(capsys, "hash", "--version", "v42")
    assert rc == 1 and "v42" in err


@pytest.mark.parametrize("argv", [["show", "--part", "bogus"], ["show", "--mode", "slim"]])
def test_usage_errors_exit_2(argv):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2


def test_no_command_prints_the_commands_and_exits_2(capsys):
    assert cli.main([]) == 2
    assert "export-prompt-set" in capsys.readouterr().out
