"""Open pools for procedural sessions: names, keys, paths, numbers and errors composed at random.

The fixed word lists of ``_text.py`` let a model recall a value it has seen in training
(the pocket curve wrote ``BATCH_SIZE`` for keys it had never been shown). Here every
identifier is composed from syllables and every number drawn from a wide range, so the
exact value a fold must keep exists only in the context: copying it is the only way to
get it right. All functions take the session's :class:`Picker`, so a seed fixes them.
"""

from __future__ import annotations

from ._text import Picker

__all__ = ["Pools"]

# Word parts: short English stems that a small tokenizer keeps whole, joined two at a
# time (about 14,000 words), plus made-up syllable words one time in four.
_PARTS = ("ash", "bay", "bell", "birch", "blue", "bolt", "brook", "cape", "cedar", "clay", "cliff", "cloud",
          "coal", "cork", "crest", "dale", "dawn", "deep", "dock", "dove", "drift", "dust", "east", "echo",
          "elm", "fern", "field", "fir", "flint", "fog", "ford", "fox", "frost", "gale", "gate", "glen",
          "gold", "grain", "green", "grove", "gull", "hare", "hawk", "haze", "heath", "hill", "holm", "iron",
          "isle", "ivy", "jade", "keel", "kelp", "kite", "lake", "lark", "leaf", "lime", "link", "lynx",
          "maple", "marsh", "mill", "mint", "moss", "moth", "north", "oak", "opal", "orb", "owl", "peak",
          "pine", "plum", "pond", "quail", "quartz", "rain", "raven", "reed", "ridge", "rock", "rose", "rust",
          "sage", "salt", "sand", "shade", "shell", "slate", "snow", "south", "spark", "spring", "star",
          "stone", "storm", "sun", "swan", "thorn", "tide", "vale", "vine", "wave", "west", "willow", "wind",
          "wolf", "wood", "wren", "yew", "zinc")
_ONSETS = ("b", "br", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "st", "t", "tr", "v", "z")
_VOWELS = ("a", "e", "i", "o", "u")
_CODAS = ("", "", "n", "r", "s", "t", "x", "l")
# Role words make a name read like code; the stem beside them is always generated.
_ROLES = ("limit", "timeout", "size", "count", "ttl", "retries", "depth", "window", "port", "workers",
          "interval", "quota", "buffer", "threshold", "delay", "batch", "pool", "shards", "max", "min")
_UNITS = ("_MS", "_S", "_KB", "_MB", "", "", "_PCT", "_N")


class Pools:
    """Generated values for one session (each name is fresh within the session)."""

    def __init__(self, p: Picker):
        self.p = p

    def syllable(self) -> str:
        p = self.p
        return p.choice(_ONSETS) + p.choice(_VOWELS) + p.choice(_CODAS)

    def word(self, lo: int = 2, hi: int = 2) -> str:
        """A fresh word of ``lo``-``hi`` parts: stems (``flintmoss``) or syllables (``brovin``)."""
        def make() -> str:
            n = self.p.int(lo, hi)
            if self.p.chance(0.25):
                return "".join(self.syllable() for _ in range(n))
            return "".join(self.p.choice(_PARTS) for _ in range(n))
        return self.p.unique(make)

    def snake(self) -> str:
        return f"{self.p.choice(('get', 'load', 'parse', 'sync', 'check', 'build', 'flush', 'merge', 'emit', 'scan'))}_{self.word()}"

    def camel(self) -> str:
        w = self.word()
        return self.p.choice(("read", "fetch", "apply", "resolve", "pack", "route", "drain", "mark")) + w.capitalize()

    def pascal(self) -> str:
        return self.word().capitalize() + self.p.choice(("Store", "Client", "Queue", "Config", "Job", "Index", "Map"))

    def key(self) -> str:
        """An UPPER_SNAKE setting key: a generated stem, a role word, maybe a unit."""
        return self.p.unique(lambda: f"{self.word(1, 2).upper()}_{self.p.choice(_ROLES).upper()}{self.p.choice(_UNITS)}")

    def json_key(self) -> str:
        return self.p.unique(lambda: self.word(1, 2) + self.p.choice(_ROLES).capitalize())

    def number(self) -> int:
        """A positive integer from a random magnitude (so neither size nor digits repeat)."""
        return self.p.int(2, 9) * self.p.choice((1, 1, 10, 100, 1000)) + self.p.int(0, 9) * self.p.choice((0, 1))

    def port(self) -> int:
        return self.p.int(1025, 65000)

    def version(self) -> str:
        return f"{self.p.int(0, 9)}.{self.p.int(0, 40)}.{self.p.int(0, 20)}"

    def sha(self, n: int = 7) -> str:
        return self.p.hex(n)

    def module(self) -> str:
        return self.word(1, 2)

    def dir(self) -> str:
        return self.p.choice(("src", "lib", "pkg", "internal", "app", "core", "cmd")) + "/" + self.word(1, 2)

    def service(self) -> str:
        return f"{self.word(1, 2)}-{self.p.choice(('api', 'svc', 'worker', 'gw', 'sync', 'relay', 'cron', 'web'))}"

    def time(self) -> str:
        p = self.p
        return f"{p.int(0, 23):02d}:{p.int(0, 59):02d}:{p.int(0, 59):02d}"

    def date(self) -> str:
        return f"2026-{self.p.int(1, 12):02d}-{self.p.int(1, 28):02d}"

    def line(self) -> int:
        return self.p.int(7, 480)
