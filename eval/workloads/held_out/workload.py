"""Held-out decisions: one model call per curriculum row, scored against the row's label.

Rows are ``{messages, tools, meta}`` as data_gen writes them, read from
``<data_dir>/<split>/*.parquet`` (or ``*.jsonl``); the last message is the target and
``meta.kind`` its kind. The ``doctrine`` arm sees the row re-rendered in doctrine mode
(system prompt, nudge and tool descriptions rebuilt from the doctrine); ``base_slim`` and
``distilled`` see it in distilled mode (rebuilt too when the row was rendered otherwise).

Scores per row: decision kind (compress / refuse / recover / ordinary) against the label,
tool-call validity, overlap with the label's ranges, prompt tokens (total and spent on
doctrine text) and, for a row that records its kernel input, what the kernel did with the
reply (``eval.workloads.held_out.applied``): range validity, kernel errors and warnings, the
conformance (``doctrine.conform``) of each block's summary against what the kernel folded,
and whether a recovery reached a needed block. Older rows resolve ranges from their refs. The oracle backend answers with the
label itself: it is the upper reference and checks the scoring end to end.

A reply that writes compress summaries also gets ``nearest_train_sim``, ``values_copied`` and
``values_not_in_context`` (``eval.workloads.held_out.recall``): did it read or recall?

Compress-labelled rows also get the graded steps to a successful fold (``graded_compress``):
``compress_chosen``, ``compress_parsed``, ``compress_accepted``, ``ranges_visible``,
``summary_score``, ``exact_values_kept``, then ``compress_success``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import Field

from data_gen.memorisation import TrainTargets
from doctrine.conform import check_summary, extract_keep_items, normalise_messages
from doctrine.kernel.chat import flatten
from doctrine.kernel.compress_args import parse_compress_args
from doctrine.kernel.profile import resolve_profile
from doctrine.render.request import request_frame
from doctrine.render.snapshot import rebuild
from doctrine.replies import reply_form
from eval.arms import ARM_INFO
from eval.metrics import range_overlap, ref_interval
from eval.workloads.base import Case, RunContext, call_record, safe_complete
from eval.workloads.held_out.applied import apply_compress, apply_recovery
from eval.workloads.held_out.decision_scoring import score_decision
from eval.workloads.held_out.recall import recall_scores, train_targets
from eval.workloads.held_out.rows import load_rows
from eval.workloads.nudges import rerender_context
from plumbing.chat_backend import Request, reparsed
from plumbing.recipe_loader import BaseConfig
from plumbing.tool_format import format_assistant_text

ARMS_SUPPORTED = ("doctrine", "base_slim", "distilled")
KINDS = ("compress", "refuse", "recover", "ordinary")
KIND_OF_LABEL = {"nudged_compress": "compress", "spontaneous_compress": "compress", "tier2": "compress",
                 "tier3": "compress", "emergency": "compress", "compress": "compress",
                 "refusal": "refuse", "refuse": "refuse", "recovery": "recover", "recover": "recover",
                 "ordinary": "ordinary", "counter_recovery": "ordinary"}
# The pick kind of a counter-lesson (data_gen meta.counter_recovery): an ordinary decision
# where the step's detail is still in view, so a recovery call there is a false recovery.
COUNTER_RECOVERY = "counter_recovery"
KERNEL_TOOL_NAMES = {"compress", "decompress", "search_context", "acp_status"}
_TAG_REF = re.compile(r">(m\d{5})</acp>")


def _spread(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` reordered so that picks spread over sessions and families: every session's
    first row (one family after the other: the first session of each family, then the second
    of each...), then every session's second row, and so on; file order within a round. A row
    without a session id is its own session."""
    seen_in: dict[Any, int] = {}
    fam_sessions: dict[Any, list[Any]] = {}
    keyed = []
    for i, r in enumerate(rows):
        meta = r["meta"]
        session = _session_of(r, i)
        family = meta.get("family")
        sessions = fam_sessions.setdefault(family, [])
        if session not in sessions:
            sessions.append(session)
        keyed.append(((seen_in.get(session, 0), sessions.index(session), i), r))
        seen_in[session] = seen_in.get(session, 0) + 1
    return [r for _, r in sorted(keyed, key=lambda kv: kv[0])]


def _session_of(row: dict[str, Any], i: int) -> Any:
    return row["meta"].get("session_id") or ("row", i)


def cap_per_session(pool: list[tuple[int, dict[str, Any]]], per_session: int) -> list[tuple[int, dict[str, Any]]]:
    """``pool`` (index, row) without the rows past the first ``per_session`` of each
    (session, kind): decisions of one session are not independent, so a few long sessions
    must not supply most of the cases."""
    taken: dict[tuple[Any, str], int] = {}
    out = []
    for i, r in pool:
        key = (_session_of(r, i), str(r["meta"].get("kind")))
        if taken.get(key, 0) < per_session:
            taken[key] = taken.get(key, 0) + 1
            out.append((i, r))
    return out


def select_rows(rows: list[dict[str, Any]], *, kinds: list[str] | None = None, per_kind: int | None = None,
                windows: list[int] | None = None, limit: int | None = None,
                per_session: int | None = None) -> list[dict[str, Any]]:
    """Rows whose ``meta.kind`` is in ``kinds`` and ``meta.window`` in ``windows`` (either
    unset: any), at most ``per_session`` of each kind from one session (file order within
    it), at most ``per_kind`` of each kind, at most ``limit`` in all. With ``per_kind`` the
    picks of a kind spread over sessions and families (:func:`_spread`), so n cases are as
    many sessions as the split has, not a few sessions' consecutive decision points; without
    it, file order. ``per_kind: 1`` over the kinds gives a small eval that still sees each
    decision."""
    wanted = set(kinds) if kinds else None
    sizes = {int(w) for w in windows} if windows else None
    if wanted is not None and COUNTER_RECOVERY in wanted:
        # counter-lessons (ordinary rows whose detail is still in view) are asked as a kind of
        # their own, so a recovery eval holds both sides; ``ordinary`` then means the others
        rows = [dict(r, meta={**r["meta"], "kind": COUNTER_RECOVERY}) if r["meta"].get("counter_recovery")
                and r["meta"].get("kind") == "ordinary" else r for r in rows]
    pool = [(i, r) for i, r in enumerate(rows) if (wanted is None or str(r["meta"].get("kind")) in wanted)
            and (sizes is None or r["meta"].get("window") in sizes)]
    if per_session is not None:
        pool = cap_per_session(pool, int(per_session))
    if per_kind is not None:
        by_kind: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        for i, r in pool:
            by_kind.setdefault(str(r["meta"].get("kind")), []).append((i, r))
        index = {id(r): i for i, r in pool}
        picked = [r for v in by_kind.values() for r in _spread([r for _, r in v])[:int(per_kind)]]
        pool = sorted(((index[id(r)], r) for r in picked), key=lambda ir: ir[0])
    out = [r for _, r in pool]
    if limit is not None:
        out = out[:int(limit)]
    if kinds:  # order by the recipe's kind list, so the cases read in that order
        rank = {k: i for i, k in enumerate(kinds)}
        out.sort(key=lambda r: rank[str(r["meta"].get("kind"))])
    return out


def classify(message: dict[str, Any], nudge_present: bool) -> str:
    """The decision kind of an assistant message: compress, recover, refuse (a decline, or
    acting on the task, under a nudge), ordinary (acting or answering with no nudge) or
    malformed."""
    form = reply_form(message, nudge_present)
    if form in ("compress", "recover", "malformed"):
        return form
    return "refuse" if nudge_present else "ordinary"


def decision_correct(label_kind: str, reply: dict[str, Any], target: dict[str, Any], nudge_present: bool) -> bool:
    """Whether the reply takes the labelled decision, as a reader would judge it: a refusal
    is a decline or carrying on with the task; an ordinary row needs the label's own form
    (a task action where the label acts, a plain answer where it answers), so a plain reply
    is not a free pass."""
    form = reply_form(reply, nudge_present)
    if label_kind == "refuse":
        return form in ("decline", "act")
    if label_kind == "ordinary":
        return form == reply_form(target, nudge_present)
    if label_kind == "recover" and reply_form(target, nudge_present) != "recover":
        # The turn after a restore: carry on with the restored detail, in the label's form.
        return form == reply_form(target, nudge_present)
    return form == label_kind


def compress_ranges(message: dict[str, Any]) -> tuple[list[tuple[str, str, str]], list[str]]:
    """[(start, end, summary)] of every compress call in ``message``, and argument errors."""
    out, errors = [], []
    for c in message.get("tool_calls") or []:
        fn = c.get("function") or {}
        if fn.get("name") != "compress":
            continue
        parsed = parse_compress_args(fn.get("arguments") or "")
        errors.extend(parsed.errors)
        out.extend((r.start_ref, r.end_ref, r.summary) for r in parsed.ranges)
    return out, errors


def _norm_ref(ref: str) -> str:
    iv = ref_interval(ref, ref)
    if iv is None:
        return ref.strip()
    return f"m{iv[1]:05d}" if iv[0] == "m" else f"b{iv[1]}"


def _source_for(context: list[dict[str, Any]], start: str, end: str) -> list[dict[str, Any]]:
    """The context messages a range covers: from the message tagged ``start`` up to (and
    with the untagged tool messages after) the one tagged ``end``; the whole consumed
    context when the tags are not there (text-only tags leave tool results untagged)."""
    tagged = {}
    for i, m in enumerate(context):
        mm = _TAG_REF.search(m.get("content") or "")
        if mm:
            tagged.setdefault(mm.group(1), i)
    body = [m for m in context if m.get("role") != "system"]
    a, b = tagged.get(_norm_ref(start)), tagged.get(_norm_ref(end))
    if a is None or b is None or a > b:
        return body
    j = b + 1
    while j < len(context) and context[j].get("role") == "tool":
        j += 1
    return context[a:j]


def source_by_refs(context: list[dict[str, Any]], view_refs: Any, start: str, end: str) -> list[dict[str, Any]] | None:
    """The messages a range folds, resolved the way the kernel resolves it, from the row's
    ``view_refs`` (every shown message's ref and block ids, recorded by data_gen).

    Returns flat messages with the ref as id (block summaries as ``bN`` messages for a
    tier-2/3 range), or None when the row has no usable ``view_refs`` or the range names an
    id that is not in the view, or runs backwards (the kernel would reject it).
    """
    body = [m for m in context if m.get("role") != "system"]
    if not isinstance(view_refs, list):
        return None
    try:
        flat = normalise_messages(body)
    except ValueError:
        return None
    if len(flat) != len(view_refs):
        return None
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for i, ids in enumerate(view_refs):
        for x in ids or []:
            first.setdefault(str(x), i)
            last[str(x)] = i
    a, b = first.get(_norm_ref(start)), last.get(_norm_ref(end))
    if a is None or b is None or a > b:
        return None
    calls = {m.tool_call_id for m in flat[a:b + 1] if m.kind == "tool-call" and m.tool_call_id}
    while b + 1 < len(flat) and flat[b + 1].kind == "tool-result" and flat[b + 1].tool_call_id in calls:
        b += 1  # a call and its result fold together
    out: list[dict[str, Any]] = []
    blocks = ref_interval(start, end) is not None and _norm_ref(start).startswith("b")
    for m, ids in zip(flat[a:b + 1], view_refs[a:b + 1], strict=True):
        made = [x for x in ids if str(x).startswith("b")]
        if blocks and made and m.kind == "tool-call":
            try:
                content = json.loads(m.text).get("content") or []
            except (ValueError, AttributeError):
                content = []
            for bid, r in zip(made, content, strict=False):
                if isinstance(r, dict) and isinstance(r.get("summary"), str):
                    out.append({"id": bid, "role": "system", "content_type": "text", "text": r["summary"]})
            continue
        if blocks and made and m.kind == "text":
            out.append({"id": made[0], "role": "system", "content_type": "text", "text": m.text})
            continue
        if blocks:
            continue  # a tier-2/3 digest folds blocks, not the raw messages between them
        d = {"id": ids[0] if ids else m.key, "role": m.role, "content_type": m.kind, "text": m.text}
        if m.tool_name:
            d["tool_name"] = m.tool_name
        if m.tool_call_id:
            d["tool_call_id"] = m.tool_call_id
        out.append(d)
    return out


def rebuild_row(row: dict[str, Any]) -> tuple[Any, str]:
    """The row's kernel turn run again (``doctrine.render.snapshot.rebuild``) and how it went:
    ``kernel`` (rebuilt, and its view is the row's context), ``refs`` (the row records no
    kernel input: ranges are resolved from ``view_refs`` or the tags), ``mismatch`` (the
    rebuilt view is not the row's context) or ``error: ...`` (the record is unusable)."""
    meta = row.get("meta") or {}
    try:
        rebuilt = rebuild(meta.get("kernel_input"))
    except ValueError as exc:
        return None, f"error: {exc}"
    if rebuilt is None:
        return None, "refs"
    body = [m for m in row["messages"][:-1] if m.get("role") != "system"]
    if (meta.get("nudge") or {}).get("shown") and body and body[-1].get("role") == "user":
        body = body[:-1]

    def shape(msgs: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [(m.role, m.content_type, m.text, m.tool_call_id) for m in flatten(msgs)]

    try:
        same = shape(body) == shape(rebuilt.chat)
    except ValueError:
        same = False
    return (rebuilt, "kernel") if same else (None, "mismatch")


def _conformance(out: dict[str, Any], checks: list[tuple[Any, str, int]], doctrine: Any) -> list[bool]:
    """Run the checker on each (source, summary, tier); set ``conformance_score`` (mean) and
    ``conformance_passed`` (all) on ``out`` and return the verdicts. A source is the folded text
    or a function that resolves it when asked. A range whose source cannot be resolved or
    checked is left out (and so counts against a full pass)."""
    scores, passed = [], []
    for source, summary, tier in checks:
        try:
            text = source() if callable(source) else source
            rep = check_summary(text, summary, tier=tier, doctrine=doctrine)
        except (ValueError, TypeError):
            continue
        scores.append(rep.score)
        passed.append(rep.passed)
    if scores:
        out["conformance_score"] = sum(scores) / len(scores)
        out["conformance_passed"] = all(passed)
    return passed


def _score_applied(out: dict[str, Any], reply: dict[str, Any], rebuilt: Any, doctrine: Any) -> None:
    """Compress scores from the kernel's own application of the reply (see eval.workloads.held_out.applied)."""
    applied = apply_compress(rebuilt, reply)
    out["range_valid"] = bool(applied.ranges) and not applied.errors and len(applied.blocks) == applied.ranges
    out["kernel_errors"] = len(applied.errors)
    out["kernel_warnings"] = len(applied.warnings)
    out["blocks_created"] = len(applied.blocks)
    out["kernel_messages"] = applied.errors + applied.warnings
    passed = _conformance(out, [(source, summary, tier if tier in (1, 2, 3) else 1)
                                for _s, _e, summary, tier, source in applied.blocks], doctrine)
    out["_summaries_passed"] = len([p for p in passed if p])
    out["_ranges"] = applied.ranges


def score_reply(reply: dict[str, Any], target: dict[str, Any], context: list[dict[str, Any]],
                tools: list[dict[str, Any]], parse_errors: list[str], nudge_present: bool,
                label_kind: str, doctrine: Any, view_refs: Any = None, nudge_tier: int | None = None,
                rebuilt: Any = None) -> dict[str, Any]:
    """Decision-kind, validity, overlap and conformance scores of one reply. With ``rebuilt``
    (the row's kernel turn, :func:`rebuild_row`) a compress or recovery reply is applied to
    it and scored by what the kernel did; without, ranges are resolved from the refs."""

    pred = classify(reply, nudge_present)
    if parse_errors and not reply.get("tool_calls"):
        pred = "invalid"  # an unparseable call is no decision at all, not a refusal
    names = {t.get("function", {}).get("name") for t in tools}
    valid = not parse_errors
    for c in reply.get("tool_calls") or []:
        fn = c.get("function") or {}
        if fn.get("name") not in names:
            valid = False
        try:
            if not isinstance(json.loads(fn.get("arguments") or "{}"), dict):
                valid = False
        except ValueError:
            valid = False
    ranges, arg_errors = compress_ranges(reply)
    if arg_errors:
        valid = False
    if not parse_errors and not reply.get("tool_calls"):
        valid = None  # no call written: a prose reply is not a valid call (kind_correct judges it)
    correct = pred != "invalid" and decision_correct(label_kind, reply, target, nudge_present)
    out: dict[str, Any] = {"label_kind": label_kind, "pred_kind": pred, "reply_form": reply_form(reply, nudge_present),
                           "kind_correct": correct,
                           "tool_call_valid": valid, "tool_calls": len(reply.get("tool_calls") or [])}
    if pred == "compress" and rebuilt is not None:
        _score_applied(out, reply, rebuilt, doctrine)
        label_ranges, _ = compress_ranges(target)
        if label_ranges:
            out["range_overlap"] = range_overlap([(s, e) for s, e, _ in ranges], [(s, e) for s, e, _ in label_ranges])
        n_passed, n_ranges = out.pop("_summaries_passed"), out.pop("_ranges")
        if label_kind == "compress":
            out["compress_success"] = bool(valid and out["range_valid"] and out.get("conformance_passed")
                                           and n_passed == n_ranges == len(ranges))
            graded_compress(out, reply, target, context, pred, valid, rebuilt=rebuilt, view_refs=view_refs,
                            nudge_present=nudge_present)
        return _recovery_scores(out, reply, rebuilt, label_kind, pred, target, nudge_present)
    if pred == "compress":
        text = "\n".join(m.get("content") or "" for m in context) + json.dumps(context)
        visible = set(re.findall(r"\b[mb]\d+\b", text))
        ok = bool(ranges)
        scope = context[:-1] if nudge_present else context
        resolved = {}
        for s, e, _ in ranges:
            iv = ref_interval(s, e)
            if iv is None or _norm_ref(s) not in visible or _norm_ref(e) not in visible:
                ok = False
            if view_refs is not None:
                resolved[(s, e)] = source_by_refs(context, view_refs, s, e)
                if resolved[(s, e)] is None:
                    ok = False
        out["range_valid"] = ok
        label_ranges, _ = compress_ranges(target)
        if label_ranges:
            out["range_overlap"] = range_overlap([(s, e) for s, e, _ in ranges], [(s, e) for s, e, _ in label_ranges])
        # A block range is a digest at the tier the nudge asked for (tier 2 by default).
        passed = _conformance(out, [
            (lambda s=s, e=e: resolved.get((s, e)) or _source_for(scope, s, e), summary,
             1 if (ref_interval(s, e) or ("m",))[0] == "m" else (nudge_tier if nudge_tier in (2, 3) else 2))
            for s, e, summary in ranges], doctrine)
    if label_kind == "compress":
        # The decision the label took, taken well: a valid compress call over visible ranges
        # whose every summary passes the checker. Anything else (a plain reply included) is 0.
        out["compress_success"] = bool(pred == "compress" and valid and out.get("range_valid")
                                       and out.get("conformance_passed") and len(passed) == len(ranges))
        graded_compress(out, reply, target, context, pred, valid, rebuilt=rebuilt, view_refs=view_refs,
                        nudge_present=nudge_present)
    return _recovery_scores(out, reply, rebuilt, label_kind, pred, target, nudge_present)


def _visible_ids(context: list[dict[str, Any]]) -> set[str]:
    """Message refs and block ids the model was shown: ref tags, the nudge's range list,
    earlier compress calls and results (anything printed in the context)."""
    text = "\n".join(m.get("content") or "" for m in context) + json.dumps(context)
    return set(re.findall(r"\b[mb]\d+\b", text))


def _label_sources(target: dict[str, Any], context: list[dict[str, Any]], rebuilt: Any, view_refs: Any,
                   nudge_present: bool) -> list[Any]:
    """The sources the label's own ranges fold (the kernel's, when the row rebuilds)."""
    if rebuilt is not None:
        return [src for *_x, src in apply_compress(rebuilt, target).blocks]
    scope = context[:-1] if nudge_present else context
    out = []
    for s, e, _ in compress_ranges(target)[0]:
        src = source_by_refs(context, view_refs, s, e) if view_refs is not None else None
        out.append(src or _source_for(scope, s, e))
    return out


def exact_values_kept(summaries: list[str], sources: list[Any]) -> float | None:
    """Share of the sources' exact values (the checker's ``exact_values`` KEEP items) that
    the summaries hold verbatim (whitespace aside); None when the sources have none."""
    values: list[str] = []
    for src in sources:
        try:
            items = extract_keep_items(src() if callable(src) else src)
        except (ValueError, TypeError):
            continue
        values += [it.text for it in items.get("exact_values", []) if it.text not in values]
    if not values:
        return None
    flat = " ".join(" ".join(summaries).split())
    return sum(" ".join(v.split()) in flat for v in values) / len(values)


def graded_compress(out: dict[str, Any], reply: dict[str, Any], target: dict[str, Any],
                    context: list[dict[str, Any]], pred: str, valid: bool, *, rebuilt: Any = None,
                    view_refs: Any = None, nudge_present: bool = False) -> None:
    """The steps to a successful fold, each 0/1 (or a score) per compress-labelled decision,
    so a learning curve shows where learning stops: ``compress_chosen`` (the reply calls
    compress), ``compress_parsed`` (its arguments are valid and name ranges),
    ``compress_accepted`` (the kernel applied every range without error, or with no
    rebuilt state every range resolved), ``ranges_visible`` (every boundary is a ref or block
    id the context showed), ``summary_score`` (the checker's mean score, 0 when nothing was
    checked) and ``exact_values_kept`` (share of the label's source exact values the reply's
    summaries keep verbatim; absent when that source has none)."""
    ranges, arg_errors = compress_ranges(reply)
    chosen = pred == "compress"
    parsed = chosen and valid and bool(ranges) and not arg_errors
    seen = _visible_ids(context)
    out["compress_chosen"] = chosen
    out["compress_parsed"] = parsed
    out["compress_accepted"] = bool(parsed and out.get("range_valid") and not out.get("kernel_errors"))
    out["ranges_visible"] = bool(parsed and all(_norm_ref(s) in seen and _norm_ref(e) in seen for s, e, _ in ranges))
    out["summary_score"] = float(out.get("conformance_score") or 0.0) if parsed else 0.0
    kept = exact_values_kept([summary for _s, _e, summary in ranges] if parsed else [],
                             _label_sources(target, context, rebuilt, view_refs, nudge_present))
    if kept is not None:
        out["exact_values_kept"] = kept if parsed else 0.0


def _recovery_scores(out: dict[str, Any], reply: dict[str, Any], rebuilt: Any, label_kind: str,
                     pred: str, target: dict[str, Any] | None = None, nudge_present: bool = False) -> dict[str, Any]:
    """The recovery reflex. ``recover_chosen``: on a decision labelled with a recovery call, the
    reply makes one (the turn after a restore, labelled with an answer, is not asked it);
    ``false_recovery``: on an ordinary decision (counter-lessons included), the reply makes a
    recovery call nobody needed. A recovery reply run on the rebuilt state gives
    ``recover_success`` on recovery-labelled rows (a plain reply or a compress there is 0)
    and ``recover_errors`` for failed calls."""
    if label_kind == "recover" and target is not None and reply_form(target, nudge_present) == "recover":
        out["recover_chosen"] = pred == "recover"
    if label_kind == "ordinary":
        out["false_recovery"] = pred == "recover"
    if rebuilt is None or (label_kind != "recover" and pred != "recover"):
        return out
    if pred == "recover":
        rec = apply_recovery(rebuilt, reply)
        out["recover_errors"] = rec["recover_errors"]
        out["restored"] = rec["restored"]
        ok = rec["recover_success"]
    else:
        ok = False
    if label_kind == "recover" and (rebuilt.needed or {}).get("blocks"):
        out["recover_success"] = bool(ok)
    return out



class HeldOutSettings(BaseConfig):
    """``settings`` of the held_out workload (checked when the recipe loads)."""

    data_dir: str = Field(
        ".", description="a data_gen output folder; rows are read from <data_dir>/<split>/ (*.parquet or "
                         "*.jsonl; in a data stage's folder, the files its manifest lists). A relative path "
                         "not found as given is taken from the recipe's folder; left out, the recipe's "
                         "data_dir fills it")
    split: str = Field("test", description="the split folder under data_dir the rows come from (train, test, "
                                           "heldout, ...)")
    kinds: list[str] | None = Field(
        None, description="decision kinds asked, by the row's meta.kind (nudged_compress, refusal, "
                          "spontaneous_compress, tier2, tier3, emergency, recovery, ordinary; "
                          "counter_recovery asks the counter-lessons apart from ordinary); cases follow "
                          "this order. null: every kind")
    per_kind: int | None = Field(
        None, ge=1, description="at most this many rows of each kind, picked round-robin over sessions and "
                                "families rather than in file order; null: no cap")
    windows: list[int] | None = Field(
        None, description="only rows replayed at these context windows (tokens, the row's meta.window); "
                          "null: any window")
    limit: int | None = Field(
        None, ge=0, description="at most this many rows in all, taken after the other picks; null: no cap")
    # Decisions of a session are not independent; the intervals resample sessions, and the cap
    # keeps a few long sessions from supplying most of the cases.
    per_session: int | None = Field(
        2, ge=1, description="at most this many decisions of one kind from one session (file order within "
                             "it), so a few long sessions cannot supply most cases; null: no cap")
    max_tokens: int | None = Field(
        None, ge=1, description="generation cap (tokens) of these calls in place of the recipe's max_tokens: "
                                "a whole compress call needs ~300-650; null: the recipe's")
    score_first_tokens: int = Field(
        12, ge=0, description="teacher-forced decision scores beside the generated reply: log-probability "
                              "of the first N tokens of the label and of each alternative decision (hf "
                              "backend only; decision_logprob / _margin / _win); 0: off")


class HeldOutWorkload:
    name = "held_out"
    Settings = HeldOutSettings

    def __init__(self, settings: dict[str, Any], base_dir: Path | None = None):
        self.settings = dict(settings)
        data_dir = Path(self.settings.get("data_dir", "."))
        if not data_dir.is_absolute() and base_dir is not None and not data_dir.exists():
            data_dir = base_dir / data_dir
        self.data_dir = data_dir
        picks = {k: self.settings.get(k) for k in ("kinds", "per_kind", "windows")}
        picks["per_session"] = self.settings.get("per_session", HeldOutSettings.model_fields["per_session"].default)
        if any(v is not None for v in picks.values()):
            rows = load_rows(data_dir, self.settings.get("split", "test"))
            self.rows = select_rows(rows, **picks, limit=self.settings.get("limit"))
        else:
            self.rows = load_rows(data_dir, self.settings.get("split", "test"), self.settings.get("limit"))

    def cases(self) -> list[Case]:
        out = []
        for i, r in enumerate(self.rows):
            meta = r["meta"]
            sid = re.sub(r"[^A-Za-z0-9_.-]", "_", str(meta.get("session_id", "row")))
            out.append(Case(f"{i:05d}_{sid}_{meta.get('step', 0)}", r))
        return out

    def supports(self, arm: str) -> bool:
        return arm in ARMS_SUPPORTED

    def run_case(self, case: Case, arm: str, seed: int, ctx: RunContext) -> dict[str, Any]:
        if self.settings.get("max_tokens"):
            ctx = replace(ctx, max_tokens=int(self.settings["max_tokens"]))
        return run_row(case.payload, arm, ctx, score_first_tokens=int(self.settings.get("score_first_tokens", 12)),
                       train=self.train_targets())

    def train_targets(self) -> TrainTargets | None:
        """The data folder's train targets (read once per run) for ``nearest_train_sim``; None
        when the folder has no train split, or the split asked is train itself."""
        if self.settings.get("split", "test") == "train":
            return None
        return train_targets(self.data_dir)


@dataclass
class Decision:
    """One held-out decision as an arm is asked it: the re-rendered context, the label, the
    tools of the row's serving profile, and the request sent."""

    context: list[dict[str, Any]]
    target: dict[str, Any]
    notes: dict[str, Any]
    tools: list[dict[str, Any]]
    task_tools: list[dict[str, Any]]
    doctrine_text: str
    label_kind: str
    profile: Any
    request: Request
    tool_parser: str = "lenient"


def decision_for(row: dict[str, Any], arm: str, ctx: RunContext) -> Decision:
    """The request ``arm`` is sent for ``row`` (no model call)."""
    info = ARM_INFO[arm]
    mode = info.prompt_mode or "distilled"
    meta = row["meta"]
    row_mode = meta.get("prompt_mode", "distilled")
    context, target = row["messages"][:-1], row["messages"][-1]
    context, notes = rerender_context(context, ctx.doctrine, row_mode, mode, meta)
    task_tools = [t for t in row["tools"] if (t.get("function") or {}).get("name") not in KERNEL_TOOL_NAMES]
    # The row's serving profile in the arm's prompt mode: tool schemas and doctrine text come
    # from the same frame every kernel arm and data_gen's replay use.
    host = meta.get("host") if isinstance(meta.get("host"), str) else ctx.host
    profile = resolve_profile(int(meta.get("window") or ctx.window), str(meta.get("gate") or ctx.gate), host,
                              prompt_mode=mode, nudge_style=ctx.nudge_style)
    frame = request_frame(profile, ctx.doctrine, task_tools=task_tools)
    label_kind = KIND_OF_LABEL.get(str(meta.get("kind")), "ordinary")
    req = Request(context, frame.tools, info.use_adapter, ctx.max_tokens, {"target": target})
    return Decision(context, target, notes, frame.tools, task_tools, frame.doctrine_text, label_kind, profile, req,
                    ctx.tool_parser)


def score_decision_reply(row: dict[str, Any], dec: Decision, comp: Any, doctrine: Any,
                         train: TrainTargets | None = None) -> dict[str, Any]:
    """What :func:`score_reply` says of ``comp`` (a Completion) for ``dec``, applied to the
    row's rebuilt kernel turn; ``kernel_messages`` holds what the kernel said. A reply that
    writes summaries also gets :func:`recall_scores` (``nearest_train_sim`` needs ``train``)."""
    meta = row["meta"]
    if dec.tool_parser == "hermes_strict":  # the calls a vLLM hermes server would return
        comp = reparsed(comp, strict=True)
    rebuilt, scored_by = rebuild_row(row)
    scores = score_reply(comp.message, dec.target, dec.context, dec.tools, comp.parse_errors,
                         dec.notes["nudge_present"], dec.label_kind, doctrine, view_refs=meta.get("view_refs"),
                         nudge_tier=meta["nudge"].get("tier") if isinstance(meta.get("nudge"), dict) else None,
                         rebuilt=rebuilt)
    scores["scored_by"] = scored_by
    scores.update(recall_scores(comp.message, dec.context, train))
    return scores


def run_row(row: dict[str, Any], arm: str, ctx: RunContext, score_first_tokens: int = 0,
            train: TrainTargets | None = None) -> dict[str, Any]:
    meta = row["meta"]
    dec = decision_for(row, arm, ctx)
    req = dec.request
    comp = safe_complete(ctx.backend, req)
    count = ctx.backend.count_tokens
    doctrine_tokens = count(dec.doctrine_text)
    if dec.notes["nudge_present"]:
        doctrine_tokens += count(dec.context[-1].get("content") or "")
    scores = score_decision_reply(row, dec, comp, ctx.doctrine, train)
    kernel_messages = scores.pop("kernel_messages", [])
    rec = call_record("decision", req, comp)
    rec["kernel_errors"] = kernel_messages
    rec["doctrine_tokens"] = doctrine_tokens
    rec["retained_tokens"] = comp.prompt_tokens
    metrics = {**scores, "prompt_tokens": comp.prompt_tokens, "completion_tokens": comp.completion_tokens,
               "doctrine_tokens": doctrine_tokens, "malformed_calls": int(bool(comp.parse_errors)),
               "label_source_kind": str(meta.get("kind")),
               # A reply cut at the cap is malformed whatever the model knew; a label longer than
               # the cap could not have been written out at all (the recipe's max_tokens is short).
               "cut_at_cap": bool(comp.completion_tokens and comp.completion_tokens >= req.max_tokens),
               "label_over_cap": count(format_assistant_text(dec.target.get("content"), dec.target.get("tool_calls"))) > req.max_tokens}
    if score_first_tokens:
        metrics.update(score_decision(ctx.backend, req, dec.target, dec.task_tools, score_first_tokens))
    return {"workload": "held_out", "rerender": dec.notes, "calls": [rec], "metrics": metrics,
            "serving_profile": dec.profile.record(),
            "meta": {k: meta.get(k) for k in ("session_id", "step", "kind", "source", "family", "prompt_mode",
                                              "counter_recovery")}}
