"""Emergency truncation of large tool outputs (spec §4.6).

Runs only at usage >= ``truncate.threshold``. The largest old tool results are cut to their
head and tail until the estimate falls to 90 % of the threshold. Only the view changes; the
state is not touched.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctrine.kernel.config import KernelConfig
from doctrine.kernel.messages import Message
from plumbing.tokens import CountTokens, default_count_tokens, js_len, js_slice

KEEP_CHARS = 2000
MIN_TOKENS = 1000
MARKER = "...[truncated for context space]"


@dataclass
class Truncation:
    id: str
    original_tokens: int
    new_tokens: int


def truncated_text(text: str, original_tokens: int) -> str:
    return (js_slice(text, 0, KEEP_CHARS)
            + f"\n\n{MARKER} — original ~{original_tokens} tokens]...\n\n"
            + js_slice(text, js_len(text) - KEEP_CHARS))


def emergency_truncate(view: list[Message], config: KernelConfig, token_count: int,
                       count_tokens: CountTokens = default_count_tokens,
                       ) -> tuple[list[Message], list[Truncation]]:
    """The view with the largest old tool results cut down, and what was cut."""
    limit = config.model_context_limit
    threshold = config.truncate.threshold
    if limit <= 0 or token_count / limit < threshold:
        return view, []
    recent_start = max(0, len(view) - config.preserve_recent_messages)
    cands: list[tuple[int, int]] = []  # (tokens, index)
    for i, m in enumerate(view[:recent_start]):
        if m.content_type != "tool-result" or not m.text or MARKER in m.text:
            continue
        t = count_tokens(m.text)
        if t >= MIN_TOKENS:
            cands.append((t, i))
    if not cands:
        return view, []
    cands.sort(key=lambda c: (-c[0], c[1]))
    target = 0.9 * threshold * limit
    out = list(view)
    saved = 0
    done: list[Truncation] = []
    for tokens, i in cands:
        if token_count - saved <= target:
            break
        m = out[i]
        if js_len(m.text) <= 2 * KEEP_CHARS:
            continue
        new = truncated_text(m.text, tokens)
        new_tokens = count_tokens(new)
        out[i] = m.with_text(new)
        saved += tokens - new_tokens
        done.append(Truncation(m.id, tokens, new_tokens))
    return out, done
