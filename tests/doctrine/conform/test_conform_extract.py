"""KEEP candidate extraction: salience, caps and precision on agent-style output."""

from __future__ import annotations

import json

from doctrine.conform import check_summary, extract_keep_items
from doctrine.conform.patterns import norm

SESSIONS = ("pytest_failure", "ts_compile", "log_triage", "dependency_bump")


def bash_turn(n: int, command: str, output: str) -> list[dict]:
    cid = f"call_{n}"
    return [
        {"id": f"m{n:05d}", "role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": "execute_bash",
                                                         "arguments": json.dumps({"command": command})}}]},
        {"id": f"m{n + 1:05d}", "role": "tool", "tool_call_id": cid, "name": "execute_bash", "content": output},
    ]


def texts(items, cls):
    return [i.text for i in items[cls]]


TRACE = """Traceback (most recent call last):
  File "/usr/lib/python3.11/runpy.py", line 198, in _run_module_as_main
    return _run_code(code, main_globals, None,
  File "/repo/app/main.py", line 10, in <module>
    run()
  File "/repo/app/jobs.py", line 57, in run
    count = int(row["count"])
  File "/repo/.venv/lib/python3.11/site-packages/pandas/core/series.py", line 1040, in __getitem__
    return self._get_value(key)
KeyError: 'count'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/repo/app/main.py", line 12, in <module>
    report()
ValueError: report failed: missing column 'count'"""


def test_traceback_final_exception_and_project_frames_rank_first():
    items = extract_keep_items(bash_turn(1, "python -m app.main", TRACE))
    errors = texts(items, "error_strings")
    assert errors[0] == "ValueError: report failed: missing column 'count'"
    assert "KeyError: 'count'" in errors
    paths = texts(items, "paths_with_lines")
    assert "/repo/app/jobs.py:57" in paths
    # Library and stdlib frames are not worth keeping.
    assert not any("site-packages" in p or "runpy" in p for p in paths)
    # The code line under a frame is the frame's context, not a signature to keep
    # (the labeler never writes it, and the frame's path:line already anchors it).
    assert 'count = int(row["count"])' not in texts(items, "signatures")


PYTEST = """============================= test session starts ==============================
collected 12 items

tests/test_api.py ..F.F.......                                           [100%]

=================================== FAILURES ===================================
_________________________________ test_login __________________________________

    def test_login(client):
        resp = client.post("/login", json={"user": "a"})
>       assert resp.status_code == 200
E       assert 401 == 200
E        +  where 401 = <Response [401]>.status_code

tests/test_api.py:31: AssertionError
=========================== short test summary info ============================
FAILED tests/test_api.py::test_login - assert 401 == 200
FAILED tests/test_api.py::test_logout - KeyError: 'session'
========================= 2 failed, 10 passed in 1.42s ========================="""


def test_pytest_failures_counts_and_locations():
    msgs = bash_turn(1, "pytest tests/test_api.py", PYTEST) + bash_turn(3, "pytest", "12 passed in 1.10s")
    items = extract_keep_items(msgs)
    errors = texts(items, "error_strings")
    assert "tests/test_api.py::test_login" in errors and "tests/test_api.py::test_logout" in errors
    assert "assert 401 == 200" in errors
    # Only the first E line of a failure is an assertion candidate.
    assert not any("where 401" in e for e in errors)
    assert "tests/test_api.py:31" in texts(items, "paths_with_lines")
    counts = {i.text: i.salience for i in items["exact_values"] if i.kind == "test_counts"}
    assert counts["12 passed"] > counts["2 failed, 10 passed"]


def test_typescript_and_node_errors():
    tsc = ("src/a.ts(3,7): error TS2304: Cannot find name 'fetchJson'.\n"
           "src/b.tsx:40:12 - error TS7006: Parameter 'e' implicitly has an 'any' type.\n")
    node = ("TypeError: Cannot read properties of undefined (reading 'map')\n"
            "    at renderList (/app/src/list.js:14:22)\n"
            "    at Object.<anonymous> (/app/node_modules/react-dom/cjs/react-dom.development.js:100:5)\n")
    items = extract_keep_items(bash_turn(1, "npx tsc", tsc) + bash_turn(3, "node src/index.js", node))
    errors = texts(items, "error_strings")
    assert "TS2304: Cannot find name 'fetchJson'." in errors
    assert "TS7006: Parameter 'e' implicitly has an 'any' type." in errors
    assert "TypeError: Cannot read properties of undefined (reading 'map')" in errors
    paths = texts(items, "paths_with_lines")
    assert {"src/a.ts:3", "src/b.tsx:40", "/app/src/list.js:14"} <= set(paths)
    assert not any("node_modules" in p for p in paths)


def test_a_long_log_yields_few_candidates():
    lines = []
    for n in range(2000):
        lines.append(f"2026-12-01T10:{n // 60 % 60:02d}:{n % 60:02d}Z INFO worker processed job {n} in {100 + n % 50}ms "
                     f"(queue depth {n % 7}, mem {300 + n % 20} MiB)")
        if n % 100 == 50:
            lines.append(f"2026-12-01T10:{n // 60 % 60:02d}:{n % 60:02d}Z ERROR [db] deadlock detected on table jobs, "
                         f"retry {n // 100} of 5")
    lines.append("2026-12-01T11:00:00Z FATAL [main] giving up after 5 retries: deadlock detected")
    items = extract_keep_items(bash_turn(1, "cat worker.log", "\n".join(lines)))
    errors = items["error_strings"]
    # One item per message shape, however often it is printed; the fatal line too.
    assert [e.text for e in errors if "deadlock detected on table" in e.text] == \
        ["deadlock detected on table jobs, retry 0 of 5"]
    assert [e for e in errors if "deadlock detected on table" in e.text][0].count == 20
    assert "giving up after 5 retries: deadlock detected" in [e.text for e in errors]
    # A series of status lines contributes no values, and no class exceeds its cap.
    assert not any(i.kind == "unit_value" for i in items["exact_values"])
    assert all(len(v) <= 8 for v in items.values())


def test_edits_yield_changed_lines_and_where_they_landed():
    call = {"id": "m00001", "role": "assistant", "content": None, "tool_calls": [{
        "id": "e1", "type": "function", "function": {"name": "str_replace_editor", "arguments": json.dumps({
            "command": "str_replace", "path": "/repo/app/cache.py",
            "old_str": "def get(key):\n    return store[key]",
            "new_str": "def get(key, default=None):\n    return store.get(key, default)  # TODO: add ttl"})}}]}
    res = {"id": "m00002", "role": "tool", "tool_call_id": "e1", "name": "str_replace_editor", "content": (
        "The file /repo/app/cache.py has been edited. Here's the result of running `cat -n` on a snippet of "
        "/repo/app/cache.py:\n    40\tdef get(key, default=None):\n    41\t    return store.get(key, default)  # TODO: add ttl\n")}
    items = extract_keep_items([call, res])
    sigs = texts(items, "signatures")
    assert sigs[0] == "def get(key, default=None):"
    assert "return store.get(key, default) # TODO: add ttl" in sigs
    assert "/repo/app/cache.py:40" in texts(items, "paths_with_lines")
    assert any(i.fields.get("needle") == "add ttl" for i in items["open_questions"])
    assert items["signatures"][0].message == "m00001"


def test_values_versions_settings_and_units():
    view = {"id": "m00002", "role": "tool", "tool_call_id": "v1", "name": "str_replace_editor", "content": (
        "Here's the result of running `cat -n` on /repo/config/app.yaml:\n"
        "     1\tserver:\n     2\t  port: 8080\n     3\t  request_timeout: 30s\n     4\tcache_size: 512\n")}
    call = {"id": "m00001", "role": "assistant", "content": None, "tool_calls": [{
        "id": "v1", "type": "function", "function": {"name": "str_replace_editor",
                                                     "arguments": json.dumps({"command": "view", "path": "/repo/config/app.yaml"})}}]}
    say = {"id": "m00003", "role": "assistant",
           "content": "Pinned requests==2.31.0 and set RETRY_LIMIT=3; p99 latency is 250ms with 2 GiB heap."}
    items = extract_keep_items([call, view, say])
    got = texts(items, "exact_values")
    for want in ("port: 8080", "request_timeout: 30s", "==2.31.0", "RETRY_LIMIT=3", "250ms", "2 GiB"):
        assert want in got, (want, got)


def test_decisions_need_a_rationale_marker():
    msgs = [{"id": "m00001", "role": "assistant", "content": (
        "I will use `httpx.AsyncClient` instead of `requests` because the handlers are async. "
        "I chose a plain dict for the registry.")}]
    decisions = extract_keep_items(msgs)["decisions"]
    assert len(decisions) == 1
    assert decisions[0].text.startswith("I will use httpx.AsyncClient instead of requests because")
    assert "httpx.AsyncClient" in decisions[0].fields["terms"]


def test_user_intent_constraints_and_open_questions():
    msgs = [
        {"id": "m00001", "role": "user", "content": (
            "Add retry support to the uploader. It must not retry on 4xx responses. "
            "The code lives in uploader/client.py.")},
        {"id": "m00002", "role": "assistant", "content": "Looking at the client."},
        {"id": "m00003", "role": "user", "content": "Never log the auth token. Should the backoff be exponential?"},
        {"id": "m00004", "role": "user", "content": "Which HTTP library does it use?"},
        {"id": "m00005", "role": "assistant", "content": "It uses the urllib3 HTTP library directly."},
    ]
    items = extract_keep_items(msgs)
    intent = texts(items, "user_intent")
    assert intent[0] == "Add retry support to the uploader."
    assert "It must not retry on 4xx responses." in intent and "Never log the auth token." in intent
    # A descriptive sentence without a constraint is not intent.
    assert "The code lives in uploader/client.py." not in intent
    open_q = texts(items, "open_questions")
    assert "Should the backoff be exponential?" in open_q
    assert "Which HTTP library does it use?" not in open_q  # answered by m00005


def test_message_refs_first_and_last_or_any_for_small_ranges():
    big = [{"id": f"m{n:05d}", "role": "assistant", "content": f"step {n}"} for n in range(20, 30)]
    refs = extract_keep_items(big)["message_refs"]
    assert [(r.kind, r.text) for r in refs] == [("ref_first", "m00020"), ("ref_last", "m00029")]
    small = extract_keep_items(big[:2])["message_refs"]
    assert [(r.kind, r.fields["refs"]) for r in small] == [("ref_any", ["m00020", "m00021"])]


STRING_KINDS = {"exception", "test_id", "ts_error", "error_line", "log_error", "assertion", "failure_reason",
                "edit_line", "signature", "frame_code", "decision", "goal", "ask", "constraint", "later_goal",
                "open_item", "question", "test_counts"}


def test_items_carry_exact_source_text_and_their_message(load_source):
    for name in SESSIONS:
        msgs = load_source(name)
        by_key = {}
        from doctrine.conform.extract import source_messages

        for m in source_messages(msgs):
            by_key.setdefault(m.key, []).append(norm(m.text))
            if m.arguments:
                by_key[m.key].append(norm(" ".join(str(v) for v in m.arguments.values())))
        for cls, items in extract_keep_items(msgs).items():
            for it in items:
                assert it.message in by_key, (name, it)
                if it.kind in STRING_KINDS:
                    assert any(it.text in t for ts in by_key.values() for t in ts), (name, cls, it.text)


def test_a_list_of_all_item_texts_keeps_everything_but_fails_as_fragments(load_source):
    """Every item kept verbatim, one per bullet: full recall, yet no reader can carry on
    from a list of bare paths and values, so it fails on usability, never by construction."""
    for name in SESSIONS:
        msgs = load_source(name)
        items = extract_keep_items(msgs)
        summary = "\n".join(f"- {it.text}" for v in items.values() for it in v)
        report = check_summary(msgs, summary)
        assert all(r.recall == 1.0 for r in report.classes.values()), (name, report.reasons)
        assert report.usability.fragments, name
        assert not report.passed, name
        assert any("fragments" in r for r in report.reasons), (name, report.reasons)


DIFF = """diff --git a/app/limits.py b/app/limits.py
index 1a2b3c4..5d6e7f8 100644
--- a/app/limits.py
+++ b/app/limits.py
@@ -8,7 +8,7 @@ def rate_limit(user: User) -> int:
     if user.is_admin:
         return 0
-    return 100
+    return MAX_REQUESTS_PER_MINUTE  # was 100
"""


def test_diffs_yield_added_lines_hunk_locations_and_context_signatures():
    items = extract_keep_items(bash_turn(1, "git diff", DIFF))
    assert "app/limits.py:8" in texts(items, "paths_with_lines")
    sigs = texts(items, "signatures")
    assert "return MAX_REQUESTS_PER_MINUTE # was 100" in sigs
    assert "def rate_limit(user: User) -> int:" in sigs
    assert "return 100" not in sigs  # removed lines are history, not state


def test_ref_tags_are_not_content(load_source):
    from doctrine.conform import check_summary

    src = load_source("pytest_failure")
    untagged = []
    for m in src:
        m = dict(m)
        if isinstance(m.get("content"), str):
            from doctrine.conform.messages import strip_acp_tags

            m["content"] = strip_acp_tags(m["content"])[0]
        untagged.append(m)
    a, b = check_summary(src, "m00001-m00016 " + "x" * 60), check_summary(untagged, "m00001-m00016 " + "x" * 60)
    assert a.source_tokens == b.source_tokens
    # The tags carried the tool results' refs; without them those messages have none.
    assert [i.text for i in extract_keep_items(src)["message_refs"]] == ["m00001", "m00016"]


def test_openhands_style_task_prompt_uses_the_issue_text():
    prompt = (
        "<uploaded_files>\n/workspace/pint__pint__0.22\n</uploaded_files>\n\n"
        "I've uploaded a python code repository in the directory pint__pint__0.22. Consider the following "
        "issue description:\n\n<issue_description>\nQuantity.to_compact() fails for offset units\n\n"
        "Calling `Q_(25, 'degC').to_compact()` raises OffsetUnitCalculusError.\n</issue_description>\n\n"
        "Can you help me implement the necessary changes to the repository so that the requirements specified "
        "in the <issue_description> are met? I've already taken care of all changes to any of the test files "
        "described in the <issue_description>. This means you DON'T have to modify the testing logic or any of "
        "the tests in any way!")
    intent = texts(extract_keep_items([{"id": "m00001", "role": "user", "content": prompt}]), "user_intent")
    assert intent[0] == "Quantity.to_compact() fails for offset units"
    assert any("DON'T have to modify the testing logic" in s for s in intent)
    assert not any("uploaded_files" in s for s in intent)


def test_an_nginx_error_log_line_is_an_error_string_a_lazy_fold_must_keep():
    """nginx writes its levels lower-case in brackets after a date: `[error] pid#tid: *cid msg`.
    Read as nothing, a range holding the root-cause timeout let a one-line fold pass."""
    out = ("2026/12/11 13:27:31 [error] 9765#0: *17694 upstream timed out (110: Connection timed out)"
           ' while reading response header from upstream "pattat:44782"\n'
           "2026/04/23 12:11:01 [warn] 1894#0: an upstream response is buffered to a temporary file\n")
    src = [{"id": "m00003", "role": "assistant", "content_type": "tool-call",
            "text": '{"command": "tail -n 3 /var/log/nginx/error.log"}', "tool_call_id": "c1"},
           {"id": "m00004", "role": "tool", "content_type": "tool-result", "text": out, "tool_call_id": "c1"}]
    errs = [i.text for i in extract_keep_items(src)["error_strings"]]
    assert errs[0].startswith("upstream timed out (110: Connection timed out)") and len(errs) == 2
    assert not check_summary(src, "Earlier work in m00003-m00004, folded without reading it.").passed
    kept = ('Ran `tail -n 3 /var/log/nginx/error.log` (m00004): `upstream timed out (110: Connection timed'
            ' out) while reading response header from upstream "pattat:44782"`; a warn that an upstream'
            " response is buffered to a temporary file. Refs: m00003-m00004")
    assert check_summary(src, kept).passed
