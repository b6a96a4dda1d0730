"""``python -m eval run`` / ``report`` end to end with the oracle backend."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from eval.report import ReportError, build_report

ROOT = Path(__file__).resolve().parents[2]


def sh(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "eval", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("smoke") / "eval"
    p = sh("run", "configs/eval/smoke.yaml", "--out", str(out))
    assert p.returncode == 0, p.stderr[-3000:]
    return out


def test_help_is_fast_and_lists_commands():
    p = sh("--help")
    assert p.returncode == 0 and "run" in p.stdout and "report" in p.stdout
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "eval", "run", "--help"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    imported = {line.split("|")[-1].strip() for line in p.stderr.splitlines() if "|" in line}
    assert not imported & {"torch", "transformers", "vllm", "matplotlib"}


def test_smoke_end_to_end(smoke_run, tmp_path):
    m = json.loads((smoke_run / "manifest.json").read_text())
    assert m["stage"] == "eval" and m["counts"]["cases"] == 11 * 2 + 3 * 6
    assert len(list(smoke_run.glob("cases/*/*.json"))) == m["counts"]["cases"]
    again = sh("run", "configs/eval/smoke.yaml", "--out", str(smoke_run))
    assert again.returncode == 0 and "already done" in again.stderr
    p = sh("report", str(smoke_run))
    assert p.returncode == 0, p.stderr
    rep = smoke_run.parent / "report"
    for name in ("report.md", "report.html", "report.json", "manifest.json", "scripted_context_per_call.png",
                 "scripted_billed_tokens.png", "accuracy_by_kind.png", "scripted_probe_accuracy.png",
                 "doctrine_per_call.png"):
        assert (rep / name).is_file(), name
    html = (rep / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 5 and "src=\"http" not in html
    data = json.loads((rep / "report.json").read_text())
    assert data["complete"] is True
    assert set(data["workloads"]["scripted"]["arms"]) == {
        "full", "n_latest_10", "n_latest_20", "n_latest_40", "sliding", "auto_compact", "micro_auto",
        "deterministic", "doctrine", "base_slim", "distilled"}
    assert set(data["workloads"]["held_out"]["by_kind"]["doctrine"]) == {"compress", "refuse", "ordinary", "recover"}
    md = (rep / "report.md").read_text()
    assert "**complete**" in md and "| doctrine |" in md
    rm = json.loads((rep / "manifest.json").read_text())
    assert rm["stage"] == "report" and rm["inputs"]["eval"]["sha256"]


def test_side_by_side_and_incomplete(smoke_run, tmp_path):
    other = tmp_path / "other" / "eval"
    p = sh("run", "configs/eval/smoke.yaml", "--out", str(other), "windows=[4000]", "--max-cases", "5")
    assert p.returncode == 1 and not (other / "manifest.json").exists()
    out = build_report(other)
    md = (out / "report.md").read_text()
    assert "INCOMPLETE (5/40 cases done)" in md
    assert json.loads((out / "report.json").read_text())["complete"] is False
    vs = build_report(smoke_run, vs=other, out=tmp_path / "vsreport")
    md = (vs / "report.md").read_text()
    assert "Side by side" in md and "The other run is INCOMPLETE." in md
    tables = json.loads((vs / "report.json").read_text())["vs"]["tables"]
    assert tables["scripted"][0] == ["arm", "metric", "this run", "other run", "delta"]
    assert len(tables["scripted"]) > 1


def test_bad_inputs(tmp_path):
    with pytest.raises(ReportError):
        build_report(tmp_path)
    p = sh("run", "configs/eval/smoke.yaml", "--out", str(tmp_path / "x"), "arms=[nope]")
    assert p.returncode == 2 and "unknown arms" in p.stderr
    p = sh("report", str(tmp_path / "missing"))
    assert p.returncode == 2


def _case(root: Path, arm: str, workload: str, n: int, metrics: dict, calls: list[tuple[int, int]]) -> None:
    path = root / "cases" / arm / f"{workload}.{n:05d}__s0.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    recs = [{"purpose": "decision", "real": True, "prompt_tokens": p, "doctrine_tokens": d} for p, d in calls]
    recs.append({"purpose": "task", "real": False, "prompt_tokens": 9999, "doctrine_tokens": 9999})
    path.write_text(json.dumps({"status": "done", "arm": arm, "workload": workload, "case_id": f"{workload}.{n}",
                                "seed": 0, "metrics": metrics, "calls": recs}))


def test_results_at_a_glance_and_workload_columns(tmp_path):
    from eval.report import headline_table, summarise_run

    run = tmp_path / "eval"
    _case(run, "doctrine", "held_out", 0, {"kind_correct": True}, [(5000, 3000)])
    _case(run, "doctrine", "held_out", 1, {"kind_correct": False}, [(3000, 1000)])
    _case(run, "distilled", "held_out", 0, {"kind_correct": True}, [(2000, 200)])
    _case(run, "distilled", "marathon", 0, {"probe_score": 0.25, "billed_tokens": 70000, "peak_context": 4100,
                                            "summary_conformance": 0.5}, [(2000, 300), (2400, 100)])
    summary = summarise_run(run)
    calls = summary["calls"]
    # Simulated (real=False) calls never count; shares are over prompt tokens of real calls.
    assert calls["doctrine"] == {"model_calls": 2, "prompt_tokens": 8000, "doctrine_tokens": 4000, "max_prompt": 5000,
                                 "prompt_per_call": 4000.0, "doctrine_per_call": 2000.0, "doctrine_share": 0.5}
    assert calls["distilled"]["model_calls"] == 3 and calls["distilled"]["doctrine_share"] == 600 / 6400
    table = headline_table(summary)
    head, *rows = table
    assert head == ["arm", "balanced_acc", "decision_acc", "marathon_probe", "billed_tokens", "peak_context", "prompt_tok/call",
                    "max_prompt", "doctrine_share"]  # summary_conf and recall_probes did not run: no columns
    # decision_acc over two cases (1 and 0): the mean with its 95% interval (Wilson, continuity-corrected)
    # and n; balanced_acc over its kinds (one kind here, two cases). One case still gets an interval.
    assert rows[0] == ["doctrine", "0.500 [0.027, 0.973] n=2", "0.500 [0.027, 0.973] n=2", "–", "–", "–", "4,000",
                       "5,000", "50%"]
    assert rows[1] == ["distilled", "1.000 [0.055, 1.000] n=1", "1.000 [0.055, 1.000] n=1", "0.250 [0.019, 0.985] n=1",
                       "70,000", "4,100", "2,133", "2,400", "9%"]
    out = build_report(run, out=tmp_path / "report")
    md = (out / "report.md").read_text()
    assert md.index("## Results at a glance") < md.index("## held_out")
    marathon = md[md.index("## marathon"):]
    assert "probe_score" in marathon and "summary_conformance" in marathon and "kind_correct" not in marathon
    assert (out / "marathon_context_per_call.png").is_file() and (out / "doctrine_per_call.png").is_file()
    assert "INCOMPLETE" in md  # no eval manifest: never reported as complete


def _cli_profile(window, preset, host, mode, style="list"):
    p = subprocess.run([sys.executable, "-m", "doctrine.kernel", "profile", "--window", str(window),
                        "--preset", preset, "--host", host, "--prompt-mode", mode, "--nudge-style", style],
                       cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    return json.loads(p.stdout)["sha256"]


def test_smoke_manifest_lists_the_profiles_the_cli_prints(smoke_run):
    """Every serving profile the eval records is the one `python -m doctrine.kernel profile` prints."""
    m = json.loads((smoke_run / "manifest.json").read_text())
    profiles = m["serving_profiles"]
    assert {p["prompt_mode"] for p in profiles} == {"doctrine", "distilled"}
    for p in profiles:
        assert p["sha256"] == _cli_profile(p["window"], p["preset"], p["host"], p["prompt_mode"], p["nudge_style"])
    arms = m["arm_profiles"]
    assert set(arms) == {"deterministic", "doctrine", "base_slim", "distilled"}
    assert arms["base_slim"] == arms["distilled"] != arms["doctrine"]  # same profile, other prompt mode
    assert {h for per in arms.values() for h in per.values()} == {p["sha256"] for p in profiles}


def test_out_that_is_a_file_is_one_line_error(smoke_run, tmp_path):
    f = tmp_path / "a-file"
    f.write_text("not a folder")
    for args in (["run", "configs/eval/smoke.yaml", "--out", str(f)],
                 ["run", "configs/eval/smoke.yaml", "--out", str(f / "eval")],
                 ["report", str(smoke_run), "--out", str(f)]):
        p = sh(*args)
        assert p.returncode == 2, p.stderr[-2000:]
        assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr[-2000:]
        assert p.stderr.startswith(f"error: --out {args[-1]}: ") and "is not a folder" in p.stderr
    assert f.read_text() == "not a folder"
