"""What makes a LoRA adapter folder usable: the one check export, the eval and resume apply.

:func:`check_adapter` reads ``adapter_config.json`` and the safetensors header of
``adapter_model.safetensors`` (no tensor is loaded) and refuses, in one line, a folder whose
weights are missing or truncated, whose LoRA tensors' rank disagrees with the config's ``r``
(or ``rank_pattern``), or that holds LoRA tensors for modules outside ``target_modules``.
:func:`complete_adapter` also asks whether the folder is finished (an exported adapter's
manifest, a trainer checkpoint's state) and returns the file whose sha256 a consumer records.
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path
from typing import Any

from plumbing.runs import MANIFEST, StageInputError, read_manifest, stage_files

__all__ = ["AdapterError", "check_adapter", "complete_adapter", "safetensors_header"]

CONFIG = "adapter_config.json"
WEIGHTS = "adapter_model.safetensors"
_LORA = re.compile(r"(?P<module>.+)\.lora_(?P<which>[AB])(?:\.[^.]+)?\.weight")
# What PEFT, vLLM and the eval backends read from an adapter folder.
READ_FILES = ("adapter_model*", "adapter_config.json", "tokenizer*", "chat_template*", "special_tokens_map.json")
_MAX_HEADER = 100 << 20  # the safetensors format's own limit on its JSON header


class AdapterError(ValueError):
    """An adapter folder that cannot be used (unfinished, truncated, inconsistent); one line."""


def safetensors_header(path: str | Path) -> dict[str, Any]:
    """The tensor table of a safetensors file (name -> dtype, shape, data_offsets), checked to
    be complete: the header parses and the data section is exactly as long as it says."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                raise AdapterError(f"{path}: truncated safetensors file ({size} bytes)")
            (n,) = struct.unpack("<Q", head)
            if n > min(_MAX_HEADER, size - 8):
                raise AdapterError(f"{path}: truncated or not a safetensors file (header of {n} bytes, "
                                   f"file of {size})")
            header = json.loads(fh.read(n))
    except OSError as exc:
        raise AdapterError(f"{path}: unreadable ({exc.strerror or exc})") from None
    except ValueError as exc:
        if isinstance(exc, AdapterError):
            raise
        raise AdapterError(f"{path}: not a safetensors file (its header is not JSON)") from None
    if not isinstance(header, dict):
        raise AdapterError(f"{path}: not a safetensors file (its header is not a table)")
    tensors = {k: v for k, v in header.items() if k != "__metadata__"}
    try:
        end = max((int(v["data_offsets"][1]) for v in tensors.values()), default=0)
    except (TypeError, KeyError, IndexError, ValueError):
        raise AdapterError(f"{path}: not a safetensors file (a tensor has no data offsets)") from None
    if end != size - 8 - n:
        raise AdapterError(f"{path}: truncated safetensors file (the header says {end} data bytes, "
                           f"the file holds {size - 8 - n})")
    return tensors


def _expected_rank(module: str, config: dict[str, Any]) -> int | None:
    pattern = config.get("rank_pattern") or {}
    for key, rank in pattern.items() if isinstance(pattern, dict) else ():
        if module == key or module.endswith("." + key) or re.fullmatch(key, module):
            return rank
    r = config.get("r")
    return r if isinstance(r, int) and not isinstance(r, bool) else None


def check_adapter(folder: str | Path) -> dict[str, Any]:
    """The folder's ``adapter_config.json``, after checking the weights agree with it: the
    safetensors file is whole, every LoRA tensor's rank is the config's, and every module it
    adapts is one of ``target_modules`` (when that is a list). An :class:`AdapterError`
    naming the first problem (and how many more) otherwise."""
    folder = Path(folder)
    if not folder.is_dir():
        raise AdapterError(f"{folder}: no such adapter folder")
    try:
        config = json.loads((folder / CONFIG).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AdapterError(f"{folder}: no {CONFIG}") from None
    except (OSError, ValueError):
        raise AdapterError(f"{folder / CONFIG}: not readable JSON") from None
    if not isinstance(config, dict):
        raise AdapterError(f"{folder / CONFIG}: not a mapping")
    if not (folder / WEIGHTS).is_file():
        raise AdapterError(f"{folder}: no {WEIGHTS} (adapter weights are read as safetensors only)")
    tensors = safetensors_header(folder / WEIGHTS)
    targets = config.get("target_modules")
    problems, lora = [], 0
    for name, info in sorted(tensors.items()):
        m = _LORA.fullmatch(name)
        if not m:
            continue
        lora += 1
        module, shape = m["module"], info.get("shape") if isinstance(info, dict) else None
        leaf = module.rsplit(".", 1)[-1]
        # PEFT matches a target by the module name's last components ("q_proj", "self_attn.q_proj").
        if isinstance(targets, list) and not any(module == t or module.endswith(f".{t}") for t in map(str, targets)):
            problems.append(f"{name} adapts {leaf!r}, which is not in target_modules {targets}")
            continue
        rank = _expected_rank(module, config)
        if not (isinstance(shape, list) and len(shape) == 2):
            problems.append(f"{name} has shape {shape}, not a matrix")
        elif rank is not None and shape[0 if m["which"] == "A" else 1] != rank:
            problems.append(f"{name} has rank {shape[0 if m['which'] == 'A' else 1]}, the config says r={rank}")
    if not lora:
        problems.append(f"{WEIGHTS} holds no LoRA tensor")
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise AdapterError(f"{folder}: the adapter's weights do not match its {CONFIG}: {problems[0]}{more}")
    return config


def _trainer_state_ok(folder: Path) -> bool:
    try:
        state = json.loads((folder / "trainer_state.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(state, dict) and isinstance(state.get("global_step"), int)


def complete_adapter(folder: str | Path) -> Path:
    """Check a finished, valid adapter folder and return the file that identifies it (its
    sha256 is what a consumer records as its input): an exported adapter's ``manifest.json``
    (written last by ``dtw export``; the files it lists unchanged, no other weights beside
    them), or a trainer checkpoint's weights (a
    ``checkpoint-N`` folder whose ``trainer_state.json`` the trainer wrote after them). A
    folder that is neither (what a killed export leaves: files and no manifest) is refused."""
    folder = Path(folder)
    if not folder.is_dir():
        raise AdapterError(f"{folder}: no such adapter folder")
    manifest = read_manifest(folder)
    if manifest is not None:
        if manifest.get("stage") != "adapter":
            raise AdapterError(f"{folder}: holds the {manifest.get('stage')} stage's files, not an adapter")
        try:  # the files a loader reads are the ones export listed, unchanged, and no others
            stage_files(folder, ".", READ_FILES)
        except StageInputError as exc:
            raise AdapterError(str(exc)) from None
        check_adapter(folder)
        return folder / MANIFEST
    if re.fullmatch(r"checkpoint-\d+", folder.name) and _trainer_state_ok(folder):
        check_adapter(folder)
        return folder / WEIGHTS
    raise AdapterError(f"{folder}: not a finished adapter (no {MANIFEST}: the export did not finish, "
                       "e.g. it was killed); rerun `dtw export` on its run")
