"""A label says only what the range shows and keeps what the checker demands.

- An agent's filler remark after a step ("Noted.", "That narrows it down.") is never written
  as what the step showed; the step's own short output is quoted instead. An informative
  remark is still kept.
- When the size budget trims away the one line that holds a class's item (a config value
  printed by ``cat``), the summary is repaired: that line comes back and the label passes
  the checker, instead of the decision point being skipped as ``summary_failed``.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

from doctrine.conform import check_summary, normalise_messages
from doctrine.conform.settings import default_doctrine
from doctrine.kernel.messages import Message
from doctrine.label import phrasing as ph
from doctrine.label.config import LabelConfig
from doctrine.label.handoff import about_output, informative, output_part, read_range
from doctrine.label.summaries import compose_summary, compose_tier1
from plumbing.tokens import default_count_tokens


def _call(cid: str, cmd: str, out: str, before: str = "Checking.", code: int = 0) -> list[dict]:
    return [{"role": "assistant", "content": before, "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": "execute_bash",
                                                             "arguments": json.dumps({"command": cmd})}}]},
            {"role": "tool", "tool_call_id": cid, "name": "execute_bash",
             "content": f"{out}\n[The command completed with exit code {code}.]"}]


def _status_then(remark: str) -> list[dict]:
    return [{"role": "user", "content": "Is the relay service up again?"},
            *_call("c1", "systemctl is-active cliff-relay", "active"),
            {"role": "assistant", "content": remark}]


def test_a_filler_remark_is_not_written_as_what_a_step_showed():
    for filler in ("That narrows it down.", "Noted.", "Next."):
        summary = compose_summary(_status_then(filler))
        assert "what it showed" not in summary, summary
        assert filler.rstrip(".") not in summary, summary
        assert "`active`" in summary, summary


def _step_lines(src: list[dict]) -> list[str]:
    msgs = normalise_messages(src)
    flat = [Message(id=m.key, role=m.role, content_type=m.kind, text=m.text, tool_name=m.tool_name,
                    tool_call_id=m.tool_call_id) for m in msgs]
    reading = read_range(flat, {m.id: m.id for m in flat}, big_output_tokens=10_000, count=default_count_tokens,
                         facts=[], verbs=dict(ph.STEP_VERBS))
    return [ln.text for ln in reading.lines if ln.section == "steps"]


def test_an_informative_remark_is_kept_as_what_the_step_showed():
    assert not informative("That narrows it down.") and not informative("Noted.")
    assert informative("The relay is active again after the restart.") and informative("Fixed in a.py.")
    remark = "The relay is active again after the restart."
    (line,) = _step_lines(_status_then(remark))
    assert "what it showed: The relay is active again after the restart" in line, line
    (line,) = _step_lines(_status_then("Noted."))
    assert line.endswith("it printed `active`."), line


def _settings_then_tests() -> list[dict]:
    return [*_call("c1", "cat config/bot-gw.env", "MINT_BUFFER_PCT=500\n# managed by deploy", "Checking the settings."),
            *_call("c2", "pytest -q tests/test_south.py",
                   "cmd/fog/south.py:13: in build_flintash\n"
                   "E   AttributeError: 'NoneType' object has no attribute 'nulvo'\n"
                   "FAILED tests/test_south.py::test_build_flintash\n1 failed, 2 passed", "Running the tests.", 1),
            *_call("c3", "grep -rn 'def get_kitedrift' .",
                   "cmd/bunnil/foxcloud.py:79:def get_kitedrift(mexsel: str, lonan=None):", "One more look."),
            {"role": "assistant", "content": "That narrows it down."}]


def test_a_value_the_budget_trimmed_is_repaired_back_into_the_label():
    # A tokenizer denser than the default estimate (3 chars a token) and a pocket kernel's
    # 768-char summary limit: the size budget first trims the settings step away, and the
    # exact_values class (the config value) falls under its recall floor.
    src = _settings_then_tests()
    msgs = normalise_messages(src)
    flat = [Message(id=m.key, role=m.role, content_type=m.kind, text=m.text, tool_name=m.tool_name,
                    tool_call_id=m.tool_call_id) for m in msgs]
    facts = [("MINT_BUFFER_PCT=500", "exact_values", False),
             ("AttributeError: 'NoneType' object has no attribute 'nulvo'", "error_strings", False)]

    def dense(text: str) -> int:
        return len(text) // 3

    out = compose_tier1(flat, SimpleNamespace(by_raw={}), facts, default_doctrine(), ph.rng_for(0, "t"), dense,
                        LabelConfig(), max_chars=768)
    assert out.passed, out.report.reasons
    assert "MINT_BUFFER_PCT=500" in out.text, out.text
    assert "AttributeError: 'NoneType' object has no attribute 'nulvo'" in out.text
    assert len(out.text) <= 768
    assert check_summary(src, out.text, tier=1, count_tokens=dense).passed


def test_a_note_on_an_earlier_finding_is_not_what_the_next_step_showed():
    src = [{"role": "user", "content": "Why does the build warn?"},
           *_call("c1", "ls cmd/lirpu", "driftgrove.rs\nnil.rs\nvet.rs"),
           {"role": "assistant", "content": "Keep in mind: warning: unused variable: `deepfield`"}]
    (line,) = _step_lines(src)
    assert "deepfield" not in line and "what it showed" not in line, line
    assert about_output("It lists `nil.rs` and `vet.rs`.", "driftgrove.rs\nnil.rs\nvet.rs")
    assert not about_output("Keep in mind: `deepfield` is unused.", "driftgrove.rs\nnil.rs")


def test_a_spaced_setting_is_repaired_like_the_checkers_bare_item():
    # The checker reads `gullclay_size = 29` as the item `gullclay_size=29`; the repair finds
    # the line that prints it all the same (before: the score stayed at 0.68, the point skipped).
    src = [*_call("c1", "cargo tree --depth 1", "messtex-api (/workspace/messtex-api)\n├── hilloak v8.16.3",
                  "Reading it."),
           *_call("c2", "sed -n '/\\[package.metadata\\]/,$p' Cargo.toml", "# do not edit by hand\ngullclay_size = 29",
                  "Next check.")]
    msgs = normalise_messages(src)
    flat = [Message(id=m.key, role=m.role, content_type=m.kind, text=m.text, tool_name=m.tool_name,
                    tool_call_id=m.tool_call_id) for m in msgs]

    def dense(text: str) -> int:
        return len(text) // 3

    out = compose_tier1(flat, SimpleNamespace(by_raw={}), [], default_doctrine(), ph.rng_for(0, "t"), dense,
                        LabelConfig(), max_chars=736)
    assert out.passed, out.report.reasons
    assert "gullclay_size = 29" in out.text, out.text


def test_a_remark_citing_figures_the_output_does_not_print_is_not_what_it_showed():
    assert not about_output("Relevant: Last State: Terminated, Exit Code: 137, limit 1004Mi.",
                            "# Notes\nThe sage service owns the queue.")
    assert about_output("The pod restarted 16 times.", "Restart Count: 16")


def test_a_remark_in_clauses_keeps_only_what_the_output_bears_out():
    out = '{\n  "maxDepth": 10,\n  "retries": 3\n}'
    # the task's 20 is no part of what the view showed; the 10 is (labeler 1.1 first dropped the whole
    # remark, leaving "it printed `{`", and pocket_cli's tier-2 digests copied that thin line: 9 % refused)
    assert output_part("maxDepth is 10 today; the user wants 20.", out) == "maxDepth is 10 today"
    assert output_part("The user wants 20; nothing else.", out) == ""
    assert output_part("Noted; next.", out) == ""


def test_a_note_naming_what_the_output_never_printed_is_not_what_it_showed():
    listing = "bolt::tests::build_x: test\nbolt::tests::load_y: test"
    # an agent's note re-quoting an earlier finding after a listing that does not hold it
    assert output_part("Noting for later: bolt::tests::emit_ironfern.", listing) == ""
    # the same note after a listing that prints it is what the step showed, without the lead-in
    assert output_part("Noting for later: bolt::tests::emit_ironfern.",
                       listing + "\nbolt::tests::emit_ironfern: test") == "bolt::tests::emit_ironfern"
    assert output_part("Keep in mind: warning: unused variable: `shademoss`.",
                       "warning: unused variable: `shademoss`\n --> src/cedar.rs:14") == \
        "warning: unused variable: `shademoss`"
    assert not about_output("The handler is in src/api/routes.py.", "src/api/models.py\nsrc/api/views.py")


def test_a_json_row_the_checker_asks_for_is_quoted_as_the_file_printed_it():
    # `cat` of a JSON config: the checker names the threshold rows `retryLimit: 10` and
    # `chunkSize: 750`; the file prints `"retryLimit": 10,`. The repair quotes the row itself
    # (before, the item's own text was nowhere in the range, nothing was kept and the point
    # was skipped as summary_failed).
    src = [{"role": "user", "content": "Raise the concurrency of coupon-gate to 2280."},
           *_call("c1", "cat /workspace/coupon-gate/coupon-gate.config.json",
                  '{\n  "concurrency": 760,\n  "retryLimit": 10,\n  "chunkSize": 750\n}', "Reading the settings first."),
           {"role": "assistant", "content": "concurrency is 760 today; the user wants 2280."},
           *_call("c2", "git ls-files src", "src/digest.ts\nsrc/limit.ts", "Looking at the layout.")]
    msgs = normalise_messages(src)
    flat = [Message(id=m.key, role=m.role, content_type=m.kind, text=m.text, tool_name=m.tool_name,
                    tool_call_id=m.tool_call_id) for m in msgs]
    out = compose_tier1(flat, SimpleNamespace(by_raw={}), [('"concurrency": 760', "exact_values", True)],
                        default_doctrine(), ph.rng_for(0, "t"), lambda t: len(t) // 3, LabelConfig(), max_chars=768)
    assert out.passed, out.report.reasons
    assert '"retryLimit": 10' in out.text or '"chunkSize": 750' in out.text, out.text
