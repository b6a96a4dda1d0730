"""Shared-prefix merging: one sequence for several decision points of a session gives the
summed loss and the LoRA gradients of the separate samples, on the tiny model."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from train.shared_prefix import merge_samples


def _session_samples():
    g = torch.Generator().manual_seed(3)

    def toks(n):
        return torch.randint(10, 5000, (n,), generator=g).tolist()

    history, nudge_a, target_a, more, target_b, target_c = toks(40), toks(6), toks(8), toks(12), toks(7), toks(5)
    ctx = lambda n: [-100] * n  # noqa: E731
    # A: the history, a trailing nudge, A's decision. B: the same history, A's decision as
    # history (no nudge: it was not in B's context), more work, B's decision. C: B's
    # context without B's decision, another decision.
    a = (history + nudge_a + target_a, ctx(46) + target_a)
    b = (history + target_a + more + target_b, ctx(60) + target_b)
    c = (history + target_a + more + target_c, ctx(60) + target_c)
    return [a, b, c]


def test_merge_layout_masks_and_savings():
    samples = _session_samples()
    m = merge_samples(samples)
    assert m.sample_tokens == 54 + 67 + 65
    assert m.tokens_saved == 40 + 60  # B shares the history with A; C shares B's first 60
    assert len(m.input_ids) == m.sample_tokens - m.tokens_saved
    # B's first own token (A's decision, as history) sits after A's tokens, at B's position 40,
    # and must not see A's nudge (merged 40..45) nor A's decision (46..53).
    first_b = 54
    assert m.position_ids[first_b] == 40
    assert m.attention_mask[first_b, :40].all() and not m.attention_mask[first_b, 40:54].any()
    assert m.attention_mask[first_b, first_b]
    # Every row sees itself and nothing after it.
    assert m.attention_mask.diagonal().all() and not m.attention_mask.triu(1).any()
    assert len(m.loss_positions) == 8 + 7 + 5


@pytest.fixture(scope="module")
def lora_model(tiny_model_dir):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    return get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "o_proj"],
                                            init_lora_weights=False, task_type="CAUSAL_LM"))


def _grads(model):
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def test_merged_loss_and_grads_equal_the_sum_over_separate_samples(lora_model):
    samples = _session_samples()
    lora_model.zero_grad()
    separate = torch.zeros(())
    for ids, labels in samples:
        logits = lora_model(input_ids=torch.tensor([ids])).logits[0, :-1]
        nll = F.cross_entropy(logits, torch.tensor(labels[1:]), ignore_index=-100, reduction="sum")
        nll.backward()
        separate = separate + nll.detach()
    expected = _grads(lora_model)

    m = merge_samples(samples)
    lora_model.zero_grad()
    logits = lora_model(input_ids=m.input_ids[None], position_ids=m.position_ids[None],
                        attention_mask=m.attention_mask[None, None], logits_to_keep=m.loss_positions).logits[0]
    merged = F.cross_entropy(logits, m.loss_targets, reduction="sum")
    merged.backward()
    got = _grads(lora_model)

    assert merged.item() == pytest.approx(separate.item(), rel=1e-5)
    assert len(got) == 12  # (q, v, o) x (A, B) x 2 layers
    for name, g in expected.items():
        assert g.abs().sum() > 0, name
        torch.testing.assert_close(got[name], g, rtol=1e-4, atol=1e-6, msg=name)

    # The control: without the per-target mask and positions (plain causal attention over the
    # merged row) the logits differ far beyond the tolerance the merged ones meet.
    with torch.no_grad():
        wrong = lora_model(input_ids=m.input_ids[None], logits_to_keep=m.loss_positions).logits[0]
        sep_logits = torch.cat([
            lora_model(input_ids=torch.tensor([ids])).logits[0, :-1][torch.tensor(labels[1:]) != -100]
            for ids, labels in samples])
    assert (logits.detach() - sep_logits).abs().max() < 1e-4
    assert (wrong - sep_logits).abs().max() > 1e-2


def test_block_attention_matches_the_dense_mask(tiny_model_dir):
    """prefix_attention (the shared-prefix runs' attention: per-sample blocks, no N x N mask)
    gives the dense-mask logits and LoRA gradients, and falls back to plain sdpa without blocks."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from train.shared_prefix import SharedPrefixCollator, register_attention

    samples = _session_samples()
    row = {"input_ids": [t for ids, _ in samples for t in ids], "labels": [t for _, lab in samples for t in lab],
           "sample_lengths": [len(ids) for ids, _ in samples]}
    dense = SharedPrefixCollator(dense_mask=True)([row])
    sparse = SharedPrefixCollator()([row])
    assert "attention_mask" not in sparse and len(sparse["prefix_blocks"]) == 3

    def run(attn, batch, **extra):
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32, attn_implementation=attn)
        model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "k_proj", "v_proj"],
                                                 init_lora_weights=False, task_type="CAUSAL_LM"))
        inputs = {k: batch[k] for k in ("input_ids", "position_ids", "attention_mask", "prefix_blocks") if k in batch}
        logits = model(**inputs, logits_to_keep=batch["loss_positions"]).logits[0]
        F.cross_entropy(logits, batch["labels"][0], reduction="sum").backward()
        grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
        with torch.no_grad():
            plain = model(input_ids=batch["input_ids"][:, :20]).logits
        return logits.detach(), grads, plain

    want, want_grads, want_plain = run("sdpa", dense)
    got, got_grads, got_plain = run(register_attention(), sparse)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    for name, g in want_grads.items():
        assert g.abs().sum() > 0, name
        torch.testing.assert_close(got_grads[name], g, rtol=1e-4, atol=1e-6, msg=name)
    torch.testing.assert_close(got_plain, want_plain)
    # Blocks that cover only part of the sequence are an error, not a silent causal pass.
    with pytest.raises(ValueError, match="cover"):
        run(register_attention(), {**sparse, "prefix_blocks": sparse["prefix_blocks"][:2]})


def test_grouping_keeps_sessions_apart_in_step_order_within_the_length_cap():
    from train.shared_prefix import group_samples

    history = list(range(100, 140))
    a, b, c = history + [1, 2], history + [3, 4, 5], history + [6]
    other = history + [7]
    # b is step 0, a step 1, c step 2 of session s; "other" shares the tokens but not the session.
    keys, steps, ids = ["s", "s", "s", "t"], [1, 0, 2, 0], [a, b, c, other]
    assert group_samples(keys, steps, ids, 10_000) == [[1, 0, 2], [3]]
    # 43 + 2 new tokens fit 45; c's one more token does not, so it starts the next sequence.
    assert group_samples(keys, steps, ids, 45) == [[1, 0], [2], [3]]
    # A sample longer than the cap still trains, alone.
    assert group_samples(["s"], [0], [a], 5) == [[0]]
