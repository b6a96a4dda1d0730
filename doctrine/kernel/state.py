"""Compression state of the context kernel (spec §2.1 and §8.1).

Two JSON shapes are supported:

* acp-kernel's own camelCase ``CompressionState`` (what every host persists), read with the
  kernel's merge rule: start from a fresh initial state, take the fields that are present,
  merge ``nudge`` and ``stats`` key by key, ignore unknown keys;
* our versioned envelope ``{"format": FORMAT, "version": 1, "state": <acp-shaped>}``.

Python code uses snake_case everywhere; the camelCase names live only in the two
``*_acp_json`` functions.
"""

from __future__ import annotations

import copy as _copy
import json
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any

FORMAT = "doctrine-to-weights/kernel-state"
VERSION = 1
BLOCKED = "BLOCKED"
SUMMARY_ID_PREFIX = "acp_summary_"


class StateError(ValueError):
    """A persisted state that cannot be read: names the source file and the field."""

    def __init__(self, source: str, field_name: str, reason: str):
        self.source = source
        self.field = field_name
        self.reason = reason
        super().__init__(f"{source}: field {field_name!r}: {reason}")


@dataclass
class Block:
    """One compression block (spec §2.1)."""

    block_id: str
    run_id: str
    tier: int
    summary: str
    direct_message_ids: list[str] = field(default_factory=list)
    effective_message_ids: list[str] = field(default_factory=list)
    direct_block_ids: list[str] = field(default_factory=list)
    compressed_tokens: int = 0
    created_at: int = 0  # epoch milliseconds
    survived_count: int = 0
    generation: str = "young"  # "young" | "old"; display only
    active: bool = True
    topic: str | None = None
    duration_ms: int | None = None
    compress_call_id: str | None = None
    start_ref: str | None = None
    end_ref: str | None = None

    def copy(self, share_lists: bool = False) -> Block:
        # Hot path (every turn copies every block): copy the attribute dict directly.
        # ``share_lists``: keep the id lists shared (the pipeline's own copies: no kernel stage
        # changes a block's lists after it is made; sync and survival set scalars only).
        new = object.__new__(Block)
        new.__dict__.update(self.__dict__)
        if not share_lists:
            new.direct_message_ids = list(self.direct_message_ids)
            new.effective_message_ids = list(self.effective_message_ids)
            new.direct_block_ids = list(self.direct_block_ids)
        return new

    @property
    def summary_message_id(self) -> str:
        return SUMMARY_ID_PREFIX + self.block_id


@dataclass
class NudgeStamps:
    """The nudge bookkeeping of §4.4 (baseline = ``last_per_message_nudge_tokens``)."""

    last_per_message_nudge_tokens: int = 0
    last_nudge_shown_tokens: int = 0
    baseline_tokens: int = 0  # unused by the kernel, kept for round trips
    anchors: dict[str, Any] = field(default_factory=dict)  # unused, kept for round trips
    last_shown_by_tier: dict[int, int] = field(default_factory=dict)
    ever_injected: bool | None = None  # newer kernels only


@dataclass
class Stats:
    tokens_compressed: int = 0
    compression_count: int = 0
    absorbed_tokens: int | None = None  # newer kernels only


@dataclass
class CompressionState:
    """Everything the kernel remembers between turns (spec §8.1)."""

    blocks: list[Block] = field(default_factory=list)
    by_raw: dict[str, str] = field(default_factory=dict)  # raw id -> "mNNNNN" | "BLOCKED"
    by_ref: dict[str, str] = field(default_factory=dict)  # "mNNNNN" -> raw id
    token_snapshot: dict[str, int] = field(default_factory=dict)  # ref -> frozen tag tokens
    nudge: NudgeStamps = field(default_factory=NudgeStamps)
    stats: Stats = field(default_factory=Stats)
    next_block_id: int = 1
    next_run_id: int = 1
    absorbed: list[dict[str, Any]] | None = None  # newer kernels only, passed through

    # ------------------------------------------------------------------ basics
    @classmethod
    def initial(cls) -> CompressionState:
        """A fresh state, as the kernel creates it for a new session."""
        return cls()

    def copy(self, share_lists: bool = False) -> CompressionState:
        """A deep copy (dict values are immutable, so shallow dict copies suffice).

        ``share_lists``: the pipeline's per-turn copy. The blocks' id lists and the ref and
        snapshot maps stay shared with this state; the stages that add to a map replace it
        with a copy first (``assign_refs``, ``render_tags``, ``sync_blocks``), and nothing
        changes a block's lists, so the input state is still never changed."""
        share = share_lists
        return CompressionState(
            blocks=[b.copy(share_lists) for b in self.blocks],
            by_raw=self.by_raw if share else dict(self.by_raw),
            by_ref=self.by_ref if share else dict(self.by_ref),
            token_snapshot=self.token_snapshot if share else dict(self.token_snapshot),
            nudge=NudgeStamps(
                last_per_message_nudge_tokens=self.nudge.last_per_message_nudge_tokens,
                last_nudge_shown_tokens=self.nudge.last_nudge_shown_tokens,
                baseline_tokens=self.nudge.baseline_tokens,
                anchors=_copy.deepcopy(self.nudge.anchors),
                last_shown_by_tier=dict(self.nudge.last_shown_by_tier),
                ever_injected=self.nudge.ever_injected,
            ),
            stats=Stats(
                self.stats.tokens_compressed,
                self.stats.compression_count,
                self.stats.absorbed_tokens,
            ),
            next_block_id=self.next_block_id,
            next_run_id=self.next_run_id,
            absorbed=_copy.deepcopy(self.absorbed),
        )

    def block(self, block_id: str) -> Block | None:
        """The block with this id, or None."""
        for b in self.blocks:
            if b.block_id == block_id:
                return b
        return None

    def active_blocks(self) -> list[Block]:
        return [b for b in self.blocks if b.active]

    def covered_ids(self) -> set[str]:
        """Raw ids covered by an active block."""
        out: set[str] = set()
        for b in self.blocks:
            if b.active:
                out.update(b.effective_message_ids)
        return out

    # ------------------------------------------------------------------ acp JSON
    def to_acp_json(self) -> dict[str, Any]:
        """acp-kernel's camelCase shape; optional fields that are None are omitted."""
        nudge: dict[str, Any] = {
            "lastPerMessageNudgeTokens": self.nudge.last_per_message_nudge_tokens,
            "lastNudgeShownTokens": self.nudge.last_nudge_shown_tokens,
            "baselineTokens": self.nudge.baseline_tokens,
            "anchors": _copy.deepcopy(self.nudge.anchors),
            "lastShownByTier": {str(k): v for k, v in sorted(self.nudge.last_shown_by_tier.items())},
        }
        if self.nudge.ever_injected is not None:
            nudge["everInjected"] = self.nudge.ever_injected
        stats: dict[str, Any] = {
            "tokensCompressed": self.stats.tokens_compressed,
            "compressionCount": self.stats.compression_count,
        }
        if self.stats.absorbed_tokens is not None:
            stats["absorbedTokens"] = self.stats.absorbed_tokens
        out: dict[str, Any] = {
            "blocks": [_block_to_acp(b) for b in self.blocks],
            "messageRefs": {"byRaw": dict(self.by_raw), "byRef": dict(self.by_ref)},
            "tokenSnapshot": dict(self.token_snapshot),
            "nudge": nudge,
            "stats": stats,
            "nextBlockId": self.next_block_id,
            "nextRunId": self.next_run_id,
        }
        if self.absorbed is not None:
            out["absorbed"] = _copy.deepcopy(self.absorbed)
        return out

    @classmethod
    def from_acp_json(cls, d: Any, *, source: str = "<dict>") -> CompressionState:
        """Read acp-kernel's camelCase state with the kernel's merge rule (§8.1).

        Raises StateError naming ``source`` and the offending field on a missing required
        block field or a wrong type.
        """
        if not isinstance(d, dict):
            raise StateError(source, "<root>", f"expected an object, got {_tname(d)}")
        st = cls.initial()
        if "blocks" in d:
            blocks = d["blocks"]
            if not isinstance(blocks, list):
                raise StateError(source, "blocks", f"expected a list, got {_tname(blocks)}")
            st.blocks = [_block_from_acp(b, source, i) for i, b in enumerate(blocks)]
        if "messageRefs" in d:
            refs = d["messageRefs"]
            if not isinstance(refs, dict):
                raise StateError(source, "messageRefs", f"expected an object, got {_tname(refs)}")
            st.by_raw = _str_map(refs.get("byRaw", {}), source, "messageRefs.byRaw")
            st.by_ref = _str_map(refs.get("byRef", {}), source, "messageRefs.byRef")
        if "tokenSnapshot" in d:
            snap = d["tokenSnapshot"]
            if not isinstance(snap, dict):
                raise StateError(source, "tokenSnapshot", f"expected an object, got {_tname(snap)}")
            st.token_snapshot = {
                str(k): _int(v, source, f"tokenSnapshot.{k}") for k, v in snap.items()
            }
        if "nudge" in d:
            _merge_nudge(st.nudge, d["nudge"], source)
        if "stats" in d:
            _merge_stats(st.stats, d["stats"], source)
        if "nextBlockId" in d:
            st.next_block_id = _int(d["nextBlockId"], source, "nextBlockId")
        if "nextRunId" in d:
            st.next_run_id = _int(d["nextRunId"], source, "nextRunId")
        if "absorbed" in d:
            ab = d["absorbed"]
            if not isinstance(ab, list):
                raise StateError(source, "absorbed", f"expected a list, got {_tname(ab)}")
            st.absorbed = _copy.deepcopy(ab)
        return st

    # ------------------------------------------------------------------ our envelope
    def to_json(self) -> dict[str, Any]:
        """Our versioned envelope around the acp-shaped state."""
        return {"format": FORMAT, "version": VERSION, "state": self.to_acp_json()}

    @classmethod
    def from_json(cls, d: Any, *, source: str = "<dict>") -> CompressionState:
        """Read our envelope; rejects another format or a newer version."""
        if not isinstance(d, dict):
            raise StateError(source, "<root>", f"expected an object, got {_tname(d)}")
        if d.get("format") != FORMAT:
            raise StateError(source, "format", f"expected {FORMAT!r}, got {d.get('format')!r}")
        version = d.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise StateError(source, "version", f"expected a positive integer, got {version!r}")
        if version > VERSION:
            raise StateError(source, "version", f"version {version} is newer than {VERSION}")
        if "state" not in d:
            raise StateError(source, "state", "missing")
        return cls.from_acp_json(d["state"], source=source)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write our envelope atomically (temp file in the same folder, then rename)."""
        write_json_atomic(path, self.to_json())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> CompressionState:
        """Read a file in our envelope or in acp-kernel's bare shape."""
        src = os.fspath(path)
        try:
            with open(src, encoding="utf-8") as f:
                d = json.load(f)
        except json.JSONDecodeError as e:
            raise StateError(src, "<root>", f"invalid JSON: {e}") from None
        if isinstance(d, dict) and "format" in d:
            return cls.from_json(d, source=src)
        return cls.from_acp_json(d, source=src)


def write_json_atomic(path: str | os.PathLike[str], obj: Any) -> None:
    """Dump ``obj`` as JSON to ``path`` through a temp file and os.replace."""
    target = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(target))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-" + os.path.basename(target) + "-", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(obj, f, ensure_ascii=False, indent=1)
            f.write("\n")
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# ---------------------------------------------------------------------- helpers
# Block fields: (camelCase name, python name, kind, required)
_BLOCK_FIELDS: list[tuple[str, str, str, bool]] = [
    ("blockId", "block_id", "str", True),
    ("summary", "summary", "str", True),
    ("tier", "tier", "tier", True),
    ("compressedTokens", "compressed_tokens", "int", True),
    ("createdAt", "created_at", "int", True),
    ("runId", "run_id", "str", False),
    ("directMessageIds", "direct_message_ids", "strlist", False),
    ("effectiveMessageIds", "effective_message_ids", "strlist", False),
    ("directBlockIds", "direct_block_ids", "strlist", False),
    ("survivedCount", "survived_count", "int", False),
    ("generation", "generation", "str", False),
    ("active", "active", "bool", False),
    ("topic", "topic", "optstr", False),
    ("durationMs", "duration_ms", "optint", False),
    ("compressCallId", "compress_call_id", "optstr", False),
    ("startRef", "start_ref", "optstr", False),
    ("endRef", "end_ref", "optstr", False),
]


def _tname(v: Any) -> str:
    return "null" if v is None else type(v).__name__


def _int(v: Any, source: str, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise StateError(source, name, f"expected an integer, got {_tname(v)}")
    if isinstance(v, float):
        if not v.is_integer():
            raise StateError(source, name, f"expected an integer, got {v!r}")
        v = int(v)
    return v


def _str_map(v: Any, source: str, name: str) -> dict[str, str]:
    if not isinstance(v, dict):
        raise StateError(source, name, f"expected an object, got {_tname(v)}")
    for k, x in v.items():
        if not isinstance(x, str):
            raise StateError(source, f"{name}.{k}", f"expected a string, got {_tname(x)}")
    return dict(v)


def _block_from_acp(d: Any, source: str, index: int) -> Block:
    where = f"blocks[{index}]"
    if not isinstance(d, dict):
        raise StateError(source, where, f"expected an object, got {_tname(d)}")
    values: dict[str, Any] = {}
    for camel, py, kind, required in _BLOCK_FIELDS:
        name = f"{where}.{camel}"
        if camel not in d or (d[camel] is None and kind not in ("optstr", "optint")):
            if required:
                raise StateError(source, name, "missing required field")
            continue
        v = d[camel]
        if kind == "str":
            if not isinstance(v, str):
                raise StateError(source, name, f"expected a string, got {_tname(v)}")
        elif kind == "optstr":
            if v is not None and not isinstance(v, str):
                raise StateError(source, name, f"expected a string, got {_tname(v)}")
        elif kind == "int":
            v = _int(v, source, name)
        elif kind == "optint":
            v = None if v is None else _int(v, source, name)
        elif kind == "tier":
            v = _int(v, source, name)
            if v not in (1, 2, 3):
                raise StateError(source, name, f"expected 1, 2 or 3, got {v}")
        elif kind == "bool":
            if not isinstance(v, bool):
                raise StateError(source, name, f"expected a boolean, got {_tname(v)}")
        elif kind == "strlist":
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise StateError(source, name, "expected a list of strings")
            v = list(v)
        values[py] = v
    values.setdefault("run_id", "")
    if "effective_message_ids" not in values:
        # Older or minimal contracts omit coverage; the direct ids are the best guess.
        values["effective_message_ids"] = list(values.get("direct_message_ids", []))
    return Block(**values)


def _block_to_acp(b: Block) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for camel, py, kind, _required in _BLOCK_FIELDS:
        v = getattr(b, py)
        if v is None:
            continue
        out[camel] = list(v) if kind == "strlist" else v
    return out


def _merge_nudge(n: NudgeStamps, d: Any, source: str) -> None:
    if not isinstance(d, dict):
        raise StateError(source, "nudge", f"expected an object, got {_tname(d)}")
    ints = {
        "lastPerMessageNudgeTokens": "last_per_message_nudge_tokens",
        "lastNudgeShownTokens": "last_nudge_shown_tokens",
        "baselineTokens": "baseline_tokens",
    }
    for camel, py in ints.items():
        if camel in d:
            setattr(n, py, _int(d[camel], source, f"nudge.{camel}"))
    if "anchors" in d:
        if not isinstance(d["anchors"], dict):
            raise StateError(source, "nudge.anchors", f"expected an object, got {_tname(d['anchors'])}")
        n.anchors = _copy.deepcopy(d["anchors"])
    if "lastShownByTier" in d:
        t = d["lastShownByTier"]
        if not isinstance(t, dict):
            raise StateError(source, "nudge.lastShownByTier", f"expected an object, got {_tname(t)}")
        out: dict[int, int] = {}
        for k, v in t.items():
            try:
                key = int(k)
            except (TypeError, ValueError):
                raise StateError(source, f"nudge.lastShownByTier.{k}", "key is not a tier number") from None
            out[key] = _int(v, source, f"nudge.lastShownByTier.{k}")
        n.last_shown_by_tier = out
    if "everInjected" in d:
        if not isinstance(d["everInjected"], bool):
            raise StateError(source, "nudge.everInjected", "expected a boolean")
        n.ever_injected = d["everInjected"]


def _merge_stats(s: Stats, d: Any, source: str) -> None:
    if not isinstance(d, dict):
        raise StateError(source, "stats", f"expected an object, got {_tname(d)}")
    if "tokensCompressed" in d:
        s.tokens_compressed = _int(d["tokensCompressed"], source, "stats.tokensCompressed")
    if "compressionCount" in d:
        s.compression_count = _int(d["compressionCount"], source, "stats.compressionCount")
    if "absorbedTokens" in d:
        s.absorbed_tokens = _int(d["absorbedTokens"], source, "stats.absorbedTokens")
