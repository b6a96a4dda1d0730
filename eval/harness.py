"""The resumable eval harness: (arm x case x window x seed) jobs with bounded concurrency.

Layout under the output folder (``runs/<name>/eval``)::

    cases/<arm>/<case_id>__s<seed>.json   one per finished job, written atomically
    status.json                           progress; "complete" stays false until all are done
    manifest.json                         written last, only when every job is done

A killed run restarted with the same command skips the jobs whose case file is there and
runs the rest. A job that fails (the backend is unusable, a bug) writes nothing: the run
stays incomplete, the command exits non-zero, and a rerun retries it. Malformed model
output is never a failure of the job; it is counted in the call records.
"""

from __future__ import annotations

import json
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from doctrine.runs import MANIFEST, atomic_write_json, read_manifest, redact_secrets, write_manifest
from eval.backends.base import Backend, Completion, Request
from eval.recipe import EvalRecipe
from eval.workloads import WORKLOADS, Case, RunContext

__all__ = ["Job", "RunSummary", "case_path", "load_results", "plan", "run_eval"]


@dataclass
class Job:
    arm: str
    workload: str
    wl: Any
    case: Case
    window: int
    seed: int

    @property
    def case_id(self) -> str:
        return f"{self.workload}.{self.case.case_id}.w{self.window}"


@dataclass
class RunSummary:
    total: int
    done: int
    skipped: int
    ran: int
    failed: list[dict[str, str]] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.done == self.total and not self.failed


def case_path(out: Path, arm: str, case_id: str, seed: int) -> Path:
    return out / "cases" / arm / f"{case_id}__s{seed}.json"


def _finished(path: Path) -> bool:
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("status") == "done"
    except (OSError, ValueError, AttributeError):
        return False


def plan(recipe: EvalRecipe, base_dir: Path | None = None) -> list[Job]:
    """Every job of the recipe, in a stable order."""
    jobs = []
    for spec in recipe.workloads:
        wl = WORKLOADS[spec.name](spec.settings, base_dir)
        cases = wl.cases()
        for arm in recipe.arms:
            if not wl.supports(arm):
                continue
            for window in recipe.windows:
                for case in cases:
                    for seed in recipe.seeds:
                        jobs.append(Job(arm, spec.name, wl, case, window, seed))
    return jobs


class _Serialised(Backend):
    """One call at a time into an in-process engine (hf, vllm) while cases run in threads."""

    def __init__(self, inner: Backend):
        self.inner, self.name, self._lock = inner, inner.name, threading.Lock()

    def complete(self, request: Request) -> Completion:
        with self._lock:
            return self.inner.complete(request)

    def count_tokens(self, text: str) -> int:
        with self._lock:
            return self.inner.count_tokens(text)

    def stats(self) -> dict[str, Any]:
        return self.inner.stats()

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()


def _adapter_manifest(recipe: EvalRecipe) -> Path | None:
    d = recipe.backend.adapter_dir
    if d and (Path(d) / MANIFEST).is_file():
        return Path(d) / MANIFEST
    return None


def run_eval(recipe: EvalRecipe, out: str | Path, *, backend: Backend | None = None,
             base_dir: Path | None = None, max_jobs: int | None = None,
             log: Callable[[str], None] = print) -> RunSummary:
    """Run (or resume) the recipe into ``out``. ``max_jobs`` stops after that many new jobs
    (a deliberate interruption, for tests and for splitting long runs)."""
    from doctrine.spec import resolve_doctrine
    from eval.backends import make_backend

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    doc = resolve_doctrine(recipe.doctrine_version)
    jobs = plan(recipe, base_dir)
    todo = [j for j in jobs if not _finished(case_path(out, j.arm, j.case_id, j.seed))]
    skipped = len(jobs) - len(todo)
    if todo and (out / MANIFEST).exists():  # the recipe grew: the run is incomplete again
        (out / MANIFEST).unlink()
    old = read_manifest(out)
    if not todo and old is not None and old.get("config") == redact_secrets(recipe.model_dump(mode="json")):
        log(f"eval: all {len(jobs)} cases already done in {out}")
        return RunSummary(len(jobs), len(jobs), skipped, 0)
    if max_jobs is not None:
        todo = todo[:max(0, max_jobs)]
    _status(out, len(jobs), skipped, False)
    failed: list[dict[str, str]] = []
    ran = 0
    own_backend = backend is None
    describe: dict[str, Any] = backend.describe() if backend is not None else {"backend": recipe.backend.name}
    if todo:
        be = backend or make_backend(recipe.backend.name, recipe.backend.factory_settings())
        describe = be.describe()
        if be.name in ("hf", "vllm") and recipe.concurrency > 1:
            be = _Serialised(be)
        done_lock = threading.Lock()

        def one(job: Job) -> None:
            ctx = RunContext(be, doc, window=job.window, horizon=recipe.horizon, max_tokens=recipe.max_tokens,
                             arm_settings=recipe.arm_settings, kernel_overrides=recipe.kernel, gate=recipe.gate)
            before = be.stats() if recipe.concurrency == 1 else {}
            t0 = time.time()
            result = job.wl.run_case(job.case, job.arm, job.seed, ctx)
            after = be.stats() if recipe.concurrency == 1 else {}
            for key in ("prefix_cache_hits", "prefix_cache_queries"):
                if key in after:
                    result["metrics"][key] = after[key] - before.get(key, 0.0)
            result.update(status="done", arm=job.arm, case_id=job.case_id, seed=job.seed, window=job.window,
                          doctrine={"version": doc.version, "sha256": doc.sha256},
                          started_at=t0, wall_s=round(time.time() - t0, 3))
            atomic_write_json(case_path(out, job.arm, job.case_id, job.seed), result)

        log(f"eval: {len(todo)} cases to run ({skipped} already done) with the {be.name} backend")
        with ThreadPoolExecutor(max_workers=recipe.concurrency) as pool, \
                _progress(len(jobs), skipped) as bar:
            futures = {pool.submit(one, j): j for j in todo}
            for fut in as_completed(futures):
                job = futures[fut]
                try:
                    fut.result()
                    with done_lock:
                        ran += 1
                        _status(out, len(jobs), skipped + ran, False)
                    bar.set_postfix_str(f"{job.arm} {job.workload}", refresh=False)
                except Exception as exc:  # noqa: BLE001 - one failed job must not lose the others
                    failed.append({"arm": job.arm, "case_id": job.case_id, "seed": str(job.seed),
                                   "error": f"{type(exc).__name__}: {exc}"})
                    log(f"eval: case {job.arm}/{job.case_id} s{job.seed} failed: {exc}")
                    log(traceback.format_exc(limit=3))
                bar.update(1)
        if own_backend:
            be.close()
    summary = RunSummary(len(jobs), skipped + ran, skipped, ran, failed)
    _status(out, len(jobs), summary.done, summary.complete, failed)
    if summary.complete:
        counts: dict[str, Any] = {"cases": len(jobs)}
        for j in jobs:
            counts[f"arm.{j.arm}"] = counts.get(f"arm.{j.arm}", 0) + 1
        inputs = {}
        adapter = _adapter_manifest(recipe)
        if adapter:
            inputs["adapter"] = adapter
        write_manifest(out, stage="eval", config=recipe, doctrine=doc.to_manifest(), inputs=inputs,
                       counts=counts, extra={"backend": describe}, started_at=started)
        log(f"eval: complete, {len(jobs)} cases in {out}")
    else:
        log(f"eval: incomplete, {summary.done}/{len(jobs)} cases done ({len(failed)} failed); rerun to resume")
    return summary


def _progress(total: int, done: int):
    """A tqdm bar over cases (stderr; one line per update when not a terminal)."""
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=done, desc="eval cases", unit="case", mininterval=1.0)


def _status(out: Path, total: int, done: int, complete: bool, failed: list | None = None) -> None:
    atomic_write_json(out / "status.json", {"total": total, "done": done, "complete": complete,
                                            "failed": failed or []})


def load_results(out: str | Path) -> list[dict[str, Any]]:
    """Every finished case result under ``out/cases`` (unreadable files are skipped)."""
    rows = []
    for p in sorted(Path(out).glob("cases/*/*.json")):
        try:
            r = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(r, dict) and r.get("status") == "done":
            rows.append(r)
    return rows
