"""What a user types into a pipeline run is checked before anything is written (medium and
high severity; each failed so before this round): ``run_name=../escaped`` wrote
outside ``runs/``, ``a/b/c`` nested folders and a NUL byte was a traceback; ``--force
doctrin`` (a typo) or forcing a stage the recipe does not run was silently ignored; a
corrupt ``runs/<name>/timings.json`` crashed every run after its first stage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = str(ROOT / "configs/pipeline/smoke.yaml")


def _one_line(err: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err[-2000:]
    return lines[0]


def _recipe_error(err: str) -> str:
    """A recipe error: the recipe's name, then one line per bad key; never a traceback."""
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 2, err[-2000:]
    return err


def dtw(*argv: str) -> int:
    from pipeline.dtw import main

    return main(["run", PIPELINE, *argv])


@pytest.mark.parametrize("name", ["../escaped", "a/b/c", "nul\x00byte", "..", ".hidden", "", "x" * 65,
                                  "/abs", "line\nbreak", "a..b"])
def test_a_run_name_that_is_not_one_folder_is_refused_in_one_line(tmp_path, capsys, name):
    runs = tmp_path / "runs"
    # As a JSON string (valid YAML), so the NUL byte and the line break reach the recipe.
    assert dtw(f"runs_dir={runs}", f"run_name={json.dumps(name)}", "stages=[doctrine]") == 2
    err = _recipe_error(capsys.readouterr().err)
    assert "run_name" in err and "not a run name" in err, err
    assert not any(tmp_path.rglob("*.json")), "nothing may be written"  # no escaped/, no a/b/c
    assert not (tmp_path / "escaped").exists()
    from plumbing.runs import RunFolderError, run_root

    with pytest.raises(RunFolderError):
        run_root(runs, name)
    # A config built in code (no recipe validation) meets the same rule where the folder is named.
    from pipeline.recipe import PipelineConfig
    from pipeline.runner import run_pipeline
    from plumbing.recipe_loader import ConfigError

    cfg = PipelineConfig.model_construct(**{**PipelineConfig().model_dump(), "runs_dir": str(runs),
                                            "run_name": name})
    with pytest.raises(ConfigError, match="not a run name"):
        run_pipeline(cfg)
    assert not any(tmp_path.rglob("*.json"))


def test_plain_run_names_pass_the_rule(tmp_path):
    from plumbing.runs import run_name_error, run_root

    for name in ("demo", "try2", "smollm2-135m_r16.v3", "A" * 64):
        assert run_name_error(name) is None, name
        assert run_root(tmp_path, name) == tmp_path / name


def test_forcing_a_typo_or_a_stage_the_recipe_does_not_run_is_refused(tmp_path, capsys):
    runs = tmp_path / "runs"
    assert dtw(f"runs_dir={runs}", "run_name=r", "stages=[doctrine]", "--force", "doctrin") == 2
    line = _one_line(capsys.readouterr().err)
    assert "'doctrin' is not a stage" in line and "did you mean 'doctrine'" in line, line
    assert dtw(f"runs_dir={runs}", "run_name=r", "stages=[doctrine]", "--force", "eval") == 2
    line = _one_line(capsys.readouterr().err)
    assert "does not run the eval stage" in line and "doctrine" in line, line
    assert not (runs / "r" / "doctrine").exists()  # refused before any stage


def test_a_corrupt_timings_file_does_not_stop_the_pipeline(tmp_path, capsys):
    runs = tmp_path / "runs"
    args = (f"runs_dir={runs}", "run_name=r", "stages=[doctrine]")
    assert dtw(*args) == 0
    timings = runs / "r" / "timings.json"
    for corrupt in ("{ not json", "[1, 2]"):
        timings.write_text(corrupt)
        capsys.readouterr()
        assert dtw(*args, "--force", "doctrine") == 0, capsys.readouterr().err[-2000:]
        assert set(json.loads(timings.read_text())) == {"doctrine"}
