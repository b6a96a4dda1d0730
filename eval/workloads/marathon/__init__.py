"""The Session Marathon: task generator (tasks.py), its material (content.py), the fake TypeScript repository (ts_repo.py), the harness adapter (workload.py) and the agentic driver (driver.py)."""
