"""The instruments of the label figures: content lines, exact items and their sources."""

from __future__ import annotations

from data_gen.summary_figures import (
    bare_value,
    content_lines,
    exact_items,
    missing_items,
    setting_in,
)

SUMMARY = """**What was done**
- Opened src/cache.ts (m00004); it sets `CACHE_TTL_MS = 60_000;`.
- Ran `npm test` (m00006): it failed with `TypeError: fee.toFixed is not a function` at src/fee.ts:12.
- It defines `def total_feed(rows: list[dict], fee: str = "0") -> float`.
- 2.18.5
**Source refs** m00004–m00006
"""
SOURCE = """{"command": "view", "path": "src/cache.ts"}
export const CACHE_TTL_MS = 60_000;
TypeError: fee.toFixed is not a function
    at total (src/fee.ts:12:5)
def total_feed(rows: list[dict], fee: str = "0") -> float:
"""


def test_content_lines_skip_headings_and_ref_lines():
    lines = content_lines(SUMMARY)
    assert len(lines) == 4 and lines[-1] == "2.18.5"
    assert [bare_value(ln) for ln in lines] == [False, False, False, True]
    assert content_lines("STEPS\n- Ran the tests and all 14 passed.\nRESTORE FROM m00003–m00009") == [
        "Ran the tests and all 14 passed."]


def test_exact_items_found_and_matched_in_their_source():
    classes = [c for c, _ in exact_items(SUMMARY)]
    assert set(classes) == {"paths_with_lines", "error_strings", "exact_values", "signatures"}
    assert missing_items(SUMMARY, SOURCE) == []


def test_an_altered_item_is_missing_from_its_source():
    # A value cut at its digit separator, a truncated signature, another line, another error.
    assert missing_items("It sets `CACHE_TTL_MS=60`.", SOURCE) == ["CACHE_TTL_MS=60"]
    assert not setting_in("CACHE_TTL_MS", "60", SOURCE) and setting_in("CACHE_TTL_MS", "60_000", SOURCE)
    assert missing_items("It defines `def total_feed(rows: list, fee) -> float`.", SOURCE)
    assert missing_items("It failed at src/fee.ts:13.", SOURCE) == ["src/fee.ts:13"]
    assert missing_items("It failed with `TypeError: fee is undefined`.", SOURCE) == ["TypeError: fee is undefined"]


def test_edit_listings_and_diff_hunks_show_their_lines():
    edit = ('{"command": "insert", "path": "/w/src/index.ts", "insert_line": 1}\n'
            "     1\texport * from './cache';\n     2\texport * from './segment';\n")
    assert missing_items("Edited /w/src/index.ts:2: it now reads `export * from './segment';`.", edit) == []
    assert missing_items("Edited /w/src/index.ts:7.", edit) == ["/w/src/index.ts:7"]
    diff = "--- a/src/cache.ts\n+++ b/src/cache.ts\n@@ -1,8 +1,8 @@\n import x;\n"
    assert missing_items("The hunk at src/cache.ts:1 adds an import.", diff) == []
    assert missing_items("The hunk at src/cache.ts:9 adds an import.", diff) == ["src/cache.ts:9"]
