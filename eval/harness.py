"""The resumable eval harness: (arm x case x window x seed) jobs with bounded concurrency.

Layout under the output folder (``runs/<name>/eval``)::

    cases/<arm>/<case_id>__s<seed>.json   one per finished job, written atomically
    status.json                           progress; "complete" stays false until all are done
    recipe.json                           the run's fingerprint and its plan (the case files it lists)
    .dtw-stage.json                       marks the folder as an eval run's (plumbing.runs)
    .lock                                 flock'ed while a run writes here
    manifest.json                         written last, only when every job is done; lists the case files

The fingerprint is what a case is computed from: the recipe (less the fields that only
select cases), the doctrine's hash, the content of the files the workloads read (the
held-out shards under ``data_dir``, session files), the adapter's weights and config and the
backend settings. Each case file carries its workload's stamp of it. A killed run restarted
with the same command skips the jobs whose case file is there under the current stamp and
runs the rest. A rerun may add arms, windows, seeds or workloads; one whose fingerprint
differs otherwise (gate, max_tokens, backend, a workload's settings, rebuilt data, another
doctrine or adapter) is refused with the differences listed, so old results are never
reported under new inputs; ``--force`` deletes the case files the harness wrote (its own
names under ``cases/<arm>/``, nothing else) and starts afresh. A job that fails (the backend is unusable, a bug) writes nothing: the run
stays incomplete, the command exits non-zero, and a rerun retries it. Malformed model
output is never a failure of the job; it is counted in the call records.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval.backends.batching import MicroBatcher
from eval.recipe import ArmSettings, EvalRecipe
from eval.workloads import WORKLOADS, Case, RunContext
from plumbing.chat_backend import Backend
from plumbing.runs import (
    MANIFEST,
    RUN_MARKER,
    RunFolderError,
    atomic_write_json,
    claim_run_folder,
    confined_path,
    disk_full,
    fingerprint_differences,
    fingerprint_sha256,
    nonfinite_to_null,
    paths_sha256,
    redact_secrets,
    remove_own_files,
    write_manifest,
)

__all__ = ["CaseFileError", "Job", "RunConflict", "RunSummary", "case_path", "load_results", "plan", "run_eval"]


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


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def safe_name(name: str, limit: int = 120) -> str:
    """``name`` as one file-name component: characters outside ``[A-Za-z0-9._-]`` become
    ``_``; a name that had to change (or was too long) gets a short hash of the original,
    so distinct names stay distinct."""
    safe = _UNSAFE.sub("_", name).lstrip(".") or "_"
    if safe == name and len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{safe[:limit]}-{digest}"


def case_path(out: Path, arm: str, case_id: str, seed: int) -> Path:
    """``out/cases/<arm>/<case_id>__s<seed>.json`` with both names made safe; a path through
    a symbolic link (a linked ``cases/`` or arm folder) is refused
    (:func:`plumbing.runs.confined_path`, a :class:`RunFolderError`)."""
    out = Path(out)
    return confined_path(out, Path("cases") / safe_name(arm) / f"{safe_name(case_id)}__s{int(seed)}.json")


# The names case_path gives: what --force may delete under cases/<arm>/.
CASE_FILE = re.compile(r"[A-Za-z0-9._-]+__s-?[0-9]+\.json")


def _finished(path: Path, stamp: str | None = None) -> bool:
    """A finished case file (under ``stamp``, the fingerprint of its workload, when given)."""
    try:
        r = json.loads(path.read_text(encoding="utf-8"))
        return r.get("status") == "done" and (stamp is None or r.get("fingerprint") == stamp)
    except (OSError, ValueError, AttributeError):
        return False


def plan(recipe: EvalRecipe, base_dir: Path | None = None) -> list[Job]:
    """Every job of the recipe, in a stable order."""
    jobs = []
    for spec in recipe.workloads:
        wl = WORKLOADS[spec.name](spec.settings, base_dir)
        cases = wl.cases()
        for arm in recipe.arms:
            if not wl.supports(arm) or (spec.arms is not None and arm not in spec.arms):
                continue
            for window in recipe.windows:
                for case in cases:
                    for seed in recipe.seeds:
                        jobs.append(Job(arm, spec.name, wl, case, window, seed))
    return jobs


def serving_profiles(recipe: EvalRecipe) -> dict[str, Any]:
    """The profiles the kernel arms run under, per arm and window, and (with an adapter) the
    check of the distilled arm's profiles against the ones the adapter was trained with."""
    from eval.arms import arm_profile

    per_arm: dict[str, dict[str, str]] = {}
    profiles = []
    for arm in recipe.arms:
        for w in recipe.windows:
            p = arm_profile(arm, w, recipe.gate, recipe.host, recipe.nudge_style, recipe.kernel)
            if p is not None:
                per_arm.setdefault(arm, {})[str(w)] = p.sha256
                profiles.append(p)
    from doctrine.kernel.profile import unique_records

    out: dict[str, Any] = {"serving_profiles": unique_records(profiles), "arm_profiles": per_arm}
    trained = _trained_profiles(recipe)
    if trained is None and "distilled" in per_arm and _adapter_manifest(recipe) is not None:
        out["adapter_profiles"] = "not recorded"
    if trained is not None and "distilled" in per_arm:
        missing = sorted(w for w, h in per_arm["distilled"].items() if h not in trained)
        out["adapter_profiles"] = sorted(trained)
        out["profile_mismatch"] = [{"arm": "distilled", "window": int(w), "sha256": per_arm["distilled"][w]}
                                   for w in missing]
        if missing and not recipe.allow_profile_mismatch:
            raise RunConflict(
                f"the distilled arm would run under serving profile(s) the adapter was not trained with "
                f"(window {', '.join(missing)}, gate {recipe.gate!r}, host {recipe.host!r}); trained: "
                f"{len(trained)} profile(s) listed in {_adapter_manifest(recipe)}. Match the recipe's windows, "
                f"gate and host to the data recipe, or set allow_profile_mismatch: true")
    return out


def _trained_profiles(recipe: EvalRecipe) -> set[str] | None:
    """Hashes of the profiles the adapter's curriculum was built with (None: not recorded)."""
    path = _adapter_manifest(recipe)
    if path is None:
        return None
    try:
        m = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    recs = (m.get("adapter") or {}).get("serving_profiles")
    hashes = {r.get("sha256") for r in recs if isinstance(r, dict) and r.get("sha256")} if isinstance(recs, list) else set()
    # An adapter trained on data that recorded no profiles (an older build, hand-made rows)
    # cannot be checked: the manifest then says "adapter_profiles": "not recorded".
    return hashes or None


def _adapter_manifest(recipe: EvalRecipe) -> Path | None:
    d = recipe.backend.adapter_dir
    if d and (Path(d) / MANIFEST).is_file():
        return Path(d) / MANIFEST
    return None


RECIPE_FILE = "recipe.json"
LOCK_FILE = ".lock"
# Fields that only choose which cases run (or how fast, or how they are reported): a rerun
# may change them and resume; every other field changes what a case computes.
_SELECTION = ("name", "arms", "windows", "seeds", "concurrency", "output", "non_inferiority")


class RunConflict(ValueError):
    """The run folder belongs to another recipe, or another run is writing into it."""


def recipe_fingerprint(recipe: EvalRecipe) -> dict[str, Any]:
    """The part of the resolved recipe that decides a case's result (secrets redacted);
    workloads by name, so a rerun may add one."""
    cfg = redact_secrets(recipe.model_dump(mode="json"))
    fp = {k: v for k, v in cfg.items() if k not in _SELECTION and k != "workloads"}
    fp["workloads"] = {w["name"]: w["settings"] for w in cfg["workloads"]}
    return fp


# Settings that name what a workload reads from disk (held_out: data_dir/<split>; scripted:
# sessions; probes: source). A name that is not a local path (a hub id) counts by its name.
_INPUT_KEYS = ("data_dir", "sessions", "source")


def _input_paths(settings: dict[str, Any], base_dir: Path | None) -> list[Path]:
    paths = []
    for key in _INPUT_KEYS:
        value = settings.get(key)
        for item in [value] if isinstance(value, str) else (value or []):
            p = Path(str(item))
            if not p.is_absolute() and base_dir is not None and not p.exists():
                p = base_dir / p  # as the workloads resolve it
            paths.append(p / str(settings.get("split", "test")) if key == "data_dir" else p)
    return paths


def _adapter_identity(recipe: EvalRecipe) -> str | None:
    """sha256 of every file of the adapter folder (weights in any format, config, tokenizer,
    template; its manifest and subfolders left out, so a re-export of the same weights keeps
    it). None: no adapter in this run."""
    d = recipe.backend.adapter_dir
    if not d:
        return None
    folder = Path(d)
    files = sorted(f for f in folder.iterdir() if f.is_file() and f.name not in (MANIFEST, RUN_MARKER)
                   and not f.name.startswith((".tmp-", ".lock"))) if folder.is_dir() else []
    return paths_sha256(files or [folder])


def adapter_input(recipe: EvalRecipe) -> Path | None:
    """The file identifying the adapter this run loads, after checking the folder is a finished,
    valid adapter (:func:`plumbing.adapters.complete_adapter`: an adapter without its manifest,
    truncated or inconsistent weights are one line, before anything is written). None when no
    arm and no backend loads one."""
    from eval.arms import ARM_INFO
    from plumbing.adapters import complete_adapter

    d = recipe.backend.adapter_dir
    uses = recipe.backend.name in ("hf", "vllm") or any(
        getattr(ARM_INFO.get(a), "use_adapter", False) for a in recipe.arms)
    if not d or not uses:
        return None
    return complete_adapter(Path(d))


def run_fingerprint(recipe: EvalRecipe, base_dir: Path | None = None, doctrine: Any = None) -> dict[str, Any]:
    """What the run's cases are computed from: :func:`recipe_fingerprint` (the model spec and
    backend settings are in it), the doctrine's hash, the content of every workload's input
    files and the adapter's (shown in refusals as ``key: old -> new``)."""
    from doctrine.spec import resolve_doctrine

    doc = doctrine or resolve_doctrine(recipe.doctrine_version)
    fp = recipe_fingerprint(recipe)
    fp["doctrine_sha256"] = doc.sha256
    fp["data"] = {w.name: paths_sha256(_input_paths(w.settings, base_dir)) for w in recipe.workloads}
    fp["adapter_sha256"] = _adapter_identity(recipe)
    return fp


def _stamps(fp: dict[str, Any]) -> dict[str, str]:
    """Per workload, the hash of what its cases depend on (the shared part, its settings, its data)."""
    shared = {k: v for k, v in fp.items() if k not in ("workloads", "data")}
    return {name: fingerprint_sha256({**shared, "settings": settings, "data": fp.get("data", {}).get(name)})
            for name, settings in fp["workloads"].items()}


def _differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """``key: old -> new`` for each difference; workloads (and their data) only where both have them."""
    per = ("workloads", "data")
    diffs = fingerprint_differences({k: v for k, v in old.items() if k not in per},
                                    {k: v for k, v in new.items() if k not in per})
    for key in per:
        a, b = old.get(key) or {}, new.get(key) or {}
        for name in sorted(set(a) & set(b)):
            if a[name] != b[name]:
                diffs += [f"workloads.{name}.{d}" if key == "workloads" else f"data of {name}: {d.split(': ', 1)[1]}"
                          for d in fingerprint_differences({"x": a[name]}, {"x": b[name]})]
    return diffs


def _selection(recipe: EvalRecipe) -> dict[str, Any]:
    cfg = recipe.model_dump(mode="json")
    return {k: cfg.get(k) for k in _SELECTION}


def _recorded(out: Path) -> dict[str, Any] | None:
    """What the folder's last run recorded in ``recipe.json``: its fingerprint and selection
    (None: no run yet); an unreadable file is a :class:`RunConflict`."""
    path = out / RECIPE_FILE
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
        return {"fingerprint": dict(rec["fingerprint"]), "selection": rec.get("selection")}
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        raise RunConflict(f"{path} is unreadable; use a new --out, or --force to start this one afresh") from None


def _decide(out: Path, new: dict[str, Any], recipe: EvalRecipe, force: bool):
    """The stage decision (:func:`plumbing.stage.decide`) for an eval folder: a rerun may add
    arms, windows, seeds or workloads and resume; any other change is refused."""
    from plumbing.stage import decide

    recorded = None if force else _recorded(out)
    return decide(out, {"fingerprint": new, "selection": _selection(recipe)}, name="eval", force=force,
                  resumable=True, recorded=recorded,
                  partial=(out / RECIPE_FILE).exists() or (out / "cases").exists(),
                  differences=lambda old, now: _differences(old["fingerprint"], now["fingerprint"]),
                  hint="use a new --out, or --force to discard its cases")


def _record(out: Path, recipe: EvalRecipe, new: dict[str, Any], old: dict[str, Any] | None,
            jobs: list[Job]) -> dict[str, str]:
    """Record the run's fingerprint (with the workloads an earlier run of the folder added),
    selection and plan in ``out/recipe.json``. Returns the per-workload stamps."""
    if old is not None:
        new = {**new, "workloads": {**old.get("workloads", {}), **new["workloads"]},
               "data": {**(old.get("data") or {}), **new["data"]}}
    # What the report needs of the recipe besides the cases (report-only settings).
    report = {"non_inferiority": cfg_ni} if (cfg_ni := recipe.model_dump(mode="json").get("non_inferiority")) else {}
    stamps = _stamps(new)
    planned = [_relative(out, j) for j in jobs]
    atomic_write_json(out / RECIPE_FILE, {"sha256": fingerprint_sha256(new), "fingerprint": new,
                                          "selection": _selection(recipe), "report": report, "stamps": stamps,
                                          "plan": planned})
    return stamps


def _relative(out: Path, job: Job) -> str:
    return case_path(out, job.arm, job.case_id, job.seed).relative_to(out).as_posix()


@contextmanager
def _run_lock(out: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``out/.lock`` for the whole run: a second run into the same
    folder fails at once instead of computing every case twice."""
    import fcntl

    with open(out / LOCK_FILE, "a+", encoding="utf-8") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunConflict(f"another eval run is writing into {out} (it holds {out / LOCK_FILE}); "
                              "wait for it to finish or use another --out") from None
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _discard(out: Path) -> None:
    """``--force``: drop the folder's results, only the files a run writes (case files by
    their names under ``cases/<arm>/``, the manifest, status and recipe files); any other
    file stays, and a link is never followed."""
    cases = out / "cases"
    if cases.is_dir() and not cases.is_symlink():
        for arm in sorted(cases.iterdir()):
            if arm.is_dir() or arm.is_symlink():
                try:
                    remove_own_files(arm, CASE_FILE, out)
                except RunFolderError as exc:
                    raise RunConflict(str(exc)) from None
                if not arm.is_symlink() and not any(arm.iterdir()):
                    arm.rmdir()
        if not any(cases.iterdir()):
            cases.rmdir()
    for name in (MANIFEST, "status.json", RECIPE_FILE):
        (out / name).unlink(missing_ok=True)


def run_eval(recipe: EvalRecipe, out: str | Path, *, backend: Backend | None = None,
             base_dir: Path | None = None, max_jobs: int | None = None,
             log: Callable[[str], None] = print, force: bool = False) -> RunSummary:
    """Run (or resume) the recipe into ``out``. ``max_jobs`` stops after that many new jobs
    (a deliberate interruption, for tests and for splitting long runs). A folder that holds
    cases of a different recipe is refused (:class:`RunConflict`) unless ``force``, which
    discards them first; a second run into a folder in use is refused."""
    out = Path(out)
    adapter = adapter_input(recipe)  # an unfinished or broken adapter is refused before any write
    try:  # a folder of the user's (or a linked cases/ folder) is refused before anything is written
        claim_run_folder(out, "eval", writes=("cases",), legacy=("status.json", RECIPE_FILE, LOCK_FILE))
    except RunFolderError as exc:
        raise RunConflict(str(exc)) from None
    config = recipe.model_dump(mode="json")
    plain_log = log

    def log(line: str) -> None:  # a key a server echoes in an error never reaches stderr
        plain_log(redact_secrets(line, config=config))

    from doctrine.spec import resolve_doctrine

    with _run_lock(out):
        doc = resolve_doctrine(recipe.doctrine_version)
        jobs = plan(recipe, base_dir)
        if not jobs:  # "complete" must mean something was done
            raise ValueError(f"the recipe plans no case: none of its workloads ({', '.join(w.name for w in recipe.workloads)}) "
                             f"has a case it runs on the arms {recipe.arms}; nothing was run or marked complete")
        new = run_fingerprint(recipe, base_dir, doc)
        decision = _decide(out, new, recipe, force)
        if decision.action == "refuse":
            raise RunConflict(decision.reason)
        if decision.fresh:
            _discard(out)
        if decision.action == "skip" and not _todo(out, jobs, _stamps(new)):
            log(f"eval: all {len(jobs)} cases already done in {out}")
            return RunSummary(len(jobs), len(jobs), len(jobs), 0)
        recorded = _recorded(out) if decision.action != "start" else None
        stamps = _record(out, recipe, new, (recorded or {}).get("fingerprint"), jobs)
        return _run_locked(recipe, out, jobs, stamps, doc, backend=backend, max_jobs=max_jobs, log=log,
                           adapter=adapter, base_dir=base_dir)


def _todo(out: Path, jobs: list[Job], stamps: dict[str, str]) -> list[Job]:
    """The jobs without a finished case file under their workload's current stamp."""
    return [j for j in jobs if not _finished(case_path(out, j.arm, j.case_id, j.seed), stamps[j.workload])]


def _run_locked(recipe: EvalRecipe, out: Path, jobs: list[Job], stamps: dict[str, str], doc: Any, *,
                backend: Backend | None, max_jobs: int | None, log: Callable[[str], None],
                adapter: Path | None = None, base_dir: Path | None = None) -> RunSummary:
    from eval.backends import make_backend

    started = time.time()
    profiles = serving_profiles(recipe)  # before any case: a profile the adapter never saw fails here
    if profiles.get("profile_mismatch"):
        log(f"eval: warning: the distilled arm runs under {len(profiles['profile_mismatch'])} serving "
            f"profile(s) the adapter was not trained with (allow_profile_mismatch: true)")
    todo = _todo(out, jobs, stamps)
    skipped = len(jobs) - len(todo)
    (out / MANIFEST).unlink(missing_ok=True)  # incomplete until the manifest is written again, last
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
        engine = be
        if be.name in ("hf", "vllm") and recipe.concurrency > 1:
            # In-process engines take one thread at a time. vLLM schedules a batch itself, so the
            # waiting threads' calls go to it together; the hf backend answers them one by one
            # (a left-padded batch of 3-5K-token prompts was 2.3x slower on 2 CPU cores than the
            # same four calls in turn, see eval.backends.batching).
            be = MicroBatcher(engine, max_batch=recipe.concurrency if be.name == "vllm" else 1)
        done_lock = threading.Lock()
        reference = reference_backend(engine) if any(_is_reference(j.arm) for j in todo) else None

        def one(job: Job) -> None:
            ctx = RunContext(reference if _is_reference(job.arm) else be, doc, window=job.window, horizon=recipe.horizon, max_tokens=recipe.max_tokens,
                             arm_settings=recipe.arm_settings, kernel_overrides=recipe.kernel, gate=recipe.gate,
                             host=recipe.host, nudge_style=recipe.nudge_style, tool_parser=recipe.tool_parser)
            before = be.stats() if recipe.concurrency == 1 else {}
            t0 = time.time()
            result = job.wl.run_case(job.case, job.arm, job.seed, ctx)
            after = be.stats() if recipe.concurrency == 1 else {}
            for key in ("prefix_cache_hits", "prefix_cache_queries"):
                if key in after:
                    result["metrics"][key] = after[key] - before.get(key, 0.0)
            result.update(status="done", arm=job.arm, case_id=job.case_id, seed=job.seed, window=job.window,
                          doctrine={"version": doc.version, "sha256": doc.sha256},
                          fingerprint=stamps[job.workload], started_at=t0, wall_s=round(time.time() - t0, 3))
            # A metric that came out NaN or infinite was not measured: null in strict JSON, listed.
            result, nulls = nonfinite_to_null(result)
            if nulls:
                result["nonfinite_as_null"] = nulls
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
                    if disk_full(exc):  # ... but a full disk fails every one: stop, in one line
                        pool.shutdown(wait=False, cancel_futures=True)
                        raise
                    failed.append(redact_secrets({"arm": job.arm, "case_id": job.case_id, "seed": str(job.seed),
                                                  "error": f"{type(exc).__name__}: {exc}"}, config=recipe))
                    log(f"eval: case {job.arm}/{job.case_id} s{job.seed} failed: {exc}")
                    log(traceback.format_exc(limit=3))
                bar.update(1)
        if be is not engine:
            be.close()
            log(f"eval: {len(be.batches)} engine calls, batch sizes {_sizes(be.batches)}")
        if own_backend:
            engine.close()
    summary = RunSummary(len(jobs), skipped + ran, skipped, ran, failed)
    _status(out, len(jobs), summary.done, summary.complete, failed)
    if summary.complete:
        counts: dict[str, Any] = {"cases": len(jobs)}
        for j in jobs:
            counts[f"arm.{j.arm}"] = counts.get(f"arm.{j.arm}", 0) + 1
        inputs = {"adapter": adapter} if adapter else {}  # the adapter's manifest (or checkpoint weights)
        write_manifest(out, stage="eval", config=recipe, doctrine=doc.to_manifest(), inputs=inputs,
                       counts=counts, extra={"backend": describe, **profiles,
                                             # every ArmSettings value the arms ran with, defaults included
                                             "arm_settings": ArmSettings.model_validate(recipe.arm_settings)
                                             .model_dump(mode="json"),
                                             "cases": [_relative(out, j) for j in jobs],
                                             # where the recipe's relative paths resolve (dtw rescore)
                                             "recipe_dir": str(Path(base_dir).resolve()) if base_dir else None},
                       started_at=started)
        log(f"eval: complete, {len(jobs)} cases in {out}")
    else:
        log(f"eval: incomplete, {summary.done}/{len(jobs)} cases done ({len(failed)} failed); rerun to resume")
    return summary


def _is_reference(arm: str) -> bool:
    from eval.arms import ARM_INFO

    info = ARM_INFO.get(arm)
    return bool(info and info.reference)


def reference_backend(engine: Backend) -> Backend:
    """The oracle policy for reference arms (``oracle``), counting tokens with ``engine``'s
    tokenizer so its billed tokens and context sizes sit on the model arms' scale."""
    from eval.backends.oracle import OracleBackend

    ref = OracleBackend()
    if engine.name != "oracle":
        ref.count_tokens = engine.count_tokens  # type: ignore[method-assign]
    return ref


def _sizes(batches: list[int]) -> str:
    return ", ".join(f"{n}x{c}" for n, c in sorted(Counter(batches).items())) or "none"


def _progress(total: int, done: int):
    """A tqdm bar over cases (stderr; one line per update when not a terminal)."""
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=done, desc="eval cases", unit="case", mininterval=1.0)


def _status(out: Path, total: int, done: int, complete: bool, failed: list | None = None) -> None:
    atomic_write_json(out / "status.json", {"total": total, "done": done, "complete": complete,
                                            "failed": failed or []})


def run_plan(out: str | Path) -> tuple[list[str], dict[str, str]] | None:
    """The case files (relative to ``out``) the last run planned and its per-workload stamps,
    from ``recipe.json``; None for a folder without one (made by hand or by an older run)."""
    try:
        rec = json.loads((Path(out) / RECIPE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(rec, dict) or not isinstance(rec.get("plan"), list):
        return None
    return [str(p) for p in rec["plan"]], dict(rec.get("stamps") or {})


class CaseFileError(ValueError):
    """A finished case file whose fields are not what the harness writes (hand-edited, forged)."""


def _case_problem(r: dict[str, Any]) -> str | None:
    """Why a finished case result cannot be aggregated, or None."""
    for key in ("arm", "workload", "case_id"):
        if not isinstance(r.get(key), str):
            return f"{key} is not a string"
    for key in ("seed", "window"):
        if key in r and (isinstance(r[key], bool) or not isinstance(r[key], int)):
            return f"{key} is not an integer"
    if not isinstance(r.get("metrics"), dict):
        return "metrics is not a mapping"
    calls = r.get("calls", [])
    if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
        return "calls is not a list of mappings"
    if not isinstance(r.get("meta", {}), (dict, type(None))):
        return "meta is not a mapping"
    return None


def load_results(out: str | Path) -> list[dict[str, Any]]:
    """Every finished case result of the run's plan (unreadable files are skipped): a case
    file the plan does not list (another recipe's, another dataset's ids) or one computed
    under another fingerprint is left out. A folder without a recorded plan: every case file.
    A finished one with fields of the wrong type is a :class:`CaseFileError` naming it; a NaN
    or infinite number in one is read as a missing value (None)."""
    out = Path(out)
    planned = run_plan(out)
    paths = [out / p for p in planned[0]] if planned else sorted(out.glob("cases/*/*.json"))
    stamps = set(planned[1].values()) if planned else set()
    rows = []
    for p in paths:
        try:
            r = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(r, dict) or r.get("status") != "done":
            continue
        if stamps and r.get("fingerprint") not in stamps:
            continue
        problem = _case_problem(r)
        if problem:
            raise CaseFileError(f"{p}: not a case file the harness wrote ({problem}); delete it and rerun "
                                "the eval to recompute that case")
        rows.append(nonfinite_to_null(r)[0])
    return rows
