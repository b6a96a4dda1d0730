"""Read a message range as steps, and write what happened as handoff sentences.

The labeler's own reading of a range, independent of the conformance checker's extraction
(the checker judges the result; it never supplies the content). A range becomes:

* the **task**: the user's first sentences and their constraints, quoted in the user's words;
  later user messages that change the goal; user questions the range leaves unanswered;
* **steps**: each tool call with its result, written as one sentence: what was done
  (``Ran `pytest -q` (m00012)``, ``Edited src/a.py:40``) and what came of it (the exact error
  line and where it was raised, the test counts, the changed line, or the agent's own
  remark on the output when the output itself is not worth keeping);
* **decisions**: the agent's sentences that choose something and give a reason;
* **open items**: TODOs written in edits, "still need to" / "next:" remarks, unanswered questions;
* **drops**: one line per large output saying what it was and where to restore it from.

Exact items (paths with lines, error lines, ``KEY=value``, test counts, code lines) are copied
character for character from the messages; nothing is computed or rounded.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from doctrine.conform.outputs import LIB_PATH
from doctrine.conform.patterns import find_path_lines
from doctrine.kernel.messages import Message

from .phrasing import upkeep
from .toolchains import read_failures

__all__ = ["Line", "RangeReading", "grep_file", "read_range"]

_TAG = re.compile(r"<acp\b[^>]*>\s*m\d+\s*</acp>\n?")
_TRAILER = re.compile(r"^\[(?:The command completed|Command finished)[^\]]*\]\s*$", re.M)
_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(])")
_CONSTRAINT = re.compile(
    r"\b(?:must|don't|do not|never|always|keep|only|without|avoid|make sure|ensure|no new|not (?:change|touch|modify))\b",
    re.I)
_DECIDE = re.compile(
    r"\b(?:decided|I'll|I will|we'll|let's|instead of|rather than|switch(?:ed|ing)? to|chose|choose|go with|"
    r"recommend|prefer|settled on|pick(?:ed)?|opt(?:ed)? for)\b", re.I)
_BECAUSE = re.compile(r"\b(?:because|since|so that|so the|so a|so it|due to|given that|to avoid|otherwise|"
                      r"which means|in order to)\b", re.I)
_OPEN = re.compile(r"\b(?:still need to|still needs|not yet|todo|fixme|next:|next step|remaining:|left to do|"
                   r"have not run|haven't run)", re.I)
_TODO = re.compile(r"\b(?:TODO|FIXME)\b[:(\s-]*(?P<body>[^\n]+)")
_AGREE = re.compile(r"^(?:ok(?:ay)?|agreed|yes|sounds good|go ahead|do that|fine|great|thanks|perfect)\b", re.I)
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+)')
_EXC = re.compile(r"^(?P<line>(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure|Fault|"
                  r"Timeout)(?::\s.*)?)$")
_PREFIXED = re.compile(r"^(?:E\s{2,}|ERROR:?\s|FATAL:?\s|fatal:\s|npm ERR!\s|error\s(?=TS\d))(?P<line>.+)$|"
                       r"^(?P<err>Error: .+)$")
_CLOCK = re.compile(r"^\d{1,2}:\d\d:\d\d(?:[.,]\d+)?\s+")
_PYTEST_FAIL = re.compile(r"^(?:FAILED|ERROR) (?P<id>\S+::\S+)(?: - (?P<why>.+))?$")
# Library and runtime files: not where a project's failure is (the checker's own list).
_LIB_PATH = LIB_PATH  # the checker's reading of what is a library's, not the project's
_TS = re.compile(r"^(?P<path>[^\s(:]+\.(?:tsx?|jsx?))(?:\((?P<l1>\d+),\d+\)|:(?P<l2>\d+):\d+)\s*[:-]?\s*"
                 r"error (?P<msg>TS\d+: .+)$")
_JEST_FAIL = re.compile(r"^\s*● (?P<name>.+ › .+)$")
_JEST_COUNTS = re.compile(r"^\s*Tests:\s+(?P<c>(?:\d+ (?:failed|passed|skipped|todo|total)(?:, )?)+)")
_PY_COUNTS = re.compile(r"^[=\s]*(?P<c>(?:\d+ (?:failed|passed|errors?|skipped|xfailed|xpassed|warnings?|deselected)"
                        r"(?:, )?)+)(?: in [\d.]+s)?\b")
_TB_EXC = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?::\s.*)?$")
_PYTEST_LOC = re.compile(r"^(?P<loc>[\w./-]+\.py:\d+): (?:[A-Z]\w+|in \w+)")
_LOG_LEVEL = re.compile(r"(?:^|[\s\[|])(?:ERROR|FATAL|CRITICAL)(?:[\]|:]|\s)\s*(?:\[[^\]]{1,30}\]\s*)?(?P<msg>.+)$")
_STATUS = re.compile(r"^(?:Reason|Exit Code|State):\s+(?:OOMKilled|Error|CrashLoopBackOff|\d{2,3})\b")
_GREP_HIT = re.compile(r"^(?P<path>[\w./-]+\.\w+):(?P<line>\d+):(?:\d+:)?(?P<text>.+)$")
_CAT_N = re.compile(r"^\s*(?P<n>\d+)\t(?P<code>.*)$")
_SIG = re.compile(r"^\s*(?:export\s+)?(?:async\s+)?(?:def|class|function|interface|type|const|struct|fn|func)\s+\w+")


def clean(text: str) -> str:
    """Message text without acp tags and harness trailers."""
    return _TRAILER.sub("", _TAG.sub("", text or "")).strip()


def _sentences(text: str) -> list[str]:
    return [s for _p, s in _para_sentences(text)]


def _para_sentences(text: str) -> list[tuple[int, str]]:
    """(paragraph number, sentence) of ``text``, code blocks left out."""
    text = re.sub(r"```.*?(```|$)", " ", text, flags=re.S)
    out = []
    for n, para in enumerate(re.split(r"\n\s*\n|\n(?=\s*[-*]\s)", text)):
        para = " ".join(re.sub(r"^\s*[-*]\s+", "", para).split())
        out += [(n, s.strip()) for s in _SENT.split(para) if s.strip()]
    return out


def _task_sentences(text: str) -> list[str]:
    """The sentences of an assistant text that are about the task: remarks on context
    upkeep (folding, declining a nudge, restoring a block) are left out."""
    return [s for s in _sentences(text) if not upkeep(s)]


# Something a remark names that a reader can use: a number, a quoted or code span, a path or
# file, a dotted or snake_case name.
_CONCRETE = re.compile(r"\d|`|'|\"|/|\w\.\w|\w_\w")


def informative(sentence: str) -> bool:
    """Whether an agent's remark after a step says something about what the step showed:
    "The build is green on go 1.22." does; "Noted.", "That narrows it down.", "Next." do not.
    A filler remark must never be written as what a tool showed."""
    return len(sentence.split()) > 4 or bool(_CONCRETE.search(sentence))


def about_output(sentence: str, output: str) -> bool:
    """Whether a remark can stand as what a step showed: every code span it quotes is in the
    step's output, and every figure of two digits or more (a note on an earlier finding, "Keep in
    mind: `deepfield` is unused", "Relevant: Exit Code: 137", is not)."""
    flat = " ".join(output.split())
    if not all(" ".join(q.split()) in flat for q in re.findall(r"`([^`]+)`", sentence)):
        return False
    # Nor is one that cites figures the output does not print ("Relevant: Exit Code: 137"), or
    # names (a path, a dotted, snake_case or Rust path) it does not name ("Noting for later:
    # bolt::tests::emit_ironfern" after a listing that never printed it).
    if not all(n in flat for n in re.findall(r"\d{2,}", sentence)):
        return False
    return all(n in flat for n in (m.rstrip(".,:;)") for m in _NAME.findall(sentence)) if n)


# A name a remark can only have read somewhere: a path, a dotted or snake_case word, a Rust path.
_NAME = re.compile(r"[\w.-]*\w(?:::|_|\.|/)\w[\w.:/-]*")
# The lead-in of an agent's note to itself, not part of what it says.
_LEAD_IN = re.compile(r"^(?:noting for later|keep in mind|relevant|note|for later)\s*:\s*", re.I)


def output_part(sentence: str, output: str) -> str:
    """The clauses of a remark that can stand as what a step showed (:func:`about_output`),
    joined again: "maxDepth is 10 today; the user wants 20." after a view printing 10 keeps
    "maxDepth is 10 today" (the 20 is the task's, not the output's). "" when none can."""
    clauses = [c.strip() for c in re.split(r";\s+", _LEAD_IN.sub("", sentence.strip()).rstrip("."))]
    kept = [c for c in clauses if c and about_output(c, output)]
    text = "; ".join(kept)
    return text if text and informative(text) else ""


def short(text: str, limit: int) -> str:
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    cut = line[:limit]
    sp = cut.rfind(" ")
    return (cut[:sp] if sp > limit // 2 else cut).rstrip(" ,;:") + "..."


def code(text: str, limit: int) -> str:
    """``text`` quoted verbatim: whole when it fits in ``limit``, else a verbatim prefix (cut
    at a space) with the ellipsis outside the quote, so whatever is quoted occurs as such in
    the source (text holding a backtick: its longest part without one)."""
    line = " ".join(text.split())
    if "`" in line:  # a quote cannot hold a backtick: its longest backtick-free part, marked cut
        part = max((p.strip() for p in line.split("`")), key=len)
        return code(part, limit).rstrip(".") + "..."
    if len(line) <= limit:
        return f"`{line}`"
    cut = line[:limit]
    sp = cut.rfind(" ")
    return f"`{(cut[:sp] if sp > limit // 2 else cut).rstrip(' ,;:')}`..."


_REFS = re.compile(r"\((m\d{5})(?:, m\d{5})*\)")
_BACKREF = re.compile(r"^(?:I'll|I will|We'll|Let's|So I'll)\s+\w+\s+(?:it|this|that|them|there)\b", re.I)


@dataclass
class Line:
    """One sentence of the handoff and how much it matters when space is short."""

    section: str  # goal | decisions | steps | state | open | dropped
    text: str
    priority: int  # 0 keeps longest
    must: bool = False
    order: int = 0


@dataclass
class RangeReading:
    lines: list[Line] = field(default_factory=list)
    refs: list[str] = field(default_factory=list)

    def add(self, section: str, text: str, priority: int, must: bool = False) -> None:
        if section == "steps":
            # The same step again (a rerun, a series of similar edits): one line, every ref.
            skel = _REFS.sub("#", text)
            for ln in self.lines:
                if ln.section == "steps" and _REFS.sub("#", ln.text) == skel:
                    new = _REFS.search(text)
                    if new:
                        ln.text = ln.text.replace(")", f", {new.group(1)})", 1) if "(" in ln.text else ln.text
                    return
        key = " ".join(text.lower().split())
        for ln in self.lines:
            have = " ".join(ln.text.lower().split())
            if have == key or (len(key) >= 40 and key in have):  # said already, or inside a longer line
                ln.must = ln.must or must
                return
        self.lines.append(Line(section, text, priority, must, len(self.lines)))


def _args(call: Message | None) -> dict[str, Any]:
    if call is None:
        return {}
    try:
        a = json.loads(call.text)
    except (ValueError, TypeError):
        return {}
    return a if isinstance(a, dict) else {}


def _errors(out: str) -> tuple[list[str], str | None]:
    """Exact error lines of an output (most telling first) and where the error was raised."""
    lines = out.split("\n")
    found: list[str] = []
    where = None
    frames: list[str] = []
    shapes: set[str] = set()
    locs: list[str] = []
    in_tb = in_python = False
    for raw in lines:
        s = raw.strip()
        if s.startswith("Traceback (most recent call last)"):
            in_tb = in_python = True
            continue
        m = _FRAME.match(raw)
        if m:
            if not _LIB_PATH.search(m.group("path")):
                frames.append(f"{m.group('path')}:{m.group('line')}")
            continue
        if in_tb and raw[:1].strip() and _TB_EXC.match(s):
            found.append(s)  # the exception line that ends a traceback, whatever its class
            in_tb = False
            continue
        m = _PYTEST_LOC.match(s)
        if m:
            if m.group("loc") not in locs:
                locs.append(m.group("loc"))
            continue
        m = _LOG_LEVEL.search(s)
        if m and m.start() < 60:
            msg = m.group("msg").strip()
            shape = re.sub(r"\d+", "#", msg)
            if len(msg) >= 8 and shape not in shapes and len(shapes) < 3:
                shapes.add(shape)
                found.append(msg)
            continue
        m = _STATUS.match(s)
        if m:
            found.append(s)
            continue
        m = _TS.match(s)
        if m:
            found.append(m.group("msg"))
            where = where or f"{m.group('path')}:{m.group('l1') or m.group('l2')}"
            continue
        bare = _CLOCK.sub("", s)  # a log line's clock ("06:08:50 fatal: ...") comes before its level
        for pat, grp in ((_PYTEST_FAIL, "id"), (_JEST_FAIL, "name"), (_EXC, "line"), (_PREFIXED, "line")):
            m = pat.match(bare if pat is _PREFIXED else s)
            if m:
                found.append((m.group(grp) or m.groupdict().get("err") or "").strip())
                if pat is _PYTEST_FAIL and m.group("why"):
                    found.append(m.group("why").strip())
                break
        if s.startswith(("Expected:", "Received:")) and found:
            found.append(s)
    other = read_failures(out)  # Go, Rust, JVM, rspec, linters, units, tool-prefixed errors
    found += [x for x in other.lines if x not in found]
    if frames:
        where = frames[-1]
    elif locs:
        where = ", ".join(locs[:4])
    elif other.where and where is None:
        where = other.where
    if where is None and (found or other.lines):
        # A tool that says where it failed in its own words ("Migration failed at
        # db/V1__a.sql:18", a log's "  at /app/x.py:155"): the checker reads any path:line
        # of the output as one to keep, and with the failure is where it belongs.
        where = next((f"{p}:{n}" for p, n, _off in find_path_lines(out) if not _LIB_PATH.search(p)), None)
    if other.lines and not frames and not locs and not in_python:
        # Outside Python the first failure says most (javac, rustc, go test): their order.
        # Compilers wrap names in backticks (cannot borrow `x`); a quote cannot hold one, and
        # the line without them reads the same and keeps every word.
        uniq = list(dict.fromkeys(x.replace("`", "") for x in other.lines + found))
        return uniq[:8], where
    # The last exception of a traceback says most; keep a few, in order, without repeats.
    uniq = list(dict.fromkeys(found))
    exc = [x for x in uniq if _EXC.match(x)]
    ids = [x for x in uniq if "::" in x and " " not in x]  # failing pytest ids: every one is kept
    rest = [x for x in uniq if x not in exc and x not in ids]
    return (exc[-1:] + ids[:6] + rest + exc[:-1])[:max(4, len(ids[:6]) + 2)], where


def _counts(out: str) -> str | None:
    """The run's test counts: jest's ``Tests:`` line, else the last pytest-style count line."""
    jest = pytest = None
    for line in out.split("\n"):
        m = _JEST_COUNTS.match(line)
        if m:
            jest = m.group("c").strip().rstrip(",")
            continue
        m = _PY_COUNTS.match(line)
        if m:
            pytest = m.group("c").strip().rstrip(",")
    return jest or pytest or read_failures(out).counts


def _edit_sentence(args: dict[str, Any], result: str, verb: str) -> tuple[str, list[str]]:
    path = str(args.get("path", "a file"))
    new = args.get("new_str") if isinstance(args.get("new_str"), str) else None
    old = args.get("old_str") if isinstance(args.get("old_str"), str) else ""
    if args.get("command") == "create" and isinstance(args.get("file_text"), str):
        body = args["file_text"].split("\n")
        sigs = [ln.strip() for ln in body if _SIG.match(ln)][:2]
        tests = [(m.group(1) or m.group(2)) for ln in body for m in [_TEST_NAME.search(ln)] if m][:3]
        if sigs:
            tail = f", defining {' and '.join(f'`{s}`' for s in sigs)}"
        elif tests:
            tail = ", with the tests " + ", ".join(f'"{t}"' for t in tests)
        else:
            first = next((ln.strip() for ln in body if ln.strip() and not ln.strip().startswith(("import", "from", "#", "//"))), "")
            tail = f", a new file of {len(body)} lines starting with {code(first, 100)}" if first else ", an empty file"
        todos = [f"TODO in {path}: {m.group('body').strip()}" for ln in body for m in [_TODO.search(ln)] if m]
        return f"Created {path}{tail}", todos
    if new is None:
        return f"{verb} {path}; the change itself is in the restored message", []
    old_lines = {" ".join(x.split()) for x in old.split("\n")}
    changed = [ln for ln in new.split("\n") if " ".join(ln.split()) not in old_lines and ln.strip()]
    todos = [f"TODO in {path}: {m.group('body').strip()}" for ln in changed for m in [_TODO.search(ln)] if m]
    lines = [ln.strip() for ln in changed if not ln.strip().startswith(("#", "//"))]
    if not lines:
        return f"{verb} {path}, changing comments only", todos
    where = path
    for row in result.split("\n"):
        m = _CAT_N.match(row)
        if m and m.group("code").strip() == lines[0]:
            where = f"{path}:{m.group('n')}"
            break
    # Changed values first, then the next changed lines (a multi-line edit's second line).
    more = [c for c in lines[1:] if re.search(r"[=:]\s*[\"']?\d", c)][:2]
    more += [c for c in lines[1:3] if c not in more and len(c) <= 80]
    tail = "".join(f", and {code(c, 120)}" for c in more)
    return f"{verb} {where}: the line now reads {code(lines[0], 160)}{tail}", todos


_BANNER = re.compile(r"^\[(?:Restored|assistant|user|tool|system)\b")
# A leading "cd DIR &&" is noise, unless the folder names a version the checker keeps
# (retry@v0.4.47, tool-v1.2.3). An interpreter's folder (/usr/lib/python3.11, versions/3.11.7)
# is no such version: keeping it would spend the quoted command's length on the folder and
# cut the command's own values (grep's --include=*.py).
_CD = re.compile(r"^\s*cd\s+(?![^\s]*(?:@v?\d+\.\d+|[/-]v\d+\.\d+\.\d+))\S+\s*&&\s*")
_WORDS = re.compile(r"[A-Za-z_][\w-]{3,}")
# A value given on a command line: a --flag=value or an ENV=value assignment (the labeler's own
# pattern for what the checker reads as a setting there).
_CMD_VALUE = re.compile(r"(?<![\w-])--[a-z][\w-]+=[^\s'\";,]+|(?<![\w.-])[A-Z][A-Z0-9_]{2,}=[^\s'\";,)]+")


def _question(rd: RangeReading, q: str, m: Message, later: list[Message], ref_of: Any) -> None:
    """A user question: settled by the next assistant reply (a decision), or still open."""
    words = {w.lower() for w in _WORDS.findall(q)}
    reply = next((x for x in later if x.content_type == "text" and x.role == "assistant" and clean(x.text)), None)
    if reply is not None:
        text = " ".join(_task_sentences(clean(reply.text)))
        shared = words & {w.lower() for w in _WORDS.findall(text)}
        if len(shared) >= 2 or (shared and _BECAUSE.search(text)):
            after = [x for x in later if x.content_type == "text" and x.role == "user"]
            agreed = next((x for x in after if _AGREE.match(clean(x.text))), None)
            sents = _task_sentences(text)
            answer = " ".join(sents[:2]) if len(" ".join(sents[:2])) <= 320 else short(sents[0], 320)
            who = f"; the user agreed ({ref_of(agreed)})" if agreed is not None else ""
            rd.add("decisions", f"Asked ({ref_of(m)}) \"{short(q, 160)}\", the answer ({ref_of(reply)}) was: "
                                f"{answer}{who}", 1, True)
            return
    rd.add("open", f"The user asked ({ref_of(m)}), not yet answered: \"{short(q, 200)}\"", 1, True)


# Tuning knobs written in code (timeout=5, max_retries: 3): the values a change must carry over.
_KNOB = re.compile(r"(?<![\w.])\w*(?:timeout|limit|max|min|retries|retry|size|ttl|port|interval|delay|workers|"
                   r"threshold)\w*\s*[=:]\s*(?:'-?\d[\w.]*'|\"-?\d[\w.]*\"|-?\d[\w.]*)", re.I)
_TEST_NAME = re.compile(r"""\b(?:it|test|describe)\(\s*['"`]([^'"`]{3,80})['"`]|\bdef (test_\w+)""")
_PIN = re.compile(r"(?<![\w.-])([A-Za-z][\w.-]*)(==|>=|@)(\d+(?:\.\d+)+)")
_CONFIG_EXT = re.compile(r"\.(?:json|ya?ml|toml|ini|cfg|conf|env|properties|tfvars)$|(?:^|/)\.env")
# A config file printed through the shell (JSON left out: its quoted keys are read as a file).
_SHOW_CONFIG = re.compile(r"^\s*(?:cat|head|tail|less|more)\b[^|;&]*?\s(?P<path>[^\s|;&]*(?:\.(?:env|ya?ml|toml|ini|cfg|"
                          r"conf|properties|tfvars)|/\.env))(?:\s|$)")
_DIRECTIVE_ROW = re.compile(r"^\s*[a-z_]+\s+[\w.:/-]*\d[\w.:/-]*;$")  # nginx: keepalive_timeout 65s;
# A config row whose value holds a number; a call in the value counts (pool = sized(3009)).
_CFG_ROW = re.compile(r"^\s*[\"']?[\w.@/-]+[\"']?\s*[:=]\s*[\"']?[\w.^~<>=@/()-]*\d[\w.^~<>=@/()-]*[\"']?,?\s*$")


def grep_file(cmd: str | None) -> str | None:
    """The one file a ``grep -n`` command searches, if it names exactly one."""
    if not cmd or not re.search(r"\bgrep\b", cmd) or " -r" in cmd:
        return None
    words = [w.strip("'\"") for w in _CD.sub("", cmd).split("|")[0].split()[1:] if not w.startswith("-")]
    files = [w for w in words[1:] if re.search(r"\.\w+$|(?:^|/)(?:Makefile|Dockerfile)$", w) and "*" not in w]
    return files[0] if len(files) == 1 else None


def _diff_changes(out: str) -> list[str]:
    """Added lines of a unified diff (definitions first, at most four), each with the file and
    the hunk it is in, as the diff prints it (no line is counted out by hand)."""
    path, hunk, found = None, None, []
    for row in out.split("\n"):
        if row.startswith("+++ "):
            p = row[4:].strip()
            path = p[2:] if p.startswith("b/") else p
            continue
        m = re.match(r"^@@ -\d+(?:,\d+)? \+(\d+)", row)
        if m:
            hunk = m.group(1)
            continue
        if hunk is not None and row.startswith("+") and row[1:].strip():
            found.append((not _SIG.match(row[1:]), len(found), f"{code(row[1:].strip(), 120)} in the hunk at {path}:{hunk}"))
    return [f for _d, _n, f in sorted(found)[:4]]


_CONST_LINE = re.compile(r"^(?:export\s+)?(?:const|let|var)?\s*[A-Z][A-Z0-9_]{2,}\s*[=:]\s*\S.*$")


def _restored_sentence(out: str, ref: str, tool: str) -> str | None:
    """A decompress/search result: the exact items of the text it brought back."""
    lines = [(_CAT_N.match(r).group("code") if _CAT_N.match(r) else r).strip() for r in out.split("\n")]
    lines = [ln for ln in lines if ln and not _BANNER.match(ln)]
    errors, where = _errors(out)
    items: list[str] = [f"{code(e, 160)}" + (f" at {where}" if where and n == 0 else "") for n, e in enumerate(errors[:2])]
    items += [f"{code(ln.rstrip('{').strip(), 90)}" for ln in lines if _SIG.match(ln) or _CONST_LINE.match(ln)][:5]
    items += [f"{code(ln.rstrip(','), 60)}" for ln in lines if _CFG_ROW.match(ln)][:4]
    items += [f"`{k}`" for k in dict.fromkeys(m.group(0) for ln in lines for m in _KNOB.finditer(ln))][:2]
    items = list(dict.fromkeys(items))[:10]
    verb = "Searched the folded history" if tool == "search_context" else "Restored a folded block"
    if not items:
        return None
    return f"{verb} ({ref}); the text it brought back holds " + ", ".join(items) + "."


def _purpose(messages: list[Message], call: Message | None) -> str:
    """The agent's words just before a call (why it ran), if it wrote any."""
    if call is None:
        return ""
    try:
        i = messages.index(call)
    except ValueError:
        return ""
    prev = messages[i - 1] if i > 0 else None
    same_turn = prev is not None and (call.id or "").split("#", 1)[0] == (prev.id or "").split("#", 1)[0]
    if prev is not None and same_turn and prev.role == "assistant" and prev.content_type == "text":
        sents = _task_sentences(clean(prev.text))
        return short(sents[0], 120).rstrip(".") if sents else ""
    return ""


def _view_sentence(path: str, out: str, ref: str, verb: str, purpose: str) -> str:
    """A file (or folder) read: what it defines or sets, in the file's own words."""
    rows = [m.group("code").strip() for m in (_CAT_N.match(r) for r in out.split("\n")) if m]
    why = f" ({purpose})" if purpose else ""
    if not rows:
        return f"{verb} {path} ({ref}){why}; its listing is not needed word for word."
    if _CONFIG_EXT.search(path):
        picked = [r.rstrip(",") for r in rows if _CFG_ROW.match(r) or _DIRECTIVE_ROW.match(r)][:4]
        if picked:
            return f"{verb} {path} ({ref}){why}; it sets " + ", ".join(f"{code(p, 80)}" for p in picked) + "."
    knobs = list(dict.fromkeys(m.group(0) for r in rows for m in _KNOB.finditer(r)))[:2]
    uses = f"; it uses {' and '.join(f'`{k}`' for k in knobs)}" if knobs else ""
    sigs = sorted((r for r in rows if _SIG.match(r)), key=lambda r: not re.match(
        r"(?:export\s+)?(?:async\s+)?(?:def|class|function|fn|func|interface)\b", r))[:6]
    if sigs:
        return (f"{verb} {path} ({ref}){why}; it defines " + ", ".join(f"{code(x.rstrip('{:').strip(), 90)}"
                                                                      for x in sigs)
                + uses + ".")
    if uses:
        return f"{verb} {path} ({ref}){why}{uses}."
    return f"{verb} {path} ({ref}){why}; nothing in it is needed word for word."


def _what_is_at(loc: str, m: Message) -> str | None:
    """``loc`` (a path:line) with the words its message says about it: the grep hit's code,
    the output row, or the sentence that names it; None when there are none."""
    text = clean(m.text)
    if m.content_type == "text":
        sent = next((x for x in _sentences(text) if loc in x and not upkeep(x)), None)
        return sent.rstrip(".") if sent and len(sent.split()) >= 3 and len(sent) <= 220 else None
    for row in text.split("\n"):
        if loc not in row:
            continue
        h = _GREP_HIT.match(row.strip())
        if h and f"{h.group('path')}:{h.group('line')}" == loc and h.group("text").strip():
            return f"{code(h.group('text').strip().replace('`', chr(39)), 120)} at {loc}"
    return None  # an error row's location stays with its error line (the checker wants both)


def read_range(messages: list[Message], refs: dict[str, str], *, big_output_tokens: int,
               count: Any, facts: list[tuple[str, str, bool]] = (), verbs: dict[str, str] | None = None) -> RangeReading:
    """The handoff lines of ``messages`` (``refs``: raw id -> kernel ref)."""
    verbs = verbs or {"ran": "Ran", "edited": "Edited", "read": "Read"}
    rd = RangeReading()
    calls = {m.tool_call_id: m for m in messages if m.content_type == "tool-call" and m.tool_call_id}
    texts = [m for m in messages if m.content_type == "text"]
    first_user = next((m for m in texts if m.role == "user"), None)
    ref_of = lambda m: refs.get(m.id, m.id)  # noqa: E731
    rd.refs = [r for r in (ref_of(m) for m in messages) if r and r.startswith("m")]

    for i, m in enumerate(messages):
        text = clean(m.text)
        if m.content_type == "text" and m.role == "user" and text and not text.startswith("[ACP]"):
            sents = [s for s in _sentences(text) if len(s.split()) >= 3 and not s.startswith("<")]
            lead = ""
            if m is first_user and sents:
                lead = " ".join(sents[:2]) if len(sents[0]) < 80 and len(sents) > 1 and not sents[1].endswith("?") \
                    else sents[0]
                rd.add("goal", f"The user asked ({ref_of(m)}): \"{short(lead, 260)}\"", 0, True)
            for s in sents:
                if s in lead:
                    continue
                if s.endswith("?"):
                    _question(rd, s, m, messages[i + 1:], ref_of)
                elif _AGREE.match(s) and len(s.split()) <= 6:
                    continue
                elif m is first_user:
                    if _CONSTRAINT.search(s):
                        rd.add("goal", f"Constraint: \"{short(s, 200)}\"", 0, True)
                else:
                    kind = "Constraint" if _CONSTRAINT.search(s) else "The user added"
                    rd.add("goal", f"{kind} ({ref_of(m)}): \"{short(s, 200)}\"", 0, True)
        elif m.content_type == "text" and m.role == "assistant" and text:
            ps = [(p, x) for p, x in _para_sentences(text) if not upkeep(x)]
            sents = [x for _p, x in ps]
            for n, s in enumerate(sents):
                if _DECIDE.search(s):
                    reason = next((" ".join(sents[n:n + k + 1]) for k in (0, 1, 2)
                                   if n + k < len(sents) and _BECAUSE.search(sents[n + k])), None)
                    if reason and n > 0 and ps[n - 1][0] == ps[n][0] and _BACKREF.match(s) \
                            and not _DECIDE.search(sents[n - 1]) and not _OPEN.search(sents[n - 1]):
                        reason = f"{sents[n - 1]} {reason}"  # "The bug is at a.py:9. I'll fix it there, because..."
                    if reason:
                        rd.add("decisions", short(reason, 320), 1, True)
                        continue
                if _OPEN.search(s):
                    rd.add("open", short(s, 220), 1, True)
        elif m.content_type == "tool-result":
            call = calls.get(m.tool_call_id)
            args = _args(call)
            out = clean(m.text)
            name = (m.tool_name or (call.tool_name if call else "") or "tool")
            ref = ref_of(m)
            cmd = args.get("command") if isinstance(args.get("command"), str) else None
            if "path" in args and (cmd in ("str_replace", "insert", "create") or "new_str" in args):
                sentence, todos = _edit_sentence(args, out, verbs["edited"])
                why = _purpose(messages, call)
                # The agent's reason for the edit, when it names the place it read (a.go:88).
                why = f" ({why})" if re.search(r"\.\w{1,5}:\d+", why) else ""
                rd.add("steps", f"{sentence}{why} ({ref}).", 1)
                for t in todos:
                    rd.add("open", t, 1, True)
                continue
            if cmd == "view" and "path" in args:
                nxt = messages[i + 1] if i + 1 < len(messages) else None
                note = _task_sentences(clean(nxt.text)) if nxt is not None and nxt.role == "assistant" and \
                    nxt.content_type == "text" else []
                note = [p for p in (output_part(n, out) for n in note if informative(n)) if p]
                line = _view_sentence(str(args["path"]), out, ref, verbs["read"], _purpose(messages, call))
                if note and not (_DECIDE.search(note[0]) and _BECAUSE.search(note[0])):
                    line = line.rstrip(".") + f"; what it showed: {short(note[0], 200).rstrip('.')}."
                # A read that quotes what the file sets or defines outranks one that does not.
                rd.add("steps", line, 2 if note or "`" in line else 3)
                continue
            rows = [r for r in out.split("\n") if r.strip()]
            shown = _SHOW_CONFIG.match(_CD.sub("", cmd or ""))
            picked = [r.strip().rstrip(",") for r in rows if _CFG_ROW.match(r) or _DIRECTIVE_ROW.match(r)][:5]
            if shown and picked:
                # A config file printed through the shell (cat app.env): what it sets, as a read says.
                rd.add("steps", f"{verbs['ran']} {code(_CD.sub('', cmd), 90)} ({ref}): it sets "
                                + ", ".join(code(p, 80) for p in picked) + ".", 2)
                continue
            if cmd and len(rows) >= 3 and sum(1 for r in rows if _CAT_N.match(r)) >= 0.6 * len(rows):
                # A file printed with line numbers through the shell (cat -n, nl): a file read.
                target = next((t for t in reversed(cmd.split()) if "." in t or "/" in t), cmd)
                rd.add("steps", _view_sentence(target, out, ref, verbs["read"], _purpose(messages, call)), 3)
                continue
            errors, where = _errors(out)
            counts = _counts(out)
            diff = _diff_changes(out)
            what = f"{code(_CD.sub('', cmd), 90)}" if cmd else f"the {name} tool"
            if name in ("decompress", "search_context"):
                # A restore: what matters is what the restored text says, not that a tool ran.
                said = _restored_sentence(out, ref, name)
                if said is not None:  # a restore that brought nothing back is upkeep, not work
                    rd.add("steps", said, 1)
                if count(m.text) >= big_output_tokens:
                    rd.add("dropped", f"The restored text is folded again here; restore {ref} if it is needed.", 4)
                continue
            parts = []
            if counts:
                parts.append(f"the result was {counts}")
            if errors:
                at = f" at {where}" if where else ""
                verb = "it records" if name in ("decompress", "search_context") else "it failed with"
                parts.append(f"{verb} {code(errors[0], 200)}{at}")
                for extra in errors[1:8]:
                    parts.append(f"also {code(extra, 160)}")
            if diff:
                parts.append("the diff adds " + "; ".join(diff))
            pins = list(dict.fromkeys("".join(p) for p in _PIN.findall(out)))[:8]
            if pins and not diff:
                parts.append("it names " + ", ".join(f"`{p}`" for p in pins))
            hits = [(h.group("text"), f"{h.group('path')}:{h.group('line')}")
                    for h in (_GREP_HIT.match(r.strip()) for r in out.split("\n")) if h][:5]
            one = grep_file(cmd)
            if not hits and one and len(rows) <= 5 and not one.endswith((".log", ".txt", ".gz")):
                # A few hits of grep -n in one source or config file ("12:text"): the command's file.
                hits = [(h.group(2), f"{one}:{h.group(1)}")
                        for h in (re.match(r"^(\d+)[:-](.+)$", r.strip()) for r in out.split("\n")) if h][:5]
            if hits and not errors:
                parts.append("it found " + "; ".join(f"{code(t.strip().replace('`', chr(39)), 120)} at {loc}"
                                                      for t, loc in hits))
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            remark = clean(nxt.text) if nxt is not None and nxt.role == "assistant" and nxt.content_type == "text" else ""
            body = [r.strip() for r in out.split("\n") if r.strip() and not _BANNER.match(r.strip())]
            told = [p for p in (output_part(t, out) for t in _task_sentences(remark) if informative(t)) if p] \
                if remark else []
            first = told[0] if told else ""
            if first and _DECIDE.search(first) and _BECAUSE.search(remark):
                first = ""  # a decision, listed with the decisions
            if first and not parts:
                parts.append(f"what it showed: {short(first, 220).rstrip('.')}")
            elif not parts and body and len(body[0]) <= 160:
                shown = body[:2] if len(body) > 1 and len(body[0]) + len(body[1]) <= 160 else body[:1]
                parts.append("it printed " + "; ".join(f"`{b}`" for b in shown))
            if not parts:
                parts.append("its output was read and nothing in it is needed word for word")
            # A value set on the command line (npm ls --depth=0, LOG_LEVEL=debug make test) is one
            # the checker keeps: the step stays, with the value quoted if the command's quote lost it.
            knobs = [k for k in dict.fromkeys(_CMD_VALUE.findall(_CD.sub("", cmd or ""))) if k not in what]
            if knobs:
                parts.append("with " + ", ".join(code(k, 80) for k in knobs[:4]))
            pinned = bool(_CMD_VALUE.search(_CD.sub("", cmd or "")))
            rd.add("steps", f"{verbs['ran']} {what} ({ref}): " + "; ".join(p for p in parts if p) + ".",
                   1 if errors or counts or pinned else 2 if hits else 3, bool(errors or pinned or hits))
            if count(m.text) >= big_output_tokens:
                rd.add("dropped", f"The full output of {what} is folded here; restore {ref} if its raw text is needed.", 4)

    # Calls whose result lies outside the range (the kernel folds the pair together, so the
    # result's facts come with the next fold): the call itself is still said.
    answered = {m.tool_call_id for m in messages if m.content_type == "tool-result"}
    for call in messages:
        if call.content_type != "tool-call" or call.tool_call_id in answered:
            continue
        args = _args(call)
        cmd = args.get("command") if isinstance(args.get("command"), str) else None
        if "path" in args and (cmd in ("str_replace", "insert", "create") or "new_str" in args):
            sentence, todos = _edit_sentence(args, "", verbs["edited"])
            rd.add("steps", f"{sentence} ({ref_of(call)}).", 1)
            for t in todos:
                rd.add("open", t, 1, True)
        elif cmd:
            rd.add("steps", f"{verbs['ran']} {code(_CD.sub('', cmd), 90)} ({ref_of(call)}); its result "
                            "comes after this range.", 2)

    # Ground-truth facts of the range that no line carries yet are kept verbatim, with where
    # they came from.
    for text, kind, needed in facts:
        flat = " ".join(text.split())
        if not flat or any(flat in " ".join(ln.text.split()) for ln in rd.lines):
            continue
        src = next((ref_of(m) for m in messages if flat in " ".join(clean(m.text).split())), None)
        if src is None:
            continue  # not written in this range's text (pruned or escaped): nothing to quote
        where = f" (from {src})"
        if kind == "paths_with_lines":
            said = _what_is_at(flat, next(m for m in messages if flat in " ".join(clean(m.text).split())))
            if said:
                rd.add("state", f"{said}{where}.", 1, needed)
                continue
        label = {"decisions": "Decision", "user_intent": "The user's words", "open_questions": "Still open",
                 "error_strings": "The exact error", "paths_with_lines": "The location",
                 "signatures": "The code involved"}.get(kind, "The exact value")
        section = {"decisions": "decisions", "open_questions": "open", "user_intent": "goal"}.get(kind, "state")
        rd.add(section, f"{label}{where}: `{flat}`" if kind not in ("decisions", "user_intent", "open_questions")
               else f"{label}{where}: {flat}", 1, needed)
    return rd
