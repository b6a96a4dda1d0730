"""Per-case metrics and their aggregation per arm (and per kind for decisions)."""

from __future__ import annotations

import functools
import math
import re
from collections import defaultdict
from typing import Any

__all__ = ["aggregate", "arm_counts", "arm_methods", "arm_sessions", "balanced_accuracy", "balanced_ci", "by_kind",
           "cluster_bootstrap", "cluster_mean_ci", "is_clustered", "mean", "mean_ci", "metric_scale",
           "non_inferiority", "paired_balanced", "paired_ci", "range_overlap", "ref_interval", "scripted_metrics",
           "tango_ci", "wilson_ci"]


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
          "recoveries", "recovery_refetches",
          "kernel_errors", "kernel_warnings", "recover_errors", "window_overflows", "prefix_cache_hits", "prefix_cache_queries", "cases",
          "questions", "correct", "summaries", "probe_items", "probe_items_correct", "deep_items", "deep_items_correct",
          "compactions_before_questions", "decision_candidates", "values_copied", "values_not_in_context"}
# Means that are sizes (never negative), besides the sums above and every ``*_tokens`` metric.
COUNT_METRICS = {"peak_context", "mean_context", "latency_s"}


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
# Which interval a figure gets (see eval/README.md, "Intervals"):
# - a rate (values 0/1) or a score bounded in [0, 1]: Wilson's score interval (for a bounded
#   score, Wilson on its mean: a score in [0, 1] has variance at most m(1 - m), so the
#   interval is conservative); it never has width zero, even at n = 1 or a 0/8 rate;
# - a paired difference of rates: Tango's score interval (from the discordant pairs);
# - a paired difference of bounded scores at n < BOOTSTRAP_MIN_N: Wilson on (d + 1) / 2;
# - any other mean: percentile bootstrap at n >= BOOTSTRAP_MIN_N, Student's t below it;
# - balanced accuracy and its paired difference: the per-kind intervals above combined by
#   MOVER (Zou & Donner), so a kind with two cases widens the interval as it should.
# tests/eval/test_interval_coverage.py measures their coverage at n = 4, 8, 16, 32.
# Clustered cases (more than one case of a session: each result carries its session id in
# meta) are not independent, and every figure above would be too narrow. There the interval
# is the ``cluster bootstrap``: sessions are resampled whole (the statistic recomputed from
# the cases of the drawn sessions), and the interval is widened to hold the case-level one
# above, so it is never narrower than that (a percentile bootstrap over few sessions
# under-covers, and a session-level resample of 24/24 would otherwise give width zero).
BOOTSTRAP_SAMPLES = 2000
BOOTSTRAP_MIN_N = 30  # under this many cases a percentile bootstrap under-covers (the test shows it)
Z95 = 1.959963984540054
PAIRS = (("distilled", "doctrine"), ("distilled", "base_slim"), ("doctrine", "base_slim"))
# Means over cases that live in [0, 1] (rates and graded scores); every bool metric is one too.
UNIT_METRICS = {"kind_correct", "compress_success", "recover_success", "tool_call_valid", "range_valid",
                "range_overlap", "conformance_score", "conformance_passed", "probe_accuracy", "probe_score",
                "accuracy", "evidence_survival", "summary_conformance", "deep_items_correct", "compacted",
                "forced_compaction", "prefix_cache_hit_rate", "malformed_share", "decision_win",
                "compress_chosen", "compress_parsed", "compress_accepted", "ranges_visible", "summary_score",
                "exact_values_kept", "balanced_acc", "nearest_train_sim", "values_not_in_context_share",
                "recover_chosen", "false_recovery"}
# 97.5 % quantiles of Student's t for 1..29 degrees of freedom (no scipy in the venv).
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045)


def _numeric(v: Any) -> float | None:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)) and math.isfinite(v):
        return float(v)
    return None


def mean_metrics(rows: list[dict[str, Any]]) -> list[str]:
    """The metrics whose aggregate is a mean over cases (the ones an interval is for)."""
    keys = {k for r in rows for k, v in r.items() if _numeric(v) is not None}
    return sorted(k for k in keys if k not in SUMMED and not k.startswith("peak"))


def metric_scale(name: str, values: list[Any]) -> str:
    """``binary`` (0/1 values of a rate), ``unit`` (a score in [0, 1]), ``count`` (a count or
    size that cannot be negative: its interval stops at 0) or ``real``."""
    nums = [_numeric(v) for v in values]
    nums = [v for v in nums if v is not None]
    unit = (name in UNIT_METRICS or all(isinstance(v, bool) for v in values if v is not None)) \
        and all(0.0 <= v <= 1.0 for v in nums)
    if not unit:
        counted = name in SUMMED or name in COUNT_METRICS or name.endswith("_tokens")
        return "count" if counted and nums and all(v >= 0 for v in nums) else "real"
    return "binary" if all(v in (0.0, 1.0) for v in nums) else "unit"


def wilson_ci(successes: float, n: int, z: float = Z95, *, corrected: bool = True) -> list[float]:
    """Wilson's score interval of a rate (``successes`` may be a sum of scores in [0, 1]).
    ``corrected`` (the default) is Wilson's interval with the continuity correction
    (Newcombe 1998, method 4): at n <= 8 the plain one covers a true rate near 0 or 1 only
    ~85 % of the time; this one at least ~96 % (tests/eval/test_interval_coverage.py)."""
    if n <= 0:
        return []
    p = min(1.0, max(0.0, successes / n))
    z2 = z * z
    if not corrected:
        centre = (p + z2 / (2 * n)) / (1 + z2 / n)
        half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
        return [max(0.0, centre - half), min(1.0, centre + half)]
    lo = 0.0 if p == 0 else (2 * n * p + z2 - 1 - z * math.sqrt(max(0.0, z2 - 2 - 1 / n + 4 * p * (n * (1 - p) + 1)))) / (2 * (n + z2))
    hi = 1.0 if p == 1 else (2 * n * p + z2 + 1 + z * math.sqrt(max(0.0, z2 + 2 - 1 / n + 4 * p * (n * (1 - p) - 1)))) / (2 * (n + z2))
    return [max(0.0, lo), min(1.0, hi)]


def t_ci(values: list[float]) -> list[float]:
    """Student's t interval of the mean (small samples of an unbounded metric); none (``[]``)
    from a single value, which says nothing about its spread."""
    n = len(values)
    if n < 2:
        return []
    m = sum(values) / n
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1))
    q = _T975[n - 2] if n - 1 <= len(_T975) else Z95
    return [m - q * sd / math.sqrt(n), m + q * sd / math.sqrt(n)]


def bootstrap_ci(values: list[float], *, seed: int = 0, samples: int = BOOTSTRAP_SAMPLES) -> list[float]:
    """95 % percentile-bootstrap interval of the mean (seeded; [v, v] for one value). Only
    :func:`mean_ci` decides when it is fit to use (continuous values, n >= BOOTSTRAP_MIN_N)."""
    import numpy as np

    x = np.asarray(values, dtype=float)
    if len(x) == 0:
        return []
    if len(x) == 1:
        return [float(x[0]), float(x[0])]
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(samples, len(x)))].mean(axis=1)
    return [float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))]


CLUSTER_METHOD = "cluster bootstrap"


def is_clustered(clusters: list[Any] | None) -> bool:
    """Some session supplies more than one case (``clusters``: each case's session id)."""
    return clusters is not None and len(set(clusters)) < len(clusters)


def _hull(a: list[float], b: list[float]) -> list[float]:
    if not a or not b:
        return a or b
    return [min(a[0], b[0]), max(a[1], b[1])]


def cluster_bootstrap(groups: list[Any], statistic: Any, *, seed: int = 0,
                      samples: int = BOOTSTRAP_SAMPLES) -> list[float]:
    """95 % percentile interval of ``statistic`` over sessions resampled with replacement:
    ``groups`` holds one array per session (rows = that session's cases, stacked per session
    as numpy arrays of equal width), ``statistic(draw)`` maps the (samples, sessions, ...)
    sums drawn to one value per sample (seeded)."""
    import numpy as np

    k = len(groups)
    if k == 0:
        return []
    table = np.asarray(groups, dtype=float)
    rng = np.random.default_rng(seed)
    drawn = table[rng.integers(0, k, size=(samples, k))].sum(axis=1)
    stats = np.asarray(statistic(drawn), dtype=float)
    stats = stats[np.isfinite(stats)]
    if stats.size == 0:
        return []
    return [float(np.percentile(stats, 2.5)), float(np.percentile(stats, 97.5))]


def _per_session(values: list[float], clusters: list[Any]) -> list[list[float]]:
    """[sum, count] of ``values`` per session, in first-seen order."""
    sums: dict[Any, list[float]] = {}
    for v, c in zip(values, clusters, strict=True):
        cell = sums.setdefault(c, [0.0, 0.0])
        cell[0] += v
        cell[1] += 1
    return list(sums.values())


def cluster_mean_ci(values: list[float], clusters: list[Any], *, seed: int = 0,
                    samples: int = BOOTSTRAP_SAMPLES) -> list[float]:
    """The session-resampled percentile interval of the mean over cases (not widened)."""
    return cluster_bootstrap(_per_session(values, clusters), lambda d: d[..., 0] / d[..., 1], seed=seed,
                             samples=samples)


def interval_method(scale: str, n: int, paired: bool = False, clustered: bool = False) -> str:
    """The name of the interval :func:`mean_ci` / :func:`paired_ci` use for this scale and n
    (``clustered``: some session has more than one of the cases)."""
    if clustered:
        return CLUSTER_METHOD
    if scale == "binary":
        return "tango" if paired else "wilson"
    if n >= BOOTSTRAP_MIN_N:
        return "bootstrap"
    return "wilson" if scale == "unit" else "t"


def mean_ci(values: list[float], scale: str = "real", *, seed: int = 0,
            clusters: list[Any] | None = None) -> list[float]:
    """95 % interval of the mean of ``values`` by the small-n rule (see the module notes);
    with ``clusters`` (each value's session) that repeat, the cluster bootstrap."""
    n = len(values)
    if n == 0:
        return []
    if is_clustered(clusters):
        lo_hi = _hull(cluster_mean_ci(values, clusters, seed=seed), mean_ci(values, scale, seed=seed))
        return [max(0.0, lo_hi[0]), lo_hi[1]] if lo_hi and scale == "count" else lo_hi
    method = interval_method(scale, n)
    if method == "wilson":
        return wilson_ci(sum(values), n)
    if method == "bootstrap":
        return bootstrap_ci(values, seed=seed)
    ci = t_ci(values)
    return [max(0.0, ci[0]), ci[1]] if ci and scale == "count" else ci  # a mean of counts is never below 0


def _tango_z(b: int, c: int, n: int, d: float) -> float:
    """Tango's score statistic for a paired difference d = p(1,0) - p(0,1)."""
    # Constrained ML estimate of p(0,1) given the difference d (root of a quadratic).
    big = b * (1 - d) + c * (1 - 3 * d) - 2 * (n - b - c) * d
    q = (big + math.sqrt(max(0.0, big * big + 8 * n * c * d * (1 - d)))) / (4 * n)
    var = n * (2 * q + d * (1 - d))
    num = b - c - n * d
    if var <= 1e-15:
        return math.copysign(math.inf, num) if num else 0.0
    return num / math.sqrt(var)


@functools.lru_cache(maxsize=65536)
def tango_ci(b: int, c: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Tango's (1998) score interval of a difference of paired rates, from ``b`` pairs where
    only a succeeded, ``c`` where only b did, of ``n``. Width zero never: with no discordant
    pair at all it is about +-z^2 / (n + z^2)."""
    if n <= 0:
        return (-1.0, 1.0)
    d0 = (b - c) / n

    def root(lo: float, hi: float, target: float) -> float:
        # _tango_z decreases in d; find d in [lo, hi] with z(d) = target
        for _ in range(60):
            mid = (lo + hi) / 2
            if _tango_z(b, c, n, mid) > target:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2

    low = -1.0 if _tango_z(b, c, n, -1 + 1e-12) <= z else root(-1.0, d0, z)
    high = 1.0 if _tango_z(b, c, n, 1 - 1e-12) >= -z else root(d0, 1.0, -z)
    return (max(-1.0, low), min(1.0, high))


def newcombe_paired_ci(a: int, b: int, c: int, d: int, z: float = Z95) -> tuple[float, float]:
    """Newcombe's (1998) method 10 for paired rates, cells a = (1,1), b = (1,0), c = (0,1),
    d = (0,0), with the continuity-corrected correlation. Kept for the coverage test: Tango's
    interval is the one the report uses."""
    n = a + b + c + d
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson_ci(a + b, n, z)
    l2, u2 = wilson_ci(a + c, n, z)
    marg = (a + b) * (c + d) * (a + c) * (b + d)
    num = a * d - b * c
    num = max(num - n / 2, 0.0) if num > 0 else num
    phi = num / math.sqrt(marg) if marg else 0.0
    dl = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    du = math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return (max(-1.0, p1 - p2 - dl), min(1.0, p1 - p2 + du))


def paired_ci(xs: list[float], ys: list[float], scale: str = "real", *, seed: int = 0,
              clusters: list[Any] | None = None) -> list[float]:
    """95 % interval of mean(x - y) over aligned pairs, by the small-n rule; with
    ``clusters`` (each pair's session) that repeat, the cluster bootstrap of the differences."""
    n = len(xs)
    if n == 0:
        return []
    if is_clustered(clusters):
        diffs = [x - y for x, y in zip(xs, ys, strict=True)]
        return _hull(cluster_mean_ci(diffs, clusters, seed=seed), paired_ci(xs, ys, scale, seed=seed))
    method = interval_method(scale, n, paired=True)
    if method == "tango":
        b = sum(1 for x, y in zip(xs, ys, strict=True) if x > y)
        c = sum(1 for x, y in zip(xs, ys, strict=True) if x < y)
        return list(tango_ci(b, c, n))
    diffs = [x - y for x, y in zip(xs, ys, strict=True)]
    if method == "bootstrap":
        return bootstrap_ci(diffs, seed=seed)
    if method == "wilson":  # a difference of scores in [0, 1], mapped onto [0, 1]
        lo, hi = wilson_ci(sum((v + 1) / 2 for v in diffs), n)
        return [2 * lo - 1, 2 * hi - 1]
    return t_ci(diffs)


def arm_intervals(rows: list[dict[str, Any]], *, seed: int = 0,
                  clusters: list[Any] | None = None) -> dict[str, list[float]]:
    """``{metric: [low, high]}`` over the cases of one arm, for every mean-type metric
    (``clusters``: each row's session, for the cluster bootstrap where sessions repeat)."""
    out = {}
    for k in mean_metrics(rows):
        idx = [i for i, r in enumerate(rows) if _numeric(r.get(k)) is not None]
        raw = [rows[i].get(k) for i in idx]
        if raw:
            out[k] = mean_ci([_numeric(v) for v in raw], metric_scale(k, raw), seed=seed,
                             clusters=[clusters[i] for i in idx] if clusters is not None else None)
    return out


def arm_counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    """``{metric: n}``: how many cases each interval of :func:`arm_intervals` is over."""
    return {k: sum(1 for r in rows if _numeric(r.get(k)) is not None) for k in mean_metrics(rows)}


def arm_sessions(rows: list[dict[str, Any]], clusters: list[Any]) -> dict[str, int]:
    """``{metric: sessions}``: how many sessions the cases of each interval come from."""
    return {k: len({c for r, c in zip(rows, clusters, strict=True) if _numeric(r.get(k)) is not None})
            for k in mean_metrics(rows)}


def arm_methods(rows: list[dict[str, Any]], clusters: list[Any] | None = None) -> dict[str, str]:
    """``{metric: method}``: the interval each figure of :func:`arm_intervals` got."""
    out = {}
    for k in mean_metrics(rows):
        idx = [i for i, r in enumerate(rows) if _numeric(r.get(k)) is not None]
        raw = [rows[i].get(k) for i in idx]
        if raw:
            out[k] = interval_method(metric_scale(k, raw), len(raw), clustered=is_clustered(
                [clusters[i] for i in idx] if clusters is not None else None))
    return out


def paired_comparison(a: dict[Any, dict[str, Any]], b: dict[Any, dict[str, Any]], *,
                      seed: int = 0, clusters: dict[Any, Any] | None = None) -> dict[str, dict[str, Any]]:
    """``{metric: {"diff", "ci95", "n", "method", "n_by_kind"}}``: mean of a - b over the
    cases both arms ran (keyed alike, e.g. by (case_id, seed)), with its 95 % interval by the
    small-n rule; ``n_by_kind`` counts the pairs per a's ``label_kind`` where rows have one.
    With ``clusters`` (case key -> session) each difference also has ``sessions``, and where
    a session has more than one pair its interval is the cluster bootstrap."""
    keys = sorted(set(a) & set(b), key=str)
    out: dict[str, dict[str, Any]] = {}
    if not keys:
        return out
    for k in mean_metrics([a[c] for c in keys] + [b[c] for c in keys]):
        xs, ys, raw, kinds, sess = [], [], [], defaultdict(int), []
        for c in keys:
            x, y = _numeric(a[c].get(k)), _numeric(b[c].get(k))
            if x is not None and y is not None:
                xs.append(x)
                ys.append(y)
                raw += [a[c].get(k), b[c].get(k)]
                sess.append(clusters.get(c, c) if clusters is not None else c)
                if "label_kind" in a[c]:
                    kinds[str(a[c]["label_kind"])] += 1
        if xs:
            scale = metric_scale(k, raw)
            cl = sess if clusters is not None else None
            d = {"diff": sum(xs) / len(xs) - sum(ys) / len(ys),
                 "ci95": paired_ci(xs, ys, scale, seed=seed, clusters=cl), "n": len(xs),
                 "method": interval_method(scale, len(xs), paired=True, clustered=is_clustered(cl))}
            if clusters is not None:
                d["sessions"] = len(set(sess))
            if kinds:
                d["n_by_kind"] = dict(sorted(kinds.items()))
            out[k] = d
    return out


def _by_label_kind(rows: list[dict[str, Any]]) -> dict[str, list[float]]:
    per: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        v = _numeric(r.get("kind_correct"))
        if v is not None:
            per[str(r.get("label_kind"))].append(v)
    return dict(sorted(per.items()))


def balanced_accuracy(rows: list[dict[str, Any]]) -> float | None:
    """Mean over label kinds of the share of rows with ``kind_correct``; None without any."""
    per = _by_label_kind(rows)
    return mean([mean(v) for v in per.values()]) if per else None


def _mover(point: float, parts: list[tuple[float, float, float]], lo_bound: float, hi_bound: float) -> list[float]:
    """MOVER interval of the mean of K estimates, each (estimate, low, high)."""
    w = 1 / len(parts)
    down = math.sqrt(sum((w * (e - lo)) ** 2 for e, lo, _ in parts))
    up = math.sqrt(sum((w * (hi - e)) ** 2 for e, _, hi in parts))
    return [max(lo_bound, point - down), min(hi_bound, point + up)]


def _balanced_bootstrap(cells: list[tuple[Any, str, float]], *, seed: int, samples: int) -> list[float]:
    """Cluster bootstrap of a balanced mean: ``cells`` are (session, kind, value); each draw
    of sessions gives, per kind, the mean of its drawn values, and the mean over the kinds
    the draw holds."""
    import numpy as np

    kinds = sorted({k for _, k, _ in cells})
    col = {k: i for i, k in enumerate(kinds)}
    per: dict[Any, np.ndarray] = {}
    for s, k, v in cells:
        cell = per.setdefault(s, np.zeros((2, len(kinds))))
        cell[0, col[k]] += v
        cell[1, col[k]] += 1

    def stat(d: Any) -> Any:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.nanmean(d[:, 0, :] / d[:, 1, :], axis=1)

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a draw without some kind leaves it out
        return cluster_bootstrap(list(per.values()), stat, seed=seed, samples=samples)


def balanced_ci(rows: list[dict[str, Any]], *, seed: int = 0, samples: int = BOOTSTRAP_SAMPLES,
                clusters: list[Any] | None = None) -> list[float]:
    """95 % interval of :func:`balanced_accuracy`: each kind's Wilson interval, combined by
    MOVER. Two cases of a kind leave that kind's rate wide open, and the interval says so.
    With ``clusters`` (each row's session) that repeat: the cluster bootstrap, widened to
    hold the MOVER interval."""
    per = _by_label_kind(rows)
    if not per:
        return []
    parts = [(mean(v), *wilson_ci(sum(v), len(v))) for v in per.values()]
    mover = _mover(mean([p[0] for p in parts]), parts, 0.0, 1.0)
    if clusters is None:
        return mover
    cells = [(c, str(r.get("label_kind")), _numeric(r.get("kind_correct")))
             for r, c in zip(rows, clusters, strict=True) if _numeric(r.get("kind_correct")) is not None]
    if not is_clustered([c for c, _, _ in cells]):
        return mover
    return _hull(_balanced_bootstrap(cells, seed=seed, samples=samples), mover)


def paired_balanced(a: dict[Any, dict[str, Any]], b: dict[Any, dict[str, Any]], *, seed: int = 0,
                    samples: int = BOOTSTRAP_SAMPLES, clusters: dict[Any, Any] | None = None) -> dict[str, Any] | None:
    """``{"diff", "ci95", "n", "method", "n_by_kind"}`` of balanced accuracy a - b over the
    shared cases (kinds by a's label kind): each kind's paired difference with Tango's
    interval, combined by MOVER; None without cases. With ``clusters`` (case key -> session)
    it has ``sessions`` too, and where a session has more than one pair the interval is the
    cluster bootstrap of the difference, widened to hold the MOVER one."""
    keys = [k for k in sorted(set(a) & set(b), key=str)
            if _numeric(a[k].get("kind_correct")) is not None and _numeric(b[k].get("kind_correct")) is not None]
    if not keys:
        return None
    per: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for k in keys:
        per[str(a[k].get("label_kind"))].append((_numeric(a[k]["kind_correct"]), _numeric(b[k]["kind_correct"])))
    parts = []
    for pairs in per.values():
        n = len(pairs)
        bb = sum(1 for x, y in pairs if x > y)
        cc = sum(1 for x, y in pairs if x < y)
        parts.append(((bb - cc) / n, *tango_ci(bb, cc, n)))
    diff = mean([p[0] for p in parts])
    out = {"diff": diff, "ci95": _mover(diff, parts, -1.0, 1.0), "n": len(keys), "method": "tango+mover",
           "n_by_kind": {k: len(v) for k, v in sorted(per.items())}}
    if clusters is not None:
        sess = [clusters.get(k, k) for k in keys]
        out["sessions"] = len(set(sess))
        if is_clustered(sess):
            cells = [(s, str(a[k].get("label_kind")), _numeric(a[k]["kind_correct"]) - _numeric(b[k]["kind_correct"]))
                     for s, k in zip(sess, keys, strict=True)]
            out["ci95"] = _hull(_balanced_bootstrap(cells, seed=seed, samples=samples), out["ci95"])
            out["method"] = CLUSTER_METHOD
    return out


# Metrics a non-inferiority verdict may be asked for: rates where higher is better.
NON_INFERIORITY_METRICS = ("balanced_acc", "kind_correct", "compress_success", "conformance_passed",
                           "conformance_score", "tool_call_valid", "range_valid", "range_overlap",
                           "probe_score", "probe_accuracy", "accuracy", "evidence_survival",
                           "summary_conformance", "recover_success", "recover_chosen", "decision_win", "decision_margin",
                           "decision_logprob")


def non_inferiority(diff: dict[str, Any], margin: float, min_cases: int = 1, min_per_kind: int = 1) -> str:
    """The verdict on one paired difference (a - b, higher is better) against ``margin``:
    ``non-inferior`` when the interval's low end is above -margin, ``inferior`` when its high
    end is below -margin, else ``inconclusive`` (the cases cannot tell). Fewer than
    ``min_cases`` cases, or fewer than ``min_per_kind`` in some decision kind the difference
    is over (``n_by_kind``), are always ``inconclusive``: a few cases of a kind cannot speak
    for it, whatever interval they give."""
    if int(diff.get("n", min_cases)) < min_cases:
        return "inconclusive"
    if any(int(v) < min_per_kind for v in (diff.get("n_by_kind") or {}).values()):
        return "inconclusive"
    if len(diff.get("ci95") or []) != 2:  # no interval (one case of an unbounded metric)
        return "inconclusive"
    lo, hi = diff["ci95"]
    if lo > -margin:
        return "non-inferior"
    if hi < -margin:
        return "inferior"
    return "inconclusive"
