"""Readers for the logs acp-kernel hosts write (spec §8): Pi's structured ``acp.log``
(``<ts> [level] [scope] k=v ...``) and the proxy's free-text ``bili.log``. ``read_log``
turns both into ``CompressEvent`` records, streaming; ``iter_log`` also yields the nudge
events. A bad log line is skipped and counted in ``LogStats``, never raised.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from doctrine.kernel.readers import _is_int

PENDING_MAX_LINES = 200  # an applied event waits at most this long for its follow-ups

@dataclass
class CompressEvent:
    """One compression outcome found in a log."""

    ts: str
    host: str  # "bc-pi" (structured acp.log) | "bc-proxy" (free-text bili.log)
    session_id: str | None
    blocks_created: int
    tokens_compressed: int
    before_tokens: int | None = None
    after_tokens: int | None = None
    new_block_ids: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # messages (Pi logs at most 5)
    warnings: list[str] = field(default_factory=list)
    error_count: int = 0
    warning_count: int = 0
    ranges: int | None = None
    range_refs: list[tuple[str, str]] = field(default_factory=list)  # proxy: (mA, mB)
    summaries: dict[str, str] = field(default_factory=dict)  # block id -> summary (debug)
    spans: list[dict[str, Any]] = field(default_factory=list)  # debug compress-in spans
    ok: bool = True  # False for a proxy "Compression FAILED" line
    source: str = ""
    line_no: int = 0


@dataclass
class NudgeEvent:
    """A proxy ``nudge INJECT T<n>`` / ``nudge idle`` line."""

    ts: str
    inject: bool
    tier: int | None
    fields: dict[str, str] = field(default_factory=dict)
    text: str = ""
    source: str = ""
    line_no: int = 0


@dataclass
class LogStats:
    """Counts kept while reading a log (pass one to read_log to see them)."""

    lines: int = 0
    blank: int = 0
    events: int = 0
    nudges: int = 0
    malformed: int = 0  # lines without the `<ts> [level]` prefix, or bad applied records
    orphan_followups: int = 0  # errors/warnings lines with no applied line before them
    other: int = 0  # well-formed lines that carry no compress event


_PREFIX = re.compile(r"^(\d{4}-\d\d-\d\dT[0-9:.]+Z?(?:[+-]\d\d:?\d\d)?) \[(\w+)\] (.*)$")
_SCOPE = re.compile(r"^\[([\w.:-]+)\] ?(.*)$")
_KEY_AT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")
_NEXT_KEY = re.compile(r" ([A-Za-z_][A-Za-z0-9_]*)=")
_SID = re.compile(r"(?:^| )sid=(\S+)")
_COMPRESS_SCOPES = ("compress", "compress-in", "compress-out")
_PROXY_OK = re.compile(r"\[Compressed (?P<refs>.+?) → (?P<n>\d+) block\(s\), "
                       r"~(?P<t>\d+) tokens saved\.(?P<rest>[^\]]*)\]")
_PROXY_FAIL = re.compile(r"\[Compression FAILED: (?P<errs>.*?)\](?:\]|$)")
_PROXY_RANGE = re.compile(r"(m\d+)\s*[–-]\s*(m\d+)")
_NUDGE = re.compile(r"\bnudge (?:(?P<inject>INJECT) T(?P<tier>\d)|(?P<idle>idle))\b(?P<rest>.*)$")
_FIELD = re.compile(r"([A-Za-z_][\w.]*)=([^\s,;]+)")


_DECODER = json.JSONDecoder()
_LITERALS = {"true": True, "false": False, "null": None}
_INT = re.compile(r"-?(?:0|[1-9]\d*)")
_MAX_INT_CHARS = 40  # longer digit runs are kept as raw strings (int() refuses past 4,300)


def parse_kv(body: str) -> dict[str, Any]:
    """Parse Pi's ``k=v k=v`` body: JSON values are decoded, raw strings kept as written.

    Pi writes strings raw and everything else JSON-encoded, so a raw string may contain
    spaces: it runs up to the next `` key=``. A value that parses as JSON right up to a space
    or the end of the line is decoded (so an all-digit raw string reads as a number).
    """
    out: dict[str, Any] = {}
    pos, n = 0, len(body)
    while pos < n:
        m = _KEY_AT.match(body, pos)
        if m is None:  # junk before the next key: skip it
            nxt = _NEXT_KEY.search(body, pos)
            if nxt is None:
                break
            pos = nxt.start() + 1
            continue
        key, start = m.group(1), m.end()
        end = body.find(" ", start)
        end = n if end < 0 else end
        token = body[start:end]
        found = False
        # Fast paths for the common scalars; containers and strings go through json.
        if _INT.fullmatch(token) and len(token) <= _MAX_INT_CHARS:
            value, found = int(token), True
        elif token in _LITERALS:
            value, found = _LITERALS[token], True
        elif token[:1] in ('[', '{', '"') or token[:1] == "-" or token[:1].isdigit():
            try:
                value, e = _DECODER.raw_decode(body, start)
                if e == n or body[e] == " ":
                    end, found = e, True
            except (ValueError, RecursionError):  # not JSON, a huge number, absurd nesting
                pass
        if not found:
            nxt = _NEXT_KEY.search(body, start)
            end = nxt.start() if nxt else n
            value = body[start:end]
        out[key] = value
        pos = end + 1
    return out


def iter_log(path: str | os.PathLike[str],
             stats: LogStats | None = None) -> Iterator[CompressEvent | NudgeEvent]:
    """Stream compress and nudge events from a Pi ``acp.log`` or a proxy ``bili.log``.

    Pi writes ``compress-in``/``compress-out`` (debug) before ``event=applied`` and the
    ``event=errors``/``event=warnings`` follow-ups right after it. An applied event is held
    until its session logs another line (or PENDING_MAX_LINES lines pass, or the file ends),
    so its follow-ups can be attached even when other sessions' lines come in between.
    Events are yielded when complete; ``line_no`` gives their order in the file.
    """
    st = stats if stats is not None else LogStats()
    src = os.fspath(path)
    pending: dict[str | None, CompressEvent] = {}  # by session id, in insertion order
    debug_in: dict[str, list[dict[str, Any]]] = {}
    debug_out: dict[str, dict[str, str]] = {}

    def release(sid: str | None = None, before: int | None = None) -> Iterator[CompressEvent]:
        for key in list(pending):
            ev = pending[key]
            if (before is None and key == sid) or (before is not None and ev.line_no < before):
                del pending[key]
                st.events += 1
                yield ev

    line_no = 0
    with open(src, "rb") as f:
        for line_no, raw_bytes in enumerate(f, start=1):
            st.lines += 1
            if pending and line_no - PENDING_MAX_LINES > min(e.line_no for e in pending.values()):
                yield from release(before=line_no - PENDING_MAX_LINES)
            try:
                line = raw_bytes.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                st.malformed += 1  # one undecodable line is skipped, the rest of the log is read
                continue
            if not line.strip():
                st.blank += 1
                continue
            m = _PREFIX.match(line)
            if m is None:
                st.malformed += 1  # e.g. continuation lines of a logged stack trace
                continue
            ts, _level, rest = m.groups()
            sm = _SCOPE.match(rest)
            if sm is None or "=" not in sm.group(2):
                try:
                    found = _proxy_event(ts, rest, src, line_no)
                except ValueError:  # e.g. a count too long for int()
                    st.malformed += 1
                    continue
                if found is None:
                    st.other += 1
                elif isinstance(found, NudgeEvent):
                    st.nudges += 1
                    yield found
                else:
                    st.events += 1
                    yield found
                continue
            scope, body = sm.groups()
            if scope not in _COMPRESS_SCOPES:
                # Only the session id matters here: it completes that session's event.
                sm_sid = _SID.search(body)
                sid = sm_sid.group(1) if sm_sid else None
                if sid in pending:
                    yield from release(sid)
                st.other += 1
                continue
            try:
                fields = parse_kv(body)
                sid = None if fields.get("sid") is None else str(fields["sid"])
            except (ValueError, TypeError, RecursionError):
                st.malformed += 1
                continue
            event = fields.get("event")
            if scope == "compress" and event in ("errors", "warnings"):
                if sid in pending:
                    try:
                        _attach_followup(pending[sid], event, fields)
                    except (ValueError, TypeError, RecursionError):
                        st.malformed += 1
                else:
                    st.orphan_followups += 1
                continue
            if sid in pending:  # this session moved on: its event is complete
                yield from release(sid)
            if scope == "compress-in" and sid:
                spans = fields.get("spans")
                debug_in[sid] = spans if isinstance(spans, list) else []
                st.other += 1
            elif scope == "compress-out" and sid:
                debug_out[sid] = _summaries(fields.get("newBlocks"))
                st.other += 1
            elif scope == "compress" and event == "applied":
                try:
                    ev = _applied_event(ts, sid, fields, src, line_no)
                except (ValueError, TypeError, RecursionError):
                    ev = None
                if ev is None:
                    st.malformed += 1
                    continue
                ev.spans = debug_in.pop(sid or "", [])
                ev.summaries = debug_out.pop(sid or "", {})
                pending[sid] = ev
            else:
                st.other += 1
    yield from release(before=line_no + 1)
    return st


def _summaries(blocks: Any) -> dict[str, str]:
    if not isinstance(blocks, list):
        return {}
    return {b["blockId"]: b["summary"] for b in blocks
            if isinstance(b, dict) and isinstance(b.get("blockId"), str)
            and isinstance(b.get("summary"), str)}


def read_log(path: str | os.PathLike[str], stats: LogStats | None = None) -> Iterator[CompressEvent]:
    """Stream the compress events of a log, line by line (nudge lines are counted only).

    Malformed lines are skipped and counted in ``stats`` (pass a LogStats to read them).
    """
    for ev in iter_log(path, stats):
        if isinstance(ev, CompressEvent):
            yield ev


def _int_field(fields: dict[str, Any], key: str) -> int | None:
    v = fields.get(key)
    if _is_int(v):
        return int(v)
    if isinstance(v, str) and v.isdigit() and len(v) <= _MAX_INT_CHARS:
        return int(v)
    return None


def _applied_event(ts: str, sid: str | None, fields: dict[str, Any], src: str,
                   line_no: int) -> CompressEvent | None:
    created = _int_field(fields, "blocksCreated")
    tokens = _int_field(fields, "tokensCompressed")
    if created is None or tokens is None:
        return None
    ids = fields.get("newBlockIds", [])
    if not isinstance(ids, list) or not all(isinstance(x, str) for x in ids):
        return None
    if created == 0:
        ids = []  # the host slices the last `blocksCreated` blocks, and slice(-0) is all of them
    return CompressEvent(
        ts=ts, host="bc-pi", session_id=sid, blocks_created=created, tokens_compressed=tokens,
        before_tokens=_int_field(fields, "beforeTokens"),
        after_tokens=_int_field(fields, "afterTokens"), new_block_ids=list(ids),
        error_count=_int_field(fields, "errors") or 0,
        warning_count=_int_field(fields, "warnings") or 0,
        ranges=_int_field(fields, "ranges"), source=src, line_no=line_no)


def _attach_followup(ev: CompressEvent, kind: str, fields: dict[str, Any]) -> None:
    items = fields.get(kind)
    texts = [str(x) for x in items] if isinstance(items, list) else \
        [items] if isinstance(items, str) else []
    count = _int_field(fields, "count")
    if kind == "errors":
        ev.errors.extend(texts)
        ev.error_count = max(ev.error_count, count or len(texts))
    else:
        ev.warnings.extend(texts)
        ev.warning_count = max(ev.warning_count, count or len(texts))


def _proxy_event(ts: str, text: str, src: str, line_no: int) -> CompressEvent | NudgeEvent | None:
    m = _PROXY_OK.search(text)
    if m is not None:
        rest = m.group("rest").strip()
        warnings = [w.strip() for w in rest.split("; ") if w.strip()] if rest else []
        return CompressEvent(
            ts=ts, host="bc-proxy", session_id=None, blocks_created=int(m.group("n")),
            tokens_compressed=int(m.group("t")), warnings=warnings, warning_count=len(warnings),
            range_refs=_PROXY_RANGE.findall(m.group("refs")),
            ranges=len(_PROXY_RANGE.findall(m.group("refs"))) or None, source=src,
            line_no=line_no)
    m = _PROXY_FAIL.search(text)
    if m is not None:
        errs = [e.strip() for e in m.group("errs").split("; ") if e.strip()]
        return CompressEvent(ts=ts, host="bc-proxy", session_id=None, blocks_created=0,
                             tokens_compressed=0, errors=errs, error_count=len(errs), ok=False,
                             source=src, line_no=line_no)
    m = _NUDGE.search(text)
    if m is not None:
        return NudgeEvent(ts=ts, inject=m.group("inject") is not None,
                          tier=int(m.group("tier")) if m.group("tier") else None,
                          fields=dict(_FIELD.findall(m.group("rest"))), text=text,
                          source=src, line_no=line_no)
    return None
