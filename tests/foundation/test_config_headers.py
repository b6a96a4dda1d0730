"""The first line of every recipe under configs/ is the command that runs it, spelled ``dtw ...``
(or ``accelerate launch ... -m train|rl ...`` where a multi-process launch is meant), and that
command parses: run in-process with ``--print-config`` (the recipe it names loads) or, for a
command that reads no recipe (``dtw report``), with ``--help``."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from pipeline.dtw import main as dtw
from pipeline.recipe import load_recipe

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "configs").rglob("*.yaml")
                 if "fixtures" not in p.parts)


def header_commands(line: str) -> list[list[str]]:
    """The commands of a header line: ``# CMD [&& CMD ...]   (remark)``, each as an argv."""
    assert line.startswith("# "), f"first line must be '# <command that runs it>', got {line!r}"
    text = re.split(r"\s{2,}\(", line[2:])[0]
    return [shlex.split(part) for part in text.split("&&")]


def as_dtw(argv: list[str], recipe: str) -> list[str]:
    """``argv`` as the arguments of ``dtw``; an accelerate launch is checked to name an
    accelerate config and becomes the ``dtw train`` it runs in every process."""
    if argv[:1] == ["dtw"]:
        return argv[1:]
    assert argv[:2] == ["accelerate", "launch"], f"{recipe}: header is not `dtw ...`: {shlex.join(argv)}"
    config = argv[argv.index("--config_file") + 1]
    assert config.startswith("configs/accelerate/"), config
    load_recipe(ROOT / config)
    module = argv.index("-m")
    assert argv[module + 1] in ("train", "rl"), f"{recipe}: accelerate launches `-m train` or `-m rl` only"
    return [{"train": "train", "rl": "grpo"}[argv[module + 1]], *argv[module + 2:]]


def _exit_code(argv: list[str]) -> int:
    try:
        return dtw(argv)
    except SystemExit as exc:  # argparse's --help
        return int(exc.code or 0)


@pytest.mark.parametrize("recipe", CONFIGS)
def test_first_line_is_a_command_that_runs(recipe, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    commands = header_commands((ROOT / recipe).read_text(encoding="utf-8").splitlines()[0])
    assert any(recipe in argv for argv in commands), f"{recipe}: its header does not name it"
    for argv in commands:
        args = as_dtw(argv, recipe)
        reads_recipe = any(a.startswith("configs/") and a.endswith(".yaml") and "accelerate" not in a
                           for a in args)
        code = _exit_code([*args, "--print-config" if reads_recipe else "--help"])
        out = capsys.readouterr()
        assert code == 0, f"{recipe}: `dtw {shlex.join(args)}` exits {code}: {out.err.strip()}"
        assert out.out.strip(), f"{recipe}: `dtw {shlex.join(args)}` printed nothing"


def test_header_parser_refuses_the_old_spelling():
    with pytest.raises(AssertionError, match="not `dtw"):
        as_dtw(header_commands("# python -m eval run configs/eval/demo.yaml --out x")[0], "configs/eval/demo.yaml")
