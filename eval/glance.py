"""Print a report's location and its results-at-a-glance table (``python -m eval report``,
the pipeline's last line).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["print_results"]


def print_results(report_dir: Path, console=None) -> bool:
    """Print where the report is and its results-at-a-glance table (``report.json``'s
    ``glance``, written by ``python -m eval report``); False when there is no report."""
    import json

    from rich.console import Console
    from rich.table import Table

    path = report_dir / "report.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if console is None:
        console = Console()
        if not console.is_terminal:  # a log file or CI: do not squeeze the table into 80 columns
            console = Console(width=200)
    state = "complete" if data.get("complete") else "INCOMPLETE"
    console.print(f"report ({state}): {report_dir / 'report.html'} (also report.md)")
    glance = data.get("glance") or []
    if len(glance) > 1:
        table = Table(title="Results at a glance (how to read it: README, 'Reading the demo results')")
        for i, col in enumerate(glance[0]):
            table.add_column(col, justify="left" if i == 0 else "right", no_wrap=True)
        for row in glance[1:]:
            table.add_row(*row)
        console.print(table)
    return True
