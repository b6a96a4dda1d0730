"""Which printed values a range needs (relevance.py), changes, counts and quotes with their
outcome (changes.py), steps left to come (pending.py), and the usability rules around them."""

from doctrine.conform import extract_keep_items
from doctrine.conform.agreement import expand_session
from doctrine.conform.changes import (
    altered_changes,
    altered_counts,
    altered_quotes,
    changes,
    misquoted,
)
from doctrine.conform.check import check_summary
from doctrine.conform.extract import source_messages
from doctrine.conform.items import KeepItem
from doctrine.conform.pending import claimed_done, pending_steps
from doctrine.conform.usability import check_usability

_TEST_RUN = """MSBuild version 17.8.3+195e7f5a3 for .NET
  Failed Quota.Tests.RemainingBytes [12 ms]
  Error Message:
   Assert.Equal() Failure
Expected: 3221225472
Actual:   2147483647
Failed!  - Failed:     1, Passed:    17, Total:    18, Duration: 58 ms"""


def _session(say: str | None) -> list[dict]:
    steps = [{"user": "Make the quota tests pass; keep the interface as it is."},
             {"run": "dotnet test Tenancy.sln", "out": _TEST_RUN}]
    if say:
        steps.append({"say": say})
    return expand_session({"first_id": 300, "steps": steps})


def _values(source: list[dict]) -> dict[str, float]:
    return {it.text: it.salience for it in extract_keep_items(source)["exact_values"]}


def test_values_the_prose_restates_are_kept_and_the_rest_were_read_in_passing():
    vals = _values(_session("The test expects 3221225472 but gets 2147483647 (int.MaxValue), so an int cannot hold it."))
    assert "3221225472" in vals and "2147483647" in vals
    # The banner's version and the timings, never said again, are no longer demanded.
    assert not {"17.8.3+195e7f5a3", "12 ms", "58 ms"} & set(vals)


def test_without_restating_prose_every_printed_value_stays_a_candidate():
    vals = _values(_session(None))
    assert "17.8.3+195e7f5a3" in vals and "3221225472" not in vals
    vals = _values(_session("I will look at the quota code next."))
    assert "17.8.3+195e7f5a3" in vals


def test_a_labelled_number_given_the_other_label_is_an_altered_value():
    src = _session("The test expects 3221225472 but gets 2147483647, above int.MaxValue.")
    head = "Quota test (m00300-m00304)\n- Goal: make the quota tests pass; keep the interface as it is.\n"
    right = head + ("- `dotnet test`: Quota.Tests.RemainingBytes fails (Failed 1, Passed 17, Total 18): "
                    "Expected: 3221225472, Actual: 2147483647; an int cannot hold the expected value.")
    swapped = right.replace("Expected: 3221225472, Actual: 2147483647", "Expected: 2147483647, Actual: 3221225472")
    ok, bad = check_summary(src, right), check_summary(src, swapped)
    assert not any("altered" in r for r in ok.reasons), ok.reasons
    assert any("altered" in r and "Expected=2147483647" in r for r in bad.reasons), bad.reasons
    assert not bad.passed


def test_a_change_written_with_an_outcome_the_range_does_not_record():
    src = ["Upgrading northwind/currency (2.4.1 => 2.6.3): Extracting archive", "retries 2 -> 4"]
    assert changes(src[0]) == [("2.4.1", "2.6.3")]
    assert altered_changes("Upgraded northwind/currency 2.4.1 => 2.6.3; retries from 2 to 4.", src) == []
    bad = altered_changes("Upgraded northwind/currency 2.4.1 => 3.1.0.", src)
    assert bad and bad[0].startswith("2.4.1 -> 3.1.0")
    # An old value the range never changed is no claim about it.
    assert altered_changes("Moved from 1.0.0 to 1.1.0 long ago.", src) == []


_PENDING = ("The role still has the old password. The next step is to run ALTER ROLE app PASSWORD with the "
            "new value inside the db container, then restart the api container.")


def _pending_source(after_call: bool = False) -> list:
    steps = [{"user": "Get the api container running again; keep the pgdata volume."},
             {"run": "docker compose logs db --tail 1", "out": 'FATAL:  password authentication failed for user "app"'},
             {"say": _PENDING}]
    if after_call:
        steps.append({"run": "docker compose exec db psql -c 'ALTER ROLE app PASSWORD ...'", "out": "ALTER ROLE"})
    return source_messages(expand_session({"first_id": 10, "steps": steps}))


def test_a_step_left_to_come_reported_as_done():
    msgs = _pending_source()
    assert pending_steps(msgs) and "ALTER ROLE" in pending_steps(msgs)[0].sentence
    done = "- Fixed: ran ALTER ROLE app PASSWORD with the new value in the db container and restarted the api."
    todo = "- Next (not done yet): ALTER ROLE app PASSWORD with the new value inside the db container, then restart api."
    assert claimed_done(done, msgs) and not claimed_done(todo, msgs)
    # Other past-tense lines (what was read) are no claim about the pending step.
    assert not claimed_done("- Read the db log: password authentication failed for user app.", msgs)


def test_a_step_the_range_goes_on_to_take_is_not_pending():
    msgs = _pending_source(after_call=True)
    assert pending_steps(msgs) == []
    assert claimed_done("- Ran ALTER ROLE app PASSWORD with the new value in the db container and restarted api.",
                        msgs) == []


def test_the_check_refuses_a_summary_that_claims_the_pending_step():
    src = expand_session({"first_id": 10, "steps": [
        {"user": "Get the api container running again; keep the pgdata volume."},
        {"run": "docker compose logs db --tail 1", "out": 'FATAL:  password authentication failed for user "app"'},
        {"say": _PENDING}]})
    head = ("Api down after the password rotation (m00010-m00013)\n- Goal: get the api container running again; "
            "keep the pgdata volume.\n- db log: `FATAL:  password authentication failed for user \"app\"`.\n")
    rep = check_summary(src, head + "- Fixed: ran ALTER ROLE app PASSWORD with the new value inside the db "
                             "container and restarted the api container.")
    assert not rep.passed and any("reported as done" in r for r in rep.reasons), rep.reasons


def test_an_outcome_not_reached_reported_as_reached():
    msgs = source_messages(expand_session({"first_id": 40, "steps": [
        {"user": "Find why the invoices are missing."},
        {"say": "A test invoke of INV-7 after the update still returns FunctionError Unhandled with the "
                "same AccessDenied, so the timeout change is not verified yet."}]}))
    assert pending_steps(msgs)[0].outcome
    assert claimed_done("- Test invoke of INV-7 after the update succeeded, both fixes confirmed.", msgs)
    assert not claimed_done("- Test invoke of INV-7 after the update: FunctionError Unhandled, AccessDenied.", msgs)


def test_a_line_that_says_nothing_is_left_while_a_question_is_open():
    msgs = source_messages(expand_session({"first_id": 50, "steps": [
        {"user": "Get the build under the size limit."},
        {"say": "The entry chunk is 301.55 kB now, but the charts chunk is 511.08 kB. Do you want me to lazy-load it?"}]}))
    assert claimed_done("- Done; nothing open.", msgs) == ["Done; nothing open."]
    assert claimed_done("- Open: asked whether to lazy-load the charts chunk (511.08 kB).", msgs) == []


def test_a_past_event_the_range_records_is_no_claim():
    msgs = source_messages(expand_session({"first_id": 60, "steps": [
        {"user": "Fix the checksum mismatch."},
        {"say": "V2_3 was edited by 9c41e7a after staging applied it. Next: revert 9c41e7a's edit to V2_3 and "
                "move the default change into V2_6."}]}))
    assert claimed_done("- Commit 9c41e7a edited V2_3 after it was applied; the default change sits in V2_3.", msgs) == []
    assert claimed_done("- Reverted 9c41e7a's edit to V2_3 and moved the default change into V2_6.", msgs)


def test_test_counts_no_run_printed():
    src = ["cabal test: 9 examples, 1 failure", "Tests: 7, Failures: 1."]
    assert altered_counts("`cabal test`: 9 examples, 1 failure.", src) == []
    assert altered_counts("`cabal test`: 9 examples, 0 failures. Done.", src) == ["0 failed (source: 1)"]
    # A key=value recap (ansible's changed=3 failed=0) is not "3 failed".
    assert altered_counts("web-01 ok=5 changed=3 failed=0", ["web-01 : ok=5 changed=3 failed=0"]) == []


def test_a_quoted_line_with_other_numbers_than_the_source():
    src = ['{"new_str": "try await Task.sleep(nanoseconds: UInt64(millis) * 1_000_000)"}']
    assert altered_quotes("Line 42 is now `try await Task.sleep(nanoseconds: UInt64(millis) * 1_000_000)`.", src) == []
    bad = altered_quotes("Line 42 is now `try await Task.sleep(nanoseconds: UInt64(millis) * 1_000)`.", src)
    assert bad and "1000000" in bad[0]


def test_an_identifier_the_summary_gives_another_number():
    src = ["public init(maxAttempts: Int = 5, baseDelayMillis: Int = 100)", "maxAttempts defaults to 5"]
    ok = check_usability("- Defaults: maxAttempts 5, baseDelayMillis 100.", src, [])
    bad = check_usability("- The apps configure `maxAttempts: 40` in production.", src, [])
    assert ok.altered_values == [] and bad.altered_values == ["maxAttempts=40 (source: 5)"]
    # Far from its number an identifier says nothing of it (`... maxDelayMillis` (14 tests)).
    far = check_usability("- `capped at maxDelayMillis` (14 tests, 1 failure).", src + ["14 tests"], [])
    assert far.altered_values == []


def test_clock_times_and_ids_are_no_numbers_to_invent_or_keep():
    src = ["2024-06-10T08:14:02.511000+00:00 f9c86d52-03a7-42db-90fe-e65d241e3e5b Task timed out after 30.03 seconds"]
    rep = check_usability("- 9 of the 14 timed-out runs since Friday; one timed out after 30.03 seconds.", src, [])
    assert rep.invented_numbers == ["14"]
    # A path's line and column are not a clock: lib.rs:42:17 keeps its 42.
    assert check_usability("- src/lib.rs:42 holds the borrow.", ["src/lib.rs:42:17: error"], []).invented_numbers == []


def test_one_size_in_two_units_is_not_a_superseded_value():
    key = [KeepItem("exact_values", "setting", "maxmemory: 4294967296", "m1", 0.5,
                    fields={"key": "maxmemory", "value": "4294967296"})]
    src = ["maxmemory:4294967296\nmaxmemory_human:4.00G", "56\tmaxmemory 4gb"]
    rep = check_usability("- INFO memory: maxmemory 4294967296 (4.00G), policy allkeys-lru.", src, key)
    assert rep.stale_values == [] and rep.altered_values == []
    changed = check_usability("- INFO memory: maxmemory 4294967296 before the change.",
                              ["maxmemory 4294967296", "CONFIG SET maxmemory 8gb\nmaxmemory 8gb"], key)
    assert changed.stale_values  # 8gb is another size: the summary gives the old one


def test_runtime_library_frames_and_lambda_error_lines():
    out = ("2024-06-10T08:14:02.511000+00:00 2024/06/10/[$LATEST]22a8ab240df0 [ERROR]\t2024-06-10T08:14:02.510Z\t"
           "f9c86d52-03a7-42db-90fe-e65d241e3e5b\tClientError: An error occurred (AccessDenied) when calling the "
           "PutObject operation\nTraceback (most recent call last):\n  File \"/var/task/handler.py\", line 88, in handler\n"
           "    s3.put_object(Bucket=BUCKET)\n  File \"/var/runtime/botocore/client.py\", line 565, in _api_call\n"
           "    return self._make_api_call(operation_name, kwargs)")
    items = extract_keep_items(expand_session({"first_id": 70, "steps": [
        {"user": "Why do uploads fail?"}, {"run": "aws logs tail /aws/lambda/x", "out": out}]}))
    assert {it.text for it in items["paths_with_lines"]} == {"/var/task/handler.py:88"}
    assert any("An error occurred (AccessDenied)" in it.text for it in items["error_strings"])


def test_two_names_swapped_or_one_replaced_in_a_quote_is_a_misquote():
    src = ["ALTER TABLE orders ADD INDEX idx_oc (customer_id, created_at), ALGORITHM=INPLACE;",
           '{"new_str": "  (get discounts (name tier) 0)"}']
    assert misquoted("- Migration: `ADD INDEX idx_oc (customer_id, created_at)`.", src) == []
    assert misquoted("- Migration: `ADD INDEX idx_oc (created_at, customer_id)`.", src)
    assert misquoted("- Edit core.clj:28 -> `(get discounts (keyword tier) 0)`.", src)
    # Shortened, spaced otherwise, or proposed: no misquote.
    assert misquoted("- Edit: `(get discounts (name tier)`.", src) == []
    assert misquoted("- Next: use `(get discounts (keyword tier) 0)` instead.", src) == []


def test_printed_places_the_prose_does_not_name_were_read_in_passing():
    out = ('File "test/dune", line 2, characters 7-18:\nRaised at Money.add in file "lib/money.ml", line 21\n'
           'Called from List.fold_left in file "list.ml", line 123')
    steps = [{"user": "Get the ledger tests green."}, {"run": "dune runtest", "out": out}]
    plain = {it.text: it.salience for it in extract_keep_items(expand_session({"first_id": 80, "steps": steps}))
             ["paths_with_lines"]}
    assert {"lib/money.ml:21", "list.ml:123"} <= set(plain)
    steps.append({"say": "The mismatch is raised from lib/report.ml line 42, where the fold starts from EUR."})
    said = {it.text for it in extract_keep_items(expand_session({"first_id": 80, "steps": steps}))["paths_with_lines"]}
    assert "lib/report.ml:42" in said and not {"lib/money.ml:21", "list.ml:123"} & said
