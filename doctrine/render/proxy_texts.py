"""The four prompt texts the billion-context proxy takes, and the block it builds from them.

The proxy (v0.1.45) takes only four texts from its config (``compress.prompts``), and none may
be empty for its web config API. It puts philosophy and how-to, joined by a blank line, in
front of its own fixed TAGS / TOOLS / SUMMARIES text in the system block, and repeats them in
every nudge; tier-2/3 texts appear only in tier-2/3 nudges (tools/proxy_record/FINDINGS.md,
point 1). Under the ``proxy_chat`` serving profile the project renders the same layout with the
doctrine's words in place of the proxy's fixed prose (``proxy_block``), from the same four texts
the export writes into the proxy's config (``train.proxy_snippet``): one definition, so a
trained adapter and its exported config agree.
"""

from __future__ import annotations

import dataclasses

from doctrine.render.prompts import _join, _text, _tools_section, render_system_prompt
from doctrine.spec import Doctrine

__all__ = ["PROMPT_KEYS", "STAND_INS", "proxy_block", "proxy_doctrine", "proxy_prompt_texts"]

# The proxy's prompt keys and the doctrine sections they take.
PROMPT_KEYS = {"compressPhilosophy": "philosophy", "howToCompressRules": "how-to-compress",
               "tier2DistillRules": "tier2", "tier3CondenseRules": "tier3"}
# One line each where a mode's text is empty (distilled v1 empties all four).
STAND_INS = {
    "compressPhilosophy": "Fold finished work into summaries that keep what the task still needs.",
    "howToCompressRules": "Answer a nudge with one compress call over the ranges it lists.",
    "tier2DistillRules": "Distil the listed summary blocks into one shorter block.",
    "tier3CondenseRules": "Condense the listed blocks to the facts the task still needs.",
}
FIXED_SECTIONS = ("intro", "tags", "summaries", "@tools")  # where the proxy has its own prose


def proxy_prompt_texts(doc: Doctrine, mode: str) -> dict[str, str]:
    """The four texts for the proxy's ``compress.prompts``: the mode's, or the stand-in."""
    out = {}
    for key, section in PROMPT_KEYS.items():
        text = doc.text(section, mode).strip() if section in doc.sections else ""
        out[key] = text or STAND_INS[key]
    return out


def proxy_doctrine(doc: Doctrine, mode: str) -> Doctrine:
    """``doc`` with the four sections holding the proxy's texts in ``mode`` (render-only: its
    hash is the original's, so a row stamps the doctrine it was labeled with)."""
    texts = {PROMPT_KEYS[k]: v for k, v in proxy_prompt_texts(doc, mode).items()}
    if mode == "distilled":
        return dataclasses.replace(doc, distilled={**doc.distilled, **texts})
    return dataclasses.replace(doc, sections={**doc.sections, **{k: v for k, v in texts.items() if k in doc.sections}})


def proxy_block(doc: Doctrine, mode: str) -> str:
    """The system block the proxy appends after ``---``, in the doctrine's words: philosophy
    and how-to, then the fixed part (the proxy's TAGS / TOOLS / SUMMARIES are the doctrine's
    intro, tags, summaries and tool list here). Tier-2/3 texts go to nudges only."""
    d = proxy_doctrine(doc, mode)
    render_system_prompt(d, mode)  # checks the mode
    fixed = [_tools_section(d, mode) if s == "@tools" else _text(d, s, mode) for s in FIXED_SECTIONS]
    return _join([_text(d, "philosophy", mode), _text(d, "how-to-compress", mode), *fixed])
