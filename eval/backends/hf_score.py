"""Teacher-forced scoring of candidate replies on the hf backend (no generation).

``score_replies(backend, request, replies, first_tokens)`` gives, for each candidate assistant
message, the log-probability of each of its first ``first_tokens`` tokens after the request's
prompt. It costs one prefill of the prompt (none of it when the backend's KV cache already
holds the prompt, as it does right after ``complete`` on the same request: only the last
prompt token is run again) and one batched forward pass over all candidates, which share the
prompt's cache (``batch_repeat_interleave``). Candidates are right-padded; a causal model's
logits at a real position never see the padding after it, so no mask is needed. Afterwards
the cache is cut back to the prompt, batch 1, and kept for the backend's next call.

A candidate's tokens are the chat template's rendering of the conversation with the
candidate appended, less the rendering of the prompt (the template's generation prompt
``<|im_start|>assistant\\n`` is where the two part), so a tool call is scored in the very text
form training used and generation parses.
"""

from __future__ import annotations

from typing import Any

from plumbing.chat_backend import BackendError, Request

__all__ = ["continuation_ids", "score_replies"]


def continuation_ids(backend: Any, request: Request, reply: dict[str, Any], *,
                     prompt: str | None = None) -> list[int]:
    """Token ids of ``reply`` as the assistant turn that follows ``request``'s prompt
    (its end-of-turn token included); ``prompt`` is ``backend.render(request)`` when the
    caller has it already (one rendering for all the candidates of a request)."""
    from plumbing.tool_format import normalise_tool_calls

    prompt = backend.render(request) if prompt is None else prompt
    full = backend.tokenizer.apply_chat_template(
        normalise_tool_calls([*request.messages, reply]), tools=request.tools or None,
        chat_template=backend.template, tokenize=False, add_generation_prompt=False)
    if not full.startswith(prompt):
        raise BackendError("the chat template renders a reply that does not extend the prompt; cannot score it")
    ids = backend.tokenizer(full[len(prompt):], add_special_tokens=False)["input_ids"]
    if not ids:
        raise BackendError("a candidate reply renders to no tokens")
    return ids


def score_replies(backend: Any, request: Request, replies: list[dict[str, Any]],
                  first_tokens: int) -> list[list[float]]:
    """Per reply, the log-probabilities (nats) of its first ``first_tokens`` tokens."""
    import torch
    from transformers.cache_utils import DynamicCache

    if not replies:
        return []
    k = max(1, int(first_tokens))
    ids = backend.prompt_ids(request)  # as generation tokenises it: content is never a control token
    prompt = backend.render(request)
    conts = [continuation_ids(backend, request, r, prompt=prompt)[:k] for r in replies]
    flag = request.use_adapter
    model = backend.model
    with torch.no_grad(), backend._adapter_ctx(flag):
        reused, cache = backend._reusable(flag, ids) if backend.reuse_prefix_cache else (0, None)
        if cache is None:
            reused, cache = 0, DynamicCache(config=model.config)
        try:
            # logits of the last prompt position only: all of them would be prompt x vocabulary floats
            out = model(input_ids=torch.tensor([ids[reused:]]), past_key_values=cache, use_cache=True,
                        logits_to_keep=1)
            first = torch.log_softmax(out.logits[0, -1].float(), dim=-1)
            rest = None
            width = max(len(c) for c in conts) - 1
            if width > 0:
                cache.batch_repeat_interleave(len(conts))
                pad = backend.tokenizer.pad_token_id or 0
                inp = torch.tensor([c[:-1] + [pad] * (width - len(c) + 1) for c in conts])
                rest = torch.log_softmax(model(input_ids=inp, past_key_values=cache, use_cache=True).logits.float(),
                                         dim=-1)
        except (RuntimeError, MemoryError) as exc:
            backend._kv = None
            raise BackendError(f"scoring failed: {exc}") from exc
    scores = []
    for i, c in enumerate(conts):
        lps = [float(first[c[0]])]
        lps += [float(rest[i, j - 1, c[j]]) for j in range(1, len(c))]
        scores.append(lps)
    # Not counted in the backend's prefix_cache_hits/queries: those stay the generation calls' figure.
    if backend.reuse_prefix_cache:
        try:  # keep the prompt's cache for the next call (batch 1, prompt positions only)
            if width > 0:
                cache.batch_select_indices(torch.tensor([0]))
            excess = cache.get_seq_length() - len(ids)
            if excess > 0:
                cache.crop(-excess)
            backend._kv = (flag, ids, cache)
        except (RuntimeError, AttributeError, TypeError):
            backend._kv = None
    return scores
