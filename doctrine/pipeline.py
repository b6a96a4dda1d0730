"""Run a pipeline recipe stage by stage: ``python -m doctrine.pipeline RECIPE.yaml``.

    python -m doctrine.pipeline configs/pipeline/demo.yaml            # what `make demo` runs
    python -m doctrine.pipeline configs/pipeline/demo.yaml run_name=x  # dotted overrides
    python -m doctrine.pipeline configs/pipeline/demo.yaml --print-config
    python -m doctrine.pipeline configs/pipeline/demo.yaml --force doctrine  # redo a stage

Each stage writes into ``runs/<run_name>/<stage>/`` and, last, its ``manifest.json``; a
stage whose manifest exists is skipped, so a rerun resumes where the last one stopped.
Stages that need torch are run in their own process with the command they print, so the
commands in the output are the commands a user can run by hand.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable

from .config import ConfigError, config_to_yaml, load_config
from .pipeline_config import PipelineConfig
from .runs import RunDir, atomic_write_json, atomic_write_text, write_manifest


def run_doctrine_stage(cfg: PipelineConfig, out: Path) -> dict:
    """Resolve the doctrine and write what every later stage and a reader needs:
    the rendered system prompts and tool schemas of both modes, and the hash."""
    from .render import EXAMPLE_VIEWS, render_nudge, render_system_prompt, tool_schemas
    from .spec import resolve_doctrine

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


# Stage name -> function(config, stage_dir) -> {"counts": ..., "doctrine": ...}.
STAGE_RUNNERS: dict[str, Callable[[PipelineConfig, Path], dict]] = {
    "doctrine": run_doctrine_stage,
}


def run_pipeline(cfg: PipelineConfig, *, force: tuple[str, ...] = (), log=print) -> RunDir:
    run = RunDir.create(Path(cfg.runs_dir) / cfg.run_name)
    for stage in cfg.stages:
        runner = STAGE_RUNNERS.get(stage)
        if runner is None:
            raise ConfigError(f"stage {stage!r} is not available yet in this version of the pipeline")
        if run.complete(stage) and stage not in force:
            log(f"[skip] {stage}: {run.stage(stage) / 'manifest.json'} exists")
            continue
        log(f"[run ] {stage} -> {run.stage(stage)}")
        started = time.time()
        with run.open_stage(stage) as out:
            result = runner(cfg, out)
            write_manifest(out, stage=stage, config=cfg, counts=result.get("counts"),
                           doctrine=result.get("doctrine"), started_at=started)
        log(f"[done] {stage} in {time.time() - started:.1f}s")
    return run


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m doctrine.pipeline", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("recipe", help="a configs/pipeline/*.yaml recipe")
    p.add_argument("overrides", nargs="*", help="dotted KEY=VALUE overrides")
    p.add_argument("--print-config", action="store_true", help="print the resolved config and exit")
    p.add_argument("--force", action="append", default=[], metavar="STAGE",
                   help="rerun STAGE even if its manifest exists (repeatable)")
    args = p.parse_args(argv)
    try:
        cfg = load_config(args.recipe, PipelineConfig, args.overrides)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.print_config:
        print(config_to_yaml(cfg), end="")
        return 0
    try:
        run = run_pipeline(cfg, force=tuple(args.force))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"run folder: {run.root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
