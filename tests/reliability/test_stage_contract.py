"""One stage contract, through the real commands: ``dtw data``, ``dtw train`` and ``dtw eval``
each skip a complete folder of the same inputs, refuse one of other inputs with the
difference named, redo it with ``--force``, and go on after an interruption where the stage
can (a training from its checkpoints after a kill, an eval from its case files); a data build
cut short starts again. The tiny model, short training rows and the oracle backend: CPU,
4-7 minutes on 2 busy cores (marked slow)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from plumbing.runs import read_manifest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
EVAL = Path(__file__).with_name("fixtures") / "oracle_eval.yaml"  # the oracle backend: no model


def dtw(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline.dtw", *args], cwd=ROOT, env=ENV, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("contract") / "data"
    done = dtw("data", "configs/data/smoke.yaml", "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    return out


def test_dtw_data_skips_refuses_forces_and_restarts_a_cut_build(tmp_path):
    out = tmp_path / "data"
    assert dtw("data", "configs/data/smoke.yaml", "--out", str(out)).returncode == 0
    again = dtw("data", "configs/data/smoke.yaml", "--out", str(out))
    assert again.returncode == 0 and again.stdout.startswith("[skip] data: "), again.stdout
    changed = dtw("data", "configs/data/smoke.yaml", "--out", str(out), "replay.horizon=3")
    assert changed.returncode == 2 and "replay.horizon: 2 -> 3" in changed.stderr and "--force" in changed.stderr
    assert len(changed.stderr.strip().splitlines()) == 1, changed.stderr  # one line
    assert read_manifest(out)["config"]["replay"]["horizon"] == 2  # refused: nothing rebuilt
    forced = dtw("data", "configs/data/smoke.yaml", "--out", str(out), "replay.horizon=3", "--force")
    assert forced.returncode == 0 and read_manifest(out)["config"]["replay"]["horizon"] == 3
    # A build cut short (its shards, no manifest) cannot resume: the next one starts again,
    # whatever it was started from.
    (out / "manifest.json").unlink()
    restarted = dtw("data", "configs/data/smoke.yaml", "--out", str(out))
    assert restarted.returncode == 0 and read_manifest(out)["config"]["replay"]["horizon"] == 2


def _killed_after_a_checkpoint(cmd: list[str], ckpts: Path) -> None:
    """Start ``cmd`` and kill it (SIGKILL, no clean-up) once a checkpoint is on disk."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    try:
        while time.time() < deadline and proc.poll() is None:
            if any((c / "trainer_state.json").is_file() for c in ckpts.glob("checkpoint-*")):
                proc.send_signal(signal.SIGKILL)
                break
            time.sleep(0.02)
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == -signal.SIGKILL, f"the training ended (exit {rc}) before it could be killed"


def test_dtw_train_resumes_after_a_kill_and_skips_refuses_forces(sft_rows, tmp_path):
    run = tmp_path / "run"
    stage = run / "train"
    common = ["configs/train/smoke.yaml", "--out", str(run), f"data.dir={sft_rows}", "trainer.save_steps=1"]
    _killed_after_a_checkpoint([sys.executable, "-m", "pipeline.dtw", "train", *common, "trainer.max_steps=8"],
                               stage / "checkpoints")
    assert read_manifest(stage) is None  # killed: incomplete
    # The checkpoints are of a 40-step run: going on under another recipe would mix two trainings.
    other = dtw("train", *common, "trainer.max_steps=9")
    assert other.returncode == 2 and "was started (interrupted)" in other.stderr
    assert "trainer.max_steps: 8 -> 9" in other.stderr and "--force" in other.stderr
    resumed = dtw("train", *common, "trainer.max_steps=8")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    metrics = json.loads((stage / "metrics.json").read_text())
    assert metrics["global_step"] == 8 and metrics["resumed_from"].startswith("checkpoint-")
    again = dtw("train", *common, "trainer.max_steps=8")
    assert again.returncode == 0 and "[skip] train: " in again.stdout
    changed = dtw("train", *common, "trainer.max_steps=3")
    assert changed.returncode == 2 and "trainer.max_steps: 8 -> 3" in changed.stderr
    assert "was computed from other inputs" in changed.stderr
    forced = dtw("train", *common, "trainer.max_steps=3", "--force")
    assert forced.returncode == 0, forced.stderr[-2000:]
    metrics = json.loads((stage / "metrics.json").read_text())
    assert metrics["global_step"] == 3 and metrics["resumed_from"] is None  # afresh: old checkpoints removed
    assert read_manifest(stage)["config"]["trainer"]["max_steps"] == 3


def test_dtw_eval_resumes_its_cases_and_skips_refuses_forces(data, tmp_path):
    recipe = tmp_path / "eval.yaml"
    recipe.write_text(EVAL.read_text())
    out = tmp_path / "eval"
    common = [str(recipe), "--out", str(out), f"data_dir={data}"]
    cut = dtw("eval", *common, "--max-cases", "1")  # interrupted after one case
    assert cut.returncode == 1 and read_manifest(out) is None
    other = dtw("eval", *common, "max_tokens=65")
    assert other.returncode == 2 and "max_tokens: 64 -> 65" in other.stderr and "--force" in other.stderr
    resumed = dtw("eval", *common)
    assert resumed.returncode == 0 and "(1 already done)" in resumed.stderr, resumed.stderr[-2000:]
    manifest = read_manifest(out)
    assert manifest["counts"]["cases"] == 4
    again = dtw("eval", *common)
    assert again.returncode == 0 and "already done" in again.stderr and read_manifest(out) == manifest
    changed = dtw("eval", *common, "max_tokens=65")
    assert changed.returncode == 2 and "was computed from other inputs" in changed.stderr
    forced = dtw("eval", *common, "max_tokens=65", "--force")
    assert forced.returncode == 0 and "(0 already done)" in forced.stderr
    assert read_manifest(out)["config"]["max_tokens"] == 65
