"""Kernel configuration with acp-kernel's defaults (spec §4.1).

``KernelConfig.for_limit(limit, **overrides)`` mirrors ``defaultConfig(limit, overrides)``:
groups merge shallowly. Overrides may use our snake_case names or the reference's camelCase
names, either nested by group (``nudge={"growthFloor": 1000}``) or flat
(``minCompressRange=2000``). A misspelled key raises ValueError.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any

from doctrine.kernel.filters import FilterConfig, MessageFilter


@dataclass(frozen=True)
class NudgeConfig:
    max_context_limit_pct: float = 0.75
    min_context_limit_pct: float = 0.45  # validated only, not read by the decision
    frequency: int = 5  # validated only
    iteration_threshold: int = 15  # validated only
    force: str = "soft"  # validated only
    growth_ratio: float = 0.05
    growth_floor: int = 50000
    growth_cap: int = 50000
    min_growth_floor: int = 20000
    min_growth_ratio: float = 0.45
    emergency_threshold_pct: float = 0.95
    tier2_growth_multiplier: float = 1.5


@dataclass(frozen=True)
class TiersConfig:
    enabled: bool = True
    tier2_trigger: int = 5  # display and validation only
    tier3_trigger: int = 10  # display and validation only


@dataclass(frozen=True)
class CompressConfig:
    min_compress_range: int = 5000  # raw chars (UTF-16 units)
    max_summary_length: int = 20000
    min_summary_length: int = 50


@dataclass(frozen=True)
class TruncateConfig:
    threshold: float = 0.95


@dataclass(frozen=True)
class KernelConfig:
    model_context_limit: int = 200000
    nudge: NudgeConfig = field(default_factory=NudgeConfig)
    tiers: TiersConfig = field(default_factory=TiersConfig)
    compress: CompressConfig = field(default_factory=CompressConfig)
    truncate: TruncateConfig = field(default_factory=TruncateConfig)
    promotion_threshold: int = 5
    protected_tools: tuple[str, ...] = ()
    preserve_recent_messages: int = 5
    preserve_recent_tokens: int = 5000
    # isToolProtected(toolName, text) -> bool; its presence also turns on BLOCKED refs.
    is_tool_protected: Callable[[str, str], bool] | None = None
    message_filters: FilterConfig = field(default_factory=FilterConfig)
    filters: tuple[MessageFilter, ...] = ()

    @classmethod
    def for_limit(cls, limit: int, **overrides: Any) -> KernelConfig:
        """Defaults for a context window of ``limit`` tokens, with overrides merged in."""
        return apply_overrides(cls(model_context_limit=int(limit)), overrides)

    @property
    def protection_configured(self) -> bool:
        """BLOCKED refs apply only when protection is configured (spec §1.2)."""
        return bool(self.protected_tools) or self.is_tool_protected is not None

    def validate(self) -> list[str]:
        """The reference's ``validateConfig`` checks, as warning strings (never raises)."""
        w: list[str] = []
        n = self.nudge
        if not n.min_context_limit_pct <= n.max_context_limit_pct <= n.emergency_threshold_pct:
            w.append(
                "nudge: expected minContextLimitPct <= maxContextLimitPct <= emergencyThresholdPct"
                f" (got {n.min_context_limit_pct}, {n.max_context_limit_pct}, {n.emergency_threshold_pct})"
            )
        if not (self.tiers.tier3_trigger > self.tiers.tier2_trigger >= 1):
            w.append(
                f"tiers: expected tier3Trigger > tier2Trigger >= 1 (got {self.tiers.tier3_trigger},"
                f" {self.tiers.tier2_trigger})"
            )
        if self.promotion_threshold < 1:
            w.append(f"promotionThreshold must be >= 1 (got {self.promotion_threshold})")
        if not (0 < self.truncate.threshold <= 1):
            w.append(f"truncate.threshold must be in (0, 1] (got {self.truncate.threshold})")
        if self.model_context_limit <= 0:
            w.append(f"modelContextLimit must be > 0 (got {self.model_context_limit})")
        return w

    def to_dict(self) -> dict[str, Any]:
        """Plain snake_case dict for manifests (callbacks and filters by name only)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "is_tool_protected":
                out[f.name] = None if v is None else getattr(v, "__name__", "callable")
            elif f.name == "filters":
                out[f.name] = [x.name for x in v]
            elif hasattr(v, "__dataclass_fields__"):
                out[f.name] = {g.name: getattr(v, g.name) for g in fields(v)}
            elif isinstance(v, tuple):
                out[f.name] = list(v)
            else:
                out[f.name] = v
        return out


# ---------------------------------------------------------------------- overrides
_GROUPS = {"nudge": NudgeConfig, "tiers": TiersConfig, "compress": CompressConfig,
           "truncate": TruncateConfig}
_TOP_ALIASES = {"modelContextLimit": "model_context_limit", "promotionThreshold": "promotion_threshold",
                "protectedTools": "protected_tools", "preserveRecentMessages": "preserve_recent_messages",
                "preserveRecentTokens": "preserve_recent_tokens", "isToolProtected": "is_tool_protected",
                "messageFilters": "message_filters"}


def _snake(name: str) -> str:
    out = []
    for ch in name:
        if ch.isupper():
            out.append("_" + ch.lower())
        else:
            out.append(ch)
    return "".join(out)


def _group_field(group_cls: type, key: str) -> str | None:
    names = {f.name for f in fields(group_cls)}
    for cand in (key, _snake(key)):
        if cand in names:
            return cand
    return None


def _flat_owner(key: str) -> tuple[str, str] | None:
    """Which group a flat key belongs to (``truncate.threshold`` has no flat spelling)."""
    hits = []
    for gname, gcls in _GROUPS.items():
        if gname == "truncate":
            continue
        f = _group_field(gcls, key)
        if f is not None:
            hits.append((gname, f))
    return hits[0] if len(hits) == 1 else None


def _check_value(key: str, default: Any, value: Any) -> None:
    """A ValueError when ``value`` cannot stand where ``default`` is: a bool for a bool, an
    integer for an int, a finite number for a float, a string for a string, a list for a tuple."""
    import math

    if isinstance(default, bool):
        ok, want = isinstance(value, bool), "true or false"
    elif isinstance(default, int):
        ok, want = isinstance(value, int) and not isinstance(value, bool), "an integer"
    elif isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        want = "a finite number"
    elif isinstance(default, str):
        ok, want = isinstance(value, str), "a string"
    elif isinstance(default, tuple):
        ok, want = value is None or isinstance(value, (list, tuple)), "a list"
    else:
        return
    if not ok:
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        raise ValueError(f"config key {key!r} must be {want}, got {shown}")


def apply_overrides(cfg: KernelConfig, overrides: dict[str, Any]) -> KernelConfig:
    """Merge ``overrides`` into ``cfg`` (groups shallowly); unknown keys and values of the
    wrong type (a string for a number, NaN) raise ValueError."""
    top: dict[str, Any] = {}
    groups: dict[str, dict[str, Any]] = {}
    for key, value in overrides.items():
        if key in _GROUPS:
            if not isinstance(value, dict):
                raise ValueError(f"config override {key!r} must be an object")
            for k, v in value.items():
                f = _group_field(_GROUPS[key], k)
                if f is None:
                    raise ValueError(f"unknown config key {key}.{k}")
                _check_value(f"{key}.{k}", getattr(getattr(cfg, key), f), v)
                groups.setdefault(key, {})[f] = v
            continue
        name = _TOP_ALIASES.get(key, key)
        if name in {f.name for f in fields(KernelConfig)} and name not in _GROUPS:
            _check_value(key, getattr(cfg, name), value)
            top[name] = value
            continue
        owner = _flat_owner(key)
        if owner is None:
            raise ValueError(f"unknown config key {key!r}")
        _check_value(key, getattr(getattr(cfg, owner[0]), owner[1]), value)
        groups.setdefault(owner[0], {})[owner[1]] = value
    for gname, vals in groups.items():
        top[gname] = replace(getattr(cfg, gname), **vals)
    if "protected_tools" in top:
        top["protected_tools"] = tuple(top["protected_tools"] or ())
    if "filters" in top:
        top["filters"] = tuple(top["filters"] or ())
    if isinstance(top.get("message_filters"), dict):
        top["message_filters"] = FilterConfig.from_dict(top["message_filters"])
    return replace(cfg, **top)
