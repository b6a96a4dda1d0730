"""``dtw``: one command line whose subcommands are the stages and tools, built one way."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from pipeline.dtw import COMMANDS, main
from plumbing.subcommands import Command, import_target

STAGE_COMMANDS = {"data": "data", "train": "train", "adapter": "export", "eval": "eval", "report": "report"}
TOOLS = ["run", "doctrine", "kernel", "inspect", "audit", "synthetic", "validate-trajectories", "probes",
         "fixtures", "policy-table", "model-info", "tiny-model", "plan", "vllm-check"]
PACKAGE_CLIS = ["data_gen.__main__", "train.__main__", "rl.__main__", "eval.__main__", "doctrine.cli", "doctrine.kernel.__main__",
                "pipeline.__main__"]


def test_help_lists_every_stage_and_tool_without_importing_a_package(project_root):
    code = ("import sys; from pipeline.dtw import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit as e:\n    assert e.code == 0\n"
            "loaded = {m.split('.')[0] for m in sys.modules}\n"
            "print(sorted(loaded & {'data_gen', 'train', 'eval', 'doctrine', 'torch', 'transformers'}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=project_root, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == "[]"  # only the command table is read
    listed = {line.split()[0] for line in out.stdout.splitlines() if line.startswith("    ") and line.strip()}
    assert {*STAGE_COMMANDS.values(), *TOOLS} <= listed, {*STAGE_COMMANDS.values(), *TOOLS} - listed


def test_every_pipeline_stage_but_doctrine_is_a_dtw_command():
    from plumbing.runs import STAGES

    assert set(STAGES) == {"doctrine", *STAGE_COMMANDS}
    for stage, command in STAGE_COMMANDS.items():
        assert command in COMMANDS and f"stage {stage}:" in COMMANDS[command].help


def _leaves(table: dict[str, Command], prefix: tuple[str, ...] = ()):
    for name, cmd in table.items():
        target = import_target(cmd.target)
        if isinstance(target, dict):
            yield from _leaves(target, (*prefix, name))
        else:
            yield (*prefix, name), cmd.target


@pytest.mark.parametrize("argv", [path for path, _ in _leaves(COMMANDS)], ids=" ".join)
def test_every_command_answers_help(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--help"])
    assert exc.value.code == 0
    assert f"usage: dtw {' '.join(argv)}" in capsys.readouterr().out


def test_every_dtw_command_is_also_a_python_m_command():
    """The same functions build ``dtw X`` and ``python -m <package> Y``: nothing is dtw-only."""
    package_targets = set()
    for module in PACKAGE_CLIS:
        package_targets |= {t for _, t in _leaves(importlib.import_module(module).COMMANDS)}
    for path, target in _leaves(COMMANDS):
        assert target in package_targets, f"dtw {' '.join(path)} ({target}) has no python -m command"


def test_python_m_train_recipe_is_the_run_command(project_root, monkeypatch, capsys):
    from train.__main__ import main as train_main

    monkeypatch.chdir(project_root)
    assert train_main(["configs/train/smoke.yaml", "--print-config", "trainer.max_steps=4"]) == 0
    plain = capsys.readouterr().out
    assert main(["train", "configs/train/smoke.yaml", "--print-config", "trainer.max_steps=4"]) == 0
    assert capsys.readouterr().out == plain and "max_steps: 4" in plain


def test_a_bad_recipe_is_one_line_from_the_recipe_helper(tmp_path, capsys):
    bad = tmp_path / "configs" / "data" / "x.yaml"
    bad.parent.mkdir(parents=True)
    bad.write_text("no_such_key: 1\n")
    assert main(["data", str(bad), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {bad}") and "no_such_key" in err and "Traceback" not in err


def test_a_group_without_its_command_lists_them(capsys):
    assert main(["kernel"]) == 2
    out = capsys.readouterr().out
    assert "usage: dtw kernel" in out and "replay" in out and "profile" in out


def test_unknown_command_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["no-such-command"])
    assert exc.value.code == 2 and "invalid choice" in capsys.readouterr().err
