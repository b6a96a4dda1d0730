"""Each stage's wall time for the last demo run (from runs/demo/timings.json and manifests).

    python benchmarks/demo_timings.py [RUN_DIR]     # default runs/demo; run `make demo` first
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str]) -> int:
    run = Path(argv[0]) if argv else ROOT / "runs" / "demo"
    timings = run / "timings.json"
    if not timings.is_file():
        print(f"no {timings}: run `make demo` first (timings are written as stages finish)")
        return 0
    data = json.loads(timings.read_text())
    order = ["doctrine", "data", "train", "adapter", "eval", "report"]  # the pipeline's order
    total = 0.0
    for stage, secs in sorted(data.items(), key=lambda kv: (order.index(kv[0]) if kv[0] in order else 99, kv[0])):
        manifest = run / stage / "manifest.json"
        own = json.loads(manifest.read_text()).get("wall_time_s") if manifest.is_file() else None
        print(f"{stage:<9} {secs:8.1f} s" + (f"   (stage manifest: {own:.1f} s)" if own else ""))
        total += secs
    print(f"{'total':<9} {total:8.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
