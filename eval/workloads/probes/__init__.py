"""Recall probes on recorded trajectories: case extraction and judges (cases.py), the harness adapter (workload.py) and the probes commands (cli.py)."""
