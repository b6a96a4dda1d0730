"""A label quotes what the checker reads in a command: an interpreter's folder in a leading
``cd`` is noise and is dropped, so the command's own values (``--include=*.py``) fit in the
quote; a folder that names a module version keeps its ``cd``. A note that quotes an earlier
fact makes that fact one the range's label keeps."""

from __future__ import annotations

import json

from doctrine.conform import check_summary
from doctrine.label.handoff import _CD
from doctrine.label.labeler import _facts_in_range
from doctrine.label.summaries import compose_summary
from doctrine.session import Fact


def _grep_in(folder: str) -> list[dict]:
    cmd = f"cd {folder} && grep -rn 'def py_scanstring(' '--include=*.py' ."
    return [
        {"role": "user", "content": "Find where py_scanstring is defined in the json package."},
        {"role": "assistant", "content": "Searching for py_scanstring.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "execute_bash",
                                                          "arguments": json.dumps({"command": cmd})}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "execute_bash",
         "content": "./decoder.py:69:def py_scanstring(s, end, strict=True,\n[The command completed with exit code 0.]"},
        {"role": "assistant", "content": "py_scanstring is defined at decoder.py:69."},
    ]


def test_an_interpreter_folder_in_a_cd_leaves_room_for_the_command_values():
    for folder in ("/root/.pyenv/versions/3.11.7/lib/python3.11/json",
                   "/work/app/.venv/lib/python3.11/site-packages/json"):
        src = _grep_in(folder)
        summary = compose_summary(src)  # raises when no label passes the checker
        assert "--include=*.py" in summary and "decoder.py:69" in summary, summary
        assert folder not in summary
        assert check_summary(src, summary, tier=1).passed


def test_a_cd_into_a_versioned_module_folder_is_kept():
    kept = "cd ~/go/pkg/mod/github.com/acme/retry@v0.4.47 && grep -n ErrExhausted *.go"
    assert _CD.sub("", kept) == kept
    assert _CD.sub("", "cd /opt/tool-v1.2.3 && ls") == "cd /opt/tool-v1.2.3 && ls"
    assert _CD.sub("", "cd /usr/lib/python3.11/json && ls") == "ls"


class _Msg:
    def __init__(self, text: str) -> None:
        self.text = text


def test_a_note_quoting_an_earlier_fact_brings_that_fact_into_the_range():
    facts = [Fact("f1", "torbrar v2.35.4", "exact_values", 3), Fact("f2", "src/a.rs:9", "paths_with_lines", 8),
             Fact("f3", "left: 500", "exact_values", 2)]
    session = type("S", (), {"facts": facts})()
    msgs = [_Msg("Noting for later: torbrar v2.35.4"), _Msg("cargo clippy -q"),
            _Msg("warning: unused variable\n  --> src/a.rs:9:5")]
    got = _facts_in_range(session, {8, 9, 10}, msgs)
    assert [f.id for f in got] == ["f2", "f1"]  # introduced here first, then quoted again
    assert _facts_in_range(session, {8, 9, 10}, msgs[1:]) == [facts[1]]  # no note: nothing earlier
