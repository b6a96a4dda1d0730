"""Run a pipeline recipe stage by stage: ``dtw run RECIPE.yaml`` (or ``python -m pipeline RECIPE.yaml``).

    dtw run configs/pipeline/demo.yaml            # what `make demo` runs
    dtw run configs/pipeline/demo.yaml run_name=x  # dotted overrides
    dtw run configs/pipeline/demo.yaml --print-config
    dtw run configs/pipeline/demo.yaml --force doctrine  # redo a stage

Each stage writes into ``runs/<run_name>/<stage>/`` and, last, its ``manifest.json``. The
table :data:`PIPELINE` says, per stage, what runs it (a function here, or the ``dtw`` command
it prints) and what it reads; every stage goes through :func:`plumbing.stage.decide`, as
``dtw data``, ``dtw train`` and ``dtw eval`` run by hand do: a stage whose manifest exists is
skipped when it was computed from the same inputs, an interrupted training resumes from its
checkpoints (the eval from its case files), so a rerun goes on where the last one stopped.
A stage's inputs are its fingerprint (:func:`stage_fingerprint`, kept in
``runs/<run_name>/fingerprints.json``): its recipe after the pipeline's overrides and the
content hashes of the manifests of the stages before it.
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
from dataclasses import dataclass
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
    fingerprint_sha256,
    manifest_content_sha256,
    redact_secrets,
    run_root,
    stage_dir,
    write_manifest,
)
from plumbing.stage import Decision, decide


def run_doctrine_stage(cfg: PipelineConfig, out: Path) -> dict:
    """Resolve the doctrine and write what every later stage and a reader needs:
    the rendered system prompts and tool schemas of both modes, and the hash."""
    from doctrine.render.prompts import (
        EXAMPLE_VIEWS,
        render_nudge,
        render_system_prompt,
        tool_schemas,
    )

    doc = _doctrine(cfg)
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


def _doctrine(cfg: PipelineConfig):
    from doctrine.spec import resolve_doctrine

    return resolve_doctrine(cfg.doctrine_version)


def _need(value: str | None, key: str) -> str:
    if not value:
        raise ConfigError(f"this pipeline runs a stage that needs {key!r} in the pipeline recipe")
    return value


# ----------------------------------------------------------------------------- the stages
# What the pipeline knows of each stage. The pipeline, not the stage recipes, says where a
# stage's inputs are: ``overrides`` point its recipe at this run's folders, the model and the
# doctrine version. A stage that needs torch runs in its own process with ``command``'s line.


def _data_overrides(cfg: PipelineConfig, run: Path) -> list[str]:
    return [f"doctrine_version={cfg.doctrine_version}"]


def _train_overrides(cfg: PipelineConfig, run: Path) -> list[str]:
    return [f"data.dir={stage_dir(run, 'data')}", f"model.spec={cfg.model}"]


def _eval_overrides(cfg: PipelineConfig, run: Path) -> list[str]:
    return [f"data_dir={stage_dir(run, 'data')}", f"backend.adapter_dir={stage_dir(run, 'adapter')}",
            f"backend.model={cfg.model}", f"doctrine_version={cfg.doctrine_version}"]


def _data_command(cfg: PipelineConfig, run: Path) -> list[str]:
    return ["data", _need(cfg.data_recipe, "data_recipe"), "--out", str(stage_dir(run, "data")),
            *_data_overrides(cfg, run)]


def _train_command(cfg: PipelineConfig, run: Path) -> list[str]:
    # An interrupted training resumes from its checkpoints by itself (dtw train decides).
    return ["train", _need(cfg.train_recipe, "train_recipe"), "--out", str(run), *_train_overrides(cfg, run)]


def _export_command(cfg: PipelineConfig, run: Path) -> list[str]:
    return ["export", str(run)]


def _eval_command(cfg: PipelineConfig, run: Path) -> list[str]:
    return ["eval", _need(cfg.eval_recipe, "eval_recipe"), "--out", str(stage_dir(run, "eval")),
            *_eval_overrides(cfg, run)]


def _report_command(cfg: PipelineConfig, run: Path) -> list[str]:
    # --quiet: the pipeline prints the results table itself, once, at the very end.
    return ["report", str(stage_dir(run, "eval")), "--out", str(stage_dir(run, "report")), "--quiet"]


@dataclass(frozen=True)
class PipelineStage:
    """One stage of :data:`PIPELINE`: ``run`` (in this process, (config, stage folder) ->
    ``{"counts", "doctrine"}``) or ``command`` (the ``dtw`` arguments of its own process, which
    writes its own manifest); the recipe it reads (a PipelineConfig field and its SCHEMAS
    kind) with the ``overrides`` that point it at this run; whether an interrupted run
    ``resumable``-ly goes on, whether its command takes ``--force``, and whether it is launched
    by ``accelerate`` when the pipeline names an accelerate config (which then enters its
    fingerprint: another launch is another result)."""

    run: Callable[[PipelineConfig, Path], dict] | None = None
    command: Callable[[PipelineConfig, Path], list[str]] | None = None
    recipe: tuple[str, str] | None = None
    overrides: Callable[[PipelineConfig, Path], list[str]] | None = None
    resumable: bool = False
    takes_force: bool = False
    accelerate: bool = False


PIPELINE: dict[str, PipelineStage] = {
    "doctrine": PipelineStage(run=run_doctrine_stage),
    "data": PipelineStage(command=_data_command, recipe=("data_recipe", "data"), overrides=_data_overrides,
                          takes_force=True),
    "train": PipelineStage(command=_train_command, recipe=("train_recipe", "train"), overrides=_train_overrides,
                           resumable=True, takes_force=True, accelerate=True),
    "adapter": PipelineStage(command=_export_command),
    "eval": PipelineStage(command=_eval_command, recipe=("eval_recipe", "eval"), overrides=_eval_overrides,
                          resumable=True, takes_force=True),
    "report": PipelineStage(command=_report_command),
}
assert tuple(PIPELINE) == STAGES  # one order of the stages (plumbing.runs)


def stage_overrides(cfg: PipelineConfig, stage: str, run: Path) -> list[str]:
    """The dotted overrides that point ``stage``'s recipe at this run: its input folders
    (data, adapter), the model and the doctrine version of the pipeline."""
    spec = PIPELINE[stage]
    return spec.overrides(cfg, run) if spec.overrides else []


def stage_command(cfg: PipelineConfig, stage: str, run: Path) -> list[str]:
    """The command line of a stage that runs in its own process (it writes its own manifest):
    ``dtw STAGE ...`` (as ``python -m pipeline.dtw``; stage ``adapter`` is ``dtw export``), and
    ``accelerate launch -m train ...`` for a training with an accelerate config."""
    spec = PIPELINE.get(stage)
    if spec is None or spec.command is None:
        raise ConfigError(f"stage {stage!r} runs in the pipeline's process, not as a command")
    args = spec.command(cfg, run)
    if spec.accelerate and cfg.accelerate_config:
        return [sys.executable, "-m", "accelerate.commands.launch", "--config_file", cfg.accelerate_config,
                "-m", *args]
    return [sys.executable, "-m", "pipeline.dtw", *args]


def check_stage_recipes(cfg: PipelineConfig, run: Path) -> dict[str, dict]:
    """Load every stage recipe the pipeline will run with its overrides; a ConfigError names
    the stage and the key, before the first stage starts. Returns each resolved recipe (as
    JSON, secrets redacted): what the stage's fingerprint records."""
    resolved: dict[str, dict] = {}
    for stage in cfg.stages:
        if PIPELINE[stage].recipe is None:
            continue
        key, kind = PIPELINE[stage].recipe
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
    (the model and doctrine version are in them; the doctrine's hash and the accelerate
    config too), and the content hash of every earlier stage's manifest (None while that
    one is incomplete)."""
    fp: dict = {}
    if PIPELINE[stage].run is not None:  # in process: it reads the pipeline's doctrine
        doc = _doctrine(cfg)
        fp["doctrine"] = {"version": doc.version, "sha256": doc.sha256}
    if stage in recipes:
        fp["recipe"] = recipes[stage]
    if PIPELINE[stage].accelerate:
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


def _decide(run: RunDir, stage: str, fp: dict, old: dict | None, *, forced: bool) -> Decision:
    return decide(run.stage(stage), fp, name=f"stage {stage}", force=forced, resumable=PIPELINE[stage].resumable,
                  recorded=(old or {}).get("fingerprint"), partial=old is not None,
                  hint=f"rerun with --force {stage} (reruns it and every stage after it), or use another run_name")


def run_stage(cfg: PipelineConfig, stage: str, run: RunDir, decision: Decision, log=_log) -> None:
    """Run one stage the way :data:`PIPELINE` says: in this process (its manifest written
    here, last) or as its command (which writes its own)."""
    spec = PIPELINE[stage]
    started = time.time()
    if decision.fresh:
        (run.stage(stage) / MANIFEST).unlink(missing_ok=True)  # incomplete until it is done again
    if spec.run is not None:
        log(f"[run ] {stage} -> {run.stage(stage)}")
        with run.open_stage(stage) as out:
            result = spec.run(cfg, out)
            write_manifest(out, stage=stage, config=cfg, counts=result.get("counts"),
                           doctrine=result.get("doctrine"), started_at=started)
        return
    cmd = stage_command(cfg, stage, run.root)
    if decision.fresh and spec.takes_force:
        cmd.append("--force")  # its old work is of other inputs (an eval's cases, a training's checkpoints)
    log(f"[run ] {stage}: {' '.join(cmd)}")
    proc = subprocess.run(cmd)
    if proc.returncode != 0 or not run.complete(stage):
        raise StageFailed(f"stage {stage} failed (exit {proc.returncode}); rerun the same command to resume")


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
    ran_before = False  # an earlier stage ran in this invocation: a later one whose inputs changed reruns
    for i, stage in enumerate(cfg.stages):
        fp = stage_fingerprint(cfg, stage, run, recipes)
        old = record.get(stage) if isinstance(record.get(stage), dict) else None
        decision = _decide(run, stage, fp, old, forced=i >= forced_from)
        if decision.action == "refuse":
            if not ran_before:
                raise StageFailed(decision.reason)
            decision = _decide(run, stage, fp, old, forced=True)  # its inputs were rebuilt just now
        if decision.action == "skip":
            log(f"[skip] {stage}: {run.stage(stage) / MANIFEST} exists (same inputs)")
            continue
        record[stage] = {"sha256": fingerprint_sha256(fp), "fingerprint": fp}
        atomic_write_json(root / FINGERPRINTS, record)
        ran_before = True
        started = time.time()
        run_stage(cfg, stage, run, decision, log)
        seconds = round(time.time() - started, 1)
        log(f"[done] {stage} in {seconds:.1f}s")
        _record_timing(run.root, stage, seconds)
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
