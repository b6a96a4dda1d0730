"""Recorded OpenHands runs (``nebius/SWE-rebench-openhands-trajectories``) as sessions.

Three stages, each usable alone:

1. ``iter_rows``: raw rows, one at a time, from a local ``.parquet`` (read batch by batch,
   never the whole table), a ``.jsonl`` / ``.jsonl.gz`` (line by line), a folder of those,
   or a hub id streamed through ``datasets`` at a pinned revision.
2. ``convert_row``: one raw row to OpenAI-format ``messages`` + ``tools`` + ``meta``, or a
   ``Rejected`` with a stable reason key. It never raises on a bad row.
3. ``to_session``: a converted row to ``doctrine.session.Session``, with steps and facts
   derived by hindsight.

Conversion rules (those of the compaction-benchmark article, section 4.3):

- every message keeps only the fields of its role (the parquet schema pads each message
  with the other roles' fields set to null), and tool schemas lose their null padding (the
  column is one struct type, the union of every tool's parameters);
- tool-call ``arguments`` are JSON strings that must decode to an object; they are kept as
  the recorded string (so facts can quote them verbatim);
- a ``finish`` call without a result in the last assistant turn is dropped (the message
  stays if it also carries text);
- then a trailing assistant turn with any call lacking its result is removed together with
  the results of its other calls;
- whatever still holds a call without a result, or a result without its call, is rejected.
  Results must follow their assistant message directly (the OpenAI protocol), so every
  accepted history can be sent to a chat API as it is.
"""

from __future__ import annotations

import gzip
import itertools
import json
import os
import re
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from data_gen.sources.trajectory_facts import steps_and_facts
from doctrine.session import Session, SessionError

__all__ = [
    "DATASET_ID",
    "DEFAULT_REVISION",
    "LICENSE",
    "REJECT_REASONS",
    "ConvertedTrajectory",
    "Rejected",
    "TrajectorySourceError",
    "TrajectoryStats",
    "UnreadableRow",
    "convert_row",
    "iter_hub_rows",
    "iter_rows",
    "iter_sessions",
    "strip_nulls",
    "to_session",
    "validate_path",
]

DATASET_ID = "nebius/SWE-rebench-openhands-trajectories"
DEFAULT_REVISION = "35455389ab51bf5e2306bfd436ef72d0f98bf882"
LICENSE = "CC-BY-4.0"
SOURCE = "swe_rebench"

# Stable snake_case keys: manifests and the CLI count rejected rows under these.
REJECT_REASONS = (
    "not_an_object",  # the row is not a JSON object / mapping
    "invalid_json_line",  # a JSONL line that does not parse
    "missing_id",  # neither trajectory_id nor instance_id
    "missing_trajectory",  # no trajectory field, or null
    "bad_trajectory",  # the trajectory is not a list
    "empty_trajectory",  # an empty list
    "bad_message",  # a message without a known role, or with fields of the wrong type
    "bad_tools",  # the tools field is not a list of objects
    "invalid_arguments_json",  # tool-call arguments that do not decode to a JSON object
    "unmatched_tool_call",  # a call without its result (after the repairs)
    "unmatched_tool_result",  # a result without its call
    "no_assistant_turn",  # nothing the agent did is left
    "session_invalid",  # conversion produced a session that fails Session.validate()
)

# The fields each role keeps (everything else in a message is schema padding).
_ROLE_FIELDS = {
    "system": ("content",),
    "user": ("content",),
    "assistant": ("content", "tool_calls"),
    "tool": ("content", "tool_call_id", "name"),
}
_META_FIELDS = ("trajectory_id", "instance_id", "repo", "resolved", "exit_status",
                "model_patch", "gen_tests_correct", "pred_passes_gen_tests")
_LOCAL_SUFFIXES = (".parquet", ".jsonl", ".jsonl.gz")
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")
_TRUE = {"1", "ON", "YES", "TRUE"}
_READ_BUFFER = 1 << 20  # bytes read at a time from a parquet column chunk


class TrajectorySourceError(RuntimeError):
    """A source that cannot be read at all (missing file, unreadable parquet, offline hub)."""


@dataclass
class Rejected:
    reason: str  # one of REJECT_REASONS
    detail: str
    row_id: str | None = None


@dataclass
class UnreadableRow:
    """Stands in for a row that could not even be decoded, so it is counted, not lost."""

    reason: str
    detail: str


@dataclass
class ConvertedTrajectory:
    session_id: str
    messages: list[dict[str, Any]]  # OpenAI chat format, arguments as JSON strings
    tools: list[dict[str, Any]]  # OpenAI function schemas, nulls stripped
    meta: dict[str, Any] = field(default_factory=dict)
    repairs: dict[str, int] = field(default_factory=dict)  # rule name -> items dropped

    @property
    def system_prompt(self) -> str:
        return "\n\n".join(m["content"] for m in self.messages if m["role"] == "system")


class _Reject(Exception):
    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason, self.detail = reason, detail


# ---------------------------------------------------------------------------- reading


def iter_rows(path_or_id: str | os.PathLike, *, revision: str = DEFAULT_REVISION,
              batch_rows: int = 64, split: str = "train") -> Iterator[Any]:
    """Raw rows of a local file, a folder of files, or a hub dataset, one at a time.

    The source is checked now (a missing file or an offline hub raises
    ``TrajectorySourceError`` here); rows are then read lazily, at most ``batch_rows`` of
    them held at once. Undecodable JSONL lines come out as ``UnreadableRow``.
    """
    if batch_rows < 1:
        raise ValueError("batch_rows must be at least 1")
    text = os.fspath(path_or_id)
    path = Path(text)
    if path.is_dir():
        # Hidden names are skipped: they are partial downloads or temp files being written.
        files = sorted(p for p in path.rglob("*") if p.is_file() and _suffix_ok(p) and not p.name.startswith("."))
        if not files:
            raise TrajectorySourceError(f"{path}: no {'/'.join(_LOCAL_SUFFIXES)} files in this folder")
        return _chain(_iter_file(f, batch_rows) for f in files)
    if path.exists():
        if not _suffix_ok(path):
            raise TrajectorySourceError(f"{path}: expected a {', '.join(_LOCAL_SUFFIXES)} file")
        return _iter_file(path, batch_rows)
    if _suffix_ok(path) or text.startswith((".", "/", "~")) or not _HUB_ID.fullmatch(text):
        raise TrajectorySourceError(f"{text}: no such file, and not a hub dataset id (owner/name)")
    return iter_hub_rows(text, revision=revision, split=split)


def iter_hub_rows(dataset_id: str, *, revision: str | None = DEFAULT_REVISION,
                  split: str = "train", data_files: Any = None) -> Iterator[dict[str, Any]]:
    """Stream rows with ``datasets.load_dataset(..., streaming=True)``.

    ``dataset_id`` is a hub id, or a packaged builder such as ``"parquet"`` with
    ``data_files`` (that form reads local files through the same streaming code). In
    offline mode a hub id fails at once with a clear message instead of waiting on the
    network: streaming always reads remote files, so no cache can serve it.
    """
    if data_files is None and _offline():
        raise TrajectorySourceError(
            f"{dataset_id}: the hub is offline (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE is set); "
            "download the parquet files and pass a local path instead")
    try:
        import datasets

        kwargs: dict[str, Any] = {"split": split, "streaming": True}
        if data_files is None:
            kwargs["revision"] = revision
        else:
            kwargs["data_files"] = data_files
        ds = datasets.load_dataset(dataset_id, **kwargs)
    except Exception as exc:  # datasets raises many types; the caller needs one
        raise TrajectorySourceError(f"{dataset_id}@{revision}: cannot open ({type(exc).__name__}: {exc})") from exc
    return _guarded(iter(ds), dataset_id)


def _guarded(it: Iterator[Any], name: str) -> Iterator[Any]:
    try:
        yield from it
    except Exception as exc:
        raise TrajectorySourceError(f"{name}: reading failed ({type(exc).__name__}: {exc})") from exc


def _chain(iters: Iterable[Iterator[Any]]) -> Iterator[Any]:
    for it in iters:
        yield from it


def _suffix_ok(p: Path) -> bool:
    return p.name.endswith(_LOCAL_SUFFIXES)


def _iter_file(path: Path, batch_rows: int) -> Iterator[Any]:
    if path.name.endswith(".parquet"):
        return _iter_parquet(path, batch_rows)
    return _iter_jsonl(path)


def _iter_parquet(path: Path, batch_rows: int) -> Iterator[dict[str, Any]]:
    import pyarrow.parquet as pq

    try:
        # Buffered column reads without pre-buffering: pyarrow then streams each column
        # chunk instead of loading the whole row group (which halves the peak on big groups).
        pf = pq.ParquetFile(path, buffer_size=_READ_BUFFER, pre_buffer=False)
    except Exception as exc:  # ArrowInvalid, OSError, ...
        raise TrajectorySourceError(f"{path}: not a readable parquet file ({exc})") from exc
    return _parquet_rows(pf, path, batch_rows)


def _parquet_rows(pf: Any, path: Path, batch_rows: int) -> Iterator[dict[str, Any]]:
    try:
        for batch in pf.iter_batches(batch_size=batch_rows):
            rows = batch.to_pylist()
            del batch  # only the python rows of this batch stay alive
            yield from rows
            del rows
    except Exception as exc:
        raise TrajectorySourceError(f"{path}: reading failed ({type(exc).__name__}: {exc})") from exc


def _iter_jsonl(path: Path) -> Iterator[Any]:
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        fh = opener(path, "rb")
    except OSError as exc:
        raise TrajectorySourceError(f"{path}: cannot open ({exc})") from exc
    return _jsonl_rows(fh, path)


def _jsonl_rows(fh: Any, path: Path) -> Iterator[Any]:
    n = 0
    with fh:
        try:
            for n, raw in enumerate(fh, 1):
                if not raw.strip():
                    continue
                try:
                    yield json.loads(raw)
                except (ValueError, RecursionError) as exc:  # bad JSON, bad UTF-8, absurd nesting
                    yield UnreadableRow("invalid_json_line", f"{path.name} line {n}: {exc}")
        except (OSError, EOFError, zlib.error) as exc:  # a truncated or corrupt .gz
            # The rows read so far stand; the rest of the file is one rejected record and
            # the build goes on with the next file or source.
            yield UnreadableRow("truncated_file", f"{path.name}: reading stopped after line {n} "
                                f"({type(exc).__name__}: {exc})")


def _offline() -> bool:
    return any(os.environ.get(k, "").upper() in _TRUE for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


# ---------------------------------------------------------------------------- conversion


def strip_nulls(value: Any) -> Any:
    """``value`` without the keys whose value is null, at every depth (schema padding)."""
    if isinstance(value, dict):
        return {k: strip_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [strip_nulls(v) for v in value]
    return value


def convert_row(row: Any) -> ConvertedTrajectory | Rejected:
    """One raw row to OpenAI-format messages and tools, or the reason it is unusable."""
    if isinstance(row, UnreadableRow):
        return Rejected(row.reason, row.detail)
    if not isinstance(row, dict):
        return Rejected("not_an_object", f"row is a {type(row).__name__}")
    sid = row.get("trajectory_id") or row.get("instance_id")
    sid = sid if isinstance(sid, str) and sid else None
    try:
        if sid is None:
            raise _Reject("missing_id", "neither trajectory_id nor instance_id is a non-empty string")
        raw = _decode_json_field(row.get("trajectory"), "trajectory", "bad_trajectory")
        if raw is None:
            raise _Reject("missing_trajectory", "trajectory is absent or null")
        if not isinstance(raw, list):
            raise _Reject("bad_trajectory", f"trajectory is a {type(raw).__name__}, not a list")
        if not raw:
            raise _Reject("empty_trajectory", "trajectory has no messages")
        tools = _tools(row.get("tools"))
        messages = [_message(m, i) for i, m in enumerate(raw)]
        repairs: dict[str, int] = {}
        messages = _drop_final_finish(messages, repairs)
        messages = _drop_trailing_unanswered(messages, repairs)
        if not any(m["role"] == "assistant" for m in messages):
            raise _Reject("no_assistant_turn", "no assistant message is left after the repairs")
        _check_pairs(messages)
    except _Reject as rej:
        return Rejected(rej.reason, rej.detail, sid)
    except (TypeError, AttributeError, KeyError, ValueError, RecursionError) as exc:
        # A shape the checks above did not foresee: still a bad row, never a crash.
        return Rejected("bad_message", f"unexpected shape ({type(exc).__name__}: {exc})", sid)
    meta = {k: row[k] for k in _META_FIELDS if row.get(k) is not None}
    if "resolved" in meta and isinstance(meta["resolved"], (int, float)):
        meta["resolved"] = bool(meta["resolved"])
    return ConvertedTrajectory(sid, messages, tools, meta, repairs)


def _decode_json_field(value: Any, name: str, reason: str) -> Any:
    # JSONL exports sometimes carry nested columns as JSON strings.
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            raise _Reject(reason, f"{name} is a string that is not JSON") from None
    return value


def _tools(value: Any) -> list[dict[str, Any]]:
    value = _decode_json_field(value, "tools", "bad_tools")
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
        raise _Reject("bad_tools", "tools is not a list of objects")
    return [strip_nulls(t) for t in value]


def _message(m: Any, i: int) -> dict[str, Any]:
    if not isinstance(m, dict):
        raise _Reject("bad_message", f"message {i} is a {type(m).__name__}")
    role = m.get("role")
    if not isinstance(role, str) or role not in _ROLE_FIELDS:
        raise _Reject("bad_message", f"message {i} has role {role!r}")
    out: dict[str, Any] = {"role": role, "content": _content(m.get("content"), i)}
    if role == "assistant":
        calls = m.get("tool_calls")
        if calls is not None:
            if not isinstance(calls, list):
                raise _Reject("bad_message", f"message {i}: tool_calls is not a list")
            if calls:
                out["tool_calls"] = [_tool_call(c, i) for c in calls]
    elif role == "tool":
        cid, name = m.get("tool_call_id"), m.get("name")
        if not isinstance(cid, str) or not cid:
            raise _Reject("bad_message", f"message {i}: tool result without a tool_call_id")
        if name is not None and not isinstance(name, str):
            raise _Reject("bad_message", f"message {i}: tool name is not a string")
        out["tool_call_id"] = cid
        if name:
            out["name"] = name
    return out


def _content(c: Any, i: int) -> str:
    if c is None:
        return ""
    if isinstance(c, str):
        return c
    # Content given as parts ([{"type": "text", "text": ...}]): keep the text parts.
    if isinstance(c, list) and all(isinstance(p, dict) and isinstance(p.get("text", ""), str) for p in c):
        return "".join(p.get("text", "") for p in c)
    raise _Reject("bad_message", f"message {i}: content is a {type(c).__name__}")


def _tool_call(c: Any, i: int) -> dict[str, Any]:
    fn = c.get("function") if isinstance(c, dict) else None
    if not isinstance(fn, dict) or not isinstance(c.get("id"), str) or not c["id"]:
        raise _Reject("bad_message", f"message {i}: a tool call without an id or a function")
    name, args = fn.get("name"), fn.get("arguments")
    if not isinstance(name, str) or not name:
        raise _Reject("bad_message", f"message {i}: tool call {c['id']} has no function name")
    if isinstance(args, dict):  # already decoded by some exporter: re-encode
        args = json.dumps(args, ensure_ascii=False)
    if not isinstance(args, str):
        raise _Reject("invalid_arguments_json", f"message {i}: call {c['id']} arguments are a {type(args).__name__}")
    try:
        parsed = json.loads(args)
    except ValueError as exc:
        raise _Reject("invalid_arguments_json", f"message {i}: call {c['id']} ({name}): {exc}") from None
    if not isinstance(parsed, dict):
        raise _Reject("invalid_arguments_json", f"message {i}: call {c['id']} ({name}) arguments are not an object")
    return {"id": c["id"], "type": "function", "function": {"name": name, "arguments": args}}


def _last_call_turn(messages: list[dict[str, Any]]) -> int | None:
    """Index of the last assistant message with calls when only tool results follow it."""
    for i in range(len(messages) - 1, -1, -1):
        role = messages[i]["role"]
        if role == "assistant":
            return i if messages[i].get("tool_calls") else None
        if role != "tool":
            return None
    return None


def _drop_final_finish(messages: list[dict[str, Any]], repairs: dict[str, int]) -> list[dict[str, Any]]:
    a = _last_call_turn(messages)
    if a is None:
        return messages
    answered = {m["tool_call_id"] for m in messages[a + 1:]}
    calls = messages[a]["tool_calls"]
    keep = [c for c in calls if c["function"]["name"] != "finish" or c["id"] in answered]
    if len(keep) == len(calls):
        return messages
    repairs["final_finish_dropped"] = len(calls) - len(keep)
    turn = {k: v for k, v in messages[a].items() if k != "tool_calls"}
    if keep:
        turn["tool_calls"] = keep
    elif not turn["content"].strip():
        return messages[:a] + messages[a + 1:]
    return messages[:a] + [turn] + messages[a + 1:]


def _drop_trailing_unanswered(messages: list[dict[str, Any]], repairs: dict[str, int]) -> list[dict[str, Any]]:
    a = _last_call_turn(messages)
    if a is None:
        return messages
    ids = {c["id"] for c in messages[a]["tool_calls"]}
    answered = {m["tool_call_id"] for m in messages[a + 1:]}
    if ids <= answered:
        return messages
    # The turn goes, and so do the results of its sibling calls; results that belong to no
    # call of this turn stay, and the pairing check rejects them.
    rest = [m for m in messages[a + 1:] if m["tool_call_id"] not in ids]
    repairs["trailing_turn_dropped"] = 1
    repairs["trailing_results_dropped"] = len(messages) - a - 1 - len(rest)
    return messages[:a] + rest


def _check_pairs(messages: list[dict[str, Any]]) -> None:
    pending: dict[str, str] = {}  # call id -> tool name, from the latest assistant turn
    seen: set[str] = set()
    for i, m in enumerate(messages):
        if m["role"] == "tool":
            cid = m["tool_call_id"]
            if cid not in pending:
                where = "answered twice" if cid in seen else "no call before it"
                raise _Reject("unmatched_tool_result", f"message {i}: result for {cid}: {where}")
            name = pending.pop(cid)
            m.setdefault("name", name)  # the result names its tool, as OpenAI results do
            continue
        if pending:
            raise _Reject("unmatched_tool_call", f"message {i}: calls {sorted(pending)} have no result before it")
        for c in m.get("tool_calls", ()):
            if c["id"] in seen:
                raise _Reject("bad_message", f"message {i}: tool call id {c['id']} is reused")
            seen.add(c["id"])
            pending[c["id"]] = c["function"]["name"]
    if pending:
        raise _Reject("unmatched_tool_call", f"calls {sorted(pending)} have no result")


# ---------------------------------------------------------------------------- sessions


def to_session(converted: ConvertedTrajectory) -> Session:
    """A ``Session`` with steps and hindsight facts; raises ``SessionError`` only on a bug.

    Steps and facts come from ``data_gen.sources.trajectory_facts.steps_and_facts``.
    """
    msgs = converted.messages
    steps, facts = steps_and_facts(msgs)
    meta = dict(converted.meta, dataset=DATASET_ID, repairs=dict(converted.repairs))
    session = Session(
        session_id=converted.session_id, family=SOURCE,
        seed=zlib.crc32(converted.session_id.encode()), messages=msgs, steps=steps,
        facts=facts, tools=converted.tools, source=SOURCE, license=LICENSE, meta=meta)
    return session.validate()


# ---------------------------------------------------------------------------- validation


@dataclass
class TrajectoryStats:
    """Counts for a manifest: rows read, accepted, rejected by reason, repairs applied."""

    rows: int = 0
    accepted: int = 0
    rejected: Counter = field(default_factory=Counter)
    repaired: Counter = field(default_factory=Counter)
    first_rejects: dict[str, dict[str, Any]] = field(default_factory=dict)

    def reject(self, rej: Rejected, row_index: int) -> None:
        self.rejected[rej.reason] += 1
        self.first_rejects.setdefault(rej.reason, {"row": row_index, "id": rej.row_id, "detail": rej.detail})

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "accepted": self.accepted,
                "rejected": dict(sorted(self.rejected.items())),
                "repaired": dict(sorted(self.repaired.items())),
                "first_rejects": dict(sorted(self.first_rejects.items()))}


def iter_sessions(rows: Iterable[Any], stats: TrajectoryStats | None = None) -> Iterator[Session]:
    """Accepted rows as sessions; every rejected row is counted in ``stats``, none raises."""
    stats = stats if stats is not None else TrajectoryStats()
    for k, row in enumerate(rows):
        stats.rows += 1
        result = convert_row(row)
        if isinstance(result, Rejected):
            stats.reject(result, k)
            continue
        try:
            session = to_session(result)
        except (SessionError, ValueError, KeyError, TypeError) as exc:  # a bug, counted not fatal
            stats.reject(Rejected("session_invalid", str(exc), result.session_id), k)
            continue
        stats.accepted += 1
        stats.repaired.update(result.repairs)
        yield session


def validate_path(path: str | os.PathLike, *, batch_rows: int = 64, revision: str = DEFAULT_REVISION,
                  split: str = "train", limit: int | None = None) -> dict[str, Any]:
    """Stream a source through conversion and session building; return the counts.

    ``{"rows", "accepted", "rejected": {reason: n}, "repaired": {rule: n}, "first_rejects"}``.
    Raises ``TrajectorySourceError`` only when the source itself cannot be read.
    """
    rows = iter_rows(path, revision=revision, batch_rows=batch_rows, split=split)
    if limit is not None:
        rows = itertools.islice(rows, limit)
    stats = TrajectoryStats()
    for _ in iter_sessions(rows, stats):
        pass
    return stats.to_dict()
