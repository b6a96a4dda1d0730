"""Dependency migration (requests -> httpx) whose 6-step plan is stated once.

Shape: the first user message states the plan and the constraints; every later user
message says only "continue", so each step depends on the plan item it executes (a
fact of the first message, used by every step) and on the inventory of call sites taken
in the first step (each ``path:line`` used by the step that converts it). Bulky output
comes from pip, greps, file views and test runs; the final step re-checks every item.
"""

from __future__ import annotations

from doctrine.session import Session

from ._code import py_module
from ._render import Repo, bash_output, grep_output, pytest_run, unified_diff
from ._text import Picker
from ._tools import DEFAULT_SIZE, SessionBuilder, SessionSize, session_id

FAMILY = "dep_migration"


def _call_site(noun: str, verb: str) -> list[str]:
    return [f"def {verb}_{noun}(item_id: str, payload: dict | None = None) -> dict:",
            f'    """{verb.capitalize()} one {noun} through the upstream API."""',
            "    try:",
            f'        resp = requests.{"post" if verb in ("push", "send") else "get"}(f"{{BASE_URL}}/{noun}s/{{item_id}}", '
            + ("json=payload, " if verb in ("push", "send") else "") + "timeout=5)",
            "        resp.raise_for_status()",
            "    except requests.exceptions.RequestException as exc:",
            f'        logger.warning("{verb}_{noun} failed: %s", exc)',
            "        raise",
            "    return resp.json()"]


def generate(seed: int, size: SessionSize = DEFAULT_SIZE) -> Session:
    """One dep_migration session for ``seed`` at ``size``."""
    p = Picker(f"{FAMILY}:{seed}")
    bounds = size.tool_output_lines
    proj = p.project().replace("-", "_")
    root = f"/workspace/{proj}"
    repo = Repo(root)
    version = p.choice(["0.27.0", "0.27.2", "0.28.1"])
    respx = p.choice(["0.21.1", "0.22.0"])
    timeout = p.choice(["5.0", "10.0", "15.0", "30.0"])
    modules = [f"{proj}/{m}.py" for m in p.sample(["api", "sync", "webhooks", "billing", "catalog"], 3)]
    for path in modules:
        nouns = [p.unique(p.noun) for _ in range(p.int(1, 2))]  # unique nouns keep call lines unique
        blocks = [_call_site(n, p.choice(["fetch", "load", "push", "send", "refresh"])) for n in nouns]
        repo.create(path, py_module(p, blocks, p.lines(bounds, 1.5), ["import requests", "", "from .http import BASE_URL"]))
    repo.create(f"{proj}/http.py", py_module(p, [[
        'BASE_URL = "https://api.internal.example/v2"', "", "",
        "def make_session() -> requests.Session:", '    """The one HTTP session of the process."""',
        "    session = requests.Session()", "    session.mount(\"https://\", HTTPAdapter(max_retries=3))",
        "    return session"]], p.lines(bounds), ["import requests", "from requests.adapters import HTTPAdapter"]))
    reqs = sorted(["requests==2.31.0", "pydantic==2.7.4", "structlog==24.2.0", "tenacity==8.3.0", "click==8.1.7"])
    repo.create("requirements.txt", reqs)
    repo.create("requirements-dev.txt", ["pytest==8.3.2", "responses==0.25.3", "mypy==1.10.0"])
    repo.create("tests/conftest.py", ["import pytest", "import responses", "", "", "@pytest.fixture",
                                      "def mocked():", "    with responses.RequestsMock() as rsps:", "        yield rsps"])

    b = SessionBuilder(FAMILY, seed)
    b.system()
    b.step()
    # ---------------------------------------------------------------- the plan, stated once
    items = [f"Pin `httpx=={version}` in requirements.txt and drop `requests`.",
             f"Replace `requests.Session()` in {proj}/http.py with one shared `httpx.Client(timeout={timeout})`.",
             f"Convert every `requests.get` / `requests.post` call under {proj}/ to the shared client.",
             "Map `requests.exceptions.RequestException` handlers to `httpx.HTTPError`.",
             f"Switch tests/conftest.py from `responses` to `respx=={respx}`.",
             f"Run the full test suite and `mypy {proj}`; both must be clean."]
    rules = [f"Do not change the signatures of the public functions in {proj}/.", "Do one plan step per turn, then stop and wait."]
    u = b.user(f"We are migrating {proj} from requests to httpx. Here is the plan; I will only say \"continue\" from now on, "
               "so keep it in mind:\n" + "\n".join(f"{i}. {t}" for i, t in enumerate(items, 1))
               + "\n\nConstraints:\n" + "\n".join(f"- {r}" for r in rules) + "\n\nStart with an inventory of what uses requests.")
    f_items = [b.fact(t, "user_intent", u) for t in items]
    f_rules = [b.fact(r, "user_intent", u) for r in rules]
    b.offer_probe(f_items[3], "What does step 4 of the migration plan say, exactly?")
    b.offer_probe(f_items[0], "Which httpx version does the plan pin? Quote the plan step.")
    hits = repo.grep("requests")
    r = b.bash(f"cd {root} && grep -rn 'requests' {proj}/ tests/", bash_output(grep_output(hits)),
               "Inventory first: every place that touches requests.")
    sites = {}
    for path, ln, text in hits:
        if "requests.get(" in text or "requests.post(" in text:
            sites.setdefault(path, []).append((ln, b.fact(f"{path}:{ln}", "paths_with_lines", r)))
            if len(sites) == 1 and len(sites[path]) == 1:
                b.offer_probe(sites[path][0][1], f"In the first inventory, on which line of {path} was the first requests call?")
    freeze = [f"{n}=={p.version()}" for n in p.sample(["anyio", "certifi", "charset-normalizer", "idna", "urllib3",
                                                         "sniffio", "h11", "annotated-types", "typing_extensions",
                                                         "pydantic_core", "packaging", "pluggy", "iniconfig"], 13)]
    freeze += [f"pkg-{p.hex(4)}=={p.version()}" for _ in range(p.lines(bounds, 0.3))]
    b.bash("pip freeze", bash_output("\n".join(sorted(freeze + reqs)), 0))
    n_sites = sum(len(v) for v in sites.values())
    b.say(f"{n_sites} call sites in {len(sites)} modules, the session factory in {proj}/http.py, and the test fixture. "
          "Ready for step 1.")
    st = {"root": root, "proj": proj, "sites": sites, "items": f_items, "rules": f_rules, "timeout": timeout,
          "version": version, "respx": respx, "decision": None, "question": None, "before": {}}

    # ---------------------------------------------------------------- units of work -> steps
    units = [(0, None), (1, None)] + [(2, path) for path in sites] + [(3, None), (4, None)]
    slots = size.steps - 2
    if slots < len(units):  # fewer steps than units: several units per "continue"
        groups = [units[round(i * len(units) / slots): round((i + 1) * len(units) / slots)] for i in range(slots)]
    else:  # more steps than units: checkpoints (diff + tests) after the units, round robin
        after = [0] * len(units)
        for i in range(slots - len(units)):
            after[i % len(units)] += 1
        groups = []
        for (item, arg), n_check in zip(units, after, strict=True):
            groups += [[(item, arg)]] + [[("check", item)]] * n_check
    b.probes_due(size, 1)
    for n, group in enumerate(groups, start=2):
        b.step()
        b.user("continue")
        b.use(*f_rules)
        for item, arg in group:
            if item == "check":
                _check(b, p, repo, st, arg, bounds)
            else:
                b.use(f_items[item])
                _UNITS[item](b, p, repo, st, arg, bounds)
        b.probes_due(size, n)
    # ---------------------------------------------------------------- step 6: verify everything
    b.step()
    b.user("continue")
    b.use(*f_items, *f_rules, st["decision"], st["question"])
    tests = [(f"tests/test_{m.split('/')[-1][:-3]}.py::test_{p.snake()}", True) for m in modules for _ in range(p.int(3, 6))]
    b.bash(f"cd {root} && python -m pytest -q", bash_output(pytest_run(p, root, tests), 0), "Step 6: full suite and mypy.")
    b.bash(f"cd {root} && mypy {proj}", bash_output(f"Success: no issues found in {len(repo.files)} source files", 0))
    b.bash(f"cd {root} && grep -rn 'requests' {proj}/ tests/ requirements*.txt", bash_output("", 1))
    done = "\n".join(f"{i}. done" for i in range(1, 7))
    msg = f"Migration complete; all six plan steps are done:\n{done}\nhttpx=={version}, shared client timeout {timeout}s."
    if st["question"]:
        msg += " Still open: " + b.text_of(st["question"])
    b.finish(msg)
    meta = {"generator": "data_gen.synthetic", "workload": "dependency migration", "project": proj, "plan_steps": 6,
            "size": {"steps": size.steps, "tool_output_lines": list(bounds), "probes": size.probes}}
    return b.build(session_id(FAMILY, seed, size), meta)


def _pin(b, p, repo, st, arg, bounds) -> None:
    b.editor({"command": "view", "path": repo.abs("requirements.txt")}, repo.view("requirements.txt"),
             "Plan step 1: the pin.")
    new = f"httpx=={st['version']}"
    st["before"]["requirements.txt"] = list(repo.files["requirements.txt"])
    b.editor({"command": "str_replace", "path": repo.abs("requirements.txt"), "old_str": "requests==2.31.0", "new_str": new},
             repo.replace("requirements.txt", "requests==2.31.0", new))
    deps = ["anyio-4.4.0", "certifi-2024.7.4", "h11-0.14.0", f"httpcore-1.0.{p.int(2, 6)}", "idna-3.7", "sniffio-1.3.1"]
    log = []
    for d in deps + [f"httpx-{st['version']}"]:
        name, _, ver = d.rpartition("-")
        log += [f"Collecting {name}=={ver}" if name == "httpx" else f"Collecting {name}>=0 (from httpx=={st['version']})",
                f"  Downloading {name.replace('-', '_')}-{ver}-py3-none-any.whl ({p.int(20, 900)} kB)",
                f"     ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ {p.int(20, 900)}.0/{p.int(20, 900)}.0 kB {p.float(1, 40)} MB/s eta 0:00:00"]
    log += [f"Requirement already satisfied: {r}" for r in repo.files["requirements.txt"] if "httpx" not in r]
    log += ["Installing collected packages: " + ", ".join(d.rpartition("-")[0] for d in deps) + ", httpx",
            "Successfully installed " + " ".join(deps + [f"httpx-{st['version']}"])]
    r = b.bash(f"cd {st['root']} && pip install -r requirements.txt", bash_output("\n".join(log), 0))
    b.fact(log[-1], "exact_values", r)  # noise: nobody needs the install line again


def _client(b, p, repo, st, arg, bounds) -> None:
    path = f"{st['proj']}/http.py"
    b.editor({"command": "view", "path": repo.abs(path)}, repo.view(path), "Plan step 2: the shared client.")
    old = "\n".join(["def make_session() -> requests.Session:", '    """The one HTTP session of the process."""',
                     "    session = requests.Session()", "    session.mount(\"https://\", HTTPAdapter(max_retries=3))",
                     "    return session"])
    new = "\n".join([f"client = httpx.Client(timeout={st['timeout']}, transport=httpx.HTTPTransport(retries=3))", "", "",
                     "def make_session() -> httpx.Client:", '    """The one HTTP client of the process."""', "    return client"])
    st["before"][path] = list(repo.files[path])
    decision = "I create the client at import time, because the plan asks for one shared client and the service is single-process."
    r = b.editor({"command": "str_replace", "path": repo.abs(path), "old_str": old, "new_str": new},
                 repo.replace(path, old, new), decision)
    st["decision"] = b.fact(decision, "decisions", r - 1)
    b.offer_probe(st["decision"], "Why did you create the httpx client where you did?")
    for a, c in (("import requests", "import httpx"), ("from requests.adapters import HTTPAdapter\n", "")):
        b.editor({"command": "str_replace", "path": repo.abs(path), "old_str": a, "new_str": c}, repo.replace(path, a, c))
    q = "does anything rely on requests' retry back-off, which httpx transports do not implement?"
    a = b.say(f"Client in place. Open question for later: {q}")
    st["question"] = b.fact(q, "open_questions", a)
    b.offer_probe(st["question"], "Which open question did you note while replacing the session?")


def _convert(b, p, repo, st, path, bounds) -> None:
    b.use(st["decision"], *(fid for _, fid in st["sites"][path]))
    st["before"][path] = list(repo.files[path])
    b.editor({"command": "view", "path": repo.abs(path)}, repo.view(path), f"Plan step 3 for {path}.")
    for a, c in (("import requests", "import httpx"), ("from .http import BASE_URL", "from .http import BASE_URL, client")):
        b.editor({"command": "str_replace", "path": repo.abs(path), "old_str": a, "new_str": c}, repo.replace(path, a, c))
    for ln, _ in st["sites"][path]:
        old = repo.files[path][ln - 1].strip()
        new = old.replace("requests.", "client.").replace(", timeout=5", "")
        b.editor({"command": "str_replace", "path": repo.abs(path), "old_str": old, "new_str": new},
                 repo.replace(path, old, new), f"Line {ln}.")
    name = path.split("/")[-1][:-3]
    tests = [(f"tests/test_{name}.py::test_{p.snake()}", True) for _ in range(p.lines(bounds, 0.15))]
    b.bash(f"cd {st['root']} && python -m pytest tests/test_{name}.py -v",
           bash_output(pytest_run(p, st["root"], tests, verbose=True), 0))


def _exceptions(b, p, repo, st, arg, bounds) -> None:
    old = "except requests.exceptions.RequestException as exc:"
    hits = repo.grep(old)
    b.bash(f"cd {st['root']} && grep -rn 'RequestException' {st['proj']}/", bash_output(grep_output(hits)),
           "Plan step 4: exception handlers.")
    for path in dict.fromkeys(h[0] for h in hits):
        text = "\n".join(repo.files[path])
        repo.files[path] = text.replace(old, "except httpx.HTTPError as exc:").split("\n")
        b.bash(f"cd {st['root']} && sed -i 's/except requests.exceptions.RequestException/except httpx.HTTPError/' {path}",
               bash_output("", 0))
    path, [(ln, _)] = next(iter(st["sites"].items()))[0], next(iter(st["sites"].values()))[:1]
    func = next(t for t in reversed(repo.files[path][:ln]) if t.startswith("def ")).split("(")[0][4:]
    test = f"test_{func}_retries_on_503"
    tfile = f"tests/test_{path.split('/')[-1]}"
    tests = [(f"tests/test_{p.snake()}.py::test_{p.snake()}", True) for _ in range(p.lines(bounds, 0.2))]
    tests.append((f"{tfile}::{test}", False))
    err = "httpx.ConnectError: [Errno 111] Connection refused"
    tb = [f"{tfile}:{p.int(20, 80)}: in {test}", f'    result = {func}("o-1")',
          f"{path}:{ln}: in {func}", f"    {repo.files[path][ln - 1].strip()}", f"E   {err}"]
    r = b.bash(f"cd {st['root']} && python -m pytest -q --tb=short",
               bash_output(pytest_run(p, st["root"], tests, [(test, tb)]), 1))
    f_err = b.fact(err, "error_strings", r)
    b.offer_probe(f_err, "What exact error did the test run show right after the exception handlers were changed?")
    b.say("One failure, expected: the fixtures still mock requests through `responses`, so httpx reaches the network. "
              "That is plan step 5.")
    st["pending_error"] = f_err


def _fixtures(b, p, repo, st, arg, bounds) -> None:
    b.use(st.get("pending_error"))
    path = "tests/conftest.py"
    b.editor({"command": "view", "path": repo.abs(path)}, repo.view(path), "Plan step 5: the test fixtures.")
    old = "\n".join(repo.files[path])
    new = ["import pytest", "import respx", "", "", "@pytest.fixture", "def mocked():",
           "    with respx.mock(assert_all_called=False) as router:", "        yield router"]
    b.editor({"command": "create", "path": repo.abs(path), "file_text": "\n".join(new)}, repo.create(path, new))
    b.bash(f"cd {st['root']} && git diff tests/conftest.py", bash_output(unified_diff(path, old.split("\n"), new)))
    dev = "responses==0.25.3"
    b.editor({"command": "str_replace", "path": repo.abs("requirements-dev.txt"), "old_str": dev,
              "new_str": f"respx=={st['respx']}"}, repo.replace("requirements-dev.txt", dev, f"respx=={st['respx']}"))


def _check(b, p, repo, st, after_item, bounds) -> None:
    b.use(st["items"][after_item])
    diffs = "\n".join(unified_diff(path, old, repo.files[path]) for path, old in st["before"].items())
    b.bash(f"cd {st['root']} && git diff --stat && git diff", bash_output(diffs or "", 0),
           f"Before moving on, a checkpoint on plan step {after_item + 1}: the diff so far and the tests.")
    tests = [(f"tests/test_{p.snake()}.py::test_{p.snake()}", True) for _ in range(p.lines(bounds, 0.3))]
    b.bash(f"cd {st['root']} && python -m pytest -v", bash_output(pytest_run(p, st["root"], tests, verbose=True), 0))
    b.say(f"Checkpoint clean; plan step {after_item + 1} holds.")


_UNITS = {0: _pin, 1: _client, 2: _convert, 3: _exceptions, 4: _fixtures}
