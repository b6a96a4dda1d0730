"""Token counters (spec §9).

The kernel counts tokens through an injectable ``count_tokens(text) -> int``. The default
is acp-kernel's estimator: CJK characters count one each, everything else a quarter,
rounded up, with lengths measured the JavaScript way (UTF-16 code units).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

CountTokens = Callable[[str], int]

# Hiragana/katakana, CJK unified ideographs, Hangul syllables: all in the BMP, so each is
# one UTF-16 unit and one Python character.
_CJK = re.compile("[\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af]")


def js_round(x: float) -> int:
    """JavaScript ``Math.round``: halves go up (towards +infinity), unlike Python's round."""
    return math.floor(x + 0.5)


def js_len(s: str) -> int:
    """Length in UTF-16 code units, as JavaScript's ``String.length`` counts it."""
    if s.isascii():
        return len(s)
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def js_slice(s: str, start: int, end: int | None = None) -> str:
    """``s.slice(start, end)`` with UTF-16 indices (may split a surrogate pair, as JS does)."""
    if s.isascii():
        return s[start:end]
    b = s.encode("utf-16-le", "surrogatepass")
    n = len(b) // 2
    lo = max(0, n + start) if start < 0 else min(start, n)
    hi = n if end is None else (max(0, n + end) if end < 0 else min(end, n))
    return b[2 * lo: 2 * max(lo, hi)].decode("utf-16-le", "surrogatepass")


# JavaScript's String.prototype.trim() set: WhiteSpace and LineTerminator code points.
_JS_SPACE = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"


def js_trim(s: str) -> str:
    """``s.trim()`` as JavaScript does it (Python's ``strip`` also drops \\x1c-\\x1f and \\x85)."""
    return s.strip(_JS_SPACE)


@lru_cache(maxsize=1 << 16)
def default_count_tokens(text: str) -> int:
    """acp-kernel's ``defaultCountTokens``: CJK count + ceil((len - CJK count) / 4)."""
    if not text:
        return 0
    cjk = 0 if text.isascii() else len(_CJK.findall(text))
    return cjk + math.ceil((js_len(text) - cjk) / 4)


def estimate_fast(text: str) -> int:
    """``estimateTokensFast``: ceil(len / 4) in UTF-16 units."""
    return math.ceil(js_len(text) / 4) if text else 0


class TokenizerCounter:
    """Counts tokens with a real tokenizer: any object with ``encode`` or ``__call__``.

    ``TokenizerCounter.from_pretrained(name)`` loads a transformers tokenizer lazily, so
    importing this module never imports transformers.
    """

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer

    @classmethod
    def from_pretrained(cls, name_or_path: str, **kwargs: Any) -> TokenizerCounter:
        from transformers import AutoTokenizer  # heavy: imported only here

        return cls(AutoTokenizer.from_pretrained(name_or_path, **kwargs))

    def __call__(self, text: str) -> int:
        if not text:
            return 0
        tok = self.tokenizer
        if hasattr(tok, "encode"):
            try:
                ids = tok.encode(text, add_special_tokens=False)
            except TypeError:  # encoders that take no keyword arguments (tiktoken-like)
                ids = tok.encode(text)
        else:
            ids = tok(text)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        if hasattr(ids, "ids"):  # tokenizers.Encoding
            ids = ids.ids
        return len(ids)


def memo_counter(count: CountTokens | None) -> CountTokens:
    """A per-call memo around ``count`` (the default counter is already cached)."""
    if count is None or count is default_count_tokens:
        return default_count_tokens
    cache: dict[str, int] = {}

    def counted(text: str) -> int:
        v = cache.get(text)
        if v is None:
            v = int(count(text))
            cache[text] = v
        return v

    return counted
