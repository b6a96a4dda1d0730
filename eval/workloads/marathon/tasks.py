"""The Session Marathon: 18 serial tasks over an in-memory TypeScript repository, 6 passes.

One marathon is ONE long ``doctrine.session.Session`` (later passes must remember what
earlier passes did, so the passes cannot be separate sessions); ``marathon_sessions``
returns it in a one-element list so it drops into the scripted driver's case list.

Every task action is executed on :class:`~eval.workloads.marathon.fake_ts_repo.TsRepo`, so file views,
``tsc`` errors, jest failures with stack traces and build logs are what that repository
really answers. Each pass holds 18 tasks, their order drawn from the seed among the
orders that respect their dependencies (create before test before rename, ...):

- 12 work tasks: ``create`` a module (with a seeded bug), ``test`` it (jest fails with a
  stack trace, fix, rerun), ``rename`` a function and a type (``sed -i``, ``tsc``),
  ``retune`` the session TTL, ``refactor`` (move the previous module's helper into
  ``src/utils``; ``tsc`` then reports TS2305 in a test file, fixed), ``suite`` (the whole
  verbose jest run), ``build`` (a long build log with one warning), ``explore`` (grep),
  ``extend`` (add a third function and its test), ``docs`` (README), ``typefix`` (a
  teammate's TS2322) and ``version`` (bump package.json);
- 6 probes answered from memory, 14 graded items per pass (84 over 6 passes): the failed
  test (3 items), the names before the rename (2), the TTL before and after (2), three
  current signatures (3), and two deep-recall probes of the session's first pass: the
  first failing test and what it received (2), the TTL at session start and the first
  renamed function (2).

Recorded probe answers are a bare acknowledgement, never the facts: the answer of one
probe must not leak the next probe's answer through the conversation.

``variant="phase"`` adds a 6-step migration whose plan is stated once (pass 1); one step
per pass is then requested with the single word "continue". Each migration step is a
probe step (the model says what it does next; graded against the plan: execution
fidelity, an execution error when an item is missing) followed by its scripted
execution; a final probe asks for the whole plan.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from doctrine.session import Fact, Session, Step
from eval.workloads.marathon import content as mc
from eval.workloads.marathon.fake_ts_repo import TestCheck, TsRepo

__all__ = ["SIZES", "MarathonSize", "marathon_session", "marathon_sessions", "marathon_with_repos", "phase_checks",
           "run_tool"]

FAMILY = "session_marathon"
WORK = ("create", "test", "rename", "retune", "refactor", "suite", "build", "explore", "extend", "docs",
        "typefix", "version")
PROBES = ("p_failure", "p_rename", "p_ttl", "p_signatures", "deep_first_failure", "deep_origins")
TASKS = WORK + PROBES  # 18 per pass
# Task -> tasks of the same pass it must follow.
DEPS = {"test": ("create",), "rename": ("test",), "extend": ("rename",), "explore": ("refactor",),
        "p_failure": ("test",), "p_rename": ("rename",), "p_ttl": ("retune",),
        "p_signatures": ("extend", "refactor"), "deep_first_failure": ("test",), "deep_origins": ("rename",)}


@dataclass(frozen=True)
class MarathonSize:
    """Knobs that scale the session: ``tool_output_lines`` sizes the big report module
    (file views), the build log and README; ``extra_tests`` adds filler tests per module
    (the verbose jest listing)."""

    tool_output_lines: int = 40
    extra_tests: int = 4


# Rough totals (characters / 4) over 6 passes: demo ~36K (1 pass ~6K), small ~43K, full ~64K, large ~120K.
SIZES = {"demo": MarathonSize(4, 0), "small": MarathonSize(48, 4), "full": MarathonSize(200, 12),
         "large": MarathonSize(640, 24)}


@dataclass
class _Item:
    fact: str  # fact id
    accept: list[str]  # strings any of which, found with word boundaries, makes the item correct


@dataclass
class _Builder:
    repo: TsRepo
    messages: list[dict[str, Any]] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)
    calls: int = 0
    snapshots: dict[int, TsRepo] = field(default_factory=dict)  # step -> repo before its first action
    after: dict[int, TsRepo] = field(default_factory=dict)  # step -> repo after its last action

    def step(self, kind: str = "task") -> int:
        start = len(self.messages)
        if self.steps:
            self.close()
        self.steps.append(Step(index=len(self.steps), start=start, end=start + 1, kind=kind))
        return self.steps[-1].index

    def close(self) -> None:
        self.steps[-1].end = len(self.messages)
        if self.steps[-1].index in self.snapshots:
            self.after[self.steps[-1].index] = self.repo.copy()

    def user(self, text: str) -> int:
        self.messages.append({"role": "user", "content": text})
        return len(self.messages) - 1

    def say(self, text: str) -> int:
        self.messages.append({"role": "assistant", "content": text})
        return len(self.messages) - 1

    def act(self, text: str, tool: str, args: dict[str, Any]) -> tuple[int, int]:
        """One assistant call, executed on the repository; returns (call msg, result msg)."""
        self.calls += 1
        self.snapshots.setdefault(self.steps[-1].index, self.repo.copy())
        cid = f"call_{self.calls:04d}"
        self.messages.append({"role": "assistant", "content": text, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": tool, "arguments": json.dumps(args)}}]})
        out = run_tool(self.repo, tool, args)
        self.messages.append({"role": "tool", "tool_call_id": cid, "name": tool, "content": out})
        return len(self.messages) - 2, len(self.messages) - 1

    def fact(self, text: str, kind: str, msg: int) -> str:
        fid = f"f{len(self.facts)}"
        self.facts.append(Fact(fid, text, kind, msg))
        return fid

    def use(self, fid: str | None, step: int) -> None:
        if fid is None:
            return
        f = next(f for f in self.facts if f.id == fid)
        if step not in f.used_at:
            f.used_at.append(step)
        s = self.steps[step]
        if fid not in s.uses:
            s.uses.append(fid)


def run_tool(repo: TsRepo, tool: str, args: dict[str, Any]) -> str:
    """Answer one task-tool call on ``repo`` in the OpenHands output shapes."""
    if tool == "str_replace_editor":
        return repo.editor(args)
    if tool == "execute_bash":
        out, code = repo.bash(str(args.get("command") or ""))
        return f"{out}\n[The command completed with exit code {code}.]".lstrip("\n")
    if tool == "finish":
        return str(args.get("message") or "")
    return f"ERROR: unknown tool {tool!r}"


def _order(rng: random.Random, pass_no: int) -> list[str]:
    """A seeded order of the 18 tasks that respects ``DEPS`` (a random topological sort)."""
    done: list[str] = []
    left = list(TASKS)
    while left:
        ready = [t for t in left if all(d in done for d in DEPS.get(t, ()))]
        pick = rng.choice(ready)
        done.append(pick)
        left.remove(pick)
    return done


class _Marathon:
    def __init__(self, seed: int, passes: int, variant: str, size: MarathonSize):
        self.rng = random.Random(f"marathon:{seed}")
        self.seed, self.passes, self.variant, self.size = seed, passes, variant, size
        self.project = self.rng.choice(mc.PROJECTS)
        self.root = f"/workspace/{self.project}"
        self.templates = self.rng.sample(mc.TEMPLATES, len(mc.TEMPLATES))
        ttls = list(mc.TTL_VALUES)
        self.rng.shuffle(ttls)
        self.ttls = ttls  # ttls[0] at the start, ttls[p] after pass p's retune
        self.repo = TsRepo(self.root)
        for rel, text in mc.base_files(self.project, ttls[0], size.tool_output_lines).items():
            self.repo.write(rel, text)
        self.b = _Builder(self.repo)
        self.items: dict[int, list[_Item]] = {}  # probe step -> graded items
        self.probe_meta: dict[int, dict[str, Any]] = {}
        self.phase: dict[int, dict[str, Any]] = {}
        self.st: dict[str, Any] = {"ttl_fact": None, "version": (1, 4, 0), "version_fact": None}
        self.first: dict[str, Any] = {}
        self.task_log: list[dict[str, Any]] = []  # (pass, task, first step) in session order
        self.ns = self.rng.choice(mc.NAMESPACES)
        self.store_test = self.rng.choice(mc.STORE_TESTS)
        self.changelog = f"Session storage moved to KeyValueStore (namespace {self.ns})."

    # ------------------------------------------------------------------ build

    def build(self) -> Session:
        b = self.b
        b.step()
        b.messages.append({"role": "system", "content": mc.SYSTEM.format(root=self.root)})
        b.user(f"We will work on {self.project} for a long session of small tasks. Get familiar with the "
               "repository first; later I will ask you things from memory, so keep track of what happens.")
        b.act("Looking at the layout.", "str_replace_editor", {"command": "view", "path": self.root})
        _, r = b.act("", "str_replace_editor", {"command": "view", "path": self.repo.abs("src/config.ts")})
        self.first["ttl"] = b.fact(f"SESSION_TTL_SECONDS = {self.ttls[0]}", "exact_values", r)
        self.st["ttl_fact"] = self.first["ttl"]
        _, r = b.act("", "str_replace_editor", {"command": "view", "path": self.repo.abs("package.json")})
        self.st["version_fact"] = b.fact('"version": "1.4.0"', "exact_values", r)
        b.say(f"{self.project}: config in src/config.ts, sessions in src/session.ts on top of src/legacy/store.ts, "
              "text helpers in src/text.ts and a large src/report.ts; tests run with jest.")
        b.close()
        migration = self.variant == "phase"
        mig_at = [self.rng.randrange(0, len(TASKS) + 1) for _ in range(self.passes)]
        for p in range(1, self.passes + 1):
            self.tpl = self.templates[(p - 1) % len(self.templates)]
            self.prev = self.templates[(p - 2) % len(self.templates)] if p > 1 else None
            self.p = p
            self.pst: dict[str, Any] = {}
            order = _order(self.rng, p)
            for k, task in enumerate(order):
                if migration and k == mig_at[p - 1] and p <= 6:
                    self.migration_step(p)
                self.task_log.append({"pass": p, "task": task, "step": len(b.steps)})
                getattr(self, "t_" + task)()
            if migration and mig_at[p - 1] == len(order) and p <= 6:
                self.migration_step(p)
        if migration:
            self.plan_probe()
        b.close()
        meta = {"variant": self.variant, "passes": self.passes, "project": self.project,
                "size": {"tool_output_lines": self.size.tool_output_lines, "extra_tests": self.size.extra_tests},
                "probe_items": {str(s): [{"fact": i.fact, "accept": i.accept} for i in items]
                                for s, items in self.items.items()},
                "probes": {str(s): m for s, m in self.probe_meta.items()},
                "phase_steps": {str(s): m for s, m in self.phase.items()},
                "task_count": self.task_count, "tasks": self.task_log}
        sid = f"marathon-{self.variant}-s{self.seed}-p{self.passes}"
        s = Session(sid, FAMILY, self.seed, b.messages, b.steps, b.facts, tools=list(mc.TOOLS),
                    source="synthetic", license="project", meta=meta)
        return s.validate()

    task_count = 0

    def _task(self, prompt: str) -> int:
        self.task_count += 1
        s = self.b.step()
        self.b.user(prompt)
        return s

    def _probe(self, name: str, question: str, items: list[tuple[str | None, list[str]]], deep: bool = False) -> None:
        self.task_count += 1
        s = self.b.step("probe")
        self.b.user(question + " Answer from memory; do not run anything.")
        self.b.say("Answered from memory.")
        got = [_Item(fid, acc) for fid, acc in items if fid is not None]
        for it in got:
            self.b.use(it.fact, s)
        self.items[s] = got
        self.probe_meta[s] = {"probe": name, "pass": self.p, "deep": deep, "items": len(got)}

    def _ed(self, text: str, **args: Any) -> tuple[int, int]:
        if "path" in args and not args["path"].startswith("/"):
            args["path"] = self.repo.abs(args["path"])
        return self.b.act(text, "str_replace_editor", args)

    def _sh(self, text: str, command: str) -> tuple[int, int]:
        return self.b.act(text, "execute_bash", {"command": f"cd {self.root} && {command}"})

    # ------------------------------------------------------------------ work tasks

    def t_create(self) -> None:
        t, b = self.tpl, self.b
        s = self._task(f"Add a module src/{t.stem}.ts with {t.spec}. Export it from src/index.ts.")
        self._ed("Checking the index first.", command="view", path="src/index.ts")
        c, _ = self._ed("Creating the module.", command="create", path=f"src/{t.stem}.ts", file_text=mc.module_text(t))
        self.pst["sig1"] = b.fact(f"export function {t.f1}(", "signatures", c)
        index = self.repo.files["src/index.ts"]
        self._ed("", command="str_replace", path="src/index.ts", old_str=index.rstrip("\n").split("\n")[-1],
                 new_str=index.rstrip("\n").split("\n")[-1] + f"\nexport * from './{t.stem}';")
        self._sh("Type-checking.", "npx tsc --noEmit")
        b.say(f"Added src/{t.stem}.ts ({t.f1}, {t.f2}) and exported it from src/index.ts; tsc is clean.")
        del s

    def t_test(self) -> None:
        t, b = self.tpl, self.b
        s = self._task(f"Write jest tests for src/{t.stem}.ts in tests/{t.stem}.test.ts and make them pass.")
        b.use(self.pst.get("sig1"), s)
        tf = f"tests/{t.stem}.test.ts"
        self.repo.checks[f"{tf}::{t.fail_test}"] = TestCheck(f"src/{t.stem}.ts", [t.fixed], [t.buggy], t.expected,
                                                             t.received)
        self._ed("Writing the tests.", command="create", path=tf, file_text=mc.test_text(t, self.size.extra_tests))
        _, r = self._sh("Running them.", f"npx jest {tf}")
        self.pst["fail_name"] = b.fact(t.fail_test, "error_strings", r)
        self.pst["expected"] = b.fact(f"Expected: {t.expected}", "exact_values", r)
        self.pst["received"] = b.fact(f"Received: {t.received}", "exact_values", r)
        if "first_fail" not in self.first:
            self.first.update(first_fail=self.pst["fail_name"], first_received=self.pst["received"],
                              received_value=t.received)
        self._ed("The implementation is wrong; reading it.", command="view", path=f"src/{t.stem}.ts")
        self._ed("Fixing it.", command="str_replace", path=f"src/{t.stem}.ts", old_str=t.buggy, new_str=t.fixed)
        self._sh("Rerunning.", f"npx jest {tf}")
        b.say(f"One test failed on the first run ({t.fail_test}); fixed the implementation and the suite passes now.")

    def t_rename(self) -> None:
        t, b = self.tpl, self.b
        s = self._task(f"Rename the function `{t.f1}` to `{t.f1_new}` and the type `{t.type_name}` to "
                       f"`{t.type_new}` everywhere.")
        u = b.steps[s].start
        self.pst["old_f1"] = b.fact(f"`{t.f1}` to `{t.f1_new}`", "decisions", u)
        self.pst["old_t"] = b.fact(f"`{t.type_name}` to `{t.type_new}`", "decisions", u)
        if "first_rename" not in self.first:
            self.first["first_rename"], self.first["first_rename_name"] = self.pst["old_f1"], t.f1
        self._sh("Finding every use.", f"grep -rn '{t.f1}\\|{t.type_name}' src tests")
        files = f"src/{t.stem}.ts tests/{t.stem}.test.ts"
        self._sh("Renaming with sed.", f"sed -i 's/\\b{t.f1}\\b/{t.f1_new}/g' {files}")
        self._sh("", f"sed -i 's/\\b{t.type_name}\\b/{t.type_new}/g' {files}")
        self._sh("Checking types and tests.", f"npx tsc --noEmit && npx jest tests/{t.stem}.test.ts")
        b.say(f"Renamed {t.f1} -> {t.f1_new} and {t.type_name} -> {t.type_new}; tsc and the tests pass.")

    def t_retune(self) -> None:
        b, p = self.b, self.p
        old, new = self.ttls[(p - 1) % len(self.ttls)], self.ttls[p % len(self.ttls)]
        s = self._task(f"Product wants sessions to last {new} seconds now. Update SESSION_TTL_SECONDS.")
        b.use(self.st["ttl_fact"], s)
        _, r = self._ed("", command="view", path="src/config.ts")
        self.pst["ttl_old"] = b.fact(f"SESSION_TTL_SECONDS = {old}", "exact_values", r)
        c, _ = self._ed("", command="str_replace", path="src/config.ts",
                        old_str=f"export const SESSION_TTL_SECONDS = {old};",
                        new_str=f"export const SESSION_TTL_SECONDS = {new};")
        self.pst["ttl_new"] = self.st["ttl_fact"] = b.fact(f"SESSION_TTL_SECONDS = {new}", "exact_values", c)
        self.pst["ttl_values"] = (old, new)
        self._sh("", "npx jest tests/session.test.ts")
        b.say(f"SESSION_TTL_SECONDS is now {new} (was {old}); the session tests pass.")

    def t_refactor(self) -> None:
        b = self.b
        # The oldest helper still inside its module: the base one, then each earlier pass's.
        stem, helper, block = self.tpl.stem, self.tpl.helper, None
        for cand_stem, cand_helper in [mc.BASE_HELPER[:2]] + [(t.stem, t.helper) for t in self.templates[:self.p - 1]]:
            block = _block(self.repo.files.get(f"src/{cand_stem}.ts", ""), cand_helper)
            if block:
                stem, helper = cand_stem, cand_helper
                break
        if block is None:  # nothing left to move (more passes than modules): a no-op check instead
            self._task("Check that every helper lives in src/utils.")
            self._sh("", "ls src/utils")
            b.say("All helpers are in src/utils already.")
            return
        s = self._task(f"Move `{helper}` out of src/{stem}.ts into its own file src/utils/{helper}.ts and "
                       "import it back where it is used.")
        del s
        self._ed("", command="view", path=f"src/{stem}.ts")
        c, _ = self._ed("Creating the utils file.", command="create", path=f"src/utils/{helper}.ts", file_text=block)
        self.pst["helper_sig"] = b.fact(block.split(" {")[0], "signatures", c)
        self.pst["helper"] = helper
        self._ed("Removing it from the module.", command="str_replace", path=f"src/{stem}.ts", old_str=block + "\n",
                 new_str="")
        self._ed("", command="insert", path=f"src/{stem}.ts", insert_line=0,
                 new_str=f"import {{ {helper} }} from './utils/{helper}';\n")
        _, r = self._sh("Type-checking.", "npx tsc --noEmit")
        errs = [ln for ln in self.repo.diagnostics() if "TS2305" in ln]
        if errs:
            b.fact(errs[0].split(": ", 1)[1], "error_strings", r)
            tf = errs[0].split("(")[0]
            line = next(ln for ln in self.repo.files[tf].split("\n") if ln.startswith("import {") and helper in ln)
            names = [n.strip() for n in line[len("import {"):line.index("}")].split(",") if n.strip() != helper]
            fixed = f"import {{ {', '.join(names)} }} from '../src/{stem}';\nimport {{ {helper} }} from '../src/utils/{helper}';"
            self._ed(f"The test file still imports {helper} from the module.", command="str_replace", path=tf,
                     old_str=line, new_str=fixed)
            self._sh("", "npx tsc --noEmit && npx jest")
        b.say(f"{helper} now lives in src/utils/{helper}.ts; imports updated, tsc and jest are green.")

    def t_suite(self) -> None:
        self._task("Run the whole test suite and tell me the totals.")
        _, r = self._sh("", "npx jest --verbose")
        last = [ln for ln in self.b.messages[r]["content"].split("\n") if ln.startswith("Tests:")]
        self.b.say(f"Full run: {last[0][len('Tests:'):].strip() if last else 'no totals'}.")

    def t_build(self) -> None:
        t = self.tpl
        warn = f"[build] warning: src/{t.stem}.ts: '{t.f2}' is exported but never imported inside the package"
        self._task("Run the production build and check it for warnings.")
        self.repo.files[".build-warnings"] = warn  # set inside the task: the step's snapshots see it
        self._sh("", "npm run build")
        self.b.say(f"The build succeeds with one warning: {t.f2} in src/{t.stem}.ts is never imported inside the package.")

    def t_explore(self) -> None:
        helper = self.pst.get("helper", "normaliseWhitespace")
        self._task(f"Where is `{helper}` used now?")
        _, r = self._sh("", f"grep -rn '{helper}' src tests")
        n = self.b.messages[r]["content"].count("\n")
        self.b.say(f"{helper} appears in {n} places: its utils file, the importing module and the tests.")

    def t_extend(self) -> None:
        t, b = self.tpl, self.b
        s = self._task(f"Add `{t.f3}` to src/{t.stem}.ts with a test.")
        b.use(self.pst.get("old_f1"), s)
        rel = f"src/{t.stem}.ts"
        _, r = self._ed("", command="view", path=rel)
        sig2 = next(ln for ln in self.repo.files[rel].split("\n") if ln.startswith(f"export function {t.f2}("))
        self.pst["sig2"] = b.fact(sig2[:-2] if sig2.endswith(" {") else sig2, "signatures", r)
        code = mc.fill(t.f3_code, t.f1_new, t.type_new)
        n = self.repo.files[rel].count("\n")
        c, _ = self._ed("", command="insert", path=rel, insert_line=n, new_str="\n" + code.rstrip("\n"))
        self.pst["sig3"] = b.fact(code.split(" {")[0], "signatures", c)
        tf = f"tests/{t.stem}.test.ts"
        imp = self.repo.files[tf].split("\n")[0]
        self._ed("", command="str_replace", path=tf, old_str=imp, new_str=imp.replace(" }", f", {t.f3} }}", 1))
        lines = self.repo.files[tf].rstrip("\n").split("\n")
        self._ed("", command="insert", path=tf, insert_line=len(lines) - 1,
                 new_str=f"  describe('{t.f3}', () => {{\n" + t.f3_test.rstrip("\n") + "\n  });")
        self._sh("", f"npx jest {tf}")
        b.say(f"Added {t.f3} and its test; the {t.stem} suite passes.")

    def t_docs(self) -> None:
        t = self.tpl
        self._task(f"Document the {t.stem} module in README.md.")
        self._ed("", command="view", path="README.md")
        lines = self.repo.files["README.md"].rstrip("\n").split("\n")
        filler = [f"- `{t.stem}` note {k + 1}: behaviour covered by tests/{t.stem}.test.ts." for k in
                  range(self.size.tool_output_lines // 8)]
        self._ed("", command="insert", path="README.md", insert_line=len(lines),
                 new_str="\n".join(["", f"### {t.stem}", "", f"Utilities for {t.stem}; see src/{t.stem}.ts."] + filler))
        self.b.say("README.md has a section on the module now.")

    def t_typefix(self) -> None:
        b, k = self.b, (self.p - 1) % 6 + 1
        text = self.repo.files["src/report.ts"]
        good = next(ln for ln in text.split("\n") if ln.startswith(f"export const COLUMN_WIDTH_{k}: number = "))
        value = good.rsplit("= ", 1)[1].rstrip(";")
        bad = good.replace(f"= {value};", f"= '{value}';")
        self._task("A teammate just pushed a change to src/report.ts and `npx tsc --noEmit` fails now. Fix it.")
        self.repo.files["src/report.ts"] = text.replace(good, bad)  # the teammate's change, inside the task
        _, r = self._sh("", "npx tsc --noEmit")
        err = next((ln for ln in self.repo.diagnostics() if "TS2322" in ln), None)
        if err:
            b.fact(err.split(": ", 1)[1], "error_strings", r)
        self._ed("", command="view", path="src/report.ts")
        self._ed("The constant became a string.", command="str_replace", path="src/report.ts", old_str=bad, new_str=good)
        self._sh("", "npx tsc --noEmit")
        b.say(f"COLUMN_WIDTH_{k} was assigned a string; restored the number and tsc is clean.")

    def t_version(self) -> None:
        b = self.b
        major, minor, patch = self.st["version"]
        new = (major, minor + 1, 0)
        old_s, new_s = ".".join(map(str, (major, minor, patch))), ".".join(map(str, new))
        s = self._task(f"Bump the package version to {new_s}.")
        b.use(self.st["version_fact"], s)
        self._ed("", command="view", path="package.json")
        c, _ = self._ed("", command="str_replace", path="package.json", old_str=f'"version": "{old_s}"',
                        new_str=f'"version": "{new_s}"')
        self.st["version"], self.st["version_fact"] = new, b.fact(f'"version": "{new_s}"', "exact_values", c)
        b.say(f"package.json is at {new_s}.")

    # ------------------------------------------------------------------ probes

    def t_p_failure(self) -> None:
        t = self.tpl
        self._probe("failure", f"In the first run of tests/{t.stem}.test.ts, which test failed, what value did it "
                               "expect and what did it receive?",
                    [(self.pst.get("fail_name"), [t.fail_test]), (self.pst.get("expected"), _vals(t.expected)),
                     (self.pst.get("received"), _vals(t.received))])

    def t_p_rename(self) -> None:
        t = self.tpl
        self._probe("rename", f"What were `{t.f1_new}` and `{t.type_new}` called before you renamed them?",
                    [(self.pst.get("old_f1"), [t.f1]), (self.pst.get("old_t"), [t.type_name])])

    def t_p_ttl(self) -> None:
        old, new = self.pst["ttl_values"]
        self._probe("ttl", "What was SESSION_TTL_SECONDS before your most recent change to it, and what is it now?",
                    [(self.pst.get("ttl_old"), [str(old)]), (self.pst.get("ttl_new"), [str(new)])])

    def t_p_signatures(self) -> None:
        t, b = self.tpl, self.b
        items = []
        for key in ("sig2", "sig3", "helper_sig"):
            fid = self.pst.get(key)
            if fid:
                text = next(f.text for f in b.facts if f.id == fid)
                items.append((fid, [text, text.replace("export ", "", 1)]))
        helper = self.pst.get("helper", "the helper you moved")
        self._probe("signatures", f"Quote the current signature lines of `{t.f2}`, `{t.f3}` and `{helper}`.", items)

    def t_deep_first_failure(self) -> None:
        self._probe("deep_first_failure", "Think back to the very first test run of this session that failed: "
                                          "which test failed, and what value did it receive?",
                    [(self.first.get("first_fail"), [next(f.text for f in self.b.facts if f.id == self.first["first_fail"])]),
                     (self.first.get("first_received"), _vals(self.first["received_value"]))], deep=True)

    def t_deep_origins(self) -> None:
        self._probe("deep_origins", "What was SESSION_TTL_SECONDS at the very start of the session, and what was "
                                    "the first function you renamed originally called?",
                    [(self.first["ttl"], [str(self.ttls[0])]),
                     (self.first.get("first_rename"), [self.first.get("first_rename_name", "")])], deep=True)

    # ------------------------------------------------------------------ the phase variant

    def _plan(self) -> list[tuple[str, list[str]]]:
        ns, test = self.ns, self.store_test
        return [
            ("Create `src/store/kv.ts` exporting an interface `KeyValueStore` (`read(key)`, `write(key, value)`) "
             "and a class `MemoryStore` that implements it.", ["src/store/kv.ts", "MemoryStore"]),
            ("Switch `src/session.ts` to `MemoryStore`, imported from './store/kv', calling `read`/`write` instead "
             "of `get`/`put`.", ["src/session.ts", "'./store/kv'"]),
            (f"Add `export const STORE_NAMESPACE = '{ns}';` to `src/config.ts` and prefix every key in "
             "`MemoryStore` with it.", ["STORE_NAMESPACE", f"'{ns}'"]),
            (f"Add `tests/store.test.ts` with a test named '{test}' for `MemoryStore`.", ["tests/store.test.ts", test]),
            ("Replace the body of `src/legacy/store.ts` with the shim `export { MemoryStore as LegacyStore } from "
             "'../store/kv';`.", ["src/legacy/store.ts", "MemoryStore as LegacyStore"]),
            (f"Add the line `- {self.changelog}` under `## Unreleased` in CHANGELOG.md.", ["CHANGELOG.md", self.changelog]),
        ]

    def migration_step(self, p: int) -> None:
        b, plan = self.b, self._plan()
        k = p  # step k of the plan in pass k
        self.task_count += 1
        s = b.step("probe")
        if k == 1:
            text = ("We are migrating session storage off `LegacyStore`. This is the plan; I will not repeat it:\n"
                    + "\n".join(f"{i + 1}. {step}" for i, (step, _) in enumerate(plan))
                    + "\nDo step 1 now. Each time I say \"continue\", do the next step of the plan.")
            u = b.user(text)
            self.plan_facts = [[b.fact(item, "user_intent", u) for item in items] for _, items in plan]
        else:
            b.user("continue")
        b.say(f"Step {k} of the migration plan.")
        for fid in self.plan_facts[k - 1]:
            b.use(fid, s)
        self.items[s] = [_Item(fid, [text]) for fid, text in zip(self.plan_facts[k - 1], plan[k - 1][1], strict=True)]
        self.phase[s] = {"migration_step": k, "pass": p, "items": len(plan[k - 1][1])}
        e = b.step()
        for fid in self.plan_facts[k - 1]:
            b.use(fid, e)
        getattr(self, f"m_{k}")()

    def m_1(self) -> None:
        self._ed("", command="create", path="src/store/kv.ts", file_text=mc.KV_TEXT)
        self._sh("", "npx tsc --noEmit")
        self.b.say("Step 1 done: src/store/kv.ts with KeyValueStore and MemoryStore.")

    def m_2(self) -> None:
        self._ed("", command="view", path="src/session.ts")
        for old, new in (("import { LegacyStore } from './legacy/store';", "import { MemoryStore } from './store/kv';"),
                         ("const store = new LegacyStore();", "const store = new MemoryStore();"),
                         ("store.put(id, payload);", "store.write(id, payload);"),
                         ("return store.get(id);", "return store.read(id);")):
            self._ed("", command="str_replace", path="src/session.ts", old_str=old, new_str=new)
        self._sh("", "npx tsc --noEmit && npx jest tests/session.test.ts")
        self.b.say("Step 2 done: src/session.ts uses MemoryStore.")

    def m_3(self) -> None:
        self._ed("", command="str_replace", path="src/config.ts", old_str="export const MAX_SESSIONS = 250;",
                 new_str=f"export const MAX_SESSIONS = 250;\nexport const STORE_NAMESPACE = '{self.ns}';")
        self._ed("", command="insert", path="src/store/kv.ts", insert_line=0,
                 new_str="import { STORE_NAMESPACE } from '../config';\n")
        self._ed("", command="str_replace", path="src/store/kv.ts", old_str="return this.data.get(key);",
                 new_str="return this.data.get(STORE_NAMESPACE + key);")
        self._ed("", command="str_replace", path="src/store/kv.ts", old_str="this.data.set(key, value);",
                 new_str="this.data.set(STORE_NAMESPACE + key, value);")
        self._sh("", "npx tsc --noEmit")
        self.b.say("Step 3 done: keys are namespaced with STORE_NAMESPACE.")

    def m_4(self) -> None:
        text = (f"import {{ MemoryStore }} from '../src/store/kv';\n\ndescribe('MemoryStore', () => {{\n"
                f"  it('{self.store_test}', () => {{\n    const store = new MemoryStore();\n    store.write('k', 'v');\n"
                "    expect(store.read('k')).toBe('v');\n  });\n});\n")
        self._ed("", command="create", path="tests/store.test.ts", file_text=text)
        self._sh("", "npx jest tests/store.test.ts")
        self.b.say("Step 4 done: tests/store.test.ts passes.")

    def m_5(self) -> None:
        self._ed("", command="view", path="src/legacy/store.ts")
        self._ed("", command="str_replace", path="src/legacy/store.ts",
                 old_str=self.repo.files["src/legacy/store.ts"], new_str=mc.SHIM)
        self._sh("", "npx tsc --noEmit")
        self.b.say("Step 5 done: src/legacy/store.ts is a shim over MemoryStore.")

    def m_6(self) -> None:
        self._ed("", command="view", path="CHANGELOG.md")
        self._ed("", command="str_replace", path="CHANGELOG.md", old_str="## Unreleased\n",
                 new_str=f"## Unreleased\n- {self.changelog}\n")
        self.b.say("Step 6 done: CHANGELOG.md has the entry. The migration is complete.")

    def plan_probe(self) -> None:
        if not getattr(self, "plan_facts", None):
            return
        plan = self._plan()
        self._probe("migration_plan", "List the steps of the storage migration plan you were given, in order.",
                    [(facts[0], [items[0]]) for facts, (_, items) in zip(self.plan_facts, plan, strict=True)], deep=True)


def _block(text: str, name: str) -> str | None:
    """The code of top-level function ``name`` in ``text`` (signature to closing brace)."""
    at = text.find(f"export function {name}(")
    if at < 0:
        return None
    end = text.find("\n}\n", at)
    return text[at:end + 3] if end >= 0 else None


def _vals(v: str) -> list[str]:
    """A value as jest prints it, and without its quotes for strings."""
    return [v, v[1:-1]] if len(v) > 1 and v[0] == v[-1] == '"' else [v]


def phase_checks(repo: TsRepo, ns: str, store_test: str, changelog: str) -> list[bool]:
    """Whether each of the six migration steps is visible in ``repo`` (agentic fidelity)."""
    f = repo.files
    return [
        "export interface KeyValueStore" in f.get("src/store/kv.ts", "") and "class MemoryStore" in f.get("src/store/kv.ts", ""),
        "'./store/kv'" in f.get("src/session.ts", "") and "LegacyStore" not in f.get("src/session.ts", ""),
        f"STORE_NAMESPACE = '{ns}'" in f.get("src/config.ts", "") and "STORE_NAMESPACE + key" in f.get("src/store/kv.ts", ""),
        f"'{store_test}'" in f.get("tests/store.test.ts", ""),
        "MemoryStore as LegacyStore" in f.get("src/legacy/store.ts", ""),
        f"- {changelog}" in f.get("CHANGELOG.md", ""),
    ]


def marathon_session(seed: int = 0, passes: int = 6, variant: str = "repetitive",
                     size: str | MarathonSize = "full") -> Session:
    """The marathon as one validated Session (deterministic in ``seed``/``passes``/``variant``/``size``)."""
    if variant not in ("repetitive", "phase"):
        raise ValueError(f"variant must be 'repetitive' or 'phase', got {variant!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    if not isinstance(passes, int) or not 1 <= passes <= 12:
        raise ValueError(f"passes must be an integer in 1..12, got {passes!r}")
    if isinstance(size, str):
        if size not in SIZES:
            raise ValueError(f"unknown size {size!r}; expected one of {sorted(SIZES)}")
        size = SIZES[size]
    return _Marathon(seed, passes, variant, size).build()


def marathon_with_repos(seed: int = 0, passes: int = 6, variant: str = "repetitive",
                        size: str | MarathonSize = "full") -> tuple[Session, dict[int, TsRepo], dict[int, TsRepo]]:
    """The marathon plus the repository before each acting step's first action and after its
    last one (what the agentic driver starts a task from and compares it with)."""
    marathon_session(seed, passes, variant, size)  # validates the arguments
    m = _Marathon(seed, passes, variant, SIZES[size] if isinstance(size, str) else size)
    session = m.build()
    return session, m.b.snapshots, m.b.after


def marathon_sessions(seed: int = 0, passes: int = 6, variant: str = "repetitive",
                      size: str | MarathonSize = "full") -> list[Session]:
    """``[marathon_session(...)]``: the marathon is one long session (see module docstring)."""
    return [marathon_session(seed, passes, variant, size)]
