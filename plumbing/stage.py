"""The stage contract: what a stage does with its folder before it runs.

Every stage (``dtw data``, ``dtw train``, ``dtw eval`` and each stage of ``dtw run``) asks
:func:`decide` once, with the fingerprint of its inputs (what its result is computed from),
and does what the answer says:

- ``skip``: the folder is complete (its manifest is there) and was computed from the same
  fingerprint; nothing runs.
- ``start``: nothing is there yet, ``--force`` was given, or a stage that cannot resume was
  interrupted; the stage starts afresh (the caller first removes its own earlier work when
  :attr:`Decision.fresh` says so).
- ``resume``: a stage that can resume (training from its checkpoints, eval from its case
  files) was interrupted, or its recipe only grew, with nothing else changed; it continues.
- ``refuse``: the folder holds work computed from other inputs; :attr:`Decision.reason` is
  one line naming the differences (``key: old -> new``) and how to go on.

Where the fingerprint of a started run is kept: the folder's run marker
(``.dtw-stage.json``, :func:`record_fingerprint`), which the stage writes when it starts, and
its manifest, written last. A caller that keeps it elsewhere (the pipeline's
``fingerprints.json``, the eval's ``recipe.json``) passes it as ``recorded``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from plumbing.runs import (
    MANIFEST,
    MARKER_FORMAT,
    RUN_MARKER,
    atomic_write_json,
    claim_run_folder,
    fingerprint_differences,
    fingerprint_sha256,
    read_manifest,
)

__all__ = ["Decision", "decide", "recorded_fingerprint", "record_fingerprint"]

Action = Literal["skip", "start", "resume", "refuse"]
_UNSET: Any = object()


@dataclass(frozen=True)
class Decision:
    """What a stage does with its folder (see the module docstring)."""

    action: Action
    reason: str
    fresh: bool = False  # start: the stage's earlier work in the folder (if any) must go first
    differences: tuple[str, ...] = field(default=())

    @property
    def runs(self) -> bool:
        return self.action in ("start", "resume")


def recorded_fingerprint(folder: str | Path) -> dict[str, Any] | None:
    """The fingerprint the folder's stage recorded: the run marker's (written when it
    started), else its manifest's (a stage that finished); None when neither has one."""
    folder = Path(folder)
    try:
        marker = json.loads((folder / RUN_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        marker = None
    if isinstance(marker, dict) and isinstance(marker.get("fingerprint"), dict):
        return marker["fingerprint"]
    manifest = read_manifest(folder)
    fp = (manifest or {}).get("fingerprint")
    return fp if isinstance(fp, dict) else None


def record_fingerprint(folder: str | Path, stage: str, fingerprint: dict[str, Any], **claim: Any) -> Path:
    """Claim ``folder`` for ``stage`` (:func:`plumbing.runs.claim_run_folder`, ``claim`` its
    keywords), mark it incomplete (its manifest removed) and record ``fingerprint`` in its
    run marker, so an interrupted run is known by what it was computing."""
    folder = claim_run_folder(folder, stage, **claim)
    (folder / MANIFEST).unlink(missing_ok=True)
    atomic_write_json(folder / RUN_MARKER, {"format": MARKER_FORMAT, "stage": stage, "fingerprint": fingerprint,
                                            "fingerprint_sha256": fingerprint_sha256(fingerprint)})
    return folder


def _has_work(folder: Path) -> bool:
    return folder.is_dir() and any(p.name != RUN_MARKER for p in folder.iterdir())


def decide(folder: str | Path, fingerprint: dict[str, Any], *, name: str, force: bool = False,
           resume: bool = False, resumable: bool = False, partial: bool | None = None, recorded: Any = _UNSET,
           differences: Callable[[Any, dict[str, Any]], list[str]] = fingerprint_differences,
           hint: str = "use --force to redo it, or a new --out") -> Decision:
    """What ``name``'s stage does with ``folder`` given the ``fingerprint`` of its inputs.

    ``resumable``: the stage can go on from interrupted work; ``resume`` (asked by the user):
    go on from it even where the inputs changed (a training given more steps) instead of
    refusing. ``partial``: whether the folder holds interrupted work (default: files besides
    the run marker while there is no manifest); ``recorded``: the fingerprint of the folder's
    work (default :func:`recorded_fingerprint`); ``differences``: ``key: old -> new`` lines
    between a recorded and a new fingerprint, [] when the new one may go on from the old (the
    eval's lets a recipe add arms); ``hint``: how to go on, ending a refusal."""
    folder = Path(folder)
    complete = read_manifest(folder) is not None
    if recorded is _UNSET:
        recorded = recorded_fingerprint(folder)
    if partial is None:
        partial = not complete and _has_work(folder)
    if force:
        return Decision("start", f"{name}: --force, {folder} is redone", fresh=True)
    if not complete and not partial:
        return Decision("start", f"{name}: {folder} starts")
    diffs = ["fingerprint: (not recorded)"] if recorded is None else differences(recorded, fingerprint)
    if complete and not diffs and fingerprint_sha256(recorded) == fingerprint_sha256(fingerprint):
        return Decision("skip", f"{name}: {folder / MANIFEST} exists (same inputs)")
    if resume and resumable:
        return Decision("resume", f"{name}: {folder} resumes (asked to)")
    if not complete and (not resumable or recorded is None):
        # Nothing to go on from (or nothing known about it): start afresh.
        return Decision("start", f"{name}: {folder} was interrupted; it starts afresh", fresh=True)
    if diffs:
        what = "was computed" if complete else "was started (interrupted)"
        return Decision("refuse", f"{name}: {folder} {what} from other inputs ({'; '.join(diffs)}); {hint}",
                        differences=tuple(diffs))
    if resumable:
        return Decision("resume", f"{name}: {folder} resumes")
    return Decision("start", f"{name}: {folder} starts afresh", fresh=True)


def run_once(out: str, fingerprint: dict[str, Any], work: Callable[[], Any], *, name: str, stage: str,
             writes: tuple[str, ...], force: bool, hint: str,
             errors: tuple[type[BaseException], ...] = ()) -> int:
    """A command's whole contract for a stage that cannot resume (``dtw data``, ``dtw on-policy``):
    refuse an ``out`` that no run may use, :func:`decide` (skip and refuse as one line), record
    the fingerprint in the run marker, then ``work()``. Returns the exit code (2 for a refusal
    or one of ``errors``, printed as one line)."""
    import sys

    from plumbing.runs import RunFolderError, out_dir_error

    if problem := out_dir_error(out):
        print(f"error: {problem}", file=sys.stderr)
        return 2
    decision = decide(out, fingerprint, name=name, force=force, hint=hint)
    if decision.action == "skip":
        print(f"[skip] {decision.reason}")
        return 0
    if decision.action == "refuse":
        print(f"error: {decision.reason}", file=sys.stderr)
        return 2
    try:
        record_fingerprint(out, stage, fingerprint, writes=writes)
        work()
    except (RunFolderError, *errors) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
