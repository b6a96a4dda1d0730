"""Cut the kernel's recommended ranges into compressible pieces.

A piece is a run of consecutive visible messages (by ref) that the kernel may compress
(not hard-protected, not in the recent zone, not covered, not a summary anchor, not the
first user message, which the doctrine never folds) and that the label may compress (no
message of a still-needed unit). Pieces are unit-aligned: a tool call and its results go
in together or not at all, so the kernel's tool-pair widening never drags a protected or
needed message in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from doctrine.kernel.messages import Message
from doctrine.kernel.protection import protected_ids_with_pairing
from doctrine.kernel.prune import is_summary_message
from doctrine.kernel.recommend import Range, soft_zone
from doctrine.kernel.refs import ref_index
from plumbing.tokens import CountTokens, js_len, js_round

from .needed import session_index_of, unit_key


@dataclass
class Piece:
    """One compress range the label may emit."""

    start_ref: str
    end_ref: str
    ids: list[str] = field(default_factory=list)  # raw ids, in order
    refs: list[str] = field(default_factory=list)
    tokens: int = 0
    chars: int = 0
    tool_tokens: int = 0
    needed: bool = False  # contains a needed message (emergency only)

    @property
    def tool_share(self) -> float:
        return self.tool_tokens / self.tokens if self.tokens else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"startId": self.start_ref, "endId": self.end_ref, "count": len(self.ids),
                "tokens": self.tokens, "chars": self.chars, "needed": self.needed}


def piece_of(start_ref: str, end_ref: str, ids: list[str], by_id: dict[str, Message], state: Any,
             count: CountTokens, *, needed: bool = False) -> Piece:
    """The piece from ``start_ref`` to ``end_ref`` over the raw ``ids``, with their sizes."""
    q = Piece(start_ref, end_ref, needed=needed)
    for i in ids:
        m = by_id[i]
        t = count(m.text)
        q.ids.append(i)
        q.refs.append(state.by_raw[i])
        q.tokens += t
        q.chars += js_len(m.text)
        if m.is_tool:
            q.tool_tokens += t
    return q


def kernel_blocked_ids(view: list[Message], state: Any, config: Any, count: CountTokens) -> set[str]:
    """Raw ids the kernel would refuse to fold now: hard-protected, recent zone, covered."""
    covered = state.covered_ids()
    zone = soft_zone(view, state, config, count, covered)
    hard = protected_ids_with_pairing(view, config)
    return covered | zone | hard


def _first_user(view: list[Message]) -> str | None:
    for m in view:
        if m.role == "user" and not is_summary_message(m):
            return m.id
    return None


def cut_pieces(ranges: list[Range], view: list[Message], state: Any, config: Any, count: CountTokens,
               units: list[int], needed: set[int], *, allow_needed: bool = False,
               flat: list[Message] | None = None) -> list[Piece]:
    """Pieces of ``ranges`` (oldest first) over the untagged kernel ``view``.

    ``flat``: the kernel's input messages (its recent zone is computed there too).

    ``needed``: session indices still in use. With ``allow_needed`` they stay in (their
    pieces are marked ``needed``), for the emergency path.
    """
    blocked = kernel_blocked_ids(view, state, config, count)
    if flat is not None:
        # apply_compression reads the zone off the host's full message list: honour both.
        blocked |= kernel_blocked_ids(flat, state, config, count)
    first_user = _first_user(view)
    if first_user:
        blocked.add(first_user)
    # Unit membership over the visible messages with refs.
    members: dict[str, list[str]] = {}
    for m in view:
        members.setdefault(unit_key(m.id, units), []).append(m.id)
    bad_units = set()
    needed_units = set()
    for key, ids in members.items():
        if any(i in blocked for i in ids):
            bad_units.add(key)
        if any(session_index_of(i) in needed for i in ids):
            needed_units.add(key)
    out: list[Piece] = []
    for r in ranges:
        lo, hi = ref_index(r.start_ref), ref_index(r.end_ref)
        if lo is None or hi is None:
            continue
        # A range that ends on a tool call folds that call's results too (the kernel's
        # tool-pair widening): the rest of the call's unit counts as inside the range.
        hi_unit = _call_unit(view, state, r.end_ref, units)
        cur: Piece | None = None
        for m in view:
            ref = state.by_raw.get(m.id)
            n = ref_index(ref) if ref else None
            if n is None or is_summary_message(m):
                # A block anchor or a ref-less message ends a run: a range across an anchor
                # would re-fold that block (message boundaries fold nested tier-1 blocks).
                if cur is not None:
                    out.append(cur)
                    cur = None
                continue
            if n < lo or (n > hi and (hi_unit is None or unit_key(m.id, units) != hi_unit)):
                continue
            key = unit_key(m.id, units)
            usable = key not in bad_units and (allow_needed or key not in needed_units)
            if not usable:
                if cur is not None:
                    out.append(cur)
                    cur = None
                continue
            t = count(m.text)
            if cur is None:
                cur = Piece(ref, ref)
            cur.end_ref = ref
            cur.ids.append(m.id)
            cur.refs.append(ref)
            cur.tokens += t
            cur.chars += js_len(m.text)
            if m.is_tool:
                cur.tool_tokens += t
            cur.needed = cur.needed or key in needed_units
        if cur is not None:
            out.append(cur)
    # Unit alignment can leave a piece ending inside a unit whose tail lies past the
    # range end: trim such trailing partial units (and leading ones).
    fixed = []
    for p in out:
        fixed.extend(_align(p, members, units, view, state, count))
    return fixed


def _call_unit(view: list[Message], state: Any, ref: str, units: list[int]) -> str | None:
    """The unit of the message ``ref`` names when that message is a tool call, else None."""
    raw = state.by_ref.get(ref)
    for m in view:
        if m.id == raw:
            return unit_key(m.id, units) if m.content_type == "tool-call" else None
    return None


def _align(p: Piece, members: dict[str, list[str]], units: list[int], view: list[Message], state: Any,
           count: CountTokens) -> list[Piece]:
    inside = set(p.ids)
    by_id = {m.id: m for m in view}
    keep = [i for i in p.ids if all(x in inside for x in members.get(unit_key(i, units), [i]))]
    # A trailing unit cut after its text (the kernel's own ranges end so: on the tagged text of
    # an assistant turn whose calls come later) keeps that text: no tool-pair widening follows.
    tail = p.ids[len(keep):] if p.ids[:len(keep)] == keep else []
    if tail and all(by_id[i].content_type in ("text", "reasoning") for i in tail) \
            and len({unit_key(i, units) for i in tail}) == 1 and unit_key(tail[0], units) not in \
            {unit_key(i, units) for i in keep} and members[unit_key(tail[0], units)][0] == tail[0]:
        keep = keep + tail
    if keep == p.ids:
        return [p]
    if not keep:
        return []
    q = piece_of(state.by_raw[keep[0]], state.by_raw[keep[-1]], keep, by_id, state, count, needed=p.needed)
    # A gap inside keep (a partial unit in the middle) cannot happen: units are contiguous.
    return [q]


def viable(pieces: list[Piece], min_tokens: int) -> list[Piece]:
    return [p for p in pieces if p.tokens >= min_tokens]


def total_chars(pieces: list[Piece]) -> int:
    return sum(p.chars for p in pieces)


def tool_pct(p: Piece) -> int:
    return js_round(100 * p.tool_share)


# ---------------------------------------------------------------------- visible boundaries
_TAG = re.compile(r'^<acp tokens="[^"]*" type="[^"]*">(m\d{5})</acp>')
_REF = re.compile(r"(?<![\w])(m\d{5})(?![\w])")


def view_refs(view: Any) -> set[str]:
    """Refs the model can use as range boundaries: the ref tags of the rendered messages
    (the proxy's ``text-only`` tags leave tool messages without one) and every ref the
    trailing nudge prints (its range list)."""
    from doctrine.kernel.host import NUDGE_MESSAGE_ID

    out: set[str] = set()
    for m in view.messages:
        if m.id == NUDGE_MESSAGE_ID:
            out.update(_REF.findall(m.text))
            continue
        mt = _TAG.match(m.text)
        if mt:
            out.add(mt.group(1))
    return out


def on_visible_refs(pieces: list[Piece], view: list[Message], visible: set[str], units: list[int],
                    state: Any, count: CountTokens) -> list[Piece]:
    """Each piece narrowed to the widest sub-range whose boundaries the model can see.

    A start must be a visible ref that opens its unit (a reasoning run before it is pulled
    in by the kernel); an end a visible ref that closes its unit, or a visible tool call
    whose results the kernel's tool-pair widening brings along. A piece with no such pair
    is dropped: the model could not have asked for it.
    """
    by_id = {m.id: m for m in view}
    out = []
    for p in pieces:
        keys = [unit_key(i, units) for i in p.ids]
        n = len(p.ids)
        starts = [i for i in range(n) if p.refs[i] in visible
                  and all(by_id[p.ids[k]].content_type == "reasoning" for k in range(i) if keys[k] == keys[i])]
        if not starts:
            continue
        s = starts[0]
        end = None
        for j in range(n - 1, s - 1, -1):
            if p.refs[j] not in visible:
                continue
            closes = j == n - 1 or keys[j + 1] != keys[j]
            # The text (and reasoning) an assistant turn opens with may end a range before
            # the turn's calls: nothing is widened past it.
            opens = all(by_id[p.ids[k]].content_type in ("text", "reasoning")
                        for k in range(j + 1) if keys[k] == keys[j])
            if closes or opens or by_id[p.ids[j]].content_type == "tool-call":
                last = j
                while (last + 1 < n and keys[last + 1] == keys[j]
                       and by_id[p.ids[j]].content_type == "tool-call"):
                    last += 1
                end = (j, last)
                break
        if end is None:
            continue
        j, last = end
        first = min(k for k in range(s + 1) if keys[k] == keys[s])  # with its reasoning run
        if first == 0 and last == n - 1 and (p.start_ref, p.end_ref) == (p.refs[s], p.refs[j]):
            out.append(p)
            continue
        out.append(piece_of(p.refs[s], p.refs[j], p.ids[first:last + 1], by_id, state, count, needed=p.needed))
    return out
