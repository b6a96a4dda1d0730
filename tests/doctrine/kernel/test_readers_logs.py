"""Log readers: Pi's structured acp.log and the proxy's free-text bili.log."""

from __future__ import annotations

import types
from pathlib import Path

from doctrine.kernel.logs import (
    PENDING_MAX_LINES,
    CompressEvent,
    LogStats,
    NudgeEvent,
    iter_log,
    parse_kv,
    read_log,
)
from doctrine.kernel.readers import read_state_file

FIX = Path(__file__).parent / "fixtures" / "states"
PI_LOG = FIX / "logs" / "acp.log"
PROXY_LOG = FIX / "logs" / "bili.log"
SID = "0199d6c2-5b1e-7a40-9c3e-2f8d41a7b6e0"


def test_parse_kv_raw_strings_and_json_values():
    f = parse_kv('sid=ab-12 event=applied ranges=2 newBlockIds=["b7","b8"] '
                 'note=two words here ok=true nothing=null x={"a":[1,2]}')
    assert f == {"sid": "ab-12", "event": "applied", "ranges": 2, "newBlockIds": ["b7", "b8"],
                 "note": "two words here", "ok": True, "nothing": None, "x": {"a": [1, 2]}}
    # A value that only starts like JSON is a raw string.
    assert parse_kv("sid=0199d6c2-aa n=12abc")["sid"] == "0199d6c2-aa"
    assert parse_kv("n=12abc")["n"] == "12abc"
    assert parse_kv('msg=["unclosed array x=1')["msg"] == '["unclosed array'
    assert parse_kv("") == {}
    assert parse_kv("junk first k=v") == {"k": "v"}


def test_pi_log_applied_events_with_followups_and_debug():
    stats = LogStats()
    events = list(read_log(PI_LOG, stats))
    assert [e.new_block_ids for e in events] == [["b1", "b2"], ["b3", "b4"], []]
    first, second, third = events
    assert all(isinstance(e, CompressEvent) and e.host == "bc-pi" for e in events)
    assert (first.ts, first.session_id, first.ranges) == ("2025-11-30T14:01:15.912Z", SID, 2)
    assert (first.blocks_created, first.tokens_compressed) == (2, 2311)
    assert (first.before_tokens, first.after_tokens) == (18620, 9410)
    assert first.warnings == ["range m00012..m00019: kept m00019 visible (protected zone)"]
    assert first.warning_count == 1 and first.errors == []
    # compress-in/compress-out (debug) carry the summaries the model wrote.
    sidecar = read_state_file(next(FIX.glob("bc-pi/sessions/*/2025-11-30T14-*.acp.json")))
    assert first.summaries == {b.block_id: b.summary for b in sidecar.state.blocks[:2]}
    assert [s["topic"] for s in first.spans] == ["Timestamp Z-suffix fix", "CSV empty amounts"]
    assert second.summaries == {} and second.spans == []
    # blocksCreated=0 logs every block as "new" (slice(-0)); none of them is.
    assert third.blocks_created == 0 and third.error_count == 1
    assert third.errors == ["total compressible content too small (1840 chars across 1 "
                            "range(s), min 5000)"]
    assert stats.events == 3
    assert stats.malformed == 3  # stack-trace continuation, junk line, blocksCreated=two
    assert stats.orphan_followups == 1 and stats.blank == 1
    assert stats.lines == len(PI_LOG.read_text(encoding="utf-8").splitlines())


def test_proxy_log_compress_lines_and_nudges():
    stats = LogStats()
    items = list(iter_log(PROXY_LOG, stats))
    events = [e for e in items if isinstance(e, CompressEvent)]
    nudges = [e for e in items if isinstance(e, NudgeEvent)]
    ok1, failed, ok2 = events
    assert (ok1.host, ok1.session_id, ok1.blocks_created, ok1.tokens_compressed) == (
        "bc-proxy", None, 2, 10620)
    assert ok1.range_refs == [("m00002", "m00010"), ("m00012", "m00019")] and ok1.ok
    assert not failed.ok and failed.blocks_created == 0
    assert failed.errors == ["range m00030..m00031: summary too short (12 chars, min 50)",
                             "range m00033..m00034: unknown ref"]
    assert ok2.warnings == ["kept m00025 visible (protected zone)"]
    assert [(n.inject, n.tier) for n in nudges] == [(False, None), (True, 1), (True, 2)]
    assert nudges[1].fields["pendingT1"] == "51200"
    assert (stats.events, stats.nudges, stats.malformed) == (3, 3, 1)
    assert [e.line_no for e in events] == [5, 6, 7]
    # read_log keeps the compress events only.
    assert len(list(read_log(PROXY_LOG))) == 3


def test_read_log_streams(tmp_path):
    gen = read_log(PI_LOG)
    assert isinstance(gen, types.GeneratorType)
    assert next(gen).new_block_ids == ["b1", "b2"]


def test_followups_attach_across_interleaved_sessions(tmp_path):
    log = tmp_path / "acp.log"
    log.write_text(
        "2025-01-01T00:00:00.000Z [info] [compress] sid=A event=applied ranges=1 blocksCreated=1 "
        "tokensCompressed=50 warnings=0 errors=1 newBlockIds=[\"b1\"]\n"
        "2025-01-01T00:00:00.001Z [error] [compress] sid=B event=errors count=1 errors=[\"b's\"]\n"
        "2025-01-01T00:00:00.001Z [info] [turn] sid=B event=pass tokens=10\n"
        "2025-01-01T00:00:00.002Z [error] [compress] sid=A event=errors count=1 errors=[\"late\"]\n"
        "2025-01-01T00:00:00.003Z [info] [turn] sid=A event=pass tokens=10\n"
        "2025-01-01T00:00:00.004Z [error] [compress] sid=A event=errors count=1 errors=[\"too late\"]\n",
        encoding="utf-8")
    stats = LogStats()
    (ev,) = list(read_log(log, stats))
    assert ev.errors == ["late"] and stats.orphan_followups == 2


def test_an_event_is_released_after_a_bounded_wait(tmp_path):
    log = tmp_path / "acp.log"
    applied = ("2025-01-01T00:00:00.000Z [info] [compress] sid=A event=applied ranges=1 "
               "blocksCreated=1 tokensCompressed=5 newBlockIds=[\"b1\"]\n")
    other = "2025-01-01T00:00:01.000Z [info] [turn] sid=B event=pass\n"
    log.write_text(applied + other * (PENDING_MAX_LINES + 5), encoding="utf-8")
    gen = read_log(log)
    assert next(gen).line_no == 1  # yielded before the end of the file was read
    assert list(gen) == []


def test_many_lines_are_cheap(tmp_path):
    log = tmp_path / "big.log"
    line = ("2025-01-01T00:00:00.000Z [info] [compress] sid=S event=applied ranges=1 "
            "blocksCreated=1 tokensCompressed=7 newBlockIds=[\"b1\"]\n")
    log.write_text(line * 2000 + "noise\n" * 500, encoding="utf-8")
    stats = LogStats()
    assert sum(1 for _ in read_log(log, stats)) == 2000
    assert stats.malformed == 500


def test_one_bad_line_is_skipped_and_counted_not_the_whole_log(tmp_path):
    deep, big = "[" * 100000 + "]" * 100000, "1" * 5000
    head = "2024-01-01T00:00:00Z [info] [compress] sid="
    ok = ' event=applied blocksCreated=1 tokensCompressed=3 newBlockIds=["b1"]'
    lines = [
        f"{head}a event=applied blocksCreated={big} tokensCompressed=3 newBlockIds=[\"b1\"]",
        f"{head}b event=applied blocksCreated=1 tokensCompressed=3 newBlockIds={deep}",
        f"{head}c event=applied blocksCreated=1 tokensCompressed=-{big} newBlockIds=[\"b1\"]",
        f"{head}d{ok}",
        f"{head}d event=errors errors={deep} count={big}",
        f"2024-01-01T00:00:00Z [info] [compress-in] sid=e spans={deep}",
        f"{head}e{ok}",
        f"2024-01-01T00:00:00Z [info] [Compressed m1–m2 → {big} block(s), ~3 tokens saved.]",
    ]
    log = tmp_path / "acp.log"
    log.write_bytes("\n".join(lines).encode() + b"\n" + f"{head}\xff{ok}\n".encode("latin-1") + f"{head}f{ok}\n".encode())
    st = LogStats()
    events = list(read_log(log, st))
    assert [e.session_id for e in events] == ["d", "e", "f"]
    assert st.malformed == 5 and st.lines == 10
