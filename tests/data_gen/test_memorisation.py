"""The memorisation audit (data_gen.memorisation) on tiny hand-made splits with known answers."""

from __future__ import annotations

import json

import pytest

from data_gen.memorisation import (
    TrainTargets,
    compress_targets,
    exact_items,
    items_in_text,
    memorisation_audit,
    range_shape,
    skeleton,
)


def _row(kind: str, session: str, *ranges: tuple[str, str, str], as_dict: bool = False) -> dict:
    args = {"topic": "t", "content": [{"startId": s, "endId": e, "summary": text} for s, e, text in ranges]}
    call = {"id": "c0", "type": "function",
            "function": {"name": "compress", "arguments": args if as_dict else json.dumps(args)}}
    return {"messages": [{"role": "user", "content": "go"}, {"role": "assistant", "content": "", "tool_calls": [call]}],
            "tools": [], "meta": {"kind": kind, "session_id": session}}


TRAIN_A = "Steps:\n- Ran `cat app/config.env` (m00004): RATE_LIMIT=4500 today.\nRefs: m00002–m00005"
TRAIN_B = "State:\n- The exact value (from m00008): `BATCH_SIZE=64`\nRefs: m00006–m00009"
# Same skeleton as TRAIN_A, every value new.
SAME_SHAPE_NEW_VALUES = "Steps:\n- Ran `cat svc/limits.yaml` (m00031): MAX_CONN=12 today.\nRefs: m00030–m00033"
# New phrasing, one value seen in train (BATCH_SIZE=64), one new (a path).
NEW_SHAPE = "Found that `BATCH_SIZE=64` is read in src/loader.py:17 before the flag is parsed."


def test_skeleton_masks_values_and_keeps_phrasing():
    assert skeleton(TRAIN_A) == skeleton(SAME_SHAPE_NEW_VALUES)
    assert skeleton(TRAIN_A) == "Steps:\n- Ran <q> (<id>): <name>=# today.\nRefs: <id>–<id>"
    assert skeleton(TRAIN_A) != skeleton(NEW_SHAPE)
    # Ordinary words, an apostrophe and a capitalised sentence start stay.
    assert skeleton("Don't restore b3; it's 2x smaller.") == "Don't restore <id>; it's #x smaller."


def test_exact_items_are_spans_settings_paths_and_errors():
    assert exact_items(TRAIN_A) == ["cat app/config.env", "RATE_LIMIT=4500", "app/config.env"]
    assert exact_items(NEW_SHAPE) == ["BATCH_SIZE=64", "src/loader.py:17"]
    text = "It raised KeyError: 'region' at run.py:9, and `-n` is too short to count."
    assert exact_items(text) == ["region", "run.py:9", "KeyError: 'region' at run.py:9"]


def test_audit_figures_on_hand_made_splits():
    by_split = {
        "train": [_row("emergency", "s1", ("m00002", "m00005", TRAIN_A)),
                  _row("nudged_compress", "s2", ("m00006", "m00009", TRAIN_B), as_dict=True)],
        # 3 targets: one seen skeleton (new values), one new skeleton, one exact copy of a train target.
        "test": [_row("emergency", "s3", ("m00030", "m00033", SAME_SHAPE_NEW_VALUES)),
                 _row("emergency", "s3", ("m00040", "m00040", NEW_SHAPE), ("m00002", "m00005", TRAIN_A))],
        "heldout": [{"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "ok"}],
                     "meta": {"kind": "ordinary", "session_id": "s9"}}],
    }
    fig = memorisation_audit(by_split)
    assert fig["train"] == {"compress_targets": 2, "sessions": 2, "distinct_skeletons": 2, "range_shapes": 2}
    test = fig["test"]
    assert test["compress_targets"] == 3 and test["sessions"] == 1
    assert test["structure_seen"] == pytest.approx(round(2 / 3, 3))
    # Items: new-values target 3 (none seen), NEW_SHAPE 2 (BATCH_SIZE=64 seen), TRAIN_A 3 (all seen).
    assert test["exact_items"] == 8
    assert test["content_seen"] == pytest.approx(round(4 / 8, 3))
    # (emergency, m, 30, 3), (emergency, m, 40, 0), (emergency, m, 2, 3)
    assert test["range_shapes"] == 3
    assert "heldout" not in fig  # no compress target there: nothing to audit


def test_range_shape_reads_ref_type_start_and_span():
    t1, t2 = compress_targets([_row("tier2", "s", ("b1", "b3", "x"), ("m00012", "m00020", "y"))])
    assert range_shape(t1) == ("tier2", "b", 1, 2)
    assert range_shape(t2) == ("tier2", "m", 12, 8)


def test_nearest_train_similarity_is_the_best_difflib_ratio():
    import difflib

    train = TrainTargets.from_rows([_row("emergency", "s1", ("m00002", "m00005", TRAIN_A)),
                                    _row("emergency", "s2", ("m00006", "m00009", TRAIN_B))])
    assert train.nearest(TRAIN_B) == 1.0
    want = max(difflib.SequenceMatcher(None, c, SAME_SHAPE_NEW_VALUES, autojunk=False).ratio()
               for c in (TRAIN_A, TRAIN_B))
    assert train.nearest(SAME_SHAPE_NEW_VALUES) == pytest.approx(want)
    assert 0.5 < want < 1.0
    assert TrainTargets([]).nearest("anything") is None


def test_items_in_text_against_the_context():
    context = 'cat config.env\nBATCH_SIZE=64\n{"path": "src/loader.py:17"}'
    copied, missing = items_in_text("Keep `BATCH_SIZE=64` and `BATCH_VALUE=64`; see src/loader.py:17.", context)
    assert copied == ["BATCH_SIZE=64", "src/loader.py:17"]
    assert missing == ["BATCH_VALUE=64"]
    # Escaped JSON (a tool call's arguments) is read with its escapes undone.
    copied, missing = items_in_text('Ran `grep -n "x" a.py`.', '{"cmd": "grep -n \\"x\\" a.py"}')
    assert copied == ['grep -n "x" a.py'] and missing == []


def test_capped_nearest_search_never_overstates_and_finds_a_near_copy():
    import random

    rng = random.Random(0)
    words = ["ran", "pytest", "config", "loader", "value", "the", "failed", "kept", "restore", "block"]
    labels = [" ".join(rng.choice(words) for _ in range(30)) for _ in range(200)]
    train = TrainTargets([], labels)
    for q in labels[:5]:
        near = q[:40] + "X" + q[41:]  # one character changed: a near copy of one label
        assert train.nearest(near, candidates=4) == train.nearest(near, candidates=None) > 0.95
    other = " ".join(rng.choice(words) for _ in range(30))
    assert train.nearest(other, candidates=4) <= train.nearest(other, candidates=None)
