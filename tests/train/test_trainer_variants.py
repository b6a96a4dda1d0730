"""Loss-preserving speed variants of training: target-only logits and padding-free batches.

Each variant must give the loss and LoRA gradients of the standard path (TRL's loss over a
padded batch) within float tolerance, on the tiny model and the fixture curriculum.
"""

from __future__ import annotations

import json

import pytest
import torch

from plumbing.recipe_loader import load_config
from train.recipe import TrainRecipe
from train.sft import run_training

TINY = "tiny:smollm2-135m-instruct"


def _trainer(tmp_path, data_dir, *, padding_free=False, target_only_logits=False, shared_prefix=False):
    from peft import LoraConfig
    from trl import SFTConfig

    from plumbing.chat_templates import choose_template
    from plumbing.models import load_model, load_tokenizer, resolve_model
    from train.data import load_split, tokenize_split
    from train.trainer import ProjectSFTTrainer

    resolved = resolve_model(TINY)
    tok = load_tokenizer(resolved)
    tok.chat_template = choose_template(tok, "auto").template
    ds, _ = tokenize_split(load_split(data_dir, "train"), tok, tok.chat_template,
                           max_length=2048, prompt_mode="distilled", with_keys=True)
    collator, extra, load = None, {}, {}
    if shared_prefix:
        from train.shared_prefix import SharedPrefixCollator, merge_split, register_attention

        ds, _ = merge_split(ds, ds["session_key"], ds["step"], 8192)
        collator = SharedPrefixCollator()
        extra = {"remove_unused_columns": False, "dataset_kwargs": {"skip_prepare_dataset": True}}
        load = {"attn_implementation": register_attention()}
    else:
        ds = ds.remove_columns(["session_key", "step"])
    args = SFTConfig(output_dir=str(tmp_path / "out"), max_length=None if padding_free or shared_prefix else 2048,
                     padding_free=padding_free, per_device_train_batch_size=1 if shared_prefix else 3,
                     report_to=["none"], use_cpu=True, shuffle_dataset=False, **extra)
    trainer = ProjectSFTTrainer(
        model=load_model(resolved, dtype="float32", **load), args=args, train_dataset=ds, processing_class=tok,
        peft_config=LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"),
        data_collator=collator, target_only_logits=target_only_logits, shared_prefix=shared_prefix)
    # LoRA B starts at zero, which would leave every A gradient zero: give both factors
    # seeded values (the same in every trainer) so that every LoRA gradient is compared.
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in trainer.model.named_parameters():
            if "lora_" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.05)
    trainer.model.train()
    return trainer


def _loss_and_grads(trainer, features):
    batch = trainer.data_collator([dict(f) for f in features])
    trainer.model.zero_grad()
    loss = trainer.compute_loss(trainer.model, dict(batch))
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    return loss.detach(), grads, batch


def _features(trainer, idx=(0, 1, 2)):
    ds = trainer.train_dataset
    return [{k: ds[i][k] for k in ("input_ids", "labels")} for i in idx]


def _assert_same(a, b):
    loss_a, grads_a = a
    loss_b, grads_b = b
    assert loss_a.item() == pytest.approx(loss_b.item(), rel=1e-5)
    assert grads_a.keys() == grads_b.keys() and len(grads_a) == 8  # (q, v) x (A, B) x 2 layers
    for name in grads_a:
        assert grads_a[name].abs().sum() > 0, name
        torch.testing.assert_close(grads_a[name], grads_b[name], rtol=1e-4, atol=1e-6, msg=name)


@pytest.fixture(scope="module")
def standard(tmp_path_factory, sft_data_dir):
    trainer = _trainer(tmp_path_factory.mktemp("std"), sft_data_dir)
    feats = _features(trainer)
    loss, grads, batch = _loss_and_grads(trainer, feats)
    # The three samples differ in length: the padded batch has padding to skip.
    assert (batch["attention_mask"] == 0).any()
    return feats, (loss, grads)


def test_target_only_logits_same_loss_and_grads_and_head_sees_targets_only(tmp_path, sft_data_dir, standard):
    feats, expected = standard
    trainer = _trainer(tmp_path, sft_data_dir, target_only_logits=True)
    head_rows = []
    head = trainer.model.get_output_embeddings()
    hook = head.register_forward_hook(lambda mod, inp, out: head_rows.append(inp[0].shape[:-1]))
    try:
        loss, grads, batch = _loss_and_grads(trainer, feats)
    finally:
        hook.remove()
    _assert_same((loss, grads), expected)
    # The LM head ran once, over the union of the rows' target positions, not the sequence.
    targets_union = int((batch["labels"][:, 1:] != -100).any(0).sum())
    assert head_rows == [torch.Size([3, targets_union])]
    assert targets_union < batch["input_ids"].shape[1] // 2
    assert trainer._metrics["train"]["num_tokens"] == [int(batch["attention_mask"].sum())]


@pytest.mark.parametrize("target_only_logits", [False, True], ids=["trl-loss", "target-only"])
def test_padding_free_batch_same_loss_and_grads(tmp_path, sft_data_dir, standard, target_only_logits):
    feats, expected = standard
    trainer = _trainer(tmp_path, sft_data_dir, padding_free=True, target_only_logits=target_only_logits)
    loss, grads, batch = _loss_and_grads(trainer, feats)
    # One row, the samples back to back, positions restarting at each sample, no padding.
    assert batch["input_ids"].shape[0] == 1 and "attention_mask" not in batch
    assert batch["input_ids"].shape[1] == sum(len(f["input_ids"]) for f in feats)
    assert int((batch["position_ids"][0] == 0).sum()) == 3
    _assert_same((loss, grads), expected)


def test_a_batch_without_targets_is_a_finite_zero(tmp_path, sft_data_dir):
    trainer = _trainer(tmp_path, sft_data_dir, target_only_logits=True)
    feats = _features(trainer, (0,))
    feats[0]["labels"] = [-100] * len(feats[0]["labels"])
    batch = trainer.data_collator(feats)
    loss = trainer.compute_loss(trainer.model, dict(batch))
    loss.backward()
    assert loss.item() == 0.0


def test_recipe_switches_train_the_same_run(project_root, sft_data_dir, tmp_path):
    """The recipe keys reach the trainer: padding-free (which TRL refused with a max_length
    before) plus target-only logits train the same six steps as the standard recipe."""
    def run(name, *overrides):
        recipe = load_config(project_root / "configs/train/smoke.yaml", TrainRecipe,
                             [f"data.dir={sft_data_dir}", "trainer.save_steps=100", *overrides])
        return json.loads((run_training(recipe, tmp_path / name) / "metrics.json").read_text())

    std = run("std")
    fast = run("fast", "data.padding_free=true", "trainer.target_only_logits=true")
    assert len(fast["losses"]) == len(std["losses"]) == 6
    for a, b in zip(fast["losses"], std["losses"], strict=True):
        assert a == pytest.approx(b, rel=1e-4)
    tokens = [[h["num_tokens"] for h in m["log_history"] if "loss" in h] for m in (std, fast)]
    assert tokens[0] == tokens[1]


def test_bf16_autocast_on_cpu_trains_the_same_run_within_rounding(project_root, sft_data_dir, tmp_path):
    """trainer.bf16 on the CPU: matmuls under bf16 autocast, the LoRA weights and the saved
    adapter stay float32, and the step losses follow the float32 run within bf16 rounding."""
    from safetensors import safe_open

    def run(name, *overrides):
        recipe = load_config(project_root / "configs/train/smoke.yaml", TrainRecipe,
                             [f"data.dir={sft_data_dir}", "trainer.save_steps=100",
                              "trainer.target_only_logits=true", *overrides])
        out = run_training(recipe, tmp_path / name)
        return json.loads((out / "metrics.json").read_text()), out

    (std, _), (half, out) = run("fp32"), run("bf16", "trainer.bf16=true")
    assert len(half["losses"]) == len(std["losses"]) == 6
    for a, b in zip(half["losses"], std["losses"], strict=True):
        assert a == pytest.approx(b, rel=3e-2)
    assert half["losses"] != std["losses"]  # it did run in bf16
    with safe_open(str(next(out.rglob("final/adapter_model.safetensors"))), "pt") as f:
        assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.float32}


@pytest.mark.filterwarnings("ignore:Full backward hook is firing")
def test_lora_layers_adapt_only_those_layers_and_backward_stops_below_them(project_root, sft_data_dir, tmp_path):
    """lora.layers: the adapter holds weights for the named layers only, and backward never
    runs through the layers below the lowest of them (the speed-up of the switch)."""
    from peft import LoraConfig, get_peft_model
    from safetensors import safe_open

    from plumbing.models import load_model, resolve_model

    recipe = load_config(project_root / "configs/train/smoke.yaml", TrainRecipe,
                         [f"data.dir={sft_data_dir}", "trainer.save_steps=100", "trainer.max_steps=1",
                          "lora.layers=[1]"])
    out = run_training(recipe, tmp_path / "upper")
    final = next(out.rglob("final/adapter_model.safetensors"))
    with safe_open(str(final), "pt") as f:
        keys = list(f.keys())
    assert keys and all(".layers.1." in k for k in keys)
    assert json.loads((final.parent / "adapter_config.json").read_text())["layers_to_transform"] == [1]

    model = get_peft_model(load_model(resolve_model(TINY), dtype="float32"),
                           LoraConfig(r=4, target_modules=["q_proj", "v_proj"], layers_to_transform=[1],
                                      task_type="CAUSAL_LM"))
    reached = []
    layers = model.base_model.model.model.layers
    for i, layer in enumerate(layers):
        layer.register_full_backward_hook(lambda *_a, i=i: reached.append(i))
    ids = torch.arange(1, 17).unsqueeze(0)
    model(input_ids=ids, labels=ids).loss.backward()
    assert reached == [len(layers) - 1 - k for k in range(len(layers) - 1)]  # top down, layer 0 never

    bad = load_config(project_root / "configs/train/smoke.yaml", TrainRecipe,
                      [f"data.dir={sft_data_dir}", f"lora.layers=[{len(layers)}]"])
    with pytest.raises(ValueError, match="decoder layers"):
        run_training(bad, tmp_path / "bad")


def test_shared_prefix_batch_same_loss_and_grads_as_its_samples(tmp_path, session_sft_data_dir):
    """data.shared_prefix: one merged sequence of a session's decision points gives the loss
    (token mean over all its targets) and the LoRA gradients of the same samples trained as
    one padded batch, and processes fewer tokens than they hold."""
    merged = _trainer(tmp_path / "m", session_sft_data_dir, shared_prefix=True, target_only_logits=True)
    row = next(r for r in merged.train_dataset if len(r["sample_lengths"]) >= 2)
    loss_m, grads_m, batch = _loss_and_grads(merged, [row])
    assert len(batch["input_ids"][0]) < sum(row["sample_lengths"])  # the shared history once

    std = _trainer(tmp_path / "s", session_sft_data_dir, target_only_logits=True)
    ids = std.train_dataset["input_ids"]
    lengths = [len(x) for x in ids]
    # The std dataset keeps tokenisation order; find the samples of the merged row in it.
    start, members = 0, []
    flat = row["input_ids"]
    for n in row["sample_lengths"]:
        members.append(next(i for i, x in enumerate(ids) if lengths[i] == n and list(x) == list(flat[start:start + n])))
        start += n
    assert len(set(members)) == len(members) >= 2
    loss_s, grads_s, _ = _loss_and_grads(std, [std.train_dataset[i] for i in members])
    assert loss_m.item() == pytest.approx(loss_s.item(), rel=1e-5)
    assert grads_m.keys() == grads_s.keys()
    for name in grads_s:
        torch.testing.assert_close(grads_m[name], grads_s[name], rtol=1e-4, atol=1e-6)


def test_shared_prefix_recipe_trains_and_records_the_savings(project_root, session_sft_data_dir, tmp_path):
    """The recipe switch reaches the trainer: a run trains on merged sequences, the manifest
    records how many tokens merging saved, and a shared-prefix recipe with a batch of 2 is
    refused at validation."""
    recipe = load_config(project_root / "configs/train/smoke.yaml", TrainRecipe,
                         [f"data.dir={session_sft_data_dir}", "trainer.save_steps=100", "trainer.max_steps=3",
                          "trainer.per_device_train_batch_size=1", "data.shared_prefix=true",
                          "trainer.target_only_logits=true"])
    out = run_training(recipe, tmp_path / "sp")
    manifest = json.loads((out / "manifest.json").read_text())
    figures = manifest["shared_prefix"]
    assert figures["sequences"] < figures["samples"] == manifest["counts"]["train_samples"]
    assert 0 < figures["tokens_saved"] == figures["sample_tokens"] - figures["merged_tokens"]
    assert manifest["counts"]["train_sequences"] == figures["sequences"]
    metrics = json.loads((out / "metrics.json").read_text())
    assert len(metrics["losses"]) == 3 and all(x > 0 for x in metrics["losses"])
    with pytest.raises(ValueError, match="one merged sequence per batch"):
        load_config(project_root / "configs/train/smoke.yaml", TrainRecipe, ["data.shared_prefix=true"])
