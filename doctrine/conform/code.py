"""KEEP candidates from code: edits, file views (``cat -n``), diffs, and values in text.

A file view or a whole new file holds many lines; only signatures (``def``/``class``/
``function``/``interface``...) and config settings are candidates there, and weakly. An
edit's changed lines are the load-bearing ones: the lines of ``new_str`` that are not in
``old_str`` are strong candidates, and the edit result's ``cat -n`` snippet tells which
line number they landed on.
"""

from __future__ import annotations

import re
from collections import Counter

from .items import Collector
from .patterns import CONFIG_EXTS, UNIT_VALUE_RE, VERSION_RE, norm, truncate

__all__ = [
    "SIGNATURE_RE",
    "scan_diff",
    "scan_edit",
    "scan_edit_result",
    "scan_file_text",
    "scan_values",
    "scan_view",
]

S_EDIT_LINE = 0.85  # the first load-bearing changed line of an edit
S_EDIT_LINE_MORE = 0.6  # further changed lines (at most two more per edit)
S_EDIT_SIGNATURE = 0.75  # a signature inside an edit's new text
S_EDIT_CONTEXT_SIGNATURE = 0.45  # an unchanged signature quoted as edit context
S_EDIT_LOCATION = 0.8  # path:line where an edit landed
S_NEW_FILE_SIGNATURE = 0.55  # signatures of a created file
S_VIEW_SIGNATURE = 0.35  # signatures seen in a file view (boosted when named elsewhere)
S_DIFF_LINE = 0.4  # '+' lines of a diff shown in tool output
S_DIFF_LOCATION = 0.3
S_TODO_EDIT = 0.8  # TODO/FIXME written by the agent in an edit
S_TODO_VIEW = 0.3  # TODO/FIXME read in a file view
S_CONFIG_EDIT = 0.8  # a setting changed by an edit
S_CONFIG_VIEW = 0.35  # a setting read in a config file view
S_CONFIG_OUTPUT = 0.2  # key=value noise in logs and command output
S_CONFIG_PLAIN = 0.25  # a viewed config row with no number and no threshold name (under min_salience)

SIGNATURE_RE = re.compile(
    r"^\s*(?:@\w[\w.]*\s+)?(?:(?:export\s+)?(?:default\s+)?(?:async\s+)?(?:def|class|function\*?|interface|"
    r"type|enum|struct|trait|impl|fn|func)\s+[A-Za-z_$][\w$]*|(?:export\s+)?(?:const|let)\s+[A-Za-z_$][\w$]*\s*"
    r"(?::[^=]+)?=\s*(?:async\s*)?(?:\([^)]*\)|[A-Za-z_$][\w$]*)\s*(?::[^=]+)?=>|(?:public|private|protected|static)"
    r"\s+[\w<>\[\], ]+\s+[A-Za-z_]\w*\s*\()"
)
_TODO = re.compile(r"\b(?P<tag>TODO|FIXME|XXX|HACK)\b[:(\s-]*(?P<body>[^\n]*)")
_CAT_N = re.compile(r"^\s*(?P<n>\d+)\t(?P<code>.*)$")
_VIEW_HEAD = re.compile(r"running `cat -n` on (?:a snippet of )?(?P<path>\S+?):?\s*$", re.M)
_ENV = re.compile(r"(?<![\w.-])(?P<key>[A-Z][A-Z0-9_]{2,})=(?P<value>\"[^\"\n]*\"|'[^'\n]*'|[^\s'\";,)]+)")
_FLAG = re.compile(r"(?<![\w-])--(?P<key>[a-z][\w-]+)=(?P<value>[^\s'\";,`]+)")  # a quote or backtick ends the value
# Not inside a --flag=value (npm ls --depth=0): the flag is kept whole, and its tail "depth=0"
# as a second item could never be matched, not even by the command quoted verbatim.
_KWARG = re.compile(
    r"(?<![\w.-])(?P<key>(?:[a-z_][a-z0-9_]*)?(?:timeout|limit|max|min|retries|retry|size|threshold|ttl|port|"
    r"interval|delay|workers|count|rate|level|version|depth|batch|window|capacity)[a-z0-9_]*)"
    r"\s*(?P<sep>[=:])\s*(?P<value>-?\d+(?:_\d{3})*(?:\.\d+)?(?:[a-zA-Z%]+)?|True|False|true|false|None|null|\"[^\"\n]{1,40}\"|'[^'\n]{1,40}')",
    re.I,
)
_CFG_LINE = re.compile(
    r"^\s*(?:export\s+)?[\"']?(?P<key>[A-Za-z_][\w.-]*)[\"']?\s*(?P<sep>[:=])\s*(?P<value>[^\s#{\[][^#\n]*?)\s*,?\s*$"
)
# Output lines where a version is the point (installs, bumps, resolutions), not a banner.
_VERSION_CONTEXT = re.compile(
    r"install|upgrad|downgrad|bump|version|requires?|depend|resolv|updated|added|changed|->|→|=>|"
    r"\bv\d+\.\d+\.\d+", re.I)  # a v-prefixed x.y.z (go.mod, tags) names a version itself
_BUILD_PROGRESS = re.compile(r"^\s*(?:Compiling|Checking|Finished|Running|Fresh|Documenting)\s")
# Threshold-like words (not inside longer words: "report" is not "port").
THRESHOLD_WORDS = re.compile(
    r"(?<![a-z])(?:timeout|limit|threshold|max|min|retr|ttl|latency|took|duration|memory|heap|exceed|budget|"
    r"quota|port|interval|delay|size|version)", re.I)
_HASH = re.compile(r"(?<![\w-])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w-])")
_SKELETON_DIGITS = re.compile(r"\d+")
_TEST_TIMING = re.compile(r"^\s*(?:[✓✔✕✗×√]|PASSED|FAILED|ok|not ok)\s.*\(\d+(?:\.\d+)?\s?m?s\)\s*$|"
                          r"\bin \d+(?:\.\d+)?s\b.*=+\s*$|\[\s*\d{1,3}%\]\s*$")  # pytest's progress column


def _clean_value(v: str) -> str:
    v = v.strip().rstrip(",;")
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
        v = v[1:-1]
    return v


def _add_setting(c: Collector, key: str, value: str, sep: str, msg: str, s: float) -> None:
    value = _clean_value(value)
    if not value or len(value) > 60 or len(key) > 60:
        return
    c.add("exact_values", "setting", f"{key}{sep}{value}", msg, s, key=key, value=value)


def scan_values(text: str, msg: str, c: Collector, *, base: float, config_file: bool = False,
                config_salience: float = S_CONFIG_OUTPUT, hashes: bool = False) -> None:
    """Versions, numbers with units and settings in free text or output.

    ``base`` is the salience of a plain value here; values on a line that mentions a
    threshold-like word (timeout, limit, max, latency...) get a boost. In a config file
    every ``key: value`` line is a setting; elsewhere only ``ENV=val``, ``--flag=val`` and
    threshold-named ``key=val`` pairs are.
    """
    lines = text.split("\n")
    skeletons = [_SKELETON_DIGITS.sub("#", ln) for ln in lines]
    shapes = Counter(skeletons)
    done: set[str] = set()
    for line, skel in zip(lines, skeletons, strict=True):
        if not line.strip() or len(line) > 2000:
            continue
        # A line whose shape repeats (a status series) has no single value worth keeping;
        # its settings are read from the first line of the series only.
        series = shapes[skel] >= 3
        if series:
            if skel in done:
                continue
            done.add(skel)
        boost = 0.2 if THRESHOLD_WORDS.search(line) else 0.0
        if hashes:
            for m in _HASH.finditer(line):
                c.add("exact_values", "hash", m.group(0), msg, base, needle=m.group(0))
        # A build tool's progress line names the project's own version (Compiling kvcache v0.3.1).
        progress = _BUILD_PROGRESS.match(line) is not None
        vboost = 0.1 if base >= 0.4 or (_VERSION_CONTEXT.search(line) and not progress) else 0.0
        for m in VERSION_RE.finditer(line if not series else ""):
            num, op = m.group("num"), m.group("op") or ""
            if op == "@":
                op = ""  # lodash@4.17.21: the @ joins name and version, it is no range operator
            if re.fullmatch(r"\d+\.\d+\.\d+\.\d+", num) and all(int(p) < 256 for p in num.split(".")):
                continue  # an IPv4 address, not a version
            c.add("exact_values", "version", f"{op}{num}", msg, base + vboost, version=num)
        # A per-test timing ("✓ parses dates (26 ms)") is runner noise, not a value to keep.
        timing = _TEST_TIMING.search(line) is not None
        for m in UNIT_VALUE_RE.finditer(line if not series and not timing else ""):
            unit = m.group("long") or m.group("short")
            c.add("exact_values", "unit_value", f"{m.group('num')}{m.group('sp') or ''}{unit}", msg,
                  base + boost, number=m.group("num"), unit=unit)
        for m in _ENV.finditer(line):
            _add_setting(c, m.group("key"), m.group("value"), "=", msg, config_salience + boost)
        for m in _FLAG.finditer(line):
            _add_setting(c, "--" + m.group("key"), m.group("value"), "=", msg, config_salience + boost)
        for m in _KWARG.finditer(line):
            sep = ": " if m.group("sep") == ":" else "="
            _add_setting(c, m.group("key"), m.group("value"), sep, msg, config_salience + boost)
        if config_file:
            m = _CFG_LINE.match(line)
            if m:
                sep = ": " if m.group("sep") == ":" else "="
                # A config row read in passing (``private: true``, ``name: lumen``) is no KEEP
                # item unless it holds a number or names a threshold; rows an edit changed are.
                plain = not re.search(r"\d", m.group("value")) and not boost and config_salience < S_CONFIG_EDIT
                _add_setting(c, m.group("key"), m.group("value"), sep, msg,
                             min(config_salience, S_CONFIG_PLAIN) if plain else config_salience)


def _is_config(path: str | None) -> bool:
    if not path:
        return False
    name = path.rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[-1].lower() in CONFIG_EXTS or name.startswith(".env")


def _load_bearing(line: str) -> bool:
    s = line.strip()
    if len(s) < 6 or not re.search(r"[A-Za-z]", s):
        return False
    if re.fullmatch(r"[\s{}()\[\];,]*(?:else:|try:|finally:|pass|break|continue|return|end|fi|done)?[\s{}()\[\];,]*", s):
        return False
    return not s.startswith(("#", "//", "/*", "*", '"""', "'''", "import ", "from "))


def _todos(text: str, msg: str, c: Collector, s: float) -> None:
    for m in _TODO.finditer(text):
        body = norm(m.group("body")).rstrip("*/ -")
        if len(body) >= 4:
            c.add("open_questions", "todo", f"{m.group('tag')}: {truncate(body, 160)}", msg, s,
                  needle=truncate(body, 160))


def scan_edit(args: dict, msg: str, c: Collector) -> list[str]:
    """A ``str_replace_editor`` (or similar) call. Returns the changed lines, for locating."""
    path = args.get("path") if isinstance(args.get("path"), str) else None
    command = args.get("command")
    new = args.get("new_str") if isinstance(args.get("new_str"), str) else None
    old = args.get("old_str") if isinstance(args.get("old_str"), str) else ""
    if command == "create" and isinstance(args.get("file_text"), str):
        scan_file_text(args["file_text"], path, msg, c, salience=S_NEW_FILE_SIGNATURE, todo=S_TODO_EDIT)
        return []
    if new is None:
        return []
    old_lines = {norm(x) for x in old.split("\n")}
    changed = [ln for ln in new.split("\n") if norm(ln) not in old_lines and _load_bearing(ln)]
    for n, ln in enumerate(changed[:3]):
        cls = "signatures"
        c.add(cls, "edit_line", truncate(norm(ln), 200), msg, S_EDIT_LINE if n == 0 else S_EDIT_LINE_MORE)
    for ln in new.split("\n"):
        if SIGNATURE_RE.match(ln):
            s = S_EDIT_SIGNATURE if norm(ln) not in old_lines else S_EDIT_CONTEXT_SIGNATURE
            c.add("signatures", "signature", truncate(norm(ln), 200), msg, s)
    if command == "insert" and isinstance(args.get("insert_line"), int) and path:
        c.add("paths_with_lines", "edit_location", f"{path}:{args['insert_line']}", msg,
              S_EDIT_LOCATION, path=path, line=args["insert_line"])
    changed_text = "\n".join(changed)
    scan_values(changed_text, msg, c, base=0.7, config_file=_is_config(path), config_salience=S_CONFIG_EDIT)
    # A TODO the agent writes is usually a comment line, which is not load-bearing code.
    _todos("\n".join(ln for ln in new.split("\n") if norm(ln) not in old_lines), msg, c, S_TODO_EDIT)
    return changed


def scan_edit_result(text: str, changed: list[str], path: str | None, msg: str, c: Collector) -> None:
    """Find the line number an edit's first changed line has in the result's snippet."""
    if not changed or not path:
        return
    want = norm(changed[0])
    for line in text.split("\n"):
        m = _CAT_N.match(line)
        if m and norm(m.group("code")) == want:
            ln = int(m.group("n"))
            c.add("paths_with_lines", "edit_location", f"{path}:{ln}", msg, S_EDIT_LOCATION, path=path, line=ln)
            return


def scan_file_text(text: str, path: str | None, msg: str, c: Collector, *, salience: float,
                   todo: float) -> None:
    """Signatures, settings and TODOs of a whole file's text (created or viewed)."""
    config = _is_config(path)
    for line in text.split("\n"):
        if SIGNATURE_RE.match(line):
            c.add("signatures", "signature", truncate(norm(line), 200), msg, salience)
    _todos(text, msg, c, todo)
    scan_values(text, msg, c, base=0.25, config_file=config, config_salience=S_CONFIG_VIEW if config else S_CONFIG_OUTPUT)


def scan_view(text: str, path_hint: str | None, msg: str, c: Collector) -> bool:
    """A ``cat -n`` style view. Returns False if ``text`` does not look like one."""
    rows = [_CAT_N.match(x) for x in text.split("\n")]
    numbered = [m for m in rows if m]
    if len(numbered) < 3 or len(numbered) < 0.5 * sum(1 for x in text.split("\n") if x.strip()):
        return False
    head = _VIEW_HEAD.search(text)
    path = head.group("path").rstrip(":`'") if head else path_hint
    body = "\n".join(m.group("code") for m in numbered)
    scan_file_text(body, path, msg, c, salience=S_VIEW_SIGNATURE, todo=S_TODO_VIEW)
    return True


_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(?P<start>\d+)(?:,\d+)? @@ ?(?P<ctx>.*)$")


def scan_diff(text: str, msg: str, c: Collector) -> bool:
    """A unified diff (git diff output). Returns False if ``text`` holds no hunks."""
    path = None
    found = False
    for line in text.split("\n"):
        if line.startswith("+++ "):
            p = line[4:].strip()
            path = p[2:] if p.startswith("b/") else p
            continue
        m = _HUNK.match(line)
        if m:
            found = True
            if path:
                ln = int(m.group("start"))
                c.add("paths_with_lines", "diff_location", f"{path}:{ln}", msg, S_DIFF_LOCATION, path=path, line=ln)
            if m.group("ctx") and SIGNATURE_RE.match(m.group("ctx")):
                c.add("signatures", "signature", truncate(norm(m.group("ctx")), 200), msg, S_VIEW_SIGNATURE + 0.1)
            continue
        if found and line.startswith("+") and not line.startswith("+++") and _load_bearing(line[1:]):
            c.add("signatures", "diff_line", truncate(norm(line[1:]), 200), msg, S_DIFF_LINE)
            scan_values(line[1:], msg, c, base=0.5, config_file=_is_config(path), config_salience=0.6)
    return found
