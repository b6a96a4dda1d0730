"""A diverged training run never ships (high severity; it failed so: ``trainer.learning_rate=.inf``
trained, exported and exited 0 with every adapter weight non-finite). The loader now
refuses inf itself, so a finite but absurd rate makes the weights overflow here."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest


def _build_sft_data(root: Path, project_root: Path) -> Path:
    spec = importlib.util.spec_from_file_location("train_fixture_rows", project_root / "tests/train/conftest.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod.build_sft_data(root, n_train=6, n_val=2)


def test_non_finite_weights_fail_the_run_and_the_export(project_root, tmp_path, capsys):
    import torch
    from safetensors.torch import load_file, save_file

    from train.__main__ import main
    from train.export import ExportError, export_adapter

    data = _build_sft_data(tmp_path / "data", project_root)
    recipe = str(project_root / "configs/train/smoke.yaml")
    common = [f"data.dir={data}", "trainer.max_steps=2", "trainer.save_steps=100"]

    # 1. Training that diverges exits non-zero before anything is marked complete.
    run = tmp_path / "diverged"
    rc = main([recipe, "--out", str(run), *common, "trainer.learning_rate=1.0e+30"])
    err = capsys.readouterr().err
    assert rc != 0
    assert "diverged" in err and "non-finite" in err, err
    assert not (run / "train" / "manifest.json").exists()
    assert not (run / "train" / "final").exists()

    # 2. An adapter whose weights turned non-finite after training is refused by export.
    ok = tmp_path / "ok"
    assert main([recipe, "--out", str(ok), *common, "trainer.max_steps=1"]) == 0
    weights = ok / "train" / "final" / "adapter_model.safetensors"
    tensors = load_file(str(weights))
    name = sorted(tensors)[0]
    tensors[name] = torch.full_like(tensors[name], float("nan"))
    save_file(tensors, str(weights))
    with pytest.raises(ExportError, match="NaN or inf"):
        export_adapter(ok, log=lambda *_: None)
    assert not (ok / "adapter" / "manifest.json").exists()
