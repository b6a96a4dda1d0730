"""A tiny, deterministic model of the embedded model's architecture, for tests.

Same family (Llama, as SmolLM2), same tokenizer and chat template as the embedded model,
but a few layers and a small hidden size, randomly initialised from a fixed seed: a test
can train, checkpoint, resume and export it in seconds on a CPU.

    python -m train tiny-model OUT_DIR      # builds it (the embedded model must resolve)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["TinyModelConfig", "write_tiny_model"]


@dataclass(frozen=True)
class TinyModelConfig:
    layers: int = 2
    hidden_size: int = 64
    intermediate_size: int = 128
    heads: int = 4
    kv_heads: int = 2
    max_position_embeddings: int = 8192
    seed: int = 0


def write_tiny_model(out_dir: str | Path, cfg: TinyModelConfig, tokenizer_dir: Path, tokenizer_spec: str) -> Path:
    """Write a tiny Llama with the tokenizer of the model folder ``tokenizer_dir`` (resolved
    from ``tokenizer_spec``, which the folder records) to ``out_dir`` and return it.
    :func:`plumbing.models.build_tiny_model` resolves the spec and calls this.

    The same ``cfg`` always yields byte-identical weights (seeded initialisation).
    """
    import json

    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    out = Path(out_dir)
    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    base = json.loads((Path(tokenizer_dir) / "config.json").read_text())
    config = LlamaConfig(
        vocab_size=base.get("vocab_size", len(tok)),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.layers,
        num_attention_heads=cfg.heads,
        num_key_value_heads=cfg.kv_heads,
        head_dim=cfg.hidden_size // cfg.heads,
        max_position_embeddings=cfg.max_position_embeddings,
        rms_norm_eps=base.get("rms_norm_eps", 1e-5),
        tie_word_embeddings=base.get("tie_word_embeddings", True),
        bos_token_id=base.get("bos_token_id"),
        eos_token_id=base.get("eos_token_id"),
        pad_token_id=base.get("pad_token_id"),
    )
    config.architectures = ["LlamaForCausalLM"]
    # Seed the init and keep the RNG state of the caller untouched.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        model = LlamaForCausalLM(config)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    (out / "dtw_tiny.json").write_text(json.dumps({"tiny": asdict(cfg), "tokenizer": tokenizer_spec}, indent=2))
    return out
