"""Per-case metrics and their aggregation per arm (and per kind for decisions)."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

__all__ = ["aggregate", "balanced_accuracy", "balanced_ci", "by_kind", "mean", "non_inferiority", "paired_balanced",
           "range_overlap", "ref_interval", "scripted_metrics"]


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def scripted_metrics(calls: list[dict[str, Any]], probes: list[dict[str, Any]], refetches: int,
                     attempted: int, succeeded: int) -> dict[str, Any]:
    """The Session Marathon figures of one case from its call records and probe results."""
    ctx = [c["retained_tokens"] for c in calls if c.get("purpose") != "summary"]  # agent calls only
    real = [c for c in calls if c.get("real")]
    return {
        "calls": len(calls),
        "model_calls": len(real),
        "billed_tokens": sum(c["prompt_tokens"] + c["completion_tokens"] for c in calls),
        "prompt_tokens": sum(c["prompt_tokens"] for c in calls),
        "completion_tokens": sum(c["completion_tokens"] for c in calls),
        "doctrine_tokens": sum(c.get("doctrine_tokens", 0) for c in calls),
        "mean_context": mean(ctx),
        "peak_context": max(ctx, default=0),
        "compressions_attempted": attempted,
        "compressions_succeeded": succeeded,
        "refetches": refetches,
        "recovery_calls": sum(len(c.get("recovery") or []) for c in real),
        "probes": len(probes),
        "probe_accuracy": mean([p["score"] for p in probes]) if probes else None,
        "evidence_survival": mean([p["survival"] for p in probes]) if probes else None,
        "malformed_calls": sum(1 for c in real if c.get("parse_errors")),
        "kernel_errors": sum(len(c.get("kernel_errors") or []) for c in real),
        "window_overflows": sum(1 for c in calls if c.get("overflow")),
        "latency_s": sum(c.get("latency_s", 0.0) for c in real),
    }


# Metrics whose per-arm aggregate is a sum across cases; all others are means.
SUMMED = {"calls", "model_calls", "billed_tokens", "prompt_tokens", "completion_tokens", "doctrine_tokens",
          "compressions_attempted", "compressions_succeeded", "refetches", "recovery_calls", "probes", "malformed_calls",
          "kernel_errors", "kernel_warnings", "recover_errors", "window_overflows", "prefix_cache_hits", "prefix_cache_queries", "cases"}


def aggregate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Combine per-case metric dicts: counts summed, rates and sizes averaged (None skipped)."""
    out: dict[str, Any] = {"cases": len(rows)}
    keys = sorted({k for r in rows for k in r})
    for k in keys:
        vals = [r[k] for r in rows if isinstance(r.get(k), (int, float)) and not isinstance(r.get(k), bool)]
        bools = [r[k] for r in rows if isinstance(r.get(k), bool)]
        if bools and not vals:
            out[k] = mean([float(b) for b in bools])
        elif not vals:
            continue
        elif k in SUMMED:
            out[k] = sum(vals)
        elif k.startswith("peak"):
            out[k] = max(vals)
        else:
            out[k] = mean(vals)
    if out.get("prefix_cache_queries"):
        out["prefix_cache_hit_rate"] = out.get("prefix_cache_hits", 0) / out["prefix_cache_queries"]
    return out


def by_kind(rows: list[dict[str, Any]], key: str = "label_kind") -> dict[str, dict[str, Any]]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[str(r.get(key))].append(r)
    return {k: aggregate(v) for k, v in sorted(groups.items())}


_MREF = re.compile(r"^[mM]0*(\d{1,6})$")
_BREF = re.compile(r"^[bB]0*(\d{1,6})$")


def ref_interval(start: str, end: str) -> tuple[str, int, int] | None:
    """("m"|"b", lo, hi) for a range given by two refs of the same kind, else None."""
    for kind, pat in (("m", _MREF), ("b", _BREF)):
        a, b = pat.match(str(start).strip()), pat.match(str(end).strip())
        if a and b:
            lo, hi = int(a.group(1)), int(b.group(1))
            return (kind, lo, hi) if lo <= hi else None
    return None


def range_overlap(predicted: list[tuple[str, str]], reference: list[tuple[str, str]]) -> float:
    """Jaccard overlap of the refs covered by two range lists (message or block numbers)."""
    def cover(ranges: list[tuple[str, str]]) -> set[tuple[str, int]]:
        s: set[tuple[str, int]] = set()
        for a, b in ranges:
            iv = ref_interval(a, b)
            if iv:
                s.update((iv[0], i) for i in range(iv[1], iv[2] + 1))
        return s

    p, r = cover(predicted), cover(reference)
    if not p and not r:
        return 1.0
    return len(p & r) / len(p | r) if p | r else 0.0


# ----------------------------------------------------------------- uncertainty
BOOTSTRAP_SAMPLES = 2000
PAIRS = (("distilled", "doctrine"), ("distilled", "base_slim"), ("doctrine", "base_slim"))


def _numeric(v: Any) -> float | None:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return float(v)
    return None


def mean_metrics(rows: list[dict[str, Any]]) -> list[str]:
    """The metrics whose aggregate is a mean over cases (the ones an interval is for)."""
    keys = {k for r in rows for k, v in r.items() if _numeric(v) is not None}
    return sorted(k for k in keys if k not in SUMMED and not k.startswith("peak"))


def bootstrap_ci(values: list[float], *, seed: int = 0, samples: int = BOOTSTRAP_SAMPLES) -> list[float]:
    """95 % percentile-bootstrap interval of the mean (seeded; [v, v] for one value)."""
    import numpy as np

    x = np.asarray(values, dtype=float)
    if len(x) == 0:
        return []
    if len(x) == 1:
        return [float(x[0]), float(x[0])]
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(samples, len(x)))].mean(axis=1)
    return [float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))]


def arm_intervals(rows: list[dict[str, Any]], *, seed: int = 0) -> dict[str, list[float]]:
    """``{metric: [low, high]}`` over the cases of one arm, for every mean-type metric."""
    out = {}
    for k in mean_metrics(rows):
        vals = [v for v in (_numeric(r.get(k)) for r in rows) if v is not None]
        if vals:
            out[k] = bootstrap_ci(vals, seed=seed)
    return out


def paired_comparison(a: dict[Any, dict[str, Any]], b: dict[Any, dict[str, Any]], *,
                      seed: int = 0) -> dict[str, dict[str, Any]]:
    """``{metric: {"diff", "ci95", "n"}}``: mean of a - b over the cases both arms ran (keyed
    alike, e.g. by (case_id, seed)), with a paired-bootstrap 95 % interval."""
    keys = sorted(set(a) & set(b), key=str)
    out: dict[str, dict[str, Any]] = {}
    if not keys:
        return out
    for k in mean_metrics([a[c] for c in keys] + [b[c] for c in keys]):
        diffs = []
        for c in keys:
            x, y = _numeric(a[c].get(k)), _numeric(b[c].get(k))
            if x is not None and y is not None:
                diffs.append(x - y)
        if diffs:
            out[k] = {"diff": sum(diffs) / len(diffs), "ci95": bootstrap_ci(diffs, seed=seed), "n": len(diffs)}
    return out


def balanced_accuracy(rows: list[dict[str, Any]]) -> float | None:
    """Mean over label kinds of the share of rows with ``kind_correct``; None without any."""
    per: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        v = _numeric(r.get("kind_correct"))
        if v is not None:
            per[str(r.get("label_kind"))].append(v)
    return mean([mean(v) for v in per.values()]) if per else None


def _strata(rows: list[dict[str, Any]]) -> list[list[int]]:
    """Row indices grouped by label kind (a kind-stratified bootstrap keeps every kind)."""
    groups: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        if _numeric(r.get("kind_correct")) is not None:
            groups[str(r.get("label_kind"))].append(i)
    return [groups[k] for k in sorted(groups)]


def _balanced_resamples(kind_correct: list[list[float]], strata: list[list[int]], seed: int,
                        samples: int) -> list[list[float]]:
    """Per series in ``kind_correct`` (one per arm, aligned rows), ``samples`` balanced
    accuracies over the same kind-stratified resamples of the rows."""
    import numpy as np

    rng = np.random.default_rng(seed)
    xs = [np.asarray(s, dtype=float) for s in kind_correct]
    out = [np.zeros(samples) for _ in xs]
    for idx in strata:
        pick = np.asarray(idx)[rng.integers(0, len(idx), size=(samples, len(idx)))]
        for o, x in zip(out, xs, strict=True):
            o += x[pick].mean(axis=1)
    return [list(o / len(strata)) for o in out]


def balanced_ci(rows: list[dict[str, Any]], *, seed: int = 0, samples: int = BOOTSTRAP_SAMPLES) -> list[float]:
    """95 % bootstrap interval of :func:`balanced_accuracy`, resampling within each kind."""
    import numpy as np

    strata = _strata(rows)
    if not strata:
        return []
    if all(len(s) == 1 for s in strata):
        v = balanced_accuracy(rows)
        return [v, v]
    x = [_numeric(r.get("kind_correct")) or 0.0 for r in rows]
    (bal,) = _balanced_resamples([x], strata, seed, samples)
    return [float(np.percentile(bal, 2.5)), float(np.percentile(bal, 97.5))]


def paired_balanced(a: dict[Any, dict[str, Any]], b: dict[Any, dict[str, Any]], *, seed: int = 0,
                    samples: int = BOOTSTRAP_SAMPLES) -> dict[str, Any] | None:
    """``{"diff", "ci95", "n"}`` of balanced accuracy a - b over the shared cases (strata by
    a's label kind), with a paired kind-stratified bootstrap interval; None without cases."""
    import numpy as np

    keys = [k for k in sorted(set(a) & set(b), key=str)
            if _numeric(a[k].get("kind_correct")) is not None and _numeric(b[k].get("kind_correct")) is not None]
    if not keys:
        return None
    ra, rb = [a[k] for k in keys], [b[k] for k in keys]
    diff = (balanced_accuracy(ra) or 0.0) - (balanced_accuracy(rb) or 0.0)
    strata = _strata(ra)
    if all(len(s) == 1 for s in strata):
        return {"diff": diff, "ci95": [diff, diff], "n": len(keys)}
    xa = [_numeric(r["kind_correct"]) or 0.0 for r in ra]
    xb = [_numeric(r["kind_correct"]) or 0.0 for r in rb]
    ba, bb = _balanced_resamples([xa, xb], strata, seed, samples)
    d = np.asarray(ba) - np.asarray(bb)
    return {"diff": diff, "ci95": [float(np.percentile(d, 2.5)), float(np.percentile(d, 97.5))], "n": len(keys)}


# Metrics a non-inferiority verdict may be asked for: rates where higher is better.
NON_INFERIORITY_METRICS = ("balanced_acc", "kind_correct", "compress_success", "conformance_passed",
                           "conformance_score", "tool_call_valid", "range_valid", "range_overlap",
                           "probe_score", "probe_accuracy", "accuracy", "evidence_survival",
                           "summary_conformance", "recover_success")


def non_inferiority(diff: dict[str, Any], margin: float, min_cases: int = 1) -> str:
    """The verdict on one paired difference (a - b, higher is better) against ``margin``:
    ``non-inferior`` when the interval's low end is above -margin, ``inferior`` when its high
    end is below -margin, else ``inconclusive`` (the cases cannot tell). Fewer than
    ``min_cases`` cases are always ``inconclusive``: a bootstrap over one or two cases gives an
    interval of width zero that says nothing."""
    if int(diff.get("n", min_cases)) < min_cases:
        return "inconclusive"
    lo, hi = diff["ci95"]
    if lo > -margin:
        return "non-inferior"
    if hi < -margin:
        return "inferior"
    return "inconclusive"
