"""Python bug hunt: failing tests, tracebacks, then read -> edit -> rerun loops.

Shape: one user goal, then assistant-driven steps. The first run lists every failure (the
exact error strings, used again by the final summary and by probes); each bug then takes
a reproduce-and-read step (traceback with ``path:line``, a file view with the signature)
and a fix step (a decision with its rationale, a ``str_replace`` on the line the traceback
named, a rerun). Extra steps (caller greps, lint, regression tests, a mid-session user
constraint) fill the step budget with bulky, mostly unneeded output.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctrine.session import Session

from ._code import py_module
from ._render import (
    Repo,
    bash_output,
    grep_output,
    py_traceback,
    pytest_run,
    tree_view,
    unified_diff,
)
from ._text import NOUNS, Picker
from ._tools import DEFAULT_SIZE, SessionBuilder, SessionSize, session_id

FAMILY = "py_bughunt"


@dataclass
class Bug:
    module: str  # relative path of the module
    func: str
    block: list[str]  # the function (and any constant it needs)
    raise_line: str  # the source line the traceback points at (stripped)
    old: str  # the edit: replace this unique text ...
    new: str  # ... by this
    error: str  # the exception line
    test: str  # test function name
    test_line: str  # its assert
    imports: list[str]
    cause: str  # why the line fails, in the agent's words
    fix_site: str  # where the fix goes, and why there (the decision)
    home: str = "util"  # module name the function lives in
    in_test: bool = False  # the traceback ends in the test (a plain assertion)
    fact_ids: dict | None = None


def _bugs(p: Picker) -> list[Bug]:
    """Bug templates with fresh names; the order is shuffled per seed."""
    n = [p.noun() for _ in range(7)]
    out = [
        Bug("", f"parse_{n[0]}", [f"def parse_{n[0]}(value: str) -> Decimal:",
                                  f'    """Parse a user-entered {n[0]} such as "$1,250.00"."""',
                                  '    cleaned = value.strip().replace("$", "")',
                                  "    amount = Decimal(cleaned)",
                                  '    return amount.quantize(Decimal("0.01"))'],
            "amount = Decimal(cleaned)", 'cleaned = value.strip().replace("$", "")',
            'cleaned = value.strip().replace("$", "").replace(",", "")',
            "decimal.InvalidOperation: [<class 'decimal.ConversionSyntax'>]",
            f"test_parse_{n[0]}_with_separator", f'assert parse_{n[0]}("1,250.00") == Decimal("1250.00")',
            ["from decimal import Decimal"], "the thousands separator reaches Decimal()",
            "in the cleaning line, because every caller passes user text through it", "money"),
        Bug("", f"rate_for_{n[1]}", ['RATES = {"EUR": Decimal("1.00"), "USD": Decimal("1.08"), "GBP": Decimal("0.86")}',
                                     "", "", f"def rate_for_{n[1]}(code: str) -> Decimal:",
                                     f'    """Exchange rate for a {n[1]} currency code."""',
                                     "    return RATES[code.upper()]"],
            "return RATES[code.upper()]", "return RATES[code.upper()]",
            'return RATES.get(code.upper(), Decimal("1.00"))', "KeyError: 'CHF'",
            f"test_rate_for_{n[1]}_unknown_code", f'assert rate_for_{n[1]}("chf") == Decimal("1.00")',
            ["from decimal import Decimal"], "unknown codes index RATES directly",
            "with a default of 1.00, because the spec says unknown currencies are billed at par", "rates"),
        Bug("", f"page_of_{n[2]}s", [f"def page_of_{n[2]}s(items: list, page: int, size: int = 10) -> list:",
                                     f'    """One page of {n[2]}s, pages counted from 1."""',
                                     "    start = (page - 1) * size",
                                     "    return items[start:start + size - 1]"],
            "", "return items[start:start + size - 1]", "return items[start:start + size]",
            "AssertionError: assert 9 == 10", f"test_page_of_{n[2]}s_full_page",
            f"assert len(page_of_{n[2]}s(list(range(95)), 2)) == 10", [],
            "the slice end is off by one", "in the slice itself, because start is already correct", "paging", in_test=True),
        Bug("", f"total_{n[3]}", [f"def total_{n[3]}(rows: list[dict], fee: str = \"0\") -> float:",
                                  f'    """Sum of qty * price over {n[3]} rows, plus the fee."""',
                                  '    subtotal = sum(row["qty"] * row["price"] for row in rows)',
                                  "    return subtotal + fee"],
            "return subtotal + fee", "return subtotal + fee", "return subtotal + float(fee)",
            "TypeError: unsupported operand type(s) for +: 'int' and 'str'", f"test_total_{n[3]}_with_fee",
            f'assert total_{n[3]}([{{"qty": 2, "price": 3}}], fee="1.5") == 7.5', [],
            "the fee arrives as a string from the form", "at the return, because the signature must keep fee: str", "orders"),
        Bug("", f"{n[4]}_ratio", [f"def {n[4]}_ratio(hits: int, total: int) -> float:",
                                  f'    """Share of {n[4]} hits, rounded to 4 places."""',
                                  "    return round(hits / total, 4)"],
            "return round(hits / total, 4)", "return round(hits / total, 4)",
            "return round(hits / total, 4) if total else 0.0", "ZeroDivisionError: division by zero",
            f"test_{n[4]}_ratio_empty", f"assert {n[4]}_ratio(0, 0) == 0.0", [],
            "an empty window has total == 0", "inside the function, because the dashboard calls it for empty windows", "stats"),
        Bug("", f"normalise_{n[5]}_name", [f"def normalise_{n[5]}_name(name: str | None) -> str:",
                                          f'    """Lower-case, trimmed {n[5]} name."""',
                                          "    return name.strip().lower()"],
            "return name.strip().lower()", "return name.strip().lower()", 'return (name or "").strip().lower()',
            "AttributeError: 'NoneType' object has no attribute 'strip'", f"test_normalise_{n[5]}_name_none",
            f'assert normalise_{n[5]}_name(None) == ""', [],
            "the importer passes None for missing names", "here rather than in the importer, because the type hint already allows None", "names"),
        Bug("", f"parse_{n[6]}_date", [f"def parse_{n[6]}_date(raw: str) -> datetime:",
                                      f'    """Parse the {n[6]} date sent by the API."""',
                                      '    return datetime.strptime(raw, "%Y-%m-%d")'],
            'return datetime.strptime(raw, "%Y-%m-%d")', 'return datetime.strptime(raw, "%Y-%m-%d")',
            "return datetime.fromisoformat(raw)", "ValueError: unconverted data remains: T10:15:00",
            f"test_parse_{n[6]}_date_with_time", f'assert parse_{n[6]}_date("2026-03-14T10:15:00").hour == 10',
            ["from datetime import datetime"], "the API now sends a time part",
            "with fromisoformat, because it accepts both the old and the new format", "dates"),
    ]
    return p.shuffle(out)


def generate(seed: int, size: SessionSize = DEFAULT_SIZE) -> Session:
    """One py_bughunt session for ``seed`` at ``size``."""
    p = Picker(f"{FAMILY}:{seed}")
    bounds = size.tool_output_lines
    proj = p.project().replace("-", "_")
    root = f"/workspace/{proj}"
    repo = Repo(root)
    n_bugs = max(1, min(7, (size.steps - 2) // 3))
    bugs = _bugs(p)[:n_bugs]
    for bug in bugs:
        bug.module = f"{proj}/{bug.home}.py"
    mods = [bug.module for bug in bugs] + [f"{proj}/util.py", f"{proj}/io.py"]
    for path in mods:
        own = [b for b in bugs if b.module == path]
        imports = sorted(dict.fromkeys(x for b in own for x in b.imports))
        repo.create(path, py_module(p, [b.block for b in own], p.lines(bounds, 2.0), imports))
    tests: dict[str, list[tuple[str, bool]]] = {}
    for path in mods:
        tfile = "tests/test_" + path.split("/")[-1]
        tests[tfile] = [(f"{tfile}::test_{p.snake()}", True) for _ in range(p.int(3, max(4, bounds[1] // 10)))]
    for bug in bugs:
        tfile = "tests/test_" + bug.module.split("/")[-1]
        tests[tfile].insert(p.int(0, len(tests[tfile])), (f"{tfile}::{bug.test}", False))
    for path in mods:
        tfile = "tests/test_" + path.split("/")[-1]
        own = [bg for bg in bugs if bg.module == path]
        body = [f"from {path[:-3].replace('/', '.')} import {own[0].func if own else '*'}", "", ""]
        for node, _ in tests[tfile]:
            name = node.split("::")[1]
            check = own[0].test_line if own and name == own[0].test else f"assert {p.choice(['True', '[] == []', '1 + 1 == 2'])}"
            body += [f"def {name}():", f"    {check}", "", ""]
        repo.create(tfile, body[:-1])
    results = [r for rs in tests.values() for r in rs]

    b = SessionBuilder(FAMILY, seed)
    b.system()
    b.step()
    # ---------------------------------------------------------------- goal and first run
    c_sig = "Do not change the public signatures of the functions in"
    goal = (f"The test suite of {proj} is failing after the last merge. Find and fix the bugs.\n\n"
            f"Constraints:\n- {c_sig} {proj}/.\n- Add a regression test for every bug you fix.\n"
            f"- No new dependencies.\n- When done, list each fix with its file and line.")
    u = b.user(goal)
    f_sig = b.fact(f"{c_sig} {proj}/.", "user_intent", u)
    f_reg = b.fact("Add a regression test for every bug you fix.", "user_intent", u)
    f_list = b.fact("When done, list each fix with its file and line.", "user_intent", u)
    b.offer_probe(f_sig, "Before you go on: what did I say about the public signatures?")
    b.editor({"command": "view", "path": root}, tree_view(root, list(repo.files)),
             "Let me look at the layout of the repository first.")
    failures = []
    for bug in bugs:
        failures.append((bug.test, _short_tb(repo, bug)))
    out = pytest_run(p, root, results, failures, verbose=True,
                     warnings=[f"{mods[-1]}:3: DeprecationWarning: datetime.utcnow() is deprecated", ""])
    r = b.bash(f"cd {root} && python -m pytest -v --tb=short", bash_output(out, 1), "Now the test suite as it stands.")
    for bug in bugs:
        bug.fact_ids = {"error": b.fact(bug.error, "error_strings", r)}
        b.offer_probe(bug.fact_ids["error"], f"What was the exact error {bug.test} failed with before the fix?")
    b.fact("platform linux -- Python 3.11.9, pytest-8.3.2, pluggy-1.5.0", "exact_values", r)  # noise
    n_fail = len(bugs)
    b.say(f"{n_fail} test{'s' if n_fail > 1 else ''} fail. I'll take them one at a time: reproduce, read the code, fix, rerun.")

    # ---------------------------------------------------------------- step plan
    slots = size.steps - 2
    extras = ["callers", "regression", "lint", "interject", "regression", "callers", "interject", "lint"]
    if slots < 2 * len(bugs):  # too few steps for separate read and fix steps
        plan = [("readfix", bug) for bug in bugs][:slots]
    else:
        after: list[list[str]] = [[] for _ in bugs]
        for k in range(slots - 2 * len(bugs)):
            after[k % len(bugs)].append(extras[k % len(extras)])
        plan = []
        for bug, more in zip(bugs, after, strict=True):
            plan += [("read", bug), ("fix", bug)] + [(kind, bug) for kind in more]
    state = {"interject": None, "question": None, "done": [], "bugs": bugs}
    b.probes_due(size, 1)
    for n, (kind, bug) in enumerate(plan, start=2):
        b.step()
        _STEPS[kind](b, p, repo, bug, bounds, state, f_sig, f_reg, tests)
        b.probes_due(size, n)

    # ---------------------------------------------------------------- final run and summary
    b.step()
    final = [(nid, True) for nid, _ in results] + [(f"tests/test_regressions.py::test_{bg.func}_regression", True)
                                                    for bg in state["done"] if bg.fact_ids.get("reg")]
    b.bash(f"cd {root} && python -m pytest -v", bash_output(pytest_run(p, root, final, verbose=True), 0),
           "Full suite once more.")
    diff = "\n".join(unified_diff(bg.module, bg.before, repo.files[bg.module]) for bg in state["done"])
    b.bash(f"cd {root} && git diff", bash_output(diff, 0))
    lines = []
    for bg in state["done"]:
        b.use(bg.fact_ids["path"], bg.fact_ids["error"], bg.fact_ids.get("decision"))
        lines.append(f"- {bg.fact_ids_text['path']}: {bg.error} -> {bg.cause}; fixed {bg.fix_site}.")
    b.use(f_list, f_sig, f_reg, state["interject"], state["question"])
    msg = "All tests pass. Fixes:\n" + "\n".join(lines)
    if state["question"]:
        msg += "\nOpen question left for you: " + b.text_of(state["question"])
    b.finish(msg)
    meta = {"generator": "data_gen.synthetic", "workload": "python bug hunt", "project": proj,
            "size": {"steps": size.steps, "tool_output_lines": list(bounds), "probes": size.probes}}
    return b.build(session_id(FAMILY, seed, size), meta)


def _short_tb(repo: Repo, bug: Bug) -> list[str]:
    tfile = "tests/test_" + bug.module.split("/")[-1]
    tl = repo.line_of(tfile, bug.test_line)
    body = [f"{tfile}:{tl}: in {bug.test}", f"    {bug.test_line}"]
    if not bug.in_test:
        ml = repo.line_of(bug.module, bug.raise_line)
        body += [f"{bug.module}:{ml}: in {bug.func}", f"    {bug.raise_line}"]
    return body + [f"E   {bug.error}"]


def _read(b, p, repo, bug, bounds, state, f_sig, f_reg, tests) -> None:
    tfile = "tests/test_" + bug.module.split("/")[-1]
    b.use(bug.fact_ids["error"])
    tb = pytest_run(p, repo.root, [(f"{tfile}::{bug.test}", False)], [(bug.test, _short_tb(repo, bug))])
    r = b.bash(f"cd {repo.root} && python -m pytest {tfile}::{bug.test} --tb=short", bash_output(tb, 1),
               f"Reproducing {bug.test} on its own.")
    if bug.in_test:
        where = f"{tfile}:{repo.line_of(tfile, bug.test_line)}"
    else:
        where = f"{bug.module}:{repo.line_of(bug.module, bug.raise_line)}"
    bug.fact_ids["path"] = b.fact(where, "paths_with_lines", r)
    bug.fact_ids_text = {"path": where}
    if not bug.in_test:  # the same failure outside pytest: a plain traceback
        call = bug.test_line[len("assert "):bug.test_line.index(" ==")]
        mod = bug.module[:-3].replace("/", ".")
        ml = repo.line_of(bug.module, bug.raise_line)
        tb = py_traceback([("<string>", 1, "<module>", call), (repo.abs(bug.module), ml, bug.func, bug.raise_line)],
                          bug.error)
        b.bash(f"cd {repo.root} && python -c 'from {mod} import {bug.func}; {call}'", bash_output(tb, 1))
    v = b.editor({"command": "view", "path": repo.abs(bug.module)}, repo.view(bug.module))
    bug.fact_ids["sig"] = b.fact(bug.block[0] if not bug.block[0].startswith("RATES") else bug.block[3],
                                 "signatures", v)
    b.say(f"The failure points at {where}: {bug.cause}.")


def _fix(b, p, repo, bug, bounds, state, f_sig, f_reg, tests) -> None:
    b.use(bug.fact_ids["path"], bug.fact_ids["error"], bug.fact_ids["sig"], f_sig)
    decision = f"I'll fix it {bug.fix_site}."
    bug.before = list(repo.files[bug.module])
    out = repo.replace(bug.module, bug.old, bug.new)
    r = b.editor({"command": "str_replace", "path": repo.abs(bug.module), "old_str": bug.old, "new_str": bug.new}, out,
                 f"The bug is at {bug.fact_ids_text['path']}: {bug.cause}. {decision}")
    bug.fact_ids["decision"] = b.fact(decision, "decisions", r - 1)
    b.offer_probe(bug.fact_ids["decision"], f"Why did you fix {bug.func} where you did?")
    state["done"].append(bug)
    fixed = {bg.test for bg in state["done"]}
    results = [(n, ok or n.split("::")[1] in fixed) for rs in tests.values() for n, ok in rs]
    left = [(bg.test, _short_tb(repo, bg)) for bg in state["bugs"] if bg.test not in fixed]
    out = pytest_run(p, repo.root, results, left, verbose=True)
    b.bash(f"cd {repo.root} && python -m pytest -v --tb=short", bash_output(out, 1 if left else 0),
           "Rerunning the whole suite to see what is left.")


def _callers(b, p, repo, bug, bounds, state, f_sig, f_reg, tests) -> None:
    pkg = bug.module.split("/")[0]
    hits = [h for h in repo.grep("", pkg) if h[2].startswith("def ") or bug.func in h[2] or "return " in h[2]]
    hits = hits[: p.lines(bounds)]
    b.bash(f"cd {repo.root} && grep -rnE '^def |return |{bug.func}' {pkg}/ | head -{len(hits)}",
           bash_output(grep_output(hits)),
           f"Checking who calls {bug.func} and what the neighbouring functions return, in case a caller depends on "
           "the old behaviour.")
    b.say("No other call site relies on the failing behaviour.")


def _regression(b, p, repo, bug, bounds, state, f_sig, f_reg, tests) -> None:
    done = [bg for bg in state["done"] if not bg.fact_ids.get("reg")]
    target = done[0] if done else bug
    b.use(f_reg, target.fact_ids.get("sig"))
    path = "tests/test_regressions.py"
    body = [f"def test_{target.func}_regression():", f"    from {target.module[:-3].replace('/', '.')} import {target.func}",
            "", f"    {target.test_line}"]
    if path not in repo.files:
        lines = ['"""One regression test per fixed bug."""', "", ""] + body
        b.editor({"command": "create", "path": repo.abs(path), "file_text": "\n".join(lines)}, repo.create(path, lines),
                 f"Adding the regression test for {target.func}, as asked.")
    else:
        n = len(repo.files[path])
        b.editor({"command": "insert", "path": repo.abs(path), "insert_line": n, "new_str": "\n".join(["", ""] + body)},
                 repo.insert(path, n, ["", ""] + body), f"Regression test for {target.func}.")
    target.fact_ids["reg"] = "added"
    b.bash(f"cd {repo.root} && python -m pytest {path} -q",
           bash_output(pytest_run(p, repo.root, [(f"{path}::test_{target.func}_regression", True)]), 0))


def _lint(b, p, repo, bug, bounds, state, f_sig, f_reg, tests) -> None:
    out = []
    for path in list(repo.files)[: 3]:
        for i in sorted(p.sample(range(1, len(repo.files[path]) + 1), p.int(2, max(3, bounds[1] // 12)))):
            code, msg = p.choice([("E501", f"Line too long ({p.int(89, 120)} > 88)"),
                                  ("B006", "Do not use mutable data structures for argument defaults"),
                                  ("UP007", "Use `X | Y` for type annotations"), ("SIM108", "Use ternary operator instead of `if`-`else`-block")])
            out.append(f"{path}:{i}:{p.int(1, 60)}: {code} {msg}")
    out.append(f"Found {len(out)} errors.")
    b.bash(f"cd {repo.root} && ruff check .", bash_output("\n".join(out), 1), "Running the linter over the package.")
    b.say("These lint findings predate my changes; I'll leave them alone to keep the diff focused.")


def _interject(b, p, repo, bug, bounds, state, f_sig, f_reg, tests) -> None:
    if state["interject"] is None:
        ask = f"Please also keep the log messages of {bug.module} unchanged: ops greps for them."
        u = b.user(f"One more thing while you are at it. {ask}")
        state["interject"] = b.fact(ask, "user_intent", u)
        hits = repo.grep("logger.", bug.module)
        b.bash(f"cd {repo.root} && grep -n 'logger\\.' {bug.module}", bash_output(grep_output(hits)))
        b.say(f"Understood: none of my edits touch the logger calls in {bug.module}.")
    else:
        q = f"Should {bug.func} also accept {p.choice(NOUNS)} values from the legacy importer? Leaving it unchanged for now."
        a = b.say(f"Open question: {q}")
        state["question"] = b.fact(q, "open_questions", a)
        b.think(f"Logged the open question about {bug.func}; carrying on with the remaining failures.")


def _readfix(*args) -> None:
    _read(*args)
    _fix(*args)


_STEPS = {"readfix": _readfix, "read": _read, "fix": _fix, "callers": _callers, "regression": _regression, "lint": _lint,
          "interject": _interject}
