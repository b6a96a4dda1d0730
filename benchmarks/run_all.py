"""Run every benchmark script in this folder and print their figures in one place.

    python benchmarks/run_all.py            # all of them
    python benchmarks/run_all.py kernel     # those whose file name contains "kernel"

Benchmarks print figures; they do not assert speed (timed assertions live nowhere).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    scripts = sorted(p for p in HERE.glob("*.py") if p.name != Path(__file__).name)
    if argv:
        scripts = [p for p in scripts if any(a in p.stem for a in argv)]
    failed = 0
    for script in scripts:
        print(f"\n=== {script.stem} ===", flush=True)
        t0 = time.time()
        proc = subprocess.run([sys.executable, str(script)], cwd=HERE.parent)
        status = "ok" if proc.returncode == 0 else f"FAILED (exit {proc.returncode})"
        failed += proc.returncode != 0
        print(f"--- {script.stem}: {status}, {time.time() - t0:.1f}s wall", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
