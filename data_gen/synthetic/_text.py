"""Seeded pickers for names, paths, numbers and filler sentences.

Everything random in a synthetic session goes through one :class:`Picker`, seeded from a
string (``random.Random`` hashes ``str`` seeds with SHA-512, so the stream does not depend
on ``PYTHONHASHSEED``). Pools are tuples, never sets, so iteration order is fixed.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TypeVar

__all__ = ["Picker", "NOUNS", "VERBS"]

T = TypeVar("T")

NOUNS = (
    "account", "amount", "batch", "cache", "cart", "channel", "config", "coupon", "cursor",
    "digest", "event", "export", "feed", "filter", "invoice", "job", "ledger", "limit",
    "metric", "order", "page", "payload", "payment", "profile", "quota", "record", "region",
    "report", "request", "route", "schedule", "segment", "session", "shipment", "snapshot",
    "tenant", "ticket", "token", "upload", "voucher", "webhook", "window",
)
VERBS = (
    "apply", "build", "collect", "compute", "decode", "encode", "expand", "fetch", "flush",
    "format", "load", "merge", "normalise", "parse", "prune", "refresh", "render", "resolve",
    "score", "split", "store", "sync", "validate", "verify",
)
ADJECTIVES = ("active", "cached", "default", "pending", "raw", "recent", "stale", "total", "unique")
PROJECTS = (
    "billing-core", "harbor", "inkwell", "lumen", "orchard", "parcel", "quarry", "relay",
    "sextant", "tally", "trellis", "wayfarer",
)
_FILLER = (
    "Keep this in sync with the {noun} service.",
    "The {noun} is resolved lazily on first use.",
    "Callers must not mutate the returned {noun}.",
    "This path is hot: avoid allocating a new {noun} per call.",
    "Legacy behaviour kept for the old {noun} importer.",
    "Values are validated upstream; this only guards against empty {noun}s.",
    "See the {noun} module for the retry policy.",
    "An empty {noun} is treated as a no-op.",
)


class Picker:
    """A seeded source of choices; one per session."""

    def __init__(self, key: str):
        self.rng = random.Random(key)
        self._taken: dict[str, None] = {}  # dict as an ordered set (membership only)

    # ---------------------------------------------------------------- primitives

    def choice(self, seq: Sequence[T]) -> T:
        return seq[self.rng.randrange(len(seq))]

    def sample(self, seq: Sequence[T], k: int) -> list[T]:
        return self.rng.sample(list(seq), min(k, len(seq)))

    def int(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def float(self, lo: float, hi: float, digits: int = 2) -> float:
        return round(self.rng.uniform(lo, hi), digits)

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def shuffle(self, items: list[T]) -> list[T]:
        out = list(items)
        self.rng.shuffle(out)
        return out

    def hex(self, n: int = 8) -> str:
        return "".join(self.choice("0123456789abcdef") for _ in range(n))

    # ---------------------------------------------------------------- names

    def unique(self, make, tries: int = 50) -> str:
        """A value from ``make()`` not returned before by this picker."""
        for _ in range(tries):
            v = make()
            if v not in self._taken:
                self._taken[v] = None
                return v
        v = f"{make()}{len(self._taken)}"
        self._taken[v] = None
        return v

    def noun(self) -> str:
        return self.choice(NOUNS)

    def snake(self) -> str:
        """A fresh ``verb_noun`` function name."""
        return self.unique(lambda: f"{self.choice(VERBS)}_{self.choice(NOUNS)}")

    def camel(self) -> str:
        """A fresh ``verbNoun`` identifier."""
        return self.unique(lambda: self.choice(VERBS) + self.choice(NOUNS).capitalize())

    def pascal(self) -> str:
        """A fresh ``AdjectiveNoun`` type name."""
        return self.unique(lambda: self.choice(ADJECTIVES).capitalize() + self.choice(NOUNS).capitalize())

    def project(self) -> str:
        return self.choice(PROJECTS)

    def version(self, major: tuple[int, int] = (1, 4)) -> str:
        return f"{self.int(*major)}.{self.int(0, 30)}.{self.int(0, 12)}"

    def sentence(self) -> str:
        return self.choice(_FILLER).format(noun=self.noun())

    # ---------------------------------------------------------------- sizes

    def lines(self, bounds: tuple[int, int], scale: float = 1.0) -> int:
        """A line count drawn from ``bounds`` (the session's tool output size), scaled."""
        lo, hi = bounds
        return max(1, round(self.int(lo, hi) * scale))
