"""The held-out workload: one model call per curriculum row (workload.py), scored by applying the reply (applied.py) and teacher-forced (decision_scoring.py)."""
