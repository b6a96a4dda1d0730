"""What every arm shares: the arm's description (:class:`ArmInfo`), the session-wide settings
(:class:`ArmEnv`, with its groups :class:`KernelSettings`, :class:`CompactionSettings` and
:class:`EngineSettings`), one session's memory (:class:`ArmState`), what the model is shown
(:class:`View`), and the helpers that build a view from chat messages.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field, fields
from typing import Any, Literal

from plumbing.chat_backend import prompt_text

__all__ = ["CLEARED", "SUMMARY_PREFIX", "SUMMARY_PROMPT", "TUNABLE", "ArmEnv", "ArmInfo", "ArmState", "CompactionSettings",
           "EngineSettings", "KernelSettings", "View",
           "last_user_index", "protocol_safe_tail", "recipe_settings", "setting"]

# The baselines' one summary prompt (generic, as a threshold compactor would use).
SUMMARY_PROMPT = ("Summarise the conversation above so that the work can continue from the summary "
                  "alone. Keep file paths, line numbers, error messages, exact values, decisions and "
                  "the user's requests. Reply with the summary text only.")
CLEARED = "[Old tool result content cleared]"
SUMMARY_PREFIX = "Summary of the earlier conversation:\n"


@dataclass(frozen=True)
class ArmInfo:
    kind: str  # "baseline" | "kernel"
    _: KW_ONLY  # the flags by name: ArmInfo("kernel", prompt_mode="distilled", use_adapter=True)
    prompt_mode: str | None = None  # kernel arms: "doctrine" | "distilled" | None (no doctrine)
    use_adapter: bool = False
    nudges: bool = False
    tools: tuple[str, ...] = ()  # policy arms: the recovery tools the arm serves (eval/arms/policies/tools.py)
    reference: bool = False  # answered by the oracle policy (the labeler), whatever the run's backend


def setting(default: Any, description: str, **bounds: Any) -> Any:
    """A field that a recipe's ``arm_settings`` may set: its default, the one line that
    ``--explain`` prints for it, and the bounds a recipe's value must keep (pydantic's ``gt``,
    ``ge``, ``le``, ``min_length``). The recipe's model (eval.recipe.ArmSettings) is built from
    these fields, so this is the setting's one declaration."""
    return field(default=default, metadata={"description": description, "bounds": bounds})


@dataclass(frozen=True)
class KernelSettings:
    """The kernel host's settings (``deterministic``, ``doctrine``, ``base_slim``, ``distilled``):
    the doctrine and serving profile come from the run, the cadence from ``arm_settings``."""

    doctrine: Any = None  # doctrine.spec.Doctrine
    overrides: dict[str, Any] = field(default_factory=dict)  # the recipe's kernel block
    gate: str = "aggressive"  # gate preset of the serving profile (doctrine.kernel.profile)
    host: str = "proxy"  # host variant of the serving profile
    nudge_style: str = "list"
    deterministic_every: int = setting(3, "deterministic: decision points between compressions", ge=1)


@dataclass(frozen=True)
class CompactionSettings:
    """The chat-message compactors' settings: the baselines (``baselines.py``) and the
    compaction article's switches (``policies/compaction.py``)."""

    compact_threshold: float = setting(0.8, "auto_compact: summarise past this share of the window", gt=0, le=1)
    sliding_fraction: float = setting(0.75, "sliding: share of the window kept", gt=0, le=1)
    micro_min_chars: int = setting(
        500, "micro_auto: tool results longer than this are cleared; compact_offload: saved behind a handle", ge=0)
    micro_keep: int = setting(5, "micro_auto: newest tool results kept", ge=0)
    tail_share: float = setting(
        0.2, "compact_tail/_step_cut/_plus: verbatim tail, share of the window", gt=0, le=1)
    offload_preview_chars: int = setting(
        200, "compact_offload/_plus: head of a saved output shown by its handle", ge=0)
    retry_markers: tuple[str, ...] = setting(
        ("ERROR", "Error:", "error:", "command not found", "No such file or directory"),
        "compact_retry_collapse/_plus: what marks a failed result's first line", min_length=1)


@dataclass(frozen=True)
class EngineSettings:
    """The engine-side policies' settings (``policies/lcm.py``, ``policies/retention.py``)."""

    lcm_soft: float = setting(0.7, "lcm: the engine folds past this share of the window", gt=0, le=1)
    lcm_target: float = setting(0.5, "lcm: ... down to this share of the window", ge=0, le=1)
    lcm_fresh_share: float = setting(0.25, "lcm: newest share of the window kept raw", ge=0, le=1)
    lcm_leaf_share: float = setting(
        0.1, "lcm: the most one leaf summary covers, share of the window", gt=0, le=1)
    lcm_fanout: int = setting(4, "lcm: same-depth summaries condensed into one", ge=2)
    lcm_summary_chars: int = setting(600, "lcm: the longest summary text (chars)", ge=40)
    # "extractive": made by the engine, no model call; "model": written by the model, extractive on failure.
    lcm_summary: Literal["extractive", "model"] = setting(
        "extractive", "lcm: summaries engine-made, or model-written with fallback")
    retention_share: float = setting(
        0.5, "full_retention_search: recent window, share of the window", gt=0, le=1)
    search_limit: int = setting(5, "full_retention_search: hits per search_history call", ge=1)


def recipe_settings(*groups: type) -> dict[str, type]:
    """The fields of the dataclasses ``groups`` declared with :func:`setting`, by name, each with
    the group that declares it (a name two groups declare is an error: the flat ``arm_settings``
    could not tell them apart)."""
    out: dict[str, type] = {}
    for group in groups:
        for f in fields(group):
            if "description" not in f.metadata:
                continue
            if f.name in out:
                raise TypeError(f"{f.name} is a setting of both {out[f.name].__name__} and {group.__name__}")
            out[f.name] = group
    return out


# The settings a recipe's ``arm_settings`` may set, each with the group that holds it
# (eval.recipe.ArmSettings is built from them).
TUNABLE: dict[str, type] = recipe_settings(KernelSettings, CompactionSettings, EngineSettings)


@dataclass
class ArmEnv:
    """What one session's arm works with: the window, token counter and summariser of the run,
    the session's tools and system prompt, and the three groups of settings. Build one with
    :meth:`build`, which takes the groups' fields flat (as a recipe's ``arm_settings`` gives them)."""

    window: int
    count_tokens: Callable[[str], int]
    summarise: Callable[[list[dict[str, Any]], str], str]
    task_tools: list[dict[str, Any]] = field(default_factory=list)
    system_prompt: str = ""
    kernel: KernelSettings = field(default_factory=KernelSettings)
    compaction: CompactionSettings = field(default_factory=CompactionSettings)
    engine: EngineSettings = field(default_factory=EngineSettings)
    cache: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)  # profiles, frames

    @classmethod
    def build(cls, window: int, count_tokens: Callable[[str], int],
              summarise: Callable[[list[dict[str, Any]], str], str], *, task_tools: list[dict[str, Any]] | None = None,
              system_prompt: str = "", doctrine: Any = None, kernel_overrides: dict[str, Any] | None = None,
              gate: str = "aggressive", host: str = "proxy", nudge_style: str = "list", **settings: Any) -> ArmEnv:
        """An env from the run's values and flat tunable ``settings`` (keys of :data:`TUNABLE`;
        another key is a ``TypeError`` naming it)."""
        unknown = sorted(set(settings) - set(TUNABLE))
        if unknown:
            raise TypeError(f"not an arm setting: {', '.join(unknown)} (known: {', '.join(sorted(TUNABLE))})")

        def group(kind: type) -> dict[str, Any]:
            return {k: v for k, v in settings.items() if TUNABLE[k] is kind}

        kernel = KernelSettings(doctrine=doctrine, overrides=dict(kernel_overrides or {}), gate=gate, host=host,
                                nudge_style=nudge_style, **group(KernelSettings))
        return cls(window=window, count_tokens=count_tokens, summarise=summarise, task_tools=list(task_tools or []),
                   system_prompt=system_prompt, kernel=kernel, compaction=CompactionSettings(**group(CompactionSettings)),
                   engine=EngineSettings(**group(EngineSettings)))


@dataclass
class ArmState:
    history: list[dict[str, Any]] = field(default_factory=list)  # chat messages with stable "id"
    summary: str | None = None  # auto-compaction summary
    cut: int = 0  # history index where the post-summary tail starts
    kernel_state: Any = None
    calls: int = 0  # decision points seen
    compressions_attempted: int = 0
    compressions_succeeded: int = 0
    kernel_errors: list[str] = field(default_factory=list)
    exchange_seq: int = 0
    seen_len: int = -1  # history length at the last context build (the deterministic clock)
    overflows: int = 0  # requests sent larger than the window (after the host's emergency path)
    policy: dict[str, Any] = field(default_factory=dict)  # policy arms' own state (eval/arms/policies/)


@dataclass
class View:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    retained_messages: int
    retained_tokens: int
    doctrine_tokens: int = 0
    nudge_shown: bool = False
    nudge_text: str = ""
    flat: list[Any] | None = None  # kernel arms: the flat input of this turn
    decision: Any = None  # kernel arms: the kernel's NudgeDecision (hindsight policies read it)
    kernel_before: Any = None  # kernel arms: the CompressionState this turn started from
    token_count: int = 0  # kernel arms: the size estimate the kernel decided on
    model_view: Any = None  # kernel arms: render_for_model's ModelView
    events: list[dict[str, Any]] = field(default_factory=list)  # compactions done before the call
    sent_tokens: int = 0  # kernel arms: the request as sent, in the profile's usage counter
    overflow: bool = False  # kernel arms: sent_tokens > window
    profile: Any = None  # kernel arms: the ServingProfile the request was rendered under


# ----------------------------------------------------------------------------- helpers


def _strip(m: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in m.items() if k != "id"}


def _system(env: ArmEnv) -> list[dict[str, Any]]:
    return [{"role": "system", "content": env.system_prompt}] if env.system_prompt else []


def _tokens(env: ArmEnv, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
    return env.count_tokens(prompt_text(messages, tools))


def _split_question(history: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(history before the question, [question]): a trailing user message is the question."""
    if history and history[-1].get("role") == "user":
        return history[:-1], history[-1:]
    return history, []


def protocol_safe_tail(messages: list[dict[str, Any]], start: int) -> int:
    """Move a cut at ``start`` towards newer messages until no tool exchange is split.

    A retained tool result must have its call retained, and a retained call must keep all
    of its results: leading tool results are dropped, and so is a leading assistant call
    whose results are not all inside the retained part.
    """
    n = len(messages)
    while start < n:
        m = messages[start]
        if m.get("role") == "tool":
            start += 1
            continue
        calls = {c.get("id") for c in (m.get("tool_calls") or [])}
        if calls:
            later = {x.get("tool_call_id") for x in messages[start + 1:] if x.get("role") == "tool"}
            if not calls <= later:
                start += 1
                continue
        break
    return start


def _view(env: ArmEnv, body: list[dict[str, Any]], retained: int) -> View:
    msgs = _system(env) + [_strip(m) for m in body]
    return View(msgs, list(env.task_tools), retained, _tokens(env, msgs, env.task_tools))


def last_user_index(history: list[dict[str, Any]]) -> int:
    return max((i for i, m in enumerate(history) if m.get("role") == "user"), default=0)


def _append_exchange(state: ArmState, name: str, args: dict[str, Any], result: str, call_id: str,
                     content: str = "") -> None:
    state.exchange_seq += 1
    sid = f"a{state.exchange_seq:05d}"  # inserted actions map to no session message
    state.history.append({"id": sid, "role": "assistant", "content": content, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}]})
    state.history.append({"id": sid + "#result", "role": "tool", "tool_call_id": call_id, "name": name, "content": result})
