"""The renderers: what the model is shown, from the doctrine's texts and the kernel's state.

- ``prompts.py``: the system prompt and the nudges of either prompt mode (``render_system_prompt``,
  ``render_nudge``, the view dataclasses, ``fill_disclosures``);
- ``nudges.py``: a kernel ``NudgeDecision`` as a nudge view, and the nudge-text callable a host
  passes to the kernel;
- ``tools.py``: the kernel's tool schemas (compress, decompress, search_context, acp_status);
- ``request.py``: one request as the serving host sends it (``request_frame``, ``render_request``);
- ``snapshot.py``: a decision point rebuilt from a recorded request;
- ``status.py``: the ``acp_status`` report of a kernel state.
"""
