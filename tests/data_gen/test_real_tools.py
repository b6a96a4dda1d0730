"""The real-tool source: real read-only command outputs over local trees, recorded once."""

from __future__ import annotations

import hashlib
import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from data_gen.recipe import DataRecipe, RealToolsSource
from data_gen.sources.real_tools import real_tool_sessions, session_for
from data_gen.sources.real_tools_sandbox import (
    UnsafeCommand,
    check_read_only,
    env_for_tests,
    provenance,
    resolve_tree,
    run,
    tree_family,
)
from plumbing.recipe_loader import load_config

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "configs" / "data" / "pocket_realtool.yaml"
SMALL = ["sources.real_tools.trees=[stdlib/json]", "sources.real_tools.heldout_trees=[site/iniconfig]",
         "split.held_out_families=[realtool_site_iniconfig]", "sources.real_tools.sessions_per_tree=2",
         "replay.windows=[1280]"]


def _snapshot(root: Path) -> dict[str, tuple[str, int]]:
    """Every file under ``root`` (pycache included): sha256 and mtime."""
    return {str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_sessions_are_deterministic_and_their_values_come_from_the_outputs():
    cfg = RealToolsSource(trees=["stdlib/json"])
    tree = resolve_tree("stdlib/json")
    a, b = session_for(tree, 3, cfg), session_for(tree, 3, cfg)
    assert a.to_json() == b.to_json()
    assert a.to_json() != session_for(tree, 4, cfg).to_json()
    assert a.family == "realtool_stdlib_json" and a.source == "real_tools"
    tools = [m["content"] for m in a.messages if m["role"] == "tool"]
    assert all(len(t.split("\n")) <= cfg.max_output_lines + 1 for t in tools)
    # the path:line the agent reports was printed by a real grep over the real file
    loc = next(f for f in a.facts if f.kind == "paths_with_lines")
    rel, line = loc.text.rsplit(":", 1)
    assert loc.used_at and f"./{loc.text}:" in a.messages[loc.message]["content"]
    target = a.meta["target"]
    assert (tree.root / rel).read_text().split("\n")[int(line) - 1].lstrip().startswith(("def ", target["name"]))
    assert a.meta["files_read"][rel] == hashlib.sha256((tree.root / rel).read_bytes()).hexdigest()
    assert any(f.used_at and f.kind == "exact_values" for f in a.facts)


def test_an_output_that_changes_from_run_to_run_is_passed_over(tmp_path):
    from data_gen.sources.real_tools import _Shell

    sh = _Shell(resolve_tree("stdlib/json"), tmp_path, RealToolsSource(trees=["stdlib/json"]))
    ran = sh.scratch_cmd(["python", "-c", "print(object())"])
    assert ran.code == 0 and " at 0x" in ran.out and not sh.fits(ran)
    assert sh.fits(sh.scratch_cmd(["python", "-c", "print(1)"]))


def test_commands_leave_the_trees_untouched():
    names = ["stdlib/json", "site/iniconfig"]
    trees = [resolve_tree(n) for n in names]
    before = [_snapshot(t.root) for t in trees]
    cfg = RealToolsSource(trees=names, sessions_per_tree=3)
    sessions = list(real_tool_sessions(cfg, Counter()))
    assert len(sessions) == 6 and {s.meta["task"] for s in sessions} >= {"default_of", "failing_check"}
    assert [_snapshot(t.root) for t in trees] == before  # no file changed, none added (no __pycache__)
    for s in sessions:
        root = Path(s.meta["tree"]["root"])
        for rel, sha in s.meta["files_read"].items():
            assert hashlib.sha256((root / rel).read_bytes()).hexdigest() == sha


def test_only_read_only_shapes_run_and_nothing_secret_reaches_them(tmp_path, monkeypatch):
    for argv in (["rm", "-rf", "x"], ["sed", "-i", "s/a/b/", "f"], ["sed", "-n", "1,2w out", "f"],
                 ["python", "script.py"], ["bash", "-c", "ls"], []):
        with pytest.raises(UnsafeCommand):
            check_read_only(argv)
    check_read_only(["sed", "-n", "3,9p", "f.py"])
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    assert "OPENAI_API_KEY" not in env_for_tests()
    ran = run(["python", "-c", "import os; print(sorted(os.environ))"], tmp_path, shown="env", timeout_s=20,
              scratch=tmp_path)
    assert ran.code == 0 and "OPENAI_API_KEY" not in ran.out
    # RLIMIT_FSIZE 0: even an allowed program cannot write a byte to a file
    ran = run(["python", "-c", "f = open('w.txt', 'w'); f.write('x' * 10); f.flush()"], tmp_path, shown="w",
              timeout_s=20, scratch=tmp_path)
    assert ran.code == 1 and "File too large" in ran.out
    assert not (tmp_path / "w.txt").exists() or (tmp_path / "w.txt").stat().st_size == 0


def test_a_failing_or_timed_out_command_is_recorded_and_never_raised(tmp_path):
    slow = run(["python", "-c", "import time; time.sleep(30)"], tmp_path, shown="python -c sleep", timeout_s=0.5,
               scratch=tmp_path)
    assert slow.timed_out and slow.code is None
    assert slow.tool_output() == "[The command timed out after 0.5 seconds and was killed.]"
    miss = run(["grep", "-n", "no-such-needle-here", "f.txt"], tmp_path, shown="grep", timeout_s=20, scratch=tmp_path)
    assert miss.code == 2 and miss.tool_output().endswith("[The command completed with exit code 2.]")
    assert "No such file" in miss.out
    # a source whose every command times out, and a tree not on this machine: counted, no crash
    rejects: Counter = Counter()
    cfg = RealToolsSource(trees=["stdlib/json", "site/no_such_package_here"], sessions_per_tree=2, timeout_s=0.001,
                          max_candidates=3)
    assert list(real_tool_sessions(cfg, rejects)) == []
    assert rejects == {"real_tools:NoCandidate": 2, "real_tools:tree_missing": 1}
    assert provenance(["site/no_such_package_here"])["trees"]["site/no_such_package_here"]["missing"]


def test_train_and_heldout_trees_are_disjoint_and_the_split_must_agree():
    recipe = load_config(RECIPE, DataRecipe)
    rt = recipe.sources.real_tools
    assert rt is not None and recipe.sources.synthetic is None
    assert not set(rt.trees) & set(rt.heldout_trees) and len(rt.heldout_trees) >= 5
    roots = {n: resolve_tree(n).root for n in [*rt.trees, *rt.heldout_trees]}
    held_roots = {roots[n] for n in rt.heldout_trees}
    assert not any(r in held_roots or set(r.parents) & held_roots for r in (roots[n] for n in rt.trees))
    assert {tree_family(n) for n in rt.heldout_trees} <= set(recipe.split.held_out)
    with pytest.raises(ValueError, match="both trained on and held out"):
        RealToolsSource(trees=["stdlib/json"], heldout_trees=["stdlib/json"])
    with pytest.raises(ValueError, match="must list the held-out trees"):
        load_config(RECIPE, DataRecipe, ["split.held_out_families=[]"])
    with pytest.raises(ValueError, match="lists trained trees"):
        load_config(RECIPE, DataRecipe, ["split.held_out_families=[realtool_stdlib_json, realtool_stdlib_asyncio, "
                                         "realtool_stdlib_tomllib, realtool_stdlib_zoneinfo, realtool_stdlib_xmlrpc, "
                                         "realtool_stdlib_dbm, realtool_site_jmespath, realtool_site_h11, "
                                         "realtool_site_pluggy, realtool_site_iniconfig, realtool_site_platformdirs, "
                                         "realtool_site_tqdm]"])


def test_a_build_is_byte_identical_twice_and_every_row_fits_the_pocket_bound(tmp_path):
    from data_gen.audit import read_rows
    from data_gen.build import build_curriculum
    from data_gen.lengths import length_table
    from plumbing.chat_templates import choose_template
    from plumbing.models import load_tokenizer

    recipe = load_config(RECIPE, DataRecipe, SMALL)
    outs = [build_curriculum(recipe, tmp_path / f"d{i}", log=lambda *a: None, progress=False) for i in (0, 1)]
    manifests = [json.loads((o / "manifest.json").read_text()) for o in outs]
    assert manifests[0]["files"] and manifests[0]["files"] == manifests[1]["files"]  # same shard bytes
    assert manifests[0]["fingerprint_sha256"] == manifests[1]["fingerprint_sha256"]
    src = manifests[0]["fingerprint"]["inputs"]["real_tools"]
    assert src["python"] == sys.version.split()[0]
    assert set(src["trees"]) == {"stdlib/json", "site/iniconfig"}
    assert all(t["files_sha256"] and t["version"] for t in src["trees"].values())
    rows = read_rows(outs[0])
    assert {r["meta"]["source"] for r in rows} == {"real_tools"}
    splits = {fam: {r["meta"]["split"] for r in rows if r["meta"]["family"] == fam}
              for fam in {r["meta"]["family"] for r in rows}}
    assert splits["realtool_site_iniconfig"] == {"heldout"}  # the held-out tree: never in train
    assert "heldout" not in splits["realtool_stdlib_json"] and "train" in splits["realtool_stdlib_json"]
    assert {r["meta"]["kind"] for r in rows} & {"emergency", "tier2", "refusal"}
    tok = load_tokenizer(recipe.length_model)
    table = length_table(rows, tok, choose_template(tok).template)
    assert max(r["max"] for r in table) <= recipe.max_model_tokens


def test_git_history_is_shown_only_where_a_repository_tracks_the_file(tmp_path):
    import subprocess

    from data_gen.sources.real_tools import _filler, _Shell, targets
    from data_gen.sources.real_tools_sandbox import Tree

    repo = tmp_path / "repo"
    (repo / "pkgx").mkdir(parents=True)
    (repo / "pkgx" / "__init__.py").write_text("def scale(x, factor=3):\n    return x * factor\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "scale: default factor of three"], check=True)
    cfg = RealToolsSource(trees=["site/pkgx"])
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    tree = Tree("site/pkgx", repo / "pkgx", "pkgx", "0", "pkgx")
    t = targets(tree, "__init__.py")[0]
    assert (t.name, t.param, t.value_repr, t.line) == ("scale", "factor", "3", 1)
    ran, _before, after = _filler(_Shell(tree, scratch, cfg), "git_log", t)
    assert ran.code == 0 and "scale: default factor of three" in ran.out and after == "1 recent commit(s) touch it."
    assert ran.command.endswith("git log --oneline -n 4 -- __init__.py")
    json_tree = resolve_tree("stdlib/json")
    jt = targets(json_tree, "__init__.py")[0]
    assert _filler(_Shell(json_tree, scratch, cfg), "git_log", jt) is None  # no repository: no git call
    with pytest.raises(UnsafeCommand):
        check_read_only(["git", "commit", "-m", "x"])


def test_a_failing_check_is_known_by_its_own_line_and_a_file_named_after_its_tree():
    # Doctest's closing banner is the same in every session and a check named after the
    # function alone (check_main.txt) repeats across trees: neither may be what an unseen
    # tree's label keeps, or a held-out fold could be written from memory of train.
    cfg = RealToolsSource(trees=["stdlib/json"], tasks=["failing_check"])
    for name in ("stdlib/json", "site/iniconfig"):
        tree = resolve_tree(name)
        pkg = name.split("/")[1]
        for seed in (0, 1):
            s = session_for(tree, seed, cfg)
            assert s.meta["task"] == "failing_check"
            err = next(f for f in s.facts if f.kind == "error_strings")
            check = f"check_{pkg}_{s.meta['target']['name']}.txt"
            assert err.text.startswith(f'File "{check}", line ') and err.used_at, err.text
            assert "***Test Failed***" in s.messages[err.message]["content"]  # the banner is still shown
            assert not any("***Test Failed***" in f.text for f in s.facts)
