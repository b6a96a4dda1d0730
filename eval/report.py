"""Reports from saved case results: markdown, a self-contained HTML page and JSON.

    python -m eval report runs/<name>/eval [--vs runs/<other>/eval] [--out DIR]

Built only from the case files (never by the run itself): arm x metric tables per
workload, decision tables per kind, PNG plots (matplotlib, Agg backend) of the context per
call over a session for each arm (the sawtooth), billed tokens per arm, and accuracy per
arm (and per kind), plus an optional side-by-side of two runs. An incomplete run is
reported, and marked INCOMPLETE everywhere, never as complete.
"""

from __future__ import annotations

import base64
import html
import io
import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from eval.arm_names import REFERENCE_ARMS, REPORT_ORDER
from eval.metric_defs import COUNTS, definitions_for
from eval.metrics import (
    CLUSTER_METHOD,
    PAIRS,
    aggregate,
    arm_counts,
    arm_intervals,
    arm_methods,
    arm_sessions,
    balanced_ci,
    by_kind,
    is_clustered,
    non_inferiority,
    paired_balanced,
    paired_comparison,
)
from plumbing.runs import (
    MANIFEST,
    atomic_write,
    atomic_write_json,
    atomic_write_text,
    claim_run_folder,
    file_sha256,
    nonfinite_to_null,
    out_dir_error,
    read_manifest,
    run_folder_error,
    stage_dir,
    write_manifest,
)

__all__ = ["ReportError", "build_report", "headline_table", "summarise_run"]

SCRIPTED_COLS = ["cases", "calls", "model_calls", "billed_tokens", "mean_context", "peak_context",
                 "compressions_succeeded", "compressions_attempted", "refetches", "recovery_calls", "recoveries",
                 "recovery_refetches", "probe_accuracy",
                 "evidence_survival", "doctrine_tokens", "malformed_calls", "kernel_errors", "window_overflows",
                 "prefix_cache_hit_rate"]
MARATHON_COLS = SCRIPTED_COLS[:13] + ["probe_score", "deep_items_correct", "summary_conformance"] + SCRIPTED_COLS[13:]
PROBES_COLS = ["cases", "questions", "accuracy", "evidence_survival", "compacted", "forced_compaction", "model_calls", "billed_tokens", "mean_context",
               "peak_context", "compressions_succeeded", "recovery_calls", "recoveries", "recovery_refetches",
               "doctrine_tokens", "malformed_calls", "prefix_cache_hit_rate"]
HELD_OUT_COLS = ["cases", "balanced_acc", "compress_chosen", "compress_parsed", "compress_accepted", "ranges_visible",
                 "summary_score", "exact_values_kept", "compress_success", "nearest_train_sim", "values_copied",
                 "values_not_in_context", "values_not_in_context_share", "recover_chosen", "recover_success",
                 "false_recovery", "kind_correct", "decision_logprob",
                 "decision_margin", "decision_win", "tool_call_valid", "range_valid", "range_overlap",
                 "conformance_score",
                 "conformance_passed", "kernel_errors", "kernel_warnings", "prompt_tokens", "doctrine_tokens", "malformed_calls",
                 "cut_at_cap", "label_over_cap", "prefix_cache_hit_rate"]
COLUMNS = {"scripted": SCRIPTED_COLS, "marathon": MARATHON_COLS, "probes": PROBES_COLS, "held_out": HELD_OUT_COLS}
SESSION_WORKLOADS = ("marathon", "scripted")  # replayed sessions: context series and per-arm bars
# The results-at-a-glance table: (column, workload, metric); "calls" columns come from every call.
HEADLINE = [("balanced_acc", "held_out", "balanced_acc"), ("compress_success", "held_out", "compress_success"),
            ("decision_acc", "held_out", "kind_correct"), ("decision_win", "held_out", "decision_win"), ("summary_conf", "held_out", "conformance_score"),
            ("marathon_probe", "marathon", "probe_score"), ("billed_tokens", "marathon", "billed_tokens"),
            ("peak_context", "marathon", "peak_context"), ("recall_probes", "probes", "accuracy"),
            ("prompt_tok/call", "calls", "prompt_per_call"), ("max_prompt", "calls", "max_prompt"),
            ("doctrine_share", "calls", "doctrine_share")]
ARM_ORDER = list(REPORT_ORDER)


class ReportError(ValueError):
    pass


def _arm_key(arm: str) -> tuple[int, str]:
    return (ARM_ORDER.index(arm) if arm in ARM_ORDER else len(ARM_ORDER), arm)


def summarise_run(run_dir: str | Path) -> dict[str, Any]:
    """The report's JSON: per workload, per arm aggregates (and per kind for decisions)."""
    from eval.harness import CaseFileError, load_results, run_plan

    run_dir = Path(run_dir)
    if not (run_dir / "cases").is_dir():
        raise ReportError(f"{run_dir}: no cases/ folder (is this an eval output folder?)")
    try:
        results = load_results(run_dir)
    except CaseFileError as exc:
        raise ReportError(str(exc)) from None
    manifest = read_manifest(run_dir)
    status = {}
    try:
        status = json.loads((run_dir / "status.json").read_text())
    except (OSError, ValueError):
        pass
    ni = _recipe_non_inferiority(run_dir, manifest)
    groups: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        groups[r.get("workload", "?")][r["arm"]].append(r)
    # Complete: the run wrote its manifest and every case of its plan is there under the
    # run's fingerprint (load_results counts only those), so a deleted case file or cases
    # of another dataset's ids can never make "complete" or "24 of 12".
    total = len(planned[0]) if (planned := run_plan(run_dir)) else status.get("total")
    complete = manifest is not None and (planned is None or len(results) == total)
    out: dict[str, Any] = {"run_dir": str(run_dir), "complete": complete,
                           "cases_done": len(results), "cases_total": total,
                           "doctrine": (manifest or {}).get("doctrine"), "workloads": {},
                           "serving_profiles": (manifest or {}).get("serving_profiles") or [],
                           "arm_profiles": (manifest or {}).get("arm_profiles") or {},
                           "profile_mismatch": (manifest or {}).get("profile_mismatch") or []}
    for wl, arms in sorted(groups.items()):
        entry: dict[str, Any] = {"arms": {}, "by_kind": {}}
        for arm in sorted(arms, key=_arm_key):
            rows = [r["metrics"] for r in arms[arm]]
            sessions = [case_session(r) for r in arms[arm]]
            entry["arms"][arm] = aggregate(rows)
            # Cases of one session are not independent: intervals resample sessions where one
            # has more than one case (eval.metrics, "cluster bootstrap"), and say how many.
            entry["arms"][arm]["ci95"] = arm_intervals(rows, clusters=sessions)
            entry["arms"][arm]["ci_n"] = arm_counts(rows)
            entry["arms"][arm]["ci_sessions"] = arm_sessions(rows, sessions)
            entry["arms"][arm]["ci_method"] = arm_methods(rows, sessions)
            if wl == "held_out":
                entry["by_kind"][arm] = by_kind(rows)
                # Mean over decision kinds of the share answered right: never compressing (or
                # always compressing) cannot score well on it, whatever the mix of cases.
                per = [k["kind_correct"] for k in entry["by_kind"][arm].values() if "kind_correct" in k]
                if per:
                    entry["arms"][arm]["balanced_acc"] = sum(per) / len(per)
                    entry["arms"][arm]["ci95"]["balanced_acc"] = balanced_ci(rows, clusters=sessions)
                    entry["arms"][arm]["ci_n"]["balanced_acc"] = sum(
                        int(k.get("cases", 0)) for k in entry["by_kind"][arm].values() if "kind_correct" in k)
                    judged = [c for m, c in zip(rows, sessions, strict=True) if m.get("kind_correct") is not None]
                    entry["arms"][arm]["ci_sessions"]["balanced_acc"] = len(set(judged))
                    entry["arms"][arm]["ci_method"]["balanced_acc"] = (
                        CLUSTER_METHOD if is_clustered(judged) else "wilson+mover")
                # Confusion: labelled decision -> the form of the reply (eval.workloads.held_out.reply_form)
                conf: dict[str, dict[str, int]] = {}
                for m in rows:
                    lab, got = str(m.get("label_kind")), str(m.get("reply_form", m.get("pred_kind")))
                    conf.setdefault(lab, {}).setdefault(got, 0)
                    conf[lab][got] += 1
                entry.setdefault("confusion", {})[arm] = conf
                # How decision_logprob was got: teacher-forced, or why not (a backend without scoring).
                how = sorted({str(m["decision_scoring"]) for m in rows if m.get("decision_scoring")})
                if how:
                    entry.setdefault("decision_scoring", {})[arm] = how
        if wl in SESSION_WORKLOADS:
            entry["series"] = _series(arms)
        if wl == "probes":
            from eval.workloads.probes.workload import probe_report

            # Accuracy by question kind and against the full-history arm, per question.
            entry["recall"] = probe_report([r for rs in arms.values() for r in rs])
        out["workloads"][wl] = entry
        by_case = {arm: {(r["case_id"], r["seed"]): r["metrics"] for r in rs} for arm, rs in arms.items()}
        session_of = {(r["case_id"], r["seed"]): case_session(r) for rs in arms.values() for r in rs}
        pairs = {}
        for a, b in dict.fromkeys([*PAIRS, *(ni.arm_pairs() if ni else [])]):
            if a in by_case and b in by_case:
                pairs[f"{a}_vs_{b}"] = paired_comparison(by_case[a], by_case[b], clusters=session_of)
                if wl == "held_out" and (bal := paired_balanced(by_case[a], by_case[b],
                                                                 clusters=session_of)) is not None:
                    pairs[f"{a}_vs_{b}"]["balanced_acc"] = bal
        if pairs:
            out.setdefault("paired", {})[wl] = pairs
    if ni is not None:
        out["non_inferiority"] = verdicts(out.get("paired") or {}, ni)
    out["calls"] = _call_totals(results)
    return out


def case_session(result: dict[str, Any]) -> str:
    """The session a case result comes from (``meta.session_id``; a case without one is its
    own session): the unit the intervals resample."""
    sid = (result.get("meta") or {}).get("session_id")
    return f"session:{sid}" if sid not in (None, "") else f"case:{result.get('case_id')}"


def _recipe_non_inferiority(run_dir: Path, manifest: dict[str, Any] | None) -> Any:
    """The run's ``non_inferiority`` block (recipe.json, else the manifest's config), typed."""
    from eval.recipe import NonInferiority

    block = None
    try:
        block = (json.loads((run_dir / "recipe.json").read_text(encoding="utf-8")).get("report") or {}).get(
            "non_inferiority")
    except (OSError, ValueError, AttributeError):
        pass
    if block is None:
        block = ((manifest or {}).get("config") or {}).get("non_inferiority")
    if not block:
        return None
    try:
        return NonInferiority.model_validate(block)
    except ValueError as exc:
        raise ReportError(f"{run_dir}: unreadable non_inferiority block in recipe.json: {exc}") from None


def verdicts(paired: dict[str, Any], ni: Any) -> dict[str, Any]:
    """``{"margin", "metrics", "pairs", "verdicts": {wl: {pair: {metric: {diff, ci95, n,
    verdict}}}}}`` for every (pair, metric) of the recipe's block that some workload ran."""
    out: dict[str, Any] = {}
    for wl, pairs in sorted(paired.items()):
        for pair in ni.pairs:
            for metric in ni.metrics:
                d = (pairs.get(pair) or {}).get(metric)
                if d and len(d.get("ci95") or []) == 2:
                    out.setdefault(wl, {}).setdefault(pair, {})[metric] = {
                        **d, "verdict": non_inferiority(d, ni.margin, ni.min_cases, ni.min_per_kind)}
    return {"margin": ni.margin, "min_cases": ni.min_cases, "min_per_kind": ni.min_per_kind,
            "metrics": list(ni.metrics), "pairs": list(ni.pairs), "verdicts": out}


def verdict_table(summary: dict[str, Any]) -> list[list[str]] | None:
    ni = summary.get("non_inferiority")
    if not ni:
        return None
    t = [["workload", "pair", "metric", "diff (a - b)", "95% interval", "n", "sessions", "n per kind", "method",
          f"verdict (margin {_fmt(ni['margin'])}, min n {ni.get('min_cases', 1)}, "
          f"min n per kind {ni.get('min_per_kind', 1)})"]]
    for wl, pairs in ni["verdicts"].items():
        for pair, metrics in pairs.items():
            for k, d in metrics.items():
                t.append([wl, pair, k, _fmt(d["diff"]), _interval(d.get("ci95")), str(d["n"]),
                          str(d.get("sessions", "–")), _kinds(d), d.get("method", "–"), d["verdict"]])
    return t


def _interval(ci: Any) -> str:
    """``[lo, hi]``, or "–" where there is none (one case of an unbounded metric)."""
    return f"[{_fmt(ci[0])}, {_fmt(ci[1])}]" if ci and len(ci) == 2 else "–"


def _kinds(d: dict[str, Any]) -> str:
    """``compress 16, refuse 8``: the pairs per decision kind behind a difference."""
    return ", ".join(f"{k} {v}" for k, v in (d.get("n_by_kind") or {}).items()) or "–"


def profile_lines(summary: dict[str, Any]) -> list[str]:
    """What the kernel arms ran under, and a warning when the distilled arm ran under a
    serving profile its adapter was not trained with."""
    profs = summary.get("serving_profiles") or []
    if not profs:
        return []
    desc = "; ".join(f"{p['sha256'][:12]} = window {p['window']}, preset {p['preset']}, host {p['host']}, "
                     f"{p['prompt_mode']}, nudges {p['nudge_style']}" for p in profs)
    out = [f"Serving profiles of the kernel arms (`python -m doctrine.kernel profile`): {desc}.", ""]
    for m in summary.get("profile_mismatch") or []:
        out += [f"WARNING: the {m['arm']} arm ran at window {m['window']} under profile {m['sha256'][:12]}, "
                f"which its adapter was not trained with (the recipe allowed it).", ""]
    return out


def _call_totals(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per arm over every real model call of every workload: how many, prompt tokens per
    call, and the share of those prompt tokens that was doctrine text (system prompt rules,
    nudges, tool descriptions the doctrine writes)."""
    sums: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for r in results:
        for c in r.get("calls", []):
            if c.get("real", True):
                s = sums[r["arm"]]
                prompt = int(c.get("prompt_tokens") or 0)
                s[0] += 1
                s[1] += prompt
                s[2] += int(c.get("doctrine_tokens") or 0)
                s[3] = max(s[3], prompt)
    return {arm: {"model_calls": n, "prompt_tokens": p, "doctrine_tokens": d, "max_prompt": top,
                  "prompt_per_call": p / n if n else None, "doctrine_per_call": d / n if n else None,
                  "doctrine_share": d / p if p else None}
            for arm, (n, p, d, top) in sorted(sums.items(), key=lambda kv: _arm_key(kv[0]))}


def headline_table(summary: dict[str, Any]) -> list[list[str]]:
    """One row per arm with the figures people look at first (see ``HEADLINE``); columns
    whose workload did not run are left out."""
    wls = summary.get("workloads", {})
    calls = summary.get("calls", {})
    arms = sorted({a for e in wls.values() for a in e.get("arms", {})} | set(calls), key=_arm_key)
    cols = [(name, wl, key) for name, wl, key in HEADLINE
            if (wl == "calls" and calls) or any(key in r for r in wls.get(wl, {}).get("arms", {}).values())]
    table = [["arm"] + [c[0] for c in cols]]
    for arm in arms:
        row = [arm]
        for _, wl, key in cols:
            src = calls.get(arm, {}) if wl == "calls" else wls.get(wl, {}).get("arms", {}).get(arm, {})
            v = src.get(key)
            cell = f"{v:.0%}" if key == "doctrine_share" and v is not None else _fmt(v, key)
            ci = (src.get("ci95") or {}).get(key)
            if ci and v is not None:
                n = (src.get("ci_n") or {}).get(key)
                cell += f" [{_fmt(ci[0])}, {_fmt(ci[1])}]" + (f" n={n}" if n is not None else "")
                sess = (src.get("ci_sessions") or {}).get(key)
                if sess is not None and n is not None and sess < n:
                    cell += f" ({sess} session{'' if sess == 1 else 's'})"
            row.append(cell)
        table.append(row)
    return table


def _series(arms: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Context per call for the first case (sorted by id) of each arm: the sawtooth."""
    first = min((r["case_id"], r["seed"]) for rs in arms.values() for r in rs)
    series = {}
    for arm, rs in arms.items():
        for r in rs:
            if (r["case_id"], r["seed"]) == first:
                series[arm] = [c.get("retained_tokens", 0) for c in r["calls"] if c.get("purpose") != "summary"]
    return {"case": first[0], "seed": first[1], "context": series}


# ----------------------------------------------------------------------------- rendering


GLANCE_NOTE = ("Each column is defined once, in the Definitions section below. Brackets: the 95% interval "
               "by the small-n rule, with n, the cases it is over, beside it, and the sessions they come from "
               "where fewer (then the interval is the cluster bootstrap, which resamples sessions).")


def _columns(wl: str, arms: dict[str, dict[str, Any]]) -> list[str]:
    """The workload's columns; an unknown workload shows every numeric metric it has."""
    if wl in COLUMNS:
        return COLUMNS[wl]
    keys = sorted({k for r in arms.values() for k, v in r.items() if isinstance(v, (int, float))} - {"cases"})
    return ["cases"] + keys


REPLY_FORMS = ["compress", "recover", "act", "decline", "final", "malformed", "invalid"]


def confusion_table(conf: dict[str, dict[str, int]]) -> list[list[str]]:
    forms = [f for f in REPLY_FORMS if any(f in row for row in conf.values())]
    forms += sorted({f for row in conf.values() for f in row} - set(forms))
    t = [["label \\ reply"] + forms]
    for lab in sorted(conf):
        t.append([lab] + [str(conf[lab].get(f, 0)) for f in forms])
    return t


def paired_tables(summary: dict[str, Any]) -> dict[str, list[list[str]]]:
    """Per workload: each arm pair, each reported metric, the mean difference with its
    paired-bootstrap 95 % interval and n."""
    out = {}
    for wl, pairs in (summary.get("paired") or {}).items():
        cols = set(COLUMNS.get(wl, []))
        t = [["pair", "metric", "diff (a - b)", "95% interval", "n", "sessions", "n per kind", "method"]]
        for pair, metrics in pairs.items():
            for k, d in metrics.items():
                if k in cols:
                    t.append([pair, k, _fmt(d["diff"]), _interval(d.get("ci95")), str(d["n"]),
                              str(d.get("sessions", "–")), _kinds(d), d.get("method", "–")])
        if len(t) > 1:
            out[wl] = t
    return out


NI_NOTE = ("Non-inferiority (the recipe's non_inferiority block): arm a is non-inferior to arm b on a "
           "metric when the low end of the paired 95% interval of a - b is above -margin; inferior when its "
           "high end is below -margin; inconclusive when the interval straddles -margin (too few or too "
           "varied cases to tell), and always inconclusive under min_cases paired cases or under "
           "min_per_kind in some decision kind. Higher is better for every metric listed.")
RECALL_NOTE = ("Recall probes, per question: accuracy by kind; 'vs full' counts only the questions the full "
               "arm answered (a lost answer there is lost to compaction, not to the model), 'full failed' those "
               "it did not; 'compacted' is the share of cases with a compaction before the first question "
               "(forced where the session raised none).")


MEMO_NOTE = ("Over the replies that write compress summaries: nearest_train_sim, the difflib ratio of a reply's "
             "summaries to the nearest train label (near 1: a train target repeated), and the exact items of the "
             "summaries that occur nowhere in the context the model saw (eval/workloads/held_out/recall.py). "
             "Brackets: 95% interval (method column), over n replies from the sessions beside it.")


def _with_ci(arm: dict[str, Any], key: str) -> str:
    if arm.get(key) is None:
        return "–"
    n, sess = (arm.get("ci_n") or {}).get(key), (arm.get("ci_sessions") or {}).get(key)
    return (f"{_fmt(arm[key])} {_interval((arm.get('ci95') or {}).get(key))}"
            + (f" n={n}" if n is not None else "") + (f" ({sess} sessions)" if sess is not None else ""))


def memorisation_table(entry: dict[str, Any]) -> list[list[str]] | None:
    """Per arm: nearest_train_sim and values_not_in_context with their intervals (held_out)."""
    arms = {a: r for a, r in entry.get("arms", {}).items()
            if r.get("nearest_train_sim") is not None or r.get("values_copied") is not None}
    if not arms:
        return None
    t = [["arm", "nearest_train_sim", "values_not_in_context", "values_not_in_context_share", "method"]]
    for arm, r in arms.items():
        items = int(r.get("values_copied") or 0) + int(r.get("values_not_in_context") or 0)
        t.append([arm, _with_ci(r, "nearest_train_sim"),
                  f"{int(r.get('values_not_in_context') or 0)} of {items}" if items else "–",
                  _with_ci(r, "values_not_in_context_share"),
                  (r.get("ci_method") or {}).get("nearest_train_sim")
                  or (r.get("ci_method") or {}).get("values_not_in_context_share") or "–"])
    return t


RECOVERY_METRICS = ("recover_chosen", "recover_success", "false_recovery")
RECOVERY_NOTE = ("The recovery reflex per arm. Each figure is over the decisions it is defined on (recover_chosen "
                 "and recover_success: the recovery-labelled ones; false_recovery: the ordinary ones), n of them "
                 "from the sessions beside it; where a session gives more than one, the interval resamples "
                 "sessions (method column).")


def recovery_table(entry: dict[str, Any]) -> list[list[str]] | None:
    """Per arm and recovery metric (held_out): the share with its 95% interval, n, sessions
    and method; None when no arm has one. The workload table prints bare shares, and these
    three are read against bars (above 0, under 0.10), so each gets its interval here."""
    t = [["arm", "metric", "share", "95% interval", "n", "sessions", "method"]]
    for arm, r in entry.get("arms", {}).items():
        for k in RECOVERY_METRICS:
            if r.get(k) is not None:
                t.append([arm, k, _fmt(r[k]), _interval((r.get("ci95") or {}).get(k)),
                          str((r.get("ci_n") or {}).get(k, "–")), str((r.get("ci_sessions") or {}).get(k, "–")),
                          (r.get("ci_method") or {}).get(k) or "–"])
    return t if len(t) > 1 else None


def recall_table(entry: dict[str, Any]) -> list[list[str]] | None:
    rec = entry.get("recall") or {}
    arms = rec.get("arms") or {}
    if not arms:
        return None
    ref = rec.get("reference_arm", "full")
    kinds = sorted({k for a in arms.values() for k in a["by_kind"]})
    t = [["arm", "accuracy", *kinds, f"vs {ref}", f"{ref} failed", "evidence survived", "compacted"]]
    for arm in sorted(arms, key=_arm_key):
        a, v = arms[arm], arms[arm]["vs_reference"]
        kc = [f"{a['by_kind'][k]['correct']}/{a['by_kind'][k]['questions']}" if k in a["by_kind"] else "–"
              for k in kinds]
        t.append([arm, f"{a['correct']}/{a['questions']}", *kc,
                  f"{v['clean_correct']}/{v['clean_questions']}" if v["clean_questions"] else "–",
                  f"{v['reference_failed_correct']}/{v['reference_failed_questions']}"
                  if v["reference_failed_questions"] else "–",
                  _fmt(a["evidence_survival"]), _fmt((entry["arms"].get(arm) or {}).get("compacted"))])
    return t


PAIRED_NOTE = ("Paired: the same cases run by both arms; diff is the mean of (a - b) over them, the interval "
               "is by the small-n rule (method column; see Definitions). An interval that excludes 0 is a "
               "difference these cases support; at n under ~30 most intervals are wide, and should be.")


def _fmt(v: Any, name: str | None = None) -> str:
    if v is None:
        return "–"
    if name in COUNTS and isinstance(v, (int, float)) and not isinstance(v, bool):
        return f"{round(v):,}"
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 10 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _table(rows: dict[str, dict[str, Any]], cols: list[str], label: str = "arm") -> list[list[str]]:
    present = [c for c in cols if any(c in r for r in rows.values())]
    out = [[label] + present]
    for name, r in rows.items():
        out.append([name] + [_fmt(r.get(c), c) for c in present])
    return out


def _md(table: list[list[str]]) -> str:
    head, *body = table
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(lines)


def _html_table(table: list[list[str]]) -> str:
    head, *body = table
    h = "".join(f"<th>{html.escape(c)}</th>" for c in head)
    b = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in body)
    return f"<table><thead><tr>{h}</tr></thead><tbody>{b}</tbody></table>"


def _plots(summary: dict[str, Any]) -> dict[str, bytes]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pngs: dict[str, bytes] = {}

    def save(fig, name: str) -> None:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=90, bbox_inches="tight", metadata={"Software": None})
        plt.close(fig)
        pngs[name] = buf.getvalue()

    for wl in SESSION_WORKLOADS:
        sc = summary["workloads"].get(wl)
        if not sc:
            continue
        fig, ax = plt.subplots(figsize=(8, 4))
        for arm in sorted(sc["series"]["context"], key=_arm_key):
            ref = arm in REFERENCE_ARMS  # the reference fold: dashed black, beside the model arms
            ax.plot(sc["series"]["context"][arm], label=f"{arm} (reference)" if ref else arm, linewidth=1.2,
                    **({"linestyle": "--", "color": "black"} if ref else {}))
        ax.set_xlabel("call")
        ax.set_ylabel("context tokens")
        ax.set_title(f"{wl}: context per call, {sc['series']['case']}")
        ax.legend(fontsize=7, ncol=2)
        save(fig, f"{wl}_context_per_call.png")
        arms = list(sc["arms"])
        fig, ax = plt.subplots(figsize=(8, 3.5))
        ax.bar(arms, [sc["arms"][a].get("billed_tokens", 0) for a in arms], color="#4a7ab0")
        ax.set_ylabel("billed tokens (prompt + completion)")
        ax.set_title(wl)
        ax.tick_params(axis="x", rotation=45)
        save(fig, f"{wl}_billed_tokens.png")
        metric = "probe_score" if wl == "marathon" else "probe_accuracy"
        fig, ax = plt.subplots(figsize=(8, 3.5))
        ax.bar(arms, [sc["arms"][a].get(metric) or 0 for a in arms], color="#5a9e5a")
        ax.set_ylim(0, 1.05)
        ax.set_ylabel(metric.replace("_", " "))
        ax.set_title(wl)
        ax.tick_params(axis="x", rotation=45)
        save(fig, f"{wl}_{metric}.png")
    calls = summary.get("calls")
    if calls:
        arms = list(calls)
        fig, ax = plt.subplots(figsize=(8, 3.5))
        per_call = [calls[a]["prompt_per_call"] or 0 for a in arms]
        doc = [calls[a]["doctrine_per_call"] or 0 for a in arms]
        ax.bar(arms, [p - d for p, d in zip(per_call, doc, strict=True)], color="#4a7ab0", label="conversation")
        ax.bar(arms, doc, bottom=[p - d for p, d in zip(per_call, doc, strict=True)], color="#c0504d",
               label="doctrine text")
        ax.set_ylabel("prompt tokens per model call")
        ax.legend(fontsize=8)
        ax.tick_params(axis="x", rotation=45)
        save(fig, "doctrine_per_call.png")
    ho = summary["workloads"].get("held_out")
    if ho:
        arms = list(ho["arms"])
        kinds = sorted({k for a in arms for k in ho["by_kind"].get(a, {})})
        fig, ax = plt.subplots(figsize=(8, 3.5))
        width = 0.8 / max(1, len(arms))
        for i, arm in enumerate(arms):
            vals = [ho["by_kind"][arm].get(k, {}).get("kind_correct", 0) for k in kinds]
            ax.bar([j + i * width for j in range(len(kinds))], vals, width, label=arm)
        ax.set_xticks([j + width * (len(arms) - 1) / 2 for j in range(len(kinds))], kinds)
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("decision accuracy")
        ax.legend(fontsize=8)
        save(fig, "accuracy_by_kind.png")
    return pngs


def _side_by_side(a: dict[str, Any], b: dict[str, Any]) -> dict[str, list[list[str]]]:
    out = {}
    for wl in sorted(set(a["workloads"]) | set(b["workloads"])):
        cols = _columns(wl, {**a["workloads"].get(wl, {}).get("arms", {}), **b["workloads"].get(wl, {}).get("arms", {})})
        arms_a = a["workloads"].get(wl, {}).get("arms", {})
        arms_b = b["workloads"].get(wl, {}).get("arms", {})
        table = [["arm", "metric", "this run", "other run", "delta"]]
        for arm in sorted(set(arms_a) | set(arms_b), key=_arm_key):
            for c in cols[1:]:
                va, vb = arms_a.get(arm, {}).get(c), arms_b.get(arm, {}).get(c)
                if va is None and vb is None:
                    continue
                delta = va - vb if isinstance(va, (int, float)) and isinstance(vb, (int, float)) else None
                table.append([arm, c, _fmt(va), _fmt(vb), _fmt(delta)])
        out[wl] = table
    return out


def _shown_names(summary: dict[str, Any], glance: list[list[str]], ptabs: dict[str, list[list[str]]],
                 vt: list[list[str]] | None) -> list[str]:
    """Every metric name and column head the report's tables print."""
    names = list(glance[0][1:]) + ["95% interval", "n"]  # the glance cells carry both
    for wl, entry in summary["workloads"].items():
        names += _table(entry["arms"], _columns(wl, entry["arms"]))[0][1:]
    for t in ptabs.values():
        names += [r[1] for r in t[1:]] + t[0][2:]
    if vt:
        names += [r[2] for r in vt[1:]] + vt[0][3:7]
    return names


def default_report_dir(run_dir: str | Path) -> Path:
    """Where ``python -m eval report RUN_DIR`` writes without ``--out``: the run's ``report``
    stage beside an ``eval`` stage folder (``runs/NAME/eval`` -> ``runs/NAME/report``), else
    ``RUN_DIR/report``."""
    run_dir = Path(run_dir)
    return stage_dir(run_dir.parent, "report") if run_dir.name == "eval" else run_dir / "report"


def build_report(run_dir: str | Path, *, vs: str | Path | None = None, out: str | Path | None = None) -> Path:
    """Write report.md, report.html, report.json, the PNGs and a manifest; returns the folder."""
    started = time.time()
    run_dir = Path(run_dir)
    summary = summarise_run(run_dir)
    other = summarise_run(vs) if vs else None
    flag = "--out" if out else "report folder"
    out = Path(out) if out else default_report_dir(run_dir)
    if problem := out_dir_error(out, flag) or run_folder_error(out, "report", flag=flag):
        raise ReportError(problem)
    claim_run_folder(out, "report", flag=flag)  # a folder of the user's is refused above, untouched
    pngs = _plots(summary)
    for name, data in pngs.items():
        atomic_write(out / name, data)
    state = "complete" if summary["complete"] else (
        f"INCOMPLETE ({summary['cases_done']}/{summary['cases_total']} cases done)")
    md = [f"# Eval report: {run_dir}", "", f"Run status: **{state}**.", ""]
    parts_html = [f"<h1>Eval report: {html.escape(str(run_dir))}</h1>", f"<p>Run status: <b>{html.escape(state)}</b></p>"]
    if summary.get("doctrine"):
        d = summary["doctrine"]
        md += [f"Doctrine {d.get('version')} ({str(d.get('sha256'))[:12]}).", ""]
    prof_lines = profile_lines(summary)
    md += prof_lines
    parts_html += [f"<p>{html.escape(x)}</p>" for x in prof_lines if x]
    glance = summary["glance"] = headline_table(summary)
    md += ["## Results at a glance", "", _md(glance), "", GLANCE_NOTE, ""]
    parts_html += ["<h2>Results at a glance</h2>", _html_table(glance), f"<p>{html.escape(GLANCE_NOTE)}</p>"]
    ptabs = paired_tables(summary)
    vt = verdict_table(summary)
    recs = {wl: t for wl, entry in summary["workloads"].items() if (t := recovery_table(entry)) is not None}
    shown = _shown_names(summary, glance, ptabs, vt) + [h for t in recs.values() for h in t[0][3:]]
    defs = summary["definitions"] = dict(definitions_for(shown))
    md += ["## Definitions", ""] + [f"- **{k}**: {v}" for k, v in defs.items()] + [""]
    parts_html += ["<h2>Definitions</h2>", "<ul>" + "".join(
        f"<li><b>{html.escape(k)}</b>: {html.escape(v)}</li>" for k, v in defs.items()) + "</ul>"]
    if vt is not None:
        md += ["## Non-inferiority", "", NI_NOTE, ""]
        md += [_md(vt), ""] if len(vt) > 1 else ["No pair of the recipe ran on a listed metric.", ""]
        parts_html += ["<h2>Non-inferiority</h2>", f"<p>{html.escape(NI_NOTE)}</p>",
                       _html_table(vt) if len(vt) > 1 else "<p>No pair of the recipe ran on a listed metric.</p>"]
    for wl, entry in summary["workloads"].items():
        t = _table(entry["arms"], _columns(wl, entry["arms"]))
        md += [f"## {wl}", "", _md(t), ""]
        parts_html += [f"<h2>{html.escape(wl)}</h2>", _html_table(t)]
        for arm, how in (entry.get("decision_scoring") or {}).items():
            if how != ["teacher-forced"]:
                line = f"decision_logprob / decision_margin / decision_win for {arm}: {'; '.join(how)}."
                md += [line, ""]
                parts_html.append(f"<p>{html.escape(line)}</p>")
        mt = memorisation_table(entry)
        if mt is not None:
            md += [f"### {wl}: reading or recall", "", MEMO_NOTE, "", _md(mt), ""]
            parts_html += [f"<h3>{html.escape(wl)}: reading or recall</h3>", f"<p>{html.escape(MEMO_NOTE)}</p>",
                           _html_table(mt)]
        if (rec := recs.get(wl)) is not None:
            md += [f"### {wl}: recovery reflex", "", RECOVERY_NOTE, "", _md(rec), ""]
            parts_html += [f"<h3>{html.escape(wl)}: recovery reflex</h3>", f"<p>{html.escape(RECOVERY_NOTE)}</p>",
                           _html_table(rec)]
        rt = recall_table(entry)
        if rt is not None:
            md += [f"### {wl}: accuracy by kind and relative to full", "", RECALL_NOTE, "", _md(rt), ""]
            parts_html += [f"<h3>{html.escape(wl)}: accuracy by kind and relative to full</h3>",
                           f"<p>{html.escape(RECALL_NOTE)}</p>", _html_table(rt)]
        if wl in ptabs:
            md += [f"### {wl}: paired comparisons", "", PAIRED_NOTE, "", _md(ptabs[wl]), ""]
            parts_html += [f"<h3>{html.escape(wl)}: paired comparisons</h3>", f"<p>{html.escape(PAIRED_NOTE)}</p>",
                           _html_table(ptabs[wl])]
        for arm, kinds in entry.get("by_kind", {}).items():
            kt = _table(kinds, HELD_OUT_COLS, "kind")
            md += [f"### {wl} / {arm}, by kind", "", _md(kt), ""]
            parts_html += [f"<h3>{html.escape(arm)}, by kind</h3>", _html_table(kt)]
            conf = entry.get("confusion", {}).get(arm)
            if conf:
                ct = confusion_table(conf)
                md += [f"Replies by labelled decision ({arm}; columns: what the reply did):", "", _md(ct), ""]
                parts_html += [f"<p>Replies by labelled decision ({html.escape(arm)})</p>", _html_table(ct)]
    for name, data in pngs.items():
        md += [f"![{name}]({name})", ""]
        parts_html.append(f'<p><img alt="{name}" src="data:image/png;base64,{base64.b64encode(data).decode()}"></p>')
    if other is not None:
        summary["vs"] = {"run_dir": str(vs), "complete": other["complete"], "tables": _side_by_side(summary, other)}
        md += [f"## Side by side: this run vs {vs}", ""]
        parts_html.append(f"<h2>Side by side: this run vs {html.escape(str(vs))}</h2>")
        if not other["complete"]:
            md += ["The other run is INCOMPLETE.", ""]
        for wl, t in summary["vs"]["tables"].items():
            md += [f"### {wl}", "", _md(t), ""]
            parts_html += [f"<h3>{html.escape(wl)}</h3>", _html_table(t)]
    style = ("body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#eee}")
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>Eval report</title><style>{style}</style>"
            f"</head><body>{''.join(parts_html)}</body></html>")
    atomic_write_text(out / "report.md", "\n".join(md))
    atomic_write_text(out / "report.html", page)
    # Strict JSON: a value with no finite number (a mean over no case) is null, and listed.
    summary, nulls = nonfinite_to_null(summary)
    if nulls:
        summary["nonfinite_as_null"] = nulls
    atomic_write_json(out / "report.json", summary)
    inputs = {"eval": run_dir / MANIFEST} if (run_dir / MANIFEST).is_file() else {}
    if vs and (Path(vs) / MANIFEST).is_file():
        inputs["vs"] = Path(vs) / MANIFEST
    write_manifest(out, stage="report", inputs=inputs, doctrine=summary.get("doctrine"),
                   counts={"cases": summary["cases_done"], "plots": len(pngs)},
                   extra={"run_complete": summary["complete"],
                          "files": {p.name: file_sha256(p) for p in sorted(out.iterdir())
                                    if p.is_file() and p.name != MANIFEST}},
                   started_at=started)
    return out
