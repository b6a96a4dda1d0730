"""Realistic tool outputs: editor views and edits, test runs, tracebacks, diffs, tables, logs.

The formats follow what the OpenHands tools and the usual CLIs print (``cat -n`` with a
right-aligned line number and a tab, pytest's session header and short summary, tsc's
``file(line,col): error TSxxxx``, jest's PASS/FAIL blocks, unified diffs from ``difflib``).
All functions are pure: randomness comes in through a :class:`Picker` argument.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ._text import Picker

__all__ = [
    "Repo", "bash_output", "cat_n", "csv_head", "jest_run", "log_line", "node_stack",
    "pytest_run", "py_traceback", "table", "tree_view", "tsc_output", "unified_diff",
]

WORKSPACE = "/workspace"


# --------------------------------------------------------------------------- editor


def cat_n(lines: list[str], start: int = 1) -> str:
    """Lines numbered the way ``cat -n`` numbers them."""
    return "\n".join(f"{i:6}\t{line}" for i, line in enumerate(lines, start))


@dataclass
class Repo:
    """A tiny in-memory work tree, so views, edits and greps agree with each other."""

    root: str
    files: dict[str, list[str]] = field(default_factory=dict)  # relative path -> lines

    def abs(self, path: str) -> str:
        return f"{self.root}/{path}"

    def create(self, path: str, lines: list[str]) -> str:
        self.files[path] = list(lines)
        return f"File created successfully at: {self.abs(path)}"

    def view(self, path: str, start: int | None = None, end: int | None = None) -> str:
        lines = self.files[path]
        lo = max(1, start or 1)
        hi = min(len(lines), end or len(lines))
        return f"Here's the result of running `cat -n` on {self.abs(path)}:\n" + cat_n(lines[lo - 1:hi], lo) + "\n"

    def line_of(self, path: str, needle: str) -> int:
        """1-based number of the first line containing ``needle``."""
        for i, line in enumerate(self.files[path], 1):
            if needle in line:
                return i
        raise KeyError(f"{needle!r} not in {path}")

    def replace(self, path: str, old: str, new: str, context: int = 4) -> str:
        """Apply a unique ``old`` -> ``new`` replacement; return the editor's snippet result."""
        text = "\n".join(self.files[path])
        if text.count(old) != 1:
            raise ValueError(f"{path}: old_str occurs {text.count(old)} times")
        first = text[: text.index(old)].count("\n") + 1
        text = text.replace(old, new)
        self.files[path] = text.split("\n")
        last = first + new.count("\n")
        return self._snippet(path, first, last, context, "of " + self.abs(path),
                             "Review the changes and make sure they are as expected. Edit the file again if necessary.")

    def insert(self, path: str, after: int, lines: list[str], context: int = 4) -> str:
        self.files[path][after:after] = list(lines)
        return self._snippet(path, after + 1, after + len(lines), context, "of the edited file",
                             "Review the changes and make sure they are as expected (correct indentation, "
                             "no duplicate lines, etc). Edit the file again if necessary.")

    def rename(self, old: str, new: str) -> list[tuple[str, int, str]]:
        """Replace identifier ``old`` by ``new`` everywhere; return the (path, line, text) hits."""
        hits = self.grep(old)
        for path, lines in self.files.items():
            self.files[path] = [ln.replace(old, new) for ln in lines]
        return hits

    def grep(self, needle: str, prefix: str = "") -> list[tuple[str, int, str]]:
        return [(p, i, ln) for p, lines in self.files.items() if p.startswith(prefix)
                for i, ln in enumerate(lines, 1) if needle in ln]

    def _snippet(self, path: str, first: int, last: int, context: int, where: str, tail: str) -> str:
        lines = self.files[path]
        lo, hi = max(1, first - context), min(len(lines), last + context)
        return (f"The file {self.abs(path)} has been edited. Here's the result of running `cat -n` on a snippet {where}:\n"
                + cat_n(lines[lo - 1:hi], lo) + "\n" + tail)


def grep_output(hits: list[tuple[str, int, str]]) -> str:
    return "\n".join(f"{p}:{i}:{ln}" for p, i, ln in hits)


def tree_view(root: str, paths: list[str]) -> str:
    dirs: dict[str, None] = {}
    for p in paths:
        parts = p.split("/")
        for k in range(1, len(parts)):
            dirs["/".join(parts[:k])] = None
    entries = sorted([f"{root}/{d}/" for d in dirs] + [f"{root}/{p}" for p in paths if p.count("/") <= 2])
    return (f"Here's the files and directories up to 2 levels deep in {root}, excluding hidden items:\n"
            f"{root}/\n" + "\n".join(entries) + "\n")


def bash_output(text: str, code: int = 0) -> str:
    """A shell command's output as the OpenHands bash tool returns it."""
    body = text.rstrip("\n")
    return (body + "\n" if body else "") + f"[The command completed with exit code {code}.]"


def unified_diff(path: str, old: list[str], new: list[str]) -> str:
    return "\n".join(difflib.unified_diff(old, new, f"a/{path}", f"b/{path}", lineterm=""))


# --------------------------------------------------------------------------- python


def py_traceback(frames: list[tuple[str, int, str, str]], error: str) -> str:
    """``frames``: (file, line, function, source line), outermost first; ``error``: last line."""
    out = ["Traceback (most recent call last):"]
    for file, line, func, src in frames:
        out.append(f'  File "{file}", line {line}, in {func}')
        out.append(f"    {src.strip()}")
    out.append(error)
    return "\n".join(out)


def pytest_run(p: Picker, rootdir: str, results: list[tuple[str, bool]],
               failures: list[tuple[str, list[str]]] | None = None, seconds: float | None = None,
               warnings: list[str] | None = None, verbose: bool = False) -> str:
    """A pytest session: ``results`` are (node id, passed); ``failures`` (title, body lines).

    ``verbose`` prints one line per test (``-v``) instead of one per file.
    """
    out = ["============================= test session starts ==============================",
           "platform linux -- Python 3.11.9, pytest-8.3.2, pluggy-1.5.0",
           f"rootdir: {rootdir}", "configfile: pyproject.toml", f"collected {len(results)} item{'s' if len(results) != 1 else ''}", ""]
    by_file: dict[str, str] = {}
    for node, ok in results:
        f = node.split("::")[0]
        by_file[f] = by_file.get(f, "") + ("." if ok else "F")
    done = 0
    if verbose:
        for node, ok in results:
            done += 1
            out.append(f"{node} {'PASSED' if ok else 'FAILED'}".ljust(73) + f"[{round(100 * done / len(results)):3}%]")
        by_file = {}
    for f, marks in by_file.items():
        done += len(marks)
        pct = f"[{round(100 * done / max(1, len(results))):3}%]"
        out.append(f"{f} {marks}".ljust(73) + pct)
    failed = [n for n, ok in results if not ok]
    if failures:
        out += ["", "=================================== FAILURES ==================================="]
        for title, body in failures:
            out.append(f" {title} ".center(80, "_"))
            out += [""] + body + [""]
    if warnings:
        out += ["=============================== warnings summary ==============================="] + warnings + [""]
    secs = seconds if seconds is not None else p.float(0.2, 9.0)
    if failed:
        out.append("=========================== short test summary info ============================")
        for node in failed:
            reason = next((b[-1] for t, b in failures or [] if node.endswith(t) and b), "AssertionError")
            out.append(f"FAILED {node} - {reason.removeprefix('E   ').strip()}")
        summary = f" {len(failed)} failed, {len(results) - len(failed)} passed in {secs:.2f}s "
    else:
        summary = f" {len(results)} passed in {secs:.2f}s "
    out.append(summary.center(80, "="))
    return "\n".join(out)


# --------------------------------------------------------------------------- typescript


def tsc_output(errors: list[tuple[str, int, int, str, str]]) -> str:
    """``errors``: (path, line, col, TS code, message), as ``tsc --noEmit`` prints them."""
    lines = [f"{p}({ln},{col}): error {code}: {msg}" for p, ln, col, code, msg in errors]
    n_files = len(dict.fromkeys(e[0] for e in errors))
    if errors:
        lines += ["", f"Found {len(errors)} error{'s' if len(errors) != 1 else ''} in {n_files} file{'s' if n_files != 1 else ''}."]
    return "\n".join(lines)


def node_stack(error: str, frames: list[tuple[str, str, int, int]]) -> str:
    """``frames``: (function, file, line, col), innermost first."""
    return "\n".join([error] + [f"    at {fn} ({f}:{ln}:{col})" for fn, f, ln, col in frames])


def jest_run(p: Picker, suites: list[tuple[str, list[tuple[str, bool]]]],
             failures: list[tuple[str, list[str]]] | None = None) -> str:
    """``suites``: (test file, [(test name, passed)]); ``failures``: (full name, body lines)."""
    out: list[str] = []
    n_pass = n_fail = s_fail = 0
    for file, tests in suites:
        ok = all(t[1] for t in tests)
        s_fail += not ok
        out.append(f"{'PASS' if ok else 'FAIL'} {file}")
        for name, passed in tests:
            n_pass += passed
            n_fail += not passed
            out.append(f"  {'✓' if passed else '✕'} {name} ({p.int(1, 40)} ms)")
        out.append("")
    for name, body in failures or []:
        out += [f"  ● {name}", ""] + [f"    {b}" for b in body] + [""]
    n_s = len(suites)
    suites_line = f"{s_fail} failed, {n_s - s_fail} passed, {n_s} total" if s_fail else f"{n_s} passed, {n_s} total"
    tests_line = (f"{n_fail} failed, {n_pass} passed, {n_pass + n_fail} total" if n_fail
                  else f"{n_pass} passed, {n_pass} total")
    out += [f"Test Suites: {suites_line}", f"Tests:       {tests_line}", "Snapshots:   0 total",
            f"Time:        {p.float(0.8, 6.0):.3f} s", "Ran all test suites."]
    return "\n".join(out)


# --------------------------------------------------------------------------- data


def table(header: list[str], rows: list[list[object]], index: bool = True) -> str:
    """A pandas-style right-aligned text table."""
    cells = [[str(h) for h in header]] + [[_fmt(v) for v in r] for r in rows]
    if index:
        cells = [[""] + cells[0]] + [[str(i)] + r for i, r in enumerate(cells[1:])]
    widths = [max(len(r[c]) for r in cells) for c in range(len(cells[0]))]
    return "\n".join("  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)) for r in cells)


def csv_head(header: list[str], rows: list[list[object]]) -> str:
    return "\n".join([",".join(header)] + [",".join(_fmt(v) for v in r) for r in rows])


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.4f}".rstrip("0").rstrip(".") if abs(v) < 1000 else f"{v:.1f}"
    return "NaN" if v is None else str(v)


# --------------------------------------------------------------------------- logs


def log_line(ts: datetime, level: str, service: str, message: str, req: str | None = None) -> str:
    stamp = ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"
    rid = f" req={req}" if req else ""
    return f"{stamp} {level:<5} [{service}]{rid} {message}"


def tick(ts: datetime, p: Picker, max_ms: int = 1800) -> datetime:
    return ts + timedelta(milliseconds=p.int(3, max_ms))
