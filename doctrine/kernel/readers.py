"""Readers for the state files and logs that acp-kernel hosts leave on disk (spec §8).

Three hosts write state:

* ``acp-kernel``: the bare ``CompressionState`` JSON (§8.1), or the kernel's generic
  ``StateStore`` envelope ``{version, savedAt, id, payload}`` (§8.2), or our own envelope
  (``doctrine.kernel.state.FORMAT``);
* ``bc-proxy``: billion-context session files, v1 (meta and stats flat) and v3 (nested
  ``meta``/``stats``, the last client ``messages``, cached ``blockContents``) (§8.3);
* ``bc-pi``: billion-context-pi sidecars ``<session>.jsonl.acp.json`` (§8.4), whose messages
  live in Pi's ``.jsonl`` session log next to them.

The hosts' logs are read by ``doctrine.kernel.logs``.

Bad input never escapes as an unexpected exception: a bad state file is a ``StateError``
naming the file and the field.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

from doctrine.kernel.messages import Message
from doctrine.kernel.state import FORMAT as OWN_FORMAT
from doctrine.kernel.state import CompressionState, StateError

HOSTS = ("acp-kernel", "bc-proxy", "bc-pi")
PROXY_VERSIONS = (1, 2, 3)  # PERSIST_VERSION is 3; 2 never shipped a different shape
PI_SIDECAR_SUFFIX = ".acp.json"
PI_MAX_PARENT_HOPS = 8  # the host follows parentSession at most this deep


@dataclass
class CachedBlockContent:
    """The proxy's ``blockContents[bN]``: originals captured at compress time."""

    one_text: str  # direct messages plus nested child summaries
    one_count: int
    full_text: str  # every original message
    full_count: int


@dataclass
class LoggedSession:
    """One session read from a host's state file."""

    source: str
    host: str  # "acp-kernel" | "bc-proxy" | "bc-pi"
    session_id: str
    state: CompressionState
    messages: list[Message] | None = None
    block_contents: dict[str, str] | None = None  # block id -> full original text
    meta: dict[str, Any] = field(default_factory=dict)
    block_cache: dict[str, CachedBlockContent] | None = None  # both views, for decompress


# ---------------------------------------------------------------------- state files
def read_state_file(path: str | os.PathLike[str], *, inherit: bool = True) -> LoggedSession:
    """Read one state file of any supported host; the format is detected from its content.

    ``inherit``: a Pi sidecar without blocks inherits its parent session's blocks (the host
    follows ``parentSession`` in the session log header, at most 8 levels).
    Raises StateError (naming the file and field) for a file that cannot be read.
    """
    src = os.fspath(path)
    d = _load_json(src)
    if not isinstance(d, dict):
        raise StateError(src, "<root>", f"expected an object, got {_tname(d)}")
    try:
        return _read_state_dict(src, d, inherit=inherit)
    except StateError:
        raise
    except (TypeError, ValueError, AttributeError, KeyError, RecursionError) as e:
        # A wrong-typed value the field checks did not foresee: still one line, never a traceback.
        raise StateError(src, "<root>", f"malformed content ({_short_reason(e)})") from None


def _read_state_dict(src: str, d: dict[str, Any], *, inherit: bool) -> LoggedSession:
    if src.endswith(PI_SIDECAR_SUFFIX) or _looks_like_sidecar(d):
        return _read_pi_sidecar(src, d, inherit=inherit)
    if d.get("format") == OWN_FORMAT:
        state = CompressionState.from_json(d, source=src)
        return LoggedSession(src, "acp-kernel", _stem(src), state, meta={"format": OWN_FORMAT})
    if "payload" in d:
        return _read_store_envelope(src, d)
    if "state" in d and "id" in d:
        return _read_proxy(src, d)
    if "blocks" in d or "messageRefs" in d:
        state = _state(d, src, "")
        return LoggedSession(src, "acp-kernel", _stem(src), state, meta={})
    raise StateError(src, "<root>", "unrecognised state file format "
                     "(no blocks, state, payload or sidecar fields)")


def _looks_like_sidecar(d: dict[str, Any]) -> bool:
    return "blocks" in d and any(k in d for k in ("liveRefOrigins", "rolloverPending", "schemaVersion"))


def _read_store_envelope(src: str, d: dict[str, Any]) -> LoggedSession:
    version = d.get("version")
    if not _is_int(version) or version < 1:
        raise StateError(src, "version", f"expected a positive integer, got {version!r}")
    sid = d.get("id")
    if not isinstance(sid, str):
        raise StateError(src, "id", f"expected a string, got {_tname(sid)}")
    payload = d["payload"]
    if not isinstance(payload, dict):
        raise StateError(src, "payload", f"expected an object, got {_tname(payload)}")
    # The store is generic: a host may wrap the state itself or an object holding it.
    if "blocks" not in payload and isinstance(payload.get("state"), dict):
        state = _state(payload["state"], src, "payload.state")
    else:
        state = _state(payload, src, "payload")
    meta = {"version": version, "saved_at": d.get("savedAt"), "envelope": "StateStore"}
    return LoggedSession(src, "acp-kernel", sid, state, meta=meta)


def _read_proxy(src: str, d: dict[str, Any]) -> LoggedSession:
    version = d.get("version", 1)  # the oldest files may predate the field
    if not _is_int(version):
        raise StateError(src, "version", f"expected an integer, got {_tname(version)}")
    if version not in PROXY_VERSIONS:
        raise StateError(src, "version", f"unsupported proxy session version {version} "
                         f"(known: {', '.join(map(str, PROXY_VERSIONS))})")
    sid = d.get("id")
    if not isinstance(sid, str):
        raise StateError(src, "id", f"expected a string, got {_tname(sid)}")
    raw_state = d["state"]
    if not isinstance(raw_state, dict):
        raise StateError(src, "state", f"expected an object, got {_tname(raw_state)}")
    if "blocks" not in raw_state:  # the proxy's own validity rule
        raise StateError(src, "state.blocks", "missing required field")
    state = _state(raw_state, src, "state")

    meta: dict[str, Any] = {"version": version, "saved_at": d.get("savedAt"),
                            "created_at": d.get("createdAt")}
    meta_keys = ("protocol", "upstreamOrigin", "label", "title")
    stats_keys = ("requests", "tokensSaved", "inputTokens", "cachedTokens", "outputTokens",
                  "cacheSamples", "lastInputTokens", "contextTokens")
    if isinstance(d.get("meta"), dict):
        meta.update(d["meta"])
    else:  # v1: the meta fields sit at the top level
        meta.update({k: d[k] for k in meta_keys if k in d})
    if isinstance(d.get("stats"), dict):
        meta["stats"] = dict(d["stats"])
    else:
        flat = {k: d[k] for k in stats_keys if k in d}
        if flat:
            meta["stats"] = flat
    if isinstance(d.get("metadata"), dict) and d["metadata"]:
        meta["metadata"] = d["metadata"]

    messages = None
    if "messages" in d and d["messages"] is not None:
        messages = _proxy_messages(d["messages"], src)
    contents, cache = None, None
    if "blockContents" in d and d["blockContents"] is not None:
        contents, cache = _block_contents(d["blockContents"], src)
    return LoggedSession(src, "bc-proxy", sid, state, messages, contents, meta, cache)


def _proxy_messages(raw: Any, src: str) -> list[Message]:
    if not isinstance(raw, list):
        raise StateError(src, "messages", f"expected a list, got {_tname(raw)}")
    out = []
    for i, m in enumerate(raw):
        try:
            out.append(Message.from_dict(m))
        except ValueError as e:
            raise StateError(src, f"messages[{i}]", str(e)) from None
    return out


def _block_contents(raw: Any, src: str) -> tuple[dict[str, str], dict[str, CachedBlockContent]]:
    if not isinstance(raw, dict):
        raise StateError(src, "blockContents", f"expected an object, got {_tname(raw)}")
    contents: dict[str, str] = {}
    cache: dict[str, CachedBlockContent] = {}
    for bid, entry in raw.items():
        views = []
        for view in ("one", "full"):
            name = f"blockContents.{bid}.{view}"
            v = entry.get(view) if isinstance(entry, dict) else None
            if not isinstance(v, dict):
                raise StateError(src, name, f"expected an object, got {_tname(v)}")
            text, count = v.get("text"), v.get("count", 0)
            if not isinstance(text, str):
                raise StateError(src, f"{name}.text", f"expected a string, got {_tname(text)}")
            if not _is_int(count):
                raise StateError(src, f"{name}.count", f"expected an integer, got {_tname(count)}")
            views.append((text, int(count)))
        (one_t, one_c), (full_t, full_c) = views
        contents[bid] = full_t
        cache[bid] = CachedBlockContent(one_t, one_c, full_t, full_c)
    return contents, cache


# ---------------------------------------------------------------------- Pi sidecar
def _read_pi_sidecar(src: str, d: dict[str, Any], *, inherit: bool) -> LoggedSession:
    meta: dict[str, Any] = {}
    if "schemaVersion" in d:
        sv = d["schemaVersion"]
        if not _is_int(sv) or sv < 1:
            raise StateError(src, "schemaVersion", f"expected a positive integer, got {sv!r}")
        meta["schema_version"] = sv
        if sv > 1:  # the contract is additive-only: newer files still read, with a note
            meta["warnings"] = [f"schemaVersion {sv} is newer than 1; extra fields ignored"]
    if "producer" in d:
        prod = d["producer"]
        if not isinstance(prod, dict) or not isinstance(prod.get("name"), str):
            raise StateError(src, "producer", "expected an object with a string 'name'")
        meta["producer"] = dict(prod)
    if "liveRefOrigins" in d:
        lro = d["liveRefOrigins"]
        if not isinstance(lro, list) or not all(isinstance(x, dict) for x in lro):
            raise StateError(src, "liveRefOrigins", "expected a list of objects")
        meta["live_ref_origins"] = lro
    if "rolloverPending" in d:
        rp = d["rolloverPending"]
        if rp is not None and not (isinstance(rp, dict)
                                   and isinstance(rp.get("compressions", []), list)
                                   and isinstance(rp.get("absorbs", []), list)):
            raise StateError(src, "rolloverPending",
                             "expected null or {compressions: [...], absorbs: [...]}")
        meta["rollover_pending"] = rp
    state = _state(d, src, "")

    jsonl = src[: -len(PI_SIDECAR_SUFFIX)] if src.endswith(PI_SIDECAR_SUFFIX) else None
    messages = None
    header: dict[str, Any] = {}
    if jsonl and os.path.isfile(jsonl):
        header, messages, bad = read_pi_session_log(jsonl)
        meta["session_log"] = jsonl
        if bad:
            meta["session_log_malformed_lines"] = bad
    sid = header.get("id") if isinstance(header.get("id"), str) else _pi_stem(src)
    if header.get("parentSession"):
        meta["parent_session"] = header["parentSession"]
    if inherit and not state.blocks and header.get("parentSession"):
        parent_state, used = _inherit_from_parent(src, header["parentSession"])
        if parent_state is not None:
            state = parent_state
            meta["inherited_from"] = used
    return LoggedSession(src, "bc-pi", sid, state, messages, None, meta)


def _inherit_from_parent(src: str, parent: Any) -> tuple[CompressionState | None, str | None]:
    """Follow parentSession links until a sidecar with blocks is found (at most 8 hops)."""
    seen = {os.path.abspath(src)}
    base = os.path.dirname(src)
    for _ in range(PI_MAX_PARENT_HOPS):
        if not isinstance(parent, str) or not parent:
            return None, None
        log_path = parent if os.path.isabs(parent) else os.path.join(base, parent)
        side = log_path + PI_SIDECAR_SUFFIX
        if os.path.abspath(side) in seen or not os.path.isfile(side):
            return None, None
        seen.add(os.path.abspath(side))
        try:
            d = _load_json(side)
            st = _state(d, side, "") if isinstance(d, dict) else None
        except (ValueError, TypeError, AttributeError, RecursionError):  # StateError included
            return None, None
        if st is not None and st.blocks:
            return st, side
        header = _first_json_line(log_path) if os.path.isfile(log_path) else {}
        parent = header.get("parentSession")
        base = os.path.dirname(log_path)
    return None, None


def read_pi_session_log(path: str | os.PathLike[str]) -> tuple[dict[str, Any], list[Message], int]:
    """Read Pi's ``.jsonl`` session log: (header, flat messages, malformed line count).

    The first line is the header; each later line is an entry ``{id, type, ...}``. Message and
    custom_message entries become flat messages with Pi's raw ids (an assistant entry with
    several tool calls is split into ``<entryId>#<toolCallId>`` messages). Entries are taken
    in file order (all branches of Pi's tree, as the decompress tool scans them).
    """
    src = os.fspath(path)
    header: dict[str, Any] = {}
    messages: list[Message] = []
    bad = 0
    with open(src, "rb") as f:
        for n, raw in enumerate(f):
            if not raw.strip():
                continue
            try:
                entry = json.loads(raw.decode("utf-8"))
            except (ValueError, RecursionError):  # bad JSON or UTF-8, 5,000-digit numbers, deep nesting
                bad += 1
                continue
            if not isinstance(entry, dict):
                bad += 1
                continue
            if n == 0 and entry.get("type") == "session":
                header = entry
                continue
            try:
                messages.extend(pi_entry_to_messages(entry))
            except (TypeError, ValueError, AttributeError, RecursionError):
                bad += 1
    return header, messages, bad


_REF_TAG = r"(?:<acp\s[^>]*>m\d{5}</acp>|\[m\d{1,5}\])"
_LEADING_TAG = re.compile(rf"^{_REF_TAG}\s?\n?")
_TRAILING_TAG = re.compile(rf"\n*{_REF_TAG}\s*$")


def _strip_ref_tag(text: str) -> str:
    # Pi stores what was sent; ref tags were added by the host and are not content.
    return _TRAILING_TAG.sub("", _LEADING_TAG.sub("", text, count=1), count=1)


def _pi_text(content: Any) -> str:
    if isinstance(content, str):
        return _strip_ref_tag(content)
    if not isinstance(content, list):
        return ""
    parts = [_strip_ref_tag(b["text"]) for b in content
             if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)]
    return "\n".join(parts)


def _json_compact(v: Any) -> str:
    # JSON.stringify's spacing, so tool-call texts match what the host counted.
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def pi_entry_to_messages(entry: dict[str, Any]) -> list[Message]:
    """Convert one Pi session entry to flat messages (spec §1.1, Pi conventions)."""
    etype = entry.get("type")
    if etype not in ("message", "custom_message"):
        return []  # model changes, labels, compactions...: not conversation
    eid = entry.get("id")
    if not isinstance(eid, str) or not eid:
        raise ValueError(f"{etype} entry without a string id")
    if etype == "custom_message":
        text = _pi_text(entry.get("content"))
        return [Message(eid, "user", "text", text)] if text else []
    msg = entry.get("message")
    if not isinstance(msg, dict):
        raise ValueError(f"entry {eid}: message is not an object")
    role = msg.get("role")
    content = msg.get("content")
    if role == "user":
        return [Message(eid, "user", "text", _pi_text(content))]
    if role == "toolResult":
        return [Message(eid, "tool", "tool-result", _pi_text(content),
                        _opt_str(msg.get("toolName")), _opt_str(msg.get("toolCallId")))]
    if role == "assistant":
        calls = [b for b in content if isinstance(b, dict) and b.get("type") == "toolCall"
                 and b.get("name")] if isinstance(content, list) else []
        text = _pi_text(content)
        if not calls:
            # Thinking-only turns carry no text the model would see again: dropped.
            return [Message(eid, "assistant", "text", text)] if text.strip() else []
        out = []
        for i, call in enumerate(calls):
            args = call.get("arguments")
            arg_str = "" if not args else args if isinstance(args, str) else _json_compact(args)
            # The first call carries the assistant's prose, the others only their arguments.
            body = f"{text}\n{arg_str}" if (i == 0 and arg_str and text) else (arg_str or text)
            call_id = str(call.get("id") or "")
            mid = eid if len(calls) == 1 else f"{eid}#{call_id}"
            out.append(Message(mid, "assistant", "tool-call", body, str(call["name"]), call_id))
        return out
    # Other roles (bash executions, summaries) reach the model as user text.
    text = _pi_text(content)
    if not text:
        parts = []
        if isinstance(msg.get("command"), str):
            parts.append(f"$ {msg['command']}")
        out_text = _pi_text(msg.get("output"))
        if out_text:
            parts.append(out_text)
        if isinstance(msg.get("summary"), str):
            parts.append(msg["summary"])
        text = "\n".join(parts).strip()
    return [Message(eid, "user", "text", text)] if text else []


# ---------------------------------------------------------------------- directory scan
def scan_dir(path: str | os.PathLike[str]) -> tuple[list[LoggedSession], dict[str, int]]:
    """Read every state file under ``path`` (recursively); never raises for a bad file.

    Skips temp files (``.tmp-*``, ``.acp-tmp-*``) and files that are not ``.json``.
    Returns the sessions (sorted by path) and rejected files counted by reason.
    """
    sessions: list[LoggedSession] = []
    rejects: dict[str, int] = {}
    root = os.fspath(path)
    if not os.path.isdir(root):
        rejects["not-a-directory"] = 1
        return sessions, rejects
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            if name.startswith((".tmp-", ".acp-tmp-")) or not name.endswith(".json"):
                continue
            try:
                sessions.append(read_state_file(os.path.join(folder, name)))
            except StateError as e:
                key = reject_reason(e)
                rejects[key] = rejects.get(key, 0) + 1
            except (OSError, ValueError, TypeError, RecursionError):
                rejects["unreadable"] = rejects.get("unreadable", 0) + 1
    return sessions, rejects


def reject_reason(e: StateError) -> str:
    """A short, stable category for a StateError (the keys of scan_dir's rejects)."""
    r = e.reason
    if r.startswith("cannot read"):
        return "unreadable"
    if r.startswith("invalid JSON"):
        return "invalid-json"
    if e.field in ("version", "schemaVersion"):
        return "bad-version"
    if r.startswith("missing"):
        return "missing-field"
    if r.startswith("unrecognised"):
        return "unknown-format"
    return "wrong-type"


# ---------------------------------------------------------------------- helpers
def _load_json(src: str) -> Any:
    try:
        with open(src, encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise StateError(src, "<root>", f"invalid JSON: {e.msg} at line {e.lineno}") from None
    except UnicodeDecodeError as e:
        raise StateError(src, "<root>", f"invalid JSON: not UTF-8 ({e.reason})") from None
    except OSError as e:
        raise StateError(src, "<root>", f"cannot read file: {e.strerror or e}") from None
    except (ValueError, RecursionError) as e:  # a 5,000-digit number, nesting past the stack
        raise StateError(src, "<root>", f"invalid JSON: {json_error_reason(e)}") from None


def json_error_reason(e: BaseException) -> str:
    """A short reason for a failed ``json.loads`` (also for the errors that are not
    JSONDecodeError: integer digit limit, nesting deeper than the recursion limit)."""
    if isinstance(e, RecursionError):
        return "nested too deeply"
    if isinstance(e, json.JSONDecodeError):
        return f"{e.msg} at line {e.lineno} column {e.colno}"
    if isinstance(e, UnicodeDecodeError):
        return f"not UTF-8 ({e.reason})"
    if "digits" in str(e):
        return "a number with too many digits"
    return _short_reason(e)


def _short_reason(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else ""
    text = text if len(text) <= 200 else text[:200] + "..."
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _first_json_line(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            d = json.loads(f.readline() or "{}")
        return d if isinstance(d, dict) else {}
    except (OSError, ValueError, RecursionError):
        return {}


def _state(d: Any, src: str, prefix: str) -> CompressionState:
    """``CompressionState.from_acp_json`` on ``d``, the state at ``prefix`` in the file: a
    StateError names the field from the file's root (``payload.state.blocks[2]``)."""
    try:
        return CompressionState.from_acp_json(d, source=src)
    except StateError as e:
        if not prefix:
            raise
        name = e.field if e.field != "<root>" else ""
        raise StateError(src, f"{prefix}.{name}" if name else prefix, e.reason) from None


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _opt_str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _tname(v: Any) -> str:
    return "null" if v is None else type(v).__name__


def _stem(src: str) -> str:
    name = os.path.basename(src)
    return name[:-5] if name.endswith(".json") else name


def _pi_stem(src: str) -> str:
    name = os.path.basename(src)
    for suffix in (".jsonl.acp.json", ".acp.json"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name
