"""Reading or recall? What a held-out compress reply's summaries owe to train and to the context.

Per reply that writes compress summaries (any arm, the oracle's labels included):

* ``nearest_train_sim``: the difflib ratio of its summaries (joined, in call order) to the
  nearest train target (a label's summaries, joined alike): near 1 for a reply written from
  memory of a train label, whatever the context said;
* ``values_copied`` / ``values_not_in_context``: how many exact items of its summaries
  (``doctrine.exact_items.exact_items``: quoted spans, ``key=value`` pairs, paths, error
  strings) occur verbatim in the context the model was shown, and how many do not (an
  invented or recalled value); ``values_not_in_context_share`` the share not in it.

The train targets are read once per data folder (``<data_dir>/train``) and kept for the run.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from data_gen.memorisation import TrainTargets, compress_ranges, joined_summary
from doctrine.exact_items import context_text, items_in_text

__all__ = ["recall_scores", "train_targets"]


@functools.lru_cache(maxsize=4)
def _train_at(data_dir: str, stamp: tuple[tuple[str, int, int], ...]) -> TrainTargets:
    from eval.workloads.held_out.rows import load_rows

    return TrainTargets.from_rows(load_rows(data_dir, "train"))


def train_targets(data_dir: str | Path) -> TrainTargets | None:
    """The train split of ``data_dir`` (None when it has none), cached while its files are unchanged."""
    folder = Path(data_dir) / "train"
    files = sorted(folder.glob("*.parquet")) + sorted(folder.glob("*.jsonl"))
    if not files:
        return None
    stamp = tuple((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    return _train_at(str(Path(data_dir).resolve()), stamp)


def recall_scores(message: dict[str, Any], context: list[dict[str, Any]],
                  train: TrainTargets | None) -> dict[str, Any]:
    """The figures of the module notes for one reply ({} when it writes no summary)."""
    summaries = [rg["summary"] for rg in compress_ranges(message)]
    if not summaries:
        return {}
    text = context_text(context)
    copied = missing = 0
    for s in summaries:
        c, m = items_in_text(s, text)
        copied += len(c)
        missing += len(m)
    out: dict[str, Any] = {"values_copied": copied, "values_not_in_context": missing}
    if copied + missing:
        out["values_not_in_context_share"] = missing / (copied + missing)
    if train is not None and train.labels:
        out["nearest_train_sim"] = train.nearest(joined_summary(message))
    return out
