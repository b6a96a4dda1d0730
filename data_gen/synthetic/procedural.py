"""Procedural pocket sessions: structure, ids and values drawn per seed, one ecosystem per family.

The pocket families (``pocket.py``) replay one script each, so a model can pass their folds
by recalling the script. Here a session is assembled from a library of step kinds
(``STEP_KINDS``: five or six inspection kinds of each of eight ecosystems, two shared looks
and four acting kinds) drawn in a
random number (4-14 tool calls) and order, after a random amount of earlier history, so
the message ids and block ids a fold names must be read from the context. Every name, key,
path, number and error string comes from the open pools of ``_pools.py``.

Facts work as in ``pocket.py``: an inspection step declares what it revealed (a setting,
an error with its location, a version, a signature) and an acting step a few steps later
uses it (edits the setting, opens the location, reruns the failing test, quotes it), so
the labeler's hindsight finds consumed output to fold and needed output to keep. A recall
question (``_recall``) asks later for a detail no step used, so a fold that dropped it must
be undone by a recovery call, or, still in view, answered as usual (a counter-lesson). Outputs
are a few short lines, sized for the ``pocket`` serving profile's ~2K-token decision
points. The ecosystem is the family, so a split can hold out whole ecosystems.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from doctrine.session import Session

from ._pools import Pools
from ._render import bash_output
from ._text import Picker
from ._tools import DEFAULT_SIZE, SessionBuilder, SessionSize, session_id
from .pocket import POCKET_TOOLS, SYSTEM

__all__ = ["ECOSYSTEMS", "FAMILIES", "STEP_KINDS", "generator"]


@dataclass
class _Setting:
    fid: str
    file: str
    key: str
    value: int
    shown: str  # the exact text in the file (the fact)
    fmt: str


@dataclass
class _Ctx:
    eco: str
    b: SessionBuilder
    p: Picker
    v: Pools
    root: str
    settings: list[_Setting] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)  # (fact id, test target)
    locs: list[tuple[str, str, int]] = field(default_factory=list)  # (fact id, path, line)
    others: list[str] = field(default_factory=list)  # fact ids only quoted later
    calls: int = 0
    kinds: list[str] = field(default_factory=list)
    history: bool = False  # earlier history: its facts are never used

    def run(self, command: str, lines: list[str], text: str = "", code: int = 0) -> int:
        self.calls += 1
        # Every call says a word first: the labeler reads a range by its assistant turns, and
        # a bare call's output went missing from its summaries (then the checker failed them).
        text = text or self.p.choice(_LEADS)
        return self.b.bash(command, bash_output("\n".join(lines), code), text)

    def fact(self, text: str, kind: str, msg: int) -> str | None:
        fid = self.b.fact(text, kind, msg)
        return None if self.history else fid


_LEADS = ("Checking.", "Looking.", "Next check.", "Let me see.", "Reading it.", "One more look.", "Now this.")


def _fmt_setting(fmt: str, key: str, value: int) -> str:
    return {"env": f"{key}={value}", "json": f'"{key}": {value}', "yaml": f"{key}: {value}",
            "toml": f"{key} = {value}", "nginx": f"{key} {value};"}[fmt]


def _settings_step(c: _Ctx, file: str, fmt: str, keyer: Callable[[], str], command: str, text: str) -> None:
    # One value per output: a fold must keep every exact value of its range, and a pocket
    # summary (about W/16 tokens) has room for few (the checker fails a fold that drops one).
    keys = [keyer()]
    vals = [c.v.number() for _ in keys]
    body = [_fmt_setting(fmt, k, v) for k, v in zip(keys, vals, strict=True)]
    if fmt == "json":
        body = ["{"] + [f"  {ln}," for ln in body[:-1]] + [f"  {body[-1]}", "}"]
    elif c.p.chance(0.6):
        body.insert(c.p.int(0, 1), "# " + c.p.choice(("managed by deploy", "see the README", "do not edit by hand",
                                                      f"owner: {c.v.word()} team", f"last review {c.v.date()}")))
    r = c.run(command.format(file=file), body, text)
    i = c.p.int(0, len(keys) - 1)
    shown = _fmt_setting(fmt, keys[i], vals[i])
    fid = c.fact(shown, "exact_values", r)
    if fid:
        c.settings.append(_Setting(fid, file, keys[i], vals[i], shown, fmt))


def _filler(c: _Ctx, make: Callable[[], str], lo: int = 1, hi: int = 3) -> list[str]:
    return [make() for _ in range(c.p.int(lo, hi))]


def _error(c: _Ctx, r: int, err: str, path: str, line: int, target: str, loc: str | None = None) -> None:
    fe = c.fact(err, "error_strings", r)
    fl = c.fact(loc or f"{path}:{line}", "paths_with_lines", r)
    if fe:
        c.errors.append((fe, target))
    if fl:
        c.locs.append((fl, path, line))


# --------------------------------------------------------------------------- python


def py_pytest(c: _Ctx) -> None:
    mod, fn = c.v.module(), c.v.snake()
    path, line = f"{c.v.dir()}/{mod}.py", c.v.line()
    err = c.p.choice((f"KeyError: '{c.v.word()}'", f"ValueError: invalid literal for int() with base 10: '{c.v.word()}'",
                      f"AssertionError: assert {c.v.number()} == {c.v.number()}",
                      f"AttributeError: 'NoneType' object has no attribute '{c.v.word()}'"))
    ok = c.p.int(1, 30)
    out = [f"{path}:{line}: in {fn}", f"E   {err}", f"FAILED tests/test_{mod}.py::test_{fn}", f"1 failed, {ok} passed"]
    r = c.run(f"pytest -q tests/test_{mod}.py", out, c.p.choice(("Running the tests.", "")), 1)
    _error(c, r, err, path, line, f"pytest -q tests/test_{mod}.py")


def py_env(c: _Ctx) -> None:
    _settings_step(c, f"config/{c.v.service()}.env", "env", c.v.key, "cat {file}", "Checking the settings.")


def py_pip(c: _Ctx) -> None:
    pkgs = [(c.v.word(), c.v.version()) for _ in range(c.p.int(1, 2))]
    r = c.run("pip list 2>/dev/null | grep -i -E '" + "|".join(n for n, _ in pkgs) + "'",
              [f"{n:<14}{v}" for n, v in pkgs])
    n, v = c.p.choice(pkgs)
    if fid := c.fact(f"{n:<14}{v}".rstrip(), "exact_values", r):
        c.others.append(fid)


def py_grep_def(c: _Ctx) -> None:
    fn, path = c.v.snake(), f"{c.v.dir()}/{c.v.module()}.py"
    line = c.v.line()
    sig = f"def {fn}({c.v.word()}: {c.p.choice(('int', 'str', 'dict', 'list[str]'))}, {c.v.word()}=None):"
    r = c.run(f"grep -rn 'def {fn}' .", [f"{path}:{line}:{sig}"])
    if fid := c.fact(sig, "signatures", r):
        c.others.append(fid)
    if fl := c.fact(f"{path}:{line}", "paths_with_lines", r):
        c.locs.append((fl, path, line))


def py_traceback(c: _Ctx) -> None:
    svc, fn, path = c.v.service(), c.v.snake(), f"{c.v.dir()}/{c.v.module()}.py"
    line, err = c.v.line(), f"TimeoutError: {c.v.word()} did not answer in {c.v.number()} ms"
    out = [f"{c.v.date()} {c.v.time()} ERROR {svc} unhandled", "Traceback (most recent call last):",
           f'  File "{path}", line {line}, in {fn}', err]
    r = c.run(f"tail -n 4 logs/{svc}.log", out, "Looking at the service log.")
    _error(c, r, err, path, line, f"python -m {svc.replace('-', '_')} --once", f'File "{path}", line {line}')


# --------------------------------------------------------------------------- typescript


def ts_jest(c: _Ctx) -> None:
    mod, fn = c.v.module(), c.v.camel()
    path, line, col = f"src/{mod}.ts", c.v.line(), c.p.int(3, 40)
    err = c.p.choice((f"TypeError: Cannot read properties of undefined (reading '{c.v.word()}')",
                      f"Expected: {c.v.number()}, Received: {c.v.number()}",
                      f"RangeError: Invalid array length {c.v.number()}"))
    n = c.p.int(2, 30)
    out = [f"FAIL src/{mod}.test.ts", f"  ● {fn} › {c.v.word()}", f"    {err}", f"      at {fn} ({path}:{line}:{col})",
           f"Tests:       1 failed, {n} passed, {n + 1} total"]
    r = c.run(f"npx jest src/{mod}.test.ts", out, "", 1)
    _error(c, r, err, path, line, f"npx jest src/{mod}.test.ts")


def ts_tsc(c: _Ctx) -> None:
    path, line, col = f"src/{c.v.module()}.ts", c.v.line(), c.p.int(3, 60)
    code = f"TS{c.p.int(2000, 2999)}"
    err = c.p.choice((f"Property '{c.v.json_key()}' does not exist on type '{c.v.pascal()}'.",
                      f"Argument of type 'string' is not assignable to parameter of type '{c.v.pascal()}'.",
                      f"Cannot find name '{c.v.camel()}'."))
    out = [f"{path}({line},{col}): error {code}: {err}", f"Found 1 error in {path}:{line}"]
    r = c.run("npx tsc --noEmit -p .", out, c.p.choice(("Type-checking.", "")), 2)
    _error(c, r, f"error {code}: {err}", path, line, "npx tsc --noEmit -p .")


def ts_settings(c: _Ctx) -> None:
    _settings_step(c, f"{c.v.word()}.config.json", "json", c.v.json_key, "cat {file}", "")


def ts_npm_ls(c: _Ctx) -> None:
    pkgs = [(f"@{c.v.word()}/{c.v.word()}" if c.p.chance(0.3) else c.v.word(), c.v.version()) for _ in range(c.p.int(1, 2))]
    r = c.run("npm ls --depth=0", [f"{c.root.rsplit('/', 1)[1]} {c.root}"] + [f"├── {n}@{v}" for n, v in pkgs])
    n, v = c.p.choice(pkgs)
    if fid := c.fact(f"{n}@{v}", "exact_values", r):
        c.others.append(fid)


def ts_grep_import(c: _Ctx) -> None:
    name = c.v.camel()
    path, line = f"src/{c.v.module()}.ts", c.v.line()
    sig = f"export function {name}({c.v.word()}: {c.v.pascal()}): Promise<number>"
    r = c.run(f"grep -rn 'function {name}' src", [f"{path}:{line}:{sig} {{"],
              f"Where is {name} defined?" if c.p.chance(0.4) else "")
    if fid := c.fact(sig, "signatures", r):
        c.others.append(fid)
    if fl := c.fact(f"{path}:{line}", "paths_with_lines", r):
        c.locs.append((fl, path, line))


# --------------------------------------------------------------------------- go


def go_test(c: _Ctx) -> None:
    pkg, test = c.v.module(), f"Test{c.v.word().capitalize()}"
    path, line = f"internal/{pkg}/{c.v.module()}_test.go", c.v.line()
    got, want = c.v.number(), c.v.number()
    err = f"got {got}, want {want}"
    out = [f"--- FAIL: {test} (0.{c.p.int(0, 99):02d}s)", f"    {path.rsplit('/', 1)[1]}:{line}: {err}", "FAIL",
           f"FAIL\t{c.v.word()}.io/{pkg}\t0.{c.p.int(10, 99)}s"]
    r = c.run(f"go test ./internal/{pkg}/...", out, "", 1)
    _error(c, r, err, path, line, f"go test ./internal/{pkg}/...", f"{path.rsplit('/', 1)[1]}:{line}")


def go_build(c: _Ctx) -> None:
    path, line, col = f"./{c.v.dir()}/{c.v.module()}.go", c.v.line(), c.p.int(2, 40)
    err = c.p.choice((f"undefined: {c.v.pascal()}", f"cannot use {c.v.word()} (variable of type int) as string value",
                      f"{c.v.word()} declared and not used"))
    r = c.run("go build ./...", [f"# {c.v.word()}.io/{c.v.module()}", f"{path}:{line}:{col}: {err}"], "", 1)
    _error(c, r, err, path.lstrip("./"), line, "go build ./...")


def go_mod(c: _Ctx) -> None:
    deps = [(f"github.com/{c.v.word()}/{c.v.word()}", f"v{c.v.version()}") for _ in range(c.p.int(1, 2))]
    r = c.run("sed -n '3,9p' go.mod", ["require ("] + [f"\t{n} {v}" for n, v in deps] + [")"])
    n, v = c.p.choice(deps)
    if fid := c.fact(f"{n} {v}", "exact_values", r):
        c.others.append(fid)


def go_vet(c: _Ctx) -> None:
    path, line = f"{c.v.dir()}/{c.v.module()}.go", c.v.line()
    err = c.p.choice((f"printf: fmt.Sprintf format %d has arg {c.v.word()} of wrong type string",
                      f"copylocks: {c.v.camel()} passes lock by value: sync.Mutex"))
    r = c.run("go vet ./...", [f"# {c.v.word()}.io/{c.v.module()}", f"./{path}:{line}:{c.p.int(2, 30)}: {err}"], "", 1)
    _error(c, r, err, path, line, "go vet ./...")


def go_config(c: _Ctx) -> None:
    _settings_step(c, f"deploy/{c.v.service()}.yaml", "yaml", lambda: c.v.word(1, 2) + "_" + c.p.choice(("ms", "max", "size", "n")),
                   "grep -E '^[a-z_]+:' {file}", "")


# --------------------------------------------------------------------------- rust


def cargo_test(c: _Ctx) -> None:
    mod, test = c.v.module(), c.v.snake()
    path, line, col = f"src/{mod}.rs", c.v.line(), c.p.int(5, 30)
    a, bb = c.v.number(), c.v.number()
    err = f"assertion `left == right` failed\n  left: {a}\n right: {bb}"
    out = [f"thread '{mod}::tests::{test}' panicked at {path}:{line}:{col}:", err,
           f"test result: FAILED. {c.p.int(1, 40)} passed; 1 failed"]
    r = c.run(f"cargo test {test}", out, "", 101)
    _error(c, r, f"left: {a}", path, line, f"cargo test {test}")


def cargo_check(c: _Ctx) -> None:
    path, line, col = f"src/{c.v.module()}.rs", c.v.line(), c.p.int(5, 50)
    code = f"E0{c.p.int(100, 799)}"
    msg = c.p.choice(("mismatched types", f"cannot find value `{c.v.word()}` in this scope",
                      f"no method named `{c.v.word()}` found for struct `{c.v.pascal()}`"))
    out = [f"error[{code}]: {msg}", f"  --> {path}:{line}:{col}", f"error: could not compile `{c.v.word()}`"]
    r = c.run("cargo check -q", out, "", 101)
    _error(c, r, f"error[{code}]: {msg}", path, line, "cargo check -q")


def cargo_toml(c: _Ctx) -> None:
    _settings_step(c, "Cargo.toml", "toml", lambda: c.v.word(1, 2) + "_" + c.p.choice(("limit", "size", "level")),
                   "sed -n '/\\[package.metadata\\]/,$p' {file}", "")


def cargo_tree(c: _Ctx) -> None:
    deps = [(c.v.word(), c.v.version()) for _ in range(c.p.int(1, 2))]
    r = c.run("cargo tree --depth 1", [f"{c.root.rsplit('/', 1)[1]} ({c.root})"]
              + [f"├── {n} v{v}" for n, v in deps])
    n, v = c.p.choice(deps)
    if fid := c.fact(f"{n} v{v}", "exact_values", r):
        c.others.append(fid)


def cargo_list(c: _Ctx) -> None:
    # Test names: nothing a fold must keep verbatim (no number, path or error), so a summary
    # may drop the one a later question asks for (the ls-like look of the ecosystem).
    mod = c.v.module()
    names = [f"{mod}::tests::{c.v.snake()}" for _ in range(c.p.int(3, 5))]
    r = c.run(f"cargo test {mod} -- --list | head -n {len(names)}", [f"{n}: test" for n in names])
    if fid := c.fact(c.p.choice(names), "exact_values", r):
        c.others.append(fid)


def cargo_clippy(c: _Ctx) -> None:
    path, line = f"src/{c.v.module()}.rs", c.v.line()
    err = f"warning: unused variable: `{c.v.word()}`"
    r = c.run("cargo clippy -q", [err, f"  --> {path}:{line}:{c.p.int(5, 30)}"], "")
    _error(c, r, err, path, line, "cargo clippy -q")


# --------------------------------------------------------------------------- shell and service logs


def ops_systemctl(c: _Ctx) -> None:
    unit = c.v.service()
    pid, code = c.p.int(300, 99999), c.p.choice((1, 2, 127, 203))
    err = f"Main PID: {pid} (code=exited, status={code})"
    out = [f"● {unit}.service", f"     Active: failed (Result: exit-code) since {c.v.date()} {c.v.time()} UTC", f"   {err}"]
    r = c.run(f"systemctl status {unit} --no-pager | head -n 3", out, "", 3)
    if fe := c.fact(err, "error_strings", r):
        c.errors.append((fe, f"systemctl restart {unit} && systemctl is-active {unit}"))


def ops_journal(c: _Ctx) -> None:
    unit, path, line = c.v.service(), f"/etc/{c.v.word()}/{c.v.word()}.conf", c.p.int(3, 90)
    err = f"bind() to 0.0.0.0:{c.v.port()} failed (98: Address already in use)"
    out = [f"{c.v.time()} host {unit}[{c.p.int(300, 9999)}]: {c.p.choice(('starting', 'reloading'))}",
           f"{c.v.time()} host {unit}[{c.p.int(300, 9999)}]: {err}",
           f"{c.v.time()} host {unit}[{c.p.int(300, 9999)}]: config {path}:{line}"]
    r = c.run(f"journalctl -u {unit} -n 3 --no-pager -o short", out, "")
    _error(c, r, err, path, line, f"journalctl -u {unit} -n 1 --no-pager")


def ops_nginx_log(c: _Ctx) -> None:
    up = f"{c.v.word()}:{c.v.port()}"
    err = f"upstream timed out (110: Connection timed out) while reading response header from upstream \"{up}\""
    out = [f"{c.v.date().replace('-', '/')} {c.v.time()} [error] {c.p.int(100, 9999)}#0: *{c.p.int(1, 99999)} {err}"]
    out += _filler(c, lambda: f"{c.v.date().replace('-', '/')} {c.v.time()} [warn] {c.p.int(100, 9999)}#0: "
                              f"an upstream response is buffered to a temporary file", 0, 2)
    r = c.run("tail -n 3 /var/log/nginx/error.log", out, "")
    if fe := c.fact(err, "error_strings", r):
        c.errors.append((fe, "curl -s -o /dev/null -w '%{http_code}' localhost/"))


def ops_nginx_conf(c: _Ctx) -> None:
    _settings_step(c, f"/etc/nginx/conf.d/{c.v.word()}.conf", "nginx",
                   lambda: c.v.word(1, 1) + "_" + c.p.choice(("timeout", "buffers", "size", "rate")),
                   "grep -E '_(timeout|buffers|size|rate) ' {file}", "")


def ops_df(c: _Ctx) -> None:
    mounts = [(f"/{c.v.word(1, 2)}", c.p.int(11, 99)) for _ in range(c.p.int(2, 3))]
    r = c.run("df -h --output=target,pcent | tail -n +2", [f"{m:<16}{pc}%" for m, pc in mounts])
    m, pc = c.p.choice(mounts)
    if fid := c.fact(f"{m:<16}{pc}%", "exact_values", r):
        c.others.append(fid)


# --------------------------------------------------------------------------- sql migrations


def sql_ls(c: _Ctx) -> None:
    start = c.p.int(3, 400)
    names = [f"V{start + i:03d}__{c.v.word()}_{c.v.word(1, 1)}.sql" for i in range(c.p.int(2, 4))]
    r = c.run("ls db/migrations | tail -n 4", names)
    if fid := c.fact(names[-1], "exact_values", r):
        c.others.append(fid)


def sql_migrate(c: _Ctx) -> None:
    table, col = c.v.word(), c.v.word()
    path, line = f"db/migrations/V{c.p.int(3, 400):03d}__{c.v.word()}.sql", c.p.int(2, 40)
    err = c.p.choice((f'ERROR: column "{col}" of relation "{table}" already exists',
                      f'ERROR: relation "{table}_{col}_idx" does not exist',
                      f'ERROR: null value in column "{col}" violates not-null constraint'))
    out = [f"Migrating schema to version {c.p.int(3, 400)}", err, f"Migration failed at {path}:{line}"]
    r = c.run("flyway -q migrate", out, "", 1)
    _error(c, r, err, path, line, "flyway -q migrate")


def sql_describe(c: _Ctx) -> None:
    table = c.v.word()
    cols = [(c.v.word(), c.p.choice(("integer", "text", "bigint", "boolean", "timestamptz", f"varchar({c.v.number()})")))
            for _ in range(c.p.int(2, 4))]
    r = c.run(f"psql -c '\\d {table}' | sed -n '3,8p'", [f" {n:<12}| {t}" for n, t in cols])
    n, t = c.p.choice(cols)
    if fid := c.fact(f" {n:<12}| {t}".strip(), "exact_values", r):
        c.others.append(fid)


def sql_count(c: _Ctx) -> None:
    table, col = c.v.word(), c.v.word()
    n = c.p.int(0, 999999)
    r = c.run(f"psql -tA -c 'SELECT count(*) FROM {table} WHERE {col} IS NULL'", [str(n)])
    if fid := c.fact(str(n), "exact_values", r) if n > 99 else None:
        c.others.append(fid)


def sql_settings(c: _Ctx) -> None:
    _settings_step(c, "db/flyway.conf", "env", lambda: "flyway." + c.v.word(1, 2) + c.p.choice(("Timeout", "Limit", "Size")),
                   "grep -v '^#' {file}", "")


# --------------------------------------------------------------------------- yaml manifests


def k8s_pods(c: _Ctx) -> None:
    app = c.v.service()
    pods = [(f"{app}-{c.p.hex(5)}", c.p.choice(("Running", "Running", "CrashLoopBackOff", "OOMKilled")), c.p.int(0, 40))
            for _ in range(c.p.int(2, 4))]
    if all(s == "Running" for _, s, _ in pods):
        pods[0] = (pods[0][0], "CrashLoopBackOff", pods[0][2])
    out = ["NAME" + " " * 19 + "STATUS            RESTARTS"] + [f"{n:<23}{s:<18}{k}" for n, s, k in pods]
    r = c.run(f"kubectl get pods -l app={app}", out)
    bad = next(f"{n:<23}{s:<18}{k}" for n, s, k in pods if s != "Running")
    if fe := c.fact(bad.split()[0], "exact_values", r):
        c.others.append(fe)


def k8s_logs(c: _Ctx) -> None:
    pod = f"{c.v.service()}-{c.p.hex(5)}"
    path, line = f"/app/{c.v.dir()}/{c.v.module()}.py", c.v.line()
    err = c.p.choice((f"connection refused: {c.v.word()}:{c.v.port()}", f"missing env {c.v.key()}",
                      f"panic: runtime error: index out of range [{c.p.int(1, 99)}] with length {c.p.int(0, 9)}"))
    r = c.run(f"kubectl logs {pod} --tail=2", [f"{c.v.time()} fatal: {err}", f"  at {path}:{line}"], "")
    _error(c, r, err, path, line, f"kubectl rollout status deploy/{pod.rsplit('-', 2)[0]}")


def k8s_manifest(c: _Ctx) -> None:
    _settings_step(c, f"k8s/{c.v.service()}.yaml", "yaml", lambda: c.v.json_key(),
                   "grep -nE '^ +[a-zA-Z]+: [0-9]+$' {file} | cut -d: -f2-", "")


def k8s_describe(c: _Ctx) -> None:
    pod = f"{c.v.service()}-{c.p.hex(5)}"
    mem = f"{c.p.int(64, 2048)}Mi"
    err = f"Last State: Terminated, Reason: OOMKilled, Exit Code: 137, limit {mem}"
    r = c.run(f"kubectl describe pod {pod} | grep -A1 'Last State'", [f"    {err}", f"    Restart Count: {c.p.int(1, 60)}"], "")
    if fe := c.fact(err, "error_strings", r):
        c.errors.append((fe, f"kubectl get pod {pod}"))


def compose_ps(c: _Ctx) -> None:
    svcs = [(c.v.word(), c.p.choice(("Up", "Up", "Exited (1)", "Restarting")), c.v.port()) for _ in range(c.p.int(2, 3))]
    r = c.run("docker compose ps --format '{{.Service}} {{.Status}} {{.Ports}}'",
              [f"{s} {st} 0.0.0.0:{pt}->{pt}/tcp" for s, st, pt in svcs])
    s, st, pt = c.p.choice(svcs)
    if fid := c.fact(f"{s} {st} 0.0.0.0:{pt}", "exact_values", r):
        c.others.append(fid)


# --------------------------------------------------------------------------- git and CI


def git_status(c: _Ctx) -> None:
    files = [f"{c.p.choice((' M', '??', ' D', 'A '))} {c.v.dir()}/{c.v.module()}.{c.p.choice(('py', 'ts', 'go', 'yml'))}"
             for _ in range(c.p.int(2, 4))]
    r = c.run("git status --short", files)
    if fid := c.fact(c.p.choice(files).split(" ", 2)[-1].strip(), "exact_values", r):
        c.others.append(fid)


def git_log(c: _Ctx) -> None:
    commits = [(c.v.sha(), f"{c.p.choice(('fix', 'feat', 'chore', 'ci'))}({c.v.word(1, 2)}): {c.v.word()} {c.v.word()}")
               for _ in range(c.p.int(2, 4))]
    r = c.run(f"git log --oneline -n {len(commits)}", [f"{h} {m}" for h, m in commits])
    h, m = c.p.choice(commits)
    if fid := c.fact(f"{h} {m}", "exact_values", r):
        c.others.append(fid)


def ci_failed(c: _Ctx) -> None:
    run_id, job = c.p.int(10**6, 10**9), c.v.word()
    path, line = f".github/workflows/{c.v.word()}.yml", c.p.int(5, 120)
    err = c.p.choice((f"Process completed with exit code {c.p.int(1, 137)}.",
                      f"Error: Input required and not supplied: {c.v.word()}_{c.v.word(1, 1)}",
                      f"Unable to resolve action `{c.v.word()}/{c.v.word()}@v{c.p.int(1, 9)}`"))
    out = [f"{job}\tUNKNOWN STEP\t{c.v.date()}T{c.v.time()}Z ##[error]{err}", f"{job}\tUNKNOWN STEP\tsee {path}:{line}"]
    r = c.run(f"gh run view {run_id} --log-failed | tail -n 2", out, "")
    _error(c, r, err, path, line, f"gh run rerun {run_id} --failed")


def git_diff_stat(c: _Ctx) -> None:
    files = [(f"{c.v.dir()}/{c.v.module()}.{c.p.choice(('py', 'ts', 'go', 'rs'))}", c.p.int(1, 300), c.p.int(0, 200))
             for _ in range(c.p.int(2, 3))]
    out = [f" {f} | {a + d} {'+' * min(a, 9)}{'-' * min(d, 9)}" for f, a, d in files]
    out.append(f" {len(files)} files changed, {sum(a for _, a, _ in files)} insertions(+), "
               f"{sum(d for _, _, d in files)} deletions(-)")
    r = c.run(f"git diff --stat HEAD~{c.p.int(1, 9)}", out)
    if fid := c.fact(out[-1].strip(), "exact_values", r):
        c.others.append(fid)


def ci_workflow(c: _Ctx) -> None:
    _settings_step(c, f".github/workflows/{c.v.word()}.yml", "yaml",
                   lambda: c.p.choice(("timeout-minutes", "max-parallel", "retention-days", "fetch-depth")) if not c.settings
                   else c.v.word(1, 1) + "-" + c.p.choice(("minutes", "depth", "days")),
                   "grep -nE '^ +[a-z-]+: [0-9]+$' {file} | cut -d: -f2-", "")


# --------------------------------------------------------------------------- shared looks
# Output with nothing a fold must keep verbatim (names without line numbers, prose): most
# of what an agent reads is like this, and a pocket summary has room for only a few KEEP items.

_EXT = {"proc_python": "py", "proc_typescript": "ts", "proc_go": "go", "proc_rust": "rs", "proc_ops": "conf",
        "proc_sql": "sql", "proc_k8s": "yaml", "proc_git": "yml"}


def ls_dir(c: _Ctx) -> None:
    d = c.v.dir()
    names = sorted({f"{c.v.word(1, 2)}.{_EXT[c.eco]}" for _ in range(c.p.int(3, 6))})
    c.run(f"ls {d}", names, c.p.choice(("What is in there?", "Listing the folder.", "")))


def read_notes(c: _Ctx) -> None:
    topic = c.v.word()
    lines = [f"# {topic.capitalize()}", c.p.choice((f"The {topic} module owns the retry logic.",
                                                   f"Run the checks before pushing to {c.v.word()}.",
                                                   f"Settings are read once at start-up by {topic}.")),
             c.p.choice(("Ask the on-call team before changing defaults.", "See the wiki for the release steps.",
                         "Everything here is generated; edit the templates instead."))]
    c.run(f"head -n 3 {c.p.choice(('README.md', 'docs/NOTES.md', 'CONTRIBUTING.md'))}", lines,
          c.p.choice(("Reading the notes.", "")))


# --------------------------------------------------------------------------- acting steps


def act_set(c: _Ctx) -> None:
    """Edit a setting read earlier (uses the setting and, when given, the user's target)."""
    s = c.settings.pop(c.p.int(0, len(c.settings) - 1))
    new = max(1, s.value * c.p.choice((2, 3)) if c.p.chance(0.5) else s.value // 2)
    c.b.use(s.fid)
    new_text = _fmt_setting(s.fmt, s.key, new)
    c.calls += 1
    c.b.editor({"command": "str_replace", "path": f"{c.root}/{s.file}" if not s.file.startswith("/") else s.file,
                "old_str": s.shown, "new_str": new_text}, f"The file {s.file} has been edited.",
               c.p.choice((f"Changing {s.key} from {s.value} to {new}.", "", f"Setting {s.key} to {new}.")))


def act_view(c: _Ctx) -> None:
    """Open the location an error or grep pointed at (uses the path:line fact)."""
    fid, path, line = c.locs.pop(c.p.int(0, len(c.locs) - 1))
    c.b.use(fid)
    lo = max(1, line - 1)
    body = [f"{lo + i:6}\t{ln}" for i, ln in enumerate(
        [f"{c.v.word()} = {c.v.word()}({c.v.number()})", f"{c.v.word()}.{c.v.word()}({c.v.word()})",
         f"return {c.v.word()}"][: c.p.int(2, 3)])]
    c.calls += 1
    c.b.editor({"command": "view", "path": path, "view_range": [lo, lo + len(body) - 1]},
               f"Here's the result of running `cat -n` on {path}:\n" + "\n".join(body),
               c.p.choice(("", f"Opening {path} at line {line}.")))


def act_rerun(c: _Ctx) -> None:
    """Rerun what failed (uses the error string); the output is the all-clear."""
    fid, target = c.errors.pop(c.p.int(0, len(c.errors) - 1))
    c.b.use(fid)
    c.run(target, [c.p.choice((f"{c.p.int(2, 60)} passed", "ok", "active", "200", f"ok  \t{c.v.word()}\t0.{c.p.int(10, 99)}s"))],
          c.p.choice(("Checking the fix.", "", "Again.")))


def act_note(c: _Ctx) -> None:
    """Quote an earlier fact in a short assistant note (no call: a step of its own)."""
    fid = c.others.pop(c.p.int(0, len(c.others) - 1)) if c.others else c.p.choice([f for f, _ in c.errors])
    c.b.use(fid)
    c.b.say(c.p.choice(("Noting for later: ", "Relevant: ", "Keep in mind: ")) + c.b.text_of(fid))


_OWN: dict[str, tuple[Callable[[_Ctx], None], ...]] = {
    "proc_python": (py_pytest, py_env, py_pip, py_grep_def, py_traceback),
    "proc_typescript": (ts_jest, ts_tsc, ts_settings, ts_npm_ls, ts_grep_import),
    "proc_go": (go_test, go_build, go_mod, go_vet, go_config),
    "proc_rust": (cargo_test, cargo_check, cargo_toml, cargo_tree, cargo_clippy, cargo_list),
    "proc_ops": (ops_systemctl, ops_journal, ops_nginx_log, ops_nginx_conf, ops_df),
    "proc_sql": (sql_ls, sql_migrate, sql_describe, sql_count, sql_settings),
    "proc_k8s": (k8s_pods, k8s_logs, k8s_manifest, k8s_describe, compose_ps),
    "proc_git": (git_status, git_log, ci_failed, git_diff_stat, ci_workflow),
}
# Each ecosystem's inspection kinds: its own (five; six for Rust) and the two shared looks.
ECOSYSTEMS: dict[str, dict[str, Callable[[_Ctx], None]]] = {
    eco: {f.__name__: f for f in (*own, ls_dir, read_notes)} for eco, own in _OWN.items()}
FAMILIES = tuple(ECOSYSTEMS)
_ACTS: dict[str, tuple[Callable[[_Ctx], None], Callable[[_Ctx], bool]]] = {
    "act_set": (act_set, lambda c: bool(c.settings)),
    "act_view": (act_view, lambda c: bool(c.locs)),
    "act_rerun": (act_rerun, lambda c: bool(c.errors)),
    "act_note": (act_note, lambda c: bool(c.others or c.errors)),
}
STEP_KINDS = tuple(dict.fromkeys(k for eco in ECOSYSTEMS.values() for k in eco)) + tuple(_ACTS)
_TASKS = ("{What} in {root} is broken since this morning. Find out why and fix it.",
          "Something in {root} regressed after the last merge; track it down.",
          "Please get {root} back to green.", "Investigate why {what} fails in {root} and repair it.")
_WHAT = {"proc_python": "the test suite", "proc_typescript": "the build", "proc_go": "go test",
         "proc_rust": "cargo", "proc_ops": "the service", "proc_sql": "the migration", "proc_k8s": "the deployment",
         "proc_git": "CI"}


def _generate(family: str, seed: int, size: SessionSize) -> Session:
    eco = ECOSYSTEMS[family]
    p = Picker(f"proc:{family}:{seed}")
    v = Pools(p)
    root = f"/workspace/{v.service()}"
    b = SessionBuilder(family, seed)
    c = _Ctx(family, b, p, v, root)
    b.system(SYSTEM)
    # Earlier history: 0-3 steps of an unrelated earlier request, consumed before the task.
    n_hist = p.choice((0, 1, 1, 2, 2, 3))
    if n_hist:
        c.history = True
        b.step()
        b.user(p.choice(("Quick look first: ", "Before anything else: ", "First, ")) + p.choice(
            ("what state is the repo in?", "show me what is going on.", "check the basics.")))
        for k in range(n_hist):
            if k:
                b.step()  # the first history call shares the step of the request it answers
            eco[p.choice(tuple(eco))](c)
            b.say(p.choice(("Noted.", "Looks as expected.", "OK.", "Nothing unusual there.")))
        c.history = False
        c.settings, c.errors, c.locs, c.others = [], [], [], []
    hist_calls = c.calls
    b.step()
    b.user(p.choice(_TASKS).format(what=_WHAT[family], What=_WHAT[family].capitalize(), root=root))
    budget = p.int(4, 14)
    names: list[str] = []
    first = True
    recall: dict | None = None
    while c.calls - hist_calls < budget:
        if not first:  # the first call shares the step of the task message
            b.step()
        first = False
        acts = [a for a, (_f, ok) in _ACTS.items() if ok(c)]
        if acts and p.chance(0.5):
            name = p.choice(acts)
            _ACTS[name][0](c)
        else:
            name = _draw(p, eco, names)
            eco[name](c)
            # several calls per step where natural: a second look in the same step
            if p.chance(0.3) and c.calls - hist_calls < budget:
                eco[_draw(p, eco, names)](c)
        c.kinds.append(name)
        if p.chance(0.5):
            b.say(p.choice(("Next.", "That narrows it down.", "OK.", "Moving on.", "Good.")))
        if recall is None and p.chance(0.5):
            recall = _recall(c, _RECALL_AGE)
    recall = recall or _recall(c, 0)
    b.step()
    b.user("Wrap up: what did you find?")
    left = [f for f, _ in c.errors] + [s.fid for s in c.settings]
    if left:
        b.use(left[0])
        b.finish(f"Done; still open: {b.text_of(left[0])}")
    else:
        b.finish("Done; everything found is fixed.")
    meta = {"generator": "data_gen.synthetic.procedural", "ecosystem": family, "step_kinds": c.kinds,
            "history_steps": n_hist, "tool_calls": c.calls, "recall": recall}
    session = b.build(session_id(family, seed, size), meta)
    session.tools = json.loads(json.dumps(POCKET_TOOLS))
    return session.validate()


# --------------------------------------------------------------------------- the recall episode
# Once a detail is a few steps old, the user asks for it exactly as an earlier command
# showed it. Where the kernel has folded that output and no summary quotes the detail, the
# label is a recovery call (search_context / decompress of the block, then the answer with
# the restored text); where it is still in view (raw or quoted by a summary), the same
# question is a counter-lesson (an ordinary answer). One question per session.

_RECALL_ASKS = ("What did `{cmd}` show, exactly?", "Remind me: what exactly did `{cmd}` print?",
                "Quote what `{cmd}` gave us earlier, exactly.",
                "What was the exact output of `{cmd}` again?")
_RECALL_ANSWERS = ("`{cmd}` showed: {text}", "It printed: {text}", "Exactly: {text}")


# Steps between the output and the question. The first fold of a silent pocket window comes
# a few steps into a session, and a row must stay short to fit the pocket bound (the fixed
# prompt is half of it), so the question comes (half the time, at each step) as soon as an
# unused detail is this old, or at the session's end if none was asked. Measured at the
# recovery window (configs/data/pocket_proc.yaml): at 3 the detail is mostly still raw in
# view; at 4 about one in five sessions makes a recovery call that fits the bound.
_RECALL_AGE = 4


def _recall(c: _Ctx, age: int) -> dict | None:
    """Ask for a detail no finished step has used, shown at least ``age`` steps ago (a summary was
    free to drop it); None when there is none.

    Mostly the oldest such detail (likely folded by now), else the newest (likely in view),
    so the same question is asked on both sides of a fold."""
    used = {fid for st in c.b.steps for fid in st.uses}
    facts = [f for f in c.b.facts if f.id not in used and _command_of(c, f.message)
             and _steps_since(c, f.message) >= age]  # the earlier request's details count too
    if not facts:
        return None
    # A value among several is what a pocket summary may drop; an error string or a lone
    # value it must keep (the checker's floors), so asking for one teaches no recovery.
    facts = [f for f in facts if f.kind == "exact_values"] or facts
    f = facts[0] if c.p.chance(0.7) else facts[-1]
    cmd = _command_of(c, f.message)
    question = c.p.choice(_RECALL_ASKS).format(cmd=cmd)
    k = c.b.probe(question, f.id, c.p.choice(_RECALL_ANSWERS).format(cmd=cmd, text=f.text))
    return {"step": k, "fact": f.id, "command": cmd}


def _steps_since(c: _Ctx, msg: int) -> int:
    """Steps since message ``msg``: the closed steps begun after it, plus the open one."""
    return sum(1 for st in c.b.steps if st.start > msg) + 1


def _command_of(c: _Ctx, result: int) -> str | None:
    """The shell command whose output is message ``result`` (None for another tool)."""
    call = c.b.messages[result - 1] if result else {}
    for tc in call.get("tool_calls") or []:
        if tc["function"]["name"] == "execute_bash":
            return json.loads(tc["function"]["arguments"]).get("command")
    return None


def _draw(p: Picker, eco: dict[str, Callable[[_Ctx], None]], bag: list[str]) -> str:
    """The next inspection kind: the ecosystem's kinds in a fresh random order, then again."""
    if not bag:
        bag.extend(p.shuffle(list(eco)))
    return bag.pop()


def generator(family: str) -> Callable[[int, SessionSize], Session]:
    def generate(seed: int, size: SessionSize = DEFAULT_SIZE) -> Session:
        return _generate(family, seed, size)

    generate.__doc__ = f"One procedural {family} session for ``seed`` (``size`` only keys its id)."
    return generate
