"""Conformance thresholds, read from a doctrine version's ``conformance.json``.

The checker hard-codes no threshold: class weights, per-class minimum recall, caps, the
pass score per tier, DROP run lengths and the compression-ratio floor all come from the
doctrine, so they change (and are hashed) with it. A doctrine without the file is an
error that names the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from .items import CLASSES

__all__ = ["ClassSettings", "ConformanceConfigError", "ConformanceSettings", "default_doctrine", "parse_settings",
           "settings_for"]

CONFORMANCE_FILE = "conformance.json"
FORMAT = "doctrine-conformance/1"


class ConformanceConfigError(ValueError):
    """conformance.json is missing or malformed; the message names the file and key."""


@dataclass(frozen=True)
class ClassSettings:
    weight: float
    min_recall: float
    cap: int


@dataclass(frozen=True)
class ConformanceSettings:
    """Everything the checker reads from the doctrine, validated."""

    path: str
    classes: dict[str, ClassSettings]
    min_salience: float
    tiers: dict[str, dict[str, float]]
    drop: dict[str, float]
    ratio: dict[str, float]
    matching: dict[str, int]
    limit_violation_factor: float
    usability: dict[str, float] = field(default_factory=dict)
    full_weight_items: int = 1
    limits: dict[str, Any] = field(default_factory=dict)

    @property
    def caps(self) -> dict[str, int]:
        return {name: c.cap for name, c in self.classes.items()}

    def tier(self, tier: int) -> dict[str, float]:
        key = str(tier)
        if key not in self.tiers:
            raise ConformanceConfigError(f"{self.path}: no settings for tier {tier} (have {sorted(self.tiers)})")
        return self.tiers[key]


def _num(obj: dict, key: str, where: str, lo: float = 0.0, hi: float | None = None) -> float:
    v = obj.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ConformanceConfigError(f"{where}.{key}: expected a number, got {v!r}")
    if v < lo or (hi is not None and v > hi):
        raise ConformanceConfigError(f"{where}.{key}: {v} outside [{lo}, {hi if hi is not None else 'inf'}]")
    return v


def _obj(obj: dict, key: str, where: str) -> dict:
    v = obj.get(key)
    if not isinstance(v, dict):
        raise ConformanceConfigError(f"{where}.{key}: expected an object")
    return v


_KEYS = {
    "": {"format", "description", "classes", "min_salience", "tiers", "drop", "compression_ratio", "matching",
         "limit_violation_factor", "usability", "full_weight_items"},
    "drop": {"min_run_chars", "min_run_lines", "kgram_chars", "repeat_min", "max_share", "penalty", "report_chars"},
    "compression_ratio": {"min", "min_source_tokens"},
    "matching": {"counts_window_chars", "full_credit_share"},
    "usability": {"max_unusable_share", "penalty", "wrong_value_factor"},
}


def _no_unknown(obj: dict, allowed: set[str], where: str) -> None:
    # A misspelt key must fail loudly instead of silently leaving a default in force.
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise ConformanceConfigError(f"{where}: unknown key(s) {unknown}; expected {sorted(allowed)}")


def parse_settings(data: Any, path: str, limits: dict | None = None) -> ConformanceSettings:
    """Validate a loaded conformance.json (``path`` is used in messages only)."""
    if not isinstance(data, dict) or not data:
        raise ConformanceConfigError(f"{path}: missing or empty; the checker reads every threshold from it")
    _no_unknown(data, _KEYS[""], path)
    for section in ("drop", "compression_ratio", "matching", "usability"):
        if isinstance(data.get(section), dict):
            _no_unknown(data[section], _KEYS[section], f"{path}: {section}")
    if data.get("format") != FORMAT:
        raise ConformanceConfigError(f"{path}: 'format' must be {FORMAT!r}, got {data.get('format')!r}")
    cls_obj = _obj(data, "classes", path)
    missing = [c for c in CLASSES if c not in cls_obj]
    extra = sorted(set(cls_obj) - set(CLASSES))
    if missing or extra:
        raise ConformanceConfigError(f"{path}: classes wrong (missing {missing}, unknown {extra})")
    classes = {}
    for name in CLASSES:
        where = f"{path}: classes.{name}"
        c = _obj(cls_obj, name, f"{path}: classes")
        _no_unknown(c, {"weight", "min_recall", "cap"}, where)
        cap = c.get("cap")
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise ConformanceConfigError(f"{where}.cap: expected a positive integer")
        classes[name] = ClassSettings(_num(c, "weight", where), _num(c, "min_recall", where, 0, 1), cap)
    tiers = _obj(data, "tiers", path)
    for t in ("1", "2", "3"):
        tv = _obj(tiers, t, f"{path}: tiers")
        _no_unknown(tv, {"pass_score", "min_recall_factor"}, f"{path}: tiers.{t}")
        _num(tv, "pass_score", f"{path}: tiers.{t}", 0, 1)
        _num(tv, "min_recall_factor", f"{path}: tiers.{t}", 0, 1)
    drop = _obj(data, "drop", path)
    for k in ("min_run_chars", "min_run_lines", "kgram_chars", "repeat_min", "report_chars"):
        _num(drop, k, f"{path}: drop", 1)
    _num(drop, "max_share", f"{path}: drop", 0, 1)
    _num(drop, "penalty", f"{path}: drop", 0)
    if drop["kgram_chars"] > drop["min_run_chars"]:
        raise ConformanceConfigError(f"{path}: drop.kgram_chars must not exceed drop.min_run_chars")
    ratio = _obj(data, "compression_ratio", path)
    _num(ratio, "min", f"{path}: compression_ratio", 0)
    _num(ratio, "min_source_tokens", f"{path}: compression_ratio", 0)
    matching = _obj(data, "matching", path)
    _num(matching, "counts_window_chars", f"{path}: matching", 1)
    _num(matching, "full_credit_share", f"{path}: matching", 0.05, 1)
    usability = _obj(data, "usability", path)
    _num(usability, "max_unusable_share", f"{path}: usability", 0, 1)
    _num(usability, "penalty", f"{path}: usability", 0)
    _num(usability, "wrong_value_factor", f"{path}: usability", 0, 1)
    full_items = data.get("full_weight_items")
    if isinstance(full_items, bool) or not isinstance(full_items, int) or full_items < 1:
        raise ConformanceConfigError(f"{path}: full_weight_items: expected a positive integer")
    return ConformanceSettings(
        path=path,
        classes=classes,
        min_salience=_num(data, "min_salience", path, 0, 1),
        tiers={k: dict(v) for k, v in tiers.items()},
        drop=dict(drop),
        ratio=dict(ratio),
        matching={k: (float(v) if k == "full_credit_share" else int(v)) for k, v in matching.items()},
        usability=dict(usability),
        full_weight_items=full_items,
        limit_violation_factor=_num(data, "limit_violation_factor", path, 0, 1),
        limits=dict(limits or {}),
    )


_LIMIT_KEYS = ("min_summary_chars", "max_summary_chars", "tier1_max_tokens", "tier_targets")
# Parsed settings per (root, version, sha256): a reward loop calls the checker many times.
_CACHE: dict[tuple[str, str, str], ConformanceSettings] = {}


@lru_cache(maxsize=1)
def default_doctrine() -> Any:
    """The packaged v1 doctrine, loaded once per process."""
    from doctrine.spec import load_doctrine

    return load_doctrine("v1")


def settings_for(doctrine: Any = None) -> ConformanceSettings:
    """Settings of ``doctrine`` (a :class:`doctrine.spec.Doctrine`; default: v1)."""
    if doctrine is None:
        doctrine = default_doctrine()
    version = getattr(doctrine, "version", "?")
    path = str(Path(getattr(doctrine, "root", "") or ".") / version / CONFORMANCE_FILE)
    key = (path, version, str(getattr(doctrine, "sha256", "")))
    if key[2] and key in _CACHE:
        return _CACHE[key]
    data = getattr(doctrine, "conformance", None)
    if not data:
        raise ConformanceConfigError(f"{path}: missing; doctrine {version} has no conformance thresholds")
    limits = getattr(doctrine, "limits", None)
    if not isinstance(limits, dict) or any(k not in limits for k in _LIMIT_KEYS):
        raise ConformanceConfigError(f"doctrine {version}: limits must hold {list(_LIMIT_KEYS)} (manifest.json)")
    settings = parse_settings(data, path, limits)
    if key[2]:
        _CACHE[key] = settings
    return settings
