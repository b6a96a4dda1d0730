"""The project's SFTTrainer: TRL's, plus a loss that projects to logits only at targets.

A decision sample is a long context (2-6K tokens here, 16-64K at GPU scale) and a short
target (a few hundred tokens). TRL's loss runs the LM head over every position whose next
token is a label, but on a device without Triton (the CPU) it scores *every* position and
masks afterwards: the 49K-vocabulary projection (and its recomputation in the backward)
over the whole context is a large share of a 135M model's step. With
``trainer.target_only_logits: true`` the model's own forward keeps the logits of the
target positions only (transformers' ``logits_to_keep`` with an index tensor), and the
loss is the same token-summed cross-entropy, normalised the way TRL's is. With
``data.shared_prefix: true`` a batch is one merged sequence of several decision points
(train/shared_prefix.py): its targets are scored at their own hidden states the same way.
On the target-only path the log also carries each decision kind's mean token NLL
(``loss_by_kind/<kind>``: emergency, tier2, nudged, task, ...), from the ``kind`` column
that ``train.data.tokenize_split`` keeps and :class:`KindsCollator` hands over.

Imported by ``train.sft`` inside ``run_training`` (TRL is a heavy import).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from trl import SFTTrainer

__all__ = ["KindsCollator", "ProjectSFTTrainer", "kind_losses", "target_positions", "token_weights"]

KIND_PREFIX = "loss_by_kind/"


def target_positions(labels: torch.Tensor) -> torch.Tensor:
    """Sequence positions whose *next* token is a label in any row of the batch.

    One index tensor for the batch (``logits_to_keep`` slices the same positions in every
    row): the union of the rows' target positions; a row's extra positions are masked by
    its own labels.
    """
    return (labels[:, 1:] != -100).any(dim=0).nonzero().flatten()


def token_weights(targets: torch.Tensor, decision_tokens: int, decision_weight: float,
                  summary_weight: float, copy: torch.Tensor | None = None, copy_weight: float = 1.0) -> torch.Tensor:
    """Per-token loss weights of ``targets`` (batch, positions; -100 = no label): the first
    ``decision_tokens`` labelled positions of each row weigh ``decision_weight`` (the tokens
    that decide compress vs task action vs decline: a short lead and the call's name), the
    labelled positions ``copy`` marks (tokens that copy an exact item from the context,
    :mod:`train.copy_tokens`) ``copy_weight``, the other labelled ones ``summary_weight``,
    the rest 0."""
    valid = targets != -100
    rank = valid.long().cumsum(dim=1)  # 1 at a row's first labelled position
    first = rank <= decision_tokens
    w = torch.where(first, decision_weight, summary_weight).to(torch.float32)
    if copy is not None:
        w = torch.where(copy.bool() & ~first, torch.as_tensor(copy_weight, dtype=torch.float32), w)
    return w * valid


def kind_losses(nll: torch.Tensor, targets: torch.Tensor, kinds: list[str],
                segments: torch.Tensor | None = None) -> dict[str, float]:
    """Mean token NLL per decision kind. ``nll`` and ``targets`` are (rows, positions); row r
    is sample ``kinds[r]``, unless ``segments`` (same shape) says which sample each position
    belongs to (a padding-free row holds several samples back to back)."""
    valid = targets != -100
    owner = segments if segments is not None else torch.arange(targets.size(0)).unsqueeze(1).expand_as(targets)
    sums: dict[str, list[float]] = {}
    for k, kind in enumerate(kinds):
        part = valid & (owner == k)
        n = int(part.sum())
        if n and kind:
            acc = sums.setdefault(kind, [0.0, 0])
            acc[0] += float(nll[part].sum())
            acc[1] += n
    return {kind: total / n for kind, (total, n) in sums.items()}


class KindsCollator:
    """Takes each feature's ``kind`` (and ``copy_mask``, where the data has one) off before
    the inner collator runs and hands them over beside the batch: ``batch["kinds"]`` (a list,
    one per sample) and ``batch["copy_mask"]`` (a tensor shaped like ``input_ids``: each
    sample's mask right-padded with 0, or the samples' masks back to back in a padding-free
    row, as TRL lays out the ids). The trainer pops both before the model sees the batch."""

    SIDE = ("kind", "copy_mask")

    def __init__(self, inner):
        self.inner = inner

    def __call__(self, features):
        if not features or not any(k in features[0] for k in self.SIDE):
            return self.inner(features)
        batch = self.inner([{k: v for k, v in f.items() if k not in self.SIDE} for f in features])
        if "kind" in features[0]:
            batch["kinds"] = [str(f.get("kind") or "") for f in features]
        if "copy_mask" in features[0]:
            batch["copy_mask"] = _lay_out([list(f["copy_mask"]) for f in features], batch["input_ids"])
        return batch


def _lay_out(masks: list[list[int]], input_ids: torch.Tensor) -> torch.Tensor:
    """Per-sample masks laid out like the collated ``input_ids``."""
    rows = [sum(masks, [])] if input_ids.size(0) != len(masks) else masks  # padding-free: one row
    out = torch.zeros(input_ids.shape, dtype=torch.bool)
    for r, m in enumerate(rows):
        n = min(len(m), input_ids.size(1))
        out[r, :n] = torch.as_tensor(m[:n], dtype=torch.bool)
    return out


class ProjectSFTTrainer(SFTTrainer):
    def __init__(self, *args, target_only_logits: bool = False, shared_prefix: bool = False,
                 decision_tokens: int = 0, decision_weight: float = 1.0, summary_weight: float = 1.0,
                 copy_weight: float = 1.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.target_only_logits = target_only_logits
        self.shared_prefix = shared_prefix
        self.decision_tokens = int(decision_tokens)
        self.decision_weight = float(decision_weight)
        self.summary_weight = float(summary_weight)
        self.copy_weight = float(copy_weight)
        if (self.decision_tokens or self.copy_weight != 1.0) and (shared_prefix or not target_only_logits):
            raise ValueError("trainer.decision_tokens and copy_weight weigh the target-only loss: they need "
                             "target_only_logits and no data.shared_prefix")
        self._total_target_tokens = 0
        if (target_only_logits or shared_prefix) and (
                self.compute_loss_func is not None or self.label_smoother is not None
                or self.args.loss_type != "nll" or self.aux_loss_enabled):
            raise ValueError("trainer.target_only_logits and data.shared_prefix compute the plain token NLL; they do "
                             "not combine with a custom loss, label smoothing, another loss_type or an MoE aux loss")

    def _set_signature_columns_if_needed(self):
        super()._set_signature_columns_if_needed()
        for side in KindsCollator.SIDE:  # kept for KindsCollator (the per-kind loss, the copy term)
            if side not in self._signature_columns:
                self._signature_columns = [*self._signature_columns, side]

    def create_accelerator_and_postprocess(self) -> None:
        super().create_accelerator_and_postprocess()
        from .fsdp import shard_on_cpu

        # FSDP over CPU processes (configs/accelerate/fsdp2_cpu.yaml): accelerate dropped the
        # FSDP settings on CPU; switch the state before anything is prepared.
        if shard_on_cpu(self.accelerator):
            self.is_fsdp_enabled = True

    def save_model(self, output_dir=None, _internal_call=False):
        # Under FSDP the Trainer writes no adapter (checkpoints and final/ alike): train/fsdp.py.
        if not self.is_fsdp_enabled:
            return super().save_model(output_dir, _internal_call=_internal_call)
        from .fsdp import save_sharded_adapter

        save_sharded_adapter(self, output_dir or self.args.output_dir)

    def _save_rng_state(self, output_dir):
        # Every process writes its own rng_state_<rank>.pth; only then may the main process
        # write trainer_state.json, the file that marks a checkpoint complete. Without this
        # wait a kill right after it (tests/train/test_fsdp_cpu.py does that) could leave
        # another rank's file cut short, and every --resume of that rank then failed loading it.
        super()._save_rng_state(output_dir)
        self.accelerator.wait_for_everyone()

    def _load_from_checkpoint(self, resume_from_checkpoint, model=None):
        super()._load_from_checkpoint(resume_from_checkpoint, model)
        if self.is_fsdp_enabled:  # its sharded model state holds no adapter: train/fsdp.py
            from .fsdp import load_sharded_adapter

            load_sharded_adapter(model if model is not None else self.model, resume_from_checkpoint)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        kinds = inputs.pop("kinds", None)  # KindsCollator's: for the log only, never the model's
        copy = inputs.pop("copy_mask", None)  # KindsCollator's: the copy term's tokens
        labels = inputs["labels"]
        if self.model.training:
            # Target tokens trained on so far (``num_target_tokens`` beside TRL's ``num_tokens``):
            # the figure that training throughput is measured in. A merged (shared-prefix)
            # batch carries its targets as labels already; otherwise a label row is unshifted.
            n = labels.numel() if self.shared_prefix else (labels[:, 1:] != -100).sum()
            self._total_target_tokens += self.accelerator.gather_for_metrics(torch.as_tensor(n)).sum().item()
            self._metrics["train"]["num_target_tokens"] = [self._total_target_tokens]
        if self.shared_prefix:
            return self._merged_loss(model, inputs, return_outputs, num_items_in_batch)
        # The logits for compute_metrics (return_outputs) are the full ones: TRL's path.
        if not self.target_only_logits or return_outputs:
            return super().compute_loss(model, inputs, return_outputs=return_outputs,
                                        num_items_in_batch=num_items_in_batch)
        mode = "train" if self.model.training else "eval"
        keep = target_positions(labels)
        model_inputs = {k: v for k, v in inputs.items() if k != "labels"}
        model_inputs["use_cache"] = False
        logits = model(**model_inputs, logits_to_keep=keep).logits.float()  # (batch, targets, vocab)
        targets = labels[:, 1:][:, keep]
        if self.decision_tokens or self.copy_weight != 1.0:
            copy_t = copy[:, 1:][:, keep].to(targets.device) if copy is not None else None
            loss = self._weighted_nll(logits, targets, num_items_in_batch, mode, copy_t)
        else:
            loss = self._nll(logits, targets, num_items_in_batch)
        if "attention_mask" in inputs:
            seen = inputs["attention_mask"].sum()
        else:  # a padding-free batch is one row without one
            seen = torch.tensor(inputs["input_ids"].size(1), device=inputs["input_ids"].device)
        logp = self._record_metrics(mode, logits.detach(), targets, seen)
        if kinds:
            self._record_kind_losses(mode, logp, targets, kinds, inputs, keep)
        return loss

    def _record_kind_losses(self, mode, logp, targets, kinds, inputs, keep):
        """``loss_by_kind/<kind>``: this batch's mean token NLL of each kind it holds (a kind
        absent from every batch of a logging window is absent from that log line), from the
        log-probabilities :meth:`_record_metrics` computed already."""
        segments = None
        if targets.size(0) != len(kinds):  # padding-free: one row, samples split where positions restart
            pos = inputs.get("position_ids")
            if pos is None or pos.size(0) != 1:
                return
            segments = ((pos[0] == 0).long().cumsum(0) - 1)[1:][keep].unsqueeze(0)
        nll = -logp.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)  # -100 rows are masked below
        for kind, value in kind_losses(nll, targets, kinds, segments).items():
            self._metrics[mode][KIND_PREFIX + kind].append(value)

    def _merged_loss(self, model, inputs, return_outputs, num_items_in_batch):
        """The loss of one shared-prefix sequence (train/shared_prefix.py): the hidden states at
        ``loss_positions`` projected to logits, scored against their targets (``labels``)."""
        mode = "train" if self.model.training else "eval"
        targets = inputs["labels"]  # (1, targets)
        model_inputs = {k: inputs[k] for k in ("input_ids", "position_ids", "attention_mask", "prefix_blocks")
                        if k in inputs}
        if "prefix_blocks" in inputs:
            from .shared_prefix import ATTENTION

            impl = getattr(self.accelerator.unwrap_model(model).config, "_attn_implementation", None)
            if impl != ATTENTION:  # sdpa would ignore the blocks and attend across samples
                raise RuntimeError(f"a shared-prefix batch needs the model loaded with attn_implementation="
                                   f"{ATTENTION!r} (train.shared_prefix.register_attention), not {impl!r}")
        logits = model(**model_inputs, use_cache=False, logits_to_keep=inputs["loss_positions"]).logits.float()
        loss = self._nll(logits, targets, num_items_in_batch)
        seen = torch.tensor(inputs["input_ids"].size(1), device=inputs["input_ids"].device)
        self._record_metrics(mode, logits.detach(), targets, seen)
        return (loss, {"logits": logits}) if return_outputs else loss

    def _nll(self, logits, targets, num_items_in_batch):
        nll_sum = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1),
                                  ignore_index=-100, reduction="sum")
        # As TRL: the token sum over the tokens of the whole optimizer step when the Trainer
        # counted them (gradient accumulation), else over this batch's.
        denom = (targets != -100).sum() if num_items_in_batch is None else num_items_in_batch
        loss = nll_sum / torch.as_tensor(denom).clamp(min=1)
        if self.args.average_tokens_across_devices and num_items_in_batch is not None:
            loss = loss * (self.accelerator.num_processes // self.get_tp_size())
        return loss

    def _weighted_nll(self, logits, targets, num_items_in_batch, mode, copy=None):
        """The decision, copy and summary terms (``token_weights``) over the same denominator as
        ``_nll``: with every weight 1 it is ``_nll``. Each term's mean NLL is logged
        (``loss_decision``, ``loss_summary`` over the non-decision tokens, ``loss_copy`` over
        the copy tokens where the batch marks them) so the log shows which one training moves."""
        nll = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-100,
                              reduction="none").view_as(targets)
        w = token_weights(targets, self.decision_tokens, self.decision_weight, self.summary_weight,
                          copy, self.copy_weight)
        denom = (targets != -100).sum() if num_items_in_batch is None else num_items_in_batch
        loss = (nll * w).sum() / torch.as_tensor(denom).clamp(min=1)
        if self.args.average_tokens_across_devices and num_items_in_batch is not None:
            loss = loss * (self.accelerator.num_processes // self.get_tp_size())
        first = token_weights(targets, self.decision_tokens, 1.0, 0.0).bool()
        rest = (targets != -100) & ~first
        parts = [("loss_decision", first), ("loss_summary", rest)]
        if copy is not None:
            parts.append(("loss_copy", rest & copy.bool()))
        for name, part in parts:
            n = part.sum()
            self._metrics[mode][name].append((nll.detach()[part].sum() / n).item() if n > 0 else 0.0)
        return loss

    def _record_metrics(self, mode, logits, targets, seen):
        """The per-batch figures TRL logs (entropy, mean_token_accuracy, num_tokens),
        computed from the kept logits only; ``seen`` is the tokens the model processed.
        Returns the log-probabilities (for the per-kind loss)."""
        valid = targets != -100
        logp = logits.log_softmax(-1)
        entropy = -(logp.exp() * logp).sum(-1)
        correct = (logits.argmax(-1) == targets) & valid
        gather = self.accelerator.gather_for_metrics
        n_valid = gather(valid.sum()).sum()
        ent_sum = gather((entropy * valid).sum()).sum()
        n_correct = gather(correct.sum()).sum()
        self._metrics[mode]["entropy"].append((ent_sum / n_valid).item() if n_valid > 0 else 0.0)
        self._metrics[mode]["mean_token_accuracy"].append((n_correct / n_valid).item() if n_valid > 0 else 0.0)
        if mode == "train":
            self._total_train_tokens += gather(seen).sum().item() // self._tp_size
        self._metrics[mode]["num_tokens"] = [self._total_train_tokens]
        return logp
