"""From labeled samples to an HF dataset: weights, de-duplication, splits, shards, card.

A sample is ``{"messages", "tools", "meta"}`` (DESIGN.md). Everything here is a pure,
seeded function of its inputs, so the same samples and recipe give byte-identical files:

- **split by session**, never by row: a session's samples all land in one split, chosen by
  a keyed hash of its id; sessions of held-out families go to ``heldout`` and never train;
- **exact duplicates** (same context and target) and **near duplicates** (targets whose
  shingle Jaccard similarity, estimated by MinHash, passes a threshold, within one kind)
  are removed before weighting, and counted;
- **mixture weights** multiply per kind, source, family and window; a row of weight ``w``
  is kept ``floor(w)`` times plus once more with probability ``frac(w)``; **target shares**
  per kind then sample the train rows to the recipe's mix (``sample_to_shares``), and
  share caps sample an evaluation split down so no kind passes its cap (``cap_shares``);
- rows are written as zstd parquet shards with one explicit schema under ``<split>/``.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from plumbing.shards import messages_type

from .recipe import Dedupe, Mixture, Split, Stage

__all__ = ["SPLITS", "WHY_NONE", "apply_mixture", "assign_split", "cap_shares", "dedupe", "normalise_sample",
           "order_by_stage", "sample_to_shares", "token_percentiles", "write_split"]

SPLITS = ("train", "validation", "test", "heldout")
META_KEYS = ("kind", "source", "family", "session_id", "step", "window", "gate", "host", "serving_profile",
             "doctrine_version", "doctrine_sha256", "labeler", "labeler_version", "prompt_mode", "license",
             "stage")


def _unit(*parts: Any) -> float:
    """A deterministic number in [0, 1) from its parts (no Python hash(): it is salted)."""
    h = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return struct.unpack(">Q", h)[0] / 2**64


# --------------------------------------------------------------------------- splits


def assign_split(session_id: str, family: str, cfg: Split) -> str:
    if family in cfg.held_out:
        return "heldout"
    u = _unit("split", cfg.seed, session_id)
    if u < cfg.test_fraction:
        return "test"
    if u < cfg.test_fraction + cfg.validation_fraction:
        return "validation"
    return "train"


# --------------------------------------------------------------------------- dedupe


def _target_text(sample: dict) -> str:
    last = sample["messages"][-1]
    calls = [c["function"]["name"] + c["function"]["arguments"] for c in (last.get("tool_calls") or [])]
    return (last.get("content") or "") + "\n".join(calls)


def _canonical(sample: dict) -> bytes:
    return json.dumps([sample["messages"], sample["tools"]], sort_keys=True, ensure_ascii=False).encode()


_PERMS = 64
_BANDS = 16  # 16 bands x 4 rows: pairs above ~0.7 similarity collide in some band


def _minhash(text: str, k: int = 5) -> tuple[int, ...]:
    words = text.split()
    shingles = {" ".join(words[i:i + k]) for i in range(max(1, len(words) - k + 1))} or {""}
    sig = []
    for p in range(_PERMS):
        sig.append(min(int.from_bytes(hashlib.blake2b(f"{p}:{s}".encode(), digest_size=8).digest(), "big")
                       for s in shingles))
    return tuple(sig)


def dedupe(samples: list[dict], cfg: Dedupe) -> tuple[list[dict], dict[str, int]]:
    """Drop exact then near duplicates (first occurrence wins); return kept and counts."""
    removed: Counter[str] = Counter()
    kept = []
    if cfg.exact:
        seen = set()
        for s in samples:
            key = hashlib.sha256(_canonical(s)).hexdigest()
            if key in seen:
                removed["exact_duplicate"] += 1
                continue
            seen.add(key)
            kept.append(s)
    else:
        kept = list(samples)
    if not cfg.near:
        return kept, dict(removed)
    rows = _PERMS // _BANDS
    out, sigs = [], []
    buckets: dict[tuple, list[int]] = defaultdict(list)
    for s in kept:
        text = _target_text(s)
        if len(text.split()) < 20:  # short targets (refusals, small calls) are not near-deduped
            out.append(s)
            continue
        sig = _minhash(text)
        kind = s["meta"].get("kind")
        cands = {j for b in range(_BANDS) for j in buckets[(kind, b, sig[b * rows:(b + 1) * rows])]}
        if any(sum(a == c for a, c in zip(sig, sigs[j], strict=True)) / _PERMS >= cfg.near_threshold for j in cands):
            removed["near_duplicate"] += 1
            continue
        idx = len(sigs)
        sigs.append(sig)
        for b in range(_BANDS):
            buckets[(kind, b, sig[b * rows:(b + 1) * rows])].append(idx)
        out.append(s)
    return out, dict(removed)


# --------------------------------------------------------------------------- mixture


def apply_mixture(samples: list[dict], mixture: Mixture, seed: int) -> list[dict]:
    out = []
    for i, s in enumerate(samples):
        m = s["meta"]
        w = (mixture.kind.get(str(m.get("kind")), 1.0) * mixture.source.get(str(m.get("source")), 1.0)
             * mixture.family.get(str(m.get("family")), 1.0) * mixture.window.get(str(m.get("window")), 1.0))
        copies = math.floor(w) + (1 if _unit("mix", seed, i, m.get("session_id"), m.get("step")) < w - math.floor(w) else 0)
        out.extend([s] * copies)
    return out


# Why a source may yield no row of a kind (the card and manifest quote it).
WHY_NONE = {
    "nudged_compress": "no gentle nudge listed a consumed range whose boundaries the model can see",
    "refusal": "no gentle nudge was shown",
    "spontaneous_compress": "no step boundary without a nudge had consumed output over the spontaneous threshold",
    "tier2": "no tier-2 nudge found two or more blocks to merge",
    "tier3": "no tier-3 nudge found two or more tier-2 blocks to condense",
    "emergency": "the context never crossed the pressure threshold with a foldable range in view",
    "recovery": "no step used a detail that only a compressed block held",
    "ordinary": "every decision point was labelled with another kind",
}


BINDING_SHARE = 0.05


def sample_to_shares(samples: list[dict], shares: dict[str, float], max_repeat: int,
                     seed: int) -> tuple[list[dict], dict[str, Any]]:
    """``samples`` sampled (seeded, order kept) so each kind reaches its target share.

    Unlisted kinds share the rest in their natural proportion; a listed kind with no row is
    reported under ``missing`` and the others are renormalised. The split size is the
    largest that no kind needs more than ``max_repeat`` copies of its rows for (and at most
    the rows given); a kind whose target is under ``BINDING_SHARE`` does not shrink the
    split: it is capped at ``max_repeat`` copies and falls short. Returns the rows and a
    report: target, available, rows, reached, missing, short.
    """
    by_kind: dict[str, list[int]] = defaultdict(list)
    for i, s in enumerate(samples):
        by_kind[str(s["meta"].get("kind"))].append(i)
    avail = {k: len(v) for k, v in sorted(by_kind.items())}
    missing = sorted(k for k, v in shares.items() if v > 0 and not avail.get(k))
    listed = {k: v for k, v in shares.items() if avail.get(k)}
    rest = [k for k in avail if k not in shares]
    left = max(0.0, 1.0 - sum(listed.values()))
    n_rest = sum(avail[k] for k in rest)
    target = dict(listed)
    for k in rest:
        target[k] = left * avail[k] / n_rest if n_rest else 0.0
    total = sum(target.values())
    target = {k: v / total for k, v in target.items() if v > 0} if total > 0 else {}
    if not target:
        return list(samples), {"target": {}, "available": avail, "rows": avail, "reached": {}, "missing": missing}
    # Kinds with a share of at least BINDING_SHARE set the size; a smaller one that cannot
    # fill its share within max_repeat is capped and reported short instead of shrinking
    # the whole split to a few rows.
    size = min([len(samples)] + [avail[k] * max_repeat / t for k, t in target.items() if t >= BINDING_SHARE])
    want = {k: min(int(round(t * size)), avail[k] * max_repeat) for k, t in target.items()}
    copies = [0] * len(samples)
    for k, idx in by_kind.items():
        n = want.get(k, 0)
        if not idx or n <= 0:
            continue
        order = sorted(idx, key=lambda i: _unit("shares", seed, k, samples[i]["meta"].get("session_id"),
                                                samples[i]["meta"].get("step"), i))
        base, extra = divmod(n, len(idx))
        for j, i in enumerate(order):
            copies[i] = base + (1 if j < extra else 0)
    out = [s for s, c in zip(samples, copies, strict=True) for _ in range(c)]
    got = Counter(str(s["meta"].get("kind")) for s in out)
    reached = {k: round(v / len(out), 3) for k, v in sorted(got.items())} if out else {}
    short = sorted(k for k, t in target.items() if want[k] < int(round(t * size)))
    return out, {"target": {k: round(v, 3) for k, v in sorted(target.items())}, "available": avail,
                 "rows": dict(sorted(got.items())), "reached": reached, "missing": missing, "short": short}


def cap_shares(samples: list[dict], caps: dict[str, float], min_rows: int,
               seed: int) -> tuple[list[dict], dict[str, Any]]:
    """``samples`` sampled down (seeded, order kept, no row repeated or added) so no capped
    kind holds more than its share ``caps[kind]`` of the result.

    Uncapped kinds are kept whole; a capped kind keeps ``min(available, max(min_rows,
    round(cap * size)))`` rows, where ``size`` is the result's own size (the largest that
    satisfies this, found by iterating down from all rows). Meant for evaluation splits:
    they keep every row of the scarce kinds and lose only surplus rows of the plentiful
    ones. Returns the rows and a report: caps, available, rows, reached.
    """
    by_kind: dict[str, list[int]] = defaultdict(list)
    for i, s in enumerate(samples):
        by_kind[str(s["meta"].get("kind"))].append(i)
    avail = {k: len(v) for k, v in sorted(by_kind.items())}
    capped = {k: c for k, c in caps.items() if avail.get(k)}
    free = sum(n for k, n in avail.items() if k not in capped)
    size = len(samples)
    keep: dict[str, int] = {}
    for _ in range(len(samples) + 1):  # size only shrinks, so this ends
        keep = {k: min(avail[k], max(min_rows, int(round(c * size)))) for k, c in capped.items()}
        new = free + sum(keep.values())
        if new >= size:
            break
        size = new
    chosen: set[int] = set()
    for k, idx in by_kind.items():
        if k not in keep:
            chosen.update(idx)
            continue
        order = sorted(idx, key=lambda i: _unit("cap", seed, k, samples[i]["meta"].get("session_id"),
                                                samples[i]["meta"].get("step"), i))
        chosen.update(order[:keep[k]])
    out = [s for i, s in enumerate(samples) if i in chosen]
    got = Counter(str(s["meta"].get("kind")) for s in out)
    reached = {k: round(v / len(out), 3) for k, v in sorted(got.items())} if out else {}
    return out, {"caps": {k: round(v, 3) for k, v in sorted(caps.items())}, "available": avail,
                 "rows": dict(sorted(got.items())), "reached": reached}


def order_by_stage(samples: list[dict], stages: list[Stage]) -> list[dict]:
    """Tag rows with their curriculum stage (the first stage listing the kind) and order by it."""
    if not stages:
        return samples
    rank = {}
    for i, st in enumerate(stages):
        for k in st.kinds:
            rank.setdefault(k, (i, st.name))
    tagged = []
    for s in samples:
        i, name = rank.get(s["meta"].get("kind"), (len(stages), "rest"))
        tagged.append((i, {**s, "meta": {**s["meta"], "stage": name}}))
    return [s for _, s in sorted(tagged, key=lambda t: t[0])]


# --------------------------------------------------------------------------- rows


def normalise_sample(sample: dict) -> dict:
    """One row in the dataset's fixed schema (explicit keys, JSON strings where open-ended)."""
    msgs = []
    for m in sample["messages"]:
        calls = None
        if m.get("tool_calls"):
            calls = [{"id": c.get("id") or "", "type": "function",
                      "function": {"name": c["function"]["name"],
                                   "arguments": c["function"]["arguments"] if isinstance(c["function"]["arguments"], str)
                                   else json.dumps(c["function"]["arguments"], ensure_ascii=False)}}
                     for c in m["tool_calls"]]
        msgs.append({"role": m["role"], "content": m.get("content") or "", "tool_calls": calls,
                     "tool_call_id": m.get("tool_call_id"), "name": m.get("name")})
    meta_in = dict(sample["meta"])
    meta = {k: meta_in.pop(k, None) for k in META_KEYS}
    for k in ("step", "window"):
        meta[k] = int(meta[k]) if meta[k] is not None else None
    for k in META_KEYS:
        if k not in ("step", "window") and meta[k] is not None:
            meta[k] = str(meta[k])
    conf = meta_in.pop("conformance", None) or {}
    meta["conformance_score"] = float(conf["score"]) if "score" in conf else None
    meta["conformance_passed"] = bool(conf["passed"]) if "passed" in conf else None
    meta["extra"] = json.dumps(meta_in, sort_keys=True, ensure_ascii=False)
    return {"messages": msgs, "tools": json.dumps(sample["tools"], sort_keys=True, ensure_ascii=False),
            "meta": meta}


def _schema():
    import pyarrow as pa

    meta_fields = [(k, pa.int64() if k in ("step", "window") else pa.string()) for k in META_KEYS]
    meta = pa.struct(meta_fields + [("conformance_score", pa.float64()), ("conformance_passed", pa.bool_()),
                                    ("extra", pa.string())])
    return pa.schema([("messages", messages_type()), ("tools", pa.string()), ("meta", meta)])


def write_split(rows: list[dict], out_dir: Path, shard_rows: int) -> list[Path]:
    """Write ``rows`` as ``out_dir/shard-NNNNN.parquet`` files (atomic, deterministic); shards
    an earlier build left there that this one did not write are removed."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from plumbing.runs import RunFolderError, atomic_write

    if out_dir.is_symlink():  # never follow a link out of the run (its stale shards would be deleted there)
        raise RunFolderError(f"{out_dir} is a symbolic link; refusing to write or clean shards through it")
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    schema = _schema()
    for n, start in enumerate(range(0, max(len(rows), 1), shard_rows)):
        chunk = rows[start:start + shard_rows]
        if not chunk:
            break
        table = pa.Table.from_pylist(chunk, schema=schema)
        buf = io.BytesIO()
        pq.write_table(table, buf, compression="zstd")
        paths.append(atomic_write(out_dir / f"shard-{n:05d}.parquet", buf.getvalue()))
    for stale in set(out_dir.glob("shard-*.parquet")) - set(paths):  # an earlier, larger build's
        stale.unlink()
    return paths


def token_percentiles(lengths: Iterable[int]) -> dict[str, int]:
    xs = sorted(lengths)
    if not xs:
        return {}
    pick = lambda q: xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))]  # noqa: E731
    return {"min": xs[0], "p50": pick(0.5), "p90": pick(0.9), "p99": pick(0.99), "max": xs[-1]}
