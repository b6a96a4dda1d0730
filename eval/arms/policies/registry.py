"""Adds the policy arms to ``eval.arms``' registries (called once, by eval/arms/catalog.py)."""

from __future__ import annotations

from typing import Any

from eval.arm_names import POLICY_ARMS
from eval.arms.policies import compaction, lcm, retention
from eval.arms.policies.tools import tool_call
from eval.judges import contains

__all__ = ["recovery_hint", "register"]

MODULES = (compaction, lcm, retention)


def register(arms: dict[str, Any], info: dict[str, Any], summarisers: set[str], forcers: dict[str, Any],
             tools: dict[str, Any]) -> None:
    from eval.arms.base import ArmInfo

    built = [name for mod in MODULES for name in mod.ARMS]
    if sorted(built) != sorted(POLICY_ARMS):  # the names are declared in eval/arm_names.py
        raise RuntimeError(f"the policy modules build the arms {built}; eval/arm_names.py POLICY_ARMS "
                           f"declares {list(POLICY_ARMS)}")
    for mod in MODULES:
        for name, fn in mod.ARMS.items():
            arms[name] = fn
            info[name] = ArmInfo("baseline", tools=mod.ARM_TOOLS[name])
        tools.update(mod.TOOLS)
    summarisers.update(compaction.ARMS)
    forcers["lcm"] = lcm.force


HINTS = {"compact_offload": compaction.hint, "compact_plus": compaction.hint, "lcm": lcm.hint,
         "full_retention_search": retention.hint}


def recovery_hint(arm: str, state: Any, env: Any, expected: list[str], seen: str) -> list[dict[str, Any]]:
    """What the reference (oracle) backend calls when ``expected`` texts are not in ``seen``
    (the visible context) but the arm's tools can bring them back: tool calls, or []."""

    missing = [t for t in expected if t and not contains(seen, t)]
    if arm not in HINTS or not missing:
        return []
    return [tool_call(name, args, k) for k, (name, args) in enumerate(HINTS[arm](state, env, missing))]
