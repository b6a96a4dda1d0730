"""check_summary: scores, limits, DROP flags, tiers, determinism and configuration."""

from __future__ import annotations

import json
import shutil

import pytest

from doctrine.conform import ConformanceConfigError, check_summary
from doctrine.conform.settings import parse_settings


def test_report_is_deterministic_and_serialisable(load_source, load_summary):
    src, summary = load_source("pytest_failure"), load_summary("pytest_failure")
    a, b = check_summary(src, summary), check_summary(src, summary)
    assert a.to_dict() == b.to_dict()
    d = json.loads(json.dumps(a.to_dict()))
    assert 0.0 <= d["score"] <= 1.0 and isinstance(d["passed"], bool)
    assert set(d["classes"]) == {"paths_with_lines", "signatures", "error_strings", "exact_values", "decisions",
                                 "user_intent", "open_questions", "message_refs"}
    assert {"found", "kept", "recall", "missed"} <= set(d["classes"]["error_strings"])


def test_size_limits_come_from_the_doctrine(load_source, v1):
    src = load_source("pytest_failure")
    lim = v1.limits
    short = check_summary(src, "m00001-m00016: fixed.")
    assert "too_short" in short.limits["violations"] and not short.passed
    long_text = "- m00001 " + "x" * (lim["max_summary_chars"] + 10)
    assert "too_long" in check_summary(src, long_text).limits["violations"]
    # Under the char cap but over the tier-1 token cap (chars/4 tokens).
    words = " ".join(f"w{n}" for n in range(lim["tier1_max_tokens"] * 2))
    over = check_summary(src, words)
    assert "over_token_limit" in over.limits["violations"]
    assert over.limits["max_tokens"] == lim["tier1_max_tokens"]


def test_a_limit_violation_lowers_the_score(load_source, load_summary):
    src, good = load_source("pytest_failure"), load_summary("pytest_failure")
    base = check_summary(src, good)
    padded = check_summary(src, good + "\n" + " ".join(f"note{n}" for n in range(2500)))
    assert "over_token_limit" in padded.limits["violations"]
    assert padded.score < base.score and not padded.passed


def test_counter_can_be_injected(load_source, load_summary):
    src, good = load_source("pytest_failure"), load_summary("pytest_failure")
    r = check_summary(src, good, count_tokens=lambda s: len(s))  # one token per char
    assert r.summary_tokens == len(good)
    assert "over_token_limit" not in r.limits["violations"] or r.summary_tokens > 2000


def test_compression_ratio_floor(load_source):
    src = load_source("log_triage")
    r = check_summary(src, "\n".join(m.get("content") or "" for m in src)[:15000])
    assert r.compression_ratio is not None and r.compression_ratio < 2.0
    assert "low_compression_ratio" in r.limits["violations"]


def test_repeated_status_lines_are_flagged(load_source, load_summary):
    src, good = load_source("dependency_bump"), load_summary("dependency_bump")
    noisy = good + "\n" + "\n".join(f"- checked npm status: run {n} ok" for n in range(5))
    r = check_summary(src, noisy)
    assert any(v.kind == "repeated_lines" for v in r.drop_violations)
    assert r.drop_share > 0


def test_keep_items_copied_from_output_are_not_drop_violations(load_source):
    src = load_source("ts_compile")
    from doctrine.conform import extract_keep_items

    errors = extract_keep_items(src)["error_strings"]
    summary = "m00101-m00120 tsc errors:\n" + "\n".join(f"- {e.text}" for e in errors)
    assert check_summary(src, summary).drop_violations == []


TIER2_SOURCE = [
    {"id": "b3", "role": "system", "content_type": "text", "text": (
        "[Compressed conversation section] — parse_amount fix\n- Goal: amounts like 1,250.00 must parse.\n"
        "- invoicing/money.py:18 `cleaned = value.strip().replace(\"$\", \"\").replace(\",\", \"\")`\n"
        "- Decision: strip commas instead of locale.atof, because locale parsing breaks on non-US servers.\n"
        "- tests/test_money.py: 5 passed. m00001-m00016")},
    {"id": "b4", "role": "system", "content_type": "text", "text": (
        "[Compressed conversation section] — lodash bump\n- lodash ^4.17.21 for GHSA-jf85-cpcp-j695 (was 4.17.15).\n"
        "- Decision: npm install instead of npm audit fix, because audit fix moves other packages.\n"
        "- 48 passed, 48 total. Open: TODO: ask whether license-checker should become a devDependency. m00301-m00315")},
]

TIER2_GOOD = """Source: b3 (1.4K→0.4K tok, 3.5x). [parse_amount fix]
- invoicing/money.py:18 strips commas (`.replace(",", "")`) instead of locale.atof, because locale parsing breaks on non-US servers.
- tests/test_money.py: 5 passed; refs m00001-m00016.
Source: b4 (0.9K→0.3K tok, 3.4x). [lodash bump]
- lodash ^4.17.21 for GHSA-jf85-cpcp-j695 via npm install instead of npm audit fix, because audit fix moves other packages.
- 48 passed, 48 total. Open: ask whether license-checker should become a devDependency (m00301-m00315).
"""


def test_tier2_targets_and_source_headers(v1):
    r = check_summary(TIER2_SOURCE, TIER2_GOOD, tier=2)
    target = v1.limits["tier_targets"]["2"]
    assert r.limits["min_tokens"] == 2 * target["min_tokens_per_source"]
    assert r.limits["max_tokens"] == 2 * target["max_tokens_per_source"]
    assert r.limits["violations"] == [], r.reasons
    assert r.classes["message_refs"].recall == 1.0
    missing = check_summary(TIER2_SOURCE, TIER2_GOOD.replace("Source: b4", "Part two"), tier=2)
    assert "missing_source_headers" in missing.limits["violations"] and missing.limits["missing_headers"] == ["b4"]
    unknown = check_summary(TIER2_SOURCE, TIER2_GOOD.replace("Source: b4", "Source: b4+b9"), tier=2)
    assert unknown.limits["unknown_headers"] == ["b9"]
    assert "off_tier_target" in check_summary(TIER2_SOURCE, "Source: b3+b4\n- done, see m00001.", tier=2).limits["violations"]


def test_tier2_copying_the_sources_is_a_drop_violation():
    copied = "Source: b3+b4\n" + TIER2_SOURCE[0]["text"] + "\n" + TIER2_SOURCE[1]["text"]
    r = check_summary(TIER2_SOURCE, copied, tier=2)
    assert any(v.kind == "copied_output" for v in r.drop_violations)


def test_bad_arguments():
    with pytest.raises(ValueError, match="tier"):
        check_summary([], "x" * 60, tier=4)
    with pytest.raises(TypeError):
        check_summary([], None)


def test_a_version_without_conformance_json_is_an_error_naming_the_file(tmp_path, v1):
    from doctrine.spec import load_doctrine

    root = tmp_path / "versions"
    shutil.copytree(v1.root + "/v1", root / "v1")
    (root / "v1" / "conformance.json").unlink()
    bare = load_doctrine("v1", root=root)
    with pytest.raises(ConformanceConfigError, match=r"v1[/\\]conformance\.json"):
        check_summary([{"role": "user", "content": "hi there, fix it"}], "x" * 60, doctrine=bare)


def test_thresholds_are_read_from_the_doctrine(tmp_path, v1, load_source, load_summary):
    """Raising a class minimum in conformance.json makes the same summary fail."""
    from doctrine.spec import load_doctrine

    root = tmp_path / "versions"
    shutil.copytree(v1.root + "/v1", root / "v1")
    conf = json.loads((root / "v1" / "conformance.json").read_text())
    conf["classes"]["signatures"]["min_recall"] = 1.0
    (root / "v1" / "conformance.json").write_text(json.dumps(conf))
    strict = load_doctrine("v1", root=root)
    src, good = load_source("pytest_failure"), load_summary("pytest_failure")
    assert check_summary(src, good).passed
    r = check_summary(src, good, doctrine=strict)
    assert not r.passed and any(x.startswith("signatures:") for x in r.reasons)


@pytest.mark.parametrize("mutate,match", [
    (lambda c: c.pop("classes"), "classes"),
    (lambda c: c["classes"].pop("decisions"), "decisions"),
    (lambda c: c["classes"]["decisions"].update(min_recall=2), "min_recall"),
    (lambda c: c["drop"].update(kgram_chars=500), "kgram_chars"),
    (lambda c: c.update(format="other"), "format"),
    (lambda c: c.update(typo_key=1), "typo_key"),
])
def test_malformed_conformance_is_rejected(v1, mutate, match):
    conf = json.loads(json.dumps(v1.conformance))
    mutate(conf)
    with pytest.raises(ConformanceConfigError, match=match):
        parse_settings(conf, "x/conformance.json", v1.limits)
