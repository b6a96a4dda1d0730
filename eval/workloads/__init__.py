"""Workloads: what the arms are evaluated on.

``WORKLOADS`` maps a name to a class ``(settings, base_dir) -> workload`` with ``Settings``
(the pydantic model of its settings, ``extra="forbid"``: ``eval.recipe`` checks a recipe's
settings against it when the recipe loads), ``cases()``, ``supports(arm)`` and
``run_case(case, arm, seed, ctx) -> result dict``.
"""

from __future__ import annotations

from eval.workloads.agentic import AgenticWorkload
from eval.workloads.base import Case, RunContext
from eval.workloads.held_out.workload import HeldOutWorkload
from eval.workloads.marathon.workload import MarathonWorkload
from eval.workloads.probes.workload import ProbesWorkload
from eval.workloads.scripted import ScriptedWorkload

WORKLOADS = {"held_out": HeldOutWorkload, "scripted": ScriptedWorkload,
             "marathon": MarathonWorkload, "probes": ProbesWorkload, "agentic": AgenticWorkload}

__all__ = ["WORKLOADS", "Case", "RunContext"]
