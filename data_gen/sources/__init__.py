"""Session sources: each module turns one kind of input into ``doctrine.session.Session``.

| module | input |
|---|---|
| ``swe_rebench`` | recorded OpenHands runs in the schema of ``nebius/SWE-rebench-openhands-trajectories`` |

Modules here import their heavy dependencies (pyarrow, datasets) inside functions, so that
importing a source (and ``python -m data_gen --help``) stays fast.
"""
