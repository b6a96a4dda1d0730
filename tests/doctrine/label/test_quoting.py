"""Cutting a line never alters what it quotes: a quoted item stays whole or a verbatim
prefix with the ellipsis outside the quote, and a digest line is cut where a clause ends."""

from __future__ import annotations

from doctrine.label.handoff import code
from doctrine.label.phrasing import clip, short

LINE = ("Ran `grep -rn 'requests' inkwell/ tests/` (m00004): it names `requests==2.31.0`; it found "
        "`import requests` at inkwell/sync.py:5; `resp = requests.get(url, timeout=5)` at inkwell/sync.py:17")


def test_code_quotes_whole_or_a_verbatim_prefix():
    assert code("TypeError: x is not a function", 80) == "`TypeError: x is not a function`"
    cut = code("export function parseQuota(input: string, opts: QuotaOptions = {}): Quota | null {", 60)
    assert cut.endswith("`...") and cut.count("`") == 2
    assert "export function parseQuota(input: string, opts: QuotaOptions = {}): Quota | null {".startswith(
        cut[1:-4])
    # A backtick inside the text: its longest part without one, marked as cut.
    assert code("' /var/log/app.log | head -70` (m00009): it failed", 160) == "`' /var/log/app.log | head -70`..."


def test_short_never_leaves_a_quote_open():
    out = short(LINE, 110)
    assert out.endswith("...") and out.count("`") % 2 == 0
    assert short("a `bb cc dd ee ff gg`", 12) == "a..."


def test_clip_cuts_where_a_clause_ends():
    out = clip(LINE, 150)
    assert out == ("Ran `grep -rn 'requests' inkwell/ tests/` (m00004): it names `requests==2.31.0`; it found "
                   "`import requests` at inkwell/sync.py:5.")
    assert clip("short enough", 150) == "short enough"
    assert clip("word " * 60, 50).endswith("...")  # no clause end in reach
