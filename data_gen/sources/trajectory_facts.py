"""Steps and hindsight facts of a recorded agent trajectory (OpenAI-format messages).

``steps_and_facts(messages)`` gives what a ``doctrine.session.Session`` needs besides the
messages. Used by the SWE-rebench source; any recorded trajectory in the same message
format can use it.

Steps: a step starts at every user message (user messages in a row open one step) and at
every assistant message that does not directly answer a user message; it runs until the next start, so each step is one
assistant turn with its tool results (plus the user message that prompted it). Leading
system messages belong to the first step.

Facts (kept conservative: each is a verbatim string of the message that introduces it):

- ``paths_with_lines``: a file path (``path:LINE`` or a traceback ``File "...", line N``
  when a line is given) seen in a tool result or in an edit call, used by a later step
  whose call arguments name the same file (one path a component-suffix of the other);
- ``error_strings``: the last line of a Python traceback, a pytest ``E   XError: ...``
  line, or an ``Error: ...`` line in a tool result, used by a later step that quotes
  its message part or greps a quoted pattern contained in it;
- ``error_strings`` also: the failure lines of other toolchains (``--- FAIL:``, a
  ``_test.go:N:`` check, ``error[E0502]: ...``, a Rust panic, a JVM exception, an rspec
  rerun line, ``path:line: error: ...`` diagnostics, ``Error from server``, ``tool: error:``,
  ``[emerg]``, a failed unit's ``Active:`` line); an error is also used by a later step
  that runs the same command again (a rerun checks the error against the last one);
- ``exact_values``: a pytest node id in a tool result, used by a later call that
  repeats it; a version (``v0.4.47``), a setting with a number (``retries: 3``,
  ``TIMEOUT=30``) or a number with a unit (``45s``, ``512Mi``) printed by a tool, used by a
  later step whose call or text carries the same value.

Each use is credited to the latest message before the using step that introduced the
same thing, since that is the message the step would need to keep.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from doctrine.session import Fact, Step, string_values

__all__ = ["steps_and_facts"]


def steps_and_facts(msgs: list[dict[str, Any]]) -> tuple[list[Step], list[Fact]]:
    """The task steps of ``msgs`` and the facts later steps use (``Step.uses`` filled)."""
    steps = _steps(msgs)
    step_of = [0] * len(msgs)
    for s in steps:
        for i in range(s.start, s.end):
            step_of[i] = s.index
    facts = _facts(msgs, step_of)
    for f in facts:
        for s in f.used_at:
            steps[s].uses.append(f.id)
    for s in steps:
        s.uses = sorted(set(s.uses))
    return steps, facts

# A path has at least one "/" and a file extension; a bare "setup.py" is too ambiguous.
# Text is cut into maximal runs of path characters first (linear, no backtracking), and
# only runs holding both a "/" and a "." are matched against the path shape.
_RUN = re.compile(r"[\w./-]+")
_PATH = re.compile(r"(?:\.{1,2}/|/)?(?:[\w.-]+/)+[\w-][\w.-]*\.[A-Za-z]\w{0,9}")
_TRACEBACK_FILE = re.compile(r'File "([^"\n]+)", line (\d+)')
_EXC_LINE = re.compile(r"[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Failure)(?:: .*)?")
_PYTEST_E = re.compile(r"^E\s+([A-Za-z_][\w.]*(?:Error|Exception)(?:: .*)?)$", re.M)
_ERROR_PREFIX = re.compile(r"^\s*((?:Error|ERROR): .+)$", re.M)
_NODE_ID = re.compile(r"(?<![\w/.-])(?:[\w.-]+/)*[\w.-]+\.py::[\w:]+(?:\[[^\]\s]*\])?")
_QUOTED = re.compile(r"\"([^\"\n]{5,})\"|'([^'\n]{5,})'")
_EDIT_COMMANDS = {"create", "str_replace", "insert"}
# Failure lines of other toolchains, read whole (the data source's own patterns).
_TOOLCHAIN_ERR = re.compile(
    r"^\s*(?:[\u2502|]\s*)?("
    r"--- FAIL: \S+(?: \([\d.]+s\))?"
    r"|[\w./-]+_test\.go:\d+: .+"
    r"|error\[E\d{4}\]: .+"
    r"|thread '[^']+' panicked at .+"
    r"|(?:[a-z_]\w*\.)+[A-Z]\w*(?:Exception|Error): .+"
    r"|rspec \S+:\d+ # .+"
    r"|[\w./-]+\.\w{1,5}:\d+(?::\d+)?: (?:error: )?.+\[[\w-]+\]"
    r"|Error from server \(\w+\): .+"
    r"|[\w.@-]+: (?:error|FATAL|\[emerg\]|\[crit\]): .+"
    r"|psql:\S+:\d+: ERROR: .+"
    r"|Active: failed \(Result: [\w-]+\)"
    r")\s*$", re.M)
_VALUE = re.compile(
    r"(?<![\w./-])(v?\d+\.\d+\.\d+(?:-[\w.]+)?"  # a version (retry@v0.4.47 too)
    r"|\d+(?:\.\d+)?(?:ms|s|m|h|d|Mi|Gi|Ki|MB|GB|KB|MiB|GiB|%)"  # a number with a unit
    r")(?![\w.])")
_SETTING = re.compile(r"(?<![\w./-])([A-Za-z_][\w-]{2,})(?::\s+|\s*=\s*)[\"']?(-?\d[\w.]*)(?![\w.])")
_MIN_QUOTE = 8  # the shortest error message part that counts as quoted


def _steps(msgs: list[dict[str, Any]]) -> list[Step]:
    first = next((i for i, m in enumerate(msgs) if m["role"] != "system"), len(msgs))
    starts = [0]
    for i in range(first + 1, len(msgs)):
        role = msgs[i]["role"]
        prev = msgs[i - 1]["role"]
        # A user message right after another (a note, then the task) opens no step of its
        # own: a step without an assistant turn would be skipped with its decision point.
        if (role == "user" and prev != "user") or (role == "assistant" and prev != "user"):
            starts.append(i)
    ends = starts[1:] + [len(msgs)]
    return [Step(index=k, start=a, end=b) for k, (a, b) in enumerate(zip(starts, ends, strict=True))]


def _arg_strings(m: dict[str, Any], edits_only: bool = False) -> list[str]:
    """Decoded string values of a message's call arguments (optionally edit calls only)."""
    out = []
    for c in m.get("tool_calls", ()):
        args = json.loads(c["function"]["arguments"])
        if edits_only and not (c["function"]["name"] == "str_replace_editor"
                               and args.get("command") in _EDIT_COMMANDS):
            continue
        out.extend(string_values(args))
    return out


def _norm_path(p: str) -> str:
    while p.startswith("./"):
        p = p[2:]
    return p


def _suffixes(p: str) -> list[str]:
    """``p`` and its tails of two or more components (``/w/r/src/a.py`` -> ``r/src/a.py``...)."""
    parts = p.strip("/").split("/")
    return [p] + ["/".join(parts[k:]) for k in range(1, len(parts) - 1)]


class _Facts:
    """Occurrences of candidate strings, then uses, credited to the latest occurrence."""

    def __init__(self, step_of: list[int]):
        self.step_of = step_of
        self.occ: dict[tuple[str, str], list[tuple[int, str]]] = {}  # (kind, key) -> [(msg, text)]
        self.facts: dict[tuple[str, str, int], Fact] = {}

    def add(self, kind: str, key: str, msg: int, text: str) -> None:
        lst = self.occ.setdefault((kind, key), [])
        if lst and lst[-1][0] == msg:
            if lst[-1][1] == key and text != key:
                lst[-1] = (msg, text)  # prefer the form that carries a line number
            return
        lst.append((msg, text))

    def use(self, kind: str, key: str, step: int) -> None:
        best = None
        for msg, text in self.occ.get((kind, key), ()):
            if self.step_of[msg] < step:
                best = (msg, text)
        if best is None:
            return
        fkey = (kind, key, best[0])
        fact = self.facts.get(fkey)
        if fact is None:
            prefix = {"paths_with_lines": "path", "error_strings": "err", "exact_values": "val"}[kind]
            fact = self.facts[fkey] = Fact(f"{prefix}{len(self.facts)}", best[1], kind, best[0])
        if step not in fact.used_at:
            fact.used_at.append(step)


def _facts(msgs: list[dict[str, Any]], step_of: list[int]) -> list[Fact]:
    book = _Facts(step_of)
    by_suffix: dict[str, set[str]] = {}  # a tail of a seen path -> seen paths ending with it
    errors: list[str] = []  # distinct error texts, in order of first sighting
    commands = {c["id"]: _command(c) for m in msgs if m["role"] == "assistant"
                for c in m.get("tool_calls", ()) if _command(c)}
    rerun: dict[str, set[str]] = {}  # a command -> the errors its output showed
    values: set[str] = set()
    for i, m in enumerate(msgs):
        if m["role"] == "tool":
            texts = [m["content"]]
        elif m["role"] == "assistant":
            texts = _arg_strings(m, edits_only=True)
        else:
            continue
        for text in texts:
            for key, verbatim in _paths_in(text):
                book.add("paths_with_lines", key, i, verbatim)
                for tail in _suffixes(key):
                    by_suffix.setdefault(tail, set()).add(key)
            if m["role"] != "tool":
                continue
            for err in _errors_in(text):
                book.add("error_strings", err, i, err)
                if err not in errors:
                    errors.append(err)
                cmd = commands.get(m.get("tool_call_id") or "")
                if cmd:
                    rerun.setdefault(cmd, set()).add(err)
            for node in _node_ids(text):
                book.add("exact_values", node, i, node)
            for key, verbatim in _values_in(text).items():
                book.add("exact_values", key, i, verbatim)
                values.add(key)
    for j, m in enumerate(msgs):
        if m["role"] != "assistant":
            continue
        step = step_of[j]
        args = _arg_strings(m)
        for key in {k for a in args for k, _ in _paths_in(a)}:
            seen = set(by_suffix.get(key, ()))  # an output path that ends with this reference
            seen.update(t for t in _suffixes(key) if ("paths_with_lines", t) in book.occ)
            for s in seen:
                book.use("paths_with_lines", s, step)
        blob = "\n".join([m["content"], *args])
        patterns = [a or b for a, b in _QUOTED.findall(blob)] if re.search(r"\b(grep|rg)\b", blob) else []
        for err in errors:
            part = err.split(": ", 1)[1] if ": " in err else ""
            if (len(part) >= _MIN_QUOTE and part in blob) or any(p in err for p in patterns):
                book.use("error_strings", err, step)
        for arg in args:
            for node in _node_ids(arg):
                book.use("exact_values", node, step)
        for c in m.get("tool_calls", ()):
            for err in rerun.get(_command(c) or "", ()):
                book.use("error_strings", err, step)
        if values:
            for key in _values_in(blob):
                if key in values:
                    book.use("exact_values", key, step)
    facts = sorted(book.facts.values(), key=lambda f: (f.message, f.id))
    for f in facts:
        f.used_at.sort()
    return facts


def _paths_in(text: str) -> Iterator[tuple[str, str]]:
    """(normalised path, verbatim text with its line number when one is given)."""
    for m in _TRACEBACK_FILE.finditer(text):
        if "/" in m.group(1):
            yield _norm_path(m.group(1)), m.group(0)
    for m in _RUN.finditer(text):
        raw = m.group(0)
        if "/" not in raw or "." not in raw:
            continue
        bare = raw.rstrip(".")  # a path that ends a sentence
        if not _PATH.fullmatch(bare):
            continue
        line = re.match(r":(\d+)", text[m.end():m.end() + 12]) if bare == raw else None
        yield _norm_path(bare), bare + line.group(0) if line else bare


def _command(call: dict[str, Any]) -> str | None:
    """A shell call's command without a leading ``cd DIR &&`` and a trailing ``| tail``/``| head``."""
    if call["function"]["name"] not in ("execute_bash", "bash"):
        return None
    try:
        cmd = json.loads(call["function"]["arguments"]).get("command")
    except (ValueError, AttributeError):
        return None
    if not isinstance(cmd, str):
        return None
    cmd = re.sub(r"^\s*cd\s+\S+\s*&&\s*", "", cmd)
    return " ".join(re.sub(r"\s*\|\s*(?:tail|head)\b[^|]*$", "", cmd).split()) or None


def _values_in(text: str) -> dict[str, str]:
    """Versions, numbers with units and ``key: 3`` settings of ``text``: key -> verbatim text.

    A setting's key is its name and value whatever the separator (``retries: 3`` and
    ``retries=3`` are one value); the verbatim text is what the message printed."""
    if not any(ch.isdigit() for ch in text):
        return {}
    out = {m.group(1).lstrip("v"): m.group(1) for m in _VALUE.finditer(text)}
    for m in _SETTING.finditer(text):
        out[f"{m.group(1)}={m.group(2)}"] = m.group(0)
    return out


def _node_ids(text: str) -> set[str]:
    return set(_NODE_ID.findall(text)) if ".py::" in text else set()  # the cheap test first


def _errors_in(text: str) -> list[str]:
    found = []
    if "Traceback (most recent call last):" in text:
        lines = text.splitlines()
        for k, line in enumerate(lines):
            if line.startswith("Traceback (most recent call last):"):
                for nxt in lines[k + 1:]:
                    if nxt and not nxt[0].isspace() and _EXC_LINE.fullmatch(nxt.rstrip()):
                        found.append(nxt.rstrip())
                        break
    if "E " in text:
        found += [e.rstrip() for e in _PYTEST_E.findall(text)]
    if "RROR: " in text or "rror: " in text:
        found += [e.rstrip() for e in _ERROR_PREFIX.findall(text)]
    found += [e.rstrip() for e in _TOOLCHAIN_ERR.findall(text)]
    return list(dict.fromkeys(found))
