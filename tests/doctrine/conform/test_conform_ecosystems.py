"""The checker on toolchains outside Python (benchmarks/data/conform_agreement/ecosystems/).

The held-out files were written, verdicts first, before the checker learnt these shapes;
the tuning files were used while changing it. Each file's conforming summary must score
above every lazy or unfaithful one of the same source.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from doctrine.conform import check_summary, extract_keep_items
from doctrine.conform.agreement import expand_session, load_cases, score_cases

ROOT = Path(__file__).resolve().parents[3] / "benchmarks" / "data" / "conform_agreement" / "ecosystems"


@pytest.fixture(scope="module", params=["tuning", "holdout"])
def scored(request):
    return request.param, score_cases(load_cases(ROOT / request.param))


def test_the_holdout_covers_eight_toolchains_outside_python():
    files = {c.file for c in load_cases(ROOT / "holdout")}
    assert len(files) >= 8 and {c.set for c in load_cases(ROOT / "holdout")} == {"holdout_eco"}


def test_conforming_summaries_outrank_the_rest_of_their_file(scored):
    name, result = scored
    cases = {c.id: c for c in load_cases(ROOT / name)}
    by_file = defaultdict(list)
    for r in result.rows:
        by_file[cases[r["id"]].file].append(r)
    for rows in by_file.values():
        good = [r["score"] for r in rows if r["verdict"] == "pass"]
        bad = [r["score"] for r in rows if r["verdict"] == "fail"]
        assert good and min(good) > max(bad), rows
    # Every lazy or unfaithful summary is refused.
    assert all(r["checker"] == "fail" for r in result.rows if r["verdict"] == "fail")
    passes = [r for r in result.rows if r["verdict"] == "pass"]
    missed = [r["id"] for r in passes if r["checker"] != "pass"]
    # Held out: one conforming summary (eco/sql/good) is still refused for a psql -v flag
    # the checker asks to keep; it stays in the set as a known miss.
    assert len(missed) <= (1 if name == "holdout" else 0), missed


def _one(out: str, command: str = "make test") -> list[dict]:
    return expand_session({"first_id": 1, "steps": [{"user": "Fix the build, keep the API."},
                                                     {"run": command, "out": out}]})


def _texts(items, cls):
    return [it.text for it in items[cls]]


CASES = [  # (tool output, an error string, a path:line) the checker must ask to keep
    ("--- FAIL: TestRetry (0.2s)\n    retry_test.go:42: got 503, want 504\nFAIL",
     "retry_test.go:42: got 503, want 504", "retry_test.go:42"),
    ("error[E0502]: cannot borrow `x` as mutable\n  --> src/lib.rs:58:17\n",
     "error[E0502]: cannot borrow x as mutable", "src/lib.rs:58"),
    ("java.lang.IllegalStateException: closed\n    at com.acme.Svc.run(Svc.java:87)\n"
     "    at java.base/java.lang.Thread.run(Thread.java:833)", "com.acme.Svc.run(Svc.java:87)", "Svc.java:87"),
    ("rspec ./spec/a_spec.rb:31 # A applies the coupon\n4 examples, 1 failure",
     "./spec/a_spec.rb:31 # A applies the coupon", "./spec/a_spec.rb:31"),
    ("src/p.py:44: error: Incompatible return value type  [return-value]",
     "Incompatible return value type [return-value]", "src/p.py:44"),
    ("     Active: failed (Result: exit-code) since Tue", "Active: failed (Result: exit-code)", None),
    ('Dec 01 09:14:03 web-03 nginx[20]: nginx: [emerg] unknown directive "proxy_pas" in /etc/nginx/app.conf:14',
     'nginx: [emerg] unknown directive "proxy_pas" in /etc/nginx/app.conf:14', "/etc/nginx/app.conf:14"),
    ("pg_dump: error: query failed: ERROR:  permission denied for table audit_log",
     "pg_dump: error: query failed: ERROR: permission denied for table audit_log", None),
]


@pytest.mark.parametrize("out,error,place", CASES)
def test_toolchain_failures_are_keep_items(out, error, place):
    items = extract_keep_items(_one(out))
    assert error in _texts(items, "error_strings")
    if place:
        assert place in _texts(items, "paths_with_lines")


def test_project_frames_rank_above_the_runtime_and_counts_are_read():
    items = extract_keep_items(_one(CASES[2][0] + "\n" + CASES[3][0]))
    frames = {it.text: it.salience for it in items["paths_with_lines"]}
    assert frames["Svc.java:87"] > frames.get("Thread.java:833", 0)
    assert "4 examples, 1 failure" in _texts(items, "exact_values")


def test_a_prefixed_version_is_kept_quoted_either_way():
    src = _one("9:\tgithub.com/acme/retry v0.4.47", "grep -n acme/retry go.mod")
    assert "0.4.47" in _texts(extract_keep_items(src), "exact_values")
    head = "- Goal: fix the build and keep the API; go.mod:9 pins github.com/acme/retry "
    for quoted in ("`v0.4.47`.", "0.4.47."):
        r = check_summary(src, head + quoted)
        assert r.classes["exact_values"].recall == 1.0 and not r.usability.invented_numbers, quoted
    wrong = check_summary(src, head + "v0.4.74.")
    assert wrong.classes["exact_values"].recall == 0.0 and "0.4.74" in wrong.usability.invented_numbers


def test_traceback_source_lines_are_not_signatures():
    src = _one('Traceback (most recent call last):\n  File "/r/a.py", line 3, in f\n    total = a / b\n'
               "ZeroDivisionError: division by zero", "python a.py")
    items = extract_keep_items(src)
    assert items["signatures"] == [] and "/r/a.py:3" in _texts(items, "paths_with_lines")


def test_grep_hits_on_config_files_give_settings():
    src = _one("config/worker.yaml:14:  shutdown_grace_period: 5s\nsrc/main.go:88:\tsrv.Shutdown(ctx)",
               "grep -rn grace config/ src/")
    assert "shutdown_grace_period: 5s" in _texts(extract_keep_items(src), "exact_values")
