"""CompressionState: acp JSON reader rule, our envelope, copies and atomic saves."""

import json

import pytest

from doctrine.kernel.state import FORMAT, Block, CompressionState, StateError


def acp_block(**over):
    d = {"blockId": "b1", "runId": "r1", "tier": 1, "summary": "s" * 60,
         "directMessageIds": ["a", "b"], "effectiveMessageIds": ["a", "b"], "directBlockIds": [],
         "compressedTokens": 120, "createdAt": 1760000000000, "survivedCount": 3,
         "generation": "young", "active": True, "startRef": "m00001", "endRef": "m00002"}
    d.update(over)
    return d


def test_initial_state_matches_reference_defaults():
    s = CompressionState.initial().to_acp_json()
    assert s["nextBlockId"] == 1 and s["nextRunId"] == 1
    assert s["messageRefs"] == {"byRaw": {}, "byRef": {}}
    assert s["nudge"]["lastShownByTier"] == {} and s["stats"] == {"tokensCompressed": 0, "compressionCount": 0}


def test_reader_takes_present_fields_and_merges_nudge_and_stats():
    d = {"blocks": [acp_block()], "nudge": {"lastNudgeShownTokens": 900, "lastShownByTier": {"2": 800}},
         "stats": {"compressionCount": 4}, "nextBlockId": 2, "someFutureKey": {"x": 1}}
    s = CompressionState.from_acp_json(d)
    assert s.blocks[0].block_id == "b1" and s.blocks[0].start_ref == "m00001"
    # merged per key: untouched keys keep their initial values
    assert s.nudge.last_nudge_shown_tokens == 900 and s.nudge.last_per_message_nudge_tokens == 0
    assert s.nudge.last_shown_by_tier == {2: 800}
    assert s.stats.compression_count == 4 and s.stats.tokens_compressed == 0
    assert s.next_block_id == 2 and s.next_run_id == 1


def test_acp_round_trip_omits_none_optionals():
    d = {"blocks": [acp_block()], "messageRefs": {"byRaw": {"a": "m00001", "x": "BLOCKED"},
                                                 "byRef": {"m00001": "a"}},
         "tokenSnapshot": {"m00001": 12}}
    s = CompressionState.from_acp_json(d)
    out = s.to_acp_json()
    assert "topic" not in out["blocks"][0] and "durationMs" not in out["blocks"][0]
    assert "absorbed" not in out
    assert CompressionState.from_acp_json(out).to_acp_json() == out
    assert out["messageRefs"]["byRaw"]["x"] == "BLOCKED"


def test_newer_kernel_fields_pass_through():
    d = {"absorbed": [{"toolCallId": "c1", "summary": "x"}], "nudge": {"everInjected": True},
         "stats": {"absorbedTokens": 50}}
    out = CompressionState.from_acp_json(d).to_acp_json()
    assert out["absorbed"] == [{"toolCallId": "c1", "summary": "x"}]
    assert out["nudge"]["everInjected"] is True and out["stats"]["absorbedTokens"] == 50


@pytest.mark.parametrize("missing", ["blockId", "summary", "tier", "compressedTokens", "createdAt"])
def test_missing_required_block_field_names_file_and_field(missing):
    b = acp_block()
    del b[missing]
    with pytest.raises(StateError) as e:
        CompressionState.from_acp_json({"blocks": [b]}, source="sess.acp.json")
    assert "sess.acp.json" in str(e.value) and f"blocks[0].{missing}" in str(e.value)
    assert isinstance(e.value, ValueError)


@pytest.mark.parametrize("field,value", [("tier", "1"), ("tier", 4), ("active", 1),
                                         ("effectiveMessageIds", "a"), ("compressedTokens", 1.5),
                                         ("summary", None), ("compressedTokens", True)])
def test_wrong_types_raise_state_error(field, value):
    with pytest.raises(StateError) as e:
        CompressionState.from_acp_json({"blocks": [acp_block(**{field: value})]}, source="f.json")
    assert e.value.field == f"blocks[0].{field}"


@pytest.mark.parametrize("d", [[], {"blocks": {}}, {"messageRefs": {"byRaw": {"a": 5}}},
                               {"nudge": {"lastShownByTier": {"x": 1}}}, {"nextBlockId": "2"}])
def test_bad_top_level_shapes_raise_state_error(d):
    with pytest.raises(StateError):
        CompressionState.from_acp_json(d)


def test_minimal_block_contract_fills_defaults():
    b = {"blockId": "b3", "summary": "x", "tier": 2, "compressedTokens": 5, "createdAt": 1,
         "directMessageIds": ["m"]}
    blk = CompressionState.from_acp_json({"blocks": [b]}).blocks[0]
    assert blk.effective_message_ids == ["m"] and blk.active is True and blk.run_id == ""


def test_envelope_round_trip_and_version_checks(tmp_path):
    s = CompressionState.from_acp_json({"blocks": [acp_block()], "nextBlockId": 2})
    env = s.to_json()
    assert env["format"] == FORMAT and env["version"] == 1
    assert CompressionState.from_json(env).to_acp_json() == s.to_acp_json()
    with pytest.raises(StateError, match="version"):
        CompressionState.from_json({**env, "version": 2})
    with pytest.raises(StateError, match="format"):
        CompressionState.from_json({**env, "format": "other"})
    p = tmp_path / "state.json"
    s.save(p)
    assert [x.name for x in tmp_path.iterdir()] == ["state.json"]  # no temp file left behind
    assert CompressionState.load(p).to_acp_json() == s.to_acp_json()
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(s.to_acp_json()))
    assert CompressionState.load(bare).blocks[0].block_id == "b1"
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    with pytest.raises(StateError, match="bad.json"):
        CompressionState.load(bad)


def test_copy_is_deep():
    s = CompressionState(blocks=[Block("b1", "r1", 1, "sum", ["a"], ["a"])], by_raw={"a": "m00001"})
    s.nudge.last_shown_by_tier[1] = 5
    c = s.copy()
    c.blocks[0].effective_message_ids.append("z")
    c.blocks[0].active = False
    c.by_raw["q"] = "m00002"
    c.nudge.last_shown_by_tier[2] = 9
    assert s.blocks[0].effective_message_ids == ["a"] and s.blocks[0].active
    assert "q" not in s.by_raw and s.nudge.last_shown_by_tier == {1: 5}
