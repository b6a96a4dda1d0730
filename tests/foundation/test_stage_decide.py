"""plumbing.stage.decide: the one rule of what a stage does with its folder (skip, start,
resume, refuse, --force), on folders made here by hand."""

from __future__ import annotations

from pathlib import Path

from plumbing.runs import write_manifest
from plumbing.stage import decide, record_fingerprint, recorded_fingerprint

FP = {"recipe": {"steps": 2, "lr": 0.1}, "data": "abc"}


def finished(folder: Path, fp: dict) -> Path:
    """A stage folder that started with ``fp`` and finished (its manifest last)."""
    record_fingerprint(folder, "train", fp)
    (folder / "out.txt").write_text("result")
    write_manifest(folder, stage="train", extra={"fingerprint": fp})
    return folder


def interrupted(folder: Path, fp: dict) -> Path:
    record_fingerprint(folder, "train", fp)
    (folder / "partial.txt").write_text("half")
    return folder


def test_an_empty_or_new_folder_starts(tmp_path):
    for folder in (tmp_path / "new", tmp_path):
        d = decide(folder, FP, name="train")
        assert d.action == "start" and d.runs and not d.fresh


def test_a_complete_folder_of_the_same_inputs_is_skipped(tmp_path):
    d = decide(finished(tmp_path / "s", FP), dict(FP), name="train")
    assert d.action == "skip" and not d.runs and "manifest.json exists" in d.reason


def test_changed_inputs_are_refused_naming_the_field(tmp_path):
    folder = finished(tmp_path / "s", FP)
    d = decide(folder, {**FP, "recipe": {"steps": 3, "lr": 0.1}}, name="train", hint="use --force")
    assert d.action == "refuse" and not d.runs
    assert d.differences == ("recipe.steps: 2 -> 3",)
    assert "\n" not in d.reason and "train: " in d.reason and "recipe.steps: 2 -> 3" in d.reason
    assert d.reason.endswith("use --force") and "was computed from other inputs" in d.reason
    # A complete folder whose fingerprint was never recorded is refused too: its inputs are unknown.
    bare = tmp_path / "bare"
    write_manifest(bare, stage="train")
    assert decide(bare, FP, name="train").action == "refuse"


def test_force_starts_afresh_whatever_is_there(tmp_path):
    for folder in (finished(tmp_path / "a", FP), interrupted(tmp_path / "b", FP), tmp_path / "c"):
        d = decide(folder, {**FP, "data": "other"}, name="train", force=True, resumable=True)
        assert d.action == "start" and d.fresh


def test_an_interrupted_resumable_stage_resumes_only_on_the_same_inputs(tmp_path):
    folder = interrupted(tmp_path / "s", FP)
    assert recorded_fingerprint(folder) == FP
    assert decide(folder, FP, name="train", resumable=True).action == "resume"
    d = decide(folder, {**FP, "data": "new"}, name="train", resumable=True)
    assert d.action == "refuse" and "was started (interrupted)" in d.reason and "data: abc -> new" in d.reason
    # Asked to resume anyway (a training given more steps): it goes on from the folder's work.
    assert decide(folder, {**FP, "data": "new"}, name="train", resumable=True, resume=True).action == "resume"


def test_an_interrupted_stage_that_cannot_resume_starts_again(tmp_path):
    folder = interrupted(tmp_path / "s", FP)
    d = decide(folder, {**FP, "data": "new"}, name="data")
    assert d.action == "start" and d.fresh


def test_a_grown_recipe_resumes_where_the_differences_allow_it(tmp_path):
    """The eval's rule: a recipe that adds an arm goes on from the cases already there."""
    folder = finished(tmp_path / "s", {"fp": 1, "arms": ["a"]})
    only_fp = lambda old, new: [] if old["fp"] == new["fp"] else ["fp"]  # noqa: E731
    grown = decide(folder, {"fp": 1, "arms": ["a", "b"]}, name="eval", resumable=True, differences=only_fp)
    assert grown.action == "resume"
    assert decide(folder, {"fp": 1, "arms": ["a"]}, name="eval", resumable=True,
                  differences=only_fp).action == "skip"
    assert decide(folder, {"fp": 2, "arms": ["a"]}, name="eval", resumable=True,
                  differences=only_fp).action == "refuse"


def test_a_record_kept_elsewhere_is_used_instead_of_the_folders(tmp_path):
    """The pipeline keeps its fingerprints in the run folder, not in the stage's marker."""
    folder = finished(tmp_path / "s", FP)
    assert decide(folder, {"pipeline": 1}, name="stage train", recorded={"pipeline": 1}).action == "skip"
    d = decide(folder, {"pipeline": 2}, name="stage train", recorded={"pipeline": 1})
    assert d.action == "refuse" and d.reason.startswith("stage train: ") and "pipeline: 1 -> 2" in d.reason
