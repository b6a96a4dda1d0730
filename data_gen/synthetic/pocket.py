"""Small-step sessions for pocket windows: one short tool call per step.

The other families write steps of several calls and outputs of hundreds of tokens, which
a ~2K-token decision point cannot hold next to the ~1.3K-token distilled prompt and tool
schemas. These sessions are built for the ``pocket`` serving profile: every task step is
one call whose output is a few lines (``tool_output_lines``), so a step adds ~60-250
tokens, and the facts the work depends on (a setting, an error string with its location,
a signature, a decision with its reason, the user's constraints) are introduced early and
used a few steps later, which makes consumed output to fold and needed output to keep.

Three families share the step grammar and differ in their world (so one can be held out):

- ``pocket_api``: a Python web service; pytest failures, settings in an .env file;
- ``pocket_worker``: a Python queue worker; log greps with job ids, retry settings;
- ``pocket_cli``: a TypeScript command-line tool; jest failures and TS compile errors.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from doctrine.session import Session

from ._render import bash_output
from ._text import Picker
from ._tools import DEFAULT_SIZE, TOOLS, SessionBuilder, SessionSize, session_id

# A pocket agent's own tools: the shell (command only), the editor and finish. Every schema
# token rides in each request of a ~2K-token window.
SYSTEM = "You are a coding agent in a sandboxed repository. Use the tools; call finish when done."
_SHELL = {"type": "function", "function": {
    "name": "execute_bash", "description": "Run a bash command in the sandbox and return its output.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}
POCKET_TOOLS = [_SHELL] + [t for t in TOOLS if t["function"]["name"] in ("str_replace_editor", "finish")]

_WORLDS = {
    "pocket_api": {
        "what": "web service", "lang": "py", "src": "app", "conf": "config/{svc}.env",
        "keys": ("REQUEST_TIMEOUT_MS", "POOL_SIZE", "RATE_LIMIT_PER_MIN", "CACHE_TTL_S", "MAX_BODY_KB", "WORKERS"),
        "errors": (("ValueError", "invalid literal for int() with base 10: '{v}'"),
                   ("KeyError", "'{k}'"),
                   ("TypeError", "unsupported operand type(s) for +: 'int' and 'str'"),
                   ("AttributeError", "'NoneType' object has no attribute '{k}'")),
        "test": "pytest -q tests/test_{mod}.py",
        "log": "logs/{svc}.log",
    },
    "pocket_worker": {
        "what": "queue worker", "lang": "py", "src": "worker", "conf": "deploy/{svc}.env",
        "keys": ("MAX_RETRIES", "BACKOFF_MS", "BATCH_SIZE", "VISIBILITY_TIMEOUT_S", "PREFETCH", "DLQ_AFTER"),
        "errors": (("TimeoutError", "job {v} exceeded {k}"),
                   ("RuntimeError", "lease lost for job {v}"),
                   ("ValueError", "batch of {v} items over the limit"),
                   ("ConnectionError", "broker closed the channel ({k})")),
        "test": "pytest -q tests/test_{mod}.py",
        "log": "/var/log/{svc}/worker.log",
    },
    "pocket_cli": {
        "what": "command-line tool", "lang": "ts", "src": "src", "conf": "{svc}.config.json",
        "keys": ("maxDepth", "concurrency", "retryLimit", "timeoutMs", "chunkSize", "logLevel"),
        "errors": (("TS2345", "Argument of type 'string' is not assignable to parameter of type 'number'."),
                   ("TS2339", "Property '{k}' does not exist on type 'Options'."),
                   ("TypeError", "Cannot read properties of undefined (reading '{k}')"),
                   ("RangeError", "Invalid array length")),
        "test": "npx jest src/{mod}.test.ts",
        "log": "logs/{svc}-run.log",
    },
}
FAMILIES = tuple(_WORLDS)

_REASONS = ("because the caller already validates the input", "because the public signature must not change",
            "because the other services read the same value", "because a retry would repeat a side effect",
            "because the old value was tuned for a smaller host", "because the tests pin this behaviour")
_ALTERNATIVES = ("a new dependency", "changing the signature", "a global flag", "a retry loop",
                 "a schema change", "raising the limit everywhere")


def _code_lines(lang: str, sig: str, key: str, body: int) -> list[str]:
    if lang == "py":
        lines = [sig, f'    """Uses settings.{key}."""', f"    limit = settings.{key}"]
        lines += [f"    step_{i} = limit * {i + 2}" for i in range(body)]
        return lines + ["    return limit"]
    lines = [sig, f"  const limit = opts.{key};"]
    lines += [f"  const step{i} = limit * {i + 2};" for i in range(body)]
    return lines + ["  return limit;", "}"]


def _generate(family: str, seed: int, size: SessionSize) -> Session:
    w = _WORLDS[family]
    p = Picker(f"{family}:{seed}")
    bounds = size.tool_output_lines
    svc = p.unique(lambda: f"{p.noun()}-{p.choice(('api', 'svc', 'hub', 'sync', 'relay', 'gate'))}")
    root = f"/workspace/{svc}"
    mods = [p.snake().split("_")[1] for _ in range(2)]
    keys = p.sample(w["keys"], 3)
    values = {k: p.int(2, 90) * p.choice((1, 10, 100)) for k in keys}
    target = keys[0]
    new_value = values[target] * p.choice((2, 3, 4)) if p.chance(0.5) else max(1, values[target] // 2)
    ext = w["lang"]
    conf = w["conf"].format(svc=svc)

    b = SessionBuilder(family, seed)
    b.system(SYSTEM)
    b.step()
    rules = [p.choice((f"Do not change the public signature of {mods[0]}.", f"Keep the {mods[0]} API as it is.")),
             p.choice(("No new dependencies.", "Use only what the repo already has.")),
             f"{target} must end up at {new_value}."]
    u = b.user(f"The {w['what']} in {root} fails its {mods[0]} tests since the last deploy. Find the cause and fix it.\n"
               + "Constraints:\n" + "\n".join(f"- {r}" for r in rules))
    f_sig_rule, f_dep_rule, f_value_rule = (b.fact(r, "user_intent", u) for r in rules)
    b.offer_probe(f_value_rule, f"What value did I ask for {target}?")
    st: dict[str, str] = {}

    def read_config() -> None:
        if ext == "ts":
            body = "{\n" + ",\n".join(f'  "{k}": {v}' for k, v in values.items()) + "\n}"
        else:
            body = "\n".join(f"{k}={v}" for k, v in values.items())
        r = b.bash(f"cat {root}/{conf}", bash_output(body), "Reading the settings first.")
        shown = f'"{target}": {values[target]}' if ext == "ts" else f"{target}={values[target]}"
        st["f_conf"] = b.fact(shown, "exact_values", r)
        b.say(f"{target} is {values[target]} today; the user wants {new_value}.")

    err_type, err_tpl = p.choice(w["errors"])
    err_msg = err_tpl.format(k=target if ext == "ts" else target.lower(), v=p.int(100, 9999))
    line_no = p.int(8, 120)
    code_path = f"{w['src']}/{mods[0]}.{ext}"
    fn = p.snake() if ext == "py" else p.camel()
    sig = (f"def {fn}(items: list[dict], limit: int | None = None) -> int:" if ext == "py"
           else f"export function {fn}(items: Item[], opts: Options): number {{")

    def run_tests() -> None:
        n_ok = p.int(2, 9)
        if ext == "py":
            out = [f"F{'.' * n_ok}", f"{code_path}:{line_no}: in {fn}", f"E   {err_type}: {err_msg}",
                   f"FAILED tests/test_{mods[0]}.py::test_{fn} - {err_type}: {err_msg}",
                   f"1 failed, {n_ok} passed in 0.{p.int(10, 99)}s"]
            err = f"{err_type}: {err_msg}"
        else:
            out = [f"FAIL src/{mods[0]}.test.ts", f"  ● {fn} › handles the default options",
                   f"    {code_path}({line_no},{p.int(3, 40)}): error {err_type}: {err_msg}" if err_type.startswith("TS")
                   else f"    {err_type}: {err_msg}", f"      at {fn} ({code_path}:{line_no}:{p.int(3, 40)})",
                   f"Tests:       1 failed, {n_ok} passed, {n_ok + 1} total"]
            err = f"error {err_type}: {err_msg}" if err_type.startswith("TS") else f"{err_type}: {err_msg}"
        extra = max(0, p.lines(bounds, 0.5) - 3)
        out[1:1] = [f"{'tests/test_' + mods[1] + '.py' if ext == 'py' else 'src/' + mods[1] + '.test.ts'} ok "
                    f"({p.int(1, 40)} ms)" for _ in range(extra)]
        r = b.bash(w["test"].format(mod=mods[0]).join([f"cd {root} && ", ""]), bash_output("\n".join(out), 1),
                   "Running the failing tests.")
        st["f_err"] = b.fact(err, "error_strings", r)
        st["f_loc"] = b.fact(f"{code_path}:{line_no}", "paths_with_lines", r)
        st["n_ok"] = str(n_ok)
        b.say(p.choice((f"One test fails in {code_path}.", f"{fn} fails; the others pass.")))
        b.offer_probe(st["f_err"], "What exact error did the first test run report?")

    def view_code() -> None:
        b.use(st.get("f_loc"))
        lines = _code_lines(ext, sig, target if ext == "py" else target, p.lines(bounds, 0.6))
        start = max(1, line_no - 2)
        body = f"Here's the result of running `cat -n` on {root}/{code_path}:\n" + "\n".join(
            f"{start + i:6}\t{ln}" for i, ln in enumerate(lines))
        r = b.editor({"command": "view", "path": f"{root}/{code_path}", "view_range": [start, start + len(lines) - 1]},
                     body)
        st["f_sig"] = b.fact(sig, "signatures", r)
        b.say(f"{fn} reads {target} without converting it.")

    reason = p.choice(_REASONS)
    alt = p.choice(_ALTERNATIVES)
    decision = f"I'll read {target} once at the call site instead of {alt}, {reason}."

    def decide() -> None:
        b.use(st.get("f_err"), st.get("f_sig"), f_sig_rule)
        a = b.say(decision)
        st["f_dec"] = b.fact(decision, "decisions", a)

    def edit_code() -> None:
        b.use(st.get("f_sig"), st.get("f_dec"), f_sig_rule, f_dep_rule)
        old = f"    limit = settings.{target}" if ext == "py" else f"  const limit = opts.{target};"
        new = (f"    limit = int(settings.{target})" if ext == "py" else f"  const limit = Number(opts.{target});")
        b.editor({"command": "str_replace", "path": f"{root}/{code_path}", "old_str": old, "new_str": new},
                 f"The file {root}/{code_path} has been edited.", "Applying the fix.")
        b.say("Edited; the signature is unchanged.")

    def grep_log() -> None:
        job = p.hex(6)
        needle = f"ERROR {svc} job={job} {err_type}: {err_msg}"
        lines = [f"2026-03-{p.int(1, 28):02d}T0{p.int(0, 9)}:{p.int(10, 59)}:{p.int(10, 59)}Z INFO {svc} "
                 f"job={p.hex(6)} done in {p.int(5, 900)}ms" for _ in range(max(1, p.lines(bounds, 0.6) - 1))]
        lines.insert(p.int(0, len(lines)), needle)
        r = b.bash(f"grep -n {svc} {w['log'].format(svc=svc)} | tail -n {len(lines)}",
                   bash_output("\n".join(f"{i + 1}:{ln}" for i, ln in enumerate(lines))), "Checking the log.")
        st["f_job"] = b.fact(f"job={job}", "exact_values", r)
        b.say(p.choice(("One error line in the log.", "The log has a single error among the runs.")))

    def set_value() -> None:
        b.use(st.get("f_conf"), f_value_rule)
        if ext == "ts":
            old, new = f'"{target}": {values[target]}', f'"{target}": {new_value}'
        else:
            old, new = f"{target}={values[target]}", f"{target}={new_value}"
        b.editor({"command": "str_replace", "path": f"{root}/{conf}", "old_str": old, "new_str": new},
                 f"The file {root}/{conf} has been edited.", f"Setting {target} to {new_value} as asked.")
        b.say(f"{target} is now {new_value}.")

    def rerun() -> None:
        b.use(st.get("f_err"))
        n = int(st.get("n_ok", "3")) + 1
        out = f"{n} passed in 0.{p.int(10, 99)}s" if ext == "py" else f"Tests:       {n} passed, {n} total"
        b.bash(w["test"].format(mod=mods[0]).join([f"cd {root} && ", ""]), bash_output(out),
               "Rerunning the tests.")
        b.say(p.choice(("All green now.", f"{mods[0]} passes.")))

    def follow_up() -> None:
        ask = p.choice((f"Also check that {mods[1]} still passes.", f"While you are there, look at {mods[1]} too."))
        b.user(ask)
        n = p.int(2, 8)
        out = f"{n} passed in 0.{p.int(10, 99)}s" if ext == "py" else f"Tests:       {n} passed, {n} total"
        b.bash(w["test"].format(mod=mods[1]).join([f"cd {root} && ", ""]), bash_output(out))
        b.say(f"{mods[1]} is green: {n} passed.")

    def note_job() -> None:
        b.use(st.get("f_job"))
        b.say(f"The failing run in the log is {b.text_of(st['f_job'])}; it matches the test failure.")

    def list_files() -> None:
        files = sorted({f"{w['src']}/{p.snake().split('_')[1]}.{ext}" for _ in range(p.lines(bounds))} | {code_path})
        b.bash(f"cd {root} && git ls-files {w['src']}", bash_output("\n".join(files)), "Looking at the layout.")
        b.say(f"{len(files)} source files; {code_path} is the one under test.")

    def git_log() -> None:
        msgs = [f"{p.hex(7)} {p.choice(('fix', 'feat', 'chore', 'refactor'))}({p.noun()}): {p.sentence().rstrip('.')}"
                for _ in range(p.lines(bounds))]
        b.bash(f"cd {root} && git log --oneline -n {len(msgs)}", bash_output("\n".join(msgs)),
               "What changed in the last deploy?")
        b.say("Nothing in the log touches the settings loader directly.")

    def deps() -> None:
        names = p.sample(("requests", "pydantic", "httpx", "redis", "celery", "boto3", "sqlalchemy", "orjson",
                          "lodash", "zod", "yargs", "chalk", "undici", "commander"), p.lines(bounds))
        b.bash(f"cd {root} && {'pip freeze' if ext == 'py' else 'npm ls --depth=0'}",
               bash_output("\n".join(f"{n}=={p.version()}" if ext == "py" else f"├── {n}@{p.version()}" for n in names)))
        b.say("No dependency changed in the deploy.")

    order: list[Callable[[], None]] = [read_config, list_files, run_tests, git_log, view_code, decide, edit_code,
                                       grep_log, deps, set_value, rerun, note_job, follow_up]
    order = order[: max(3, size.steps - 1)]
    b.probes_due(size, 0)
    for n, step_fn in enumerate(order, start=1):
        b.step()
        step_fn()
        b.probes_due(size, n)
    b.step()
    b.user("Wrap up: what changed?")
    b.use(st.get("f_dec"), f_value_rule, st.get("f_err"))
    b.finish(f"Fixed {code_path} ({decision[5:]}) and set {target}={new_value}; tests pass.")
    meta = {"generator": "data_gen.synthetic", "workload": w["what"],
            "size": {"steps": size.steps, "tool_output_lines": list(bounds), "probes": size.probes}}
    session = b.build(session_id(family, seed, size), meta)
    session.tools = json.loads(json.dumps(POCKET_TOOLS))
    return session.validate()


def generator(family: str) -> Callable[[int, SessionSize], Session]:
    def generate(seed: int, size: SessionSize = DEFAULT_SIZE) -> Session:
        return _generate(family, seed, size)

    generate.__doc__ = f"One {family} session for ``seed`` at ``size``."
    return generate
