"""Doctrine versions as data: loading, manifest checks, hashing."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from doctrine.spec import (
    DEFAULT_ROOT,
    LIMIT_KEYS,
    DoctrineError,
    list_versions,
    load_doctrine,
    normalise_text,
    update_manifest_hash,
)

FIXTURES = Path(__file__).parent / "fixtures" / "versions"
# Pinned hash of the tiny fixture version: guards the hashing algorithm itself (sorting,
# canonical JSON, normalisation), which must give the same value on every platform.
TINY_SHA256 = "71aa555097bf1a0d5f32fd7bc0f9ee1eacbd51b0afd1a8b6ac2bdfb97329ce8c"


def copy_version(tmp_path: Path, version: str = "v1", src_root: Path = DEFAULT_ROOT) -> Path:
    root = tmp_path / "versions"
    shutil.copytree(src_root / version, root / version)
    conf = root / version / "conformance.json"
    if conf.exists():  # keep copies independent of the other helper's file
        conf.unlink()
    return root


def test_v1_loads_with_the_fixed_limits():
    doc = load_doctrine("v1")
    assert doc.version == "v1"
    assert doc.load_bearing == frozenset({"philosophy", "how-to-compress", "tier2", "tier3"})
    assert set(doc.limits) == LIMIT_KEYS
    assert doc.limits["min_summary_chars"] == 50
    assert doc.limits["max_summary_chars"] == 20000
    assert doc.limits["tier1_max_tokens"] == 2000
    assert doc.limits["tier_targets"] == {
        "2": {"min_tokens_per_source": 50, "max_tokens_per_source": 150},
        "3": {"min_tokens_per_source": 30, "max_tokens_per_source": 60},
    }
    assert doc.sha256 == doc.base_sha256 and len(doc.sha256) == 64
    assert doc.overrides_applied == []
    for name in doc.load_bearing:
        assert name in doc.distilled, name
        assert doc.sections[name], name


def test_manifest_lists_exactly_the_files_on_disk():
    folder = DEFAULT_ROOT / "v1"
    manifest = json.loads((folder / "manifest.json").read_text())
    on_disk = {p.stem for p in folder.glob("*.md")}
    assert on_disk == set(manifest["sections"])
    assert {p.stem for p in (folder / "distilled").glob("*.md")} == set(manifest["distilled"])


def test_v1_texts_cover_the_doctrine():
    s = load_doctrine("v1").sections
    phil, how, t2, t3 = s["philosophy"], s["how-to-compress"], s["tier2"], s["tier3"]
    # failure modes, the single criterion, protected zones, refusal, restore
    assert "two ways to fail" in phil and "neither" in phil
    assert "if and only if the current task step no longer needs it" in phil
    for needle in ("compress calls", "most recent messages", "first user message", "latest user message", "verbatim"):
        assert needle in phil, needle
    assert "decline" in phil and "search_context" in phil and "decompress" in phil
    # KEEP, DROP, dropped-item note, priority order
    for needle in ("line numbers", "signatures", "error messages", "reason", "versions", "thresholds",
                   "goal", "purpose", "TODOs", "message refs"):
        assert needle in how, needle
    for needle in ("logs", "repeated reads", "lesson in one line", "back-and-forth", "status checks"):
        assert needle in how, needle
    assert "leave one line" in how
    order = ["the goal", "decisions with their rationale", "exact artifacts", "conclusions", "lessons"]
    positions = [how.index(x, how.index("space is tight")) for x in order]
    assert positions == sorted(positions)
    assert "Source: bN+bM" in t2 and "50-150 tokens per source" in t2
    assert "Source: bN+bM" in t3 and "30-60 tokens per source" in t3


def test_hash_is_stable_across_processes():
    code = "from doctrine.spec import load_doctrine; print(load_doctrine('v1').sha256)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == load_doctrine("v1").sha256


def test_tiny_fixture_hash_is_pinned():
    assert list_versions(FIXTURES) == ["tiny"]
    assert load_doctrine("tiny", root=FIXTURES).sha256 == TINY_SHA256


def test_several_versions_coexist(tmp_path):
    root = copy_version(tmp_path)
    shutil.copytree(FIXTURES / "tiny", root / "tiny")
    assert list_versions(root) == ["tiny", "v1"]
    a, b = load_doctrine("v1", root=root), load_doctrine("tiny", root=root)
    assert a.sha256 != b.sha256 and set(a.sections) != set(b.sections)


def test_one_word_changes_the_hash_and_stale_manifest_fails(tmp_path):
    root = copy_version(tmp_path)
    before = load_doctrine("v1", root=root).sha256
    path = root / "v1" / "tier3.md"
    path.write_text(path.read_text().replace("lookup index", "lookup table"))
    with pytest.raises(DoctrineError, match="texts_sha256 is stale"):
        load_doctrine("v1", root=root)
    update_manifest_hash("v1", root=root)
    assert load_doctrine("v1", root=root).sha256 != before


def test_line_endings_and_trailing_space_do_not_change_the_hash(tmp_path):
    root = copy_version(tmp_path)
    before = load_doctrine("v1", root=root).sha256
    for path in (root / "v1").rglob("*.md"):
        text = path.read_text()
        path.write_bytes(("\n".join(ln + "  " for ln in text.split("\n")).replace("\n", "\r\n") + "\r\n\r\n").encode())
    assert load_doctrine("v1", root=root).sha256 == before


def test_conformance_and_limits_enter_the_hash(tmp_path):
    root = copy_version(tmp_path)
    doc = load_doctrine("v1", root=root)
    assert doc.conformance == {}
    (root / "v1" / "conformance.json").write_text(json.dumps({"min_score": 0.8}))
    with_conf = load_doctrine("v1", root=root)
    assert with_conf.conformance == {"min_score": 0.8}
    assert with_conf.sha256 != doc.sha256
    mpath = root / "v1" / "manifest.json"
    manifest = json.loads(mpath.read_text())
    manifest["limits"]["tier1_max_tokens"] = 1500
    mpath.write_text(json.dumps(manifest))
    assert load_doctrine("v1", root=root).sha256 != with_conf.sha256


def test_normalise_text():
    assert normalise_text("\r\n\na  \r\nb\t\r\n\r\n") == "a\nb"
    assert normalise_text("") == ""
    # canonical JSON of sorted keys: independent re-computation of a texts-only digest
    payload = {"b": "x", "a": "é"}
    expected = hashlib.sha256('{"a":"é","b":"x"}'.encode()).hexdigest()
    from doctrine.spec import canonical_json

    assert hashlib.sha256(canonical_json(payload)).hexdigest() == expected


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda m: m.update(version="v9"), "folder says"),
        (lambda m: m["limits"].update(extra=1), "unexpected"),
        (lambda m: m["limits"].pop("tier1_max_tokens"), "missing"),
        (lambda m: m["limits"].update(min_summary_chars=-1), "positive"),
        (lambda m: m["limits"]["tier_targets"].pop("3"), "tier_targets"),
        (lambda m: m.update(load_bearing=["nope"]), "not in 'sections'"),
        (lambda m: m["sections"].append("ghost"), "ghost"),
        (lambda m: m.update(sections="philosophy"), "list of section names"),
    ],
)
def test_bad_manifests_are_clear_errors(tmp_path, mutate, message):
    root = copy_version(tmp_path)
    mpath = root / "v1" / "manifest.json"
    manifest = json.loads(mpath.read_text())
    manifest.pop("texts_sha256")
    mutate(manifest)
    mpath.write_text(json.dumps(manifest))
    with pytest.raises(DoctrineError, match=message):
        load_doctrine("v1", root=root)


def test_unreadable_inputs_are_clear_errors(tmp_path):
    with pytest.raises(DoctrineError, match="unknown doctrine version 'v7'"):
        load_doctrine("v7")
    with pytest.raises(DoctrineError, match="bad doctrine version name"):
        load_doctrine("../v1")
    root = copy_version(tmp_path)
    (root / "v1" / "conformance.json").write_text("{not json")
    with pytest.raises(DoctrineError, match="conformance.json: malformed JSON"):
        load_doctrine("v1", root=root)
    (root / "v1" / "conformance.json").unlink()
    (root / "v1" / "manifest.json").write_text("[1, 2")
    with pytest.raises(DoctrineError, match="manifest.json: malformed JSON"):
        load_doctrine("v1", root=root)


def test_to_manifest_stamp():
    doc = load_doctrine("v1")
    stamp = doc.to_manifest()
    assert stamp == {
        "version": "v1",
        "sha256": doc.sha256,
        "base": {"version": "v1", "sha256": doc.base_sha256},
        "overrides_applied": [],
    }
    json.dumps(stamp)  # must be JSON-serialisable as is
