"""A tier-2 digest fits the kernel's summary limit when it can: once the token fit is at the
checker's per-source floor, each ``Source:`` header's ``[topic]`` keeps only its first name
before the digest is given up as too long (measured: most tier-2 points of the pocket
windows, 672-768 chars, were skipped as ``summary_failed`` for a few dozen chars). Headers
stay distinct (three bare ``Source: bN (..).`` lines read as one line repeated) and the pad
lines that hold a thin source at the checker's token floor stay."""

from __future__ import annotations

from types import SimpleNamespace

from doctrine.conform import check_summary
from doctrine.conform.settings import default_doctrine
from doctrine.label import phrasing as ph
from doctrine.label.tiers import BlockSource, compose_tier
from plumbing.tokens import default_count_tokens

_B1 = ("Steps:\n- Ran `head -n 3 CONTRIBUTING.md` (m00004): it printed `# Glenbrook`; `The glenbrook module owns the "
       "retry logic.`.\n- Ran `tail -n 4 logs/cliff-relay.log` (m00008): it failed with `TimeoutError: posbran did "
       "not answer in 11 ms` at src/zutnot/rain.py:459; also `cliff-relay unhandled`.\nState:\n- The location (from "
       "m00008): `File \"src/zutnot/rain.py\", line 459`\nRefs: m00002–m00010")
_B2 = "Steps:\n- Read src/zutnot/rain.py (m00013); nothing in it is needed word for word.\nRefs: m00011–m00015"


def _digest(max_chars: int):
    blocks = [BlockSource("b1", 1, _B1, "work on CONTRIBUTING.md, cliff-relay.log", 147, 5),
              BlockSource("b2", 1, _B2, "work on rain.py", 91, 5)]
    out = compose_tier(2, blocks, [], SimpleNamespace(by_raw={}), [], default_doctrine(), ph.rng_for(0, "t"),
                       default_count_tokens, max_chars=max_chars)
    src = [{"id": b.block_id, "role": "assistant", "content_type": "text", "text": b.summary} for b in blocks]
    return out, src


def test_a_roomy_limit_keeps_the_topics():
    out, _ = _digest(900)
    assert out.passed
    assert "Source: b1 (147→97 tok, 2x). [work on CONTRIBUTING.md, cliff-relay.log]" in out.text


def test_a_tight_limit_shortens_the_topics_and_still_passes():
    for limit in (470, 450):
        out, src = _digest(limit)
        assert out.passed, (limit, out.report.reasons)
        assert len(out.text.strip()) <= 0.95 * limit
        assert "Source: b1" in out.text and "Source: b2" in out.text
        assert "Source: b1 (147→97 tok, 2x). [CONTRIBUTING.md]" in out.text
        assert "TimeoutError: posbran did not answer in 11 ms" in out.text
        assert check_summary(src, out.text, tier=2).passed


def test_a_two_source_digest_drops_its_topics_last():
    out, src = _digest(440)
    assert out.passed, out.report.reasons
    assert "Source: b1 (147→97 tok, 2x).\n" in out.text and "[" not in out.text.split("\n")[0]
    assert check_summary(src, out.text, tier=2).passed


def test_under_the_checker_floor_the_digest_is_refused_with_a_reason():
    out, _ = _digest(400)
    assert not out.passed
    assert out.report.reasons


_JEST_B1 = ("Steps:\n- Ran `cat /workspace/metric-api/metric-api.config.json` (m00004): what it showed: retryLimit is 15 "
            "today.\n- Ran `git ls-files src` (m00008): what it showed: 5 source files; src/digest.ts is the one under "
            "test.\nState:\n- The exact value (from m00004): `\"retryLimit\": 15`\nRefs: m00002–m00009")
_JEST_B2 = ("Steps:\n- Ran `npx jest src/digest.test.ts` (m00012): the result was 1 failed, 8 passed, 9 total; it failed "
            "with `TypeError: Cannot read properties of undefined (reading 'retryLimit')` at src/digest.ts:67; also "
            "`scoreExport › handles the default options`.\nRefs: m00010–m00013")


def test_a_needed_error_and_its_location_are_said_once():
    # The next step needs the error string and its place: the bare error line added for the
    # first fact goes when the failing step's line (which quotes it at its place) is added.
    blocks = [BlockSource("b1", 1, _JEST_B1, "work on metric-api.config.json", 122, 8),
              BlockSource("b2", 1, _JEST_B2, "work on digest.test.ts", 102, 4)]
    err = "TypeError: Cannot read properties of undefined (reading 'retryLimit')"
    out = compose_tier(2, blocks, [], SimpleNamespace(by_raw={}), [err, "src/digest.ts:67"], default_doctrine(),
                       ph.rng_for(0, "t"), default_count_tokens, max_chars=736)
    assert out.passed, out.report.reasons
    assert out.text.count(err) == 1 and "at src/digest.ts:67" in out.text, out.text
