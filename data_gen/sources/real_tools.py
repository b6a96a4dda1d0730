"""Sessions whose tool outputs are real: read-only commands over real source trees.

Each session is one small task over one tree (a standard-library package or an installed
package, ``real_tools_sandbox.resolve_tree``): "where is ``f`` defined and what default does
its ``p`` take", "why does this doctest fail" or "what is ``CONST`` and where is it set".
The agent's words are templated; every value it states (a ``path:line``, a default, a
signature, a doctest's failure line) comes from an output recorded by running the command
at build time in the sandbox. Facts are declared on those outputs and used a few steps
later, so the labeler's hindsight knows what is still needed.

Which file and symbol a session is about comes from a seeded RNG over the tree's sorted file
list; a candidate whose outputs would not fit the pocket profile (more than
``max_output_lines`` lines or ``max_output_chars`` characters) or whose commands fail is
passed over for the next one: outputs are chosen small, never cut. Filler steps (a listing,
``wc -l``, a count, the imports) run too, and a filler command that fails (``grep`` finding
nothing) or times out is kept as the shell reported it.
"""

from __future__ import annotations

import ast
import hashlib
import json
import random
import re
import shlex
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from data_gen.synthetic._render import Repo
from data_gen.synthetic._tools import SessionBuilder, SessionSize
from data_gen.synthetic.pocket import POCKET_TOOLS
from doctrine.session import Session, SessionError

from .real_tools_sandbox import Ran, Tree, file_sha256, resolve_tree, run, tree_files

__all__ = ["TASKS", "real_tool_sessions", "session_for"]

TASKS = ("default_of", "failing_check", "constant_of")
SCRATCH = "/tmp/check"  # how the scratch folder is shown (the real one is a fresh temp folder)
SYSTEM = ("You are a coding agent on a machine with real source trees. Use the tools, read outputs "
          "carefully; call finish when done.")
_CONST = re.compile(r"^[A-Z][A-Z0-9_]{2,}$")
_ADDRESS = re.compile(r"\bat 0x[0-9a-fA-F]{4,}\b")


class NoCandidate(SessionError):
    """No file of the tree gave a task whose outputs fit (counted, never raised past the source)."""


@dataclass(frozen=True)
class Target:
    kind: str  # "function" | "constant"
    rel: str  # file, relative to the tree root
    module: str  # import name
    name: str
    line: int  # line of the def / assignment
    end: int  # last line worth reading (end of the def header / the assignment)
    param: str = ""
    default_src: str = ""  # the default as written in the source
    value_repr: str = ""  # repr of the default / constant as parsed


def _module_name(tree: Tree, rel: str) -> str:
    parts = [tree.module, *rel[:-3].split("/")]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def targets(tree: Tree, rel: str) -> list[Target]:
    """Public top-level functions with a literal default, and upper-case literal constants."""
    src = (tree.root / rel).read_text(encoding="utf-8", errors="replace")
    try:
        mod = ast.parse(src)
    except (SyntaxError, ValueError):
        return []
    module = _module_name(tree, rel)
    out = []
    for node in mod.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_") and not node.decorator_list:
            a = node.args
            pos = (a.posonlyargs + a.args)[len(a.posonlyargs + a.args) - len(a.defaults):]
            pairs = list(zip(pos, a.defaults, strict=True)) + [
                (k, d) for k, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None]
            end = max(node.lineno, node.body[0].lineno - 1)
            for arg, d in pairs:
                if isinstance(d, ast.Constant) and not isinstance(d.value, bytes) and len(repr(d.value)) <= 30:
                    seg = ast.get_source_segment(src, d) or ""
                    out.append(Target("function", rel, module, node.name, node.lineno, end, arg.arg, seg,
                                      repr(d.value)))
        elif (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
              and _CONST.match(node.targets[0].id) and isinstance(node.value, ast.Constant)
              and isinstance(node.value.value, (str, int, float, bool)) and len(repr(node.value.value)) <= 40):
            out.append(Target("constant", rel, module, node.targets[0].id, node.lineno, node.end_lineno or node.lineno,
                              value_repr=repr(node.value.value)))
    return out


# --------------------------------------------------------------------------- one session


class _Shell:
    """Runs a session's commands: in the tree (shown as ``cd ROOT && ...``) or in scratch."""

    def __init__(self, tree: Tree, scratch: Path, cfg):
        self.tree, self.scratch, self.cfg = tree, scratch, cfg
        self.read: dict[str, str] = {}  # files of the tree a command read by name -> sha256
        self.log: list[dict] = []

    def tree_cmd(self, argv: list[str], reads: str | None = None) -> Ran:
        if reads:
            self.read[reads] = file_sha256(self.tree.root / reads)
        shown = f"cd {self.tree.root} && {shlex.join(argv)}"
        return self._run(argv, self.tree.root, shown)

    def scratch_cmd(self, argv: list[str]) -> Ran:
        return self._run(argv, self.scratch, f"cd {SCRATCH} && {shlex.join(argv)}")

    def _run(self, argv, cwd, shown) -> Ran:
        ran = run(argv, cwd, shown=shown, timeout_s=self.cfg.timeout_s, scratch=self.scratch)
        self.log.append({"command": shown, "exit": ran.code, "timed_out": ran.timed_out})
        return ran

    def fits(self, ran: Ran, code: int | None = 0) -> bool:
        """Small enough for the pocket profile and the same on every run (an object's memory
        address, ``<object object at 0x7f...>``, changes each run: such an output is passed over)."""
        lines = ran.out.rstrip("\n").split("\n")
        return (not ran.timed_out and ran.code == code and len(lines) <= self.cfg.max_output_lines
                and len(ran.out) <= self.cfg.max_output_chars and not _ADDRESS.search(ran.out))


def _check_text(t: Target, expected: str) -> list[str]:
    return [f">>> import inspect, {t.module}",
            f">>> print(repr(inspect.signature({t.module}.{t.name}).parameters[{t.param!r}].default))",
            expected]


def _check_name(t: Target) -> str:
    """The scratch check's file name, after the package and the function (check_json_dumps.txt):
    a name made of the function alone repeats across trees (main, validate, dumps), so an unseen
    tree's label would quote a file name seen in train."""
    return f"check_{t.module.split('.')[0].lstrip('_')}_{t.name}.txt"


def _wrong(t: Target, rng: random.Random) -> str:
    """A plausible but wrong expected value for a failing check."""
    v = ast.literal_eval(t.value_repr)
    if isinstance(v, bool) or v is None:
        return rng.choice([x for x in ("True", "False", "None", "0") if x != t.value_repr])
    if isinstance(v, (int, float)):
        return repr(v + rng.choice((1, 2, 10)) if v else rng.choice((1, -1)))
    return repr(v.upper() if v.upper() != v else v + "s") if v else "'default'"


def _plan_function(sh: _Shell, t: Target, task: str, rng: random.Random) -> dict | None:
    """Run the core commands of a function task; None when an output is unusable."""
    plan: dict = {}
    if task == "failing_check":
        wrong = _wrong(t, rng)
        if "\n".join(_check_text(t, wrong)).count(wrong) != 1:
            return None  # the editor's str_replace needs one occurrence
        repo = Repo(SCRATCH)
        check = _check_name(t)
        repo.create(check, _check_text(t, wrong))
        (sh.scratch / check).write_text("\n".join(repo.files[check]) + "\n")
        failed = sh.scratch_cmd(["python", "-m", "doctest", check])
        if not sh.fits(failed, 1) or f"Got:\n    {t.value_repr}\n" not in failed.out \
                or not any(ln.startswith("File ") for ln in failed.out.splitlines()):
            return None
        plan.update(repo=repo, check=check, wrong=wrong, failed=failed,
                    cat=sh.scratch_cmd(["cat", check]))
    locate = sh.tree_cmd(["grep", "-rn", f"def {t.name}(", "--include=*.py", "."])
    if not sh.fits(locate) or f"./{t.rel}:{t.line}:" not in locate.out:
        return None
    end = min(t.end + 1, t.line + sh.cfg.max_output_lines - 1)
    read = sh.tree_cmd(["sed", "-n", f"{t.line},{end}p", t.rel], reads=t.rel)
    m = re.search(rf"\b{re.escape(t.param)}\b(?:\s*:[^=,()]*)?\s*=\s*{re.escape(t.default_src)}", read.out)
    if not sh.fits(read) or m is None:
        return None
    plan.update(locate=locate, read=read, default_text=m.group(0))
    if task == "default_of":
        sig = sh.scratch_cmd(["python", "-c", f"import inspect, {t.module}; print(inspect.signature({t.module}.{t.name}))"])
        if not sh.fits(sig) or "\n" in sig.out.strip() or not sig.out.strip():
            return None
        repo = Repo(SCRATCH)
        check = _check_name(t)
        created = repo.create(check, _check_text(t, t.value_repr))
        (sh.scratch / check).write_text("\n".join(repo.files[check]) + "\n")
        passed = sh.scratch_cmd(["python", "-m", "doctest", check])
        if not sh.fits(passed) or passed.out.strip():
            return None
        plan.update(sig=sig, check=check, repo=repo, created=created, passed=passed)
    else:
        repo = plan["repo"]
        edited = repo.replace(plan["check"], plan["wrong"], t.value_repr, context=1)
        (sh.scratch / plan["check"]).write_text("\n".join(repo.files[plan["check"]]) + "\n")
        passed = sh.scratch_cmd(["python", "-m", "doctest", plan["check"]])
        if not sh.fits(passed) or passed.out.strip():
            return None
        plan.update(edited=edited, passed=passed)
    return plan


def _plan_constant(sh: _Shell, t: Target) -> dict | None:
    locate = sh.tree_cmd(["grep", "-rn", f"^{t.name} =", "--include=*.py", "."])
    if not sh.fits(locate) or f"./{t.rel}:{t.line}:" not in locate.out:
        return None
    read = sh.tree_cmd(["sed", "-n", f"{t.line},{t.end + 1}p", t.rel], reads=t.rel)
    line = next((ln for ln in read.out.split("\n") if ln.startswith(f"{t.name} =")), "")
    if not sh.fits(read) or not line:
        return None
    value = sh.scratch_cmd(["python", "-c", f"import {t.module}; print(repr({t.module}.{t.name}))"])
    if not sh.fits(value) or not value.out.strip() or "\n" in value.out.strip():
        return None
    return {"locate": locate, "read": read, "assign": line.strip(), "value": value}


_FILLERS = ("ls", "wc", "count_defs", "imports", "todo", "users", "git_log")


def _tracked(sh: _Shell, rel: str) -> bool:
    """Whether ``rel`` is a file a git repository tracks (then ``git log`` has history to show)."""
    ran = sh.tree_cmd(["git", "ls-files", "--", rel])
    sh.log.pop()  # a check of the planner, not a call of the agent
    return ran.code == 0 and ran.out.strip() != ""


def _filler(sh: _Shell, kind: str, t: Target) -> tuple[Ran, str, str] | None:
    """One filler call: (ran, what the agent says first, what it says after)."""
    d = str(Path(t.rel).parent)
    if kind == "ls":
        ran = sh.tree_cmd(["ls", "-C", d] if d != "." else ["ls", "-C"])
        return ran, "Looking at the package layout.", f"{len(ran.out.split())} entries in {d if d != '.' else 'the package'}."
    if kind == "wc":
        ran = sh.tree_cmd(["wc", "-l", t.rel], reads=t.rel)
        return ran, f"How big is {t.rel}?", f"{t.rel} has {ran.out.split()[0] if ran.out.split() else '?'} lines."
    if kind == "count_defs":
        ran = sh.tree_cmd(["grep", "-c", "^def ", t.rel], reads=t.rel)
        return ran, "Counting its top-level functions.", f"{ran.out.strip() or 'No'} top-level functions."
    if kind == "imports":
        ran = sh.tree_cmd(["grep", "-n", "-m", "4", "-E", "^(import|from) ", t.rel], reads=t.rel)
        return ran, f"What does {t.rel} import?", "Only a few imports."
    if kind == "todo":
        ran = sh.tree_cmd(["grep", "-n", "-m", "3", "-E", "TODO|XXX|FIXME", t.rel], reads=t.rel)
        after = "No open notes there." if ran.code == 1 else "A few notes, none about this."
        return ran, "Any open notes in that file?", after
    if kind == "git_log":
        if not _tracked(sh, t.rel):
            return None
        ran = sh.tree_cmd(["git", "log", "--oneline", "-n", "4", "--", t.rel], reads=t.rel)
        return ran, f"Recent history of {t.rel}.", f"{len(ran.out.splitlines())} recent commit(s) touch it."
    ran = sh.tree_cmd(["grep", "-rl", "-m", "1", t.name, "--include=*.py", "."])
    return ran, f"Which files mention {t.name}?", f"{len(ran.out.split())} file(s) mention it."


def _pick(tree: Tree, tasks: list[str], rng: random.Random, sh: _Shell) -> tuple[str, Target, dict]:
    """The first task (in seeded order) with a fitting candidate, that candidate and its plan."""
    problems = []
    for task in rng.sample(tasks, len(tasks)):
        try:
            return (task, *_pick_one(tree, task, rng, sh))
        except NoCandidate as exc:
            problems.append(str(exc))
    raise NoCandidate("; ".join(problems))


def _pick_one(tree: Tree, task: str, rng: random.Random, sh: _Shell) -> tuple[Target, dict]:
    files = tree_files(tree)
    want = "constant" if task == "constant_of" else "function"
    tried = 0
    for rel in rng.sample(files, len(files)):
        cands = [t for t in targets(tree, rel) if t.kind == want]
        for t in rng.sample(cands, len(cands)):
            tried += 1
            if tried > sh.cfg.max_candidates:
                raise NoCandidate(f"{tree.name}: no {task} candidate fit in {sh.cfg.max_candidates} tries")
            plan = _plan_constant(sh, t) if want == "constant" else _plan_function(sh, t, task, rng)
            if plan is not None:
                return t, plan
    raise NoCandidate(f"{tree.name}: no {task} candidate in {len(files)} files")


def session_for(tree: Tree, seed: int, cfg, scratch_root: Path | None = None) -> Session:
    """One session over ``tree`` for ``seed``: the same tree content, settings and seed give
    byte-identical sessions."""
    rng = random.Random(f"real_tools:{tree.name}:{seed}")
    scratch = Path(tempfile.mkdtemp(prefix="dtw-realtool-", dir=scratch_root))
    try:
        sh = _Shell(tree, scratch, cfg)
        task, t, plan = _pick(tree, list(cfg.tasks), rng, sh)
        sh.log.clear()  # the candidates passed over are not part of the session
        return _write(tree, seed, cfg, task, t, plan, sh, rng)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _write(tree: Tree, seed: int, cfg, task: str, t: Target, plan: dict, sh: _Shell,
           rng: random.Random) -> Session:
    b = SessionBuilder(tree.family, seed)
    b.system(SYSTEM)
    b.step()
    where = f"The {tree.module} sources are in {tree.root}; scratch files go in {SCRATCH}."
    if task == "default_of":
        rule = "Do not edit the library; write the check under /tmp/check."
        u = b.user(f"{where}\nWhere is `{t.name}` defined, and what default does its `{t.param}` parameter take? "
                   f"Confirm it with a doctest.\n- {rule}")
    elif task == "failing_check":
        rule = "Fix the check, not the library."
        u = b.user(f"{where}\n`python -m doctest {plan['check']}` fails in {SCRATCH}. Find out why.\n- {rule}")
    else:
        rule = "Report the value exactly as the module has it."
        u = b.user(f"{where}\nWhat is `{t.name}` in {tree.module}, and where is it set?\n- {rule}")
    f_rule = b.fact(rule, "user_intent", u)
    st: dict[str, str] = {}

    def locate() -> None:
        r = b.bash(plan["locate"].command, plan["locate"].tool_output(), f"Searching for {t.name}.")
        st["loc"] = b.fact(f"{t.rel}:{t.line}", "paths_with_lines", r)
        b.say(f"{t.name} is set at {t.rel}:{t.line}." if t.kind == "constant"
              else f"{t.name} is defined at {t.rel}:{t.line}.")
        b.offer_probe(st["loc"], f"Where is {t.name} defined?")

    def read() -> None:
        b.use(st["loc"])
        r = b.bash(plan["read"].command, plan["read"].tool_output(), f"Reading {t.rel} from line {t.line}.")
        if t.kind == "constant":
            st["val"] = b.fact(plan["assign"], "exact_values", r)
            b.say(f"The source says `{plan['assign']}`.")
        else:
            st["val"] = b.fact(plan["default_text"], "exact_values", r)
            b.say(f"The default is `{plan['default_text']}`.")
        b.offer_probe(st["val"], f"What does the source say for {t.param or t.name}?")

    def signature() -> None:
        r = b.bash(plan["sig"].command, plan["sig"].tool_output(), "Checking the signature at runtime.")
        st["sig"] = b.fact(plan["sig"].out.strip(), "signatures", r)
        b.say("The runtime signature agrees with the source.")

    def write_check() -> None:
        b.use(st["val"], st["sig"], f_rule)
        text = "\n".join(plan["repo"].files[plan["check"]]) + "\n"
        b.editor({"command": "create", "path": f"{SCRATCH}/{plan['check']}", "file_text": text},
                 plan["created"], "Writing the doctest.")

    def run_check() -> None:
        b.use(st.get("val"), st.get("err"))
        b.bash(plan["passed"].command, plan["passed"].tool_output(), "Running the check.")
        b.say("No output: the doctest passes.")

    def run_failing() -> None:
        r = b.bash(plan["failed"].command, plan["failed"].tool_output(), "Running the failing check.")
        # The failure's own line (the check file and its line), not doctest's closing banner
        # "***Test Failed*** 1 failures.": that banner is the same in every session, so a
        # label or probe answer keeping it could be recalled instead of read.
        where = next(ln for ln in plan["failed"].out.splitlines() if ln.startswith("File "))
        st["err"] = b.fact(where, "error_strings", r)
        b.say(f"It expects {plan['wrong']} but gets {t.value_repr}.")
        b.offer_probe(st["err"], "Where did the first doctest run fail?")

    def cat_check() -> None:
        b.bash(plan["cat"].command, plan["cat"].tool_output(), "Reading the check.")
        b.say(f"It reads the default of `{t.param}` in {t.module}.{t.name}.")

    def edit_check() -> None:
        b.use(st["err"], st["val"], f_rule)
        b.editor({"command": "str_replace", "path": f"{SCRATCH}/{plan['check']}", "old_str": plan["wrong"],
                  "new_str": t.value_repr}, plan["edited"], "The library is right; fixing the check.")

    def print_value() -> None:
        b.use(st["val"])
        r = b.bash(plan["value"].command, plan["value"].tool_output(), "Checking the value at runtime.")
        st["rt"] = b.fact(plan["value"].out.strip(), "exact_values", r)
        b.say("The runtime value matches the source.")

    core = {"default_of": [locate, read, signature, write_check, run_check],
            "failing_check": [run_failing, cat_check, locate, read, edit_check, run_check],
            "constant_of": [locate, read, print_value]}[task]
    n_calls = rng.randint(max(cfg.calls[0], len(core)), max(cfg.calls[1], len(core)))
    order = list(core)
    for kind in rng.sample(_FILLERS, min(len(_FILLERS), n_calls - len(core))):
        filled = _filler(sh, kind, t)
        if filled is None:
            continue
        if not (filled[0].timed_out or sh.fits(filled[0], filled[0].code)):
            sh.log.pop()  # too long: choose small outputs, never cut one
            continue
        order.insert(rng.randint(1, len(order)), _filler_step(b, filled))
    size = SessionSize(steps=max(3, len(order) + 1), probes=cfg.probes)
    b.probes_due(size, 0)
    for n, step_fn in enumerate(order, start=1):
        b.step()
        step_fn()
        b.probes_due(size, n)
    b.step()
    b.use(st["loc"], st["val"], st.get("err"), st.get("rt"))
    done = {"default_of": f"{t.name} is defined at {t.rel}:{t.line}; its default is `{b.text_of(st['val'])}`; "
                          f"the doctest in {SCRATCH}/{plan.get('check')} passes.",
            "failing_check": f"The check expected {plan.get('wrong')}, but {t.name} at {t.rel}:{t.line} has "
                             f"`{b.text_of(st['val'])}`; fixed the check and it passes.",
            "constant_of": f"{t.name} is set at {t.rel}:{t.line}: `{b.text_of(st['val'])}`."}[task]
    b.finish(done)
    key = json.dumps([tree.name, seed, list(cfg.calls), cfg.max_output_lines, cfg.max_output_chars, cfg.probes])
    sid = f"rt-{tree.name.replace('/', '-')}-{seed}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"
    meta = {"generator": "data_gen.sources.real_tools", "task": task,
            "tree": {"name": tree.name, "root": str(tree.root), "dist": tree.dist, "version": tree.version},
            "target": {"file": t.rel, "name": t.name, "line": t.line, "param": t.param},
            "files_read": dict(sorted(sh.read.items())), "commands": sh.log}
    session = b.build(sid, meta)
    session.tools = json.loads(json.dumps(POCKET_TOOLS))
    session.source = "real_tools"
    session.license = "PSF-2.0 (Python standard library)" if tree.dist == "python" else f"{tree.dist} {tree.version} (its own licence)"
    return session.validate()


def _filler_step(b: SessionBuilder, filled: tuple[Ran, str, str]):
    ran, before, after = filled

    def step() -> None:
        b.bash(ran.command, ran.tool_output(), before)
        b.say("That timed out; moving on." if ran.timed_out else after)

    return step


# --------------------------------------------------------------------------- the source


def real_tool_sessions(cfg, rejects: Counter) -> Iterator[Session]:
    """``sessions_per_tree`` sessions over every train and held-out tree; a tree missing on
    this machine or a session with no fitting candidate is counted, never raised."""
    for name in [*cfg.trees, *cfg.heldout_trees]:
        try:
            tree = resolve_tree(name)
        except ValueError:
            rejects["real_tools:tree_missing"] += 1
            continue
        for k in range(cfg.sessions_per_tree):
            try:
                yield session_for(tree, cfg.seed * 1000 + k, cfg)
            except Exception as exc:  # one odd file never stops a build: counted by kind
                rejects[f"real_tools:{type(exc).__name__}"] += 1
