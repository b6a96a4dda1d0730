"""Shared-prefix training: several decision points of one session in one sequence.

Consecutive decision points of a session repeat most of their context. Merged into one
sequence along a token trie, the shared history is computed once; each token attends to
its own ancestors only (a per-token attention mask), so it sees exactly the context it has
in its own sample (an earlier decision's trailing nudge is hidden from a later one), at the
position it has there. A causal LM's hidden state at a token depends only on the tokens
before it and their positions, so every hidden state of the merged sequence equals the one
of the separate sample, and the loss over the listed (position, target) pairs is the sum of
the separate samples' token losses.

    merged = merge_samples([(ids_a, labels_a), (ids_b, labels_b)])
    logits = model(input_ids=merged.input_ids[None], position_ids=merged.position_ids[None],
                   attention_mask=merged.attention_mask[None, None],
                   logits_to_keep=merged.loss_positions).logits

Training (``data.shared_prefix: true``, train/sft.py) does not build that N x N mask: sdpa's
masked kernel costs ~2.2x its causal one per token pair on the CPU, which ate the saving.
:func:`merge_split` groups a tokenised split by session (:func:`group_samples`), the
:class:`SharedPrefixCollator` merges a group per batch, and :func:`prefix_attention`
(registered as ``attn_implementation`` :data:`ATTENTION`) attends block by block: a
sample's own tokens against its gathered prefix path plus themselves, causally.

Labels are TRL's (unshifted: ``labels[k]`` is the token at ``k`` when it is a target,
else -100). The target of sample position ``k`` is predicted by the hidden state at
``k - 1``; in a trie the token after a node is not the next merged token, so the loss is a
list of (hidden index, target token) pairs rather than a shifted label row.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

__all__ = ["ATTENTION", "MergedSequence", "SharedPrefixCollator", "group_samples", "merge_samples", "merge_split",
           "prefix_attention", "register_attention"]

# The attention implementation a shared-prefix run loads the model with (register_attention).
ATTENTION = "dtw_shared_prefix"


@dataclass
class MergedSequence:
    input_ids: torch.Tensor        # [N]
    position_ids: torch.Tensor     # [N] a token's position in its own sample
    attention_mask: torch.Tensor   # [N, N] bool, True where row may attend to column
    loss_positions: torch.Tensor   # [M] merged index of the hidden state that predicts ...
    loss_targets: torch.Tensor     # [M] ... this target token
    sample_tokens: int             # tokens of the separate samples, summed
    tokens_saved: int              # sample_tokens - N
    causal: bool = False           # the mask is plain causal (each sample extends the last): no mask needed
    blocks: tuple = ()             # (first merged index, count, prefix path) per sample: the mask, sparse


def merge_samples(samples: list[tuple[list[int], list[int]]]) -> MergedSequence:
    """Merge ``(input_ids, labels)`` samples along their common token prefixes."""
    ids: list[int] = []
    pos: list[int] = []
    children: dict[tuple[int, int], int] = {}  # (parent merged index, token) -> merged index
    paths: list[list[int]] = []
    blocks: list[tuple[int, int, list[int]]] = []  # (first new index, count, shared prefix path)
    for input_ids, labels in samples:
        if len(input_ids) != len(labels):
            raise ValueError("input_ids and labels differ in length")
        path: list[int] = []
        parent = -1
        for tok in input_ids:
            node = children.get((parent, tok))
            if node is None:
                break
            path.append(node)
            parent = node
        shared = len(path)
        first = len(ids)
        for k in range(shared, len(input_ids)):
            # Once the sample leaves the trie it never re-enters it: its remaining tokens
            # are new and contiguous.
            node = len(ids)
            children[(parent, input_ids[k])] = node
            parent = node
            ids.append(input_ids[k])
            pos.append(k)
            path.append(node)
        paths.append(path)
        blocks.append((first, len(input_ids) - shared, path[:shared]))

    n = len(ids)
    # Each block attends to every earlier merged token (a chain: every sample extends the
    # sequence so far, as ordinary turns without a trailing nudge do): plain causal attention.
    causal = all(prefix == list(range(first)) for first, _count, prefix in blocks if _count)
    mask = torch.zeros((n, n), dtype=torch.bool)
    for first, count, prefix in blocks:
        if count == 0:
            continue
        rows = slice(first, first + count)
        if prefix:
            mask[rows, torch.tensor(prefix)] = True
        mask[rows, rows] = torch.ones((count, count), dtype=torch.bool).tril()

    loss_positions: list[int] = []
    loss_targets: list[int] = []
    for (input_ids, labels), path in zip(samples, paths, strict=True):
        for k in range(1, len(input_ids)):
            if labels[k] != -100:
                loss_positions.append(path[k - 1])
                loss_targets.append(labels[k])
    total = sum(len(s[0]) for s in samples)
    return MergedSequence(
        input_ids=torch.tensor(ids, dtype=torch.long), position_ids=torch.tensor(pos, dtype=torch.long),
        attention_mask=mask, loss_positions=torch.tensor(loss_positions, dtype=torch.long),
        loss_targets=torch.tensor(loss_targets, dtype=torch.long), sample_tokens=total, tokens_saved=total - n,
        causal=causal, blocks=tuple(blocks))


def _shared_length(trie: dict[tuple[int, int], int], input_ids: list[int]) -> int:
    """How many leading tokens of ``input_ids`` the trie already holds."""
    parent, k = -1, 0
    for tok in input_ids:
        node = trie.get((parent, tok))
        if node is None:
            break
        parent, k = node, k + 1
    return k


def _insert(trie: dict[tuple[int, int], int], input_ids: list[int], size: int) -> int:
    """Add ``input_ids`` to the trie (merged indices from ``size``); return the new size."""
    parent = -1
    for tok in input_ids:
        node = trie.get((parent, tok))
        if node is None:
            node = size
            trie[(parent, tok)] = node
            size += 1
        parent = node
    return size


def group_samples(keys: list[str], orders: list[int], lengths_ids: list[list[int]],
                  max_length: int) -> list[list[int]]:
    """Indices of the samples that train together: samples of one key (a session under one
    serving profile), in ``orders`` order, added to a group while its merged sequence stays
    within ``max_length`` tokens. A sample never joins a group of another key."""
    by_key: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        by_key.setdefault(key, []).append(i)
    groups: list[list[int]] = []
    for key in sorted(by_key):
        members = sorted(by_key[key], key=lambda i: (orders[i], i))
        trie: dict[tuple[int, int], int] = {}
        size, current = 0, []
        for i in members:
            ids = lengths_ids[i]
            new = len(ids) - _shared_length(trie, ids)
            if current and size + new > max_length:
                groups.append(current)
                trie, size, current = {}, 0, []
            size = _insert(trie, ids, size)
            current.append(i)
        if current:
            groups.append(current)
    return groups


def merge_split(ds, keys: list[str], orders: list[int], max_length: int):
    """A tokenised split (``input_ids`` + ``assistant_masks`` rows) as one row per group of
    :func:`group_samples`: the samples' ``input_ids`` and ``labels`` back to back with their
    ``sample_lengths``, for :class:`SharedPrefixCollator`. Returns (dataset, figures)."""
    from datasets import Dataset

    ids = ds["input_ids"]
    masks = ds["assistant_masks"]
    groups = group_samples(keys, orders, ids, max_length)
    rows: dict[str, list] = {"input_ids": [], "labels": [], "sample_lengths": []}
    merged_tokens = 0
    for g in groups:
        flat, labels = [], []
        for i in g:
            flat.extend(ids[i])
            labels.extend(t if m else -100 for t, m in zip(ids[i], masks[i], strict=True))
        rows["input_ids"].append(flat)
        rows["labels"].append(labels)
        rows["sample_lengths"].append([len(ids[i]) for i in g])
        trie: dict[tuple[int, int], int] = {}
        size = 0
        for i in g:
            size = _insert(trie, ids[i], size)
        merged_tokens += size
    sample_tokens = sum(len(x) for x in ids)
    figures = {"samples": len(ids), "sequences": len(groups), "sample_tokens": sample_tokens,
               "merged_tokens": merged_tokens, "tokens_saved": sample_tokens - merged_tokens,
               "max_samples_per_sequence": max((len(g) for g in groups), default=0)}
    return Dataset.from_dict(rows), figures


class SharedPrefixCollator:
    """One merged sequence per batch (``per_device_train_batch_size: 1``): the row's samples
    merged by :func:`merge_samples`. The batch holds ``input_ids``/``position_ids`` [1, N],
    ``prefix_blocks`` (per sample block: first merged index, token count, prefix path as an
    index tensor, for :func:`prefix_attention`), ``loss_positions`` [M] and the targets as
    ``labels``/``shift_labels`` [1, M] (the Trainer counts the step's target tokens from
    ``shift_labels``). ``dense_mask=True`` gives the [1, 1, N, N] boolean ``attention_mask``
    instead of the blocks (plain sdpa; the reference the blocks are tested against)."""

    def __init__(self, dense_mask: bool = False):
        self.dense_mask = dense_mask

    def __call__(self, features: list[dict]) -> dict[str, torch.Tensor]:
        if len(features) != 1:
            raise ValueError("data.shared_prefix trains one merged sequence per batch: set "
                             "trainer.per_device_train_batch_size (and per_device_eval_batch_size) to 1")
        row = features[0]
        samples, start = [], 0
        for n in row["sample_lengths"]:
            samples.append((list(row["input_ids"][start:start + n]), list(row["labels"][start:start + n])))
            start += n
        m = merge_samples(samples)
        batch = {"input_ids": m.input_ids[None], "position_ids": m.position_ids[None],
                 "loss_positions": m.loss_positions, "labels": m.loss_targets[None],
                 "shift_labels": m.loss_targets[None]}
        if self.dense_mask:
            if not m.causal:
                batch["attention_mask"] = m.attention_mask[None, None]
        else:
            batch["prefix_blocks"] = [(first, count, torch.tensor(prefix, dtype=torch.long))
                                      for first, count, prefix in m.blocks if count]
        return batch


def prefix_attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None,
                     prefix_blocks=None, **kwargs):
    """Attention over a merged sequence, block by block: a sample's own tokens attend to its
    prefix path (gathered) and causally to each other, so no N x N mask is built and the
    first block (no prefix) runs the plain causal kernel. Without ``prefix_blocks`` it is
    transformers' sdpa attention. Shapes as transformers passes them: query [1, H, N, d],
    key/value [1, KV, N, d]; returns ([1, N, H, d], None)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if prefix_blocks is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, **kwargs)
    if query.shape[0] != 1:
        raise ValueError("prefix_attention takes one merged sequence (batch size 1)")
    gqa = getattr(module, "num_key_value_groups", 1) > 1
    outs = []
    for first, count, prefix in prefix_blocks:
        q = query[:, :, first:first + count]
        k, v = key[:, :, first:first + count], value[:, :, first:first + count]
        n_prefix = int(prefix.numel())
        if n_prefix == 0:
            o = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, scale=scaling, is_causal=True,
                                               enable_gqa=gqa)
        else:
            prefix = prefix.to(key.device)
            k = torch.cat([key.index_select(2, prefix), k], dim=2)
            v = torch.cat([value.index_select(2, prefix), v], dim=2)
            # Causal aligned to the bottom right: own token i sees the prefix and own tokens <= i.
            cols = torch.arange(n_prefix + count, device=query.device)
            mask = cols[None, :] <= (n_prefix + torch.arange(count, device=query.device))[:, None]
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout, scale=scaling,
                                               enable_gqa=gqa)
        outs.append(o)
    out = torch.cat(outs, dim=2)
    if out.shape[2] != query.shape[2]:
        raise ValueError(f"prefix_blocks cover {out.shape[2]} of the sequence's {query.shape[2]} tokens")
    return out.transpose(1, 2).contiguous(), None


def register_attention() -> str:
    """Register :func:`prefix_attention` with transformers (attention and, for the plain
    path, sdpa's mask function) under :data:`ATTENTION`; return the name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(ATTENTION, prefix_attention)
    AttentionMaskInterface.register(ATTENTION, sdpa_mask)
    return ATTENTION
