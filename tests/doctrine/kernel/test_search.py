"""Search: stemmer, tokenizer, BM25/fuzzy/hybrid scoring, previews, both result formats."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from doctrine.kernel.messages import Message
from doctrine.kernel.readers import read_state_file
from doctrine.kernel.search import (
    SearchDoc,
    block_docs,
    bm25_scores,
    build_message_docs,
    char_bigrams,
    fuzzy_scores,
    hybrid_scores,
    make_preview,
    render_search_result,
    search_active_blocks,
    search_context,
    stem,
    to_fixed,
    tokenize,
)
from doctrine.kernel.state import Block, CompressionState

FIX = Path(__file__).parent / "fixtures" / "states"
PI = next(FIX.glob("bc-pi/sessions/*/2025-11-30T14-*.acp.json"))


def _block(bid, topic, summary, *, active=True, tier=1, tokens=1200, ids=()):
    return Block(block_id=bid, run_id="r1", tier=tier, summary=summary, topic=topic,
                 active=active, compressed_tokens=tokens, effective_message_ids=list(ids),
                 direct_message_ids=list(ids))


def _doc(text, role=None, kind="message", ref="x"):
    return SearchDoc(kind=kind, ref=ref, text=text, title=text[:20], tier=1, role=role)


@pytest.mark.parametrize("word,want", [
    ("tokens", "token"), ("running", "runn"), ("compressed", "compress"),
    ("compression", "compress"), ("authentication", "authenticat"), ("motion", "mot"),
    ("handling", "handl"), ("subagents", "subagent"), ("queries", "query"), ("boxes", "box"),
    ("matches", "match"), ("class", "class"), ("quickly", "quick"), ("payment", "pay"),
    ("darkness", "dark"), ("speeding", "spe"), ("was", "was"), ("bus", "bus"), ("moment", "moment"),
])
def test_stemmer(word, want):
    assert stem(word) == want


def test_tokenize_latin_and_cjk():
    assert tokenize("Fix parse_timestamp in src/ingest/dates.py, a b") == [
        "fix", "parse_timestamp", "in", "src", "ingest", "date", "py"]
    assert tokenize("Tokens", use_stem=False) == ["tokens"]
    assert tokenize("修复身份验证") == ["修复", "复身", "身份", "份验", "验证",
                                   "修", "复", "身", "份", "验", "证"]
    assert tokenize("登录 login") == ["login", "登录", "登", "录"]
    assert char_bigrams("ab cd") == ["ab", "cd"]


def test_bm25_matches_the_formula():
    docs = [_doc("alpha beta"), _doc("gamma delta epsilon")]
    s1, s2 = bm25_scores(docs, "alpha")
    idf = math.log(1 + (2 - 1 + 0.5) / (1 + 0.5))
    want = idf * (1 * 2.2) / (1 + 1.2 * (1 - 0.75 + 0.75 * 2 / 2.5))
    assert s1 == pytest.approx(want) and s2 == 0
    # Stemming joins morphology: "compressed" finds "compression".
    a, b = bm25_scores([_doc("compression ratio"), _doc("unrelated text")], "compressed")
    assert a > 0 and b == 0
    assert bm25_scores(docs, "!!") == [0.0, 0.0]


def test_fuzzy_is_typo_tolerant_and_gated():
    docs = [_doc("token budget"), _doc("nothing here")]
    assert fuzzy_scores(docs, "tokan")[0] == pytest.approx(2 / 4)  # to ok ka an vs token
    assert fuzzy_scores(docs, "to of") == [0.0, 0.0]  # short Latin tokens are noise
    assert fuzzy_scores([_doc("缓存失效")], "缓存") == [1.0]  # 2-char CJK is a real term


def test_hybrid_normalises_each_part():
    docs = [_doc("timestamp parsing fix"), _doc("timestamp"), _doc("other")]
    scores = hybrid_scores(docs, "timestamp parsing")
    assert scores[0] == pytest.approx(1.0)  # best on both parts
    assert 0 < scores[1] < scores[0] and scores[2] == 0
    assert hybrid_scores([_doc("x")], "zzzz") == [0.0]


def test_preview_centres_on_first_query_term():
    text = "a" * 500 + " needle " + "b" * 500
    p = make_preview(text, "zzz needle")
    assert p.startswith("…") and p.endswith("…") and "needle" in p
    assert len(p) <= 202
    # The hit (index 501) sits 200 // 2 - 10 = 90 chars into the window, after the "…".
    assert p.index("needle") == 1 + 90
    assert make_preview("needle at start " + "c" * 300, "needle").startswith("needle")
    assert make_preview("short text", "absent") == "short text"
    assert make_preview("x" * 300, "absent") == "x" * 200
    assert make_preview("", "q") == ""


def test_search_context_covers_inactive_blocks_and_messages():
    s = read_state_file(PI)
    docs = build_message_docs(s.messages, s.state)
    assert len(docs) == 26
    res = search_context("fromisoformat", s.state, docs, limit=10)
    kinds = {(r.kind, r.ref) for r in res}
    assert ("block", "b1") in kinds  # b1 is inactive (consumed by b3) yet searchable
    assert all(r.score >= 0.01 for r in res)
    assert [r.score for r in res] == sorted((r.score for r in res), reverse=True)
    folded = [r for r in res if r.kind == "message" and r.block_id]
    assert folded and all(r.block_id in ("b3", "b4") for r in folded)  # active owners
    assert len(search_context("fromisoformat", s.state, docs, limit=2)) == 2
    assert search_context("qwxz vbnm", s.state, docs) == []
    assert search_context("   ", s.state, docs) == []


def test_role_weights_rank_user_over_tool():
    st = CompressionState()
    docs = [_doc("deploy the staging cluster", role="tool", ref="t"),
            _doc("deploy the staging cluster", role="user", ref="u")]
    u, t = search_context("staging cluster", st, docs)
    assert (u.ref, t.ref) == ("u", "t")
    assert u.score == pytest.approx(t.score * 1.5 / 0.6)
    flat = search_context("staging cluster", st, docs, role_weights={})
    assert flat[0].score == pytest.approx(flat[1].score)


def test_legacy_block_search_scoring():
    st = CompressionState(blocks=[
        _block("b1", "auth auth auth auth", "login"),          # topic hits capped at 0.45
        _block("b2", "database", "auth once"),                  # summary hit 0.04: dropped
        _block("b3", "auth flow", "auth auth"),                 # 0.15 + 0.08
        _block("b4", "auth", "auth", active=False),             # inactive: never
        _block("b5", "db", "auth " * 10),                       # summary hits capped at 0.2
    ])
    assert [b.block_id for b in search_active_blocks("auth", st)] == ["b1", "b3", "b5"]
    assert [b.block_id for b in search_active_blocks("auth", st, limit=2)] == ["b1", "b3"]
    assert search_active_blocks("", st) == []


def test_render_pi_style():
    st = CompressionState(blocks=[_block("b2", "Token budget " + "x" * 60, "the token budget is 5000",
                                         tokens=1250, ids=["m-a"])])
    msgs = [Message("m-a", "user", text="what is the token budget?"),
            Message("m-b", "tool", "tool-result", "token budget printed", "bash", "c1")]
    docs = build_message_docs(msgs, st)
    res = search_context("token budget", st, docs)
    text = render_search_result(res, "token budget", 1, len(docs))
    lines = text.splitlines()
    assert lines[0] == 'Found 3 match(es) for "token budget" (searched 1 blocks + 2 messages):'
    assert 'block b2 T1 score:' in text and "1.3K" in text  # 1250 -> toFixed -> 1.3K
    assert '→ decompress({ blockId: "b2" })' in text
    assert '(block containing message m-a)' in text
    assert "(message m-b is still visible in context)" in text
    title = [ln for ln in lines if ln.startswith("block b2")][0].split('"')[1]
    assert len(title) == 50 and title.endswith("…")
    none = render_search_result([], "zz", 4, 7)
    assert none == 'No matches for "zz" across 4 block(s) and 7 historical message(s).'
    with pytest.raises(ValueError):
        render_search_result(res, "q", 1, 1, style="other")


def test_render_proxy_style():
    st = CompressionState(blocks=[_block("b1", None, "y" * 250), _block("b2", "CSV", "csv importer")])
    blocks = search_active_blocks("csv", st)
    text = render_search_result(blocks, "csv", 2, style="proxy")
    assert text == 'Found 1 block(s) for "csv":\n\nb2 (T1) "CSV"\n  csv importer'
    long_ = render_search_result([st.blocks[0]], "y", 2, style="proxy")
    assert long_.endswith("y" * 200 + "...") and '"(no topic)"' in long_
    assert render_search_result([], "zz", 2, style="proxy") == '[No blocks matched "zz"]'
    assert render_search_result([], "", 2, style="proxy").startswith("[search_context FAILED")
    # Block results of search_context render in the proxy format too.
    res = search_context("csv importer", st)
    assert render_search_result(res, "csv", 2, style="proxy").startswith('Found 1 block(s)')


def test_to_fixed_uses_javascript_rounding():
    assert to_fixed(0.125, 2) == "0.13"  # Python's format gives 0.12
    assert to_fixed(1.25, 1) == "1.3"
    assert to_fixed(1.005, 2) == "1.00"  # 1.005 is 1.00499... in binary
    assert to_fixed(2, 1) == "2.0"


def test_block_docs_text_and_title():
    st = CompressionState(blocks=[_block("b1", None, "only summary"), _block("b2", "T", "s")])
    d1, d2 = block_docs(st)
    assert (d1.title, d1.text, d2.title, d2.text) == ("b1", " only summary", "T", "T s")
