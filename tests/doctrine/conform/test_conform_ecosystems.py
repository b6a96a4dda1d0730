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


@pytest.fixture(scope="module", params=["tuning", "holdout", "holdout2", "holdout3", "holdout4"])
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
        # A known false pass (below) may tie its conforming summary (eco4/rebar3/huf_zero: 1.0).
        bad = [r["score"] for r in rows if r["verdict"] == "fail" and r["id"] not in KNOWN_FALSE_PASSES.get(name, ())]
        assert good and min(good) > max(bad), rows
    passed_bad = {r["id"] for r in result.rows if r["verdict"] == "fail" and r["checker"] == "pass"}
    missed = {r["id"] for r in result.rows if r["verdict"] == "pass" and r["checker"] != "pass"}
    # The known misses, kept in the sets rather than tuned away (see the README): eco/sql/good
    # is asked to keep a psql -v flag no prose restates; eco2/elixir/swapped_rates swaps two
    # rates whose lines carry no field name for them (``get_env("LATE_FEE_RATE", "0.05")``);
    # eco4/haproxy/good is asked for a "decision" that is the agent's report of its edit;
    # eco4/es/wrong_high gives the high watermark 95% (the flood-stage default's figure) with
    # no key the checker binds; eco4/rebar3/huf_zero changes a one-digit value (2 -> 0).
    assert passed_bad == KNOWN_FALSE_PASSES.get(name, set()), passed_bad
    assert missed == KNOWN_MISSES.get(name, set()), missed


# holdout2's misses of 2026-12-06 (dotnet/good, elixir/good refused; php/claimed_major passed)
# shaped the restatement, change and pending rules (relevance.py, changes.py, pending.py);
# holdout3, written before those rules, scored 41/47 once with them (42/47 without) and then tuned
# them too (stamps, runtime frames, unit sizes, counts, quotes, claims); holdout4, written after
# all that, scored 34/43 once (33/43 without) and then tuned the claims, extensions, places and misquotes: none
# of the four is held out now (README).
KNOWN_MISSES = {"holdout": {"eco/sql/good"}, "holdout4": {"eco4/haproxy/good"}}
KNOWN_FALSE_PASSES = {"holdout2": {"eco2/elixir/swapped_rates"},
                      "holdout4": {"eco4/es/wrong_high", "eco4/rebar3/huf_zero"}}


def test_the_second_holdout_covers_ten_more_toolchains():
    cases = load_cases(ROOT / "holdout2")
    assert len({c.file for c in cases}) >= 10 and {c.set for c in cases} == {"holdout_eco2"}


def test_the_fourth_holdout_covers_ten_more_toolchains():
    cases = load_cases(ROOT / "holdout4")
    assert len({c.file for c in cases}) >= 10 and {c.set for c in cases} == {"holdout_eco4"}


def test_the_third_holdout_covers_ten_more_toolchains_and_claims():
    cases = load_cases(ROOT / "holdout3")
    assert len({c.file for c in cases}) >= 10 and {c.set for c in cases} == {"holdout_eco3"}
    assert sum(c.style == "claimed_success" for c in cases) >= 5


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


@pytest.mark.parametrize("command,out", [
    ("grep -v '^#' db/flyway.conf", "# managed by deploy\nflyway.bellTimeout=803"),
    ("cat src/main/resources/application.properties", "spring.application.name=billing\nflyway.bellTimeout=803"),
    ("cat -n db/flyway.conf", "     1\t# managed by deploy\n     2\tflyway.bellTimeout=803"),
])
def test_config_rows_the_shell_printed_are_settings(command, out):
    src = _one(out, command)
    assert "flyway.bellTimeout=803" in _texts(extract_keep_items(src), "exact_values")
    head = "- Goal: fix the build, keep the API; db/flyway.conf sets "
    assert check_summary(src, head + "`flyway.bellTimeout=803`.").classes["exact_values"].recall == 1.0
    # A lazy fold that names the file but not the value no longer keeps every exact value.
    assert check_summary(src, head + "a timeout.").classes["exact_values"].recall == 0.0


def test_rows_of_two_config_files_are_not_guessed_at():
    src = _one("flyway.bellTimeout=803\nretry_limit=4", "cat db/flyway.conf conf/app.ini")
    assert "flyway.bellTimeout=803" not in _texts(extract_keep_items(src), "exact_values")


@pytest.mark.parametrize("out,kept", [
    ("24728", "24728"),
    (" count \n-------\n 24728\n(1 row)", "24728"),
    ("1", None),  # an exit status, not a finding
    ("24728\n3", None),  # two numbers: no single answer
])
def test_a_query_whose_answer_is_one_number_keeps_it(out, kept):
    values = _texts(extract_keep_items(_one(out, "psql -tA -c 'SELECT count(*) FROM orders WHERE note IS NULL'")),
                    "exact_values")
    assert (kept in values) if kept else not any(v.isdigit() for v in values)


def test_a_printed_diff_or_file_is_still_read_as_one():
    # `head`, `cat` and `sed` also print config rows, but their output stays a diff or a view.
    diff = "diff --git a/src/app.py b/src/app.py\n--- a/src/app.py\n+++ b/src/app.py\n@@ -40,3 +41,4 @@ def load():\n" \
           "     x = 1\n+    retries = fetch_retries(cfg)\n     return x"
    items = extract_keep_items(_one(diff, "git diff | head -40"))
    assert "src/app.py:41" in _texts(items, "paths_with_lines")
