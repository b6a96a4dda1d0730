"""The decision and summary loss terms, and that the final assistant turn is trained whole."""

from __future__ import annotations

import json
from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch

from plumbing.chat_templates import SampleRejected, choose_template, tokenize_sample
from train.recipe import TrainerSection
from train.trainer import KindsCollator, ProjectSFTTrainer, kind_losses, token_weights

from .conftest import make_row


def _fake(k=0, wd=1.0, ws=1.0):
    return SimpleNamespace(decision_tokens=k, decision_weight=wd, summary_weight=ws, copy_weight=1.0,
                           args=SimpleNamespace(average_tokens_across_devices=False),
                           _metrics={"train": defaultdict(list)})


def _batch():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 7, 11, generator=g)
    targets = torch.randint(0, 11, (2, 7), generator=g)
    targets[0, :2] = -100  # row 0's target starts later
    targets[1, 6] = -100
    return logits, targets


def test_token_weights_mark_the_first_target_tokens_of_each_row():
    _, t = _batch()
    w = token_weights(t, 3, 2.0, 0.5)
    assert w[0].tolist() == [0, 0, 2, 2, 2, 0.5, 0.5]
    assert w[1].tolist() == [2, 2, 2, 0.5, 0.5, 0.5, 0]
    assert torch.equal(token_weights(t, 0, 2.0, 1.0), (t != -100).float())


def test_default_weights_are_todays_loss_exactly():
    logits, t = _batch()
    plain = ProjectSFTTrainer._nll(_fake(), logits, t, None)
    fake = _fake(k=3)
    weighted = ProjectSFTTrainer._weighted_nll(fake, logits, t, None, "train")
    assert torch.equal(weighted, plain)
    assert fake._metrics["train"]["loss_decision"] and fake._metrics["train"]["loss_summary"]


def test_the_decision_term_is_weighted_apart():
    logits, t = _batch()
    nll = torch.nn.functional.cross_entropy(logits.reshape(-1, 11), t.reshape(-1), ignore_index=-100,
                                            reduction="none").view_as(t)
    first = token_weights(t, 3, 1.0, 0.0).bool()
    rest = (t != -100) & ~first
    want = (4.0 * nll[first].sum() + 0.5 * nll[rest].sum()) / (t != -100).sum()
    fake = _fake(3, 4.0, 0.5)
    got = ProjectSFTTrainer._weighted_nll(fake, logits, t, None, "train")
    assert torch.allclose(got, want)
    assert fake._metrics["train"]["loss_decision"][0] == pytest.approx((nll[first].sum() / first.sum()).item())


def test_loss_per_kind_by_rows_and_by_padding_free_segments():
    logits, t = _batch()
    nll = torch.nn.functional.cross_entropy(logits.reshape(-1, 11), t.reshape(-1), ignore_index=-100,
                                            reduction="none").view_as(t)
    got = kind_losses(nll, t, ["emergency", "task"])
    assert got["emergency"] == pytest.approx(nll[0, 2:].mean().item())
    assert got["task"] == pytest.approx(nll[1, :6].mean().item())
    # Two rows of one kind pool their tokens (a token mean, not a mean of row means).
    assert kind_losses(nll, t, ["task", "task"])["task"] == pytest.approx(nll[t != -100].mean().item())
    # One padding-free row holding three samples: positions 0-2, 3-4, 5-6.
    flat_nll, flat_t = nll[1:2], t[1:2]
    seg = torch.tensor([[0, 0, 0, 1, 1, 2, 2]])
    got = kind_losses(flat_nll, flat_t, ["tier2", "task", "tier2"], seg)
    assert got["task"] == pytest.approx(flat_nll[0, 3:5].mean().item())
    assert got["tier2"] == pytest.approx(torch.cat([flat_nll[0, :3], flat_nll[0, 5:6]]).mean().item())
    assert kind_losses(nll, t, ["", "task"]).keys() == {"task"}  # a row without a kind is not logged


def test_the_kinds_collator_hands_kinds_over_and_keeps_them_from_the_inner_collator():
    seen = []

    def inner(features):
        seen.extend(features)
        return {"input_ids": [f["input_ids"] for f in features]}

    batch = KindsCollator(inner)([{"input_ids": [1], "kind": "emergency"}, {"input_ids": [2], "kind": "task"}])
    assert batch["kinds"] == ["emergency", "task"] and all("kind" not in f for f in seen)
    assert "kinds" not in KindsCollator(inner)([{"input_ids": [3]}])  # merged rows carry none


def test_recipe_defaults_and_checks():
    t = TrainerSection()
    assert (t.decision_tokens, t.decision_weight, t.summary_weight) == (0, 1.0, 1.0)
    with pytest.raises(ValueError, match="decision_tokens > 0"):
        TrainerSection(decision_weight=3.0)
    with pytest.raises(ValueError, match="target_only_logits"):
        TrainerSection(decision_tokens=8)
    assert TrainerSection(decision_tokens=8, decision_weight=3.0, target_only_logits=True).decision_tokens == 8


def test_the_end_of_turn_token_is_trained_and_nothing_is_truncated(embedded_model):
    from plumbing.models import load_tokenizer

    tok = load_tokenizer(embedded_model)
    template = choose_template(tok).template
    row = make_row(0, "compress")
    tools = json.loads(row["tools"]) if isinstance(row["tools"], str) else row["tools"]
    enc = tokenize_sample(tok, row["messages"], tools, template)
    n = len(enc["input_ids"])
    last = max(i for i, m in enumerate(enc["assistant_masks"]) if m)
    assert tok.convert_ids_to_tokens(enc["input_ids"][last]) == "<|im_end|>"
    # At exactly max_length the sample is kept whole; one token less and it is rejected, never cut.
    assert tokenize_sample(tok, row["messages"], tools, template, max_length=n)["input_ids"] == enc["input_ids"]
    with pytest.raises(SampleRejected) as exc:
        tokenize_sample(tok, row["messages"], tools, template, max_length=n - 1)
    assert exc.value.reason == "too_long"


def test_a_smoke_run_logs_both_terms_and_keeps_the_loss_at_default_weights(project_root, sft_data_dir, tmp_path):
    from plumbing.recipe_loader import load_config
    from train.recipe import TrainRecipe
    from train.sft import run_training

    def run(name, *overrides):
        recipe = load_config(project_root / "configs/train/smoke.yaml", TrainRecipe,
                             [f"data.dir={sft_data_dir}", "trainer.save_steps=100", "trainer.max_steps=2",
                              "trainer.target_only_logits=true", *overrides])
        return json.loads((run_training(recipe, tmp_path / name) / "metrics.json").read_text())

    plain = run("plain")
    split = run("split", "trainer.decision_tokens=4")
    assert split["losses"] == pytest.approx(plain["losses"], rel=1e-6)
    logs = [h for h in split["log_history"] if "loss" in h]
    assert logs and all("loss_decision" in h and "loss_summary" in h for h in logs)
    # Each step's line names the kind of the sample it trained on (one sample a step).
    assert all(any(k.startswith("loss_by_kind/") for k in h) for h in logs)
    # A step whose samples are all of one kind: that kind's token mean is the step's loss.
    # One sample a step: its kind's token mean is the step's loss.
    one = run("one", "trainer.per_device_train_batch_size=1")
    for h in (h for h in one["log_history"] if "loss" in h):
        kinds = [k for k in h if k.startswith("loss_by_kind/")]
        assert len(kinds) == 1 and h[kinds[0]] == pytest.approx(h["loss"], rel=1e-3), h
