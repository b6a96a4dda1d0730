"""TypeScript repository grown task by task: create, test, refactor, rename, retune.

Shape: every step after the first opens with a short user request. Modules are created
(their signatures are facts later tests use), compile errors are fixed on the spot (used
within the step), constants are extracted and retuned (the value history is probe
material), and symbols are renamed so the old name becomes obsolete: steps after a rename
use the rename request, no longer the old signature.
"""

from __future__ import annotations

import json

from doctrine.session import Session

from ._code import ts_module
from ._render import (
    Repo,
    bash_output,
    grep_output,
    jest_run,
    node_stack,
    tree_view,
    tsc_output,
    unified_diff,
)
from ._text import NOUNS, VERBS, Picker
from ._tools import DEFAULT_SIZE, SessionBuilder, SessionSize, session_id

FAMILY = "ts_repo"
_CYCLE = ("create", "test", "refactor", "create", "rename", "test", "retune", "create", "test", "rename")


class _Fn:
    """A function the session created or found, with the fact that names it now."""

    def __init__(self, name: str, module: str, type_name: str, sig: str, fact: str):
        self.name, self.module, self.type_name, self.sig, self.fact = name, module, type_name, sig, fact
        self.tested = False


def generate(seed: int, size: SessionSize = DEFAULT_SIZE) -> Session:
    """One ts_repo session for ``seed`` at ``size``."""
    p = Picker(f"{FAMILY}:{seed}")
    bounds = size.tool_output_lines
    proj = p.project()
    root = f"/workspace/{proj}"
    repo = Repo(root)
    ttl = p.choice([15_000, 30_000, 60_000, 120_000])
    ttl_text = f"export const CACHE_TTL_MS = {ttl:_};"
    repo.create("package.json", json.dumps({
        "name": proj, "version": p.version((0, 2)), "private": True,
        "scripts": {"build": "tsc -p .", "test": "jest", "typecheck": "tsc --noEmit"},
        "devDependencies": {"typescript": "5.4.5", "jest": "29.7.0", "ts-jest": "29.1.2", "@types/jest": "29.5.12"},
    }, indent=2).split("\n"))
    repo.create("tsconfig.json", json.dumps({"compilerOptions": {
        "target": "ES2022", "module": "commonjs", "strict": True, "outDir": "dist", "rootDir": "."},
        "include": ["src", "tests"]}, indent=2).split("\n"))
    repo.create("src/logger.ts", ["export const logger = {", "  debug: (..._args: unknown[]) => undefined,", "};"])
    repo.create("src/cache.ts", ts_module(p, [[ttl_text, "", "export function isFresh(storedAt: number, now: number): boolean {",
                                              "  return now - storedAt < CACHE_TTL_MS;", "}"]], p.lines(bounds, 2.0)))
    repo.create("src/index.ts", ["export * from './cache';"])
    b = SessionBuilder(FAMILY, seed)
    b.system()
    b.step()
    # ---------------------------------------------------------------- goal and exploration
    rules = ["Keep `strict` on in tsconfig.json and use no `any` in new code.",
             "Every exported function gets a jest test under tests/.",
             "Named exports only; re-export new modules from src/index.ts."]
    u = b.user(f"We are growing the {proj} TypeScript library over a series of small tasks. Ground rules for all of them:\n"
               + "\n".join(f"- {r}" for r in rules) + "\nStart by getting familiar with the repo.")
    f_strict, f_tests, f_exports = (b.fact(r, "user_intent", u) for r in rules)
    b.offer_probe(f_tests, "Remind me: what was the rule about tests?")
    b.editor({"command": "view", "path": root}, tree_view(root, list(repo.files)), "Looking at the layout first.")
    r = b.editor({"command": "view", "path": repo.abs("package.json")}, repo.view("package.json"))
    b.fact('"typescript": "5.4.5"', "exact_values", r)  # noise: never needed again
    r = b.editor({"command": "view", "path": repo.abs("src/cache.ts")}, repo.view("src/cache.ts"))
    f_ttl = b.fact(ttl_text, "exact_values", r)
    b.offer_probe(f_ttl, "What was the cache TTL constant when the session started? Quote the line.")
    b.say(f"A small library: src/cache.ts holds `CACHE_TTL_MS` ({ttl} ms) and `isFresh`; tests run with jest via ts-jest.")
    st = {"fns": [], "ttl_fact": f_ttl, "ttl_file": "src/cache.ts", "ttl": ttl, "jest_failed": False,
          "rules": (f_strict, f_tests, f_exports), "diffs": {}}
    b.probes_due(size, 1)
    done = 1
    k = 0
    while done < size.steps - 1:
        kind = _CYCLE[k % len(_CYCLE)]
        k += 1
        if kind in ("test", "rename") and not st["fns"]:
            continue
        if kind == "retune" and st["ttl_file"] == "src/cache.ts":
            continue
        if kind == "refactor" and st["ttl_file"] != "src/cache.ts":
            continue
        b.step()
        _TASKS[kind](b, p, repo, st, bounds)
        done += 1
        b.probes_due(size, done)
    # ---------------------------------------------------------------- wrap-up
    b.step()
    b.user("Good. Run the full checks and give me a summary of the public API as it stands now.")
    b.use(*st["rules"], *(fn.fact for fn in st["fns"]))
    b.bash(f"cd {root} && npx tsc --noEmit", bash_output("", 0))
    suites = [(f"tests/{fn.module.split('/')[-1][:-3]}.test.ts", [(f"{fn.name} {t}", True) for t in _cases(p)])
              for fn in st["fns"] if fn.tested]
    b.bash(f"cd {root} && npx jest", bash_output(jest_run(p, suites or [("tests/cache.test.ts", [("isFresh", True)])]), 0))
    api = "\n".join(f"- `{fn.sig}` in {fn.module}" for fn in st["fns"])
    b.finish(f"tsc and jest are clean. Public API:\n- `isFresh(storedAt: number, now: number): boolean` in src/cache.ts\n{api}\n"
             f"Cache TTL: {st['ttl']} ms in {st['ttl_file']}.")
    b.use(st["ttl_fact"])
    meta = {"generator": "data_gen.synthetic", "workload": "typescript repository", "project": proj,
            "size": {"steps": size.steps, "tool_output_lines": list(bounds), "probes": size.probes}}
    return b.build(session_id(FAMILY, seed, size), meta)


def _cases(p: Picker) -> list[str]:
    return ["returns null for empty input", "parses id and value", "honours the fallback option",
            "rejects a missing value in strict mode"][: p.int(2, 4)]


def _create(b: SessionBuilder, p: Picker, repo: Repo, st: dict, bounds: tuple[int, int]) -> None:
    noun = p.unique(lambda: p.choice(("token", "route", "coupon", "slot", "badge", "quota", "ticket", "segment", "tariff")))
    T = noun.capitalize()
    name = p.unique(lambda: p.choice(VERBS) + T)
    path = f"src/{noun}.ts"
    b.user(f"Add a module {path} with a `{name}` function that turns a raw `id:value` string into a `{T}`.")
    b.use(st["rules"][0], st["rules"][2])
    sig = f"export function {name}(input: string, opts: {T}Options = {{}}): {T} | null"
    block = [f"export interface {T}Options {{", "  strict?: boolean;", "  fallback?: string;", "}", "",
             f"export interface {T} {{", "  id: string;", "  value: string;", "}", "",
             f"/** Turn a raw `id:value` string into a {T}. */", sig + " {", "  const trimmed = input.trim();",
             "  if (!trimmed) {", "    return opts.fallback ? { id: opts.fallback, value: '' } : null;", "  }",
             "  const [id, value = ''] = trimmed.split(':');", f"  const parsed: {T} = {{ id, value }};",
             "  return opts.strict && !value ? undefined : parsed;", "}"]
    lines = ts_module(p, [block], p.lines(bounds, 2.0))
    r = b.editor({"command": "create", "path": repo.abs(path), "file_text": "\n".join(lines)}, repo.create(path, lines),
                 f"Creating {path}.")
    f_sig = b.fact(sig, "signatures", r - 1)
    ln = repo.line_of(path, "? undefined : parsed")
    err = f"error TS2322: Type 'undefined' is not assignable to type '{T} | null'."
    out = tsc_output([(path, ln, 3, "TS2322", f"Type 'undefined' is not assignable to type '{T} | null'.")])
    r = b.bash(f"cd {repo.root} && npx tsc --noEmit", bash_output(out, 2), "Type-checking.")
    f_loc = b.fact(f"{path}({ln},3)", "paths_with_lines", r)
    f_err = b.fact(err, "error_strings", r)
    b.use(f_loc, f_err)
    out = repo.replace(path, "? undefined : parsed", "? null : parsed")
    b.editor({"command": "str_replace", "path": repo.abs(path), "old_str": "? undefined : parsed", "new_str": "? null : parsed"},
             out, f"Line {ln} returns undefined where the signature promises `{T} | null`; returning null instead.")
    n = len(repo.files["src/index.ts"])
    export = f"export * from './{noun}';"
    b.editor({"command": "insert", "path": repo.abs("src/index.ts"), "insert_line": n, "new_str": export},
             repo.insert("src/index.ts", n, [export]), "Re-exporting it from src/index.ts, per the ground rules.")
    b.bash(f"cd {repo.root} && npx tsc --noEmit", bash_output("", 0))
    st["fns"].append(_Fn(name, path, T, sig, f_sig))
    b.offer_probe(f_sig, f"What is the exact signature of the function you created in {path}?")


def _test(b: SessionBuilder, p: Picker, repo: Repo, st: dict, bounds: tuple[int, int]) -> None:
    fn = next((f for f in st["fns"] if not f.tested), st["fns"][-1])
    b.user(f"Write jest tests for `{fn.name}`.")
    b.use(fn.fact, st["rules"][1])
    tpath = f"tests/{fn.module.split('/')[-1][:-3]}.test.ts"
    cases = _cases(p)
    body = [f"import {{ {fn.name} }} from '../{fn.module[:-3]}';", "", f"describe('{fn.name}', () => {{"]
    for i, c in enumerate(cases):
        arg, key, val = ("a:b", "a", "b") if i == 0 else (f"k{i}:v{i}", f"k{i}", f"v{i}")
        body += [f"  it('{c}', () => {{", f"    expect({fn.name}('{arg}')).toEqual({{ id: '{key}', value: '{val}' }});",
                 "  });", ""]
    body += ["});"]
    r = b.editor({"command": "create", "path": repo.abs(tpath), "file_text": "\n".join(body)}, repo.create(tpath, body),
                 f"Tests for {fn.name} in {tpath}.")
    others = [(f"tests/{q.module.split('/')[-1][:-3]}.test.ts", [(f"{q.name} {c}", True) for c in _cases(p)])
              for q in st["fns"] if q.tested]
    many = [(f"tests/{p.choice(NOUNS)}{p.choice(('', 'Store', 'Format', 'Client'))}.test.ts", [(p.sentence()[:-1].lower(), True)
                                                                          for _ in range(p.int(2, 5))])
            for i in range(max(1, p.lines(bounds, 0.25)))]
    if not st["jest_failed"]:
        st["jest_failed"] = True
        ln = repo.line_of(tpath, "toEqual") + 0
        fail = [f"{fn.name} › {cases[0]}", ["expect(received).toEqual(expected) // deep equality", "",
                "Expected: {\"id\": \"a\", \"value\": \"b\"}", "Received: null", ""]
                + node_stack("", [("Object.<anonymous>", tpath, ln, 35)]).split("\n")[1:]]
        out = jest_run(p, others + many + [(tpath, [(c, i != 0) for i, c in enumerate(cases)])], [fail])
        r = b.bash(f"cd {repo.root} && npx jest", bash_output(out, 1))
        f_loc = b.fact(f"{tpath}:{ln}:35", "paths_with_lines", r)
        b.use(f_loc)
        new = f"    expect({fn.name}('')).toBeNull();"
        old = repo.files[tpath][ln - 1]
        out = repo.replace(tpath, old, new)
        b.editor({"command": "str_replace", "path": repo.abs(tpath), "old_str": old, "new_str": new}, out,
                 "The first case feeds 'a:b' but claims to test empty input; asserting null for '' instead.")
    fn.tested = True
    out = jest_run(p, others + many + [(tpath, [(c, True) for c in cases])])
    b.bash(f"cd {repo.root} && npx jest", bash_output(out, 0))


def _refactor(b: SessionBuilder, p: Picker, repo: Repo, st: dict, bounds: tuple[int, int]) -> None:
    b.user("Move the cache TTL constant out of src/cache.ts into a new src/config.ts and import it from there.")
    b.use(st["ttl_fact"], st["rules"][2])
    line = next(ln for ln in repo.files["src/cache.ts"] if "CACHE_TTL_MS =" in ln)
    b.editor({"command": "create", "path": repo.abs("src/config.ts"), "file_text": line + "\n"},
                 repo.create("src/config.ts", [line]), "Creating src/config.ts with the constant unchanged.")
    before = list(repo.files["src/cache.ts"])
    b.editor({"command": "str_replace", "path": repo.abs("src/cache.ts"), "old_str": line + "\n", "new_str": ""},
             repo.replace("src/cache.ts", line + "\n", ""))
    imp = "import { CACHE_TTL_MS } from './config';"
    b.editor({"command": "insert", "path": repo.abs("src/cache.ts"), "insert_line": 1, "new_str": imp},
             repo.insert("src/cache.ts", 1, [imp]))
    b.bash(f"cd {repo.root} && git diff src/cache.ts", bash_output(unified_diff("src/cache.ts", before, repo.files["src/cache.ts"])))
    d = "I kept config.ts free of imports, because cache.ts and future modules must be able to import it without cycles."
    a = b.say(f"Done. {d}")
    b.fact(d, "decisions", a)
    st["ttl_file"] = "src/config.ts"


def _retune(b: SessionBuilder, p: Picker, repo: Repo, st: dict, bounds: tuple[int, int]) -> None:
    new = p.choice([v for v in (5_000, 10_000, 45_000, 90_000) if v != st["ttl"]])
    b.user(f"Product wants a shorter cache life: set the TTL to {new} ms.")
    b.use(st["ttl_fact"])
    old = repo.files["src/config.ts"][0]
    text = f"export const CACHE_TTL_MS = {new:_};"
    r = b.editor({"command": "str_replace", "path": repo.abs("src/config.ts"), "old_str": old, "new_str": text},
                 repo.replace("src/config.ts", old, text))
    b.offer_probe(st["ttl_fact"], "What was the cache TTL line before the product change? Quote it.")
    st["ttl_fact"] = b.fact(text, "exact_values", r - 1)
    st["ttl"] = new
    b.bash(f"cd {repo.root} && npx jest tests/cache.test.ts", bash_output(jest_run(p, [("tests/cache.test.ts", [
        ("isFresh is true inside the TTL", True), ("isFresh is false after the TTL", True)])]), 0))


def _rename(b: SessionBuilder, p: Picker, repo: Repo, st: dict, bounds: tuple[int, int]) -> None:
    fn = p.choice(st["fns"])
    new = p.unique(lambda: p.choice(("read", "decode", "resolve", "extract", "load")) + fn.type_name)
    ask = f"Rename `{fn.name}` to `{new}` everywhere."
    u = b.user(f"{ask} The old name must not survive anywhere, not even in comments.")
    b.use(fn.fact)
    f_ask = b.fact(ask, "user_intent", u)
    hits = repo.grep(fn.name)
    b.bash(f"cd {repo.root} && grep -rn '{fn.name}' src tests", bash_output(grep_output(hits)))
    for path in dict.fromkeys(h[0] for h in hits):
        old_lines = [ln for ln in repo.files[path] if fn.name in ln]
        for old in dict.fromkeys(old_lines):
            if "\n".join(repo.files[path]).count(old) != 1:
                continue
            repl = old.replace(fn.name, new)
            b.editor({"command": "str_replace", "path": repo.abs(path), "old_str": old, "new_str": repl},
                     repo.replace(path, old, repl))
    repo.rename(fn.name, new)  # any line not unique enough for str_replace
    b.bash(f"cd {repo.root} && grep -rn '{fn.name}' src tests; npx tsc --noEmit", bash_output("", 0))
    b.offer_probe(fn.fact, f"What was `{new}` called before the rename, and what was its full signature?")
    fn.name, fn.sig, fn.fact = new, fn.sig.replace(fn.name, new), f_ask


_TASKS = {"create": _create, "test": _test, "refactor": _refactor, "retune": _retune, "rename": _rename}
