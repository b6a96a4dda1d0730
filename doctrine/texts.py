"""Versioned doctrine texts: load and hash (``resolve_doctrine`` in :mod:`doctrine.spec`
layers overrides on top).

A doctrine version is data, not code: ``doctrine/versions/<version>/`` holds one Markdown
file per section, ``distilled/<section>.md`` for the distilled variants, a
``manifest.json`` (version, date, section order, which sections are load-bearing, limits,
``texts_sha256``) and optionally ``conformance.json`` (thresholds written by the
conformance checker's owner).

Hashing: every text is normalised (CRLF/CR -> LF, trailing whitespace stripped per line,
trailing blank lines dropped), then the sorted sections, distilled variants, load-bearing
set, limits and conformance are dumped as canonical JSON (sorted keys, no spaces, UTF-8)
and hashed with sha256. The manifest's ``texts_sha256`` covers only the texts and the
load-bearing set, so that a stale manifest (a text edited without re-running
``python -m doctrine hash --update``) fails loudly, while conformance.json, owned by
someone else, can change without touching the manifest.
"""


from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_ROOT",
    "Doctrine",
    "DoctrineError",
    "LIMIT_KEYS",
    "canonical_json",
    "doctrine_sha256",
    "list_versions",
    "load_doctrine",
    "normalise_text",
    "texts_sha256",
    "update_manifest_hash",
]

DEFAULT_ROOT = Path(__file__).resolve().parent / "versions"
MANIFEST = "manifest.json"
CONFORMANCE = "conformance.json"
# The conformance checker reads exactly these keys; a manifest with others is rejected so a
# typo cannot silently fall back to a default somewhere else.
LIMIT_KEYS = frozenset({"min_summary_chars", "max_summary_chars", "tier1_max_tokens", "tier_targets"})
_SECTION_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_VERSION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class DoctrineError(ValueError):
    """A doctrine version, override or prompt set that cannot be used; names the culprit."""


def normalise_text(text: str) -> str:
    """Canonical form of a section text: LF line ends, no trailing spaces, no trailing blank lines.

    Leading blank lines are dropped too, so an editor's stray newline changes nothing.
    """
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    lines = [ln.rstrip() for ln in lines]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return "\n".join(lines)


def canonical_json(obj: Any) -> bytes:
    """Deterministic JSON bytes: sorted keys, compact separators, UTF-8 kept as is."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _sha(obj: Any) -> str:
    return hashlib.sha256(canonical_json(obj)).hexdigest()


def texts_sha256(sections: dict[str, str], distilled: dict[str, str], load_bearing: frozenset[str] | set[str] | list[str]) -> str:
    """Hash of the normalised texts and the load-bearing set (the manifest's ``texts_sha256``)."""
    return _sha(
        {
            "sections": {k: normalise_text(v) for k, v in sections.items()},
            "distilled": {k: normalise_text(v) for k, v in distilled.items()},
            "load_bearing": sorted(load_bearing),
        }
    )


def doctrine_sha256(
    sections: dict[str, str],
    distilled: dict[str, str],
    load_bearing: frozenset[str] | set[str] | list[str],
    limits: dict,
    conformance: dict,
) -> str:
    """Hash of everything that changes what a doctrine means: texts, load-bearing set, limits, conformance."""
    return _sha(
        {
            "texts": texts_sha256(sections, distilled, load_bearing),
            "limits": limits,
            "conformance": conformance,
        }
    )


@dataclass(frozen=True)
class Doctrine:
    """One resolved doctrine: a base version plus the override layers applied to it.

    ``sections`` holds the doctrine-mode texts in manifest order; ``distilled`` the
    distilled variants (load-bearing sections and tool descriptions). ``sha256`` covers
    the resolved content, ``base_sha256`` the unmodified base version.
    """

    version: str
    sha256: str
    base_sha256: str
    sections: dict[str, str]
    load_bearing: frozenset[str]
    overrides_applied: list[str] = field(default_factory=list)
    limits: dict = field(default_factory=dict)
    conformance: dict = field(default_factory=dict)
    distilled: dict[str, str] = field(default_factory=dict)
    date: str = ""
    reference_only: frozenset[str] = frozenset()
    root: str = ""

    def text(self, name: str, mode: str = "doctrine") -> str:
        """The text of section ``name`` as rendered in ``mode`` ("doctrine" or "distilled").

        In distilled mode a section with a distilled variant uses it; any other section
        keeps its doctrine text (surface sections are the same in both modes).
        """
        if mode not in ("doctrine", "distilled"):
            raise DoctrineError(f"unknown prompt mode {mode!r}; expected 'doctrine' or 'distilled'")
        if name not in self.sections:
            raise DoctrineError(f"doctrine {self.version} has no section {name!r}")
        if mode == "distilled" and name in self.distilled:
            return self.distilled[name]
        return self.sections[name]

    def to_manifest(self) -> dict:
        """The stamp every artifact manifest carries (version, hashes, overrides applied)."""
        return {
            "version": self.version,
            "sha256": self.sha256,
            "base": {"version": self.version, "sha256": self.base_sha256},
            "overrides_applied": list(self.overrides_applied),
        }


# ---------------------------------------------------------------------------- loading


def list_versions(root: str | Path | None = None) -> list[str]:
    """Names of the version folders under ``root`` that hold a manifest, sorted."""
    base = Path(root) if root is not None else DEFAULT_ROOT
    if not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir() if (p / MANIFEST).is_file())


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DoctrineError(f"{path}: missing") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DoctrineError(f"{path}: cannot read ({exc})") from None
    except json.JSONDecodeError as exc:
        raise DoctrineError(f"{path}: malformed JSON ({exc.msg} at line {exc.lineno})") from None


def _read_text(path: Path) -> str:
    try:
        return normalise_text(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DoctrineError(f"{path}: section file missing") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DoctrineError(f"{path}: cannot read ({exc})") from None


def _str_list(manifest: dict, key: str, path: Path, required: bool = True) -> list[str]:
    value = manifest.get(key, None if required else [])
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise DoctrineError(f"{path}: '{key}' must be a list of section names")
    return value


def _check_limits(limits: Any, path: Path) -> dict:
    if not isinstance(limits, dict):
        raise DoctrineError(f"{path}: 'limits' must be an object")
    keys = set(limits)
    if keys != LIMIT_KEYS:
        missing, extra = sorted(LIMIT_KEYS - keys), sorted(keys - LIMIT_KEYS)
        raise DoctrineError(f"{path}: 'limits' keys wrong (missing {missing}, unexpected {extra})")
    for key in ("min_summary_chars", "max_summary_chars", "tier1_max_tokens"):
        if not isinstance(limits[key], int) or isinstance(limits[key], bool) or limits[key] <= 0:
            raise DoctrineError(f"{path}: limits.{key} must be a positive integer")
    if limits["min_summary_chars"] > limits["max_summary_chars"]:
        raise DoctrineError(f"{path}: limits.min_summary_chars exceeds max_summary_chars")
    targets = limits["tier_targets"]
    if not isinstance(targets, dict) or set(targets) != {"2", "3"}:
        raise DoctrineError(f"{path}: limits.tier_targets must have exactly the keys '2' and '3'")
    for tier, t in targets.items():
        if not isinstance(t, dict) or set(t) != {"min_tokens_per_source", "max_tokens_per_source"}:
            raise DoctrineError(f"{path}: limits.tier_targets.{tier} needs min/max_tokens_per_source")
        lo, hi = t["min_tokens_per_source"], t["max_tokens_per_source"]
        if not (isinstance(lo, int) and isinstance(hi, int) and 0 < lo <= hi):
            raise DoctrineError(f"{path}: limits.tier_targets.{tier} must hold integers with 0 < min <= max")
    return limits


def load_doctrine(version: str = "v1", root: str | Path | None = None) -> Doctrine:
    """Load and verify one doctrine version from ``root`` (default: the packaged versions).

    Raises :class:`DoctrineError` for an unknown version, a malformed manifest, a missing
    section file, or a manifest whose ``texts_sha256`` no longer matches the texts.
    """
    base = Path(root) if root is not None else DEFAULT_ROOT
    if not isinstance(version, str) or not _VERSION_NAME.match(version):
        raise DoctrineError(f"bad doctrine version name {version!r}")
    folder = base / version
    if not (folder / MANIFEST).is_file():
        raise DoctrineError(
            f"unknown doctrine version {version!r} (no {folder / MANIFEST}); available: {list_versions(base)}"
        )
    mpath = folder / MANIFEST
    manifest = _read_json(mpath)
    if not isinstance(manifest, dict):
        raise DoctrineError(f"{mpath}: must be a JSON object")
    if manifest.get("version") != version:
        raise DoctrineError(f"{mpath}: 'version' is {manifest.get('version')!r}, folder says {version!r}")
    names = _str_list(manifest, "sections", mpath)
    bad = [n for n in names if not _SECTION_NAME.match(n)]
    if bad or len(set(names)) != len(names):
        raise DoctrineError(f"{mpath}: bad or duplicate section names {bad or names}")
    load_bearing = _str_list(manifest, "load_bearing", mpath)
    reference_only = _str_list(manifest, "reference_only", mpath, required=False)
    distilled_names = _str_list(manifest, "distilled", mpath, required=False)
    for key, group in (("load_bearing", load_bearing), ("reference_only", reference_only), ("distilled", distilled_names)):
        unknown = sorted(set(group) - set(names))
        if unknown:
            raise DoctrineError(f"{mpath}: '{key}' names sections not in 'sections': {unknown}")
    limits = _check_limits(manifest.get("limits"), mpath)

    sections = {n: _read_text(folder / f"{n}.md") for n in names}
    distilled = {n: _read_text(folder / "distilled" / f"{n}.md") for n in distilled_names}
    conformance: dict = {}
    if (folder / CONFORMANCE).is_file():
        conformance = _read_json(folder / CONFORMANCE)
        if not isinstance(conformance, dict):
            raise DoctrineError(f"{folder / CONFORMANCE}: must be a JSON object")

    lb = frozenset(load_bearing)
    computed = texts_sha256(sections, distilled, lb)
    stored = manifest.get("texts_sha256")
    if stored is not None and stored != computed:
        raise DoctrineError(
            f"{mpath}: texts_sha256 is stale (manifest {str(stored)[:12]}…, texts {computed[:12]}…); "
            f"a section changed: run `python -m doctrine hash --version {version} --update`"
        )
    digest = doctrine_sha256(sections, distilled, lb, limits, conformance)
    return Doctrine(
        version=version,
        sha256=digest,
        base_sha256=digest,
        sections=sections,
        load_bearing=lb,
        overrides_applied=[],
        limits=limits,
        conformance=conformance,
        distilled=distilled,
        date=str(manifest.get("date", "")),
        reference_only=frozenset(reference_only),
        root=str(base),
    )


def update_manifest_hash(version: str = "v1", root: str | Path | None = None) -> str:
    """Recompute ``texts_sha256`` for ``version`` and write it into its manifest (atomically)."""
    from plumbing.runs import atomic_write_text

    base = Path(root) if root is not None else DEFAULT_ROOT
    mpath = base / version / MANIFEST
    manifest = _read_json(mpath)
    if not isinstance(manifest, dict):
        raise DoctrineError(f"{mpath}: must be a JSON object")
    manifest.pop("texts_sha256", None)
    atomic_write_text(mpath, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    doc = load_doctrine(version, root=base)  # no stored hash now, so this cannot be stale
    manifest["texts_sha256"] = texts_sha256(doc.sections, doc.distilled, doc.load_bearing)
    atomic_write_text(mpath, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return manifest["texts_sha256"]
