"""Output renderers and the pickers behind synthetic sessions."""

from __future__ import annotations

import pytest

from data_gen.synthetic._render import (
    Repo,
    bash_output,
    cat_n,
    jest_run,
    py_traceback,
    pytest_run,
    table,
    tsc_output,
    unified_diff,
)
from data_gen.synthetic._text import Picker


def test_cat_n_numbers_lines_like_cat():
    assert cat_n(["a", "  b"], 9) == "     9\ta\n    10\t  b"


def test_repo_edits_keep_views_consistent():
    repo = Repo("/workspace/x", {})
    assert repo.create("m.py", ["def f():", "    return 1", "", "def g():", "    return 1"]).endswith("/workspace/x/m.py")
    with pytest.raises(ValueError, match="2 times"):
        repo.replace("m.py", "return 1", "return 2")
    out = repo.replace("m.py", "def g():\n    return 1", "def g():\n    return 2")
    assert "     5\t    return 2" in out and out.startswith("The file /workspace/x/m.py has been edited.")
    assert repo.line_of("m.py", "return 2") == 5
    assert repo.view("m.py", 4, 5).splitlines()[1:] == ["     4\tdef g():", "     5\t    return 2"]
    out = repo.insert("m.py", 2, ["# note"])
    assert "     3\t# note" in out and repo.line_of("m.py", "def g") == 5
    hits = repo.rename("g", "h")
    assert hits and repo.grep("def h") == [("m.py", 5, "def h():")]


def test_pytest_run_counts_and_summarises_failures():
    p = Picker("t")
    out = pytest_run(p, "/w", [("tests/test_a.py::test_x", True), ("tests/test_a.py::test_y", False),
                               ("tests/test_b.py::test_z", True)],
                     [("test_y", ["tests/test_a.py:3: in test_y", "E   KeyError: 'CHF'"])], seconds=0.5)
    assert "collected 3 items" in out and "tests/test_a.py .F" in out
    assert "FAILED tests/test_a.py::test_y - KeyError: 'CHF'" in out
    assert out.splitlines()[-1] == " 1 failed, 2 passed in 0.50s ".center(80, "=")
    one = pytest_run(p, "/w", [("t.py::a", True)], verbose=True)
    assert "collected 1 item\n" in one and "t.py::a PASSED" in one and "1 passed" in one.splitlines()[-1]


def test_tool_formats():
    assert tsc_output([("src/a.ts", 3, 5, "TS2322", "Bad."), ("src/a.ts", 9, 1, "TS2304", "Worse.")]).endswith(
        "Found 2 errors in 1 file.")
    assert bash_output("hi\n", 1) == "hi\n[The command completed with exit code 1.]"
    assert bash_output("", 0) == "[The command completed with exit code 0.]"
    d = unified_diff("a.py", ["x = 1", "y = 2"], ["x = 1", "y = 3"]).splitlines()
    assert d[:2] == ["--- a/a.py", "+++ b/a.py"] and "-y = 2" in d and "+y = 3" in d
    tb = py_traceback([("/w/m.py", 4, "f", "  return d[k]  ")], "KeyError: 'k'")
    assert tb.splitlines() == ["Traceback (most recent call last):", '  File "/w/m.py", line 4, in f',
                               "    return d[k]", "KeyError: 'k'"]
    j = jest_run(Picker("t"), [("tests/a.test.ts", [("works", True), ("breaks", False)])], [("a › breaks", ["boom"])])
    assert "FAIL tests/a.test.ts" in j and "Tests:       1 failed, 1 passed, 2 total" in j
    t = table(["name", "n"], [["a", 1], ["bbb", 0.25]], index=False).splitlines()
    assert t == ["name     n", "   a     1", " bbb  0.25"]


def test_picker_is_seeded_by_string_and_unique_names_do_not_repeat():
    a, b = Picker("fam:1"), Picker("fam:1")
    assert [a.int(0, 10**6) for _ in range(5)] == [b.int(0, 10**6) for _ in range(5)]
    assert Picker("fam:2").int(0, 10**6) != Picker("fam:1").int(0, 10**6)
    p = Picker("x")
    names = [p.snake() for _ in range(60)]
    assert len(set(names)) == 60
    assert all(1 <= p.lines((3, 9), 2.0) <= 18 for _ in range(50))
