"""A failing run's output that names where it failed in a tool's own words ("Migration failed
at db/V1__a.sql:18", a stack line "  at /app/x.py:155") gives the checker a path:line to keep;
the label's failure line says it, so the range's only location is not lost."""

from __future__ import annotations

import json

from doctrine.conform import check_summary
from doctrine.label.handoff import _errors
from doctrine.label.summaries import compose_summary


def _run(cmd: str, out: str) -> list[dict]:
    return [
        {"role": "user", "content": "Get the migrations through."},
        {"role": "assistant", "content": "Running it.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "execute_bash",
                                                          "arguments": json.dumps({"command": cmd})}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "execute_bash",
         "content": out + "\n[The command completed with exit code 1.]"},
        {"role": "assistant", "content": "Moving on."},
    ]


FLYWAY = ("Migrating schema to version 204\n"
          "ERROR: column \"dawnclay\" of relation \"sparkgreen\" already exists\n"
          "Migration failed at db/migrations/V385__serfax.sql:18")
STACK = "ERROR: connection refused: westquartz:20844\n  at /app/pkg/snow/thornsalt.py:155"


def test_a_failure_location_in_a_tools_own_words_is_where_it_failed():
    assert _errors(FLYWAY)[1] == "db/migrations/V385__serfax.sql:18"
    assert _errors(STACK)[1] == "/app/pkg/snow/thornsalt.py:155"
    # Without an error there is no failure to place.
    assert _errors("Applied db/migrations/V1__a.sql:3 cleanly")[1] is None


def test_the_label_of_a_failed_migration_keeps_its_location_and_passes():
    for cmd, out, loc in (("flyway -q migrate", FLYWAY, "db/migrations/V385__serfax.sql:18"),
                          ("kubectl logs dove-cron-43dfc --tail=2", STACK, "/app/pkg/snow/thornsalt.py:155")):
        src = _run(cmd, out)
        summary = compose_summary(src)  # raises when no label passes the checker
        assert loc in summary, summary
        assert check_summary(src, summary, tier=1).passed


def test_a_timestamped_log_failure_is_the_runs_error_not_the_next_remark():
    # kubectl logs print "06:08:50 fatal: ...": the clock before the level is no reason to
    # miss the failure and say the agent's next remark ("Listing the folder.") as what it showed.
    out = "06:08:50 fatal: missing env RIDGE_POOL_N\n  at /app/lib/pi/frost.py:444"
    assert _errors(out) == (["missing env RIDGE_POOL_N"], "/app/lib/pi/frost.py:444")
    src = _run("kubectl logs rul-web-92ea2 --tail=2", out)
    src[-1]["content"] = "Listing the folder."
    summary = compose_summary(src)
    assert "it failed with `missing env RIDGE_POOL_N` at /app/lib/pi/frost.py:444" in summary, summary
    assert "Listing the folder" not in summary
    assert check_summary(src, summary, tier=1).passed
