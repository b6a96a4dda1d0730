"""The scripted coding session the driver plays: a bug fix in a small invented ledger
package, 24 model steps (22 tool calls, two text answers, one mid-session user request).

Every text here is synthetic and deterministic (no randomness), so two recordings of the
same proxy build are byte-identical. Tool results vary in size (50 to ~3,000 chars) the
way a real session's do, so the context grows unevenly and nudges fire at a small window.
"""

from __future__ import annotations

SYSTEM = ("You are a careful coding agent working in the repository `ledger/`. Use the tools "
          "to inspect and change files; run the tests before you say you are done.")
TASK = ("The test tests/test_parser.py::test_negative_amounts fails since the last release: "
        "amounts like '(12.50)' parse as positive. Find the cause and fix it.")
FOLLOW_UP = "Good. Also keep the old parse_amount(str) signature working for callers in scripts/."

TOOLS = [
    {"type": "function", "function": {
        "name": "read_file", "description": "Read a file of the repository.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string", "description": "repo-relative path"}},
                       "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "list_dir", "description": "List a directory.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "grep", "description": "Search the repository for a pattern.",
        "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]}}},
    {"type": "function", "function": {
        "name": "run_tests", "description": "Run the test suite, or one test file.",
        "parameters": {"type": "object", "properties": {"target": {"type": "string"}}, "required": []}}},
    {"type": "function", "function": {
        "name": "edit_file", "description": "Replace one exact snippet of a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "old": {"type": "string"},
                                                        "new": {"type": "string"}},
                       "required": ["path", "old", "new"]}}},
    {"type": "function", "function": {
        "name": "bash", "description": "Run a shell command.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}},
]


def code(module: str, n: int) -> str:
    """An invented Python module of ``n`` small functions."""
    out = [f'"""ledger.{module}: invented for the recording session."""', "from decimal import Decimal", ""]
    for i in range(n):
        out += [f"def {module}_step_{i}(value: Decimal, scale: int = {i % 4}) -> Decimal:",
                f"    # step {i} of the {module} pipeline keeps {i * 3} cents of slack",
                f"    return (value * {i + 2}).quantize(Decimal('0.01')) / {i + 1}", ""]
    return "\n".join(out)


def test_log(passed: int, failed: int, width: int) -> str:
    lines = ["============================= test session starts =============================",
             "platform linux -- Python 3.12.3, pytest-8.3.2", f"collected {passed + failed} items", ""]
    for i in range(width):
        lines.append(f"tests/test_case_{i:02d}.py::test_case_{i:02d}_rounding PASSED     [{(i + 1) * 100 // width:3d}%]")
    for i in range(failed):
        lines += ["", f"___________________ test_negative_amounts[{i}] ___________________",
                  "    def test_negative_amounts():",
                  f">       assert parse_amount('({i + 12}.50)') == Decimal('-{i + 12}.50')",
                  f"E       AssertionError: assert Decimal('{i + 12}.50') == Decimal('-{i + 12}.50')",
                  "tests/test_parser.py:41: AssertionError"]
    lines.append(f"========================= {failed} failed, {passed} passed in 0.42s =========================")
    return "\n".join(lines)


def _tool(name: str, args: dict, result: str) -> dict:
    return {"kind": "tool", "name": name, "arguments": args, "result": result}


def _text(text: str, then_user: str | None = None) -> dict:
    return {"kind": "text", "text": text, "then_user": then_user}


def steps() -> list[dict]:
    """The model's 24 steps, each with what the client answers."""
    listing = "\n".join(["ledger/", "  __init__.py", "  parser.py", "  amounts.py", "  currency.py",
                         "  rounding.py", "tests/", "  test_parser.py", "  test_amounts.py", "scripts/",
                         "  import_csv.py", "docs/", "  CHANGELOG.md", "pyproject.toml"])
    grep_hits = "\n".join(f"ledger/{m}.py:{10 + i * 7}: parse_amount(" for i, m in
                          enumerate(["parser", "amounts", "currency", "parser", "rounding"] * 3))
    return [
        _tool("list_dir", {"path": "."}, listing),
        _tool("read_file", {"path": "ledger/parser.py"}, code("parser", 18)),
        _tool("read_file", {"path": "tests/test_parser.py"}, code("test_parser", 12)),
        _tool("run_tests", {"target": "tests/test_parser.py"}, test_log(20, 3, 20)),
        _tool("grep", {"pattern": "parse_amount("}, grep_hits),
        _tool("read_file", {"path": "ledger/amounts.py"}, code("amounts", 15)),
        _tool("bash", {"command": "git log -5 --oneline"},
              "a1b2c3d amounts: strip parentheses before Decimal()\n9f8e7d6 release 2.4.0\n"
              "5a4b3c2 currency: add CHF\n1d2e3f4 rounding: banker's rounding\n0a9b8c7 tests: more cases"),
        _tool("read_file", {"path": "ledger/currency.py"}, code("currency", 11)),
        _tool("edit_file", {"path": "ledger/amounts.py", "old": "value.strip('()')",
                            "new": "('-' + value.strip('()')) if value.startswith('(') else value"},
              "Edited ledger/amounts.py: 1 replacement."),
        _tool("run_tests", {"target": "tests/test_parser.py"}, test_log(21, 2, 18)),
        _tool("read_file", {"path": "ledger/rounding.py"}, code("rounding", 12)),
        _tool("grep", {"pattern": "ROUND_HALF"}, "ledger/rounding.py:4: from decimal import ROUND_HALF_EVEN\n"
                                                 "ledger/rounding.py:19: ROUND_HALF_EVEN"),
        _tool("edit_file", {"path": "ledger/rounding.py", "old": "abs(value)", "new": "value"},
              "Edited ledger/rounding.py: 1 replacement."),
        _tool("run_tests", {"target": "tests/test_parser.py"}, test_log(23, 0, 16)),
        _text("The parser test passes: amounts.py stripped the parentheses and lost the sign, and "
              "rounding.py took abs() of it. Both fixed.", then_user=FOLLOW_UP),
        _tool("grep", {"pattern": "parse_amount(", }, grep_hits),
        _tool("read_file", {"path": "scripts/import_csv.py"}, code("import_csv", 9)),
        _tool("edit_file", {"path": "ledger/parser.py", "old": "def parse_amount(value, *, locale):",
                            "new": "def parse_amount(value, *, locale='en'):"},
              "Edited ledger/parser.py: 1 replacement."),
        _tool("run_tests", {}, test_log(40, 0, 30)),
        _tool("bash", {"command": "ruff check ledger"}, "ledger/parser.py:3:1: F401 `re` imported but unused\n"
                                                         "Found 1 error."),
        _tool("edit_file", {"path": "ledger/parser.py", "old": "import re\n", "new": ""},
              "Edited ledger/parser.py: 1 replacement."),
        _tool("bash", {"command": "ruff check ledger"}, "All checks passed!"),
        _tool("bash", {"command": "git diff --stat"}, " ledger/amounts.py  | 2 +-\n ledger/parser.py   | 3 +--\n"
                                                      " ledger/rounding.py | 2 +-\n 3 files changed"),
        _text("Done: negative amounts parse with their sign again (amounts.py, rounding.py), "
              "parse_amount keeps its old signature (locale defaults to 'en'), tests and ruff pass."),
    ]
