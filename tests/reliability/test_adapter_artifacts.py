"""An adapter is what its manifests say, and export writes only inside its run.

Defects this suite held (it failed so on the code before):
- high: ``dtw eval`` accepted an adapter folder with no manifest (what ``kill -9`` during
  ``dtw export`` leaves), marked the eval complete and recorded no adapter input; its resume
  check hashed only ``*.safetensors`` (a changed ``adapter_model.bin`` went unnoticed);
- high: export copied the adapter from the absolute ``final_adapter`` of the train manifest,
  so a copied run exported the original run's (retrained) weights;
- high: export wrote through a symlinked ``adapter/serving/`` folder, outside the run;
- medium: export accepted an ``adapter_config.json`` whose rank or target modules disagree
  with the weights; a truncated adapter was a 50-60 line traceback in ``dtw eval``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from eval.harness import RunConflict, run_eval
from eval.recipe import EvalRecipe
from plumbing.recipe_loader import load_config
from plumbing.runs import RunFolderError, file_sha256, read_manifest

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "configs/eval/smoke.yaml"
HELD_OUT = [{"name": "held_out", "settings": {"data_dir": "fixtures/held_out", "split": "test", "limit": 2}}]


def quiet(*_a) -> None:
    pass


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    """A run trained one step on the tiny model and exported: runs/a with train/ and adapter/."""
    from plumbing.recipe_loader import load_config as load
    from train.export import export_adapter
    from train.recipe import TrainRecipe
    from train.sft import run_training

    spec = importlib.util.spec_from_file_location("train_fixture_rows", ROOT / "tests/train/conftest.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    root = tmp_path_factory.mktemp("adapters")
    data = mod.build_sft_data(root / "data", n_train=4, n_val=2)
    recipe = load(ROOT / "configs/train/smoke.yaml", TrainRecipe,
                  [f"data.dir={data}", "trainer.max_steps=1", "trainer.save_steps=100"])
    run = root / "runs" / "a"
    run_training(recipe, run, log=quiet)
    export_adapter(run, log=quiet)
    return run


@pytest.fixture
def run(exported, tmp_path) -> Path:
    copy = tmp_path / "runs" / "a"
    shutil.copytree(exported, copy, symlinks=True)
    return copy


def eval_recipe(adapter: Path, *extra: str) -> EvalRecipe:
    return load_config(SMOKE, EvalRecipe, [f"backend.adapter_dir={adapter}", "arms=[distilled]",
                                           f"workloads={json.dumps(HELD_OUT)}", "concurrency=1", *extra])


def scaled(weights: Path, factor: float) -> None:
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(weights))
    save_file({k: v * factor + 0.01 for k, v in tensors.items()}, str(weights))


# ----------------------------------------------------------------------------- eval's adapter input


def test_eval_refuses_an_adapter_whose_export_did_not_finish(run, tmp_path):
    adapter = run / "adapter"
    (adapter / "manifest.json").unlink()  # kill -9 during export: files, marker, no manifest
    out = tmp_path / "eval"
    with pytest.raises(ValueError, match="not a finished adapter .*dtw export"):  # today: complete
        run_eval(eval_recipe(adapter), out, base_dir=SMOKE.parent, log=quiet)
    assert not out.exists()


def test_eval_records_the_adapter_manifest_and_refuses_changed_adapter_files(run, tmp_path):
    adapter = run / "adapter"
    out = tmp_path / "eval"
    assert run_eval(eval_recipe(adapter), out, base_dir=SMOKE.parent, log=quiet).complete
    recorded = read_manifest(out)["inputs"]["adapter"]
    assert recorded["sha256"] == file_sha256(adapter / "manifest.json")
    # Weights beside the exported ones (PEFT reads a .bin where no safetensors is), or edited
    # weights: the adapter is no longer what its manifest says. Today: "all cases already done".
    (adapter / "adapter_model.bin").write_bytes(b"other weights")
    with pytest.raises(ValueError, match="adapter_model.bin: not a file the adapter stage wrote"):
        run_eval(eval_recipe(adapter), out, base_dir=SMOKE.parent, log=quiet)
    (adapter / "adapter_model.bin").unlink()
    scaled(adapter / "adapter_model.safetensors", 2.0)
    with pytest.raises(ValueError, match="adapter_model.safetensors: changed since the adapter stage wrote it"):
        run_eval(eval_recipe(adapter), out, base_dir=SMOKE.parent, log=quiet)


def test_a_checkpoint_adapters_every_file_is_in_the_eval_fingerprint(run, tmp_path):
    ckpt = tmp_path / "checkpoint-1"  # a trainer checkpoint (the learning curve evaluates these)
    ckpt.mkdir()
    for name in ("adapter_config.json", "adapter_model.safetensors"):
        shutil.copyfile(run / "train" / "final" / name, ckpt / name)
    (ckpt / "trainer_state.json").write_text('{"global_step": 1}')
    out = tmp_path / "eval"
    assert run_eval(eval_recipe(ckpt), out, base_dir=SMOKE.parent, log=quiet).complete
    assert read_manifest(out)["inputs"]["adapter"]["sha256"] == file_sha256(ckpt / "adapter_model.safetensors")
    (ckpt / "adapter_model.bin").write_bytes(b"other weights")
    with pytest.raises(RunConflict, match="adapter_sha256"):  # today: only *.safetensors was hashed
        run_eval(eval_recipe(ckpt), out, base_dir=SMOKE.parent, log=quiet)


def test_a_truncated_adapter_is_one_line_in_dtw_eval(run, tmp_path):
    weights = run / "adapter" / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    out = tmp_path / "eval"
    p = subprocess.run([sys.executable, "-m", "pipeline.dtw", "eval", str(SMOKE), "--out", str(out),
                        "backend.name=hf", "backend.model=tiny:smollm2-135m-instruct",
                        f"backend.adapter_dir={run / 'adapter'}", "arms=[distilled]",
                        f"workloads={json.dumps(HELD_OUT)}", "concurrency=1", "max_tokens=4"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300, env=dict(os.environ, HF_HUB_OFFLINE="1"))
    # today: a 50-60 line traceback from safetensors inside PEFT
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-3000:]
    assert p.stderr.strip().splitlines()[-1].startswith("error: ") and "truncated" in p.stderr


# ----------------------------------------------------------------------------- export


def test_a_copied_run_exports_its_own_weights(run, tmp_path):
    from train.export import ExportError, export_adapter

    copy = tmp_path / "runs" / "b"
    shutil.copytree(run, copy, symlinks=True)
    scaled(run / "train" / "final" / "adapter_model.safetensors", 3.0)  # run a retrained
    export_adapter(copy, log=quiet)
    shipped = (copy / "adapter" / "adapter_model.safetensors").read_bytes()
    # today: b's adapter holds a's new weights (the manifest named a's final folder)
    assert shipped == (copy / "train" / "final" / "adapter_model.safetensors").read_bytes()
    assert shipped != (run / "train" / "final" / "adapter_model.safetensors").read_bytes()
    # An older manifest's absolute path is used only inside the run being exported.
    m = json.loads((copy / "train" / "manifest.json").read_text())
    m["final_adapter"] = str(run / "train" / "final")
    (copy / "train" / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ExportError, match="lies outside the run"):
        export_adapter(copy, log=quiet)


@pytest.mark.parametrize("linked", ["adapter/serving", "adapter"])
def test_export_never_writes_through_a_link(run, tmp_path, linked):
    from train.export import export_adapter

    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(run / linked, elsewhere)
    (elsewhere / "manifest.json").write_text('{"mine": true}')  # an unrelated file of that name
    before = snapshot(elsewhere)
    shutil.rmtree(run / linked)
    (run / linked).symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(RunFolderError, match="symbolic link"):  # today: written there
        export_adapter(run, log=quiet)
    assert snapshot(elsewhere) == before


@pytest.mark.parametrize("change, message", [
    ({"target_modules": ["q_proj"]}, "adapts 'k_proj', which is not in target_modules"),
    ({"r": 16}, "has rank 8, the config says r=16"),
])
def test_export_refuses_a_config_that_disagrees_with_the_weights(run, change, message):
    from train.export import ExportError, export_adapter

    cfg_path = run / "train" / "final" / "adapter_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg.update(change)
    cfg_path.write_text(json.dumps(cfg))
    before = snapshot(run / "adapter")
    with pytest.raises(ExportError, match=message):  # today: exported
        export_adapter(run, log=quiet)
    assert snapshot(run / "adapter") == before
