"""What the billion-context proxy loads for an exported adapter: a config snippet in its format.

The proxy (v0.1.45) takes its prompt texts only inline, as ``compress.prompts`` with four keys,
and only with ``acknowledgePromptsRisk: true``; it reads no prompt-set folder and none of the
adapter's other files (tools/proxy_record/FINDINGS.md, point 1). ``proxy_snippet`` builds that
block from the doctrine's texts in the adapter's prompt mode, plus the settings a small window
needs for folds to happen at all (FINDINGS.md: with the defaults an 8K window never folds), and
the upstream entry with the declared window. ``proxy_note`` says what has no place in it.

No text may be empty: the proxy's web config API refuses the whole ``compress`` object when
one of the four is (its config file accepts it). Where the distilled text of a section is
empty, the snippet carries a one-line stand-in (``doctrine.render.proxy_texts.STAND_INS``).
Data rendered under the ``proxy_chat`` profile carries the same lines in the same places
(system block, nudges); data of other profiles does not, and the note says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from doctrine.render.proxy_texts import PROMPT_KEYS, STAND_INS, proxy_prompt_texts
from plumbing.runs import atomic_write_json, atomic_write_text, confined_path

__all__ = ["PROMPT_KEYS", "STAND_INS", "proxy_note", "proxy_snippet", "write_proxy_snippet"]

UPSTREAM = "http://127.0.0.1:8000"  # where the card's vLLM command listens (its default port)
SMALL_WINDOW = 20_000  # below it the proxy's default recent zone and minimum range block every fold


def _settings(profiles: list[dict[str, Any]]) -> tuple[int | None, dict[str, Any]]:
    """The declared window and the compress settings of the adapter's serving profiles."""
    from doctrine.kernel.profile import PROXY_MAX_TOKENS, profile_from_record
    from doctrine.kernel.proxy_chat import SMALL_WINDOW_SETTINGS

    resolved = [profile_from_record(p) for p in profiles]
    if not resolved:
        return None, dict(SMALL_WINDOW_SETTINGS)
    largest = max(resolved, key=lambda p: p.window)
    if all(p.host == "proxy_chat" for p in resolved):  # the kernel the data ran, in proxy keys
        k = largest.kernel
        return largest.window + PROXY_MAX_TOKENS, {"preserveRecentTokens": k.preserve_recent_tokens,
                                                   "minCompressRange": k.compress.min_compress_range}
    return largest.window, (dict(SMALL_WINDOW_SETTINGS) if largest.window < SMALL_WINDOW else {})


def proxy_snippet(doc: Any, mode: str, profiles: list[dict[str, Any]], model_name: str) -> dict[str, Any]:
    """The proxy config block for an adapter: ``compress`` (the four texts, none empty,
    acknowledgePromptsRisk, window settings) and the upstream provider with the window."""
    prompts = proxy_prompt_texts(doc, mode)
    declared, settings = _settings(profiles)
    out: dict[str, Any] = {"compress": {"prompts": prompts, "acknowledgePromptsRisk": True, **settings}}
    if declared is not None:
        out["providers"] = {UPSTREAM: {"models": {model_name: {"context": declared}}}}
    return out


def proxy_note(doc: Any, mode: str, snippet: dict[str, Any], proxy_chat: bool = False) -> str:
    """The README beside the snippet: how to use it and what it cannot carry. ``proxy_chat``:
    the adapter's data was rendered under the ``proxy_chat`` profile (it saw the stand-ins)."""
    from doctrine.acp_prompt_set import DEFAULT_FILES

    stood_in = [k for k, s in PROMPT_KEYS.items() if not (s in doc.sections and doc.text(s, mode).strip())]
    other = [n for n in doc.sections if n not in DEFAULT_FILES and n not in doc.reference_only]
    prov = snippet.get("providers") or {}
    window = next((m["context"] for v in prov.values() for m in v["models"].values()), None)
    lines = [
        "# billion-context proxy config for this adapter",
        "",
        "`billion-context.json` is a block of the proxy's config file (v0.1.45): merge its",
        "`compress` and `providers` keys into the proxy's config and restart it. The texts are",
        "inline because the proxy reads no prompt-set folder; `acknowledgePromptsRisk: true` is",
        "what makes it use them.",
        "",
    ]
    if window:
        lines += [f"- Window: the upstream model is declared with `context: {window}`. Clients must send",
                  "  `max_tokens: 512`: the proxy takes a request's `max_tokens` off the window (8,192 when",
                  "  absent, which leaves nothing of a small window).",
                  "  The proxy gates on the previous call's prompt tokens, so a request carrying a nudge can",
                  "  be larger than this window (pocket data: up to ~3.8K tokens at 3,072): serve vLLM with",
                  "  a `--max-model-len` above the declared context (4096 for the pocket window)."]
    if snippet["compress"].get("preserveRecentTokens"):
        lines += ["- `preserveRecentTokens` and `minCompressRange`: below ~20K windows the proxy's defaults",
                  "  keep the whole conversation in the recent zone and never fold."]
    if stood_in:
        seen = ("the adapter's data (proxy_chat profile) carries the same lines in the same places"
                if proxy_chat else "the adapter was trained with these sections absent, so they are new to it")
        lines += [f"- One-line stand-ins for {', '.join(f'`{k}`' for k in stood_in)}: the {mode} texts are",
                  "  empty and the proxy's config API refuses an empty text. Behind the proxy philosophy and",
                  "  how-to appear in the system prompt and in every nudge, tier 2/3 in their nudges;",
                  f"  {seen}."]
    lines += [
        "",
        "## What has no place in the proxy's config",
        "",
        f"- {len(other)} other sections of `serving/`: {', '.join(other)}. The proxy writes its own",
        "  tags, tools, summaries and nudge prose in their place, in its own words.",
        "- `tools.json`: the proxy sends its own four compress-tool schemas after the client's tools.",
        "- The chat template: it belongs to vLLM (`--chat-template`, see the model card).",
        "- The gentle nudge's growth floor (acp-kernel's `minGrowthFloor`, 20,000): no proxy key",
        "  reaches it, so at small windows only the pressure band (75 %) nudges.",
    ]
    return "\n".join(lines) + "\n"


def write_proxy_snippet(out: Path, doc: Any, mode: str, profiles: list[dict[str, Any]], model_name: str) -> Path:
    """Write ``billion-context.json`` and ``billion-context.md`` into the adapter folder."""
    snippet = proxy_snippet(doc, mode, profiles, model_name)
    proxy_chat = bool(profiles) and all(p.get("host") == "proxy_chat" for p in profiles)
    # Through the export's confined-path rule: never through a link, never outside ``out``.
    atomic_write_json(confined_path(out, "billion-context.json"), snippet)
    atomic_write_text(confined_path(out, "billion-context.md"), proxy_note(doc, mode, snippet, proxy_chat))
    return out / "billion-context.json"
