"""A KV cache for CPU decoding that does not copy the whole history at every token.

transformers' ``DynamicLayer`` appends a new token's keys and values with ``torch.cat``, which
copies every cached position of every layer once per generated token. At a 4K-token prompt
on 2 CPU cores that copy is most of a decode step (~100 of ~160 ms for SmolLM2-135M,
``benchmarks/hf_decode.py``). ``GrowingLayer`` keeps keys and values in a buffer with spare
room, doubled when it fills, and hands attention a view of the filled part: a token costs a
write of its own keys and values, and the history is copied only when the buffer grows
(O(log n) times). Outputs are the same as with ``DynamicLayer`` (tests/plumbing/test_kv_cache.py).

``growing_cache(config)`` is a ``DynamicCache`` whose full-attention layers are
``GrowingLayer``; sliding-window and other special layers are left as transformers made them.
"""

from __future__ import annotations

from typing import Any

from transformers.cache_utils import DynamicCache, DynamicLayer

__all__ = ["GrowingLayer", "growing_cache"]

_MIN_ROOM = 256  # positions of spare room allocated at least, so short decodes never regrow


class GrowingLayer(DynamicLayer):
    """A ``DynamicLayer`` whose keys and values are views into a buffer with spare room."""

    def lazy_initialization(self, key_states, value_states) -> None:
        super().lazy_initialization(key_states, value_states)
        self._kbuf = self._vbuf = None
        self._len = 0

    def _view(self) -> None:
        self.keys = self._kbuf[:, :, : self._len, :]
        self.values = self._vbuf[:, :, : self._len, :]

    def _grow(self, key_states, value_states, needed: int) -> None:
        import torch

        room = max(needed * 2, needed + _MIN_ROOM)
        shape = (*key_states.shape[:2], room, key_states.shape[-1])
        vshape = (*value_states.shape[:2], room, value_states.shape[-1])
        kbuf = torch.empty(shape, dtype=key_states.dtype, device=key_states.device)
        vbuf = torch.empty(vshape, dtype=value_states.dtype, device=value_states.device)
        if self._len:
            kbuf[:, :, : self._len] = self._kbuf[:, :, : self._len]
            vbuf[:, :, : self._len] = self._vbuf[:, :, : self._len]
        self._kbuf, self._vbuf = kbuf, vbuf

    def update(self, key_states, value_states, *args: Any, **kwargs: Any):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        new = key_states.shape[-2]
        needed = self._len + new
        if self._kbuf is None or needed > self._kbuf.shape[-2] or self._kbuf.shape[0] != key_states.shape[0]:
            self._grow(key_states, value_states, needed)
        self._kbuf[:, :, self._len:needed] = key_states
        self._vbuf[:, :, self._len:needed] = value_states
        self._len = needed
        self._view()
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self._len if self.is_initialized else 0

    def crop(self, tokens_to_remove: int) -> None:
        """Drop the last ``-tokens_to_remove`` positions (a negative count, as transformers 5 asks)."""
        if not self.is_initialized or tokens_to_remove == 0:
            return
        if tokens_to_remove > 0:  # legacy form: the length to keep
            keep = min(tokens_to_remove, self._len)
        else:
            keep = max(0, self._len + tokens_to_remove)
        self._len = keep
        self._view()

    def reset(self) -> None:
        self._kbuf = self._vbuf = None
        self._len = 0
        super().reset()

    def _rebuffer(self) -> None:
        """After an operation that replaced ``keys``/``values`` outright, adopt them as the buffer."""
        self._kbuf, self._vbuf = self.keys, self.values
        self._len = self.keys.shape[-2]

    def batch_repeat_interleave(self, repeats: int) -> None:
        super().batch_repeat_interleave(repeats)
        if self.is_initialized:
            self._rebuffer()

    def batch_select_indices(self, indices) -> None:
        super().batch_select_indices(indices)
        if self.is_initialized:
            self._rebuffer()

    def reorder_cache(self, beam_idx) -> None:
        super().reorder_cache(beam_idx)
        if self.is_initialized:
            self._rebuffer()


def growing_cache(config) -> DynamicCache:
    """A ``DynamicCache`` for ``config`` with ``GrowingLayer`` in place of each plain ``DynamicLayer``."""
    cache = DynamicCache(config=config)
    cache.layers = [GrowingLayer() if type(layer) is DynamicLayer else layer for layer in cache.layers]
    return cache
