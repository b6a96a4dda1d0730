"""Search over compressed blocks and historical messages (spec §10).

Two searches, as the two hosts use them:

* ``search_active_blocks``: the legacy ``core.search`` of the proxy: substring hits in the
  topic and summary of *active* blocks (§10.1);
* ``search_context``: Pi's ``searchBlocks``: every block (active or not) plus optional
  message documents, ranked by a hybrid of BM25 and a character-bigram fuzzy score,
  weighted by role (§10.2).

CJK text has no word segmenter here (the kernel uses ``Intl.Segmenter``); every CJK run
takes the kernel's own fallback, overlapping bigrams plus single characters. Rankings on
CJK text can therefore differ from the kernel's where the segmenter would find words.
``render_search_result`` formats results as the Pi or proxy ``search_context`` tool does.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from functools import lru_cache

from doctrine.kernel.messages import Message
from doctrine.kernel.state import Block, CompressionState
from plumbing.tokens import default_count_tokens

K1 = 1.2
B = 0.75
W_BM25 = 0.7
W_FUZZY = 0.3
SCORE_FLOOR = 1e-9
ROLE_WEIGHTS = {"user": 1.5, "assistant": 1.0, "tool": 0.6, "block": 1.0}
DEFAULT_LIMIT = 10
PREVIEW_LENGTH = 200
MIN_SCORE = 0.01
TITLE_MAX = 50

# The search tokenizer's CJK class is wider than the token counter's (it adds extension A
# and the compatibility ideographs).
_CJK_CLASS = "\u3400-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"
_CJK = re.compile(f"[{_CJK_CLASS}]")
_CJK_RUN = re.compile(f"[{_CJK_CLASS}]+")
_LATIN_WORD = re.compile(r"[a-z][a-z0-9_]*[a-z0-9]|[a-z0-9]")
_FUZZY_SPLIT = re.compile(r"[\s,]+")


# ---------------------------------------------------------------------- tokenizer
@lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """The kernel's light suffix stripper (spec §10.2); words of 3 chars or less are kept."""
    w = word
    if len(w) <= 3:
        return w
    if w.endswith("ies"):
        w = w[:-3] + "y"
    elif w.endswith(("ses", "xes", "zes")):
        w = w[:-2]
    elif w.endswith(("ches", "shes")):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    # Each later rule sees the result of the earlier ones (they are not alternatives).
    if w.endswith("ing") and len(w) > 5:
        w = w[:-3]
    if w.endswith("ed") and len(w) > 4:
        w = w[:-2]
    if w.endswith("ation") and len(w) > 6:
        w = w[:-3]
    elif w.endswith("tion") and len(w) > 5:
        w = w[:-4] + "t"
    elif w.endswith("ion") and len(w) > 4:
        w = w[:-3]
    if w.endswith("ment") and len(w) > 6:
        w = w[:-4]
    if w.endswith("ness") and len(w) > 6:
        w = w[:-4]
    if w.endswith("ly") and len(w) > 4:
        w = w[:-2]
    return w


def _cjk_tokens(run: str) -> list[str]:
    # The kernel's fallback for text its segmenter finds no word in; used for every run.
    return [run[i:i + 2] for i in range(len(run) - 1)] + list(run)


def tokenize(text: str, *, use_stem: bool = True) -> list[str]:
    """Lowercase; Latin words of 2+ chars (stemmed), then CJK runs as bigrams + chars."""
    lower = text.lower()
    tokens = [stem(w) if use_stem else w for w in _LATIN_WORD.findall(lower) if len(w) >= 2]
    for run in _CJK_RUN.findall(lower):
        tokens.extend(_cjk_tokens(run))
    return tokens


def char_bigrams(text: str) -> list[str]:
    """Character bigrams with no whitespace in them."""
    return [a + b for a, b in zip(text, text[1:], strict=False) if not (a.isspace() or b.isspace())]


def _bigram_set(text: str) -> set[str]:
    # Split on whitespace first: no bigram spans it, and the pieces are cheap to pair up.
    return {w[i:i + 2] for w in text.split() for i in range(len(w) - 1)}


# ---------------------------------------------------------------------- documents
@dataclass
class SearchDoc:
    """One searchable unit: a block (topic + summary) or a historical message."""

    kind: str  # "block" | "message"
    ref: str  # block id, or the message's raw id
    text: str
    title: str
    tier: int
    block_id: str | None = None  # the block a message is folded into; None if visible
    role: str | None = None
    tokens: int | None = None
    preview_text: str | None = None  # what the preview is cut from (default: text)
    block: Block | None = None
    # Per-document features, computed on first use so repeated searches reuse them.
    _tf: Counter | None = field(default=None, init=False, repr=False, compare=False)
    _grams: set[str] | None = field(default=None, init=False, repr=False, compare=False)

    def term_freqs(self) -> Counter:
        if self._tf is None:
            self._tf = Counter(tokenize(self.text))
        return self._tf

    def bigrams(self) -> set[str]:
        if self._grams is None:
            self._grams = _bigram_set(self.text.lower())
        return self._grams


@dataclass
class SearchResult:
    kind: str
    ref: str
    block_id: str | None
    tier: int
    score: float
    title: str
    preview: str
    role: str | None = None
    tokens: int | None = None
    block: Block | None = None


def block_docs(state: CompressionState) -> list[SearchDoc]:
    """A document for every block, active or not (inactive ones still hold the history)."""
    docs = []
    for b in state.blocks:
        topic = b.topic or ""
        docs.append(SearchDoc(kind="block", ref=b.block_id, text=f"{topic} {b.summary}",
                              title=topic or b.block_id, tier=b.tier, block_id=b.block_id,
                              role=None, tokens=b.compressed_tokens,
                              preview_text=b.summary or topic, block=b))
    return docs


def build_message_docs(messages: Iterable[Message], state: CompressionState, *,
                 only_folded: bool = False,
                 count_tokens: Callable[[str], int] | None = None) -> list[SearchDoc]:
    """Documents for historical messages, each linked to the active block folding it.

    A message no active block covers is still visible (``block_id`` None). With
    ``only_folded`` those are left out. Messages without text are skipped.
    """
    count = count_tokens or default_count_tokens
    owner: dict[str, Block] = {}
    for b in state.blocks:
        if b.active:
            for mid in b.effective_message_ids:
                owner.setdefault(mid, b)
    docs = []
    for m in messages:
        if not m.text or m.id.startswith("acp_summary_"):
            continue
        b = owner.get(m.id)
        if b is None and only_folded:
            continue
        first_line = " ".join(m.text.split())
        title = f"{m.tool_name}: {first_line}" if m.tool_name else first_line
        docs.append(SearchDoc(kind="message", ref=m.id, text=m.text, title=title,
                              tier=b.tier if b else 0, block_id=b.block_id if b else None,
                              role=m.role, tokens=count(m.text), block=b))
    return docs


# ---------------------------------------------------------------------- scoring
def bm25_scores(docs: Sequence[SearchDoc], query: str) -> list[float]:
    """BM25 (k1 1.2, b 0.75) over stemmed tokens; repeated query terms count again."""
    tfs = [d.term_freqs() for d in docs]
    lens = [sum(tf.values()) for tf in tfs]
    n = len(docs)
    avgdl = (sum(lens) / n) if n else 0.0
    q_terms = tokenize(query)
    if not q_terms or n == 0:
        return [0.0] * n
    idf = {}
    for t in set(q_terms):
        df = sum(1 for tf in tfs if t in tf)
        idf[t] = math.log(1 + (n - df + 0.5) / (df + 0.5))
    scores = []
    for tf, dl in zip(tfs, lens, strict=True):
        s = 0.0
        for t in q_terms:
            f = tf.get(t, 0)
            if f:
                s += idf[t] * (f * (K1 + 1)) / (f + K1 * (1 - B + B * dl / (avgdl or 1)))
        scores.append(s)
    return scores


def fuzzy_scores(docs: Sequence[SearchDoc], query: str) -> list[float]:
    """Share of the query's character bigrams found in each document."""
    q_tokens = [t for t in _FUZZY_SPLIT.split(query.lower())
                if len(t) >= 4 or (len(t) >= 2 and _CJK.search(t))]
    q_grams = {g for t in q_tokens for g in char_bigrams(t)}
    if not q_grams:
        return [0.0] * len(docs)
    out = []
    for d in docs:
        grams = d.bigrams()
        out.append(sum(1 for g in q_grams if g in grams) / len(q_grams))
    return out


def hybrid_scores(docs: Sequence[SearchDoc], query: str) -> list[float]:
    """0.7 x BM25 / max BM25 + 0.3 x fuzzy / max fuzzy (each max floored at 1e-9)."""
    bm = bm25_scores(docs, query)
    fz = fuzzy_scores(docs, query)
    max_bm = max(bm + [SCORE_FLOOR])
    max_fz = max(fz + [SCORE_FLOOR])
    return [W_BM25 * b / max_bm + W_FUZZY * f / max_fz for b, f in zip(bm, fz, strict=True)]


def _lower_same_length(text: str) -> str:
    # str.lower can lengthen a few characters (e.g. "İ"); keep indices aligned with text.
    low = text.lower()
    if len(low) == len(text):
        return low
    return "".join(c.lower() if len(c.lower()) == 1 else c for c in text)


def make_preview(text: str, query: str, length: int = PREVIEW_LENGTH) -> str:
    """A window of ``length`` chars centred on the first query term (length > 1) found.

    Terms are tried in query order; ``…`` marks each cut edge. No hit: the head of the text.
    """
    if not text:
        return ""
    terms = [t for t in query.lower().split() if len(t) > 1]
    lower = _lower_same_length(text)
    hit = -1
    for t in terms:
        hit = lower.find(t)
        if hit >= 0:
            break
    if hit < 0:
        return text[:length]
    start = max(0, hit - max(0, length // 2 - 10))
    end = min(len(text), start + length)
    return ("…" if start > 0 else "") + text[start:end].strip() + ("…" if end < len(text) else "")


# ---------------------------------------------------------------------- entry points
def search_active_blocks(query: str, state: CompressionState,
                         limit: int | None = None) -> list[Block]:
    """The legacy block search (spec §10.1): active blocks with score > 0.1, best first.

    Per query term: min(0.15 x topic hits, 0.45) + min(0.04 x summary hits, 0.2), using
    non-overlapping substring counts; the total is capped at 1. The proxy's tool keeps the
    first ``limit`` (5 by default there).
    """
    terms = query.lower().split()
    if not terms:
        return []
    scored = []
    for b in state.blocks:
        if not b.active:
            continue
        topic, summary = (b.topic or "").lower(), (b.summary or "").lower()
        s = 0.0
        for t in terms:
            s += min(0.15 * topic.count(t), 0.45) + min(0.04 * summary.count(t), 0.2)
        s = min(s, 1.0)
        if s > 0.1:
            scored.append((s, b))
    scored.sort(key=lambda x: -x[0])  # stable: ties keep state order
    found = [b for _, b in scored]
    return found if limit is None else found[:max(0, int(limit))]


def search_context(query: str, state: CompressionState,
                   message_docs: Sequence[SearchDoc] | None = None, limit: int = DEFAULT_LIMIT,
                   *, preview_length: int = PREVIEW_LENGTH, min_score: float = MIN_SCORE,
                   role_weights: dict[str, float] | None = None) -> list[SearchResult]:
    """Pi's ``search_context`` ranking (spec §10.2) over all blocks plus ``message_docs``.

    The hybrid score is multiplied by the document's role weight (user 1.5, assistant 1.0,
    tool 0.6, block 1.0); results below ``min_score`` are dropped; best first, ``limit``
    at most.
    """
    weights = ROLE_WEIGHTS if role_weights is None else role_weights
    docs = block_docs(state) + list(message_docs or [])
    if not docs or not query.strip():
        return []
    scores = hybrid_scores(docs, query)
    results = []
    for d, s in zip(docs, scores, strict=True):
        w = weights.get("block" if d.kind == "block" else (d.role or ""), 1.0)
        score = s * w
        if score < min_score:
            continue
        results.append(SearchResult(
            kind=d.kind, ref=d.ref, block_id=d.block_id, tier=d.tier, score=score,
            title=d.title, preview=make_preview(d.preview_text or d.text, query, preview_length),
            role=d.role, tokens=d.tokens, block=d.block))
    results.sort(key=lambda r: -r.score)
    return results[:max(1, int(limit))]


# ---------------------------------------------------------------------- rendering
def to_fixed(x: float, digits: int) -> str:
    """JavaScript's ``Number.toFixed``: exact binary value, ties away from zero."""
    q = Decimal(1).scaleb(-digits)
    return str(Decimal(x).quantize(q, rounding=ROUND_HALF_UP))


def _size(tokens: int) -> str:
    if tokens < 1000:
        return f"{tokens}tok"
    if tokens < 1_000_000:
        return f"{to_fixed(tokens / 1000, 1)}K"
    return f"{to_fixed(tokens / 1_000_000, 1)}M"


def _truncate(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def _pi_entry(r: SearchResult) -> str:
    # A message no block folds has no tier: its "T0" is left out.
    meta = [f"{r.kind} {r.ref}", f"({r.role})" if r.role else "", f"T{r.tier}" if r.tier else "",
            f"score:{to_fixed(r.score, 2)}", _size(r.tokens) if r.tokens is not None else ""]
    header = " ".join(p for p in meta if p) + f'  "{_truncate(r.title, TITLE_MAX)}"'
    if r.kind == "block":
        hint = f'→ decompress({{ blockId: "{r.ref}" }})'
    elif r.block_id:
        hint = f'→ decompress({{ blockId: "{r.block_id}" }})  (block containing message {r.ref})'
    else:
        hint = f"(message {r.ref} is still visible in context)"
    return f"{header}\n  {r.preview}\n  {hint}"


def _proxy_entry(item: SearchResult | Block) -> str:
    b = item.block if isinstance(item, SearchResult) else item
    if b is None:  # a message result has no place in the proxy's block-only format
        return ""
    preview = b.summary[:200] + "..." if len(b.summary) > 200 else b.summary
    return f'{b.block_id} (T{b.tier}) "{b.topic or "(no topic)"}"\n  {preview}'


def render_search_result(results: Sequence[SearchResult | Block], query: str, n_blocks: int,
                         n_messages: int = 0, *, style: str = "pi") -> str:
    """The ``search_context`` tool result text.

    ``style="pi"``: ranked blocks and messages with scores, previews and decompress hints
    (spec §6.2). ``style="proxy"``: the proxy's block list (spec §6.1), made from
    ``search_active_blocks`` output or block results.
    """
    if style == "proxy":
        if not query:
            return "[search_context FAILED: query is required]"
        entries = [e for e in (_proxy_entry(r) for r in results) if e]
        if not entries:
            return f'[No blocks matched "{query}"]'
        return f'Found {len(entries)} block(s) for "{query}":\n\n' + "\n\n".join(entries)
    if style != "pi":
        raise ValueError(f"unknown style {style!r} (expected 'pi' or 'proxy')")
    pi_results = [r for r in results if isinstance(r, SearchResult)]
    if not pi_results:
        return (f'No matches for "{query}" across {n_blocks} block(s) and '
                f"{n_messages} historical message(s).")
    lines = [f'Found {len(pi_results)} match(es) for "{query}" '
             f"(searched {n_blocks} blocks + {n_messages} messages):"]
    for r in pi_results:
        lines += ["", _pi_entry(r)]
    return "\n".join(lines)
