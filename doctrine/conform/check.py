"""check_summary: score one summary against the source range it replaces."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from .attribution import misattributed_quotes
from .drop import DropViolation, find_drop_violations
from .extract import extract_keep_items
from .extract import source_messages as _source_messages
from .items import CLASSES, KeepItem
from .match import Summary, item_credit
from .pending import claimed_done
from .settings import default_doctrine, settings_for
from .usability import UsabilityReport, check_usability

__all__ = ["ClassResult", "ConformanceReport", "check_summary"]

# A tier-2/3 source header: "Source: b3+b4 (12K→1.1K tok, 11x). [topic]"; bullets,
# bold and backticks around it are tolerated.
_SOURCE_HEADER = re.compile(r"^[\s>*_`#-]*Source:?[*_`]*\s*(?P<ids>b\d+(?:\s*\+\s*b\d+)*)", re.M | re.I)


@dataclass
class ClassResult:
    """Recall of one KEEP class. ``recall`` is salience-weighted (kept / found salience).

    A class with no candidate in the source has ``found == 0``, ``recall == 1.0`` and
    ``scored == False``: it does not enter the score.
    """

    found: int
    kept: int
    recall: float
    missed: list[str] = field(default_factory=list)
    min_recall: float = 0.0
    weight: float = 0.0
    scored: bool = False


@dataclass
class ConformanceReport:
    """The result of :func:`check_summary`; ``to_dict()`` gives the JSON the CLI prints."""

    score: float
    passed: bool
    classes: dict[str, ClassResult]
    drop_violations: list[DropViolation]
    limits: dict[str, Any]
    compression_ratio: float | None
    reasons: list[str]
    tier: int = 1
    doctrine_version: str = ""
    doctrine_sha256: str = ""
    drop_share: float = 0.0
    source_tokens: int = 0
    summary_tokens: int = 0
    usability: UsabilityReport = field(default_factory=UsabilityReport)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["classes"] = {k: asdict(v) for k, v in self.classes.items()}
        d["drop_violations"] = [v.to_dict() for v in self.drop_violations]
        d["usability"] = self.usability.to_dict()
        return d


def _counter(count_tokens: Callable[[str], int] | None) -> Callable[[str], int]:
    if count_tokens is not None:
        return count_tokens
    from plumbing.tokens import default_count_tokens

    return default_count_tokens


def _check_limits(summary: str, tier: int, n_sources: int, block_ids: list[str], tokens: int,
                  limits: dict[str, Any], reasons: list[str]) -> dict[str, Any]:
    chars = len(summary.strip())
    out: dict[str, Any] = {"chars": chars, "tokens": tokens, "violations": []}
    lo, hi = limits["min_summary_chars"], limits["max_summary_chars"]
    out["min_chars"], out["max_chars"] = lo, hi
    if chars < lo:
        out["violations"].append("too_short")
        reasons.append(f"summary has {chars} chars, under the doctrine minimum of {lo}")
    if chars > hi:
        out["violations"].append("too_long")
        reasons.append(f"summary has {chars} chars, over the doctrine maximum of {hi}")
    if tier == 1:
        out["max_tokens"] = limits["tier1_max_tokens"]
        if tokens > limits["tier1_max_tokens"]:
            out["violations"].append("over_token_limit")
            reasons.append(f"tier-1 summary has {tokens} tokens, over {limits['tier1_max_tokens']}")
        return out
    target = limits["tier_targets"][str(tier)]
    k = max(1, n_sources)
    t_lo, t_hi = k * target["min_tokens_per_source"], k * target["max_tokens_per_source"]
    out.update(sources=n_sources, min_tokens=t_lo, max_tokens=t_hi)
    if tokens < t_lo or tokens > t_hi:
        out["violations"].append("off_tier_target")
        reasons.append(f"tier-{tier} summary of {k} source block(s) has {tokens} tokens, outside {t_lo}-{t_hi}")
    if block_ids:
        cited: list[str] = []
        for m in _SOURCE_HEADER.finditer(summary):
            cited += [f"b{int(x[1:])}" for x in re.findall(r"b\d+", m.group("ids"))]
        missing = [b for b in block_ids if b not in cited]
        unknown = sorted(set(cited) - set(block_ids))
        out.update(source_headers=len(set(cited)), missing_headers=missing, unknown_headers=unknown)
        if missing:
            out["violations"].append("missing_source_headers")
            reasons.append(f"no 'Source: bN' header line for source block(s) {', '.join(missing)}")
        if unknown:
            out["violations"].append("unknown_source_headers")
            reasons.append(f"'Source:' headers cite block(s) not in the source: {', '.join(unknown)}")
    else:
        reasons.append(f"tier-{tier} source has no block ids (bN); Source headers not checked")
    return out


def check_summary(source_messages: Any, summary: str, *, tier: int = 1, doctrine: Any = None,
                  count_tokens: Callable[[str], int] | None = None) -> ConformanceReport:
    """Score ``summary`` against the source range it replaces, under ``doctrine`` (default v1).

    Deterministic: the same inputs give the same report. ``score`` is the weighted mean of
    the per-class recalls (classes with no candidate in the source are skipped), times a
    DROP factor ``max(0, 1 - penalty * share)`` and ``limit_violation_factor`` per limit
    broken. ``passed`` needs the tier's pass score, every class at its minimum recall
    (scaled by the tier's ``min_recall_factor``), no limit broken and a DROP share within
    ``drop.max_share``. ``reasons`` says in words why it did not pass (and any warning).
    """
    if not isinstance(summary, str):
        raise TypeError("summary must be a string")
    if tier not in (1, 2, 3):
        raise ValueError(f"tier must be 1, 2 or 3, got {tier!r}")
    if doctrine is None:
        doctrine = default_doctrine()
    settings = settings_for(doctrine)
    version = str(getattr(doctrine, "version", ""))
    tier_cfg = settings.tier(tier)
    count = _counter(count_tokens)
    msgs = _source_messages(source_messages)
    items = extract_keep_items(msgs, settings=settings)
    prepared = Summary(summary)
    reasons: list[str] = []

    classes: dict[str, ClassResult] = {}
    kept_items: list[KeepItem] = []
    num = den = 0.0
    below: list[str] = []
    mw = settings.matching
    full_items = settings.full_weight_items
    for name in CLASSES:
        cs = settings.classes[name]
        found = items.get(name, [])
        credits = [item_credit(it, prepared, counts_window=mw["counts_window_chars"], full_share=mw["full_credit_share"])
                   for it in found]
        kept = [it for it, cr in zip(found, credits, strict=True) if cr >= 0.999]
        kept_items += [it for it, cr in zip(found, credits, strict=True) if cr > 0]
        total = sum(it.salience for it in found)
        recall = round(sum(it.salience * cr for it, cr in zip(found, credits, strict=True)) / total, 4) if total else 1.0
        need = round(cs.min_recall * tier_cfg["min_recall_factor"], 4)
        missed = [it.text for it, cr in zip(found, credits, strict=True) if cr < 0.999]
        # A class weighs by how many items it has, up to full_weight_items: one item is one item.
        weight = cs.weight * min(1.0, len(found) / full_items) if full_items else cs.weight
        classes[name] = ClassResult(len(found), len(kept), recall, missed, need, round(weight, 4), bool(found))
        if found:
            num += weight * recall
            den += weight
            if recall < need:
                below.append(name)
                reasons.append(f"{name}: recall {recall:.2f} under the minimum {need:.2f} "
                               f"(kept {len(kept)} of {len(found)})")
    recall_score = num / den if den else 1.0
    if not den:
        reasons.append("no KEEP candidates in the source: the score reflects only limits and DROP checks")

    u = settings.usability
    all_items = [it for v in items.values() for it in v]
    usable = check_usability(summary, [m.text for m in msgs], all_items)
    usable.misattributed = misattributed_quotes(summary, msgs)
    usable.claimed_done = claimed_done(summary, msgs)
    unusable = False
    if usable.share > u["max_unusable_share"]:
        unusable = True
        reasons.append(f"{usable.share:.0%} of the summary's lines are fragments or repeats a reader cannot use "
                       f"(over {u['max_unusable_share']:.0%}), e.g. {(usable.fragments + usable.duplicates)[0][:60]!r}")
    if usable.invented_numbers:
        unusable = True
        reasons.append(f"number(s) not in the source: {', '.join(usable.invented_numbers[:5])}")
    if usable.invented_quotes:
        unusable = True
        reasons.append(f"quoted text not in the source: {'; '.join(q[:40] for q in usable.invented_quotes[:3])}")
    if usable.misattributed:
        unusable = True
        reasons.append(f"quote(s) the cited message does not hold: {'; '.join(q[:50] for q in usable.misattributed[:3])}")
    if usable.altered_values:
        unusable = True
        reasons.append(f"value(s) altered from the source: {'; '.join(usable.altered_values[:3])}")
    if usable.claimed_done:
        unusable = True
        reasons.append(f"reported as done, left to come in the source: {'; '.join(q[:60] for q in usable.claimed_done[:2])}")
    if usable.stale_values:
        unusable = True
        reasons.append(f"superseded value(s) given as current: {'; '.join(usable.stale_values[:3])}")
    n_wrong = (len(usable.invented_numbers) + len(usable.invented_quotes) + len(usable.misattributed)
               + len(usable.altered_values) + len(usable.stale_values) + len(usable.claimed_done))
    usability_factor = max(0.0, 1.0 - u["penalty"] * usable.share) * (u["wrong_value_factor"] ** min(n_wrong, 3))

    d = settings.drop
    # Tool output must not be pasted; at tier 2/3 neither may the source summaries be.
    outputs = [(m.key, m.text) for m in msgs if m.kind == "tool-result" or (tier > 1 and m.block_id)]
    violations, share = find_drop_violations(
        summary, outputs, [it.text for it in kept_items],
        min_run_chars=int(d["min_run_chars"]), min_run_lines=int(d["min_run_lines"]),
        kgram=int(d["kgram_chars"]), repeat_min=int(d["repeat_min"]), report_chars=int(d["report_chars"]))
    if violations:
        reasons.append(f"DROP: {len(violations)} span(s) of copied output or repeated lines, "
                       f"{share:.0%} of the summary")
    if share > d["max_share"]:
        reasons.append(f"DROP share {share:.0%} over the maximum {d['max_share']:.0%}")

    source_tokens = sum(count(m.text) for m in msgs)
    summary_tokens = count(summary)
    block_ids = list(dict.fromkeys(m.block_id for m in msgs if m.block_id))
    n_sources = len(block_ids) if block_ids else len(msgs)
    limits = _check_limits(summary, tier, n_sources, block_ids, summary_tokens, settings.limits, reasons)
    ratio = round(source_tokens / summary_tokens, 3) if summary_tokens else None
    limits["min_compression_ratio"] = settings.ratio["min"]
    if (source_tokens >= settings.ratio["min_source_tokens"] and ratio is not None
            and ratio < settings.ratio["min"]):
        limits["violations"].append("low_compression_ratio")
        reasons.append(f"compression ratio {ratio:.2f} under the minimum {settings.ratio['min']}")

    drop_factor = max(0.0, 1.0 - d["penalty"] * share)
    limit_factor = settings.limit_violation_factor ** len(limits["violations"])
    score = round(recall_score * drop_factor * limit_factor * usability_factor, 4)
    if score < tier_cfg["pass_score"]:
        reasons.append(f"score {score:.2f} under the tier-{tier} pass score {tier_cfg['pass_score']:.2f}")
    passed = (score >= tier_cfg["pass_score"] and not below and not limits["violations"]
              and share <= d["max_share"] and not unusable)
    return ConformanceReport(
        score=score, passed=passed, classes=classes, drop_violations=violations, limits=limits,
        compression_ratio=ratio, reasons=reasons, tier=tier, doctrine_version=version,
        doctrine_sha256=str(getattr(doctrine, "sha256", "")),
        drop_share=share, source_tokens=source_tokens, summary_tokens=summary_tokens, usability=usable)
