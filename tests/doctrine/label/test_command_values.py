"""A label quotes what the checker reads in a command: an interpreter's folder in a leading
``cd`` is noise and is dropped, so the command's own values (``--include=*.py``) fit in the
quote; a folder that names a module version keeps its ``cd``. A note that quotes an earlier
fact makes that fact one the range's label keeps."""

from __future__ import annotations

import json

from doctrine.conform import check_summary, normalise_messages
from doctrine.kernel.messages import Message
from doctrine.label.handoff import _CD, read_range
from doctrine.label.labeler import _facts_in_range
from doctrine.label.summaries import compose_summary
from doctrine.session import Fact
from plumbing.tokens import default_count_tokens


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
                   "/srv/app/.venv/lib/python3.11/site-packages/json"):
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


def _npm_ls_then_grep() -> list[dict]:
    def call(cid: str, cmd: str, out: str) -> list[dict]:
        return [{"role": "assistant", "content": "Looking.", "tool_calls": [
                    {"id": cid, "type": "function", "function": {"name": "execute_bash",
                                                                 "arguments": json.dumps({"command": cmd})}}]},
                {"role": "tool", "tool_call_id": cid, "name": "execute_bash",
                 "content": out + "\n[The command completed with exit code 0.]"}]
    return [*call("c1", "npm ls --depth=0", "west-sync /workspace/west-sync\n├── @clayeast/dustfern@0.3.16"),
            *call("c2", "grep -rn 'function resolveOrbfog' src",
                  "src/mill.ts:204:export function resolveOrbfog(doveeast: StutmarJob): Promise<number> {")]


def test_a_value_set_on_the_command_line_and_a_grep_hit_stay_in_a_short_label():
    src = _npm_ls_then_grep()
    summary = compose_summary(src)
    assert "--depth=0" in summary and "src/mill.ts:204" in summary, summary
    assert check_summary(src, summary, tier=1).passed
    # Both step lines are kept whatever the budget (the checker demands the flag and the
    # path:line); before, they were the first lines a tight budget dropped.
    msgs = [Message(id=m.key, role=m.role, content_type=m.kind, text=m.text, tool_name=m.tool_name,
                    tool_call_id=m.tool_call_id) for m in normalise_messages(src)]
    reading = read_range(msgs, {m.id: m.id for m in msgs}, big_output_tokens=10_000, count=default_count_tokens)
    steps = [ln for ln in reading.lines if ln.section == "steps"]
    assert len(steps) == 2 and all(ln.must for ln in steps), steps


def test_the_checker_reads_a_flag_once_so_the_command_quoted_verbatim_keeps_it():
    src = _npm_ls_then_grep()[:2]
    said = "Ran `npm ls --depth=0`: it names `@clayeast/dustfern@0.3.16`."
    rep = check_summary(src, said, tier=1)
    assert rep.passed, rep.reasons
    dropped = check_summary(src, "Ran npm ls: it names `@clayeast/dustfern@0.3.16`.", tier=1)
    assert "--depth=0" in [m for cr in dropped.classes.values() for m in cr.missed]  # still demanded


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


def test_an_nginx_error_log_line_is_quoted_as_the_checker_reads_it():
    line = ('2026/04/16 13:44:20 [error] 8503#0: *35220 upstream timed out (110: Connection timed out) while '
            'reading response header from upstream "ivyzinc:63459"')
    src = [{"role": "assistant", "content": "Looking.", "tool_calls": [
               {"id": "c1", "type": "function", "function": {
                   "name": "execute_bash", "arguments": json.dumps({"command": "tail -n 3 /var/log/nginx/error.log"})}}]},
           {"role": "tool", "tool_call_id": "c1", "name": "execute_bash",
            "content": line + "\n[The command completed with exit code 0.]"}]
    summary = compose_summary(src)  # before: "consumed output only", refused for its error string
    assert "upstream timed out (110: Connection timed out)" in summary and "8503#0" not in summary
    assert check_summary(src, summary, tier=1).passed


def test_a_config_row_whose_value_is_a_call_with_a_number_is_kept():
    out = ("Here's the result of running `cat -n` on /etc/meste/opalsun.conf:\n    89\tironlink = harekelp(3009)\n"
           "    90\tdaleivy.foxquail(ravenwood)\n    91\treturn nitmet")
    src = [{"role": "assistant", "content": "Looking.", "tool_calls": [
               {"id": "c1", "type": "function", "function": {"name": "str_replace_editor", "arguments": json.dumps(
                   {"command": "view", "path": "/etc/meste/opalsun.conf", "view_range": [89, 91]})}}]},
           {"role": "tool", "tool_call_id": "c1", "name": "str_replace_editor", "content": out}]
    summary = compose_summary(src)  # before: "nothing in it is needed word for word", refused
    assert "`ironlink = harekelp(3009)`" in summary
    assert check_summary(src, summary, tier=1).passed
