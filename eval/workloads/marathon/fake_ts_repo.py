"""An in-memory TypeScript repository with a deterministic fake ``tsc`` and ``jest``.

The Session Marathon (``eval.workloads.marathon.tasks``) runs every scripted action through this
repository, so the tool outputs of a scripted session are exactly what the agentic driver
(``eval.workloads.agentic``) would see for the same actions. Nothing here touches a disk
or a process: ``TsRepo`` is a dict of files plus the behaviour of its tests.

- ``tsc``: resolves relative imports and re-exports, checks that imported names are
  exported, and that every called identifier is declared, imported or a builtin; errors
  come out in tsc's ``file(line,col): error TSxxxx: ...`` form.
- ``jest``: parses ``describe``/``it`` blocks of ``tests/*.test.ts``. A suite whose files do
  not type-check fails to run; a test registered in ``checks`` passes only while its module
  holds the fixed code (and not the buggy one), and fails with jest's report (expected /
  received, a code frame, a stack trace). Unregistered tests pass.
- ``bash``: the handful of commands an agent uses here (``npx tsc``, ``npx jest``,
  ``npm test``, ``npm run build``, ``grep -rn``, ``sed -i s/a/b/g``, ``cat``, ``ls``,
  ``find``, ``wc -l``, ``rm``), each answered in the OpenHands output format.
"""

from __future__ import annotations

import posixpath
import re
import shlex
import zlib
from dataclasses import dataclass, field

__all__ = ["BUILTINS", "TestCheck", "TsRepo"]

BUILTINS = frozenset(
    "if for while switch return typeof function catch describe it test expect beforeEach afterEach "
    "Math JSON String Number Boolean Array Object Date Promise Error TypeError RangeError console "
    "parseInt parseFloat isNaN setTimeout clearTimeout Map Set require super new constructor toBe "
    "toEqual toThrow".split())
_IMPORT = re.compile(r"^import\s+(?:type\s+)?\{([^}]*)\}\s+from\s+'([^']+)';", re.M)
_REEXPORT = re.compile(r"^export\s+(?:\*|\{[^}]*\})\s+from\s+'([^']+)';", re.M)
_EXPORTED = re.compile(r"^export\s+(?:async\s+)?(?:function|const|let|class|interface|type|enum)\s+([A-Za-z_$][\w$]*)", re.M)
_NAMED_REEXPORT = re.compile(r"^export\s+\{([^}]*)\}\s+from\s+'([^']+)';", re.M)
_DECL = re.compile(r"(?:function|const|let|var|class|interface|type|enum)\s+([A-Za-z_$][\w$]*)")
_METHOD = re.compile(r"^\s+([A-Za-z_$][\w$]*)\s*\([^)]*\)\s*(?::[^{;]*)?[{;]", re.M)
_NUMBER_AS_STRING = re.compile(r"^(?:export\s+)?const\s+([A-Za-z_$][\w$]*)\s*:\s*number\s*=\s*'[^']*';", re.M)
_CALL = re.compile(r"(?<![\w$.'\"`])([A-Za-z_$][\w$]*)\s*\(")
_PARAM = re.compile(r"\(([^()]*)\)\s*(?::|=>|\{)")
_IT = re.compile(r"^(\s*)(?:it|test)\('([^']+)'", re.M)
_DESCRIBE = re.compile(r"^(\s*)describe\('([^']+)'", re.M)


@dataclass
class TestCheck:
    """How one registered jest test behaves: it passes while ``module`` holds every string
    of ``must_contain`` and none of ``must_not_contain``; otherwise it fails with either an
    ``expect`` mismatch (``expected`` / ``received``) or a thrown ``error`` at ``frame``."""

    __test__ = False  # not a pytest class, despite the name

    module: str  # path relative to the root
    must_contain: list[str] = field(default_factory=list)
    must_not_contain: list[str] = field(default_factory=list)
    expected: str = ""
    received: str = ""
    matcher: str = "toBe"
    error: str = ""  # e.g. "TypeError: Cannot read properties of undefined (reading 'trim')"
    frame: str = ""  # e.g. "normalise (src/text.ts:3:15)" for a thrown error


class TsRepo:
    """The repository: files by relative path, test behaviour by ``"file::test name"``."""

    def __init__(self, root: str = "/workspace/app"):
        self.root = root.rstrip("/")
        self.files: dict[str, str] = {}
        self.checks: dict[str, TestCheck] = {}

    # ------------------------------------------------------------------ paths and files

    def rel(self, path: str) -> str | None:
        """``path`` relative to the root (None when it is outside the repository)."""
        p = posixpath.normpath(path if path.startswith("/") else posixpath.join(self.root, path))
        if p == self.root:
            return ""
        return p[len(self.root) + 1:] if p.startswith(self.root + "/") else None

    def abs(self, rel: str) -> str:
        return f"{self.root}/{rel}" if rel else self.root

    def write(self, rel: str, text: str) -> None:
        self.files[rel] = text

    def copy(self) -> TsRepo:
        other = TsRepo(self.root)
        other.files = dict(self.files)
        other.checks = dict(self.checks)
        return other

    # ------------------------------------------------------------------ the editor tool

    def editor(self, args: dict) -> str:
        """``str_replace_editor``: view / create / str_replace / insert, OpenHands wording."""
        cmd, path = args.get("command"), str(args.get("path") or "")
        rel = self.rel(path) if path.startswith("/") else None
        if not path.startswith("/"):
            return f"ERROR: Invalid `path` parameter: {path}. The path should be an absolute path."
        if rel is None:
            return f"ERROR: Invalid `path` parameter: {path}. The path {path} does not exist."
        if cmd == "view":
            return self.view(rel, args.get("view_range"))
        if cmd == "create":
            if rel in self.files:
                return (f"ERROR: Invalid `path` parameter: {path}. File already exists at: {path}. "
                        "Cannot overwrite files using command `create`.")
            self.files[rel] = str(args.get("file_text") or "")
            return f"File created successfully at: {path}"
        if rel not in self.files:
            return f"ERROR: Invalid `path` parameter: {path}. The path {path} does not exist."
        text = self.files[rel]
        if cmd == "str_replace":
            old, new = str(args.get("old_str") or ""), str(args.get("new_str") or "")
            n = text.count(old) if old else 0
            if n == 0:
                return f"ERROR: No replacement was performed, old_str `{old}` did not appear verbatim in {path}."
            if n > 1:
                lines = [i + 1 for i, line in enumerate(text.split("\n")) if old.split("\n")[0] in line]
                return (f"ERROR: No replacement was performed. Multiple occurrences of old_str `{old}` in lines "
                        f"{lines}. Please ensure it is unique.")
            at = text.index(old)
            self.files[rel] = text.replace(old, new, 1)
            first = text[:at].count("\n")
            return (f"The file {path} has been edited. Here's the result of running `cat -n` on a snippet of "
                    f"{path}:\n{self._snippet(rel, first, first + new.count(chr(10)))}\n"
                    "Review the changes and make sure they are as expected. Edit the file again if necessary.")
        if cmd == "insert":
            try:
                line = int(args.get("insert_line"))
            except (TypeError, ValueError):
                return "ERROR: Parameter `insert_line` is required for command: insert."
            lines = text.split("\n")
            if not 0 <= line <= len(lines):
                return f"ERROR: Invalid `insert_line` parameter: {line}. It should be within [0, {len(lines)}]."
            new = str(args.get("new_str") or "").split("\n")
            self.files[rel] = "\n".join(lines[:line] + new + lines[line:])
            return (f"The file {path} has been edited. Here's the result of running `cat -n` on a snippet of "
                    f"the edited file:\n{self._snippet(rel, line, line + len(new) - 1)}\n"
                    "Review the changes and make sure they are as expected (correct indentation, no duplicate "
                    "lines, etc). Edit the file again if necessary.")
        return (f"ERROR: Unrecognized command {cmd}. The allowed commands for the str_replace_editor tool are: "
                "view, create, str_replace, insert.")

    def view(self, rel: str, view_range: list[int] | None = None) -> str:
        if rel == "" or rel not in self.files and any(f.startswith(rel + "/") for f in self.files):
            prefix = rel + "/" if rel else ""
            names = sorted(f for f in self.files if f.startswith(prefix))
            body = "\n".join(self.abs(n) for n in names)
            return (f"Here's the files and directories up to 2 levels deep in {self.abs(rel)}, excluding hidden "
                    f"items:\n{body}")
        if rel not in self.files:
            return f"ERROR: Invalid `path` parameter: {self.abs(rel)}. The path {self.abs(rel)} does not exist."
        lines = self.files[rel].split("\n")
        lo, hi = 1, len(lines)
        if view_range:
            try:
                lo, hi = int(view_range[0]), int(view_range[1])
            except (TypeError, ValueError, IndexError):
                return "ERROR: `view_range` should be a list of two integers."
            hi = len(lines) if hi == -1 else min(hi, len(lines))
        body = "\n".join(f"{k:6d}\t{lines[k - 1]}" for k in range(max(1, lo), hi + 1))
        return f"Here's the result of running `cat -n` on {self.abs(rel)}:\n{body}"

    def _snippet(self, rel: str, first: int, last: int) -> str:
        lines = self.files[rel].split("\n")
        lo, hi = max(0, first - 4), min(len(lines), last + 5)
        return "\n".join(f"{k + 1:6d}\t{lines[k]}" for k in range(lo, hi))

    # ------------------------------------------------------------------ tsc

    def _resolve(self, importer: str, spec: str) -> str | None:
        if not spec.startswith("."):
            return "<package>"
        base = posixpath.normpath(posixpath.join(posixpath.dirname(importer), spec))
        for cand in (base + ".ts", base + "/index.ts", base):
            if cand in self.files:
                return cand
        return None

    def exports(self, rel: str, _seen: frozenset = frozenset()) -> set[str]:
        text = self.files.get(rel, "")
        names = set(_EXPORTED.findall(text))
        for group, _spec in _NAMED_REEXPORT.findall(text):
            names.update(_names(group, alias=True))
        for m in re.finditer(r"^export\s+\*\s+from\s+'([^']+)';", text, re.M):
            target = self._resolve(rel, m.group(1))
            if target and target != "<package>" and target not in _seen:
                names |= self.exports(target, _seen | {rel})
        return names

    def diagnostics(self, only: list[str] | None = None) -> list[str]:
        """tsc error lines for the ``.ts`` files (all, or ``only`` and what they import)."""
        out = []
        for rel in sorted(f for f in self.files if f.endswith(".ts")):
            if only is not None and rel not in only:
                continue
            out += self._file_diagnostics(rel)
        return out

    def _file_diagnostics(self, rel: str) -> list[str]:
        text = self.files[rel]
        errs: list[tuple[int, int, str]] = []
        declared = set(BUILTINS)
        for group, _spec in _IMPORT.findall(text):
            declared.update(_names(group))
        for m in _IMPORT.finditer(text):
            group, spec = m.group(1), m.group(2)
            line, col = _pos(text, m.start(2) - 1)
            target = self._resolve(rel, spec)
            if target is None:
                errs.append((line, col, f"error TS2307: Cannot find module '{spec}' or its corresponding type "
                                        "declarations."))
                continue
            if target == "<package>":
                continue
            have = self.exports(target)
            for name in _names(group, alias=False):
                if name not in have:
                    ncol = _pos(text, m.start(1) + m.group(1).index(name))[1]
                    errs.append((line, ncol, f"error TS2305: Module '\"{spec}\"' has no exported member '{name}'."))
        for m in _REEXPORT.finditer(text):
            if self._resolve(rel, m.group(1)) is None:
                line, col = _pos(text, m.start(1) - 1)
                errs.append((line, col, f"error TS2307: Cannot find module '{m.group(1)}' or its corresponding "
                                        "type declarations."))
        declared.update(_DECL.findall(text))
        declared.update(_METHOD.findall(text))
        for pm in _PARAM.finditer(text):
            declared.update(re.findall(r"([A-Za-z_$][\w$]*)\s*[?]?\s*[:,=)]", pm.group(1) + ")"))
        for m in _NUMBER_AS_STRING.finditer(text):
            line, col = _pos(text, m.start(1))
            errs.append((line, col, "error TS2322: Type 'string' is not assignable to type 'number'."))
        for m in _CALL.finditer(_strip_strings(text)):
            name = m.group(1)
            if name not in declared:
                line, col = _pos(text, m.start(1))
                errs.append((line, col, f"error TS2304: Cannot find name '{name}'."))
        return [f"{rel}({line},{col}): {msg}" for line, col, msg in sorted(set(errs))]

    def tsc(self) -> tuple[str, int]:
        errs = self.diagnostics()
        if not errs:
            return "", 0
        files = len({e.split("(")[0] for e in errs})
        first = errs[0].split(":")[0]
        where = f"{first.split('(')[0]}:{first.split('(')[1].split(',')[0]}"
        tail = f"Found {len(errs)} error{'s' if len(errs) != 1 else ''}" + (
            f" in {files} files." if files > 1 else f" in {where}")
        return "\n".join(errs) + "\n\n" + tail, 2

    # ------------------------------------------------------------------ jest

    def test_files(self) -> list[str]:
        return sorted(f for f in self.files if f.startswith("tests/") and f.endswith(".test.ts"))

    def _imports_closure(self, rel: str) -> list[str]:
        seen, todo = [], [rel]
        while todo:
            f = todo.pop()
            if f in seen or f not in self.files:
                continue
            seen.append(f)
            for _, spec in _IMPORT.findall(self.files[f]):
                t = self._resolve(f, spec)
                if t and t != "<package>":
                    todo.append(t)
            for m in re.finditer(r"^export\s+(?:\*|\{[^}]*\})\s+from\s+'([^']+)';", self.files[f], re.M):
                t = self._resolve(f, m.group(1))
                if t and t != "<package>":
                    todo.append(t)
        return seen

    def run_tests(self, patterns: list[str] | None = None) -> list[dict]:
        """Per suite: ``{"file", "error" (suite failed to run) | "tests": [(path, name, ok)]}``."""
        suites = []
        for tf in self.test_files():
            if patterns and not any(p in tf for p in patterns):
                continue
            diags = self.diagnostics(only=self._imports_closure(tf))
            if diags:
                suites.append({"file": tf, "error": diags, "tests": []})
                continue
            suites.append({"file": tf, "tests": [(path, name, self._passes(tf, name)) for path, name in
                                                  _test_names(self.files[tf])]})
        return suites

    def _passes(self, tf: str, name: str) -> bool:
        chk = self.checks.get(f"{tf}::{name}")
        if chk is None:
            return True
        # The module and what it imports: a helper moved to another file keeps its fix.
        text = "\n".join(self.files.get(f, "") for f in self._imports_closure(chk.module))
        return all(s in text for s in chk.must_contain) and not any(s in text for s in chk.must_not_contain)

    def jest(self, patterns: list[str] | None = None, verbose: bool = False) -> tuple[str, int]:
        """jest's report over the suites matching ``patterns`` (all when empty)."""
        suites = self.run_tests(patterns)
        if not suites:
            pat = " ".join(patterns or [])
            return (f"No tests found, exiting with code 1\nRun with `--passWithNoTests` to exit with code 0\n"
                    f"Pattern: {pat} - 0 matches"), 1
        out: list[str] = []
        failed_suites = n_pass = n_fail = 0
        for s in suites:
            bad = s.get("error") or [t for t in s["tests"] if not t[2]]
            out.append(f"{' FAIL ' if bad else ' PASS '} {s['file']}")
            if s.get("error"):
                failed_suites += 1
                out += ["  ● Test suite failed to run", "", f"    {s['file']}: Unable to compile TypeScript:"]
                out += [f"    {d}" for d in s["error"]] + [""]
                continue
            if verbose:
                for _path, name, ok in s["tests"]:
                    out.append(f"    {'✓' if ok else '✕'} {name} ({_ms(s['file'] + name, 1, 9)} ms)")
            for path, name, ok in s["tests"]:
                if ok:
                    n_pass += 1
                    continue
                n_fail += 1
                out += self._failure(s["file"], path, name)
            if bad:
                failed_suites += 1
        total = len(suites)
        out.append(f"Test Suites: {_counts(failed_suites, total - failed_suites)}, {total} total")
        out.append(f"Tests:       {_counts(n_fail, n_pass)}, {n_fail + n_pass} total")
        out.append("Snapshots:   0 total")
        out.append(f"Time:        {_ms(''.join(sorted(self.files.values())), 800, 4000) / 1000:.3f} s")
        out.append("Ran all test suites." if not patterns else
                   f"Ran all test suites matching /{'|'.join(re.escape(p) for p in patterns)}/i.")
        return "\n".join(out), 1 if (n_fail or failed_suites) else 0

    def _failure(self, tf: str, path: list[str], name: str) -> list[str]:
        chk = self.checks[f"{tf}::{name}"]
        lines = self.files[tf].split("\n")
        at = next((i for i, ln in enumerate(lines) if f"'{name}'" in ln), 0)
        exp = next((i for i in range(at, min(len(lines), at + 8)) if "expect(" in lines[i]), at)
        col = lines[exp].index("expect(") + 1 if "expect(" in lines[exp] else 1
        title = " › ".join(path + [name])
        out = ["", f"  ● {title}", ""]
        if chk.error:
            out += [f"    {chk.error}", ""]
        else:
            eq = "// Object.is equality" if chk.matcher == "toBe" else "// deep equality"
            out += [f"    expect(received).{chk.matcher}(expected) {eq}", "", f"    Expected: {chk.expected}",
                    f"    Received: {chk.received}", ""]
        for k in range(max(0, exp - 2), min(len(lines), exp + 3)):
            mark = ">" if k == exp else " "
            out.append(f"    {mark} {k + 1:3d} | {lines[k]}")
            if k == exp:
                out.append(f"          | {' ' * (col - 1)}^")
        out.append("")
        if chk.frame:
            out.append(f"      at {chk.frame}")
        out.append(f"      at Object.<anonymous> ({tf}:{exp + 1}:{col})")
        out.append("")
        return out

    # ------------------------------------------------------------------ bash

    def bash(self, command: str) -> tuple[str, int]:
        """Run one shell command line (``a && b`` chains; a leading ``cd ROOT`` is accepted)."""
        out, code = [], 0
        for part in [p.strip() for p in command.split("&&") if p.strip()]:
            text, code = self._one(part)
            if text:
                out.append(text)
            if code != 0:
                break
        return "\n".join(out), code

    def _one(self, cmd: str) -> tuple[str, int]:
        try:
            argv = shlex.split(cmd)
        except ValueError as exc:
            return f"bash: syntax error: {exc}", 2
        if not argv:
            return "", 0
        prog, args = argv[0], argv[1:]
        if prog == "cd":
            target = args[0] if args else self.root
            ok = self.rel(target) is not None
            return ("", 0) if ok else (f"bash: cd: {target}: No such file or directory", 1)
        if prog == "npx" and args[:1] == ["tsc"] or argv[:3] == ["npm", "run", "typecheck"]:
            return self.tsc()
        if prog == "npx" and args[:1] == ["jest"] or argv[:2] == ["npm", "test"]:
            rest = args[1:] if prog == "npx" else [a for a in args[1:] if a != "--"]
            verbose = "--verbose" in rest
            pats = [self.rel(a) or a for a in rest if not a.startswith("-")]
            return self.jest(pats or None, verbose)
        if argv[:3] == ["npm", "run", "build"]:
            return self.build()
        if prog == "grep":
            return self._grep(args)
        if prog == "sed":
            return self._sed(args)
        if prog == "cat":
            texts = []
            for a in args:
                rel = self.rel(a)
                if rel not in self.files:
                    return f"cat: {a}: No such file or directory", 1
                texts.append(self.files[rel])
            return "\n".join(texts), 0
        if prog in ("ls", "find"):
            target = next((a for a in args if not a.startswith("-") and not a.startswith("*")
                           and not a.startswith("'")), self.root)
            rel = self.rel(target)
            if rel is None:
                return f"{prog}: cannot access '{target}': No such file or directory", 2
            prefix = rel + "/" if rel else ""
            names = sorted(f for f in self.files if f.startswith(prefix))
            if prog == "find":
                want = args[args.index("-name") + 1] if "-name" in args[:-1] else "*"
                rx = re.compile("^" + re.escape(want).replace(r"\*", ".*") + "$")
                return "\n".join(self.abs(n) for n in names if rx.match(posixpath.basename(n))), 0
            kids = sorted({n[len(prefix):].split("/")[0] for n in names})
            return "  ".join(kids), 0
        if prog == "wc" and args[:1] == ["-l"]:
            rows = []
            for a in args[1:]:
                rel = self.rel(a)
                if rel not in self.files:
                    return f"wc: {a}: No such file or directory", 1
                rows.append(f"{self.files[rel].count(chr(10)) + 1} {a}")
            return "\n".join(rows), 0
        if prog == "rm":
            for a in [a for a in args if not a.startswith("-")]:
                rel = self.rel(a)
                if rel not in self.files:
                    return f"rm: cannot remove '{a}': No such file or directory", 1
                del self.files[rel]
            return "", 0
        if prog == "echo":
            return " ".join(args), 0
        return f"bash: {prog}: command not found", 127

    def _grep(self, args: list[str]) -> tuple[str, int]:
        flags = [a for a in args if a.startswith("-")]
        rest = [a for a in args if not a.startswith("-")]
        if not rest:
            return "Usage: grep [OPTION]... PATTERNS [FILE]...", 2
        pattern, targets = rest[0], rest[1:] or [self.root]
        try:  # grep's basic syntax writes alternation as \|
            rx = re.compile(pattern.replace(r"\|", "|"))
        except re.error:
            rx = re.compile(re.escape(pattern))
        hits = []
        for t in targets:
            rel = self.rel(t)
            if rel is None:
                return f"grep: {t}: No such file or directory", 2
            names = [rel] if rel in self.files else sorted(f for f in self.files if f.startswith(rel + "/" if rel else ""))
            for n in names:
                for k, line in enumerate(self.files[n].split("\n"), 1):
                    if rx.search(line):
                        hits.append(f"{self.abs(n)}:{k}:{line}" if "n" in "".join(f.lstrip("-") for f in flags) else f"{self.abs(n)}:{line}")
        return "\n".join(hits), 0 if hits else 1

    def _sed(self, args: list[str]) -> tuple[str, int]:
        if not args or args[0] != "-i" or len(args) < 3:
            return "sed: only `sed -i 's/OLD/NEW/g' FILE...` is available here", 1
        m = re.fullmatch(r"s/((?:[^/\\]|\\.)*)/((?:[^/\\]|\\.)*)/(g?)", args[1])
        if not m:
            return f"sed: -e expression #1, char {len(args[1])}: unknown option to `s'", 1
        rx, new = re.compile(m.group(1)), m.group(2).replace("\\/", "/")
        for a in args[2:]:
            rel = self.rel(a)
            if rel not in self.files:
                return f"sed: can't read {a}: No such file or directory", 2
            self.files[rel] = rx.sub(new, self.files[rel], count=0 if m.group(3) else 1)
        return "", 0

    def build(self) -> tuple[str, int]:
        """``npm run build``: a tsc-backed build log, one line per emitted file."""
        out = ["", f"> {posixpath.basename(self.root)}@build", "> tsc -p tsconfig.build.json", ""]
        errs = self.diagnostics()
        if errs:
            return "\n".join(out + errs), 2
        for rel in sorted(f for f in self.files if f.startswith("src/") and f.endswith(".ts")):
            js = "dist/" + rel[4:-3] + ".js"
            out.append(f"[build] {rel} -> {js} ({len(self.files[rel]) * 3 // 4 + 120} bytes, "
                       f"{_ms(rel + self.files[rel], 2, 40)} ms)")
        notes = self.files.get(".build-warnings", "")
        out += [w for w in notes.split("\n") if w]
        out.append(f"[build] done: {sum(1 for f in self.files if f.startswith('src/'))} modules")
        return "\n".join(out), 0


# ---------------------------------------------------------------------------- helpers


def _names(group: str, alias: bool = False) -> list[str]:
    """Names of an import/export list; ``a as b`` gives ``b`` (import) or ``b`` (export)."""
    out = []
    for part in group.split(","):
        part = part.strip()
        if not part:
            continue
        bits = part.split(" as ")
        out.append(bits[-1].strip() if (alias or len(bits) > 1) else bits[0].strip())
    return out


def _pos(text: str, index: int) -> tuple[int, int]:
    line = text.count("\n", 0, index) + 1
    col = index - (text.rfind("\n", 0, index) + 1) + 1
    return line, col


def _strip_strings(text: str) -> str:
    """Blank out string literals and comments (same length), so calls inside them are ignored."""
    def blank(m: re.Match) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))
    return re.sub(r"//[^\n]*|'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"|`(?:[^`\\]|\\.)*`", blank, text)


def _test_names(text: str) -> list[tuple[list[str], str]]:
    """(describe path, test name) for every ``it``/``test`` block, by indentation nesting."""
    events = [(m.start(), len(m.group(1)), "d", m.group(2)) for m in _DESCRIBE.finditer(text)]
    events += [(m.start(), len(m.group(1)), "t", m.group(2)) for m in _IT.finditer(text)]
    stack: list[tuple[int, str]] = []
    out = []
    for _, indent, kind, name in sorted(events):
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if kind == "d":
            stack.append((indent, name))
        else:
            out.append(([n for _, n in stack], name))
    return out


def _counts(failed: int, passed: int) -> str:
    parts = ([f"{failed} failed"] if failed else []) + ([f"{passed} passed"] if passed or not failed else [])
    return ", ".join(parts)


def _ms(key: str, lo: int, hi: int) -> int:
    """A stable pseudo-duration for ``key`` in ``[lo, hi]`` (outputs stay deterministic)."""
    return lo + zlib.crc32(key.encode()) % (hi - lo + 1)
