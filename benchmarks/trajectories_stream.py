"""Peak memory of ``validate-trajectories`` while it streams big trajectory parquet files.

    /work/venv-dev/bin/python benchmarks/trajectories_stream.py [--sizes 50,200] [--batch-rows 64]

Generates parquet files in the dataset's schema (``nebius/SWE-rebench-openhands-trajectories``)
into a temporary folder, row group by row group (never the whole table in memory), with
tool outputs of random text so that the compressed file really is the stated size. Then
runs ``python -m data_gen validate-trajectories FILE`` in a subprocess for each file and
prints the file size, rows, wall time, rows/s and the subprocess's peak RSS (from
``os.wait4``, i.e. ``getrusage`` of that one child). A first run on the small project
fixture gives the interpreter + pyarrow baseline. Memory should stay bounded by the page
size (``--batch-rows`` rows, one row group), so the 50 MB and 200 MB peaks should match.
The generated files are deleted at the end (keep them with ``--keep DIR``).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "data_gen" / "fixtures" / "swe_rebench" / "trajectories.parquet"
MB = 1024 * 1024

TOOLS = [
    {"type": "function", "function": {"name": "execute_bash", "description": "Run a bash command.",
                                      "parameters": {"type": "object", "required": ["command"], "properties": {
                                          "command": {"type": "string", "description": "The command."},
                                          "path": None}}}},
    {"type": "function", "function": {"name": "str_replace_editor", "description": "View and edit files.",
                                      "parameters": {"type": "object", "required": ["command", "path"],
                                                     "properties": {
                                                         "command": {"type": "string", "description": "view..."},
                                                         "path": {"type": "string", "description": "A path."}}}}},
]


def _msg(role: str, content: str, tool_calls=None, tool_call_id=None, name=None) -> dict:
    # Every message carries every field, as the dataset's one struct type does.
    return {"role": role, "content": content, "tool_calls": tool_calls, "tool_call_id": tool_call_id, "name": name}


def make_row(k: int, rnd: random.Random, turns: int, output_bytes: int) -> dict:
    msgs = [_msg("system", "You are a coding agent."), _msg("user", f"Fix issue {k} in /workspace/repo.")]
    for t in range(turns):
        cid = f"call_{k}_{t}"
        mod = f"src/pkg/mod_{rnd.randrange(50)}.py"
        if t % 2:
            fn, args = "str_replace_editor", {"command": "view", "path": f"/workspace/repo/{mod}"}
        else:
            fn, args = "execute_bash", {"command": f"grep -rn 'name_{t}' /workspace/repo/src"}
        call = [{"id": cid, "type": "function", "function": {"name": fn, "arguments": json.dumps(args)}}]
        msgs.append(_msg("assistant", f"Step {t}: looking at {mod}.", tool_calls=call))
        noise = base64.b64encode(rnd.randbytes(output_bytes * 3 // 4)).decode()
        out = f"{mod}:{rnd.randrange(1, 400)}: def name_{t}():\n{noise}\n[The command completed with exit code 0.]"
        msgs.append(_msg("tool", out, tool_call_id=cid, name=fn))
    finish = [{"id": f"call_{k}_end", "type": "function",
               "function": {"name": "finish", "arguments": json.dumps({"message": "done"})}}]
    msgs.append(_msg("assistant", "", tool_calls=finish))
    return {"trajectory_id": f"bench-{k:07d}", "instance_id": f"bench__repo-{k}", "repo": "bench/repo",
            "trajectory": msgs, "tools": TOOLS, "model_patch": "diff --git a/src/pkg/mod_1.py b/src/pkg/mod_1.py\n",
            "exit_status": "submit", "resolved": k % 2, "gen_tests_correct": None, "pred_passes_gen_tests": None}


def generate(path: Path, target_mb: float, rows_per_group: int, turns: int, output_bytes: int, seed: int) -> int:
    """Write row groups until the file is at least ``target_mb``; returns the row count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rnd = random.Random(seed)
    writer = schema = None
    rows = 0
    try:
        while True:
            batch = [make_row(rows + i, rnd, turns, output_bytes) for i in range(rows_per_group)]
            table = pa.Table.from_pylist(batch, schema=schema)
            if writer is None:
                schema = table.schema
                writer = pq.ParquetWriter(path, schema)
            writer.write_table(table, row_group_size=rows_per_group)
            rows += len(batch)
            del batch, table
            if path.stat().st_size >= target_mb * MB:
                return rows
    finally:
        if writer is not None:
            writer.close()


def measure(path: Path, batch_rows: int) -> dict:
    """Run the CLI on ``path`` in a child process; its report, wall time and peak RSS."""
    cmd = [sys.executable, "-m", "data_gen", "validate-trajectories", str(path), "--batch-rows", str(batch_rows)]
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=err)
        out = proc.stdout.read()
        proc.stdout.close()
        # wait4 reaps this one child and returns its own rusage (ru_maxrss in KiB on Linux),
        # unlike RUSAGE_CHILDREN, which keeps the largest child seen so far.
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise SystemExit(f"validate-trajectories failed on {path}: {err.read().decode()[-2000:]}")
    return {"report": json.loads(out), "wall": wall, "peak_mb": usage.ru_maxrss / 1024}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="50,200", help="file sizes in MB, comma-separated (default 50,200)")
    ap.add_argument("--batch-rows", type=int, default=64, help="rows per page for the CLI (default 64)")
    ap.add_argument("--rows-per-group", type=int, default=64, help="rows per parquet row group (default 64)")
    ap.add_argument("--turns", type=int, default=30, help="assistant turns per trajectory (default 30)")
    ap.add_argument("--output-bytes", type=int, default=4096, help="random bytes per tool output (default 4096)")
    ap.add_argument("--keep", type=Path, default=None, help="write the files here and keep them")
    args = ap.parse_args()
    sizes = sorted(float(s) for s in args.sizes.split(","))

    work = args.keep or Path(tempfile.mkdtemp(prefix="traj-stream-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        print(f"{'file':>22} {'size MB':>9} {'rows':>7} {'accepted':>8} {'wall s':>7} {'rows/s':>8} {'peak RSS MB':>11}")
        base = measure(FIXTURE, args.batch_rows)
        print(f"{'fixture (baseline)':>22} {FIXTURE.stat().st_size / MB:9.2f} {base['report']['rows']:7d} "
              f"{base['report']['accepted']:8d} {base['wall']:7.2f} {'':>8} {base['peak_mb']:11.1f}")
        for size in sizes:
            path = work / f"trajectories_{int(size)}mb.parquet"
            t0 = time.perf_counter()
            rows = generate(path, size, args.rows_per_group, args.turns, args.output_bytes, seed=int(size))
            gen = time.perf_counter() - t0
            m = measure(path, args.batch_rows)
            rep = m["report"]
            assert rep["rows"] == rows, (rep["rows"], rows)
            print(f"{path.name:>22} {path.stat().st_size / MB:9.1f} {rows:7d} {rep['accepted']:8d} "
                  f"{m['wall']:7.2f} {rows / m['wall']:8.0f} {m['peak_mb']:11.1f}   (generated in {gen:.1f}s)")
        print(f"batch_rows={args.batch_rows} rows_per_group={args.rows_per_group} "
              f"row ~{args.turns * (args.output_bytes + 200) / 1024:.0f} KiB; peak RSS should not grow with file size")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
