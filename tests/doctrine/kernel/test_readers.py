"""State-file readers: every host format, the broken variants, the directory scan."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest

from doctrine.kernel.decompress import collect_block_content
from doctrine.kernel.readers import (
    LoggedSession,
    pi_entry_to_messages,
    read_state_file,
    scan_dir,
)
from doctrine.kernel.state import CompressionState, StateError

FIX = Path(__file__).parent / "fixtures" / "states"
PI_DIR = FIX / "bc-pi" / "sessions" / "--home-dev-ledger--"
PI_MAIN = PI_DIR / "2025-11-30T14-00-00-000Z_0199d6c2-5b1e-7a40-9c3e-2f8d41a7b6e0.jsonl.acp.json"
PI_OLD = PI_DIR / "2025-11-29T10-00-00-000Z_old.jsonl.acp.json"
PI_CHILD = PI_DIR / "2025-11-30T15-00-00-000Z_child.jsonl.acp.json"
PROXY_V3 = next((FIX / "bc-proxy" / "anthropic").glob("*.json"))
PROXY_V1 = FIX / "bc-proxy" / "legacy-v1.json"
KERNEL = FIX / "acp-kernel" / "session-7f3a.json"
STORE = next((FIX / "acp-kernel" / "store").glob("*.json"))


def test_fixtures_match_their_generator(tmp_path):
    spec = importlib.util.spec_from_file_location("make_fixtures", FIX / "make_fixtures.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.main(str(tmp_path))
    made = [os.path.relpath(os.path.join(d, f), tmp_path)
            for d, _, files in os.walk(tmp_path) for f in files]
    assert len(made) > 15
    for rel in made:
        assert (tmp_path / rel).read_bytes() == (FIX / rel).read_bytes(), rel


# ---------------------------------------------------------------------- proxy
def test_proxy_v3_reads_state_messages_and_contents():
    s = read_state_file(PROXY_V3)
    assert isinstance(s, LoggedSession)
    assert (s.host, s.session_id, s.source) == ("bc-proxy", "claude-code:7f3a9c21", str(PROXY_V3))
    assert [b.block_id for b in s.state.blocks] == ["b1", "b2"]
    assert s.meta["protocol"] == "anthropic" and s.meta["title"].startswith("Fix ingest")
    assert s.meta["stats"]["requests"] == 14 and s.meta["version"] == 3
    assert len(s.messages) == 25
    calls = [m for m in s.messages if m.content_type == "tool-call"]
    assert calls and all(m.role == "assistant" and m.tool_name and m.tool_call_id for m in calls)
    results = [m for m in s.messages if m.content_type == "tool-result"]
    assert {m.tool_call_id for m in results} <= {m.tool_call_id for m in calls}
    # BiliMessage sidecar fields ride along in extra.
    assert any(m.extra.get("is_error") is False for m in results)
    # Every covered id is one of the stored messages, and refs cover every message.
    ids = {m.id for m in s.messages}
    for b in s.state.blocks:
        assert set(b.effective_message_ids) <= ids
    assert set(s.state.by_raw) == ids
    assert set(s.block_contents) == {"b1", "b2"}
    # The cached originals are what collect_block_content renders from the messages.
    for b in s.state.blocks:
        assert s.block_contents[b.block_id] == collect_block_content(s.state, b, s.messages, full=True).text
        assert s.block_cache[b.block_id].full_count == len(b.effective_message_ids)


def test_proxy_v1_has_flat_meta_and_no_messages():
    s = read_state_file(PROXY_V1)
    assert s.host == "bc-proxy" and s.session_id == "openai:3c0d11e2"
    assert s.meta["protocol"] == "openai" and s.meta["label"] == "old-run"
    assert s.meta["stats"] == {"requests": 6, "tokensSaved": s.state.stats.tokens_compressed,
                               "inputTokens": 90112}
    assert s.messages is None and s.block_contents is None
    assert len(s.state.blocks) == 1


def _write(tmp_path, name, obj):
    p = tmp_path / name
    p.write_text(json.dumps(obj), encoding="utf-8")
    return p


def _set(path, value):
    def edit(d):
        *head, last = path
        for k in head:
            d = d[k]
        if value is _DELETE:
            del d[last]
        else:
            d[last] = value
    return edit


_DELETE = object()


@pytest.mark.parametrize("edit,field_name", [
    (_set(["state", "blocks"], _DELETE), "state.blocks"),
    (_set(["state", "blocks", 0, "tier"], 7), "state.blocks[0].tier"),
    (_set(["messages", 3, "role"], "robot"), "messages[3]"),
    (_set(["blockContents", "b2", "one"], "x"), "blockContents.b2.one"),
    (_set(["id"], 12), "id"),
    (_set(["version"], "3"), "version"),
])
def test_proxy_errors_name_file_and_field(tmp_path, edit, field_name):
    doc = json.loads(PROXY_V3.read_text(encoding="utf-8"))
    edit(doc)
    p = _write(tmp_path, "case.json", doc)
    with pytest.raises(StateError) as e:
        read_state_file(p)
    assert e.value.field == field_name and e.value.source == str(p)
    assert str(p) in str(e.value)


# ---------------------------------------------------------------------- acp-kernel
def test_kernel_bare_state_and_store_envelope_agree():
    bare = read_state_file(KERNEL)
    store = read_state_file(STORE)
    assert bare.host == store.host == "acp-kernel"
    assert bare.session_id == "session-7f3a" and store.session_id == "session-7f3a"
    assert store.meta["envelope"] == "StateStore" and store.meta["version"] == 1
    assert bare.state.to_acp_json() == store.state.to_acp_json()
    assert bare.messages is None


def test_own_envelope_is_read(tmp_path):
    st = read_state_file(KERNEL).state
    st.save(tmp_path / "ours.json")
    s = read_state_file(tmp_path / "ours.json")
    assert s.host == "acp-kernel" and s.state.to_acp_json() == st.to_acp_json()


def test_unknown_keys_are_ignored(tmp_path):
    d = json.loads(KERNEL.read_text(encoding="utf-8"))
    d["someFutureField"] = {"x": 1}
    d["blocks"][0]["newBlockField"] = [1, 2]
    s = read_state_file(_write(tmp_path, "s.json", d))
    assert len(s.state.blocks) == 2


# ---------------------------------------------------------------------- Pi
def test_pi_sidecar_with_session_log():
    s = read_state_file(PI_MAIN)
    assert s.host == "bc-pi" and s.session_id == "0199d6c2-5b1e-7a40-9c3e-2f8d41a7b6e0"
    assert s.meta["schema_version"] == 1
    assert s.meta["producer"] == {"name": "billion-context-pi", "version": "0.1.65"}
    assert s.meta["rollover_pending"] is None and len(s.meta["live_ref_origins"]) == 1
    assert [(b.block_id, b.tier, b.active) for b in s.state.blocks] == [
        ("b1", 1, False), ("b2", 1, False), ("b3", 2, True), ("b4", 1, True)]
    assert s.block_contents is None
    msgs = s.messages
    assert len(msgs) == 26  # 25 session messages + one custom_message
    # Two tool calls in one assistant entry are split into <entryId>#<toolCallId>.
    split = [m for m in msgs if "#" in m.id]
    assert [m.id.split("#")[1] for m in split] == ["call_05", "call_06"]
    assert len({m.id.split("#")[0] for m in split}) == 1
    assert [m.tool_name for m in split] == ["grep", "read"]
    assert json.loads(split[0].text) == {"pattern": "amount", "path": "src/ingest"}
    results = [m for m in msgs if m.content_type == "tool-result"]
    assert all(m.role == "tool" and m.tool_call_id and m.tool_name for m in results)
    # The thinking block is not projected; the assistant text is intact.
    assert msgs[5].role == "assistant" and msgs[5].text.startswith("The format string")
    assert msgs[-1].role == "user" and "linters" in msgs[-1].text  # custom_message
    # The sidecar's refs and coverage refer to exactly these ids.
    ids = [m.id for m in msgs]
    assert list(s.state.by_raw) == ids[:-1]
    for b in s.state.blocks:
        assert set(b.effective_message_ids) <= set(ids)


def test_pi_sidecar_without_log_has_no_messages():
    s = read_state_file(PI_OLD)
    assert s.host == "bc-pi" and s.messages is None
    assert s.session_id == "2025-11-29T10-00-00-000Z_old"
    assert "schema_version" not in s.meta and "producer" not in s.meta
    assert s.meta["rollover_pending"]["compressions"][0]["endRef"] == "m00024"


def test_pi_child_inherits_parent_blocks():
    s = read_state_file(PI_CHILD)
    assert [b.block_id for b in s.state.blocks] == ["b1", "b2", "b3", "b4"]
    assert s.meta["inherited_from"].endswith(PI_MAIN.name)
    assert s.session_id.endswith("c41d") and len(s.messages) == 1
    alone = read_state_file(PI_CHILD, inherit=False)
    assert alone.state.blocks == []


def test_pi_inheritance_stops_on_a_cycle(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(json.dumps({"type": "session", "id": "A", "parentSession": "b.jsonl"}) + "\n")
    b.write_text(json.dumps({"type": "session", "id": "B", "parentSession": "a.jsonl"}) + "\n")
    for p in (a, b):
        _write(tmp_path, p.name + ".acp.json", {"blocks": [], "liveRefOrigins": []})
    s = read_state_file(tmp_path / "a.jsonl.acp.json")
    assert s.state.blocks == [] and "inherited_from" not in s.meta


def test_pi_log_malformed_lines_are_counted(tmp_path):
    for p in PI_DIR.glob("2025-11-30T14-00*"):
        shutil.copy(p, tmp_path / p.name)
    log = tmp_path / PI_MAIN.name.replace(".acp.json", "")
    with open(log, "a", encoding="utf-8") as f:
        f.write('{"type": "message", "id": "truncated...\n[1, 2]\n')
    s = read_state_file(tmp_path / PI_MAIN.name)
    assert s.meta["session_log_malformed_lines"] == 2 and len(s.messages) == 26


def test_pi_entry_conversion_rules():
    tag = '<acp tokens="3" type="text">m00004</acp>'
    user = {"type": "message", "id": "u1", "message": {"role": "user", "content": f"{tag}\nhello"}}
    assert [m.text for m in pi_entry_to_messages(user)] == ["hello"]
    tail = {"type": "message", "id": "t1", "message": {
        "role": "toolResult", "toolCallId": "c1", "toolName": "bash",
        "content": [{"type": "text", "text": f"ok\n\n{tag}"}, {"type": "image", "data": "..."}]}}
    (m,) = pi_entry_to_messages(tail)
    assert (m.role, m.content_type, m.text, m.tool_call_id) == ("tool", "tool-result", "ok", "c1")
    think = {"type": "message", "id": "a1", "message": {
        "role": "assistant", "content": [{"type": "thinking", "thinking": "hmm"}]}}
    assert pi_entry_to_messages(think) == []
    one_call = {"type": "message", "id": "a2", "message": {"role": "assistant", "content": [
        {"type": "text", "text": "Let me look."},
        {"type": "toolCall", "id": "c9", "name": "read", "arguments": {"path": "a.py"}}]}}
    (c,) = pi_entry_to_messages(one_call)
    assert c.id == "a2" and c.text == 'Let me look.\n{"path":"a.py"}'
    bash = {"type": "message", "id": "x1", "message": {"role": "bashExecution",
                                                      "command": "ls", "output": "a.py"}}
    assert pi_entry_to_messages(bash)[0].text == "$ ls\na.py"
    assert pi_entry_to_messages({"type": "model_change", "id": "m1"}) == []
    assert pi_entry_to_messages({"type": "label"}) == []  # no id needed where nothing is read
    with pytest.raises(ValueError):
        pi_entry_to_messages({"type": "message", "message": {"role": "user"}})


# ---------------------------------------------------------------------- broken files
@pytest.mark.parametrize("name,field_name,reason", [
    ("truncated.json", "<root>", "invalid JSON"),
    ("missing-blockid.json", "blocks[1].blockId", "missing"),
    ("blocks-not-array.json", "blocks", "expected a list"),
    ("wrong-version.json", "version", "unsupported proxy session version 9"),
    ("bad-schema.jsonl.acp.json", "schemaVersion", "positive integer"),
    ("not-a-state.json", "<root>", "unrecognised"),
])
def test_broken_files_raise_state_error(name, field_name, reason):
    path = FIX / "broken" / name
    with pytest.raises(StateError) as e:
        read_state_file(path)
    assert e.value.field == field_name and reason in e.value.reason
    assert str(path) in str(e.value)


def test_missing_file_is_a_state_error(tmp_path):
    with pytest.raises(StateError, match="cannot read"):
        read_state_file(tmp_path / "nope.json")


def test_root_not_an_object(tmp_path):
    with pytest.raises(StateError, match="expected an object"):
        read_state_file(_write(tmp_path, "list.json", [1, 2]))


# ---------------------------------------------------------------------- scan
def test_scan_dir_reads_good_files_and_counts_rejects():
    sessions, rejects = scan_dir(FIX)
    by_host: dict[str, int] = {}
    for s in sessions:
        by_host[s.host] = by_host.get(s.host, 0) + 1
    assert by_host == {"acp-kernel": 2, "bc-proxy": 2, "bc-pi": 3}
    assert rejects == {"invalid-json": 1, "missing-field": 1, "wrong-type": 1,
                       "bad-version": 2, "unknown-format": 1}
    names = {os.path.basename(s.source) for s in sessions}
    assert not any(n.startswith((".tmp-", ".acp-tmp-")) for n in names)


def test_scan_dir_never_raises(tmp_path):
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe\x00garbage")
    (tmp_path / "deep.json").write_text("[" * 100000 + "]" * 100000)
    (tmp_path / "dir.json").mkdir()
    (tmp_path / ".tmp-x.json").write_text("{")
    (tmp_path / "notes.md").write_text("{")
    shutil.copy(KERNEL, tmp_path / "ok.json")
    sessions, rejects = scan_dir(tmp_path)
    assert [os.path.basename(s.source) for s in sessions] == ["ok.json"]
    assert sum(rejects.values()) == 2 and set(rejects) <= {"invalid-json", "unreadable"}
    assert scan_dir(tmp_path / "missing") == ([], {"not-a-directory": 1})


def test_state_is_a_compression_state():
    for path in (KERNEL, PROXY_V3, PI_MAIN):
        assert isinstance(read_state_file(path).state, CompressionState)


# ---------------------------------------------------------------------- malformed content
_DEEP = "[" * 100000 + "]" * 100000
_BIG = "1" * 5000


@pytest.mark.parametrize("content, reason", [
    ('{"blocks": ' + _DEEP + "}", "nested too deeply"),
    (_DEEP, "nested too deeply"),
    ('{"blocks": [], "nextBlockId": ' + _BIG + "}", "too many digits"),
    (b'{"blocks": [], "x": "\xff\xfe"}', "not UTF-8"),
    ('{"blocks": "abc", "messageRefs": 5}', "expected a list"),
    ('{"id": "s", "version": 3, "state": {"blocks": []}, "messages": [null]}', "must be an object"),
])
def test_malformed_state_files_are_one_line_state_errors(tmp_path, content, reason):
    path = tmp_path / "s.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(StateError) as e:
        read_state_file(path)
    assert reason in e.value.reason and "\n" not in str(e.value) and str(path) in str(e.value)


def test_pi_session_log_bad_lines_are_counted_not_raised(tmp_path):
    for p in PI_DIR.glob("2025-11-30T14-00*"):
        shutil.copy(p, tmp_path / p.name)
    log = tmp_path / PI_MAIN.name.replace(".acp.json", "")
    with open(log, "ab") as f:
        f.write(_DEEP.encode() + b"\n" + b'{"n": ' + _BIG.encode() + b"}\n"
                + b'{"type": "message", "id": "\xff", "message": {"role": "user", "content": "x"}}\n')
    s = read_state_file(tmp_path / PI_MAIN.name)
    assert s.meta["session_log_malformed_lines"] == 3 and len(s.messages) == 26
