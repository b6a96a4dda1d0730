"""Read a data_gen output folder and tokenise it for SFT.

The folder is what ``python -m data_gen build`` writes: ``manifest.json`` (stage complete,
doctrine version and hash), a dataset card, and parquet shards per split under
``<split>/*.parquet``. One row is ``{messages, tools, meta}``: OpenAI-format messages
(tool-call arguments as JSON strings), the tool schemas (a JSON string or a list) and
metadata with at least ``kind``, ``session_id``, ``prompt_mode`` and the doctrine stamp.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from plumbing.chat_templates import SampleRejected, tokenize_sample
from plumbing.runs import StageInputError, read_manifest, stage_files
from plumbing.shards import ShardError, check_shards
from plumbing.subcommands import CommandError

__all__ = ["DataError", "check_data_dir", "load_split", "session_key", "tokenize_split"]


class DataError(CommandError):
    """A data folder that training cannot use; the message says which and why."""


def check_data_dir(data_dir: str | Path) -> dict[str, Any]:
    """The data stage's manifest; an error if the stage is missing or incomplete."""
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise DataError(f"{data_dir}: no such data folder (run `python -m data_gen build` first)")
    manifest = read_manifest(data_dir)
    if manifest is None:
        raise DataError(f"{data_dir}: no complete manifest.json; the data stage did not finish")
    if manifest.get("stage") != "data":
        raise DataError(f"{data_dir}: holds the {manifest.get('stage')} stage's manifest, not a data stage's")
    if not manifest.get("doctrine") or not manifest["doctrine"].get("sha256"):
        raise DataError(f"{data_dir}/manifest.json: no doctrine version and hash recorded")
    return manifest


def load_split(data_dir: str | Path, split: str):
    """The split's shards, exactly the ones the data manifest lists and unchanged
    (:func:`plumbing.runs.stage_files`): a shard dropped in or edited by hand is an error."""
    from datasets import load_dataset

    try:
        files = [str(p) for p in stage_files(data_dir, split, ("*.parquet",))]
    except StageInputError as exc:
        raise DataError(str(exc)) from None
    if not files:
        raise DataError(f"{data_dir}: split {split!r} has no parquet shards under {split}/")
    check_shards(files)  # another table, a file cut short, two builds' shards: one line, not a traceback
    try:
        return load_dataset("parquet", data_files={split: files}, split=split)
    except Exception as exc:  # a shard damaged past its footer fails in the reader
        raise ShardError(f"{data_dir}/{split}: a shard could not be read ({_first_cause(exc)})") from None


def _first_cause(exc: BaseException) -> str:
    while exc.__cause__ is not None or exc.__context__ is not None:
        exc = exc.__cause__ or exc.__context__
    return (str(exc).splitlines() or [type(exc).__name__])[0][:200]


def _as_obj(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            return None
    return value


def session_key(meta: dict[str, Any]) -> str:
    """The rows whose contexts can share a prefix: one session under one serving profile."""
    return "|".join(str(meta.get(k, "")) for k in ("session_id", "window", "gate", "host", "serving_profile"))


def _step(meta: dict[str, Any]) -> int:
    try:
        return int(meta.get("step") or 0)
    except (TypeError, ValueError):
        return 0


def tokenize_split(ds, tokenizer, template: str, *, max_length: int, prompt_mode: str,
                   max_samples: int | None = None, with_keys: bool = False, copy_tokens: bool = False):
    """Tokenise rows into ``input_ids`` + ``assistant_masks``; return (dataset, rejects).

    Rejected rows (no target, empty mask, too long, wrong prompt mode, bad fields) are
    dropped and counted by reason, never truncated and never fatal. Every row keeps its
    decision ``kind`` (``meta.kind``: the trainer logs the loss per kind). ``with_keys`` adds
    ``session_key`` (:func:`session_key`) and ``step`` columns for shared-prefix grouping;
    ``copy_tokens`` a ``copy_mask`` column: 1 on the target tokens that copy an exact item
    from the context (:mod:`train.copy_tokens`, the trainer's copy term).
    """
    if max_samples is not None:
        ds = ds.select(range(min(max_samples, len(ds))))

    blank = {"kind": "", **({"session_key": "", "step": 0} if with_keys else {}),
             **({"copy_mask": []} if copy_tokens else {})}

    def encode(row: dict) -> dict:
        meta = _as_obj(row.get("meta")) or {}
        if not isinstance(meta, dict):
            meta = {}
        tools = _as_obj(row.get("tools"))
        messages = row.get("messages")
        if not isinstance(messages, list) or not messages:
            return {"input_ids": [], "assistant_masks": [], "reject": "bad_messages", **blank}
        if meta.get("prompt_mode") not in (None, prompt_mode):
            return {"input_ids": [], "assistant_masks": [], "reject": "prompt_mode_mismatch", **blank}
        keys = {"kind": str(meta.get("kind") or ""),
                **({"session_key": session_key(meta), "step": _step(meta)} if with_keys else {})}
        try:
            enc = tokenize_sample(tokenizer, messages, tools, template, max_length)
        except SampleRejected as exc:
            return {"input_ids": [], "assistant_masks": [], "reject": exc.reason, **blank, **keys}
        except RecursionError:  # tool-call arguments nested past the recursion limit
            return {"input_ids": [], "assistant_masks": [], "reject": "nested_too_deep", **blank, **keys}
        if copy_tokens:
            from .copy_tokens import copied_items, copy_mask

            keys["copy_mask"] = copy_mask(tokenizer, enc["input_ids"], enc["assistant_masks"], copied_items(messages))
        return {**enc, "reject": "", **keys}

    mapped = ds.map(encode, remove_columns=ds.column_names, desc="tokenizing")
    rejects = Counter(r for r in mapped["reject"] if r)
    kept = mapped.filter(lambda r: not r["reject"]).remove_columns("reject")
    return kept, dict(rejects)
