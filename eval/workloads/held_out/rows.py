"""The held-out rows as the workload and the recall audit read them: a data stage's split
(parquet or JSON lines), each row normalised to ``{messages, tools, meta}``. Kept apart from
workload.py so the recall audit (recall.py), which the workload calls, reads rows without
importing the workload back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["load_rows", "normalise_row"]


def _clean(obj: Any) -> Any:
    """Drop None values that parquet structs add for absent keys; decode JSON strings of
    ``tools``/``meta``."""
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [_clean(v) for v in obj]
    return obj


def normalise_row(row: dict[str, Any]) -> dict[str, Any]:
    row = dict(row)
    for key in ("tools", "meta", "messages"):
        if isinstance(row.get(key), str):
            row[key] = json.loads(row[key])
    row = _clean(row)
    if not isinstance(row.get("messages"), list) or len(row["messages"]) < 2:
        raise ValueError("row needs at least two messages (context and target)")
    row.setdefault("tools", [])
    row.setdefault("meta", {})
    extra = row["meta"].get("extra")
    if isinstance(extra, str) and extra.strip():
        # data_gen keeps open-ended meta (nudge_view, view_refs, ranges...) as one JSON column.
        try:
            more = json.loads(extra)
        except ValueError:
            raise ValueError("meta.extra is not JSON") from None
        if isinstance(more, dict):
            row["meta"] = {**more, **{k: v for k, v in row["meta"].items() if k != "extra"}}
    return row


def load_rows(data_dir: str | Path, split: str = "test", limit: int | None = None) -> list[dict[str, Any]]:
    """Rows of ``<data_dir>/<split>/`` (parquet via pyarrow, or JSON lines), in file name
    order; in a data stage's folder, the files its manifest lists and nothing else."""
    from plumbing.runs import stage_files

    folder = Path(data_dir) / split
    # A data stage's folder: only the files its manifest lists, unchanged (StageInputError).
    files = stage_files(data_dir, split)
    if not files:
        raise ValueError(f"{folder}: no *.parquet or *.jsonl files")
    rows: list[dict[str, Any]] = []
    for f in files:
        if f.suffix == ".parquet":
            import pyarrow.parquet as pq

            raw = pq.read_table(f).to_pylist()
        else:
            raw = [json.loads(line) for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
        for i, r in enumerate(raw):
            try:
                rows.append(normalise_row(r))
            except (ValueError, TypeError) as exc:
                raise ValueError(f"{f} row {i}: {exc}") from None
        if limit is not None and len(rows) >= limit:
            return rows[:limit]
    return rows
