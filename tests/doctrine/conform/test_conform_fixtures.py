"""The checker against the project-made sessions under fixtures/: good summaries pass, damaged ones fail.

Each targeted mutation of a good summary damages exactly one thing; the class it belongs
to must score lower than in the verbatim summary.
"""

from __future__ import annotations

import pytest

from doctrine.conform import check_summary

SESSIONS = ("pytest_failure", "ts_compile", "log_triage", "dependency_bump")


@pytest.mark.parametrize("session", SESSIONS)
def test_good_summaries_pass(session, load_source, load_summary):
    r = check_summary(load_source(session), load_summary(session))
    assert r.passed, r.reasons
    assert r.score >= 0.85
    assert r.drop_violations == []
    assert r.limits["violations"] == []


# (session, class, verbatim text in good.md, damaged replacement)
MUTATIONS = [
    ("pytest_failure", "error_strings", "`decimal.InvalidOperation: [<class 'decimal.ConversionSyntax'>]`",
     "a decimal conversion error"),
    ("pytest_failure", "paths_with_lines", "at invoicing/money.py:19", "in invoicing/money.py"),
    ("pytest_failure", "decisions",
     ", because locale-dependent parsing would break on servers with a non-US locale", ""),
    ("ts_compile", "error_strings",
     "`TS2345: Argument of type 'string' is not assignable to parameter of type 'number'.`",
     "a string was passed where a number was expected"),
    ("ts_compile", "paths_with_lines", "at src/cart/totals.test.ts:33", "in src/cart/totals.test.ts"),
    ("ts_compile", "decisions", ", because the checkout route also reads `item.price` and would otherwise need the same fix",
     ""),
    ("log_triage", "error_strings", "FATAL `JavaScript heap out of memory: allocation failed near heap limit`",
     "the process ran out of heap"),
    ("log_triage", "paths_with_lines", "deploy/staging/ingest-worker.env:3 `BATCH_SIZE=5000`",
     "deploy/staging/ingest-worker.env `BATCH_SIZE=5000`"),
    ("log_triage", "exact_values", "`BATCH_SIZE=5000`", "a much larger batch size"),
    ("log_triage", "decisions",
     ", because heap use grows with the batch and the old size ran for two months without a restart", ""),
    ("dependency_bump", "error_strings", "`Error: Cannot find module 'license-checker'`", "a missing module error"),
    ("dependency_bump", "decisions", ", because audit fix may also move other packages and the user asked not to upgrade anything else", ""),
    ("dependency_bump", "user_intent", '"Keep the lockfile in sync and do not upgrade anything else."',
     "the lockfile must stay consistent and nothing else should change"),
    ("dependency_bump", "open_questions", "TODO: ask whether license-checker should become a devDependency.",
     "license tooling is unresolved."),
]


@pytest.mark.parametrize("session,cls,verbatim,damaged", MUTATIONS)
def test_damaging_a_keep_item_lowers_its_class(session, cls, verbatim, damaged, load_source, load_summary):
    src, good = load_source(session), load_summary(session)
    assert verbatim in good, "the fixture summary changed; update the mutation"
    bad = good.replace(verbatim, damaged)
    r_good, r_bad = check_summary(src, good), check_summary(src, bad)
    assert r_bad.classes[cls].recall < r_good.classes[cls].recall
    assert r_bad.score < r_good.score
    # Nothing else got worse: the damage is attributed to its own class.
    for other, res in r_bad.classes.items():
        if other != cls:
            assert res.recall == pytest.approx(r_good.classes[other].recall), other


@pytest.mark.parametrize("session,bad", [("pytest_failure", "bad_paraphrase"), ("ts_compile", "bad_paraphrase"),
                                         ("dependency_bump", "bad_no_rationale")])
def test_bad_summaries_fail_on_the_damaged_classes(session, bad, load_source, load_summary):
    src = load_source(session)
    good, worse = check_summary(src, load_summary(session)), check_summary(src, load_summary(session, bad))
    assert not worse.passed and worse.score < good.score
    assert worse.classes["decisions"].recall < good.classes["decisions"].recall
    if bad == "bad_paraphrase":
        for cls in ("error_strings", "paths_with_lines", "user_intent"):
            assert worse.classes[cls].recall < good.classes[cls].recall, cls


@pytest.mark.parametrize("session", ["pytest_failure", "log_triage"])
def test_a_pasted_log_is_flagged(session, load_source, load_summary):
    src = load_source(session)
    r = check_summary(src, load_summary(session, "bad_log_paste"))
    assert not r.passed
    assert any(v.kind == "copied_output" and v.chars >= 200 for v in r.drop_violations)
    assert r.drop_share > 0.25
    assert r.score < check_summary(src, load_summary(session)).score
    assert all(len(v.excerpt) <= 120 for v in r.drop_violations)
    assert any(x.startswith("DROP") for x in r.reasons)
