"""KEEP item and the collector that de-duplicates and ranks candidates."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from .patterns import norm, norm_path

__all__ = ["CLASSES", "Collector", "KeepItem"]

# The KEEP-verbatim classes, in report order.
CLASSES = (
    "paths_with_lines",
    "signatures",
    "error_strings",
    "exact_values",
    "decisions",
    "user_intent",
    "open_questions",
    "message_refs",
)


@dataclass
class KeepItem:
    """One thing a summary should keep verbatim.

    ``text`` is the exact string to keep (a summary that contains it, whitespace-normalised,
    keeps the item). ``kind`` says how it was found and selects the matching rule;
    ``fields`` holds what that rule needs (``path``/``line``, ``key``/``value``, ``version``,
    ``counts``, ``terms``, ``refs``, ``needle``). ``message`` is the ref (or raw id) of the
    first source message it came from; ``count`` is how often it occurred.
    """

    cls: str
    kind: str
    text: str
    message: str
    salience: float
    count: int = 1
    fields: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _dedupe_key(item: KeepItem) -> tuple:
    f = item.fields
    if "path" in f and "line" in f:
        # Same file name and line: the same place, whether cited as /repo/src/a.py or a.py.
        name = norm_path(f["path"]).rsplit("/", 1)[-1]
        return (item.cls, "path", name, f["line"])
    if "version" in f:
        return (item.cls, "version", f["version"])
    if "skeleton" in f:
        return (item.cls, "skeleton", f["skeleton"])
    if "key" in f:
        return (item.cls, "key", f["key"].lower(), str(f.get("value", "")).lower())
    return (item.cls, norm(item.text).lower())


class Collector:
    """Accumulate candidates; the same item seen twice keeps its highest salience."""

    def __init__(self) -> None:
        self._items: dict[tuple, KeepItem] = {}
        self._order: dict[tuple, int] = {}

    def add(self, cls: str, kind: str, text: str, message: str, salience: float,
            **fields: Any) -> None:
        text = norm(text)
        if not text:
            return
        item = KeepItem(cls=cls, kind=kind, text=text, message=message,
                        salience=round(min(1.0, max(0.0, salience)), 4), fields=fields)
        key = _dedupe_key(item)
        old = self._items.get(key)
        if old is None:
            self._items[key] = item
            self._order[key] = len(self._order)
            return
        old.count += 1
        if item.salience > old.salience:
            # Keep the first message id (where the fact entered) but the stronger reading.
            item.message, item.count = old.message, old.count
            self._items[key] = item

    def items(self) -> list[KeepItem]:
        """Every candidate so far, first seen first (the items themselves, to re-weigh)."""
        return list(self._items.values())

    def ranked(self, caps: dict[str, int], min_salience: float) -> dict[str, list[KeepItem]]:
        """Per class, the top-``cap`` items by salience (ties: first seen first).

        A repeated item gets a small boost (log of its count), so an error printed fifty
        times outranks one printed once, without letting repetition dominate.
        """
        out: dict[str, list[KeepItem]] = {c: [] for c in CLASSES}
        scored = []
        for key, item in self._items.items():
            boost = 0.05 * math.log2(item.count) if item.count > 1 else 0.0
            scored.append((-(item.salience + min(boost, 0.15)), self._order[key], item))
        scored.sort(key=lambda t: (t[0], t[1]))
        for _neg, _order, item in scored:
            if item.salience < min_salience:
                continue
            bucket = out.setdefault(item.cls, [])
            if len(bucket) < caps.get(item.cls, 8):
                bucket.append(item)
        return out
