"""Recall probes on recorded OpenHands trajectories (``nebius/SWE-rebench-openhands-trajectories``).

A case is one converted trajectory (``data_gen.sources.swe_rebench.convert_row``) plus the
questions asked about it. Reference answers are extracted here by code, never written by a
model:

- ``files_changed``: the files of the final patch (``model_patch``), in patch order;
- ``first_edit``: the first ``str_replace_editor`` create / str_replace / insert applied
  inside the task repository (a failed edit was not applied; an edit outside the
  repository, e.g. ``/tmp/reproduce.py``, does not count). When the repository was first
  changed by a shell command (``sed -i``, a redirection, ``git apply``...) that edit cannot
  be quoted, and the question is omitted rather than replaced by a later edit;
- ``first_test_run``: passed / failed counts of the first full test run: a pytest (or
  unittest / tox) command that selects no single test (no ``::`` node id, no ``-k``). Its
  output includes the output of input later sent to it (``is_input``: ``C-c`` and the
  like are input to the running process, never a command of their own); such a run is
  marked ``interrupted``. The question names the command and its execution number (the
  n-th time that exact command line ran);
- ``first_error``: the exact text of the first exception printed by a command that runs
  code (inspection commands such as grep, ls, cat, find, git are skipped): a traceback's
  exception line, a pytest ``E`` line, a ``FAILED ... - <text>`` summary, or an
  ``...Error: <text>`` line, whichever comes first; ``KeyboardInterrupt`` is the user's.

During evaluation the sandbox is gone (:func:`sandbox_shutdown_response`). Judges are
programmatic per kind (set F1, whitespace-normalised exact code, exact counts, exact error
text), with an optional model judge (:func:`model_judge`) that keeps its reasons.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from data_gen.sources.swe_rebench import Rejected, convert_row, iter_rows
from eval.judges import normalise, set_f1
from plumbing.chat_backend import Request

__all__ = ["KINDS", "ProbeCase", "Question", "executions", "extract_questions", "judge", "model_judge",
           "repo_root", "sandbox_shutdown_response", "select_cases"]

KINDS = ("files_changed", "first_edit", "first_test_run", "first_error")
SANDBOX_TOOLS = ("execute_bash", "str_replace_editor", "task_tracker")
_EDIT_COMMANDS = ("create", "str_replace", "insert")
_FAILED_EDIT = ("ERROR:", "No replacement was performed", "did not appear verbatim", "Invalid `path`")
_TRAILER = re.compile(r"^\[(?:The command completed with exit code -?\d+\.|Command finished with exit code -?\d+|"
                      r"Current working directory: .*|"
                      r"Python interpreter: .*|The command has no new output.*)\]$")
_TEST_CMD = re.compile(r"(?:^|[\s;&|(])(?:python\d?(?:\.\d+)?\s+-m\s+(?:pytest|unittest)|pytest|py\.test|tox|nox)\b")
_INSPECT = re.compile(r"^(?:grep|rg|egrep|ls|cat|find|head|tail|sed\s+-n|git|echo|wc|which|pwd|tree|less|more|"
                      r"pip|sort|diff|awk|file|stat|du|df|env|export|true)\b")
_EXC_NAME = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Failed|Failure|Exit|Warning|Timeout)|Failed|Error)(?::\s.*)?$")
_COUNT = re.compile(r"(\d+)\s+(passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?)\b")
_SUMMARY_LINE = re.compile(r"\b\d+\s+(?:passed|failed|errors?)\b.*\bin\s+[\d.]+s\b|^=+ .*\b(?:passed|failed)\b")
_UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in [\d.]+s$", re.M)
_UNITTEST_TAIL = re.compile(r"^(OK|FAILED)\b(?: \((.*)\))?", re.M)
_REDIRECT = re.compile(r"(?<![0-9&>])>{1,2}\s*([^\s&|;<>]+)")
_MODIFIES = re.compile(r"(?:^|[;&|]\s*)(?:sed\s+-i|perl\s+-\w*i|git\s+(?:apply|am|checkout\s+--|restore)|patch\b|"
                       r"mv\b|cp\b|rm\b|tee\b)")


# ---------------------------------------------------------------------------- the sandbox


def sandbox_shutdown_response(tool_name: str, args: dict[str, Any] | None = None) -> str:
    """What a task tool answers during evaluation: the original sandbox no longer exists.

    ``execute_bash`` / ``str_replace_editor`` / ``task_tracker`` refuse; ``think``
    acknowledges; ``finish`` hands back its message (the final answer).
    """
    args = args if isinstance(args, dict) else {}
    if tool_name in SANDBOX_TOOLS:
        return (f"ERROR: the sandbox of this task has been shut down; `{tool_name}` cannot run any more. "
                "Answer from the conversation you can see (and your context tools, if you have them).")
    if tool_name == "think":
        return "Your thought has been logged."
    if tool_name == "finish":
        return str(args.get("message") or args.get("final_answer") or "")
    return f"ERROR: unknown tool `{tool_name}`."


# ---------------------------------------------------------------------------- extraction


@dataclass
class Question:
    instance_id: str
    case_id: str
    kind: str
    question: str
    answer: Any
    evidence: list[str] = field(default_factory=list)  # strings the history must still show to answer
    execution: int | None = None  # first_test_run: which execution of that command line

    def to_dict(self) -> dict[str, Any]:
        d = {"instance_id": self.instance_id, "case_id": self.case_id, "kind": self.kind,
             "question": self.question, "answer": self.answer, "evidence": self.evidence}
        if self.execution is not None:
            d["execution"] = self.execution
        return d


@dataclass
class Execution:
    """One shell command (input sent to a running command is folded into its output)."""

    index: int  # message index of the assistant call
    command: str
    number: int  # 1 for the first time this exact command line ran, 2 for the second...
    output: str
    interrupted: bool = False


def repo_root(messages: list[dict[str, Any]], meta: dict[str, Any]) -> str | None:
    """The task repository's path: the first path in ``<uploaded_files>``, else from ``repo``."""
    for m in messages:
        if m.get("role") == "user":
            hit = re.search(r"<uploaded_files>\s*(\S+)\s*</uploaded_files>", m.get("content") or "")
            if hit:
                return hit.group(1).rstrip("/")
            break
    repo = meta.get("repo")
    return f"/workspace/{repo.split('/')[-1]}" if isinstance(repo, str) and "/" in repo else None


def _calls(messages: list[dict[str, Any]]):
    """(assistant index, name, args dict, result text) for each call with its result."""
    results = {m.get("tool_call_id"): m.get("content") or "" for m in messages if m.get("role") == "tool"}
    for i, m in enumerate(messages):
        if m.get("role") != "assistant":
            continue
        for c in m.get("tool_calls") or []:
            fn = c.get("function") or {}
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except ValueError:
                args = {}
            yield i, fn.get("name"), args if isinstance(args, dict) else {}, results.get(c.get("id"))


def _clean(output: str) -> str:
    return "\n".join(ln for ln in (output or "").split("\n") if not _TRAILER.match(ln.strip()))


def _is_input(args: dict[str, Any]) -> bool:
    v = args.get("is_input")
    return v is True or (isinstance(v, str) and v.strip().lower() == "true")


def executions(messages: list[dict[str, Any]]) -> list[Execution]:
    """Shell commands in order, numbered per exact command line; input is not a command."""
    out: list[Execution] = []
    seen: Counter = Counter()
    for i, name, args, result in _calls(messages):
        if name != "execute_bash" or result is None:
            continue
        cmd = str(args.get("command") or "")
        if _is_input(args):
            if out:  # input goes to the command still running
                out[-1].output += "\n" + _clean(result)
                if cmd.strip().upper() in ("C-C", "C-D", "C-Z", "C-\\") or "KeyboardInterrupt" in result:
                    out[-1].interrupted = True
            continue
        seen[cmd] += 1
        out.append(Execution(i, cmd, seen[cmd], _clean(result)))
    return out


def files_changed(patch: str) -> list[str]:
    files: list[str] = []
    for line in (patch or "").split("\n"):
        m = re.match(r"^diff --git a/(\S+) b/(\S+)$", line)
        if m:
            files.append(m.group(2))
    if not files:
        for line in (patch or "").split("\n"):
            m = re.match(r"^\+\+\+ b/(\S+)", line)
            if m:
                files.append(m.group(1))
    return list(dict.fromkeys(files))


def _inside(path: str, root: str) -> bool:
    return bool(root) and (path == root or path.startswith(root + "/"))


def _shell_modifies_repo(cmd: str, root: str) -> bool:
    if _MODIFIES.search(cmd):
        return True
    for target in _REDIRECT.findall(cmd):
        if target.startswith("/dev/") or target.startswith("/tmp"):
            continue
        if not target.startswith("/") or _inside(target, root):
            return True
    return False


def first_edit(messages: list[dict[str, Any]], root: str) -> dict[str, Any] | None:
    """The first applied in-repo editor edit, or None (also None when a shell command changed
    the repository before it: that first edit cannot be quoted)."""
    for _, name, args, result in _calls(messages):
        if name == "execute_bash" and not _is_input(args) and result is not None:
            if _shell_modifies_repo(str(args.get("command") or ""), root):
                return None
            continue
        if name != "str_replace_editor" or args.get("command") not in _EDIT_COMMANDS:
            continue
        path = str(args.get("path") or "")
        if not _inside(path, root) or result is None or any(s in result for s in _FAILED_EDIT):
            continue
        cmd = args["command"]
        ans: dict[str, Any] = {"path": path, "command": cmd}
        if cmd == "str_replace":
            ans.update(old_str=args.get("old_str", ""), new_str=args.get("new_str", ""))
        elif cmd == "create":
            ans["file_text"] = args.get("file_text", "")
        else:
            ans.update(insert_line=args.get("insert_line"), new_str=args.get("new_str", ""))
        return ans
    return None


def edit_code(ans: dict[str, Any]) -> str:
    """The code an edit answer quotes: a new file's text, else the new / inserted text."""
    return ans.get("file_text", "") if ans.get("command") == "create" else ans.get("new_str", "")


def test_counts(output: str) -> tuple[dict[str, int], str] | None:
    """(counts, the summary line) of a pytest or unittest run, or None without a summary."""
    lines = [ln for ln in output.split("\n") if _SUMMARY_LINE.search(ln)]
    if lines:
        line = lines[-1].strip()
        counts = {"passed": 0, "failed": 0}
        for n, key in _COUNT.findall(line):
            key = "errors" if key.startswith("error") else key
            if key in ("passed", "failed", "errors"):
                counts[key] = int(n)
        return counts, line.strip("= ").strip()
    ran = _UNITTEST_RAN.findall(output)
    tail = _UNITTEST_TAIL.findall(output)
    if ran and tail:
        total = int(ran[-1])
        bad = sum(int(n) for n in re.findall(r"(?:failures|errors)=(\d+)", tail[-1][1] or ""))
        return {"passed": total - bad, "failed": bad}, f"Ran {total} tests"
    return None


def _full_test_run(cmd: str) -> bool:
    return bool(_TEST_CMD.search(cmd)) and "::" not in cmd and not re.search(r"(?:^|\s)-k(?:\s|=|$)", cmd)


def first_test_run(execs: list[Execution]) -> tuple[dict[str, Any], Execution, str] | None:
    for ex in execs:
        if not _full_test_run(ex.command):
            continue
        got = test_counts(ex.output)
        if got is None:
            return None  # the first full run has no counts: omitted, never replaced by a later run
        counts, line = got
        ans = {"command": ex.command, "passed": counts["passed"], "failed": counts["failed"]}
        if counts.get("errors"):
            ans["errors"] = counts["errors"]
        if ex.interrupted:
            ans["interrupted"] = True
        return ans, ex, line
    return None


def _exception_line(text: str, bare: bool = False) -> bool:
    """``Name: message`` (or a bare ``Name`` after a traceback) naming an exception type."""
    name, sep, _ = text.partition(": ")
    if not sep and not bare:
        return False
    if name.split(".")[-1] == "KeyboardInterrupt":
        return False
    # After a traceback any dotted name is the exception (``zlib.error``); elsewhere the name
    # must look like an exception type.
    return bool(re.fullmatch(r"[A-Za-z_][\w.]*", name)) if bare else bool(_EXC_NAME.match(name))


def errors_in(output: str) -> list[str]:
    """Exception texts of one output, in the order they were printed."""
    found: list[tuple[int, str]] = []
    lines = output.split("\n")
    pos = 0
    starts = []
    for ln in lines:
        starts.append(pos)
        pos += len(ln) + 1
    for k, ln in enumerate(lines):
        s = ln.rstrip()
        if s.startswith("Traceback (most recent call last):"):
            for j in range(k + 1, len(lines)):
                nxt = lines[j].rstrip()
                if nxt and not nxt[0].isspace():
                    if _exception_line(nxt, bare=True):
                        found.append((starts[j], nxt))
                    break
            continue
        m = re.match(r"^E\s+(\S.*)$", s)
        if m and _exception_line(m.group(1)):
            found.append((starts[k], m.group(1).rstrip()))
            continue
        m = re.match(r"^(?:FAILED|ERROR) \S+ - (.+)$", s)
        if m:
            found.append((starts[k], m.group(1).rstrip()))
            continue
        # The agent's own scripts print the exception without a traceback:
        # "ERROR: ParseError: ...", "FAILED tests/x.py::t: AttributeError: ..."
        m = re.match(r"^(?:ERROR|FAILED|FAIL|Error)(?:\s+\S+)?:\s+(\S.*)$", s)
        if m and _exception_line(m.group(1)):
            found.append((starts[k], m.group(1).rstrip()))
            continue
        if ": " in s and _exception_line(s):
            found.append((starts[k], s))
    found.sort()
    return list(dict.fromkeys(t for _, t in found))


def first_error(execs: list[Execution]) -> str | None:
    for ex in execs:
        head = re.sub(r"^\s*cd\s+\S+\s*&&\s*", "", ex.command).strip()
        if _INSPECT.match(head) and not _TEST_CMD.search(head):
            continue
        errs = errors_in(ex.output)
        if errs:
            return errs[0]
    return None


def extract_questions(converted: Any, kinds: tuple[str, ...] | list[str] = KINDS) -> list[Question]:
    """The questions of one converted trajectory, with references and evidence (kinds that
    cannot be answered from the record are omitted)."""
    msgs, meta = converted.messages, converted.meta
    iid = str(meta.get("instance_id") or converted.session_id)
    cid = converted.session_id
    root = repo_root(msgs, meta) or ""
    execs = executions(msgs)
    out: list[Question] = []
    if "files_changed" in kinds:
        files = files_changed(meta.get("model_patch") or "")
        if files:
            out.append(Question(iid, cid, "files_changed",
                                "Which files in the repository did your changes modify? List their paths relative "
                                "to the repository root, one per line.", files, list(files)))
    if "first_edit" in kinds and root:
        ans = first_edit(msgs, root)
        if ans is not None and edit_code(ans).strip():
            out.append(Question(iid, cid, "first_edit",
                                "Quote exactly the code of the first edit you applied inside the repository (for a "
                                "replacement the new text, for a new file its whole content, for an insertion the "
                                "inserted text) and name the file.", ans, [edit_code(ans)]))
    if "first_test_run" in kinds:
        got = first_test_run(execs)
        if got is not None:
            ans, ex, line = got
            out.append(Question(iid, cid, "first_test_run",
                                f"In the first full test run, execution {ex.number} of the command `{ex.command}`, "
                                "how many tests passed and how many failed? Answer as: passed=<n> failed=<m>.",
                                ans, [line], execution=ex.number))
    if "first_error" in kinds:
        err = first_error(execs)
        if err is not None:
            out.append(Question(iid, cid, "first_error",
                                "What was the exact text of the first exception raised by the code under test? "
                                "Quote the exception line exactly as it was printed.", err, [err]))
    return out


# ---------------------------------------------------------------------------- judges


def _norm_path(p: str, root: str = "") -> str:
    p = p.strip().strip("`'\",;:()[]")
    if root and p.startswith(root + "/"):
        p = p[len(root) + 1:]
    elif p.startswith("/workspace/"):
        p = p.split("/", 3)[3] if p.count("/") >= 3 else p
    for prefix in ("./", "a/", "b/"):
        if p.startswith(prefix):
            p = p[len(prefix):]
    return p


def _paths_in(text: str) -> list[str]:
    return re.findall(r"[\w./-]*\w\.\w+", text or "")


def _candidates(answer: str) -> list[str]:
    """Pieces an exact answer may be quoted in: fenced blocks, inline code, quotes, lines, all."""
    out = re.findall(r"```[\w+-]*\n?(.*?)```", answer or "", re.S)
    out += re.findall(r"`([^`\n]+)`", answer or "")
    out += re.findall(r'"([^"\n]+)"', answer or "")
    for ln in (answer or "").split("\n"):
        s = ln.strip()
        out.append(s)
        out.append(re.sub(r"^(?:E\s+|FAILED \S+ - |[-*>]\s+)", "", s))
    out.append(answer or "")
    return out


def _count(answer: str, word: str) -> int | None:
    for pat in (rf"{word}\s*[=:]\s*(\d+)", rf"(\d+)\s+(?:tests?\s+)?{word}", rf"{word}\D{{0,12}}(\d+)"):
        m = re.search(pat, answer or "", re.I)
        if m:
            return int(m.group(1))
    return None


def judge(question: dict[str, Any], answer: str) -> dict[str, Any]:
    """Programmatic verdict for one answer: ``{"correct": bool, "score": float, ...}``."""
    kind, ref = question.get("kind"), question.get("answer")
    if kind == "files_changed":
        root = ""
        pred = {_norm_path(p, root) for p in _paths_in(answer)}
        refs = {_norm_path(p) for p in ref or []}
        pred = {p if p in refs else next((r for r in refs if p.endswith("/" + r)), p) for p in pred}
        f = set_f1(pred, refs)
        return {"correct": f["f1"] == 1.0, "score": f["f1"], **f}
    if kind == "first_edit":
        code = edit_code(ref or {})
        ok = any(normalise(c) == normalise(code) for c in _candidates(answer)) if normalise(code) else False
        return {"correct": ok, "score": float(ok)}
    if kind == "first_test_run":
        passed, failed = _count(answer, "passed"), _count(answer, "failed")
        if failed is None and re.search(r"\b(?:no|none|zero|0)\s+(?:tests?\s+)?fail", answer or "", re.I):
            failed = 0
        ok = passed == (ref or {}).get("passed") and failed == (ref or {}).get("failed")
        return {"correct": ok, "score": float(ok), "passed": passed, "failed": failed}
    if kind == "first_error":
        ok = any(normalise(c) == normalise(str(ref)) for c in _candidates(answer))
        return {"correct": ok, "score": float(ok)}
    return {"correct": False, "score": 0.0, "error": f"unknown kind {kind!r}"}


JUDGE_PROMPT = ("You grade an answer against a reference answer extracted from a recorded coding session. "
                "Reply with one JSON object: {\"correct\": true or false, \"reason\": \"one sentence\"}.\n\n"
                "Question: {question}\n\nReference answer: {reference}\n\nAnswer to grade: {answer}")


def model_judge(backend: Any, question: dict[str, Any], answer: str, max_tokens: int = 200) -> dict[str, Any]:
    """A model's verdict through any eval backend (the ``openai`` one in practice); the reason
    is kept. An unreadable verdict gives ``correct: None`` with the raw text as reason."""
    ref = question.get("answer")
    prompt = (JUDGE_PROMPT.replace("{question}", str(question.get("question")))
              .replace("{reference}", json.dumps(ref, ensure_ascii=False) if not isinstance(ref, str) else ref)
              .replace("{answer}", answer or ""))
    try:
        comp = backend.complete(Request([{"role": "user", "content": prompt}], [], False, max_tokens, {}))
        text = comp.message.get("content") or comp.raw_text or ""
    except Exception as exc:  # noqa: BLE001 - a judge outage is recorded, not fatal
        return {"correct": None, "reason": f"judge call failed: {exc}"}
    m = re.search(r"\{.*\}", text, re.S)
    try:
        v = json.loads(m.group(0)) if m else None
    except ValueError:
        v = None
    if not isinstance(v, dict) or not isinstance(v.get("correct"), bool):
        return {"correct": None, "reason": f"unreadable verdict: {text[:300]}"}
    return {"correct": v["correct"], "reason": str(v.get("reason") or "")}


# ---------------------------------------------------------------------------- case selection


@dataclass
class ProbeCase:
    converted: Any  # data_gen.sources.swe_rebench.ConvertedTrajectory
    questions: list[Question]


def _chars(messages: list[dict[str, Any]]) -> int:
    n = 0
    for m in messages:
        n += len(m.get("content") or "")
        for c in m.get("tool_calls") or []:
            n += len((c.get("function") or {}).get("arguments") or "")
    return n


def select_cases(source: Any, filters: dict[str, Any] | None = None, kinds: tuple[str, ...] | list[str] = KINDS,
                 stats: dict[str, Any] | None = None) -> list[ProbeCase]:
    """The first rows of ``source`` (a path or hub id for ``iter_rows``, or an iterable of raw
    rows) that convert and pass ``filters``: ``limit`` (20), ``skip``, ``resolved``,
    ``exit_status`` (list), ``min_messages``/``max_messages``, ``min_chars``/``max_chars``,
    ``repos`` (list), ``one_per_repo``, ``min_questions`` (1), ``require_kinds`` (list).
    ``stats`` receives counts of rows read, rejected (by reason) and filtered (by filter); a
    filter given as null is left out."""
    f = {k: v for k, v in (filters or {}).items() if v is not None}  # null: left out (every filter's default)
    unknown = set(f) - {"limit", "skip", "resolved", "exit_status", "min_messages", "max_messages", "min_chars",
                        "max_chars", "repos", "one_per_repo", "min_questions", "require_kinds"}
    if unknown:
        raise ValueError(f"unknown probe filters {sorted(unknown)}")
    bad_kinds = set(kinds) - set(KINDS)
    if bad_kinds:
        raise ValueError(f"unknown question kinds {sorted(bad_kinds)}; expected some of {list(KINDS)}")
    rows = iter_rows(source) if isinstance(source, (str, bytes)) or hasattr(source, "__fspath__") else source
    st = stats if stats is not None else {}
    st.setdefault("rows", 0)
    st.setdefault("rejected", {})
    st.setdefault("filtered", {})
    limit, skip = int(f.get("limit", 20)), int(f.get("skip", 0))
    repos_seen: set[str] = set()
    out: list[ProbeCase] = []

    def drop(reason: str) -> None:
        st["filtered"][reason] = st["filtered"].get(reason, 0) + 1

    for k, row in enumerate(rows):
        if len(out) >= limit:
            break
        st["rows"] += 1
        if k < skip:
            drop("skip")
            continue
        conv = convert_row(row)
        if isinstance(conv, Rejected):
            st["rejected"][conv.reason] = st["rejected"].get(conv.reason, 0) + 1
            continue
        meta, n = conv.meta, len(conv.messages)
        if "resolved" in f and f["resolved"] is not None and bool(meta.get("resolved")) != bool(f["resolved"]):
            drop("resolved")
            continue
        if f.get("exit_status") and meta.get("exit_status") not in f["exit_status"]:
            drop("exit_status")
            continue
        if n < int(f.get("min_messages", 0)) or n > int(f.get("max_messages", 10 ** 9)):
            drop("messages")
            continue
        c = _chars(conv.messages)
        if c < int(f.get("min_chars", 0)) or c > int(f.get("max_chars", 10 ** 12)):
            drop("chars")
            continue
        repo = str(meta.get("repo") or "")
        if f.get("repos") and repo not in f["repos"]:
            drop("repos")
            continue
        if f.get("one_per_repo") and repo in repos_seen:
            drop("one_per_repo")
            continue
        qs = extract_questions(conv, kinds)
        have = {q.kind for q in qs}
        if len(qs) < int(f.get("min_questions", 1)) or not set(f.get("require_kinds") or []) <= have:
            drop("questions")
            continue
        repos_seen.add(repo)
        out.append(ProbeCase(conv, qs))
    st["cases"] = len(out)
    st["questions"] = dict(Counter(q.kind for c in out for q in c.questions))
    return out
