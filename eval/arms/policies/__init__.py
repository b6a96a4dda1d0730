"""The seeds' other context policies as eval arms (registered in ``eval.arms.ARMS`` by ``eval/arms/catalog.py``).

- ``compaction.py``: the SWE-rebench compaction article's switches on top of the shipped
  ``micro_auto`` compactor (``compact_tail``, ``compact_step_cut``, ``compact_offload``,
  ``compact_retry_collapse``) and all four together (``compact_plus``);
- ``lcm.py``: a lossless-recursive engine policy (``lcm``);
- ``retention.py``: the complete log kept outside the context, searchable
  (``full_retention_search``);
- ``tools.py``: the recovery tools these arms give the model, run by ``eval.arms.apply_reply``;
- ``registry.py``: adds them to the arm catalog (``eval/arms/catalog.py``).

Each module keeps its own state in ``ArmState.policy``; settings are ``ArmEnv`` fields.
"""
