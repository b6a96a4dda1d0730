"""Restore the original content behind a compression block (spec §5.6, §6.1, §6.2).

``collect_block_content`` renders a block's messages as readable text without touching the
state. ``decompress`` is the ``decompress`` tool of either host:

* ``style="pi"``: a block goes to a file by default (``inline=True`` returns it in the
  result), a single message id comes back inline unless it is large; the block stays
  compressed (state unchanged);
* ``style="proxy"``: the body comes back in the result (in a file past 10 000 chars), from
  the session's cached originals when there are any, and the block is *deactivated*.

Every file lands inside ``run_dir``: a target that resolves (symlinks followed) outside it
is refused with an error result, and nothing is written.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from doctrine.kernel.messages import Message
from doctrine.kernel.state import Block, CompressionState
from plumbing.tokens import js_len

SUMMARY_HEADER = "[Compressed conversation section]"
PI_PREVIEW_CHARS = 600  # head preview shown with a file result
PI_MESSAGE_INLINE_MAX = 2000  # a message this long or longer goes to a file
PROXY_INLINE_MAX = 10000  # a proxy body longer than this goes to a file
AUTO_SUBDIR = "acp-decompress"
_BLOCK_ARG = re.compile(r"^b0*(\d+)$")
_REF_ARG = re.compile(r"^m0*(\d{1,5})$")


@dataclass
class CollectedContent:
    text: str  # "" when count is 0
    count: int  # items rendered: messages, plus nested summaries when not full


@dataclass
class DecompressResult:
    """The tool's result text, the state after the call, and the file written (if any)."""

    text: str
    state: CompressionState
    file_path: str | None = None
    ok: bool = True
    block_id: str | None = None
    message_id: str | None = None
    deactivated: bool = False  # proxy style: the block was switched off


# ---------------------------------------------------------------------- content
def _format_message(m: Message) -> str:
    if m.tool_name and m.content_type != "text":
        return f"[{m.role} • {m.tool_name}]\n{m.text}"
    return f"[{m.role}]\n{m.text}"


def collect_block_content(state: CompressionState, block: Block, messages: Sequence[Message],
                          full: bool = False) -> CollectedContent:
    """A block's content as text, in message order, joined by blank lines.

    ``full=False``: children of this block that are still active are shown as their
    compressed-section line and summary instead of their messages (one tier up).
    ``full=True``: every covered message in full. The state is not modified.
    """
    targets = set(block.effective_message_ids)
    if full:
        msgs = [m for m in messages if m.id in targets]
        return CollectedContent("\n\n".join(_format_message(m) for m in msgs), len(msgs))
    children = []
    folded: set[str] = set()
    for cid in block.direct_block_ids:
        child = state.block(cid)
        if child is None or not child.active:
            continue
        children.append(child)
        folded.update(child.effective_message_ids)
    parts = []
    for c in children:
        label = f"{c.block_id}: {c.topic}" if c.topic else c.block_id
        parts.append(f"{SUMMARY_HEADER} — {label}\n{c.summary}")
    direct = [m for m in messages if m.id in targets and m.id not in folded]
    parts += [_format_message(m) for m in direct]
    count = len(direct) + len(children)
    return CollectedContent("\n\n".join(parts) if count else "", count)


def parse_block_id(arg: str) -> str | None:
    """``b5``, ``B05`` and ``5`` all mean ``b5``; anything else is None."""
    s = arg.strip().lower()
    m = _BLOCK_ARG.match(s)
    if m:
        return f"b{int(m.group(1))}"
    if s.isdigit():
        return f"b{int(s)}"
    return None


def deactivate_block(state: CompressionState, block_id: str) -> CompressionState:
    """A copy of ``state`` with the block switched off (the input is left alone)."""
    out = state.copy()
    b = out.block(block_id)
    if b is not None:
        b.active = False
    return out


# ---------------------------------------------------------------------- files
def resolve_inside(run_dir: str | os.PathLike[str], target: str | os.PathLike[str]) -> str | None:
    """The real path of ``target`` if it lies strictly inside ``run_dir``, else None.

    A relative target is taken relative to ``run_dir``. Symlinks are followed on both
    sides, so a link inside the folder that points out of it is refused.
    """
    root = os.path.realpath(os.fspath(run_dir))
    t = os.path.expanduser(os.fspath(target))
    if not os.path.isabs(t):
        t = os.path.join(root, t)
    real = os.path.realpath(t)
    try:
        inside = os.path.commonpath([root, real]) == root
    except ValueError:  # different drives
        return None
    return real if inside and real != root else None


def _write_atomic(path: str, text: str) -> None:
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-" + os.path.basename(path) + "-", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _auto_path(folder: str, stem: str, now_ms: int) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.#-]", "-", stem)
    path = os.path.join(folder, f"{safe}-{now_ms}.txt")
    n = 1
    while os.path.exists(path):  # two calls in one millisecond must not overwrite
        path = os.path.join(folder, f"{safe}-{now_ms}-{n}.txt")
        n += 1
    return path


def _head_preview(text: str) -> str:
    if len(text) <= PI_PREVIEW_CHARS:
        return text
    return text[:PI_PREVIEW_CHARS] + "\n\n… (preview cut here; read the file for the rest)"


# ---------------------------------------------------------------------- the tool
def decompress(state: CompressionState, block_or_message_id: str, messages: Sequence[Message],
               *, run_dir: str | os.PathLike[str], to_file: str | None = None,
               inline: bool | None = None, full: bool = False, style: str = "pi",
               cache: Mapping[str, object] | None = None,
               now_ms: int | None = None) -> DecompressResult:
    """Run the ``decompress`` tool of the Pi or proxy host.

    ``block_or_message_id``: ``b5``/``b05``/``5``; in Pi style also a raw message id of
    some block (or its ``mNNNNN`` ref). ``cache``: the proxy's ``blockContents`` views
    (``CachedBlockContent`` from readers, by block id). Files go under ``run_dir`` only.
    """
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    arg = (block_or_message_id or "").strip()
    if style == "proxy":
        return _proxy(state, arg, messages, run_dir, to_file, full, cache, ms)
    if style != "pi":
        raise ValueError(f"unknown style {style!r} (expected 'pi' or 'proxy')")
    return _pi(state, arg, messages, run_dir, to_file, inline, full, ms)


def _owner_of(state: CompressionState, raw_id: str) -> Block | None:
    """The block folding ``raw_id``: the active one if any, else the first that covered it.

    (Pi takes the first block in the list, which after a tier-2 compress is the consumed
    tier-1 block; naming the active one matches what search_context points to.)
    """
    covering = [b for b in state.blocks if raw_id in b.effective_message_ids]
    return next((b for b in covering if b.active), covering[0] if covering else None)


def _pi(state: CompressionState, arg: str, messages: Sequence[Message], run_dir, to_file,
        inline: bool | None, full: bool, ms: int) -> DecompressResult:
    # A message id is checked first: an all-digit raw id must not be read as a block number.
    owner = _owner_of(state, arg)
    raw_id = arg
    if owner is None:
        m = _REF_ARG.match(arg.lower())
        if m:
            ref = f"m{int(m.group(1)):05d}"
            raw = state.by_ref.get(ref)
            owner = _owner_of(state, raw) if raw else None
            raw_id = raw or arg
    if owner is not None:
        return _pi_message(state, raw_id, owner, messages, run_dir, to_file, inline, ms)

    block_id = parse_block_id(arg)
    if block_id is None:
        return DecompressResult(
            f'Invalid blockId: {arg}. Give a block id such as "b5" or "5", or a message id '
            "from search_context results.", state, ok=False)
    block = state.block(block_id)
    if block is None:
        active = ", ".join(b.block_id for b in state.blocks if b.active) or "(none)"
        return DecompressResult(f"Block {block_id} not found. Active blocks: {active}.", state,
                                ok=False, block_id=block_id)
    got = collect_block_content(state, block, messages, full=full)
    if got.count == 0:
        return DecompressResult(f"Block {block_id} has no restorable message content.", state,
                                ok=False, block_id=block_id)
    items = "item" if got.count == 1 else "items"
    if inline is True and not to_file:
        return DecompressResult(f"Restored block {block_id} ({got.count} {items}) inline:\n\n"
                                f"{got.text}", state, block_id=block_id)
    path = _target(run_dir, to_file, block_id, ms)
    if path is None:
        return _refused(state, run_dir, to_file, block_id=block_id)
    _write_atomic(path, got.text)
    text = "\n".join([
        f"Block {block_id} ({got.count} {items}, {js_len(got.text)} chars) written to {path}.",
        "The block stays compressed and the context is unchanged; read the file for the content.",
        "", "Preview:", _head_preview(got.text)])
    return DecompressResult(text, state, file_path=path, block_id=block_id)


def _pi_message(state, raw_id: str, owner: Block, messages: Sequence[Message], run_dir, to_file,
                inline: bool | None, ms: int) -> DecompressResult:
    found = next((m for m in messages if m.id == raw_id), None)
    if found is None or not found.text:
        return DecompressResult(f"Message {raw_id} (in block {owner.block_id}) has no "
                                "restorable text content in the session log.", state, ok=False,
                                block_id=owner.block_id, message_id=raw_id)
    n = js_len(found.text)
    head = f"Message {raw_id} ({found.role}, block {owner.block_id}, {n} chars)"
    if to_file is None and inline is not False and n < PI_MESSAGE_INLINE_MAX:
        return DecompressResult(f"{head} restored inline:\n\n{found.text}", state,
                                block_id=owner.block_id, message_id=raw_id)
    path = _target(run_dir, to_file, f"msg-{raw_id}", ms)
    if path is None:
        return _refused(state, run_dir, to_file, block_id=owner.block_id, message_id=raw_id)
    _write_atomic(path, found.text)
    text = "\n".join([f"{head} written to {path}.",
                      "The block stays compressed and the context is unchanged; read the file "
                      "for the content.", "", "Preview:", _head_preview(found.text)])
    return DecompressResult(text, state, file_path=path, block_id=owner.block_id,
                            message_id=raw_id)


def _target(run_dir, to_file: str | None, stem: str, ms: int, *, flat: bool = False) -> str | None:
    if to_file is not None:
        return resolve_inside(run_dir, to_file)
    root = os.path.realpath(os.fspath(run_dir))
    if flat:
        return _auto_path(root, stem, ms)
    folder = os.path.join(root, AUTO_SUBDIR)
    if os.path.islink(folder):  # a symlinked acp-decompress/ would lead the write out of run_dir
        return None
    return _auto_path(folder, stem, ms)


def _refused(state, run_dir, to_file, *, block_id=None, message_id=None,
             proxy: bool = False) -> DecompressResult:
    root = os.path.realpath(os.fspath(run_dir))
    text = (f"[decompress FAILED: toFile must be under {root}; got {to_file}]" if proxy else
            f"Error: toFile path must be under {root}. Got: {to_file}")
    if to_file is None:  # the default folder is refused
        text = f"Error: {os.path.join(root, AUTO_SUBDIR)} is a symlink; refusing to write through it."
    return DecompressResult(text, state, ok=False, block_id=block_id, message_id=message_id)


def _proxy(state: CompressionState, arg: str, messages: Sequence[Message], run_dir, to_file,
           full: bool, cache: Mapping[str, object] | None, ms: int) -> DecompressResult:
    if not arg:
        return DecompressResult("[decompress FAILED: blockId is required]", state, ok=False)
    block_id = parse_block_id(arg)
    block = state.block(block_id) if block_id else None
    if block is None:
        return DecompressResult(f"[Block {arg} not found]", state, ok=False, block_id=block_id)
    cached = (cache or {}).get(block.block_id)
    if cached is not None:
        # The originals captured at compress time survive later rounds, when the
        # messages the client sends may hold only the folded view.
        body = cached.full_text if full else cached.one_text
        count = cached.full_count if full else cached.one_count
    else:
        got = collect_block_content(state, block, messages, full=full)
        body, count = (got.text or block.summary), got.count
    new_state, deactivated = state, False
    if count > 0 or cached is not None:  # nothing recovered: keep it active for a retry
        new_state, deactivated = deactivate_block(state, block.block_id), True
    header = f"[Restored block {block.block_id} — {count} item(s){', full' if full else ''}]"
    if to_file is None and len(body) <= PROXY_INLINE_MAX:
        return DecompressResult(f"{header}\n{body}", new_state, block_id=block.block_id,
                                deactivated=deactivated)
    path = _target(run_dir, to_file, f"acp-decompress-{block.block_id}", ms, flat=True)
    if path is None:
        return _refused(state, run_dir, to_file, block_id=block.block_id, proxy=True)
    _write_atomic(path, body)
    text = (f"{header}\nContent ({js_len(body)} chars) written to: {path}\n"
            "Use the read tool to open it.")
    return DecompressResult(text, new_state, file_path=path, block_id=block.block_id,
                            deactivated=deactivated)
