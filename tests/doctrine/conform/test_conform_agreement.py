"""The checker against hand-labelled verdicts (benchmarks/data/conform_agreement/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from doctrine.conform import check_summary, extract_keep_items
from doctrine.conform.agreement import cohen_kappa, load_cases, score_cases

CASES = Path(__file__).resolve().parents[3] / "benchmarks" / "data" / "conform_agreement"


@pytest.fixture(scope="module")
def cases():
    return {c.id: c for c in load_cases(CASES)}


@pytest.fixture(scope="module")
def result(cases):
    return score_cases(list(cases.values()))


def test_the_set_is_big_and_varied_enough(cases):
    assert len(cases) >= 40
    styles = {c.style for c in cases.values()}
    assert {"paraphrased", "copied", "fragments", "pasted", "altered_value", "missing"} <= styles
    assert {c.tier for c in cases.values()} >= {1, 2, 3}
    assert {c.verdict for c in cases.values()} == {"pass", "fail"}


def test_agreement_with_the_readers(result):
    assert result.agreement >= 0.9, [(r["id"], r["reasons"][:2]) for r in result.disagreements]


def test_every_faithful_paraphrase_passes_and_every_fragment_or_paste_fails(result):
    for r in result.rows:
        if r["style"] == "paraphrased" and r["verdict"] == "pass":
            assert r["checker"] == "pass", (r["id"], r["reasons"])
        if r["style"] in ("fragments", "pasted"):
            assert r["checker"] == "fail", r["id"]


def _report(cases, cid):
    c = cases[cid]
    return check_summary(c.source, c.summary, tier=c.tier)


def test_an_answered_question_is_a_decision_not_an_open_item(cases):
    src = cases["design_choice/paraphrased"].source
    items = extract_keep_items(src)
    assert not [it for it in items["open_questions"] if it.kind == "question"]
    decision = items["decisions"][0]
    assert "Redis" in decision.text and decision.salience >= 0.95  # the user approved it
    good = _report(cases, "design_choice/paraphrased")
    assert good.passed and good.classes["decisions"].recall == 1.0
    dropped = _report(cases, "design_choice/open_as_dropped")
    assert not dropped.passed and dropped.classes["decisions"].recall < 0.5


def test_a_todo_kept_in_other_words_counts(cases):
    r = _report(cases, "todo_open/paraphrased")
    assert r.passed, r.reasons
    assert r.classes["open_questions"].recall >= 0.9
    missing = _report(cases, "todo_open/missing_open")
    assert not missing.passed and missing.classes["open_questions"].recall < 0.5


def test_digit_separators_survive_extraction_and_a_cut_value_is_an_error(cases):
    src = cases["config_value/copied"].source
    settings = {it.text for it in extract_keep_items(src)["exact_values"] if it.kind == "setting"}
    assert "CACHE_TTL_MS=60_000" in settings or "CACHE_TTL_MS=15_000" in settings
    assert not any(s.endswith(("=60", "=15")) for s in settings)
    cut = _report(cases, "config_value/altered")
    assert not cut.passed and any(v.startswith("CACHE_TTL_MS=") for v in cut.usability.altered_values)
    # The same value written without separators is the same value.
    assert _report(cases, "config_value/paraphrased").passed


def test_invented_numbers_and_stale_values_fail(cases):
    r = _report(cases, "config_value/invented")
    assert not r.passed and {"340", "95"} <= set(r.usability.invented_numbers)
    stale = _report(cases, "digests/stale_value")
    assert not stale.passed and stale.usability.stale_values
    assert _report(cases, "digests/merged").passed


def test_fragment_lines_and_duplicates_are_counted(cases):
    r = _report(cases, "dependency_bump/fragments")
    assert "4.17.21" in r.usability.fragments and "private: true" in r.usability.fragments
    d = _report(cases, "duplicated/repeats")
    assert len(d.usability.duplicates) == 4 and not d.passed  # 1 + 2 + 1 repeats


def test_cohen_kappa():
    assert cohen_kappa([(True, True), (False, False)]) == 1.0
    assert cohen_kappa([(True, False), (False, True)]) == -1.0
    assert cohen_kappa([(True, True), (True, False), (False, True), (False, False)]) == 0.0


def test_terse_change_and_act_lines_are_statements_bare_values_are_not(cases):
    from doctrine.conform.usability import check_usability

    src = cases["terse/arrow_and_created"].source
    texts = [m.get("content") or "" for m in src]
    good = ("- Goal: raise the client retries for the flaky pricing API.\n- `src/app.ts`: `retries = 2` -> `retries = 4`\n"
            "- Created `src/retry.ts` with `withRetry(fn, attempts)`")
    assert check_usability(good, texts, []).fragments == []
    bad = "- 2 -> 4\n- Fixed.\n- `withRetry`\n- Expected: 4"
    assert check_usability(bad, texts, []).fragments == ["2 -> 4", "Fixed.", "`withRetry`", "Expected: 4"]
    # The held-out terse set is judged as its readers judged it.
    r = score_cases([c for c in cases.values() if c.set == "holdout_terse"])
    assert r.n == 6 and r.agree == 6, [(x["id"], x["reasons"][:2]) for x in r.disagreements]


def test_a_quote_with_words_in_no_source_is_invented(cases):
    src = cases["terse/arrow_and_created"].source
    # A shortened signature quotes the source's own words (the write call's arguments).
    kept = ("- Goal: raise the client retries for the flaky pricing API.\n"
            "- Created `src/retry.ts` with `withRetry(fn, attempts)`")
    assert check_summary(src, kept).usability.invented_quotes == []
    # A constant the source never printed, quoted as if it had (read in a model's reply).
    made_up = kept + "\n- `src/app.ts`: `retries = BATCH_VALUE`"
    r = check_summary(src, made_up)
    assert r.usability.invented_quotes == ["retries = BATCH_VALUE"]
    assert not r.passed and any(x.startswith("quoted text not in the source") for x in r.reasons)


def test_a_quote_the_cited_message_does_not_hold_is_misattributed(cases):
    from doctrine.conform.attribution import misattributed_quotes
    from doctrine.conform.extract import source_messages

    src = cases["terse/arrow_and_created"].source
    msgs = source_messages(src)
    ref = next(m.ref for m in msgs if m.kind == "tool-result" and "PASS src/app.test.ts" in m.text)
    # The test run's own line, cited to it: what a reader finds when they restore it.
    right = f"- Ran the tests ({ref}): `PASS src/retry.test.ts`"
    assert misattributed_quotes(right, msgs) == []
    # The same quote cited to the first tool result (the grep), which does not hold it.
    other = next(m.ref for m in msgs if m.kind == "tool-result" and "retries = 2" in m.text)
    wrong = f"- Ran the tests ({other}): `PASS src/retry.test.ts`"
    assert misattributed_quotes(wrong, msgs) == [f"`PASS src/retry.test.ts` ({other})"]
    # A line naming a block quotes the block; a line citing two messages is not judged.
    assert misattributed_quotes(f"- SUPERSEDED by b3 (`x = 1`): ({other})", msgs) == []
    assert misattributed_quotes(f"- ({other}, {ref}): `PASS src/retry.test.ts`", msgs) == []
