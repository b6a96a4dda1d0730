"""The labeler's reading of failures outside Python and JavaScript (its own patterns).

Go, Rust, JVM/Gradle, rspec, compiler and linter diagnostics (mypy, go vet, actionlint,
psql), systemd units and journal lines, tool-prefixed errors (``pg_dump: error:``,
``nginx: [emerg]``), nginx's error log, ``kubectl``'s ``Error from server`` and Terraform's boxed errors.
:func:`read_failures` gives the exact lines a handoff must quote, where the failure was
raised and the run's counts. Written apart from the conformance checker's extraction on
purpose: the checker judges the labels, it never writes them (DESIGN.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["Failures", "read_failures"]

_JOURNAL_PREFIX = re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ [\w@.-]+(?:\[\d+\])?: ")
_BOX_EDGE = re.compile(r"^[\u2502\u2575\u2577]\s?")
_GO_TEST = re.compile(r"^--- FAIL: (\S+)")
_GO_CHECK = re.compile(r"^(?P<loc>[\w./-]+_test\.go:\d+): \S.*$")
_RUSTC = re.compile(r"^error\[E\d{4}\]: .+$")
_ARROW_LOC = re.compile(r"^-->\s*(?P<path>[^\s:]+):(?P<line>\d+):\d+$")
_PANIC = re.compile(r"^thread '(?P<name>[^']+)' panicked at (?P<path>[^\s:]+):(?P<line>\d+):\d+:?$")
_SIDES = re.compile(r"^(?:left|right): .+$")
_RSPEC_SIDES = re.compile(r"^(?:expected|got): .+$")
_TF_AT = re.compile(r"^on (?P<path>[\w./-]+\.tf) line (?P<line>\d+)\b")
_JVM_AT = re.compile(r"^at (?P<fn>[\w$.<>]+)\((?P<loc>[\w$-]+\.(?:java|kt|scala|groovy):\d+)\)$")
_JVM_RUNTIME = re.compile(r"^(?:java|javax|jdk|sun|kotlin|scala|org\.junit|org\.gradle)\.")
_JVM_EXC = re.compile(r"^(?:[a-z_]\w*\.)+[A-Z]\w*(?:Exception|Error)(?::\s.+)?$")
_GRADLE_FAILED = re.compile(r"^\S+ > .+ FAILED$")
_RSPEC_RERUN = re.compile(r"^rspec (?P<loc>\S+:\d+) # .+$")
_DIAG = re.compile(r"^(?:[\w-]+:)?(?P<loc>[\w./@+-]+\.[A-Za-z]{1,5}:\d+)(?::\d+)?:\s+(?:(?:error|fatal error|ERROR):\s+)?"
                   r"(?P<msg>.+)$")
_DIAG_SIGN = re.compile(r"^(?:[\w-]+:)?[\w./@+-]+\.[A-Za-z]{1,5}:\d+(?::\d+:|:\s+(?:error|fatal error|ERROR):)|"
                        r"\s\[[\w-]+\]$")
_UNIT_FAILED = re.compile(r"^Active: (?:failed|inactive \(dead\)|activating \(auto-restart\))(?: \(Result: [\w-]+\))?")
_EXIT_STATUS = re.compile(r"status=\d+/[A-Z]+")
_TOOL_SAYS = re.compile(r"^[\w.@-]+: (?:error|fatal|FATAL|ERROR|\[(?:emerg|alert|crit|error)\]):? .+$")
# nginx's error log: a date, the level in brackets, pid#tid and a connection number, then the message.
_NGINX_ERROR = re.compile(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d \[(?:emerg|alert|crit|error|warn)\] \d+#\d+: "
                          r"(?:\*\d+ )?(?P<msg>.+)$")
_SERVER = re.compile(r"^(?:Error from server \(\w+\): .+|Error: .+|error: .+)$")
_NODE_AT = re.compile(r"^at .*?\(?(?P<loc>(?!node:|internal/)[^\s()]+\.[cm]?[jt]sx?:\d+):\d+\)?$")
_COUNT_LINES = (
    re.compile(r"^test result: \w+\. (?P<c>\d+ passed; \d+ failed)"),
    re.compile(r"^(?P<c>\d+ tests completed, \d+ failed(?:, \d+ skipped)?)"),
    re.compile(r"^(?P<c>\d+ examples?, \d+ failures?(?:, \d+ pending)?)$"),
)


@dataclass
class Failures:
    lines: list[str] = field(default_factory=list)
    where: str | None = None
    counts: str | None = None
    frames_taken: int = 0

    def add(self, line: str) -> None:
        line = " ".join(line.split())
        if line and line not in self.lines:
            self.lines.append(line)


def read_failures(out: str) -> Failures:
    """The failure lines of one tool output in these toolchains, most telling first."""
    f = Failures()
    for raw in out.split("\n"):
        s = _JOURNAL_PREFIX.sub("", _BOX_EDGE.sub("", raw.strip())).strip()
        if not s:
            continue
        for pat in _COUNT_LINES:
            m = pat.match(s)
            if m:
                f.counts = m.group("c").replace(";", ",")
                break
        else:
            _read_line(s, f)
    return f


def _read_line(s: str, f: Failures) -> None:
    m = _NGINX_ERROR.match(s)
    if m:  # the message is the error; the date and the ids change with every request
        f.add(m.group("msg"))
        return
    m = _GO_TEST.match(s)
    if m:
        f.add(f"--- FAIL: {m.group(1)}")
        return
    m = _GO_CHECK.match(s)
    if m:
        f.add(s)
        f.where = f.where or m.group("loc")
        return
    if _RUSTC.match(s):
        f.add(s)
        return
    m = _ARROW_LOC.match(s)
    if m:
        f.where = f.where or f"{m.group('path')}:{m.group('line')}"
        return
    m = _PANIC.match(s)
    if m:
        f.add(f"thread '{m.group('name')}' panicked at {m.group('path')}:{m.group('line')}")
        f.where = f.where or f"{m.group('path')}:{m.group('line')}"
        return
    if (_SIDES.match(s) and f.lines) or _RSPEC_SIDES.match(s):
        f.add(s)
        return
    m = _TF_AT.match(s)
    if m:
        f.where = f.where or f"{m.group('path')}:{m.group('line')}"
        return
    m = _JVM_AT.match(s)
    if m:
        if not _JVM_RUNTIME.match(m.group("fn")) and f.frames_taken < 2:
            f.where = f.where or m.group("loc")
            f.frames_taken += 1  # the two innermost project frames of this exception
            f.add(s[3:])
        return
    m = _NODE_AT.match(s)
    if m:
        if "node_modules" not in m.group("loc"):
            f.where = f.where or m.group("loc")
        return
    if _JVM_EXC.match(s):
        f.add(s)
        f.frames_taken = 0
        return
    if _GRADLE_FAILED.match(s) or _UNIT_FAILED.match(s) or _TOOL_SAYS.match(s) or _SERVER.match(s):
        f.add(_UNIT_FAILED.match(s).group(0) if _UNIT_FAILED.match(s) else s)
        return
    m = _RSPEC_RERUN.match(s)
    if m:
        f.add(s)
        f.where = f.where or m.group("loc")
        return
    if _DIAG_SIGN.search(s):
        m = _DIAG.match(s)
        if m:
            f.add(s)
            f.where = f.where or m.group("loc")
            return
    m = _EXIT_STATUS.search(s)
    if m and "FAILURE" in m.group(0):
        f.add(m.group(0))
