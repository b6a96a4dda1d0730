"""Decompress: block content rendering, Pi and proxy tool behaviour, the run_dir fence."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from doctrine.kernel.decompress import (
    SUMMARY_HEADER,
    collect_block_content,
    decompress,
    parse_block_id,
    resolve_inside,
)
from doctrine.kernel.messages import Message
from doctrine.kernel.readers import read_state_file
from doctrine.kernel.state import Block, CompressionState

FIX = Path(__file__).parent / "fixtures" / "states"
PI = next(FIX.glob("bc-pi/sessions/*/2025-11-30T14-*.acp.json"))
PROXY = next((FIX / "bc-proxy" / "anthropic").glob("*.json"))
NOW = 1764511999000


@pytest.fixture()
def pi():
    return read_state_file(PI)


@pytest.fixture()
def proxy():
    return read_state_file(PROXY)


def _files(folder):
    return sorted(os.path.relpath(os.path.join(d, f), folder)
                  for d, _, fs in os.walk(folder) for f in fs)


# ---------------------------------------------------------------------- content
def test_collect_renders_headers_in_message_order(pi):
    b1 = pi.state.block("b1")
    got = collect_block_content(pi.state, b1, pi.messages)
    parts = got.text.split("\n\n[")
    assert got.count == 9 == len(b1.effective_message_ids)
    assert got.text.startswith('[assistant • bash]\n{"command":"pytest tests/test_dates.py -x -q"}')
    assert "\n\n[tool • bash]\nF\n" in got.text
    assert "\n\n[assistant]\nThe format string" in got.text
    assert len(parts) == 9
    # Order follows the messages, not the block's id list.
    reordered = Block(**{**b1.__dict__, "effective_message_ids": list(reversed(b1.effective_message_ids))})
    assert collect_block_content(pi.state, reordered, pi.messages).text == got.text


def test_collect_folds_active_children_unless_full(pi):
    b3 = pi.state.block("b3")
    # In a consistent state the consumed children are inactive: everything is shown.
    assert collect_block_content(pi.state, b3, pi.messages).count == 18
    st = pi.state.copy()
    st.block("b1").active = True  # e.g. the state as it was while b3 was being made
    one = collect_block_content(st, st.block("b3"), pi.messages)
    full = collect_block_content(st, st.block("b3"), pi.messages, full=True)
    assert one.text.startswith(f"{SUMMARY_HEADER} — b1: Timestamp Z-suffix fix\n"
                               f"{st.block('b1').summary}\n\n")
    assert one.count == 1 + 9  # b1's summary + the 9 messages no active child folds
    assert "pytest tests/test_dates.py -x -q" not in one.text
    assert full.count == 18 and SUMMARY_HEADER not in full.text
    untitled = st.copy()
    untitled.block("b1").topic = None
    assert f"{SUMMARY_HEADER} — b1\n" in collect_block_content(untitled, untitled.block("b3"), pi.messages).text


def test_collect_without_messages_is_empty(pi):
    got = collect_block_content(pi.state, pi.state.block("b4"), [])
    assert (got.text, got.count) == ("", 0)


@pytest.mark.parametrize("arg,want", [("b5", "b5"), ("B05", "b5"), (" 5 ", "b5"), ("b0", "b0"),
                                      ("x5", None), ("b", None), ("", None), ("m00005", None)])
def test_parse_block_id(arg, want):
    assert parse_block_id(arg) == want


# ---------------------------------------------------------------------- Pi style
def test_pi_block_goes_to_a_file_and_state_is_unchanged(pi, tmp_path):
    before = pi.state.to_acp_json()
    r = decompress(pi.state, "b3", pi.messages, run_dir=tmp_path, now_ms=NOW)
    assert r.ok and r.block_id == "b3"
    assert r.file_path == str(tmp_path / "acp-decompress" / f"b3-{NOW}.txt")
    body = Path(r.file_path).read_text(encoding="utf-8")
    assert body == collect_block_content(pi.state, pi.state.block("b3"), pi.messages).text
    assert r.text.splitlines()[0] == (f"Block b3 (18 items, {len(body)} chars) written to "
                                      f"{r.file_path}.")
    assert "Preview:" in r.text and len(r.text) < len(body)
    assert r.state.to_acp_json() == before and r.state.block("b3").active
    assert _files(tmp_path) == [f"acp-decompress/b3-{NOW}.txt"]  # no temp file left
    again = decompress(pi.state, "b3", pi.messages, run_dir=tmp_path, now_ms=NOW)
    assert again.file_path != r.file_path  # same millisecond: no overwrite


@pytest.mark.parametrize("arg", ["b4", "b04", "4", " B4 "])
def test_pi_inline(pi, tmp_path, arg):
    r = decompress(pi.state, arg, pi.messages, run_dir=tmp_path, inline=True)
    assert r.text.startswith("Restored block b4 (5 items) inline:\n\n[assistant]\nTwo follow-ups")
    assert r.file_path is None and _files(tmp_path) == []


def test_pi_message_id(pi, tmp_path):
    raw = pi.state.by_ref["m00003"]
    r = decompress(pi.state, raw, pi.messages, run_dir=tmp_path)
    text = next(m.text for m in pi.messages if m.id == raw)
    assert r.text == f"Message {raw} (tool, block b3, {len(text)} chars) restored inline:\n\n{text}"
    assert r.message_id == raw and r.block_id == "b3"
    assert decompress(pi.state, "m3", pi.messages, run_dir=tmp_path).text == r.text
    as_file = decompress(pi.state, raw, pi.messages, run_dir=tmp_path, inline=False, now_ms=NOW)
    assert Path(as_file.file_path).read_text(encoding="utf-8") == text
    assert as_file.file_path.endswith(f"msg-{raw}-{NOW}.txt")


def test_pi_large_message_goes_to_a_file(tmp_path):
    big = "x" * 2500
    st = CompressionState(blocks=[Block("b1", "r1", 1, "s" * 60, ["a1"], ["a1"])])
    r = decompress(st, "a1", [Message("a1", "user", text=big)], run_dir=tmp_path)
    assert r.file_path and Path(r.file_path).read_text() == big
    assert "(user, block b1, 2500 chars) written to" in r.text


def test_pi_unknown_and_invalid_ids(pi, tmp_path):
    r = decompress(pi.state, "b9", pi.messages, run_dir=tmp_path)
    assert not r.ok and r.text == "Block b9 not found. Active blocks: b3, b4."
    r = decompress(pi.state, "not-an-id", pi.messages, run_dir=tmp_path)
    assert not r.ok and r.text.startswith("Invalid blockId: not-an-id.")
    r = decompress(pi.state, "b4", [], run_dir=tmp_path)
    assert not r.ok and "no restorable" in r.text
    assert _files(tmp_path) == []
    with pytest.raises(ValueError):
        decompress(pi.state, "b4", [], run_dir=tmp_path, style="weird")


def test_to_file_inside_run_dir(pi, tmp_path):
    r = decompress(pi.state, "b4", pi.messages, run_dir=tmp_path, to_file="notes/b4.txt",
                   inline=True)  # toFile wins over inline
    assert r.file_path == str(tmp_path / "notes" / "b4.txt") and r.ok
    assert (tmp_path / "notes" / "b4.txt").read_text().startswith("[assistant]\nTwo follow-ups")
    r2 = decompress(pi.state, "b4", pi.messages, run_dir=tmp_path, to_file=str(tmp_path / "abs.txt"))
    assert r2.ok and (tmp_path / "abs.txt").exists()


def test_to_file_outside_run_dir_is_refused(pi, tmp_path):
    run = tmp_path / "run"
    outside = tmp_path / "outside"
    run.mkdir()
    outside.mkdir()
    (run / "escape").symlink_to(outside, target_is_directory=True)
    (outside / "victim.txt").write_text("keep me")
    (run / "victim-link.txt").symlink_to(outside / "victim.txt")
    for target in [str(outside / "x.txt"), "../outside/x.txt", "escape/x.txt",
                   "victim-link.txt", "sub/../../outside/y.txt", ".", str(run)]:
        r = decompress(pi.state, "b4", pi.messages, run_dir=run, to_file=target)
        assert not r.ok and r.file_path is None, target
        assert r.text.startswith(f"Error: toFile path must be under {os.path.realpath(run)}")
    assert sorted(os.listdir(outside)) == ["victim.txt"]
    assert (outside / "victim.txt").read_text() == "keep me"
    assert resolve_inside(run, "ok/inner.txt") == os.path.join(os.path.realpath(run), "ok", "inner.txt")


# ---------------------------------------------------------------------- proxy style
def test_proxy_uses_cached_originals_and_deactivates(proxy, tmp_path):
    before = proxy.state.to_acp_json()
    r = decompress(proxy.state, "b1", [], run_dir=tmp_path, style="proxy", cache=proxy.block_cache)
    cached = proxy.block_cache["b1"]
    assert r.text == f"[Restored block b1 — {cached.one_count} item(s)]\n{cached.one_text}"
    assert r.deactivated and not r.state.block("b1").active and r.state.block("b2").active
    assert proxy.state.to_acp_json() == before  # the input state is not modified
    full = decompress(proxy.state, "01", [], run_dir=tmp_path, style="proxy", full=True,
                      cache=proxy.block_cache)
    assert full.text.startswith(f"[Restored block b1 — {cached.full_count} item(s), full]\n")


def test_proxy_without_cache_collects_from_messages(proxy, tmp_path):
    r = decompress(proxy.state, "b2", proxy.messages, run_dir=tmp_path, style="proxy")
    want = collect_block_content(proxy.state, proxy.state.block("b2"), proxy.messages)
    assert r.text == f"[Restored block b2 — 8 item(s)]\n{want.text}"
    assert not r.state.block("b2").active
    # Nothing recovered: the summary comes back and the block stays active for a retry.
    empty = decompress(proxy.state, "b2", [], run_dir=tmp_path, style="proxy")
    assert empty.text == f"[Restored block b2 — 0 item(s)]\n{proxy.state.block('b2').summary}"
    assert empty.state.block("b2").active and not empty.deactivated


def test_proxy_large_body_goes_to_a_file(tmp_path):
    msgs = [Message(f"m{i}", "tool", "tool-result", "y" * 3000, "bash", f"c{i}") for i in range(4)]
    st = CompressionState(blocks=[Block("b1", "r1", 1, "s" * 60, [m.id for m in msgs],
                                        [m.id for m in msgs])])
    r = decompress(st, "b1", msgs, run_dir=tmp_path, style="proxy", now_ms=NOW)
    assert r.file_path == str(tmp_path / f"acp-decompress-b1-{NOW}.txt")
    body = Path(r.file_path).read_text()
    assert len(body) > 10000 and f"Content ({len(body)} chars) written to: {r.file_path}" in r.text
    assert not r.state.block("b1").active


def test_proxy_errors(proxy, tmp_path):
    assert decompress(proxy.state, "", [], run_dir=tmp_path, style="proxy").text == \
        "[decompress FAILED: blockId is required]"
    r = decompress(proxy.state, "b9", [], run_dir=tmp_path, style="proxy")
    assert r.text == "[Block b9 not found]" and not r.ok
    bad = decompress(proxy.state, "b1", proxy.messages, run_dir=tmp_path, style="proxy",
                     to_file="/etc/acp.txt")
    assert not bad.ok and bad.text.startswith("[decompress FAILED: toFile must be under")
    assert bad.state.block("b1").active  # refused: nothing written, nothing deactivated
    assert _files(tmp_path) == []


def test_a_symlinked_default_folder_is_refused(pi, tmp_path):
    run, outside = tmp_path / "run", tmp_path / "outside"
    run.mkdir()
    outside.mkdir()
    (run / "acp-decompress").symlink_to(outside, target_is_directory=True)
    r = decompress(pi.state, "b3", pi.messages, run_dir=run, now_ms=NOW)
    assert not r.ok and r.file_path is None
    assert r.text == f"Error: {os.path.realpath(run)}/acp-decompress is a symlink; refusing to write through it."
    assert list(outside.iterdir()) == []
