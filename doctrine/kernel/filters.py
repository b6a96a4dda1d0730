"""Message filters (pipeline stage 4, spec §3 step 4).

A filter looks at one message and answers "keep", "drop" (the text becomes empty) or
("modify", new_text). ``keep_last_only`` filters keep only their last match and empty the
earlier ones. The stage runs only when ``FilterConfig.enabled`` and some filter exists.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from doctrine.kernel.messages import Message

# A filter returns "keep", "drop", ("modify", text), or None for "does not apply".
FilterFn = Callable[[Message, int, list[Message]], Any]


@dataclass(frozen=True)
class MessageFilter:
    name: str
    filter: FilterFn
    version: str = "1"
    keep_last_only: bool = False


@dataclass(frozen=True)
class FilterConfig:
    enabled: bool = False
    # per-filter switches: {"name": {"enabled": False}}
    filters: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FilterConfig:
        return cls(enabled=bool(d.get("enabled", False)), filters=dict(d.get("filters", {})))

    def is_enabled(self, name: str) -> bool:
        return self.filters.get(name, {}).get("enabled", True) is not False


def _outcome(verdict: Any, msg: Message) -> Message | None:
    """The message after a verdict, or None when the verdict does not change it."""
    if verdict == "drop":
        return msg.with_text("")
    if isinstance(verdict, tuple) and len(verdict) == 2 and verdict[0] == "modify":
        return msg.with_text(str(verdict[1]))
    return None


def apply_filters(messages: list[Message], cfg: FilterConfig,
                  registry: tuple[MessageFilter, ...]) -> list[Message]:
    """Run the enabled filters over ``messages`` (a new list; inputs are not mutated)."""
    active = [f for f in registry if cfg.is_enabled(f.name)]
    if not cfg.enabled or not active:
        return messages
    out = list(messages)
    for f in active:
        if f.keep_last_only:
            seen_last = False
            for i in range(len(out) - 1, -1, -1):
                verdict = f.filter(out[i], i, out)
                if verdict is None:  # not a match
                    continue
                if seen_last:  # an earlier match: emptied
                    out[i] = out[i].with_text("")
                    continue
                seen_last = True  # the last match: kept, or changed as the filter says
                changed = _outcome(verdict, out[i])
                if changed is not None:
                    out[i] = changed
        else:
            for i in range(len(out)):
                changed = _outcome(f.filter(out[i], i, out), out[i])
                if changed is not None:
                    out[i] = changed
    return out
