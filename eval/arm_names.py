"""Every arm's name, declared once. The recipe checks a recipe's arms against them, the arm
catalog (eval/arms/catalog.py) and the policy registry build their arms under them (and
refuse to load if a name has no arm or an arm no name), the report orders its rows by them.
What each arm does: eval/README.md, "Arms"."""

from __future__ import annotations

# The classic context managers on chat messages (eval/arms/baselines.py).
BASELINE_ARMS = ("full", "n_latest_10", "n_latest_20", "n_latest_40", "sliding", "auto_compact", "micro_auto")
# The kernel host: the engine alone, the prompt doctrine, the distilled prompts with and
# without the adapter (eval/arms/kernel_host.py).
KERNEL_ARMS = ("deterministic", "doctrine", "base_slim", "distilled")
# What a recipe runs when it names no arms.
DEFAULT_ARMS = BASELINE_ARMS + KERNEL_ARMS
# The reference fold: the distilled frame answered by the oracle policy whatever the backend
# (eval.harness.reference_backend); run only where a recipe names it.
REFERENCE_ARMS = ("oracle",)
# The seeds' other policies (eval/arms/policies/): run only where a recipe names them.
POLICY_ARMS = ("compact_tail", "compact_step_cut", "compact_offload", "compact_retry_collapse", "compact_plus",
               "lcm", "full_retention_search")
ARM_NAMES = DEFAULT_ARMS + REFERENCE_ARMS + POLICY_ARMS
# The report's row order: the baselines, the engine, the reference fold, then the model arms.
REPORT_ORDER = (*BASELINE_ARMS, "deterministic", *REFERENCE_ARMS, "doctrine", "base_slim", "distilled")
