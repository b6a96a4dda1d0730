"""KEEP candidates from tool output: tracebacks, test runners, compilers, logs, shells.

Each ``scan_*`` function takes the text of one tool result, the message key and the
collector, and adds what a summary should carry out of that output. Salience values are
named constants so the ranking is readable in one place (see the package docstring).
"""

from __future__ import annotations

import re

from .items import Collector
from .patterns import find_path_lines, norm, truncate

__all__ = ["scan_tool_output"]

# --- salience (0..1) of what tool output yields -------------------------------------
S_FINAL_EXCEPTION = 1.0  # the last exception line of the last traceback in the message
S_EXCEPTION = 0.9  # other traceback exception lines (chained, earlier)
S_TEST_ID = 0.9  # FAILED/ERROR path::test ids from pytest, failing jest tests
S_TS_ERROR = 0.9  # "error TS2345: ..." compiler diagnostics
S_FINAL_COUNTS = 0.95  # the last "N failed, M passed" line of the range
S_COUNTS = 0.5  # earlier test-count lines
S_ASSERT = 0.75  # the first "E   ..." line of a pytest failure
S_ERROR_LINE = 0.7  # "TypeError: ...", "fatal: ...", "npm ERR! ...", shell errors
S_LOG_ERROR = 0.7  # ERROR/FATAL/CRITICAL log messages
S_LOG_WARN = 0.3  # WARN/WARNING log messages
S_FRAME_PROJECT_LAST = 0.85  # innermost traceback frame in project code
S_FRAME_PROJECT = 0.5  # other project frames
S_FRAME_LIBRARY = 0.15  # frames in site-packages, stdlib, node_modules
S_DIAG_LOCATION = 0.85  # path:line of a compiler diagnostic or pytest failure location
S_OUTPUT_PATH = 0.3  # any other path:line in output (grep -n hits and the like)
S_NOTE = 0.2  # a linter's note line (under min_salience: context, not a KEEP item)

# Where toolchains install what the project depends on: a frame or path there is not the project's
# (Python site/dist-packages and stdlib, AWS Lambda's runtime and layers, node_modules, gems, the
# Go module cache and stdlib, cargo's registry, the JDK).
LIB_PATH = re.compile(r"^<|site-packages|dist-packages|/lib/python\d|<frozen|node_modules|node:internal|^internal/|"
                       r"^/var/runtime/|^/var/lang/|^/opt/python/|/gems/|/go/pkg/mod/|/usr/local/go/src/|"
                       r"/\.cargo/registry/|/usr/lib/jvm/|/lib/std/")
_LIB_PATH = LIB_PATH
_EXC_NAME = (
    r"(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Warning|Failure|Fault|Timeout|Refused)"
    r"|Invalid\w+|StopIteration|KeyboardInterrupt)"
)
_EXC_LINE = re.compile(r"^(?P<exc>" + _EXC_NAME + r")(?::\s*(?P<msg>.*))?$")
# Inside a traceback the last line is the exception whatever its class is called.
_TB_EXC_LINE = re.compile(r"^(?P<exc>(?:[A-Za-z_]\w*\.)*[A-Z]\w*)(?::\s*(?P<msg>.*))?$")
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+)(?:, in (?P<fn>\S+))?')
_PYTEST_COUNTS = re.compile(
    r"^[=\s]*(?P<counts>(?:\d+ (?:failed|passed|errors?|skipped|xfailed|xpassed|warnings?|deselected|"
    r"rerun)(?:, )?)+) in \d+(?:\.\d+)?s\b"
)
_JEST_COUNTS = re.compile(r"^\s*Tests:\s+(?P<counts>(?:\d+ (?:failed|passed|skipped|todo|total)(?:, )?)+)")
_PYTEST_ID = re.compile(r"^(?:FAILED|ERROR) (?P<id>\S+::\S+|\S+\.py)(?: - (?P<why>.+))?$")
_PYTEST_LOC = re.compile(r"^(?P<path>[\w./-]+\.py):(?P<line>\d+): (?P<exc>\w+)")
_TS_DIAG = re.compile(
    r"^(?P<path>[^\s(:]+\.(?:tsx?|jsx?|mts|cts|vue))(?:\((?P<l1>\d+),\d+\)|:(?P<l2>\d+):\d+)\s*[:-]\s*"
    r"(?P<sev>error|warning) (?P<code>TS\d+): (?P<msg>.+)$"
)
_JEST_EXPECT = re.compile(r"^\s*(?P<line>(?:Expected|Received)(?: \w+)?: .+)$")
_JEST_FAIL = re.compile(r"^\s*● (?P<name>.+? › .+)$")
_NODE_FRAME = re.compile(r"^\s*at (?:.+? \()?(?P<path>[^()\s]+?):(?P<line>\d+):\d+\)?$")
_SHELL_ERR = re.compile(
    r"^(?P<line>(?:[\w./-]+: )*.*?(?:command not found|No such file or directory|Permission denied|"
    r"Segmentation fault|cannot access .+|Connection refused|Killed))\s*$"
)
_PREFIX_ERR = re.compile(r"^(?P<line>(?:fatal|error|ERROR|Error|npm ERR!|npm error|panic|FATAL):? .+)$")
_LOG_LEVEL = re.compile(r"(?:^|[\s\[|])(?P<lvl>ERROR|FATAL|CRITICAL|PANIC|SEVERE|WARN|WARNING)(?:[\]|:]|\s)\s*(?P<msg>.+)$")
# nginx error log: "2026/12/11 13:27:31 [error] 9765#0: *17694 upstream timed out ...", its
# levels lower-case in brackets (the upper-case _LOG_LEVEL misses them).
_NGINX_LOG = re.compile(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d \[(?P<lvl>emerg|alert|crit|error|warn)\] "
                        r"\d+#\d+: (?:\*\d+ )?(?P<msg>.+)$")
_LOGFMT = re.compile(r'\blevel=(?P<lvl>error|fatal|warn|warning)\b.*?\bmsg=(?:"(?P<q>[^"]+)"|(?P<u>\S+))', re.I)
# Other toolchains' failure shapes (Go, Rust, JVM, rspec, linters, service managers).
_GO_FAIL = re.compile(r"^--- FAIL: (?P<name>\S+)")
_GO_ASSERT = re.compile(r"^(?P<path>[\w./-]+_test\.go):(?P<line>\d+): (?P<msg>.+)$")
_RUST_ERR = re.compile(r"^(?P<sev>error|warning)\[(?P<code>E\d{4})\]: (?P<msg>.+)$")
_RUST_LOC = re.compile(r"^-->\s*(?P<path>[^\s:]+):(?P<line>\d+):\d+$")
_RUST_PANIC = re.compile(r"^thread '(?P<name>[^']+)' panicked at (?P<path>[^\s:]+):(?P<line>\d+):\d+:?(?: (?P<msg>.+))?$")
_RUST_ASSERT = re.compile(r"^(?P<line>(?:left|right): .+)$")
_CARGO_COUNTS = re.compile(r"^test result: \w+\. (?P<counts>\d+ passed; \d+ failed)")
_JVM_FRAME = re.compile(r"^at (?P<fn>[\w$.<>]+)\((?P<file>[\w$-]+\.(?:java|kt|scala|groovy|clj)):(?P<line>\d+)\)$")
_JVM_LIB = re.compile(r"^(?:java|javax|jdk|sun|kotlin|scala|org\.junit|org\.gradle|org\.springframework|"
                      r"worker\.org\.gradle)\.")
_GRADLE_TEST = re.compile(r"^(?P<cls>[\w.$]+) > (?P<name>.+?) FAILED$")
_GRADLE_COUNTS = re.compile(r"^(?P<counts>\d+ tests completed, \d+ failed(?:, \d+ skipped)?)")
_RSPEC_ID = re.compile(r"^rspec (?P<path>\S+?):(?P<line>\d+) # (?P<name>.+)$")
_RSPEC_COUNTS = re.compile(r"^(?P<counts>\d+ examples?, \d+ failures?(?:, \d+ pending)?)$")
_RSPEC_EXPECT = re.compile(r"^(?P<line>(?:expected|got|Failure/Error): .+)$")
# A compiler or linter diagnostic: path:line[:col]: [severity:] message [rule] (mypy, go vet,
# actionlint, shellcheck -f gcc, psql). A bare grep -n hit (path:line:text) is not one.
_LINT_DIAG = re.compile(
    r"^(?:[\w-]+:)?(?P<path>[\w./@+-]+\.[A-Za-z]{1,5}):(?P<line>\d+)(?::(?P<col>\d+))?:\s+"
    r"(?:(?P<sev>error|warning|note|fatal error|ERROR|WARNING|FATAL):\s+)?(?P<msg>.+?)\s*$")
_RULE_TAG = re.compile(r"\s\[[\w-]+\]$")
# systemd: the unit's state line and a failed process line.
_UNIT_STATE = re.compile(r"^Active: (?P<state>failed|inactive \(dead\)|activating \(auto-restart\))(?P<rest>.*)$")
_UNIT_PROC = re.compile(r"\(code=(?:exited|killed|dumped), status=(?P<st>[^)]+)\)")
# journalctl / syslog prefix: "Dec 01 09:14:03 host unit[pid]: ".
_JOURNAL = re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ [\w@.-]+(?:\[\d+\])?: ")
# "pg_dump: error: ...", "nginx: [emerg] ...", "helm: error ...": a tool naming its own failure.
_TOOL_ERR = re.compile(r"^(?P<line>[\w.@-]+: (?:error|fatal|FATAL|ERROR|\[(?:emerg|alert|crit|error)\]):? .+)$")
_BOX = re.compile(r"^[\u2502\u2575\u2577|]\s?")
# Also an ISO timestamp or a request id (UUID) that some runtimes log after the level.
_LEADING_TAGS = re.compile(r"^(?:\[[^\]]{1,40}\]\s*|[\w.-]{1,40}:\s(?=\S)|-\s|"
                           r"\d{4}-\d\d-\d\dT[\d:.]+(?:Z|[+-]\d\d:?\d\d)?\s+|[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}\s+)+")


# A line can match one of the patterns below only if it holds one of these (lower-cased)
# substrings or starts like a stack frame, an "E" line or a section rule. In a long log
# most lines hold none, and skipping them keeps extraction fast.
_KEYWORDS = (
    "error", "fail", "fatal", "exception", "warn", "critical", "panic", "severe", "denied", "not found",
    "no such", "killed", "refused", "segmentation", "cannot access", "passed", "skipped", "deselected",
    "rerun", "xpass", "exit", "interrupt", "fault", "timeout", "invalid", "stopiteration", "\u25cf",
    "expected", "received", "traceback", "::", "tests:", "err!", "left:", "right:", "got:", "active:",
    "status=", "examples,", "rspec ", "[emerg]", "[alert]", "[crit]", "-->", "panicked",
)
_LINE_START = re.compile(r"\s*(?:at\s|E(?:\s|$))|[_=-]{5}|.*\.py:\d|.*\.\w{1,5}:\d+:")


def _interesting(line: str) -> bool:
    low = line.lower()
    return any(k in low for k in _KEYWORDS) or _LINE_START.match(line) is not None


def _lines(text: str) -> list[str]:
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _scan_tracebacks(lines: list[str], key: str, c: Collector) -> set[int]:
    """Python tracebacks: exception lines, frames, and the failing code line. Returns used lines."""
    used: set[int] = set()
    exceptions: list[tuple[int, str]] = []
    i = 0
    while i < len(lines):
        if not lines[i].lstrip().startswith("Traceback (most recent call last)"):
            i += 1
            continue
        indent = len(lines[i]) - len(lines[i].lstrip())
        frames: list[tuple[str, int, str | None, str | None]] = []
        j = i + 1
        while j < len(lines):
            raw = lines[j]
            m = _FRAME.match(raw)
            if m:
                code = lines[j + 1].strip() if j + 1 < len(lines) and not _FRAME.match(lines[j + 1]) else None
                frames.append((m.group("path"), int(m.group("line")), m.group("fn"), code))
                used.add(j)
                j += 1
                continue
            body = raw[indent:] if raw[:indent].strip() == "" else raw
            if body and not body[0].isspace() and _TB_EXC_LINE.match(body.strip()):
                exceptions.append((j, body.strip()))
                used.add(j)
                break
            j += 1
        project = [f for f in frames if not _LIB_PATH.search(f[0])]
        for path, line, _fn, _code in frames:
            if _LIB_PATH.search(path):
                s = S_FRAME_LIBRARY
            else:
                s = S_FRAME_PROJECT_LAST if project and (path, line) == project[-1][:2] else S_FRAME_PROJECT
            c.add("paths_with_lines", "traceback_frame", f"{path}:{line}", key, s, path=path, line=line)
        # The source line printed under a frame is context of that frame, not a signature
        # the summary must carry: the frame's path:line already anchors it.
        i = j + 1
    for n, (_j, line) in enumerate(exceptions):
        s = S_FINAL_EXCEPTION if n == len(exceptions) - 1 else S_EXCEPTION
        c.add("error_strings", "exception", truncate(line, 200), key, s)
    return used


def _skeleton(msg: str) -> str:
    """A log message with its numbers masked: one item per message shape, not per line."""
    return re.sub(r"\d+", "#", msg.lower())


_PROSE_PAIR = re.compile(r"\b[A-Za-z]{3,}\s+[A-Za-z]{3,}\b")


def _prefix_only(head: str) -> bool:
    """A log line's head of timestamps, stream names and ids (AWS Lambda puts ~90 characters of
    them before ``[ERROR]``), as opposed to free text in which the word ERROR appears."""
    return _PROSE_PAIR.search(head) is None


def _log_message(msg: str) -> str:
    """The message of a log line without leading [component]/pid/tag noise."""
    return _LEADING_TAGS.sub("", msg.strip()).strip()


def _loc(c: Collector, kind: str, path: str, line: str, key: str, s: float) -> None:
    c.add("paths_with_lines", kind, f"{path}:{line}", key, s, path=path, line=int(line))


def _scan_toolchains(line: str, key: str, c: Collector, counts: list, state: dict) -> bool:
    """Go, Rust, JVM, rspec, linter, systemd and tool-prefixed errors; True if ``line`` was one."""
    if m := _GO_FAIL.match(line):
        c.add("error_strings", "test_id", m.group("name"), key, S_TEST_ID)
        return True
    if m := _GO_ASSERT.match(line):
        _loc(c, "failure_location", m.group("path"), m.group("line"), key, S_DIAG_LOCATION)
        c.add("error_strings", "assertion", truncate(line, 200), key, S_ASSERT)
        return True
    if m := _RUST_ERR.match(line):
        s = S_TS_ERROR if m.group("sev") == "error" else S_LOG_WARN
        c.add("error_strings", "compiler_error", truncate(line, 200), key, s)
        state["rust_sev"] = s
        return True
    if (m := _RUST_LOC.match(line)) and "rust_sev" in state:
        _loc(c, "diagnostic", m.group("path"), m.group("line"), key,
             S_DIAG_LOCATION if state.pop("rust_sev") == S_TS_ERROR else S_OUTPUT_PATH)
        return True
    if m := _RUST_PANIC.match(line):
        c.add("error_strings", "test_id", m.group("name"), key, S_TEST_ID)
        _loc(c, "failure_location", m.group("path"), m.group("line"), key, S_DIAG_LOCATION)
        if m.group("msg"):
            c.add("error_strings", "assertion", truncate(m.group("msg"), 200), key, S_ASSERT)
        state["panic"] = True
        return True
    if state.get("panic") and (m := _RUST_ASSERT.match(line)):
        c.add("error_strings", "assertion", truncate(m.group("line"), 200), key, S_ASSERT)
        return True
    for pat, runner in ((_CARGO_COUNTS, "cargo"), (_GRADLE_COUNTS, "gradle"), (_RSPEC_COUNTS, "rspec")):
        if m := pat.match(line):
            counts.append((runner, m.group("counts").replace(";", ","), key))
            return True
    if m := _JVM_FRAME.match(line):
        lib = _JVM_LIB.match(m.group("fn")) is not None
        s = S_FRAME_LIBRARY if lib else S_FRAME_PROJECT if state.get("jvm_seen") else S_FRAME_PROJECT_LAST
        state["jvm_seen"] = state.get("jvm_seen") or not lib
        _loc(c, "stack_frame", m.group("file"), m.group("line"), key, s)
        if s == S_FRAME_PROJECT_LAST:
            c.add("error_strings", "stack_frame", truncate(line[3:], 200), key, S_ASSERT)
        return True
    if m := _GRADLE_TEST.match(line):
        c.add("error_strings", "test_id", f"{m.group('cls')} > {m.group('name')}", key, S_TEST_ID,
              needle=m.group("name"))
        return True
    if m := _RSPEC_ID.match(line):
        c.add("error_strings", "test_id", f"{m.group('path')}:{m.group('line')} # {m.group('name')}", key,
              S_TEST_ID, needle=m.group("name"))
        _loc(c, "failure_location", m.group("path"), m.group("line"), key, S_DIAG_LOCATION)
        return True
    if m := _RSPEC_EXPECT.match(line):
        if not line.startswith("Failure/Error"):
            c.add("error_strings", "assertion", truncate(m.group("line"), 200), key, S_ASSERT)
        return True
    if (m := _LINT_DIAG.match(line)) and (m.group("sev") or m.group("col") or _RULE_TAG.search(line)):
        sev = (m.group("sev") or "error").lower()
        # A note (mypy's "Revealed type", a hint) explains an error; it is not one to keep.
        s = S_TS_ERROR if "error" in sev or "fatal" in sev else S_NOTE if sev == "note" else S_LOG_WARN
        _loc(c, "diagnostic", m.group("path"), m.group("line"), key,
             S_DIAG_LOCATION if s == S_TS_ERROR else min(s, S_OUTPUT_PATH))
        c.add("error_strings", "diagnostic", truncate(m.group("msg"), 200), key, s)
        return True
    if m := _UNIT_STATE.match(line):
        res = re.search(r"\(Result: [\w-]+\)", m.group("rest"))
        text = f"Active: {m.group('state')}" + (f" {res.group(0)}" if res else "")
        c.add("error_strings", "unit_state", text, key, S_ERROR_LINE)
        return True
    if (m := _UNIT_PROC.search(line)) and "FAILURE" in m.group("st"):
        c.add("exact_values", "exit_status", f"status={m.group('st')}", key, S_ERROR_LINE, needle=f"status={m.group('st')}")
        return True
    if m := _TOOL_ERR.match(line):
        c.add("error_strings", "error_line", truncate(m.group("line"), 200), key, S_ERROR_LINE)
        return True
    return False


def scan_tool_output(text: str, key: str, c: Collector, *, last_counts: list) -> None:
    """Add the KEEP candidates of one tool result.

    ``last_counts`` is shared across the range: each test-count line found is appended
    as ``(kind, text, key)``, so the caller can rank the range's last one highest.
    """
    lines = _lines(text)
    used = _scan_tracebacks(lines, key, c)
    in_pytest_failure = False
    e_seen = False
    node_project_frame_seen = False
    in_jest_failure = False
    state: dict = {}
    for idx, raw in enumerate(lines):
        if idx in used:
            continue
        line = _JOURNAL.sub("", _BOX.sub("", raw.rstrip()))
        stripped = line.strip()
        if not stripped or not _interesting(line):
            continue
        m = _PYTEST_COUNTS.match(stripped)
        if m:
            last_counts.append(("pytest", m.group("counts").rstrip(", "), key))
            continue
        m = _JEST_COUNTS.match(stripped)
        if m:
            last_counts.append(("jest", m.group("counts").rstrip(", "), key))
            continue
        if stripped.startswith("_____") or stripped.startswith("=====") or stripped.startswith("-----"):
            in_pytest_failure, e_seen = stripped.startswith("_"), False
            continue
        m = _PYTEST_ID.match(stripped)
        if m:
            c.add("error_strings", "test_id", m.group("id"), key, S_TEST_ID)
            if m.group("why"):
                c.add("error_strings", "failure_reason", truncate(m.group("why"), 200), key, S_ASSERT)
            continue
        if stripped.startswith("E ") or stripped == "E":
            body = stripped[1:].strip()
            if body and _EXC_LINE.match(body):
                c.add("error_strings", "exception", truncate(body, 200), key, S_EXCEPTION)
            elif body and not e_seen:
                c.add("error_strings", "assertion", truncate(body, 200), key, S_ASSERT)
            e_seen = True
            continue
        m = _PYTEST_LOC.match(stripped)
        if m and in_pytest_failure:
            c.add("paths_with_lines", "failure_location", f"{m.group('path')}:{m.group('line')}", key,
                  S_DIAG_LOCATION, path=m.group("path"), line=int(m.group("line")))
            continue
        m = _TS_DIAG.match(stripped)
        if m:
            ln = int(m.group("l1") or m.group("l2"))
            c.add("paths_with_lines", "diagnostic", f"{m.group('path')}:{ln}", key, S_DIAG_LOCATION,
                  path=m.group("path"), line=ln)
            s = S_TS_ERROR if m.group("sev") == "error" else S_LOG_WARN
            c.add("error_strings", "ts_error", truncate(f"{m.group('code')}: {m.group('msg')}", 200), key, s)
            continue
        m = _JEST_FAIL.match(line)
        if m:
            c.add("error_strings", "test_id", m.group("name"), key, S_TEST_ID)
            in_jest_failure = True
            continue
        m = _JEST_EXPECT.match(line)
        if m and in_jest_failure:
            c.add("error_strings", "assertion", truncate(m.group("line"), 200), key, S_ASSERT)
            continue
        if _scan_toolchains(stripped, key, c, last_counts, state):
            continue
        m = _NODE_FRAME.match(line)
        if m:
            path, ln = m.group("path"), int(m.group("line"))
            if _LIB_PATH.search(path) or path.startswith("node:"):
                s = S_FRAME_LIBRARY
            else:
                s = S_FRAME_PROJECT if node_project_frame_seen else S_FRAME_PROJECT_LAST
                node_project_frame_seen = True
            c.add("paths_with_lines", "stack_frame", f"{path}:{ln}", key, s, path=path, line=ln)
            continue
        if _EXC_LINE.match(stripped) and ":" in stripped:
            is_warning = stripped.split(":", 1)[0].endswith("Warning")
            c.add("error_strings", "error_line", truncate(stripped, 200), key,
                  S_LOG_WARN if is_warning else S_ERROR_LINE)
            continue
        m = _LOGFMT.search(stripped)
        if m:
            lvl = m.group("lvl").upper()
            msg = norm(m.group("q") or m.group("u"))
            c.add("error_strings", "log_error", truncate(msg, 200), key,
                  S_LOG_WARN if lvl.startswith("WARN") else S_LOG_ERROR, skeleton=_skeleton(msg))
            continue
        m = _NGINX_LOG.match(stripped)
        if m:
            msg = norm(m.group("msg"))
            c.add("error_strings", "log_error", truncate(msg, 200), key,
                  S_LOG_WARN if m.group("lvl") == "warn" else S_LOG_ERROR, skeleton=_skeleton(msg))
            continue
        m = _LOG_LEVEL.search(stripped)
        if m and (m.start() < 60 or _prefix_only(stripped[:m.start()])):  # the level sits in the prefix
            msg = _log_message(m.group("msg"))
            if len(msg) >= 6:
                lvl = m.group("lvl")
                c.add("error_strings", "log_error", truncate(msg, 200), key,
                      S_LOG_WARN if lvl.startswith("WARN") else S_LOG_ERROR, skeleton=_skeleton(msg))
            continue
        m = _SHELL_ERR.match(stripped) or _PREFIX_ERR.match(stripped)
        if m:
            c.add("error_strings", "error_line", truncate(m.group("line"), 200), key, S_ERROR_LINE)
            continue
    # Any other path:line in the output (grep -n, linters, custom logs) is a weak candidate.
    for path, ln, _off in find_path_lines(text):
        if _LIB_PATH.search(path):
            continue
        c.add("paths_with_lines", "output_path", f"{path}:{ln}", key, S_OUTPUT_PATH, path=path, line=ln)
