"""Out-of-range recipe values fail when the recipe loads, naming the file, the dotted key and
the reason, instead of crashing a stage later or running silently on a meaningless value."""

from __future__ import annotations

import pytest

from pipeline.dtw import main as dtw
from pipeline.recipe import load_recipe
from plumbing.recipe_loader import ConfigError

TRAIN, DATA, EVAL = "configs/train/demo.yaml", "configs/data/demo.yaml", "configs/eval/demo.yaml"

# (recipe, override, the dotted key the error names, a word of its reason)
OUT_OF_RANGE = [
    # The probes of the reliability sweep: these crashed a stage later ...
    (TRAIN, "lora.dropout=1.5", "lora.dropout", "less than 1"),
    (TRAIN, "lora.target_modules=[]", "lora.target_modules", "at least one module"),
    (DATA, "replay.windows=[0]", "replay.windows.0", "greater than or equal to 256"),
    (DATA, "sources.synthetic.steps=0", "sources.synthetic.steps", "greater than or equal to 3"),
    # ... and these ran silently.
    (DATA, "replay.horizon=-1", "replay.horizon", "greater than or equal to 0"),
    (DATA, "dedupe.near_threshold=5", "dedupe.near_threshold", "less than or equal to 1"),
    (TRAIN, "lora.alpha=-1", "lora.alpha", "greater than or equal to 1"),
    # The same class elsewhere in the recipes.
    (DATA, "replay.windows=[]", "replay.windows", "at least 1 item"),
    (DATA, "replay.gates=[]", "replay.gates", "at least 1 item"),
    (DATA, "sources.synthetic.sessions_per_family=0", "sources.synthetic.sessions_per_family", "greater than"),
    (DATA, "sources.synthetic.seed=-1", "sources.synthetic.seed", "greater than or equal to 0"),
    (DATA, "sources.synthetic.families=[ts_rep]", "sources.synthetic.families", "unknown synthetic families"),
    (DATA, "sources.synthetic.tool_output_lines=[9,3]", "sources.synthetic.tool_output_lines", "above max"),
    (DATA, "sources.synthetic.tool_output_lines=[0,3]", "sources.synthetic.tool_output_lines.0", "greater than"),
    (DATA, "mixture.kind={refusal: -1}", "mixture.kind.refusal", "greater than or equal to 0"),
    (DATA, "mixture.window={'2048': -0.5}", "mixture.window.2048", "greater than or equal to 0"),
    (DATA, "dedupe.near_threshold=0", "dedupe.near_threshold", "greater than 0"),
    (DATA, "max_tokens=0", "max_tokens", "greater than or equal to 1"),
    (DATA, "stages=[{name: warm, kinds: []}]", "stages.0.kinds", "at least 1 item"),
    (DATA, "stages=[{name: warm, kinds: [refusl]}]", "stages.0.kinds.0", "refusal"),
    (TRAIN, "lora.dropout=-0.1", "lora.dropout", "greater than or equal to 0"),
    (TRAIN, "lora.target_modules=['']", "lora.target_modules", "at least one module"),
    (TRAIN, "trainer.seed=-3", "trainer.seed", "greater than or equal to 0"),
    (TRAIN, "export.max_lora_rank=0", "export.max_lora_rank", "greater than or equal to 1"),
    (TRAIN, "export.adapter_name='a b=c'", "export.adapter_name", "pattern"),
    (EVAL, "seeds=[]", "seeds", "at least 1 item"),
    (EVAL, "seeds=[-1]", "seeds.0", "greater than or equal to 0"),
    ("configs/pipeline/demo.yaml", "stages=[]", "stages", "at least 1 item"),
    ("configs/accelerate/multi_gpu.yaml", "num_processes=0", "num_processes", "greater than or equal to 1"),
    ("configs/accelerate/multi_gpu.yaml", "main_process_port=70000", "main_process_port", "65535"),
]


@pytest.mark.parametrize("recipe, override, key, reason", OUT_OF_RANGE,
                         ids=[case[1] for case in OUT_OF_RANGE])
def test_out_of_range_value_fails_at_load_naming_file_key_and_reason(project_root, recipe, override, key,
                                                                     reason):
    path = project_root / recipe
    with pytest.raises(ConfigError) as err:
        load_recipe(path, overrides=[override])
    text = str(err.value)
    assert str(path) in text.splitlines()[0]
    line = next((ln for ln in text.splitlines()[1:] if ln.strip().startswith(f"{key}:")), None)
    assert line is not None, f"no line names {key!r}:\n{text}"
    assert reason in line, line


@pytest.mark.parametrize("argv", [
    ["train", TRAIN, "lora.dropout=1.5"],
    ["data", DATA, "sources.synthetic.steps=0"],
    ["eval", EVAL, "seeds=[-1]"],
])
def test_the_stage_command_refuses_before_running(capsys, project_root, monkeypatch, tmp_path, argv):
    monkeypatch.chdir(project_root)
    out = tmp_path / "stage"
    assert dtw([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {argv[1]}: invalid ") and "Traceback" not in err
    assert not out.exists()


def test_values_at_the_bounds_still_load(project_root):
    """The bounds refuse what cannot work, not what is unusual: each edge value loads."""
    load_recipe(project_root / TRAIN, overrides=["lora.dropout=0", "lora.alpha=1", "lora.target_modules=all-linear"])
    load_recipe(project_root / DATA, overrides=["replay.windows=[256]", "replay.horizon=0", "dedupe.near_threshold=1",
                                                "sources.synthetic.steps=3", "sources.synthetic.tool_output_lines=[1,1]",
                                                "mixture.source={synthetic: 0}"])
