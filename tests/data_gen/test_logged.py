"""Logged decisions from kernel state files become labeled compress samples."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from data_gen.sources.logged import logged_samples
from doctrine.kernel.readers import read_state_file
from doctrine.render.prompts import fill_disclosures
from doctrine.spec import load_doctrine

STATES = Path(__file__).resolve().parents[1] / "doctrine" / "kernel" / "fixtures" / "states"


def run(**kw):
    rejects = Counter()
    args = dict(doctrine=load_doctrine("v1"), prompt_mode="distilled", window=32768, min_score=None,
                below_threshold="drop")
    args.update(kw)
    return list(logged_samples([str(STATES)], rejects=rejects, **args)), rejects


def test_blocks_with_their_messages_become_compress_samples():
    samples, rejects = run()
    assert samples, rejects
    for s in samples:
        meta = s["meta"]
        assert meta["source"] == "logged" and meta["conformance"]["passed"] is True
        target = s["messages"][-1]
        assert target["role"] == "assistant" and target["tool_calls"][0]["function"]["name"] == "compress"
        args = json.loads(target["tool_calls"][0]["function"]["arguments"])
        logged = read_state_file(meta["source_file"])
        block = next(b for b in logged.state.blocks if b.block_id == meta["block_id"])
        assert args["content"][0]["summary"] == block.summary  # the production model's own summary
        # The range is given in the kernel's refs, oldest first (under the proxy's text-only
        # tags the model sees tool messages' refs only in a nudge's range list).
        start, end = args["content"][0]["startId"], args["content"][0]["endId"]
        assert re.fullmatch(r"m\d{5}", start) and re.fullmatch(r"m\d{5}", end) and start <= end
        for m in s["messages"]:
            assert fill_disclosures(m["content"] or "") == []
    # Bad files and unusable blocks are counted by reason, never raised.
    assert rejects["logged:StateError"] >= 1 and rejects["logged:no_messages"] >= 1


def test_threshold_drops_low_scoring_summaries():
    strict, strict_rejects = run()
    loose, _ = run(min_score=0.0)
    assert len(loose) > len(strict)
    assert strict_rejects["logged:below_threshold"] == len(loose) - len(strict)


def test_malformed_files_are_counted_and_the_rest_still_yields(tmp_path):
    import shutil

    good = next((STATES / "bc-proxy" / "anthropic").glob("*.json"))
    shutil.copy(good, tmp_path / "good.json")
    (tmp_path / "deep.json").write_text('{"blocks": ' + "[" * 100000 + "]" * 100000 + "}")
    (tmp_path / "big.json").write_text('{"blocks": [], "nextBlockId": ' + "1" * 5000 + "}")
    (tmp_path / "utf.json").write_bytes(b'{"blocks": [], "x": "\xff"}')
    (tmp_path / "types.json").write_text('{"id": "s", "version": 3, "state": {"blocks": 7}}')
    alone, _ = run_paths([str(tmp_path / "good.json")])
    samples, rejects = run_paths([str(tmp_path)])
    assert alone and [s["meta"]["block_id"] for s in samples] == [s["meta"]["block_id"] for s in alone]
    assert rejects["logged:StateError"] == 4


def run_paths(paths):
    rejects = Counter()
    out = list(logged_samples(paths, rejects=rejects, doctrine=load_doctrine("v1"), prompt_mode="distilled",
                              window=32768, min_score=0.0, below_threshold="drop"))
    return out, rejects
