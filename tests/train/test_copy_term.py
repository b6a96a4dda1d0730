"""The copy term: target tokens that copy an exact item from the context, weighed apart."""

from __future__ import annotations

import json
from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch

from plumbing.chat_templates import choose_template, tokenize_sample
from train.copy_tokens import _decoded_bytes, _token_bytes, copied_items, copy_mask
from train.recipe import TrainerSection, TrainRecipe
from train.trainer import KindsCollator, ProjectSFTTrainer, token_weights

from .conftest import call, make_row


@pytest.fixture(scope="module")
def tok(embedded_model):
    from plumbing.models import load_tokenizer

    return load_tokenizer(embedded_model)


def _encode(tok, messages, tools=None):
    enc = tokenize_sample(tok, messages, tools, choose_template(tok).template)
    return enc["input_ids"], enc["assistant_masks"]


def _marked(tok, ids, mask):
    return tok.decode([i for i, m in zip(ids, mask, strict=True) if m])


def test_items_copied_are_the_ones_the_context_holds(tok):
    row = make_row(3, "compress")  # its summary quotes the tool output's error and the range's ids
    items = copied_items(row["messages"])
    assert "ValueError: bad token at line 13" in items
    assert {"m00002", "m00004"} <= set(items)  # the range is read from the nudge
    assert "tests/test_3.py" in items
    # An item the context does not hold (recalled, invented) is not a copy.
    msgs = [*row["messages"][:-1], {"role": "assistant", "content": "", "tool_calls": [call("x", "compress", {
        "content": [{"startId": "m00002", "endId": "m00009", "summary": "Set `BATCH_SIZE=890` in config/app.env."}]})]}]
    items = copied_items(msgs)
    assert "BATCH_SIZE=890" not in items and "config/app.env" not in items and "m00009" not in items
    assert items == ["m00002"]


def test_the_mask_covers_exactly_the_copied_items_tokens(tok):
    row = make_row(3, "compress")
    tools = json.loads(row["tools"])
    ids, target = _encode(tok, row["messages"], tools)
    mask = copy_mask(tok, ids, target, copied_items(row["messages"]))
    assert len(mask) == len(ids)
    assert all(t for t, m in zip(target, mask, strict=True) if m)  # only target tokens
    marked = _marked(tok, ids, mask)
    for item in ("ValueError", "bad token at line 13", "m00002", "m00004", "test_3.py"):
        assert item in marked
    # The phrasing around them is not marked: the call's keys and the label's own words.
    assert "summary" not in marked and "Ran pytest on" not in marked and "compress" not in marked
    assert 0 < sum(mask) < sum(target)


def test_byte_offsets_agree_with_decoding_and_escaped_items_are_found(tok):
    # A value with a quote and a non-ASCII character: JSON-escaped inside call arguments.
    value = 'greeting = "héllo"'
    msgs = [{"role": "user", "content": f"The config says {value} today."},
            {"role": "assistant", "content": "", "tool_calls": [call("a", "compress", {
                "content": [{"startId": "m00001", "endId": "m00001", "summary": f"Config: `{value}`."}]})]}]
    ids, target = _encode(tok, msgs)
    span = [i for i, m in zip(ids, target, strict=True) if m]
    assert _token_bytes(tok, span) == _decoded_bytes(tok, span)
    mask = copy_mask(tok, ids, target, copied_items(msgs))
    assert "héllo" in _marked(tok, ids, mask)


def test_token_weights_put_the_copy_weight_on_copy_tokens_outside_the_decision_lead():
    t = torch.tensor([[-100, 5, 6, 7, 8, 9], [1, 2, 3, 4, -100, -100]])
    copy = torch.tensor([[0, 1, 0, 1, 1, 0], [0, 0, 1, 0, 1, 0]], dtype=torch.bool)
    w = token_weights(t, 1, 2.0, 0.5, copy, 3.0)
    assert w[0].tolist() == [0, 2.0, 0.5, 3.0, 3.0, 0.5]  # the decision lead keeps its own weight
    assert w[1].tolist() == [2.0, 0.5, 3.0, 0.5, 0, 0]  # an unlabelled position weighs 0 even if marked
    assert torch.equal(token_weights(t, 1, 2.0, 0.5), token_weights(t, 1, 2.0, 0.5, copy, 0.5))


def _fake(copy_weight):
    return SimpleNamespace(decision_tokens=0, decision_weight=1.0, summary_weight=1.0, copy_weight=copy_weight,
                           args=SimpleNamespace(average_tokens_across_devices=False),
                           _metrics={"train": defaultdict(list)})


def test_the_copy_term_is_weighted_and_logged():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(2, 6, 13, generator=g)
    t = torch.randint(0, 13, (2, 6), generator=g)
    t[1, 5] = -100
    copy = torch.zeros(2, 6, dtype=torch.bool)
    copy[0, 2:4] = True
    copy[1, 1] = True
    nll = torch.nn.functional.cross_entropy(logits.reshape(-1, 13), t.reshape(-1), ignore_index=-100,
                                            reduction="none").view_as(t)
    valid = t != -100
    plain = ProjectSFTTrainer._nll(_fake(1.0), logits, t, None)
    assert torch.allclose(ProjectSFTTrainer._weighted_nll(_fake(1.0), logits, t, None, "train", copy), plain)
    fake = _fake(4.0)
    got = ProjectSFTTrainer._weighted_nll(fake, logits, t, None, "train", copy)
    want = (4.0 * nll[copy].sum() + nll[valid & ~copy].sum()) / valid.sum()
    assert torch.allclose(got, want)
    assert fake._metrics["train"]["loss_copy"][0] == pytest.approx(nll[copy].mean().item())


def test_the_collator_lays_copy_masks_out_like_the_ids():
    def padded(features):
        n = max(len(f["input_ids"]) for f in features)
        return {"input_ids": torch.tensor([f["input_ids"] + [0] * (n - len(f["input_ids"])) for f in features])}

    def padding_free(features):
        return {"input_ids": torch.tensor([sum((f["input_ids"] for f in features), [])])}

    feats = [{"input_ids": [1, 2, 3], "kind": "emergency", "copy_mask": [0, 1, 1]},
             {"input_ids": [4, 5], "kind": "task", "copy_mask": [1, 0]}]
    batch = KindsCollator(padded)(feats)
    assert batch["copy_mask"].tolist() == [[False, True, True], [True, False, False]]
    assert batch["kinds"] == ["emergency", "task"]
    batch = KindsCollator(padding_free)(feats)
    assert batch["copy_mask"].tolist() == [[False, True, True, True, False]]


def test_recipe_checks():
    assert TrainerSection().copy_weight == 1.0
    with pytest.raises(ValueError, match="target_only_logits"):
        TrainerSection(copy_weight=3.0)
    with pytest.raises(ValueError, match="packing"):
        TrainRecipe(trainer={"copy_weight": 3.0, "target_only_logits": True}, data={"packing": True})
    with pytest.raises(ValueError, match="shared_prefix"):
        TrainRecipe(trainer={"copy_weight": 3.0, "target_only_logits": True}, data={"shared_prefix": True})


def test_a_smoke_run_weighs_and_logs_the_copy_term(project_root, sft_data_dir, tmp_path):
    from plumbing.recipe_loader import load_config
    from train.sft import run_training

    def run(name, *overrides):
        recipe = load_config(project_root / "configs/train/smoke.yaml", TrainRecipe,
                             [f"data.dir={sft_data_dir}", "trainer.save_steps=100", "trainer.max_steps=2",
                              "trainer.target_only_logits=true", "trainer.per_device_train_batch_size=1",
                              *overrides])
        stage = run_training(recipe, tmp_path / name)
        return json.loads((stage / "metrics.json").read_text()), json.loads((stage / "manifest.json").read_text())

    plain, _ = run("plain")
    copied, manifest = run("copy", "trainer.copy_weight=3.0")
    counts = manifest["counts"]
    assert 0 < counts["copy_tokens"] < counts["target_tokens"]
    logs = [h for h in copied["log_history"] if "loss" in h]
    assert logs and all("loss_copy" in h for h in logs)
    # The first step trains the same sample from the same weights: its unweighted token mean
    # (loss_summary, every target token without a decision lead) is the plain run's loss, and
    # the weighted loss is above it by (weight - 1) x the copy tokens' share of the NLL.
    first_plain = next(h for h in plain["log_history"] if "loss" in h)
    first = logs[0]
    assert first["loss_summary"] == pytest.approx(first_plain["loss"], rel=1e-4)
    assert first["loss"] > first["loss_summary"] * 1.01
