"""Re-score a finished eval's held-out replies with today's scorer, without generating.

A checker or scoring change (a new usability rule, a fixed range check) changes what a
recorded reply is worth, not the reply. Regenerating costs the eval's whole model time;
re-scoring reads each held-out case file's recorded reply (its raw text, parsed tool calls
and parse errors), asks the same question again (:func:`decision_for`: the same rows, arm
frames and serving profiles, from the source run's recipe) and scores the reply with
:func:`score_decision_reply`. What needs a model (token counts, teacher-forced decision
scores) is kept from the source case; other workloads' case files are copied unchanged.

The copy is a complete eval folder (its case files, ``recipe.json`` and a manifest written
last that names the source manifest and counts the cases whose scores changed), so
``dtw report`` and the learning curve read it like any other. The source is never written.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plumbing.runs import (
    STAGES,
    atomic_write_json,
    claim_run_folder,
    confined_path,
    read_manifest,
    write_manifest,
)

__all__ = ["RescoreError", "RescoreSummary", "rescore"]

# Metrics of a held-out case that come from the model call, not from scoring its reply.
_FROM_THE_CALL = ("prompt_tokens", "completion_tokens", "doctrine_tokens", "malformed_calls", "cut_at_cap", "label_over_cap",
                  "label_source_kind", "prefix_cache_hits", "prefix_cache_queries", "decision_scoring")


class RescoreError(ValueError):
    """A source folder that is not a complete eval run, or a doctrine that differs from it."""


# Written first into --out: the source it re-scores. A rerun may write only into a folder
# holding a re-score of the same source (never another run's eval or stage).
RESCORE_FILE = "rescore.json"


def _check_out(src: Path, out: Path) -> None:
    """Refuse an ``--out`` that is the source, lies inside the source's run (``runs/<name>``
    when the source is its eval stage folder) or holds anything but a re-score of this source."""
    source = src.resolve()
    run = source.parent if source.name in STAGES else source
    target = out.resolve()
    if target == source:
        raise RescoreError("--out must be another folder: the source run is never rewritten")
    if target.is_relative_to(run) or source.is_relative_to(target):
        raise RescoreError(f"--out {out}: lies inside the source run {run} (or holds it); re-score into a "
                           "folder of its own, outside that run")
    if not out.is_dir() or not any(out.iterdir()):
        return
    try:
        previous = json.loads((out / RESCORE_FILE).read_text(encoding="utf-8")).get("source")
    except (OSError, ValueError, AttributeError):
        previous = None
    if previous != str(source):
        what = read_manifest(out)
        holds = f"the {what.get('stage')} stage's results" if what else "files that are not a re-score of it"
        raise RescoreError(f"--out {out}: holds {holds}{f' (a re-score of {previous})' if previous else ''}; "
                           f"re-score {src} into a new or empty folder")


@dataclass
class RescoreSummary:
    cases: int = 0
    rescored: int = 0
    copied: int = 0
    changed: int = 0
    skipped: list[str] = field(default_factory=list)  # "case file: reason"
    changes: dict[str, int] = field(default_factory=dict)  # metric -> cases whose value changed


def _kept_from_call(metrics: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metrics.items() if k in _FROM_THE_CALL or k.startswith("decision_")}


def _recorded_completion(call: dict[str, Any]):
    """The recorded reply as a Completion: the content re-parsed from the raw text, the tool
    calls and parse errors as the run recorded them."""
    from plumbing.chat_backend import Completion, reply_from_text

    raw = call.get("raw_text")
    if not isinstance(raw, str):
        raise ValueError("the call record has no raw_text (a reference arm or an older run)")
    parsed = reply_from_text(raw, prompt_tokens=0, completion_tokens=0, latency_s=0.0)
    calls = call.get("tool_calls")
    if not isinstance(calls, list):
        raise ValueError("the call record's tool_calls is not a list")
    message: dict[str, Any] = {"role": "assistant", "content": parsed.message.get("content") or ""}
    if calls:
        message["tool_calls"] = calls
    return Completion(message, raw, calls, [str(e) for e in call.get("parse_errors") or []],
                      int(call.get("prompt_tokens") or 0), int(call.get("completion_tokens") or 0))


def rescore(src: str | Path, out: str | Path, *, data_dir: str | Path | None = None,
            base_dir: str | Path | None = None, log=lambda line: None) -> RescoreSummary:
    """Re-score the held-out cases of the complete eval folder ``src`` into ``out``. The
    held-out rows are found as the run found them (relative to the working directory, else
    to ``base_dir``: the run's recipe folder), or in ``data_dir`` when they moved."""
    from doctrine.spec import resolve_doctrine
    from eval.harness import RECIPE_FILE, case_path, plan
    from eval.recipe import EvalRecipe
    from eval.workloads.base import RunContext
    from eval.workloads.held_out.workload import decision_for, score_decision_reply

    started = time.time()
    src, out = Path(src), Path(out)
    manifest = read_manifest(src)
    if manifest is None or manifest.get("stage") != "eval":
        raise RescoreError(f"{src}: not a complete eval run (no eval manifest.json)")
    _check_out(src, out)
    config = dict(manifest.get("config") or {})
    if data_dir is not None:
        if config.get("data_dir") is not None:
            config["data_dir"] = str(data_dir)
        for w in config.get("workloads") or []:
            if w.get("name") == "held_out" and "data_dir" in (w.get("settings") or {}):
                w["settings"]["data_dir"] = str(data_dir)
    recipe = EvalRecipe.model_validate(config)
    doc = resolve_doctrine(recipe.doctrine_version)
    recorded = (manifest.get("doctrine") or {}).get("sha256")
    if recorded and recorded != doc.sha256:
        raise RescoreError(f"{src} was run under doctrine sha256 {recorded[:12]}, this checkout has "
                           f"{doc.sha256[:12]}: the scorer's thresholds differ; rerun the eval instead")
    if base_dir is None:  # where the eval resolved the recipe's relative paths (older runs: here)
        base_dir = manifest.get("recipe_dir") or Path.cwd()
    try:
        jobs = {(j.arm, j.case_id, j.seed): j for j in plan(recipe, Path(base_dir))}
    except OSError as exc:
        raise RescoreError(f"{src}: the recipe's inputs are not where the eval found them ({exc.strerror}: "
                           f"{exc.filename}); pass --data-dir, or rerun from the folder the eval ran in") from None
    claim_run_folder(out, "eval", writes=("cases",))
    atomic_write_json(confined_path(out, RESCORE_FILE), {"source": str(src.resolve())})

    def at(rel: Path | str) -> Path:  # every write lands inside out, never through a link
        target = confined_path(out, rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    summary = RescoreSummary()
    names: list[str] = []
    for path in sorted(src.glob("cases/*/*.json")):
        rel = path.relative_to(src)
        try:
            result = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            summary.skipped.append(f"{rel}: unreadable ({exc})")
            continue
        summary.cases += 1
        names.append(str(rel))
        job = jobs.get((result.get("arm"), result.get("case_id"), result.get("seed")))
        if result.get("workload") != "held_out" or job is None or not result.get("calls"):
            if result.get("workload") == "held_out":
                summary.skipped.append(f"{rel}: not in the recipe's plan; copied unchanged")
            shutil.copyfile(path, at(rel))
            summary.copied += 1
            continue
        try:
            comp = _recorded_completion(result["calls"][0])
        except ValueError as exc:
            summary.skipped.append(f"{rel}: {exc}; copied unchanged")
            shutil.copyfile(path, at(rel))
            summary.copied += 1
            continue
        ctx = RunContext(None, doc, window=job.window, horizon=recipe.horizon, max_tokens=recipe.max_tokens,
                         arm_settings=recipe.arm_settings, kernel_overrides=recipe.kernel, gate=recipe.gate,
                         host=recipe.host, nudge_style=recipe.nudge_style, tool_parser=recipe.tool_parser)
        row = job.case.payload
        train = job.wl.train_targets() if hasattr(job.wl, "train_targets") else None
        scores = score_decision_reply(row, decision_for(row, job.arm, ctx), comp, doc, train)
        kernel_messages = scores.pop("kernel_messages", [])
        old = result["metrics"]
        new = {**scores, **_kept_from_call(old)}
        changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        for k in changed:
            summary.changes[k] = summary.changes.get(k, 0) + 1
        summary.changed += bool(changed)
        result["metrics"] = new
        result["calls"][0]["kernel_errors"] = kernel_messages
        result["rescored"] = {"from": str(path), "changed": changed}
        atomic_write_json(at(case_path(out, job.arm, job.case_id, job.seed).relative_to(out)), result)
        summary.rescored += 1
    if (src / RECIPE_FILE).is_file():
        shutil.copyfile(src / RECIPE_FILE, at(RECIPE_FILE))
    counts = {"cases": summary.cases, "rescored": summary.rescored, "copied": summary.copied,
              "changed": summary.changed, **{f"changed.{k}": v for k, v in sorted(summary.changes.items())}}
    standard = {"format", "version", "stage", "created_at", "wall_time_s", "git_revision", "packages", "command",
                "config", "doctrine", "inputs", "counts", "cases"}
    extra = {key: value for key, value in manifest.items() if key not in standard}
    write_manifest(out, stage="eval", config=recipe, doctrine=doc.to_manifest(), inputs={"rescored_from": src},
                   counts=counts, extra={**extra, "rescored_from": str(src), "skipped": summary.skipped,
                                         "cases": names}, started_at=started)
    log(f"rescore: {summary.rescored} held-out cases re-scored ({summary.changed} changed), "
        f"{summary.copied} copied, {len(summary.skipped)} noted; {out}")
    return summary
