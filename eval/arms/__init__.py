"""Context-management arms: what each arm shows the model before a call.

An arm is a plain function ``arm(state, env) -> View``. ``state`` (:class:`ArmState`) is
one session's memory for that arm: the history it keeps (the session's replayed messages,
plus, for kernel arms, the compress exchanges that happened) and whatever the arm adds (a
compaction summary, the kernel state). ``env`` (:class:`ArmEnv`) is shared: the window,
the token counter, the session's task tools and system prompt, a ``summarise`` callable that
asks the model under test for a summary (recorded as a call), and three groups of settings:
``env.kernel`` (:class:`KernelSettings`: doctrine, serving profile, engine cadence),
``env.compaction`` (:class:`CompactionSettings`: the chat-message compactors) and
``env.engine`` (:class:`EngineSettings`: ``lcm`` and ``full_retention_search``).
:meth:`ArmEnv.build` takes their fields flat, as a recipe's ``arm_settings`` gives them.

Baselines (``full``, ``n_latest_*``, ``sliding``, ``auto_compact``, ``micro_auto``) work
on OpenAI chat messages and never show a ref tag, a nudge or the doctrine. Kernel arms
(``deterministic``, ``doctrine``, ``base_slim``, ``distilled``) render through
``doctrine.kernel.host.render_for_model`` exactly as the serving host does; after the model
replies, :func:`apply_reply` applies its compress call (or recovery call) to the state.
No arm ever shows how full the context is; the summary prompt below says nothing of it.

Where things are: ``base.py`` (ArmInfo, ArmEnv, ArmState, View, view helpers),
``baselines.py`` (the chat-message arms and the threshold compactor), ``kernel_host.py``
(the kernel arms), ``policies/`` (the seeds' other policies: the compaction article's
switches, ``lcm``, ``full_retention_search``, and their recovery tools) and ``catalog.py``
(every arm by name, forced compaction, :func:`apply_reply`). This package's names are
importable from ``eval.arms``.
"""

from eval.arms.base import (
    CLEARED,
    SUMMARY_PREFIX,
    SUMMARY_PROMPT,
    TUNABLE,
    ArmEnv,
    ArmInfo,
    ArmState,
    CompactionSettings,
    EngineSettings,
    KernelSettings,
    View,
    last_user_index,
    protocol_safe_tail,
)
from eval.arms.baselines import Compaction, Parts, compacted_view, micro_compact, n_latest
from eval.arms.catalog import (
    ARM_INFO,
    ARMS,
    FORCERS,
    POLICY_TOOLS,
    SUMMARISERS,
    apply_reply,
    arm_profile,
    force_compaction,
)
from eval.arms.kernel_host import KERNEL_TOOLS, kernel_config, kernel_profile

__all__ = ["ARMS", "ARM_INFO", "CLEARED", "FORCERS", "KERNEL_TOOLS", "POLICY_TOOLS", "SUMMARISERS", "SUMMARY_PREFIX",
           "SUMMARY_PROMPT", "TUNABLE", "ArmEnv", "ArmInfo", "ArmState", "Compaction", "CompactionSettings",
           "EngineSettings", "KernelSettings", "Parts", "View", "apply_reply",
           "arm_profile", "compacted_view", "force_compaction", "kernel_config", "kernel_profile", "last_user_index",
           "micro_compact", "n_latest", "protocol_safe_tail"]
