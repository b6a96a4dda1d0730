"""Could a model pass a split by recalling train? The memorisation audit of a curriculum.

    from data_gen.memorisation import memorisation_audit, TrainTargets
    figures = memorisation_audit({"train": rows, "test": rows2})   # per split, see below
    TrainTargets.from_rows(train_rows).nearest(summary)              # the eval's nearest_train_sim

A **compress target** is one range (``content`` entry) of a row's labelled compress call: its
kind, its start and end refs and its summary. For every split other than train:

* ``structure_seen``: the share of its compress targets whose **skeleton** equals the
  skeleton of some train target. The skeleton is the whole summary with every quoted span,
  path, message or block id, identifier and number masked: what is left is the phrasing and
  the order of the lines, so an equal skeleton means the same summary up to its values;
* ``content_seen``: the share of the **exact items** of its targets (quoted spans,
  ``key=value`` pairs, paths, error strings; counted once per target) that occur verbatim in
  some train target's summary. A split whose items were all seen in train can be answered
  from memory; one whose items are new must be read from the context;
* ``range_shapes``: the distinct (kind, ref type, first ref number, length) of its targets'
  ranges: how many different folds it asks for.

The eval uses the same items (``exact_items``, defined in ``doctrine.exact_items``) for ``values_not_in_context`` and the same
train targets for ``nearest_train_sim`` (:class:`TrainTargets`), so the build's audit and
the eval's figures measure one thing.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from doctrine.exact_items import PATH as _PATH
from doctrine.exact_items import SPAN as _SPAN
from doctrine.exact_items import exact_items, items_in_text
from plumbing.tool_format import arguments_object

__all__ = ["CompressTarget", "TrainTargets", "audit_lines", "compress_ranges", "compress_targets", "exact_items",
           "items_in_text", "joined_summary", "memorisation_audit", "range_shape", "skeleton"]

_ID = re.compile(r"\b[mb]\d+\b")
_WORD = re.compile(r"[A-Za-z_][\w.-]*\w|[A-Za-z_]")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
# Full difflib ratios per nearest-train search: the labels with the highest quick_ratio bound.
# On the pocket build (628 train labels, 146 held-out labels as replies) the capped search was
# exact wherever the nearest ratio is >= 0.9 (56 of 56: the memorised range), at most 0.037 low
# below it (mean 0.003), at ~8x less time (~50 ms against ~400 ms a reply on one shared core).
NEAREST_CANDIDATES = 32


def _identifier(word: str) -> bool:
    """A name a program made (``RATE_LIMIT``, ``app.cursor``, ``getUser``, ``v2``, ``webhook-api``),
    not an English word (``Ran``, ``the``, ``State``)."""
    return bool(re.search(r"[_.\-\d]", word) or re.search(r"[a-z][A-Z]", word)
                or (len(word) > 1 and word.isupper()))


def skeleton(summary: str) -> str:
    """``summary`` with its quoted spans, paths, ids, identifiers and numbers masked."""
    s = _SPAN.sub("<q>", summary)
    s = _PATH.sub("<path>", s)
    s = _ID.sub("<id>", s)
    s = _WORD.sub(lambda m: "<name>" if _identifier(m.group(0)) else m.group(0), s)
    s = _NUMBER.sub("#", s)
    return "\n".join(" ".join(line.split()) for line in s.strip().splitlines())


@dataclass(frozen=True)
class CompressTarget:
    kind: str
    session: str
    start: str
    end: str
    summary: str


def compress_ranges(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The ranges (with a summary) of every compress call of an assistant ``message``
    (arguments as a JSON string or a dict; an unparseable call has none)."""
    out = []
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        if fn.get("name") == "compress":
            out += [rg for rg in arguments_object(fn.get("arguments")).get("content") or []
                    if isinstance(rg, dict) and isinstance(rg.get("summary"), str)]
    return out


def joined_summary(message: dict[str, Any]) -> str:
    """A message's compress summaries joined in order: what nearest-train similarity compares."""
    return "\n\n".join(rg["summary"] for rg in compress_ranges(message))


def compress_targets(rows: Iterable[dict[str, Any]]) -> list[CompressTarget]:
    """Every range of every labelled compress call of ``rows`` (``{messages, tools, meta}``)."""
    out = []
    for r in rows:
        meta = r.get("meta") or {}
        for rg in compress_ranges(r["messages"][-1]):
            out.append(CompressTarget(str(meta.get("kind")), str(meta.get("session_id")),
                                      str(rg.get("startId", "")), str(rg.get("endId", "")), rg["summary"]))
    return out


def range_shape(t: CompressTarget) -> tuple[str, str, int, int]:
    """(kind, ``m`` or ``b``, first ref number, refs spanned): a fold's shape, whatever it says."""
    def num(ref: str) -> int:
        digits = re.sub(r"\D", "", ref)
        return int(digits) if digits else 0

    ref_type = "b" if t.start.startswith("b") or t.end.startswith("b") else "m"
    return (t.kind, ref_type, num(t.start), num(t.end) - num(t.start))


@dataclass
class TrainTargets:
    """The train split's compress targets, read once: skeletons, text and distinct summaries."""

    targets: list[CompressTarget]
    # Each train label's summaries joined (:func:`joined_summary`): a reply is compared with
    # whole labels; without them, with single targets.
    labels: list[str] = field(default_factory=list)
    skeletons: set[str] = field(init=False)
    text: str = field(init=False)
    _found: dict[str, bool] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.skeletons = {skeleton(t.summary) for t in self.targets}
        self.labels = list(dict.fromkeys(self.labels or [t.summary for t in self.targets]))
        self.text = "\n\x00\n".join(dict.fromkeys(t.summary for t in self.targets))  # a separator no item holds

    @classmethod
    def from_rows(cls, rows: Iterable[dict[str, Any]]) -> TrainTargets:
        rows = list(rows)
        return cls(compress_targets(rows), [t for r in rows if (t := joined_summary(r["messages"][-1]))])

    def seen_item(self, item: str) -> bool:
        if item not in self._found:
            self._found[item] = item in self.text
        return self._found[item]

    def nearest(self, summary: str, candidates: int | None = NEAREST_CANDIDATES) -> float | None:
        """The highest difflib ratio of ``summary`` to a train label (None without any).
        Candidates are visited by their cheap upper bound (``quick_ratio``), best first; the
        search stops when no candidate left can beat the best ratio, or after ``candidates``
        full ratios (None: exact, whatever it costs)."""
        if not self.labels:
            return None
        sm = difflib.SequenceMatcher(autojunk=False)
        sm.set_seq2(summary)  # b is indexed once; each candidate is a new a
        bounds = []
        for i, cand in enumerate(self.labels):
            sm.set_seq1(cand)
            if sm.real_quick_ratio() > 0:
                bounds.append((sm.quick_ratio(), i))
        best = 0.0
        ranked = sorted(bounds, reverse=True)
        for bound, i in ranked if candidates is None else ranked[:candidates]:
            if bound <= best:
                break
            sm.set_seq1(self.labels[i])
            best = max(best, sm.ratio())
        return best


def memorisation_audit(by_split: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """``{split: figures}``: train's size (targets, distinct skeletons, range shapes) and, for
    every other split with compress targets, ``structure_seen``, ``content_seen`` and
    ``range_shapes`` against train (see the module notes)."""
    train = TrainTargets.from_rows(by_split.get("train") or [])
    out: dict[str, dict[str, Any]] = {"train": {
        "compress_targets": len(train.targets), "sessions": len({t.session for t in train.targets}),
        "distinct_skeletons": len(train.skeletons), "range_shapes": len({range_shape(t) for t in train.targets})}}
    for split, rows in by_split.items():
        if split == "train":
            continue
        targets = compress_targets(rows)
        if not targets:
            continue
        seen = Counter(skeleton(t.summary) in train.skeletons for t in targets)
        items = [i for t in targets for i in exact_items(t.summary)]
        out[split] = {"compress_targets": len(targets), "sessions": len({t.session for t in targets}),
                      "structure_seen": round(seen[True] / len(targets), 3),
                      "content_seen": round(sum(map(train.seen_item, items)) / len(items), 3) if items else None,
                      "exact_items": len(items),
                      "range_shapes": len({range_shape(t) for t in targets})}
    return out


def audit_lines(figures: dict[str, dict[str, Any]]) -> list[str]:
    """One printed line per split (the build's printout and ``dtw audit --memorisation``)."""
    tr = figures.get("train") or {}
    lines = [f"[audit] train: {tr.get('compress_targets', 0)} compress targets, {tr.get('distinct_skeletons', 0)} "
             f"distinct skeletons, {tr.get('range_shapes', 0)} (kind, range-shape) combinations"]
    for split, f in figures.items():
        if split == "train":
            continue
        content = "–" if f["content_seen"] is None else f"{f['content_seen']:.3f}"
        lines.append(f"[audit] {split}: structure_seen {f['structure_seen']:.3f}, content_seen {content} "
                     f"({f['exact_items']} exact items), {f['compress_targets']} compress targets from "
                     f"{f['sessions']} sessions, {f['range_shapes']} (kind, range-shape) combinations")
    return lines
