"""The serving profile: everything the serving side decides for a window, defined once.

A model trains on exactly what the serving stack will show it only if training, evaluation
and export resolve the same settings. ``resolve_profile(window, preset, host, ...)`` gives
one frozen, hashed object with:

* the kernel config: gate preset (growth threshold, floors, minimum range), recent zone,
  protection, truncation, all as ``KernelConfig``;
* the token counters: ``kernel_counter`` (what the kernel counts ``tokens=`` tags, range
  sizes and nudge sizes with: acp-kernel's ``defaultCountTokens``, on every host) and
  ``usage_counter`` (what the host's ``tokenCount``, the fill the gates read, is counted
  with, over the whole request as sent). The model's own tokenizer is for billing only and
  never enters either;
* the host variant: tag strategy, where summaries live, nudge placement, decompress style,
  which messages a compress call is applied to, and the compress argument names;
* the prompt mode (``doctrine`` / ``distilled``) and the nudge style.

``profile.sha256`` hashes the resolved values, so two stages agree exactly when their hashes
do. ``python -m doctrine.kernel profile --window W [--preset P] [--host H]`` prints it.

Gate presets (the only definition in the project):

* ``reference``: acp-kernel's defaults unchanged. Growth threshold G = 50K tokens, effective
  floor max(20K, 0.45 G) = 22.5K, minimum range 5,000 chars, recent zone 5 messages /
  5,000 tokens. Below ~100K windows only the pressure band (>= 75 %) ever nudges.
* ``default``: the reference's proportions at a 200K window, scaled to this window
  (scale s = min(1, W / 200K)): G = 50K s, minimum growth floor 20K s, minimum range
  5,000 s chars, recent zone 5,000 s tokens (at least 5 messages, as the reference).
  Identical to ``reference`` at 200K and above; at small windows gentle nudges, declines and
  compressions happen below the pressure band, as they do in production.
* ``aggressive``: every gate relaxed (the "BC-extreme" tuning of the billion-context paper's
  Session Marathon experiment): G = 2 % of the
  window, effective floor 10 % of G, minimum range 6 % of the window in tokens (x4 chars),
  recent zone as ``default``. Nudges fire at almost every step.
* ``pocket``: for the embedded model's small windows (about 1.5K-2K kernel tokens), so
  that a whole decision point, emergency and tier-2 folds included, stays near 2K model
  tokens with the distilled prompt and tool schemas (which alone take ~1.1K of it). The
  fixed prompt is most of such a window, so the pressure band starts at 85 % (not 75 %);
  G = 5 % of the window with the reference's 0.45 floor ratio, so one step's growth
  reaches it; minimum range 3 % of the window (x4 chars); recent zone the
  last 3 messages (one task step) and 5 % of the window; a summary at most 0.5 W chars
  (the kernel's hard limit; the labeler aims at a quarter of it, W / 16 tokens). Its
  requests carry the tool schemas without parameter descriptions (``compact_tools``; the
  distilled system prompt still names every tool with its one-line description).

* ``proxy``: the billion-context proxy's kernel as its config file can set it: acp-kernel's
  defaults with a recent zone of 800 tokens and a minimum range of 1,000 chars (the settings
  the recordings that fold used). With the ``proxy_chat`` host, ``window`` is the proxy's
  effective limit (declared window less ``max_tokens``, 512): 7,680 for an 8K window, and
  ``POCKET_PROXY_WINDOW`` (2,560, the ``pocket-3k`` recording) for the embedded model.
* ``proxy_pocket``: ``proxy`` with a recent zone of 400 tokens and a minimum range of 600 chars
  (both proxy config keys), for ``POCKET_PROXY_WINDOW``: at 800 / 1,000 a pocket session has
  nothing foldable until its request is past the window.

Hosts: ``proxy`` and ``pi`` were written from the kernel's spec; ``proxy_chat`` is the proxy
as recorded over chat completions (``doctrine.kernel.proxy_chat``,
tools/proxy_record/FINDINGS.md), rendered by ``doctrine.render.request.render_request``.

What each preset means at 4K, 32K and 200K (G / effective floor / minimum range chars /
recent-zone tokens):

=========== ======================= ========================= ==========================
preset      4,096                   32,768                    200,000
=========== ======================= ========================= ==========================
reference   50000 / 22500 / 5000 /  50000 / 22500 / 5000 /    50000 / 22500 / 5000 /
            5000                    5000                      5000
default     1024 / 461 / 102 / 102  8192 / 3686 / 819 / 819   50000 / 22500 / 5000 / 5000
aggressive  82 / 8 / 983 / 102      655 / 66 / 7864 / 819     4000 / 400 / 48000 / 5000
pocket      205 / 92 / 492 / 205    (meant for 1.5K-2K windows: at 1,664 it is 83 / 37 / 200 / 83)
=========== ======================= ========================= ==========================
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

from doctrine.kernel.config import KernelConfig, apply_overrides
from doctrine.kernel.host import HostConfig
from plumbing.tokens import default_count_tokens

PRESETS = ("reference", "default", "aggressive", "pocket", "proxy", "proxy_pocket")
PROMPT_MODES = ("doctrine", "distilled")
NUDGE_STYLES = ("list", "list_only", "none")  # doctrine.render.prompts.NUDGE_STYLES
REFERENCE_WINDOW = 200_000
# The ``proxy`` preset: the billion-context proxy's kernel with the two settings its config
# file must set for folds below ~20K windows (``doctrine.kernel.proxy_chat.SMALL_WINDOW_SETTINGS``,
# tools/proxy_record/FINDINGS.md "tuned-8k"); every other gate is acp-kernel's default, which
# the proxy cannot reach (so gentle nudges never fire at small windows, as recorded).
PROXY_RECENT_TOKENS = 800
PROXY_MIN_RANGE = 1000
# ``proxy_pocket``: the same two keys set smaller for the pocket window. At 800 / 1,000 the
# recent zone holds most of a pocket session (the fixed part is ~1.3K of 2,560), so the
# first foldable range appears only once the request is past the window.
PROXY_POCKET_RECENT_TOKENS = 400
PROXY_POCKET_MIN_RANGE = 600
# The output budget the proxy takes off the declared window (``effective_limit``): a profile's
# ``window`` under the ``proxy_chat`` host is the kernel's limit, the declared window less this.
PROXY_MAX_TOKENS = 512
# The pocket-scale variant: the ``pocket-3k`` recording's 3,072 window less 512. About 1.3K
# SmolLM2 tokens are fixed behind the proxy (its block, its four schemas), so the pocket
# preset's 1.5-2K windows cannot hold a session there.
POCKET_PROXY_WINDOW = 3072 - PROXY_MAX_TOKENS


def gate_overrides(preset: str, window: int) -> dict[str, Any]:
    """Kernel overrides of a gate preset at ``window`` (see the module docstring)."""
    if preset not in PRESETS:
        raise ValueError(f"unknown gate preset {preset!r}; expected one of {list(PRESETS)}")
    if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
        raise ValueError(f"window must be a positive integer, got {window!r}")
    if preset == "reference":
        return {}
    if preset == "proxy":
        return {"preserve_recent_tokens": PROXY_RECENT_TOKENS, "compress": {"min_compress_range": PROXY_MIN_RANGE}}
    if preset == "proxy_pocket":
        return {"preserve_recent_tokens": PROXY_POCKET_RECENT_TOKENS,
                "compress": {"min_compress_range": PROXY_POCKET_MIN_RANGE}}
    s = min(1.0, window / REFERENCE_WINDOW)
    recent = max(1, round(5000 * s))
    if preset == "default":
        g = max(1, round(50_000 * s))
        return {"nudge": {"growth_floor": g, "growth_cap": g, "min_growth_floor": max(1, round(20_000 * s))},
                "compress": {"min_compress_range": max(1, round(5000 * s))},
                "preserve_recent_tokens": recent}
    if preset == "pocket":
        g = max(1, round(0.05 * window))
        return {"nudge": {"growth_ratio": 0.05, "growth_floor": g, "growth_cap": g, "min_growth_floor": 0,
                          "min_growth_ratio": 0.45, "max_context_limit_pct": 0.85},
                "compress": {"min_compress_range": max(1, round(0.03 * window * 4)),
                             "max_summary_length": max(200, round(0.5 * window))},
                "preserve_recent_messages": 3,
                "preserve_recent_tokens": max(1, round(0.05 * window))}
    g = max(1, round(0.02 * window))
    return {"nudge": {"growth_ratio": 0.02, "growth_floor": g, "growth_cap": g, "min_growth_floor": 0,
                      "min_growth_ratio": 0.10},
            "compress": {"min_compress_range": max(1, round(0.06 * window * 4))},
            "preserve_recent_tokens": recent}


@dataclass(frozen=True)
class HostVariant:
    """How one host shapes a request and applies the model's tool calls."""

    name: str
    tags: str  # ref tag strategy: "text-only" | "all" | "none"
    summaries: str  # "compress-call" | "kernel-message"
    nudge: str  # "trailing-user" | "none"
    decompress: str  # "proxy" (restore + deactivate) | "pi" (inline or file, block stays)
    compress_on: str  # "history" (the host's messages) | "view" (the tagged, pruned view)
    compress_args: str = "startId/endId"  # the compress tool's range keys
    # What only the recorded proxy host (``proxy_chat``) does differently; the defaults are
    # the spec-written hosts'.
    system_in_view: bool = False  # the client's system message is view message m00001
    tool_result_names: bool = True  # tool results carry the tool's name
    client_tools_first: bool = False  # the client's tools, then the compress tools
    folds_kept: bool = True  # earlier turns' compress calls stay in later requests
    context_count: str = "estimate"  # "estimate" (this request) | "previous-prompt"

    @property
    def tools_host(self) -> str:
        """Which host's compress-tool schemas and decompress style (``doctrine.render.tools``)."""
        return "pi" if self.name == "pi" else "proxy"

    def host_config(self, nudge_style: str) -> HostConfig:
        return HostConfig(summaries=self.summaries, tags=self.tags,
                          nudge="none" if nudge_style == "none" else self.nudge)


# The billion-context proxy (the default) and the Pi host (spec §1.3, §5.5, §6).
HOSTS = {
    "proxy": HostVariant("proxy", tags="text-only", summaries="compress-call", nudge="trailing-user",
                         decompress="proxy", compress_on="history"),
    "pi": HostVariant("pi", tags="all", summaries="compress-call", nudge="trailing-user",
                      decompress="pi", compress_on="view"),
    # The proxy as recorded over chat completions (doctrine/kernel/proxy_chat.py): system
    # message as m00001, nameless tool results, client tools first, no earlier fold kept,
    # fill = the previous call's prompt tokens, compress applied to the tagged view.
    "proxy_chat": HostVariant("proxy_chat", tags="text-only", summaries="compress-call",
                              nudge="trailing-user", decompress="proxy", compress_on="view",
                              system_in_view=True, tool_result_names=False, client_tools_first=True,
                              folds_kept=False, context_count="previous-prompt"),
}


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class ServingProfile:
    window: int
    preset: str = "default"
    host: str = "proxy"
    prompt_mode: str = "distilled"
    nudge_style: str = "list"
    kernel_counter: str = "acp-default"
    usage_counter: str = "acp-default"
    # Recipe overrides of kernel settings, merged after the preset (a JSON string, so the
    # profile stays hashable and frozen).
    overrides_json: str = "{}"

    @cached_property
    def kernel(self) -> KernelConfig:
        cfg = KernelConfig.for_limit(self.window, **gate_overrides(self.preset, self.window))
        extra = json.loads(self.overrides_json)
        return apply_overrides(cfg, extra) if extra else cfg

    @property
    def compact_tools(self) -> bool:
        """The ``pocket`` preset sends tool schemas without parameter descriptions
        (``doctrine.render.request.compact_tool``): in a ~2K-token request they are a tenth of it."""
        return self.preset == "pocket"

    @property
    def variant(self) -> HostVariant:
        return HOSTS[self.host]

    @cached_property
    def host_config(self) -> HostConfig:
        return self.variant.host_config(self.nudge_style)

    def to_dict(self) -> dict[str, Any]:
        """Every resolved value (what a manifest records), without the hash."""
        v = self.variant
        return {
            "window": self.window, "preset": self.preset, "host": self.host,
            "prompt_mode": self.prompt_mode, "nudge_style": self.nudge_style,
            "kernel_counter": self.kernel_counter, "usage_counter": self.usage_counter,
            "host_variant": {"tags": v.tags, "summaries": v.summaries, "nudge": self.host_config.nudge,
                             "decompress": v.decompress, "compress_on": v.compress_on,
                             "compress_args": v.compress_args,
                             **({"system_in_view": True, "tool_result_names": False,
                                 "client_tools_first": True, "folds_kept": False,
                                 "context_count": v.context_count} if v.name == "proxy_chat" else {})},
            "kernel_overrides": json.loads(self.overrides_json),
            "kernel": self.kernel.to_dict(),
        }

    @cached_property
    def sha256(self) -> str:
        return hashlib.sha256(_canonical(self.to_dict()).encode("utf-8")).hexdigest()

    def record(self) -> dict[str, Any]:
        """The manifest entry: the short keys, the hash, then the resolved values."""
        return {"window": self.window, "preset": self.preset, "host": self.host,
                "prompt_mode": self.prompt_mode, "nudge_style": self.nudge_style,
                "sha256": self.sha256, "resolved": self.to_dict()}

    @property
    def count_tokens(self):
        """The kernel's counter (``kernel_counter``: acp-kernel's default estimator)."""
        return default_count_tokens

    @property
    def count_request(self):
        """With ``usage_counter`` ``model:SPEC``: (messages, tools) -> the request's prompt tokens
        through the model's chat template; None with acp-kernel's estimator."""
        if self.usage_counter.startswith("model:"):
            return _request_counter(self.usage_counter[len("model:"):])
        return None

    @property
    def count_usage(self):
        """The host's fill counter over request text (``usage_counter``): acp-kernel's
        estimator, or ``model:SPEC``, the served model's tokenizer (the ``proxy_chat`` host
        reads the server's real ``prompt_tokens``)."""
        if self.usage_counter.startswith("model:"):
            return _model_counter(self.usage_counter[len("model:"):])
        return default_count_tokens


@lru_cache(maxsize=4)
def _request_counter(spec: str):
    """Prompt tokens of a whole request as the served model sees it: its chat template over
    the messages and tool schemas (what vLLM reports as ``prompt_tokens``)."""
    from plumbing.chat_templates import chat_token_ids, choose_template
    from plumbing.models import load_tokenizer

    tok = load_tokenizer(spec)
    template = choose_template(tok).template
    return lambda messages, tools: len(chat_token_ids(tok, messages, tools or None, template))


@lru_cache(maxsize=4)
def _model_counter(spec: str):
    from plumbing.models import load_tokenizer
    from plumbing.tokens import TokenizerCounter, memo_counter

    return memo_counter(TokenizerCounter(load_tokenizer(spec)))


def resolve_profile(window: int, preset: str = "default", host: str = "proxy", *,
                    prompt_mode: str = "distilled", nudge_style: str = "list",
                    kernel_overrides: dict[str, Any] | None = None,
                    usage_counter: str = "acp-default") -> ServingProfile:
    """The one way to get a serving profile; every value is checked here."""
    gate_overrides(preset, window)  # validates preset and window
    if host not in HOSTS:
        raise ValueError(f"unknown host {host!r}; expected one of {sorted(HOSTS)}")
    if prompt_mode not in PROMPT_MODES:
        raise ValueError(f"unknown prompt mode {prompt_mode!r}; expected one of {list(PROMPT_MODES)}")
    if nudge_style not in NUDGE_STYLES:
        raise ValueError(f"unknown nudge style {nudge_style!r}; expected one of {list(NUDGE_STYLES)}")
    if usage_counter != "acp-default" and not (usage_counter.startswith("model:") and len(usage_counter) > 6):
        raise ValueError(f"unknown usage counter {usage_counter!r}; expected 'acp-default' or 'model:SPEC'")
    overrides = kernel_overrides or {}
    p = ServingProfile(window, preset, host, prompt_mode, nudge_style, usage_counter=usage_counter,
                       overrides_json=_canonical(overrides))
    p.kernel  # noqa: B018 - resolve now: a bad override fails here, with its key named
    return p


def profile_from_record(rec: dict[str, Any]) -> ServingProfile:
    """Rebuild a profile from a manifest entry and check its hash."""
    r = rec.get("resolved") or {}
    p = resolve_profile(rec["window"], rec.get("preset", "default"), rec.get("host", "proxy"),
                        prompt_mode=rec.get("prompt_mode", "distilled"),
                        nudge_style=rec.get("nudge_style", "list"),
                        kernel_overrides=r.get("kernel_overrides") or {},
                        usage_counter=r.get("usage_counter", "acp-default"))
    if rec.get("sha256") and rec["sha256"] != p.sha256:
        raise ValueError(f"serving profile {rec['sha256'][:12]} does not resolve the same here "
                         f"(got {p.sha256[:12]}): the kernel or its presets changed since it was recorded")
    return p


def unique_records(profiles: list[ServingProfile]) -> list[dict[str, Any]]:
    """Manifest list: one entry per distinct profile, in first-seen order."""
    seen: dict[str, dict[str, Any]] = {}
    for p in profiles:
        seen.setdefault(p.sha256, p.record())
    return list(seen.values())
