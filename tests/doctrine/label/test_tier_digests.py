"""Tier digests merge their sources: repeats once, replaced settings said, no header figures."""

from __future__ import annotations

import random
import re

import pytest

from doctrine.conform import check_summary
from doctrine.label.tiers import BlockSource, compose_tier, merge_sources
from doctrine.spec import load_doctrine
from plumbing.tokens import default_count_tokens

B1 = "\n".join([
    "- Read src/cache.ts:12 (m00004): it defines `export const CACHE_TTL_MS = 60_000;` for the session cache.",
    "- Decided to keep the cache in memory because the service restarts every night.",
    "- Ran `npm test` (m00006): the result was 12 passed, so the suite is green before the change.",
    "- The user wants the TTL shorter so that stale prices disappear within a minute.",
])
B2 = "\n".join([
    "- Edited src/cache.ts:12 (m00011): the line now reads `export const CACHE_TTL_MS = 15_000;` as asked.",
    "- Ran `npm test` (m00006): the result was 12 passed, so the suite is green before the change.",
    "- Ran `npx tsc --noEmit` (m00013): it reported no type errors in src/cache.ts or its callers.",
    "- Open: whether src/prices.ts:40 reads the TTL directly or through getTtl().",
])


@pytest.fixture(scope="module")
def doctrine():
    return load_doctrine("v1")


def _blocks():
    return [BlockSource("b1", 1, B1, "cache TTL survey", 900, 4), BlockSource("b2", 1, B2, "cache TTL change", 800, 5)]


def _body(text: str) -> list[str]:
    return [ln for ln in text.split("\n") if not ln.startswith("Source:")]


def test_merge_keeps_a_repeat_once_and_finds_the_replaced_setting():
    m = merge_sources(_blocks(), 2)
    b1, b2 = ([t for _c, t in lines] for lines in m.bullets)
    assert not any("npm test" in t for t in b1) and any("npm test" in t for t in b2)  # merged into the later
    assert any(t.startswith("SUPERSEDED by b2 (`CACHE_TTL_MS=15_000`)") for t in b1)
    assert m.superseded == {"CACHE_TTL_MS=60_000"} and m.notes[1]
    m3 = merge_sources(_blocks(), 3)
    assert not any("60_000" in t for _c, t in m3.bullets[0])  # tier 3 drops what was replaced...
    assert any("60_000" in n and "obsolete" in n for n in m3.notes[1])  # ...and says so


@pytest.mark.parametrize("tier", [2, 3])
def test_digest_passes_the_checker_and_carries_no_header_figure(doctrine, tier):
    blocks = _blocks()
    out = compose_tier(tier, blocks, [], None, [], doctrine, random.Random(0), default_count_tokens)
    src = [{"id": b.block_id, "role": "assistant", "content_type": "text", "text": b.summary} for b in blocks]
    rep = check_summary(src, out.text, tier=tier, doctrine=doctrine, count_tokens=default_count_tokens)
    assert out.passed and rep.passed, rep.reasons
    assert [ln.split(" (")[0] for ln in out.text.split("\n") if ln.startswith("Source:")] == ["Source: b1", "Source: b2"]
    body = _body(out.text)
    assert not [ln for ln in body if re.fullmatch(r"[-*•\s]*[\d.,]+\s*[xK%]?\s*", ln)]  # no bare 8x / 2.4K
    assert not any(re.search(r"\b\d+x\b|\d\.\dK\b", ln) for ln in body)
    assert "CACHE_TTL_MS = 15_000" in out.text or "CACHE_TTL_MS=15_000" in out.text
    if tier == 2:
        assert any("SUPERSEDED" in ln and "15_000" in ln for ln in body)
    else:
        old = [ln for ln in body if "60_000" in ln]
        assert old and all("obsolete" in ln for ln in old)
    assert len(set(body)) == len(body)  # no line twice
