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

Labels are TRL's (unshifted: ``labels[k]`` is the token at ``k`` when it is a target,
else -100). The target of sample position ``k`` is predicted by the hidden state at
``k - 1``; in a trie the token after a node is not the next merged token, so the loss is a
list of (hidden index, target token) pairs rather than a shifted label row.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["MergedSequence", "merge_samples"]


@dataclass
class MergedSequence:
    input_ids: torch.Tensor        # [N]
    position_ids: torch.Tensor     # [N] a token's position in its own sample
    attention_mask: torch.Tensor   # [N, N] bool, True where row may attend to column
    loss_positions: torch.Tensor   # [M] merged index of the hidden state that predicts ...
    loss_targets: torch.Tensor     # [M] ... this target token
    sample_tokens: int             # tokens of the separate samples, summed
    tokens_saved: int              # sample_tokens - N


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
        loss_targets=torch.tensor(loss_targets, dtype=torch.long), sample_tokens=total, tokens_saved=total - n)
