"""The curriculum build: byte-identical output, splits by session, held-out families, card."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from data_gen.build import build_curriculum
from data_gen.curriculum import SPLITS
from data_gen.recipe import DataRecipe
from plumbing.recipe_loader import load_config

ROOT = Path(__file__).resolve().parents[2]


def small(*overrides):
    return load_config(ROOT / "configs/data/learn.yaml", DataRecipe, [
        "sources.synthetic.sessions_per_family=1", "replay.windows=[4096]", "replay.gates=[default]",
        "sources.swe_rebench.max_rows=3", *overrides])


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("cur") / "data"
    build_curriculum(small(), out, log=lambda *a: None, progress=False)
    return out


def test_same_recipe_gives_byte_identical_files(built, tmp_path):
    again = build_curriculum(small(), tmp_path / "again", log=lambda *a: None, progress=False)
    files = sorted(p.relative_to(built) for p in built.rglob("*") if p.is_file() and p.name != "manifest.json")
    assert files and files == sorted(p.relative_to(again) for p in again.rglob("*")
                                     if p.is_file() and p.name != "manifest.json")
    for rel in files:
        assert (built / rel).read_bytes() == (again / rel).read_bytes(), rel


def test_layout_loads_with_datasets_and_splits_by_session(built):
    from datasets import load_dataset

    manifest = json.loads((built / "manifest.json").read_text())
    assert manifest["stage"] == "data" and manifest["doctrine"]["version"] == "v1"
    sessions: dict[str, str] = {}
    for split in SPLITS:
        files = sorted(str(p) for p in (built / split).glob("*.parquet"))
        if not files:
            assert manifest["counts"][split] == 0
            continue
        ds = load_dataset("parquet", data_files={split: files}, split=split)
        assert len(ds) == manifest["counts"][split]
        for row in ds:
            meta = row["meta"]
            assert row["messages"][-1]["role"] == "assistant"
            assert meta["doctrine_sha256"] == manifest["doctrine"]["sha256"]
            assert meta["prompt_mode"] == "distilled" and meta["labeler"]
            assert sessions.setdefault(meta["session_id"], split) == split  # never in two splits
            if meta["family"] in ("data_analysis", "ts_repo"):  # ts_repo: the Marathon mirrors it
                assert split == "heldout"
            elif split == "heldout":
                pytest.fail(f"{meta['family']} is not a held-out family")
            json.loads(row["tools"])
    assert manifest["counts"]["train"] > 0 and manifest["counts"]["heldout"] > 0
    card = (built / "README.md").read_text()
    assert manifest["doctrine"]["sha256"] in card and "CC-BY-4.0" in card and "| train |" in card
    assert "| marathon | ts_repo |" in card  # which families are held out for which eval


def test_length_filter_and_mixture_are_counted(tmp_path):
    out = build_curriculum(small("max_tokens=2500", "mixture.shares.ordinary=0.0"), tmp_path / "d",
                           log=lambda *a: None, progress=False)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["rejects"].get("too_long", 0) > 0
    assert "ordinary" not in manifest["counts"]["kinds"]["train"]


def test_kind_weights_and_shares_together_are_a_config_error():
    from plumbing.recipe_loader import ConfigError

    with pytest.raises(ConfigError, match="not both"):
        small("mixture.kind.ordinary=0.5")


def test_nudge_style_none_reaches_the_replay(built, tmp_path):
    shown = json.loads((built / "manifest.json").read_text())["counts"]["kinds"]
    nudged = {"nudged_compress", "refusal", "tier2", "tier3", "emergency"}
    assert any(k in nudged for split in shown.values() for k in split)
    out = build_curriculum(small("nudge_style=none"), tmp_path / "d", log=lambda *a: None, progress=False)
    kinds = json.loads((out / "manifest.json").read_text())["counts"]["kinds"]
    assert kinds["train"] and not {k for split in kinds.values() for k in split} & nudged


def _rows_on_disk(out: Path) -> dict[str, int]:
    import pyarrow.parquet as pq

    return {split: sum(pq.read_metadata(p).num_rows for p in (out / split).glob("*.parquet")) for split in SPLITS}


def test_a_rebuild_leaves_no_stale_shards(tmp_path):
    out = tmp_path / "d"
    build_curriculum(small("shard_rows=5"), out, log=lambda *a: None, progress=False)
    assert len(list((out / "train").glob("shard-*.parquet"))) > 1
    build_curriculum(small("shard_rows=1000", "split.held_out_families=[]", "split.held_out_for={}"), out,
                     log=lambda *a: None, progress=False)
    counts = json.loads((out / "manifest.json").read_text())["counts"]
    assert _rows_on_disk(out) == {split: counts[split] for split in SPLITS}
    assert [p.name for p in (out / "train").glob("*.parquet")] == ["shard-00000.parquet"]
    assert not list((out / "heldout").glob("*.parquet"))  # that split is empty now


@pytest.mark.parametrize("overrides, message", [
    (["shard_rows=-5"], "shard_rows"), (["shard_rows=0"], "shard_rows"),
    (["split.validation_fraction=1.5"], "validation_fraction"), (["split.test_fraction=-0.1"], "test_fraction"),
    (["split.validation_fraction=0.6", "split.test_fraction=0.5"], "at most 1"),
])
def test_bad_shard_rows_and_split_fractions_are_config_errors(overrides, message):
    from plumbing.recipe_loader import ConfigError

    with pytest.raises(ConfigError, match=message):
        small(*overrides)


def _dataset_sha256(out: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    for p in sorted(out.glob("*/shard-*.parquet")):
        h.update(str(p.relative_to(out)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def test_the_dataset_does_not_depend_on_tmpdir(tmp_path, monkeypatch):
    import tempfile

    import pyarrow.parquet as pq

    outside = tmp_path / "outside"
    outside.mkdir()
    hashes = []
    for name in ("t", "a-much-longer-temporary-folder-name"):
        tmpdir = tmp_path / name
        tmpdir.mkdir()
        (tmpdir / "dtw-replay").symlink_to(outside, target_is_directory=True)  # never followed
        monkeypatch.setenv("TMPDIR", str(tmpdir))
        monkeypatch.setattr(tempfile, "tempdir", str(tmpdir))
        # log_triage sessions at 4K (aggressive gates) restore blocks; with the inline limit
        # lowered every restored block is too large to inline, so each goes to a file.
        import doctrine.kernel.decompress as dk

        monkeypatch.setattr(dk, "PROXY_INLINE_MAX", 200)
        out = build_curriculum(small("replay.windows=[4096]", "replay.gates=[aggressive]",
                                     "sources.synthetic.families=[log_triage]",
                                     "sources.synthetic.sessions_per_family=4", "sources.swe_rebench=null"),
                               tmp_path / f"data-{name}", log=lambda *a: None, progress=False)
        hashes.append(_dataset_sha256(out))
        text = "".join(str(pq.read_table(p).to_pylist()) for p in out.glob("*/*.parquet"))
        assert "acp-decompress-" in text and str(tmpdir) not in text  # a file restore, named virtually
        assert sorted(p.name for p in tmpdir.iterdir()) == ["dtw-replay"]  # the private scratch is gone
    assert hashes[0] == hashes[1]
    assert list(outside.iterdir()) == []


def test_manifest_lists_the_serving_profiles_of_every_row(built):
    """The data manifest's profiles are the CLI's, and every row names one of them."""
    import subprocess
    import sys

    import pyarrow.parquet as pq

    m = json.loads((built / "manifest.json").read_text())
    listed = {p["sha256"]: p for p in m["serving_profiles"]}
    assert listed
    for p in listed.values():
        out = subprocess.run([sys.executable, "-m", "doctrine.kernel", "profile", "--window", str(p["window"]),
                              "--preset", p["preset"], "--host", p["host"], "--prompt-mode", p["prompt_mode"],
                              "--nudge-style", p["nudge_style"]], capture_output=True, text=True, check=True)
        assert json.loads(out.stdout)["sha256"] == p["sha256"]
    rows = [r for f in built.glob("*/*.parquet") for r in pq.read_table(f).to_pylist()]
    metas = [r["meta"] if isinstance(r["meta"], dict) else json.loads(r["meta"]) for r in rows]
    assert metas and all(meta["serving_profile"] in listed for meta in metas)


def test_out_that_is_a_file_is_one_line_error_before_any_work(tmp_path):
    import subprocess
    import sys

    f = tmp_path / "a-file"
    f.write_text("not a folder")
    for out in (f, f / "data"):
        p = subprocess.run([sys.executable, "-m", "data_gen", "build", "configs/data/learn.yaml", "--out", str(out)],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert p.returncode == 2, p.stderr[-2000:]
        assert p.stderr == f"error: --out {out}: {f} exists and is not a folder\n" or \
            p.stderr == f"error: --out {out}: exists and is not a folder\n", p.stderr[-2000:]


def test_the_build_audits_memorisation_in_its_manifest_card_and_inspect(built, capsys):
    from data_gen.__main__ import main
    from data_gen.audit import read_rows
    from data_gen.memorisation import memorisation_audit

    manifest = json.loads((built / "manifest.json").read_text())
    memo = manifest["counts"]["memorisation"]
    by_split: dict[str, list] = {}
    for r in read_rows(built):
        by_split.setdefault(r["meta"]["split"], []).append(r)
    assert memo == json.loads(json.dumps(memorisation_audit(by_split)))  # recomputed from the shards alike
    assert memo["train"]["compress_targets"] > 0 and "heldout" in memo
    assert 0.0 <= memo["heldout"]["structure_seen"] <= 1.0
    card = (built / "README.md").read_text()
    assert "## Memorisation audit" in card and "| heldout |" in card.split("## Memorisation audit")[1]
    assert main(["inspect", str(built), "--n", "0"]) == 0
    assert "[audit] heldout: structure_seen" in capsys.readouterr().out
    assert main(["audit", str(built), "--memorisation"]) == 0
    assert "[audit] train:" in capsys.readouterr().out


def test_labelling_is_counted_per_source_in_the_manifest_and_card(built):
    manifest = json.loads((built / "manifest.json").read_text())
    counts = manifest["counts"]
    per = counts["labelling"]
    recipe = small()
    # every synthetic family by its name, recorded trajectories by their source
    assert set(recipe.sources.synthetic.families) <= set(per) and "swe_rebench" in per
    for src, c in per.items():
        assert c["points"] >= c["labelled"] > 0, src
    # the per-source skips add up to the whole build's
    whole = {k: n for k, n in counts["rejects"].items() if k.startswith("skipped:")}
    summed: dict[str, int] = {}
    for c in per.values():
        for k, n in c.items():
            if k.startswith("skipped:"):
                summed[k] = summed.get(k, 0) + n
    assert summed == whole and whole
    card = (built / "README.md").read_text().split("## Labelling per source")[1].split("\n## ")[0]
    for src, c in per.items():
        row = next(line for line in card.splitlines() if line.startswith(f"| {src} |"))
        cells = [x.strip() for x in row.strip("|").split("|")]
        sf, kr = c.get("skipped:summary_failed", 0), c.get("skipped:kernel_rejected", 0)
        assert cells[1:6] == [str(c["points"]), str(c["labelled"]), str(sf), str(kr), f"{(sf + kr) / c['points']:.3f}"]
