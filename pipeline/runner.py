"""Run a pipeline recipe stage by stage: ``dtw run RECIPE.yaml`` (or ``python -m pipeline RECIPE.yaml``).

    dtw run configs/pipeline/demo.yaml            # what `make demo` runs
    dtw run configs/pipeline/demo.yaml run_name=x  # dotted overrides
    dtw run configs/pipeline/demo.yaml --print-config
    dtw run configs/pipeline/demo.yaml --force doctrine  # redo a stage

Each stage writes into ``runs/<run_name>/<stage>/`` and, last, its ``manifest.json``; a
stage whose manifest exists is skipped when it was computed from the same inputs, so a
rerun resumes where the last one stopped. A stage's inputs are its fingerprint
(:func:`stage_fingerprint`, kept in ``runs/<run_name>/fingerprints.json``): its recipe after
the pipeline's overrides and the content hashes of the manifests of the stages before it.
A complete stage whose fingerprint changed (another data recipe, model, doctrine...) is
refused with the differences listed; ``--force STAGE`` reruns it and every stage after it
(a name that is no stage, or a stage the recipe does not run, is refused with a suggestion),
and a stage whose inputs were rebuilt in the same invocation reruns by itself. ``run_name``
names one folder under ``runs_dir`` (:func:`plumbing.runs.run_name_error`: no path, no ``..``).
Stages that need torch are run in their own process with the command they print, so the
commands in the output are the commands a user can run by hand.

The pipeline, not the stage recipes, says where a stage's inputs are: every stage command
carries this run's paths and the pipeline's model and doctrine version as overrides
(:func:`stage_overrides`), so a renamed run (``run_name=try2``) trains on, exports and
evaluates its own ``runs/try2/`` folders. The paths a stage recipe names itself are only
the defaults of running that stage by hand. Before any stage runs, every stage recipe is
loaded with those overrides, so a bad recipe fails in seconds rather than after training.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from eval.glance import print_results
from pipeline.recipe import PipelineConfig, import_schema
from plumbing.recipe_loader import ConfigError, load_config
from plumbing.runs import (
    MANIFEST,
    STAGES,
    RunDir,
    RunFolderError,
    atomic_write_json,
    atomic_write_text,
    claim_run_folder,
    fingerprint_differences,
    fingerprint_sha256,
    manifest_content_sha256,
    redact_secrets,
    run_root,
    stage_dir,
    write_manifest,
)


def run_doctrine_stage(cfg: PipelineConfig, out: Path) -> dict:
    """Resolve the doctrine and write what every later stage and a reader needs:
    the rendered system prompts and tool schemas of both modes, and the hash."""
    from doctrine.render.prompts import (
        EXAMPLE_VIEWS,
        render_nudge,
        render_system_prompt,
        tool_schemas,
    )
    from doctrine.spec import resolve_doctrine

    doc = resolve_doctrine(cfg.doctrine_version)
    counts = {}
    for mode in ("doctrine", "distilled"):
        system = render_system_prompt(doc, mode)
        atomic_write_text(out / f"system-{mode}.md", system)
        atomic_write_json(out / f"tools-{mode}.json", tool_schemas(doc, mode))
        counts[f"system_{mode}_chars"] = len(system)
        for part, view in EXAMPLE_VIEWS.items():
            text = render_nudge(view, doc, mode)
            if text is not None:
                atomic_write_text(out / f"{part}-{mode}.md", text)
    atomic_write_json(out / "doctrine.json", doc.to_manifest())
    return {"counts": counts, "doctrine": doc.to_manifest()}


def stage_overrides(cfg: PipelineConfig, stage: str, run: Path) -> list[str]:
    """The dotted overrides that point ``stage``'s recipe at this run: its input folders
    (data, adapter), the model and the doctrine version of the pipeline."""
    if stage == "data":
        return [f"doctrine_version={cfg.doctrine_version}"]
    if stage == "train":
        return [f"data.dir={stage_dir(run, 'data')}", f"model.spec={cfg.model}"]
    if stage == "eval":
        return [f"data_dir={stage_dir(run, 'data')}", f"backend.adapter_dir={stage_dir(run, 'adapter')}",
                f"backend.model={cfg.model}",
                f"doctrine_version={cfg.doctrine_version}"]
    return []


# The recipe each stage that has one reads: (PipelineConfig field, its SCHEMAS key).
STAGE_RECIPES = {"data": ("data_recipe", "data"), "train": ("train_recipe", "train"), "eval": ("eval_recipe", "eval")}


def check_stage_recipes(cfg: PipelineConfig, run: Path) -> dict[str, dict]:
    """Load every stage recipe the pipeline will run with its overrides; a ConfigError names
    the stage and the key, before the first stage starts. Returns each resolved recipe (as
    JSON, secrets redacted): what the stage's fingerprint records."""
    resolved: dict[str, dict] = {}
    for stage in cfg.stages:
        if stage not in STAGE_RECIPES:
            continue
        key, kind = STAGE_RECIPES[stage]
        recipe = _need(getattr(cfg, key), key)
        try:
            loaded = load_config(recipe, import_schema(kind), stage_overrides(cfg, stage, run))
        except ConfigError as exc:
            lines = "; ".join(line.strip() for line in str(exc).splitlines())  # one line
            raise ConfigError(f"{stage} stage ({key}): {lines}") from None
        resolved[stage] = redact_secrets(loaded.model_dump(mode="json"))
    return resolved


FINGERPRINTS = "fingerprints.json"


def stage_fingerprint(cfg: PipelineConfig, stage: str, run: RunDir, recipes: dict[str, dict]) -> dict:
    """What ``stage``'s result is computed from: its recipe after the pipeline's overrides
    (the model and doctrine version are in them), the doctrine's hash for the doctrine stage,
    and the content hash of every earlier stage's manifest (None while that one is incomplete)."""
    fp: dict = {}
    if stage == "doctrine":
        from doctrine.spec import resolve_doctrine

        doc = resolve_doctrine(cfg.doctrine_version)
        fp["doctrine"] = {"version": doc.version, "sha256": doc.sha256}
    if stage in recipes:
        fp["recipe"] = recipes[stage]
    if stage == "train":
        fp["accelerate_config"] = cfg.accelerate_config
    before = cfg.stages[:cfg.stages.index(stage)]
    fp["inputs"] = {s: manifest_content_sha256(run.stage(s)) for s in before}
    return fp


def _read_fingerprints(root: Path) -> dict:
    import json

    try:
        data = json.loads((root / FINGERPRINTS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _clear_for_rerun(run: RunDir, stage: str) -> None:
    """Before a forced rerun: the stage is incomplete, and a training starts afresh (its
    checkpoints are of other inputs). Only files the stages wrote, inside the run folder."""
    import shutil

    d = run.stage(stage)
    (d / MANIFEST).unlink(missing_ok=True)
    ckpt = d / "checkpoints"
    if stage == "train" and ckpt.is_dir() and not ckpt.is_symlink() and not d.is_symlink():
        shutil.rmtree(ckpt)


def stage_command(cfg: PipelineConfig, stage: str, run: Path) -> list[str]:
    """The command line of a stage that runs in its own process (it writes its own manifest):
    ``dtw STAGE ...`` (as ``python -m pipeline.dtw``; stage ``adapter`` is ``dtw export``), and
    ``accelerate launch -m train ...`` for a training with an accelerate config."""
    dtw = [sys.executable, "-m", "pipeline.dtw"]
    over = stage_overrides(cfg, stage, run)
    if stage == "data":
        return dtw + ["data", _need(cfg.data_recipe, "data_recipe"), "--out", str(stage_dir(run, "data")), *over]
    if stage == "train":
        args = [_need(cfg.train_recipe, "train_recipe"), "--out", str(run), *over]
        if (stage_dir(run, "train") / "checkpoints").is_dir():
            args.append("--resume")  # an interrupted run continues from its latest checkpoint
        if cfg.accelerate_config:
            return [sys.executable, "-m", "accelerate.commands.launch", "--config_file", cfg.accelerate_config,
                    "-m", "train", *args]
        return dtw + ["train", *args]
    if stage == "adapter":
        return dtw + ["export", str(run)]
    if stage == "eval":
        return dtw + ["eval", _need(cfg.eval_recipe, "eval_recipe"), "--out", str(stage_dir(run, "eval")), *over]
    if stage == "report":
        # --quiet: the pipeline prints the results table itself, once, at the very end.
        return dtw + ["report", str(stage_dir(run, "eval")), "--out", str(stage_dir(run, "report")), "--quiet"]
    raise ConfigError(f"unknown stage {stage!r}")


def _need(value: str | None, key: str) -> str:
    if not value:
        raise ConfigError(f"this pipeline runs a stage that needs {key!r} in the pipeline recipe")
    return value


# Stages run in this process: name -> function(config, stage_dir) -> {"counts", "doctrine"}.
STAGE_RUNNERS: dict[str, Callable[[PipelineConfig, Path], dict]] = {
    "doctrine": run_doctrine_stage,
}


def _forced_from(cfg: PipelineConfig, force: tuple[str, ...]) -> int:
    """The index of the first stage ``--force`` reruns (that stage and every one after it);
    ``len(cfg.stages)`` when none. A name that is no stage, or a stage this recipe does not
    run, is a ConfigError (a typo must not silently rerun nothing)."""
    import difflib

    for name in force:
        if name in cfg.stages:
            continue
        if name in STAGES:
            raise ConfigError(f"--force {name}: this pipeline does not run the {name} stage; "
                              f"its stages are {', '.join(cfg.stages)}")
        close = difflib.get_close_matches(name, STAGES, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ConfigError(f"--force {name!r} is not a stage; {hint}stages are {', '.join(STAGES)}")
    return min((cfg.stages.index(s) for s in force), default=len(cfg.stages))


def _log(line: str) -> None:
    print(line, flush=True)  # stages write to the same stream from their own processes


def run_pipeline(cfg: PipelineConfig, *, force: tuple[str, ...] = (), log=_log) -> RunDir:
    try:  # a run name that is a path, or a folder of the user's, or a stage folder that is a link,
        # is refused before any stage
        root = run_root(cfg.runs_dir, cfg.run_name)
        forced_from = _forced_from(cfg, force)
        recipes = check_stage_recipes(cfg, root)
        claim_run_folder(root, "run", writes=STAGES, flag="run folder",
                         legacy=("timings.json", FINGERPRINTS, *STAGES))
    except RunFolderError as exc:
        raise ConfigError(str(exc)) from None
    run = RunDir.create(root)
    record = _read_fingerprints(root)
    timings = {}
    ran_before = False  # an earlier stage ran in this invocation: a later one whose inputs changed reruns
    for i, stage in enumerate(cfg.stages):
        fp = stage_fingerprint(cfg, stage, run, recipes)
        sha = fingerprint_sha256(fp)
        old = record.get(stage) if isinstance(record.get(stage), dict) else None
        same = old is not None and old.get("sha256") == sha
        forced = i >= forced_from
        complete = run.complete(stage)
        if not forced and not same and (complete or old is not None):
            if not ran_before:
                diffs = "; ".join(fingerprint_differences((old or {}).get("fingerprint"), fp))
                what = "was computed" if complete else "was started (interrupted)"
                raise StageFailed(f"stage {stage}: {run.stage(stage)} {what} from other inputs ({diffs}); "
                                  f"rerun with --force {stage} (reruns it and every stage after it), or use "
                                  "another run_name")
            forced = True  # its inputs were rebuilt just now
        if complete and not forced:
            log(f"[skip] {stage}: {run.stage(stage) / 'manifest.json'} exists (same inputs)")
            continue
        if forced:
            _clear_for_rerun(run, stage)
        record[stage] = {"sha256": sha, "fingerprint": fp}
        atomic_write_json(root / FINGERPRINTS, record)
        ran_before = True
        started = time.time()
        runner = STAGE_RUNNERS.get(stage)
        if runner is not None:
            log(f"[run ] {stage} -> {run.stage(stage)}")
            with run.open_stage(stage) as out:
                result = runner(cfg, out)
                write_manifest(out, stage=stage, config=cfg, counts=result.get("counts"),
                               doctrine=result.get("doctrine"), started_at=started)
        else:
            cmd = stage_command(cfg, stage, run.root)
            if stage in ("data", "eval") and forced:
                cmd.append("--force")  # eval: discard the old cases too, they are of other inputs
            log(f"[run ] {stage}: {' '.join(cmd)}")
            proc = subprocess.run(cmd)
            if proc.returncode != 0 or not run.complete(stage):
                raise StageFailed(f"stage {stage} failed (exit {proc.returncode}); rerun the same command to resume")
        timings[stage] = round(time.time() - started, 1)
        log(f"[done] {stage} in {timings[stage]:.1f}s")
        _record_timing(run.root, stage, timings[stage])
    return run


def _record_timing(root: Path, stage: str, seconds: float) -> None:
    """Keep each stage's latest wall time in runs/<name>/timings.json (read by make bench).
    A corrupt file (a hand edit, a copy cut short) only loses the old times: it is rewritten,
    never a crash after a stage that succeeded."""
    import json

    path = root / "timings.json"
    try:
        previous = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        previous = {}
    if not isinstance(previous, dict):
        previous = {}
    atomic_write_json(path, {**previous, stage: seconds})


class StageFailed(RuntimeError):
    pass


def add_run(p: argparse.ArgumentParser) -> None:
    """``dtw run RECIPE.yaml`` / ``python -m pipeline RECIPE.yaml``."""
    from plumbing.subcommands import recipe_command

    p.description = __doc__
    recipe_command(p, "pipeline.recipe:PipelineConfig", _run, recipe_help="a configs/pipeline/*.yaml recipe",
                   overrides_help="dotted KEY=VALUE overrides")
    p.add_argument("--force", action="append", default=[], metavar="STAGE",
                   help="rerun STAGE and every stage after it, even if complete (needed when their inputs changed)")


def _run(args: argparse.Namespace, cfg: PipelineConfig) -> int:
    try:
        run = run_pipeline(cfg, force=tuple(args.force))
    except (ConfigError, StageFailed) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"run folder: {run.root}", flush=True)
    print_results(run.stage("report"))
    return 0
