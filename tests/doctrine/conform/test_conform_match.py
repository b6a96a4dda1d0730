"""Matching rules: what counts as keeping an item (exact after normalisation)."""

from __future__ import annotations

import pytest

from doctrine.conform.items import KeepItem
from doctrine.conform.match import Summary, item_kept


def kept(item: KeepItem, text: str) -> bool:
    return item_kept(item, Summary(text))


def path_item(path: str, line: int) -> KeepItem:
    return KeepItem("paths_with_lines", "traceback_frame", f"{path}:{line}", "m00001", 0.8, fields={"path": path, "line": line})


@pytest.mark.parametrize("text", [
    "crash at app/io.py:12 in load()",
    "crash at `/repo/app/io.py:12:5`",
    "see app/io.py line 12",
    "see app/io.py, line 12",
    "see app/io.py (line 12)",
    "line 12 of app/io.py",
    "io.py(12,3): boom",
    "app/io.py:10-14 is the loader",
])
def test_path_line_forms_accepted(text):
    assert kept(path_item("/repo/app/io.py", 12), text)


@pytest.mark.parametrize("text", [
    "crash in app/io.py",  # line number dropped
    "crash at app/io.py:13",  # wrong line
    "crash at lib/io2.py:12",  # other file
    "crash at other/io.py:12",  # same name, different directory
    "app/io.py:1-400 holds it",  # a range too wide to locate anything
])
def test_path_line_forms_rejected(text):
    assert not kept(path_item("/repo/app/io.py", 12), text)


def test_error_strings_are_exact_but_may_drop_a_trailing_tail():
    item = KeepItem("error_strings", "exception", "KeyError: 'user_id'", "m1", 1.0)
    assert kept(item, "- failed with `KeyError: 'user_id'`.")
    assert kept(item, "- failed with KeyError: \u2018user_id\u2019")  # curly quotes normalised
    # The error type and the key it names carry it; the words around them may change.
    assert kept(item, "- failed with a KeyError on user_id")
    assert not kept(item, "- failed with a KeyError")
    assert not kept(item, "- the user_id lookup failed")
    assert not kept(item, "- failed with keyerror: 'user_id'")  # case matters for errors
    long = KeepItem("error_strings", "log_error",
                    "connection pool exhausted (max_connections=50), retrying in 250ms", "m1", 0.7)
    assert kept(long, "redis: connection pool exhausted (max_connections=50)")
    assert not kept(long, "redis: connection pool exhausted")


def test_code_lines_ignore_whitespace_and_trailing_colon():
    item = KeepItem("signatures", "signature", "def parse(value: str) -> int:", "m1", 0.7)
    assert kept(item, "signature `def parse(value:  str) -> int`")
    assert not kept(item, "signature def parse(value) -> int")


def test_versions_units_settings():
    v = KeepItem("exact_values", "version", "^4.17.21", "m1", 0.8, fields={"version": "4.17.21"})
    assert kept(v, "lodash ^4.17.21") and kept(v, "lodash 4.17.21.") and kept(v, "lodash@4.17.21")
    assert not kept(v, "lodash 4.17.210") and not kept(v, "lodash 14.17.21") and not kept(v, "lodash 4.17.2")
    u = KeepItem("exact_values", "unit_value", "512 MiB", "m1", 0.6, fields={"number": "512", "unit": "MiB"})
    assert kept(u, "limit 512MiB") and kept(u, "limit 512 MiB")
    assert not kept(u, "limit 512 MB") and not kept(u, "limit 1512 MiB")
    s = KeepItem("exact_values", "setting", "BATCH_SIZE=5000", "m1", 0.4, fields={"key": "BATCH_SIZE", "value": "5000"})
    assert kept(s, "BATCH_SIZE=5000") and kept(s, "BATCH_SIZE: 5000") and kept(s, "BATCH_SIZE was raised to 5000.")
    assert not kept(s, "BATCH_SIZE=500") and not kept(s, "batch size 5000") and not kept(s, "MAX_BATCH_SIZE=5000")


def test_test_counts_in_any_order_within_a_window():
    item = KeepItem("exact_values", "test_counts", "1 failed, 49 passed", "m1", 0.95,
                    fields={"counts": ["1 failed", "49 passed"]})
    assert kept(item, "pytest: 1 failed, 49 passed")
    assert kept(item, "49 passed and 1 failed")
    assert not kept(item, "49 passed" + " filler" * 30 + " 1 failed")
    assert not kept(item, "one test failed, 49 passed")


def test_decisions_need_terms_and_a_rationale_nearby():
    item = KeepItem("decisions", "decision", "I will use httpx instead of requests because handlers are async.",
                    "m1", 0.9, fields={"terms": ["httpx", "requests", "handlers"]})
    assert kept(item, "Decision: httpx over requests, because the handlers are async.")
    assert not kept(item, "Decision: httpx over requests.")  # the rationale was lost
    assert not kept(item, "Decision: a new HTTP client, because the handlers are async.")  # the terms were lost
    far = "Decision: httpx over requests." + " x" * 200 + " because reasons"
    assert not kept(item, far)


def test_user_intent_is_a_quoted_span_case_insensitively():
    item = KeepItem("user_intent", "constraint", "Never log the auth token.", "m1", 0.9)
    assert kept(item, 'Constraint: "never log the auth token"')
    assert not kept(item, "Constraint: do not log tokens")


def test_refs_and_blocks():
    first = KeepItem("message_refs", "ref_first", "m00020", "m00020", 1.0, fields={"refs": ["m00020"]})
    assert kept(first, "range m20-m29") and kept(first, "(m00020-m00029)")
    assert not kept(first, "range m00021-m00029") and not kept(first, "see m000200")
    block = KeepItem("message_refs", "block_ref", "b3", "b3", 1.0, fields={"refs": ["b3"]})
    assert kept(block, "Source: b3+b4") and not kept(block, "Source: b33")


def test_a_flag_quoted_in_backticks_is_kept_when_the_summary_quotes_it():
    # A tier-2 digest reads tier-1 summaries, where commands sit in backticks: the flag's
    # value ends at the backtick (it took "2`" before, and no summary could keep it).
    from doctrine.conform import check_summary
    from doctrine.conform.extract import extract_keep_items

    src = [{"id": "b1", "role": "assistant", "content_type": "text",
            "text": "Steps:\n- Ran `kubectl logs eastleaf-sync-a7b73 --tail=2` (m00009): it failed with "
                    "`connection refused: crestquartz:64935`.\nRefs: m00006–m00010"}]
    (item,) = extract_keep_items(src)["exact_values"]
    assert item.fields == {"key": "--tail", "value": "2"}
    kept = check_summary(src, "Source: b1 (102→63 tok, 2x).\n- Ran `kubectl logs eastleaf-sync-a7b73 --tail=2` "
                              "(m00009): it failed with `connection refused: crestquartz:64935`.", tier=2)
    assert kept.classes["exact_values"].kept == 1
    dropped = check_summary(src, "Source: b1 (102→63 tok, 2x).\n- Ran `kubectl logs eastleaf-sync-a7b73` (m00009): "
                                 "it failed with `connection refused: crestquartz:64935`.", tier=2)
    assert dropped.classes["exact_values"].kept == 0
