"""The doctrine an artifact is built with: a version's texts (:mod:`doctrine.texts`) with
override layers on top, and its hash.

Overrides come in layers on top of a base version: an acp-kernel prompt set (see
:mod:`doctrine.acp_prompt_set`) first, then explicit ``{section: text}`` overrides. Surface
sections override freely; load-bearing ones only with ``acknowledge_risk=True``. Every name
of :mod:`doctrine.texts` is importable from here too (``from doctrine.spec import
load_doctrine, resolve_doctrine``).
"""

from __future__ import annotations

from pathlib import Path

from doctrine.acp_prompt_set import read_prompt_set
from doctrine.texts import (
    DEFAULT_ROOT,
    LIMIT_KEYS,
    Doctrine,
    DoctrineError,
    canonical_json,
    doctrine_sha256,
    list_versions,
    load_doctrine,
    normalise_text,
    texts_sha256,
    update_manifest_hash,
)

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
    "resolve_doctrine",
    "texts_sha256",
    "update_manifest_hash",
]


# ---------------------------------------------------------------------------- overrides


def _apply_layer(
    doc: Doctrine,
    sections: dict[str, str],
    layer: dict[str, str],
    label: str,
    acknowledge_risk: bool,
    applied: list[str],
) -> None:
    """Apply one override layer in place; gate load-bearing sections on ``acknowledge_risk``."""
    unknown = sorted(k for k in layer if k not in doc.sections)
    if unknown:
        raise DoctrineError(
            f"{label}: unknown section(s) {unknown}; doctrine {doc.version} has {list(doc.sections)}"
        )
    not_text = sorted(k for k, v in layer.items() if not isinstance(v, str))
    if not_text:
        raise DoctrineError(f"{label}: override(s) for {not_text} must be text")
    gated = sorted(k for k in layer if k in doc.load_bearing)
    if gated and not acknowledge_risk:
        raise DoctrineError(
            f"{label}: overriding load-bearing section(s) {', '.join(gated)} changes the compression "
            f"rules; pass acknowledge_risk=True (CLI: --acknowledge-risk) to do it anyway"
        )
    for name in layer:  # keep the layer's order so overrides_applied reads as given
        sections[name] = normalise_text(layer[name])
        applied.append(f"{label}:{name}")


def resolve_doctrine(
    version: str = "v1",
    overrides: dict[str, str] | None = None,
    prompt_set: str | Path | None = None,
    acknowledge_risk: bool = False,
    root: str | Path | None = None,
) -> Doctrine:
    """Load ``version`` and apply a prompt-set layer, then explicit ``overrides`` on top.

    ``overrides`` maps section names to replacement texts (an empty text removes the
    section from the rendered output). Overriding a load-bearing section, by either layer,
    raises :class:`DoctrineError` naming it unless ``acknowledge_risk`` is true.
    ``overrides_applied`` lists ``"<layer>:<section>"`` entries in the order applied.
    """
    doc = load_doctrine(version, root=root)
    if not overrides and prompt_set is None:
        return doc
    sections = dict(doc.sections)
    applied: list[str] = []
    if prompt_set is not None:
        layer = read_prompt_set(prompt_set, doc, acknowledge_risk=acknowledge_risk)
        _apply_layer(doc, sections, layer, f"prompt-set={Path(prompt_set).name}", acknowledge_risk, applied)
    if overrides:
        if not isinstance(overrides, dict):
            raise DoctrineError("overrides must be a dict of section name -> text")
        _apply_layer(doc, sections, overrides, "override", acknowledge_risk, applied)
    digest = doctrine_sha256(sections, doc.distilled, doc.load_bearing, doc.limits, doc.conformance)
    return Doctrine(
        version=doc.version,
        sha256=digest,
        base_sha256=doc.base_sha256,
        sections=sections,
        load_bearing=doc.load_bearing,
        overrides_applied=applied,
        limits=doc.limits,
        conformance=doc.conformance,
        distilled=doc.distilled,
        date=doc.date,
        reference_only=doc.reference_only,
        root=doc.root,
    )
