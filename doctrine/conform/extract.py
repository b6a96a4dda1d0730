"""Walk a source range and collect its KEEP candidates (see the package docstring)."""

from __future__ import annotations

import re
from typing import Any

from .code import (
    S_CONFIG_VIEW,
    THRESHOLD_WORDS,
    scan_diff,
    scan_edit,
    scan_edit_result,
    scan_values,
    scan_view,
)
from .items import Collector, KeepItem
from .messages import SourceMessage, normalise_messages
from .outputs import S_COUNTS, S_FINAL_COUNTS, scan_tool_output
from .patterns import CONFIG_EXTS, PATH, find_path_lines
from .prose import S_QUESTION, resolve_question, scan_assistant_prose, scan_user_text, unanswered
from .relevance import weigh_by_restatement
from .settings import ConformanceSettings, settings_for

__all__ = ["extract_keep_items", "source_messages"]

S_PROSE_PATH = 0.7  # a path:line the user or the agent wrote in prose
S_COMMAND_VALUE = 0.35  # values in a shell command (pip install x==1.2.3, FOO=1 pytest)
S_PROSE_VALUE = 0.6  # values written in prose
S_OUTPUT_VALUE = 0.25  # values in tool output (boosted on threshold-like lines)
SMALL_RANGE = 3
# Lines the agent harness appends to every command's output (OpenHands and similar).
_HARNESS_LINE = re.compile(r"^\[(?:The command completed with exit code|Command finished with exit code)[^\]]*\]\s*$",
                           re.M)  # up to this many refs, citing any one of them keeps the class

_EDIT_TOOLS = {"str_replace_editor", "edit_file", "write_file", "create_file", "str_replace_based_edit_tool"}
_SHELL_TOOLS = {"execute_bash", "bash", "shell", "run_command", "terminal", "execute_command"}


_CONFIG_PATH = re.compile(PATH)
# A grep -n hit: "path:12:text" over many files, "12:text" (or "12-text" for context) over one.
_GREP_HIT = re.compile(r"^(?:(?P<path>[^\s:]+):)?(?P<line>\d+)[:-](?P<text>.*)$")
_NUMBERED = re.compile(r"^\s*\d+\t")  # cat -n
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")  # bellTimeout -> bell Timeout
_GREP = re.compile(r"\b(?:grep|rg|ag)\b")
# Commands that print (part of) a file: their output over one config file is config rows.
_PRINTS_FILE = re.compile(r"\b(?:cat|sed|head|tail|awk)\b")
# psql's framing around a one-value answer: a column header, its rule, "(1 row)".
_TABLE_NOISE = re.compile(r"^(?:-{3,}\+?)+$|^\(\d+ rows?\)$|^[a-z_][a-z_0-9]*$")
_BARE_NUMBER = re.compile(r"-?\d[\d,_]*(?:\.\d+)?")
S_QUERY_RESULT = 0.5  # the one number a query or a count printed
S_PRINTED_LIMIT = 0.45  # a threshold-named row of a config file the shell printed


def _is_config_path(path: str) -> bool:
    return path.rsplit(".", 1)[-1].lower() in CONFIG_EXTS


def _scan_grep_config(command: str, text: str, key: str, c: Collector) -> None:
    """Settings in config rows the shell printed: grep hits on config files, and the lines of
    one config file printed whole or filtered (``grep -v '^#' db/flyway.conf``, ``cat
    app.properties``, ``sed -n 3,9p conf/app.ini``): the rows a reader sees, like a file view's."""
    one = [p for p in _CONFIG_PATH.findall(command) if _is_config_path(p)]
    for line in text.split("\n"):
        m = _GREP_HIT.match(line)
        if not m:
            # One config file named: a printed row that names a threshold or a limit is a
            # setting to keep (``flyway.bellTimeout=803``); the file's other rows are read in
            # passing, as in a log (``cat -n`` numbers stripped).
            if len(set(one)) == 1 and (row := _NUMBERED.sub("", line)).strip() \
                    and THRESHOLD_WORDS.search(_CAMEL.sub(" ", row)):
                scan_values(row, key, c, base=S_OUTPUT_VALUE, config_file=True, config_salience=S_PRINTED_LIMIT)
            continue
        path = m.group("path") or (one[0] if len(one) == 1 else "")
        if path and _is_config_path(path):
            scan_values(m.group("text"), key, c, base=S_OUTPUT_VALUE, config_file=True, config_salience=S_CONFIG_VIEW)


def _single_value(text: str, key: str, c: Collector) -> None:
    """A command whose whole answer is one number (``psql -tA -c 'SELECT count(*) ...'``,
    ``redis-cli LLEN jobs``, ``wc -l < f``): that number is what the step found out."""
    rows = [ln.strip() for ln in text.split("\n") if ln.strip() and not _TABLE_NOISE.match(ln.strip())]
    if len(rows) == 1 and (m := _BARE_NUMBER.fullmatch(rows[0])) and len(re.sub(r"\D", "", m.group(0))) >= 2:
        c.add("exact_values", "query_result", m.group(0), key, S_QUERY_RESULT, number=m.group(0))


def source_messages(messages: Any) -> list[SourceMessage]:
    """Normalised messages (a list of :class:`SourceMessage` passes through)."""
    if isinstance(messages, list) and messages and all(isinstance(m, SourceMessage) for m in messages):
        return messages
    return normalise_messages(messages)


def _refs_items(msgs: list[SourceMessage], c: Collector) -> None:
    blocks = list(dict.fromkeys(m.block_id for m in msgs if m.block_id))
    if blocks:
        for b in blocks:
            c.add("message_refs", "block_ref", b, b, 1.0, refs=[b])
        return
    refs = list(dict.fromkeys(m.ref for m in msgs if m.ref))
    if not refs:
        return
    if len(refs) <= SMALL_RANGE:
        c.add("message_refs", "ref_any", refs[0], refs[0], 1.0, refs=refs)
    else:
        c.add("message_refs", "ref_first", refs[0], refs[0], 1.0, refs=[refs[0]])
        c.add("message_refs", "ref_last", refs[-1], refs[-1], 1.0, refs=[refs[-1]])


def _prose_paths(text: str, key: str, c: Collector) -> None:
    for path, ln, _off in find_path_lines(text):
        c.add("paths_with_lines", "mention", f"{path}:{ln}", key, S_PROSE_PATH, path=path, line=ln)


def extract_keep_items(messages: Any, *, doctrine: Any = None,
                       settings: ConformanceSettings | None = None) -> dict[str, list[KeepItem]]:
    """KEEP-verbatim candidates of a source range, per class, most salient first.

    ``messages`` may be OpenAI chat dicts or flat kernel messages. Each class holds at most
    its ``cap`` items from the doctrine's conformance.json, and only items whose salience
    reaches ``min_salience``. Every item carries the exact text to keep and the ref (or id)
    of the message it came from, so a labeler can compose a summary that keeps it.
    """
    settings = settings or settings_for(doctrine)
    msgs = source_messages(messages)
    c = Collector()
    counts: list[tuple[str, str, str]] = []
    questions: list[tuple[int, str, str]] = []
    pending: dict[str, tuple[list[str], str | None, str | None]] = {}
    last_assistant = max((m.index for m in msgs if m.role == "assistant" and m.kind == "text"), default=-1)
    first_user_done = False

    for m in msgs:
        key = m.key
        if m.kind == "text" and m.role == "user":
            for q in scan_user_text(m.text, key, c, first=not first_user_done):
                questions.append((m.index, q, key))
            first_user_done = True
            _prose_paths(m.text, key, c)
            scan_values(m.text, key, c, base=S_PROSE_VALUE, config_salience=S_PROSE_VALUE, hashes=True)
        elif m.kind in ("text", "reasoning") and (m.role == "assistant" or m.block_id):
            scan_assistant_prose(m.text, key, c, last=m.index == last_assistant)
            _prose_paths(m.text, key, c)
            scan_values(m.text, key, c, base=S_PROSE_VALUE, config_salience=S_PROSE_VALUE, hashes=True)
        elif m.kind == "tool-call":
            name = (m.tool_name or "").lower()
            args = m.arguments
            if name == "think" and isinstance(args.get("thought"), str):
                scan_assistant_prose(args["thought"], key, c, last=False)
            elif name in _EDIT_TOOLS or ("path" in args and ("new_str" in args or "file_text" in args)):
                changed = scan_edit(args, key, c)
                path = args.get("path") if isinstance(args.get("path"), str) else None
                if m.tool_call_id:
                    pending[m.tool_call_id] = (changed, path, args.get("command"))
            elif name in _SHELL_TOOLS or isinstance(args.get("command"), str):
                cmd = args.get("command") if isinstance(args.get("command"), str) else m.text
                scan_values(cmd, key, c, base=S_COMMAND_VALUE, config_salience=S_COMMAND_VALUE, hashes=True)
                if m.tool_call_id and _GREP.search(cmd):
                    pending[m.tool_call_id] = ([], None, "grep:" + cmd)
                elif m.tool_call_id and _PRINTS_FILE.search(cmd):
                    pending[m.tool_call_id] = ([], None, "print:" + cmd)
            else:
                scan_values(m.text, key, c, base=S_OUTPUT_VALUE)
        elif m.kind == "tool-result":
            text = _HARNESS_LINE.sub("", m.text)
            changed, path, command = pending.pop(m.tool_call_id or "", ([], None, None))
            if command is not None and command.startswith("print:"):
                # A printed file: its config rows, then read as any output (a view, a diff, values).
                _scan_grep_config(command[6:], text, key, c)
                command = None
            if command is not None and command.startswith("grep:"):
                _scan_grep_config(command[5:], text, key, c)
                scan_values(text, key, c, base=S_OUTPUT_VALUE)
            elif command is not None and command != "view":
                # An edit's echo: the edit call already yielded its candidates.
                scan_edit_result(text, changed, path, key, c)
            elif command == "view" or scan_view(text, path, key, c):
                if command == "view":
                    scan_view(text, path, key, c)
            elif not scan_diff(text, key, c):
                scan_values(text, key, c, base=S_OUTPUT_VALUE)
            _single_value(text, key, c)
            scan_tool_output(text, key, c, last_counts=counts)

    for n, (kind, text, key) in enumerate(counts):
        pairs = [p.strip() for p in text.split(",") if p.strip()]
        c.add("exact_values", "test_counts", text, key, S_FINAL_COUNTS if n == len(counts) - 1 else S_COUNTS,
              counts=pairs, runner=kind)
    for idx, q, key in questions:
        later = [m for m in msgs if m.index > idx and m.kind == "text" and m.role in ("assistant", "user")]
        reply = next((m for m in later if m.role == "assistant"), None)
        approval = next((m.text for m in later if m.role == "user" and reply and m.index > reply.index), None)
        if reply is not None and resolve_question(q, reply.text, approval, reply.key, c):
            continue
        if unanswered(q, [m.text for m in later if m.role == "assistant"]):
            c.add("open_questions", "question", q, key, S_QUESTION)
    weigh_by_restatement(msgs, c)
    _refs_items(msgs, c)
    return c.ranked(settings.caps, settings.min_salience)
