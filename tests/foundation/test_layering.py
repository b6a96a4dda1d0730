"""The packages import downward only (README, "Layout").

Every module of every package is parsed and each import is collected wherever it is written:
at module level, inside a function (the lazy imports that keep torch out of ``--help``), in a
``TYPE_CHECKING`` block, as ``importlib.import_module("...")`` with a literal name, or as a
``"module:Name"`` string (how command tables and schema tables name what they import later).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

# package -> the packages it may import (besides itself). Read top to bottom: each layer may
# use the ones listed for it, never one above it.
ALLOWED: dict[str, set[str]] = {
    "plumbing": set(),
    "doctrine": {"plumbing"},
    "data_gen": {"plumbing", "doctrine"},
    "train": {"plumbing", "doctrine"},
    "eval": {"plumbing", "doctrine", "data_gen"},
    "rl": {"plumbing", "doctrine", "data_gen", "train", "eval"},  # rewards are the evaluator's scores
    "pipeline": {"plumbing", "doctrine", "data_gen", "train", "eval", "rl"},
}
PACKAGES = set(ALLOWED)


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


# A "package.module:Name" import target written as a string (imported later by name).
_TARGET = re.compile(r"^([a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)*):[A-Za-z_][A-Za-z0-9_]*$")


def imported_modules(source: str, module: str, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, absolute module name) for every import in ``source``, however deeply nested."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                if not is_package:
                    base = base[:-1]
                base = base[: len(base) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            out.append((node.lineno, name))
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and ((isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                   or (isinstance(node.func, ast.Name) and node.func.id in ("import_module", "__import__")))):
            out.append((node.lineno, node.args[0].value))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _TARGET.match(node.value):
            out.append((node.lineno, _TARGET.match(node.value).group(1)))
    return out


def forbidden_edges(root: Path) -> list[str]:
    bad = []
    for package in sorted(PACKAGES):
        for path in sorted((root / package).rglob("*.py")):
            module = _module_name(root, path)
            source = path.read_text(encoding="utf-8")
            for line, name in imported_modules(source, module, path.name == "__init__.py"):
                top = name.split(".")[0]
                if top in PACKAGES and top != package and top not in ALLOWED[package]:
                    bad.append(f"{path.relative_to(root)}:{line}: {package} imports {name}")
    return bad


def test_every_package_imports_downward_only(project_root):
    assert forbidden_edges(project_root) == []


def test_every_top_level_package_is_in_the_table(project_root):
    """A new package must be given its place in the layers (and in pyproject's include)."""
    found = {p.parent.name for p in project_root.glob("*/__init__.py")}
    assert found == PACKAGES
    pyproject = (project_root / "pyproject.toml").read_text(encoding="utf-8")
    for package in PACKAGES:
        assert f'"{package}*"' in pyproject, package


@pytest.mark.parametrize("source, module, is_package, expected", [
    ("import train.models", "doctrine.cli", False, ["train.models"]),
    ("def f():\n    from eval.backends import make_backend\n", "data_gen.x", False, ["eval.backends"]),
    ("if True:\n    import pipeline.runner as r\n", "eval.cli", False, ["pipeline.runner"]),
    ("import importlib\nimportlib.import_module('train.sft')\n", "doctrine.x", False, ["importlib", "train.sft"]),
    ("from . import spec\nfrom .kernel import state\n", "doctrine.cli", False, ["doctrine", "doctrine.kernel"]),
    ("from .. import recipe\n", "eval.workloads.base", False, ["eval"]),
    ("from .base import W\n", "eval.workloads", True, ["eval.workloads.base"]),
    ("SCHEMAS = {'train': 'train.recipe:TrainRecipe'}\n", "plumbing.recipe_loader", False, ["train.recipe"]),
    ("x = 'see: this'\n", "plumbing.x", False, []),
])
def test_the_scan_sees_lazy_relative_and_string_imports(source, module, is_package, expected):
    assert [n for _, n in imported_modules(source, module, is_package)] == expected


def test_the_scan_reports_a_forbidden_edge(tmp_path):
    """The check itself fails on a wrong edge (a lazy one inside a function)."""
    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "doctrine" / "cli.py").write_text("def main():\n    from train.models import load_tokenizer\n")
    (tmp_path / "data_gen" / "teacher.py").write_text("from plumbing.openai_backend import OpenAIBackend\n")
    (tmp_path / "train" / "sft.py").write_text("import pipeline\n")
    assert forbidden_edges(tmp_path) == [
        "doctrine/cli.py:2: doctrine imports train.models",
        "train/sft.py:1: train imports pipeline",
    ]
