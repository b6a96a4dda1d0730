"""Which target tokens copy an exact item from the context: the trainer's copy term.

A fold passes only if its summary quotes values, paths and error strings exactly as the
context shows them; the eval counts the ones it did not find there (``values_not_in_context``).
Those tokens are a small share of a target (a summary line is mostly phrasing), so in a plain
token-mean loss the copying is drowned by the phrasing a model can learn by heart. With
``trainer.copy_weight`` the trainer weighs them apart (``train.trainer.token_weights``) and
logs their mean NLL as ``loss_copy``.

A target token is a **copy token** when it overlaps an exact item
(:func:`doctrine.exact_items.exact_items`: a quoted span, ``key=value``, a path, an error
string) of the final assistant message's text or call arguments, or a message or block id
given whole as an argument (a range's ``startId``), that also occurs in one of the messages
before it: the context the model reads. An item the context does not hold (a label's own
phrasing in backticks) is not a copy.

Offsets come from the tokens' own bytes for byte-level BPE tokenizers (SmolLM2, Llama 3,
Qwen: every token is a run of bytes) and from decoding growing prefixes otherwise (exact,
slower).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from doctrine.exact_items import context_text, items_in_text
from plumbing.tool_format import arguments_object

__all__ = ["copied_items", "copy_mask", "target_strings"]

_REF = re.compile(r"^[mb]\d+$")  # a whole argument that names a message or block (startId, blockId)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "\n".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
    return ""


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def target_strings(message: dict[str, Any]) -> list[str]:
    """The texts a reply writes: its content and every string value of its calls' arguments
    (a compress call's topic and summaries, a command, a query)."""
    out = [t for t in [_text(message.get("content"))] if t]
    for call in message.get("tool_calls") or []:
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict):
            out += [s for s in _strings(arguments_object(fn.get("arguments"))) if s]
    return out


def copied_items(messages: list[dict[str, Any]]) -> list[str]:
    """The exact items the final message writes that the messages before it hold verbatim."""
    if not messages:
        return []
    context = context_text(messages[:-1])
    found: dict[str, None] = {}
    for text in target_strings(messages[-1]):
        for item in items_in_text(text, context)[0]:
            found[item] = None
        if _REF.match(text) and re.search(rf"\b{text}\b", context):  # a range read from the nudge or tags
            found[text] = None
    return list(found)


@lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte <-> printable-character table, reversed (the table byte-level BPE uses)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs, strict=True)}


def _byte_level(tokenizer: Any) -> bool:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    return type(getattr(backend, "decoder", None)).__name__ == "ByteLevel"


def _token_bytes(tokenizer: Any, ids: list[int]) -> list[bytes] | None:
    """Each token's bytes, for a byte-level tokenizer; None when a token is not a byte run."""
    table = _byte_decoder()
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    out = []
    for i, piece in zip(ids, tokenizer.convert_ids_to_tokens(ids), strict=True):
        if i in special or piece is None:
            out.append((piece or "").encode("utf-8"))
        elif all(c in table for c in piece):
            out.append(bytes(table[c] for c in piece))
        else:  # an added token written as text
            out.append(piece.encode("utf-8"))
    return out


def _decoded_bytes(tokenizer: Any, ids: list[int]) -> list[bytes]:
    """Each token's bytes as the growing prefix's decoding adds them (any tokenizer)."""
    out, before = [], b""
    for k in range(1, len(ids) + 1):
        now = tokenizer.decode(ids[:k], skip_special_tokens=False,
                               clean_up_tokenization_spaces=False).encode("utf-8")
        out.append(now[len(before):] if now.startswith(before) else now[-1:])
        before = now
    return out


def _forms(item: str) -> list[bytes]:
    """The spellings an item takes in a rendered target: as is, and JSON-escaped inside call
    arguments (with and without ``ensure_ascii``)."""
    forms = {item, json.dumps(item)[1:-1], json.dumps(item, ensure_ascii=False)[1:-1]}
    return [f.encode("utf-8") for f in forms if f]


def copy_mask(tokenizer: Any, input_ids: list[int], target_mask: list[int], items: list[str]) -> list[int]:
    """1 on every target token (``target_mask`` 1) that overlaps an occurrence of an item of
    ``items`` in the target's text, 0 elsewhere; the same length as ``input_ids``."""
    mask = [0] * len(input_ids)
    where = [k for k, m in enumerate(target_mask) if m]
    if not items or not where:
        return mask
    ids = [input_ids[k] for k in where]
    pieces = (_token_bytes(tokenizer, ids) if _byte_level(tokenizer) else None) or _decoded_bytes(tokenizer, ids)
    text = b"".join(pieces)
    starts, pos = [], 0
    for p in pieces:
        starts.append(pos)
        pos += len(p)
    covered = bytearray(len(text))
    for item in items:
        for form in _forms(item):
            at = text.find(form)
            while at != -1:
                covered[at:at + len(form)] = b"\x01" * len(form)
                at = text.find(form, at + 1)
    for j, (start, piece) in enumerate(zip(starts, pieces, strict=True)):
        if piece and any(covered[start:start + len(piece)]):
            mask[where[j]] = 1
    return mask
