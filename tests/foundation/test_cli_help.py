"""Every package answers --help quickly, without importing torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

PACKAGES = ["doctrine", "data_gen", "train", "eval", "pipeline"]


@pytest.mark.parametrize("pkg", PACKAGES)
def test_help_without_torch(pkg, project_root):
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['{pkg}', '--help']\n"
        "try:\n"
        f"    runpy.run_module('{pkg}', run_name='__main__', alter_sys=True)\n"
        "except SystemExit as e:\n"
        "    assert e.code in (0, None), e.code\n"
        "assert 'torch' not in sys.modules, 'torch imported for --help'\n"
        "assert 'transformers' not in sys.modules, 'transformers imported for --help'\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=project_root, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "usage:" in out.stdout
