"""The harness: resumable runs, manifests only when complete, malformed output counted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.harness import load_results, plan, run_eval
from eval.recipe import EvalRecipe
from plumbing.chat_backend import Backend, BackendError, Completion, reply_from_text
from plumbing.recipe_loader import load_config
from plumbing.runs import read_manifest

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "configs/eval/smoke.yaml"


def recipe(**over) -> EvalRecipe:
    items = [f"{k}={json.dumps(v)}" for k, v in over.items()]
    return load_config(SMOKE, EvalRecipe, items)


def test_plan_covers_every_arm_case_window_seed():
    r = recipe(seeds=[0, 1], windows=[4000, 6000])
    jobs = plan(r, SMOKE.parent)
    scripted = [j for j in jobs if j.workload == "scripted"]
    held = [j for j in jobs if j.workload == "held_out"]
    assert len(scripted) == 11 * 2 * 2 * 2 and len(held) == 3 * 6 * 2 * 2
    assert len({(j.arm, j.case_id, j.seed) for j in jobs}) == len(jobs)


def test_a_workload_runs_only_the_arms_it_names():
    base = recipe()
    wls = [w.model_dump() for w in base.workloads]
    for w in wls:
        if w["name"] == "held_out":
            w["arms"] = ["base_slim"]
    jobs = plan(recipe(workloads=wls), SMOKE.parent)
    assert {j.arm for j in jobs if j.workload == "held_out"} == {"base_slim"}
    assert {j.arm for j in jobs if j.workload == "scripted"} == {j.arm for j in plan(base, SMOKE.parent)
                                                                 if j.workload == "scripted"}
    with pytest.raises(ValueError, match="subset of the recipe's arms"):
        recipe(workloads=wls, arms=["full", "doctrine"])  # base_slim is not an arm of this recipe


def test_kill_and_resume(tmp_path):
    r = recipe(arms=["full", "n_latest_10", "base_slim"], concurrency=1)
    out = tmp_path / "eval"
    first = run_eval(r, out, base_dir=SMOKE.parent, max_jobs=3, log=lambda s: None)
    assert first.ran == 3 and not first.complete
    assert read_manifest(out) is None  # interrupted: no manifest
    status = json.loads((out / "status.json").read_text())
    assert status["complete"] is False and status["done"] == 3
    files = sorted(out.glob("cases/*/*.json"))
    before = {p: p.read_bytes() for p in files}
    second = run_eval(r, out, base_dir=SMOKE.parent, log=lambda s: None)
    assert second.skipped == 3 and second.ran == second.total - 3 and second.complete
    assert all(p.read_bytes() == b for p, b in before.items())  # finished cases were not redone
    m = read_manifest(out)
    assert m is not None and m["counts"]["cases"] == second.total
    assert m["doctrine"]["version"] == "v1" and m["config"]["backend"]["name"] == "oracle"
    third = run_eval(r, out, base_dir=SMOKE.parent, log=lambda s: None)
    assert third.ran == 0 and third.complete
    # Growing the recipe makes the run incomplete again until the new cases are done.
    bigger = recipe(arms=["full", "n_latest_10", "base_slim"], seeds=[0, 1])
    run_eval(bigger, out, base_dir=SMOKE.parent, max_jobs=1, log=lambda s: None)
    assert read_manifest(out) is None


class Garbage(Backend):
    """Answers every call with unparseable or invalid tool calls, in turn."""

    name = "garbage"

    def __init__(self):
        self.n = 0

    def _complete(self, request):
        self.n += 1
        texts = ['<tool_call>\n{"name": "compress", "arguments": {bad json\n</tool_call>',
                 '<tool_call>\n{"name": "compress", "arguments": {"content": [{"startId": "m99999", "endId": "m99998", "summary": "' + "x" * 80 + '"}]}}\n</tool_call>',
                 '<tool_call>\n{"name": "compress", "arguments": {"content": []}}\n</tool_call>']
        return reply_from_text(texts[self.n % 3], prompt_tokens=10, completion_tokens=5, latency_s=0.0)


def test_malformed_outputs_are_counted_not_fatal(tmp_path):
    r = recipe(arms=["base_slim", "auto_compact"])
    s = run_eval(r, tmp_path / "eval", backend=Garbage(), base_dir=SMOKE.parent, log=lambda s: None)
    assert s.complete
    res = [x for x in load_results(tmp_path / "eval") if x["workload"] == "scripted" and x["arm"] == "base_slim"]
    assert res
    m = res[0]["metrics"]
    assert m["malformed_calls"] > 0 and m["kernel_errors"] > 0
    assert m["compressions_succeeded"] == 0 and m["compressions_attempted"] > 0
    calls = [c for c in res[0]["calls"] if c["real"]]
    assert any(c["parse_errors"] for c in calls) and any(c["kernel_errors"] for c in calls)
    assert all("raw_text" in c and "latency_s" in c for c in calls)
    held = [x for x in load_results(tmp_path / "eval") if x["workload"] == "held_out"]
    assert held
    for x in held:  # each reply is unparseable, an empty compress, or compresses refs that are not there
        assert x["metrics"]["tool_call_valid"] is False or x["metrics"]["range_valid"] is False
        assert x["metrics"]["kind_correct"] == (x["metrics"]["label_kind"] == x["metrics"]["pred_kind"])


class Broken(Backend):
    name = "broken"

    def _complete(self, request) -> Completion:
        raise BackendError("server is down")


def test_a_failing_backend_leaves_the_run_incomplete(tmp_path):
    r = recipe(arms=["full"])
    s = run_eval(r, tmp_path / "eval", backend=Broken(), base_dir=SMOKE.parent, log=lambda s: None)
    assert not s.complete and s.failed
    assert read_manifest(tmp_path / "eval") is None
    assert json.loads((tmp_path / "eval/status.json").read_text())["complete"] is False


def test_recipe_validation():
    from plumbing.recipe_loader import ConfigError

    with pytest.raises(ConfigError, match="unknown arms"):
        load_config(SMOKE, EvalRecipe, ["arms=[full, magic]"])
    with pytest.raises(ConfigError, match="api_key_env"):
        load_config(SMOKE, EvalRecipe, ["backend.settings={api_key: sk-123}"])
    with pytest.raises(ConfigError, match="adapter_dir"):
        load_config(SMOKE, EvalRecipe, ["backend.name=hf", "backend.model=tiny:smollm2-135m-instruct"])
    for backend in ("hf", "vllm", "oracle"):  # the adapter folder has one key: the old second one is refused
        with pytest.raises(ConfigError, match=r"backend\.settings: the adapter folder is backend\.adapter_dir "
                                              r"\(its one key\), not backend\.settings\.adapter_dir"):
            load_config(SMOKE, EvalRecipe, [f"backend.name={backend}", "backend.model=tiny:smollm2-135m-instruct",
                                            "backend.settings={adapter_dir: runs/x/adapter}"])
    with pytest.raises(ConfigError, match="unknown key"):
        load_config(SMOKE, EvalRecipe, ["windowz=[1]"])


def test_a_session_id_never_leaves_the_run_folder(tmp_path):
    from eval.harness import case_path

    line = (SMOKE.parent / "fixtures/sessions.jsonl").read_text().splitlines()[0]
    evil = json.loads(line)
    evil["session_id"] = "x/../../../../elsewhere/NAME"  # from cases/<arm>/: out of --out
    twin = dict(evil, session_id="x_.._.._.._.._elsewhere_NAME")  # sanitises to the same text
    sessions = tmp_path / "sessions.jsonl"
    sessions.write_text(json.dumps(evil) + "\n" + json.dumps(twin) + "\n")
    wl = [{"name": "scripted", "settings": {"sessions": str(sessions)}}]
    r = load_config(SMOKE, EvalRecipe, ["arms=[full]", "concurrency=1", f"workloads={json.dumps(wl)}"])
    out = tmp_path / "run" / "eval"
    s = run_eval(r, out, log=lambda s: None)
    assert s.complete and s.total == 2
    outside = [p for p in tmp_path.rglob("*") if p.is_file() and out not in p.parents and p != sessions]
    assert outside == []
    files = sorted(out.glob("cases/full/*.json"))
    assert len(files) == 2  # two ids that sanitise alike still get two files
    assert {json.loads(p.read_text())["case_id"] for p in files} == {
        "scripted.x/../../../../elsewhere/NAME.w6000", "scripted.x_.._.._.._.._elsewhere_NAME.w6000"}
    # A symlinked arm folder that points out of the run is refused, not followed.
    (out / "cases" / "n_latest_10").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(ValueError, match="outside the run folder"):
        case_path(out, "n_latest_10", "scripted.a.w6000", 0)


def test_a_rerun_with_another_recipe_is_refused(tmp_path):
    from eval.harness import RunConflict

    out = tmp_path / "eval"
    base = recipe(arms=["full", "deterministic"], concurrency=1)
    assert run_eval(base, out, base_dir=SMOKE.parent, log=lambda s: None).complete
    before = (out / "manifest.json").read_bytes()
    for over in ({"gate": "default"}, {"max_tokens": 64}, {"horizon": 3}):
        with pytest.raises(RunConflict, match=f"{next(iter(over))}: .* -> .*new --out.*--force"):
            run_eval(recipe(arms=["full", "deterministic"], concurrency=1, **over), out, base_dir=SMOKE.parent,
                     log=lambda s: None)
    assert (out / "manifest.json").read_bytes() == before  # the old manifest is not rewritten
    # More seeds (or arms) is the same recipe grown: allowed, and it resumes.
    grown = run_eval(recipe(arms=["full", "deterministic"], seeds=[0, 1]), out, base_dir=SMOKE.parent,
                     log=lambda s: None)
    assert grown.complete and grown.skipped == grown.total // 2
    # --force discards the old cases and runs the new recipe from scratch.
    forced = run_eval(recipe(arms=["full"], gate="default"), out, base_dir=SMOKE.parent, log=lambda s: None,
                      force=True)
    assert forced.complete and forced.skipped == 0 and read_manifest(out)["config"]["gate"] == "default"
    assert {r["arm"] for r in load_results(out)} == {"full"}


def test_a_second_run_into_a_busy_folder_is_refused(tmp_path):
    import fcntl

    from eval.harness import RunConflict

    out = tmp_path / "eval"
    out.mkdir()
    with open(out / ".lock", "a+") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # a run in progress
        with pytest.raises(RunConflict, match="another eval run is writing into"):
            run_eval(recipe(arms=["full"]), out, base_dir=SMOKE.parent, log=lambda s: None)
    assert not list(out.glob("cases/*/*.json"))
    assert run_eval(recipe(arms=["full"]), out, base_dir=SMOKE.parent, log=lambda s: None).complete


def test_a_key_echoed_by_the_server_is_redacted(tmp_path, monkeypatch):
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class Echo(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            body = json.dumps({"error": f"invalid key {self.headers['Authorization'][7:]}"}).encode()
            self.send_response(401)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    srv = HTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    monkeypatch.setenv("DTW_LLM", "sk-echo-0123456789")  # a variable whose name says nothing
    settings = {"base_url": f"http://127.0.0.1:{srv.server_address[1]}/v1", "api_key_env": "DTW_LLM"}
    r = recipe(arms=["full"], **{"backend.name": "openai", "backend.model": "m", "backend.settings": settings})
    lines: list[str] = []
    try:
        s = run_eval(r, tmp_path / "eval", base_dir=SMOKE.parent, log=lines.append)
    finally:
        srv.shutdown()
        srv.server_close()
    status = (tmp_path / "eval/status.json").read_text()
    assert not s.complete and "invalid key ***" in status and "invalid key ***" in "\n".join(lines)
    assert "sk-echo" not in status and "sk-echo" not in "\n".join(lines) and "sk-echo" not in str(s.failed)


def _adapter_with_profiles(tmp_path, profiles):
    d = tmp_path / "adapter"
    d.mkdir()
    (d / "manifest.json").write_text(json.dumps({"stage": "adapter", "adapter": {
        "serving_profiles": [p.record() for p in profiles]}}))
    return d


def test_distilled_arm_runs_only_under_a_profile_the_adapter_was_trained_with(tmp_path):
    from doctrine.kernel.profile import resolve_profile
    from eval.harness import RunConflict, serving_profiles

    def _r(*items):
        return load_config(SMOKE, EvalRecipe, list(items))

    trained = resolve_profile(6000, "aggressive", "proxy", prompt_mode="distilled")
    adapter = _adapter_with_profiles(tmp_path, [trained])
    ok = serving_profiles(_r(f"backend.adapter_dir={adapter}"))
    assert ok["profile_mismatch"] == [] and ok["arm_profiles"]["distilled"] == {"6000": trained.sha256}
    with pytest.raises(RunConflict, match="not trained with"):
        serving_profiles(_r(f"backend.adapter_dir={adapter}", "windows=[4096]"))
    with pytest.raises(RunConflict, match="allow_profile_mismatch"):
        serving_profiles(_r(f"backend.adapter_dir={adapter}", "gate=default"))
    allowed = serving_profiles(_r(f"backend.adapter_dir={adapter}", "gate=default",
                                      "allow_profile_mismatch=true"))
    assert [m["window"] for m in allowed["profile_mismatch"]] == [6000]


# ------------------------------------------------ typed workload settings and arm_settings


def test_a_typo_in_workload_settings_fails_when_the_recipe_loads():
    from plumbing.recipe_loader import ConfigError

    with pytest.raises(ConfigError) as err:  # today: every scripted case silently dropped
        recipe(workloads=[{"name": "scripted", "settings": {"sesions": "fixtures/sessions.jsonl"}}])
    assert "scripted workload: unknown key 'settings.sesions' (did you mean 'sessions'?)" in str(err.value)
    bad = {"held_out": {"data_dir": "d", "spilt": "test"}, "marathon": {"passes": 1, "varaints": ["phase"]},
           "probes": {"source": "s", "filters": {"limt": 3}}, "agentic": {"max_turn": 3}}
    for name, settings in bad.items():
        with pytest.raises(ConfigError, match=f"{name} workload: unknown key 'settings[.a-z_]+'.*did you mean"):
            recipe(workloads=[{"name": name, "settings": settings}])
    with pytest.raises(ConfigError, match="marathon workload: settings.size"):
        recipe(workloads=[{"name": "marathon", "settings": {"size": "huge"}}])
    with pytest.raises(ConfigError, match="missing required key 'settings.source'"):
        recipe(workloads=[{"name": "probes"}])


def test_a_typo_in_arm_settings_fails_when_the_recipe_loads():
    from plumbing.recipe_loader import ConfigError

    with pytest.raises(ConfigError, match="unknown key 'arm_settings.compact_treshold' .did you mean 'compact_threshold'"):
        recipe(arm_settings={"compact_treshold": 0.5})
    with pytest.raises(ConfigError, match="arm_settings.micro_keep"):
        recipe(arm_settings={"micro_keep": "many"})
    assert recipe(arm_settings={"compact_threshold": 0.5}).arm_settings == {"compact_threshold": 0.5}


def test_arm_settings_are_declared_once_in_the_settings_groups():
    """A setting declared in a settings group (eval.arms.base.setting) is a recipe key with the
    group's type, default, bounds and description, and nothing else is: the recipe's model is
    built from the groups, not kept beside them."""
    import dataclasses

    from eval.arms import TUNABLE, CompactionSettings, EngineSettings
    from eval.arms.base import recipe_settings, setting
    from eval.recipe import ArmSettings, _settings_model
    from plumbing.recipe_loader import ConfigError

    @dataclasses.dataclass(frozen=True)
    class Group:
        internal: str = "kept out"  # a plain field: the run sets it, a recipe cannot
        new_share: float = setting(0.4, "a setting added to a group", gt=0, le=1)
        new_names: tuple[str, ...] = setting(("a",), "another one", min_length=1)

    assert recipe_settings(Group) == {"new_share": Group, "new_names": Group}
    model = _settings_model(recipe_settings(Group), "Probe", "probe")
    assert list(model.model_fields) == ["new_share", "new_names"]
    field = model.model_fields["new_share"]
    assert (field.annotation, field.default, field.description) == (float, 0.4, "a setting added to a group")
    assert model.model_validate({"new_names": ["x", "y"]}).model_dump() == {"new_share": 0.4, "new_names": ("x", "y")}
    for bad in ({"new_share": 1.5}, {"new_names": []}, {"internal": "x"}, {"new_shar": 0.5}):
        with pytest.raises(ValueError):
            model.model_validate(bad)

    @dataclasses.dataclass(frozen=True)
    class Undescribed:
        quiet: int = dataclasses.field(default=1, metadata={"description": " "})

    with pytest.raises(TypeError, match="Undescribed.quiet is a recipe setting without a description"):
        _settings_model(recipe_settings(Undescribed), "Probe", "probe")
    with pytest.raises(TypeError, match="new_share is a setting of both Group and Twin"):
        recipe_settings(Group, dataclasses.make_dataclass("Twin", [("new_share", float, setting(0.1, "again"))]))

    # The real groups: every field of the compactors' and the engine's groups is a setting, and
    # the recipe takes exactly those (its defaults are the groups', as built above).
    groups = [f.name for g in (CompactionSettings, EngineSettings) for f in dataclasses.fields(g)]
    assert set(groups) <= set(TUNABLE) and list(ArmSettings.model_fields) == list(TUNABLE)
    assert ArmSettings().model_dump() == {k: next(f.default for f in dataclasses.fields(g) if f.name == k)
                                          for k, g in TUNABLE.items()}
    with pytest.raises(ConfigError, match="unknown key 'arm_settings.gate'"):  # a KernelSettings field set by the run
        recipe(arm_settings={"gate": "pocket"})


def test_arm_env_build_puts_each_setting_in_its_group():
    from eval.arms import ArmEnv, CompactionSettings

    changed = {"deterministic_every": 7, "micro_keep": 2, "tail_share": 0.3, "lcm_fanout": 3, "search_limit": 9}
    env = ArmEnv.build(1000, len, lambda *a: "", gate="pocket", **changed)
    assert (env.kernel.deterministic_every, env.kernel.gate) == (7, "pocket")
    assert (env.compaction.micro_keep, env.compaction.tail_share) == (2, 0.3)
    assert (env.engine.lcm_fanout, env.engine.search_limit) == (3, 9)
    assert env.compaction.sliding_fraction == CompactionSettings().sliding_fraction
    with pytest.raises(TypeError, match="not an arm setting: windw"):
        ArmEnv.build(1000, len, lambda *a: "", windw=3)


def test_the_model_is_given_once():
    """backend.model and backend.settings.model are never both set: neither silently wins."""
    from plumbing.recipe_loader import ConfigError

    base = {"backend.name": "openai", "backend.settings": {"base_url": "http://x/v1", "model": "served"}}
    assert recipe(**base).backend.factory_settings()["model"] == "served"  # configs/eval/vllm_server.yaml's form
    assert recipe(**{**base, "backend.settings": {"base_url": "http://x/v1"}, "backend.model": "m"}
                  ).backend.factory_settings()["model"] == "m"
    for name, extra in (("openai", {}), ("hf", {"arms": ["full"]})):
        with pytest.raises(ConfigError, match="the model is given twice, backend.model 'm' and backend.settings.model "
                                              "'served'; give it once, as backend.model"):
            recipe(**{**base, "backend.name": name, "backend.model": "m", **extra,
                      "backend.settings": {"model": "served", **({"base_url": "http://x/v1"} if name == "openai" else {})}})
    # a reference policy drops a model backend's settings (a recipe written for one composes)
    assert recipe(**{"backend.name": "oracle", "backend.model": "m", "backend.settings": {"model": "served"}}
                  ).backend.factory_settings() == {"model": "m"}


def test_every_workload_has_a_strict_settings_model():
    from eval.workloads import WORKLOADS

    for name, cls in WORKLOADS.items():
        assert cls.Settings.model_config.get("extra") == "forbid", name


# ------------------------------------------------ typed backend settings and kernel overrides


def test_a_typo_in_backend_settings_fails_when_the_recipe_loads():
    from plumbing.recipe_loader import ConfigError

    hf = {"backend.name": "hf", "backend.model": "tiny:smollm2-135m-instruct", "arms": ["full"]}
    with pytest.raises(ConfigError) as err:  # today: HFBackend(**settings) drops it, batches of 4
        recipe(**hf, **{"backend.settings": {"batch_sise": 2}})
    assert "hf backend: unknown key 'backend.settings.batch_sise' (did you mean 'batch_size'?)" in str(err.value)
    with pytest.raises(ConfigError, match="hf backend: backend.settings.batch_size: Input should be a valid integer"):
        recipe(**hf, **{"backend.settings": {"batch_size": "2"}})  # int("2") would hide it; strict
    with pytest.raises(ConfigError, match="vllm backend: backend.settings.gpu_memory_utilization"):
        recipe(**dict(hf, **{"backend.name": "vllm"}), **{"backend.settings": {"gpu_memory_utilization": 1.5}})
    with pytest.raises(ConfigError, match="openai backend: unknown key 'backend.settings.base_uri'"):
        recipe(**{"backend.name": "openai", "backend.model": "m", "backend.settings": {"base_uri": "http://x/v1"}})
    with pytest.raises(ConfigError, match="the openai backend needs backend.settings.base_url"):
        recipe(**{"backend.name": "openai", "backend.model": "m"})
    with pytest.raises(ConfigError, match="the hf backend needs backend.model"):
        recipe(**{"backend.name": "hf", "arms": ["full"]})
    with pytest.raises(ConfigError, match="oracle backend: unknown key 'backend.settings.temprature'"):
        recipe(**{"backend.settings": {"temprature": 0.5}})  # the reference policies take none
    ok = recipe(**hf, **{"backend.settings": {"batch_size": 2, "dtype": "float32"}})
    assert ok.backend.settings == {"batch_size": 2, "dtype": "float32"}  # kept as given


def test_a_reference_policy_over_a_model_recipe_ignores_the_model_settings():
    """``backend.name=oracle`` (or never_compress, first_range) over a vllm recipe loads: the
    vllm settings belong to the model it replaces and are dropped, not passed on; a key no
    backend takes still fails, and a model backend still checks its own."""
    from plumbing.recipe_loader import ConfigError

    path = Path(__file__).resolve().parents[2] / "configs/eval/pocket_learn.yaml"
    assert load_config(path, EvalRecipe).backend.settings["max_lora_rank"] == 16
    for name in ("oracle", "never_compress", "first_range"):
        cfg = load_config(path, EvalRecipe, [f"backend.name={name}"])
        assert cfg.backend.name == name and cfg.backend.settings == {}
    with pytest.raises(ConfigError, match="first_range backend: unknown key 'backend.settings.max_lora_rnak'"):
        load_config(path, EvalRecipe, ["backend.name=first_range", "backend.settings.max_lora_rnak=8"])
    with pytest.raises(ConfigError, match="hf backend: .*unknown key 'backend.settings.max_lora_rank'"):
        load_config(path, EvalRecipe, ["backend.name=hf"])  # hf takes no vllm keys: still refused


def test_backend_settings_are_the_constructor_keywords():
    import inspect

    from eval.backends.hf import HFBackend
    from eval.backends.vllm import VLLMBackend
    from eval.recipe import BACKEND_SETTINGS
    from plumbing.openai_backend import OpenAIBackend

    for name, cls in (("hf", HFBackend), ("vllm", VLLMBackend), ("openai", OpenAIBackend)):
        params = {k: (None if p.default is inspect.Parameter.empty else p.default)
                  for k, p in inspect.signature(cls.__init__).parameters.items()
                  if k != "self" and p.kind is not inspect.Parameter.VAR_KEYWORD}
        params.pop("adapter_dir", None)  # given as backend.adapter_dir, its one key
        assert {k: f.default for k, f in BACKEND_SETTINGS[name].model_fields.items()} == params, name
    from eval.backends import BACKENDS

    assert set(BACKEND_SETTINGS) == set(BACKENDS)


def test_a_typo_in_kernel_overrides_fails_when_the_recipe_loads():
    from plumbing.recipe_loader import ConfigError

    with pytest.raises(ConfigError) as err:  # today: accepted; ignored when no kernel arm runs
        recipe(arms=["full"], kernel={"nudge": {"growth_flor": 1000}})
    assert "unknown key 'kernel.nudge.growth_flor' (did you mean 'growth_floor'?)" in str(err.value)
    with pytest.raises(ConfigError, match="kernel.nudge.growth_floor: Input should be a valid integer"):
        recipe(kernel={"nudge": {"growth_floor": "lots"}})  # today: every kernel case fails at run time
    with pytest.raises(ConfigError, match="unknown key 'kernel.model_context_limit'"):
        recipe(kernel={"model_context_limit": 100})  # the run's windows set it
    with pytest.raises(ConfigError, match="kernel.tiers"):
        recipe(kernel={"tiers": 3})
    over = {"nudge": {"growth_floor": 1000}, "compress": {"min_compress_range": 800},
            "protected_tools": ["bash"], "message_filters": {"enabled": True}}
    r = recipe(kernel=over)
    assert r.kernel == over  # kept as given
    from eval.arms import arm_profile

    k = arm_profile("doctrine", 6000, r.gate, r.host, r.nudge_style, r.kernel).kernel
    assert (k.nudge.growth_floor, k.compress.min_compress_range, k.protected_tools) == (1000, 800, ("bash",))
    assert k.message_filters.enabled is True


def test_kernel_overrides_are_the_fields_of_kernel_config():
    import dataclasses

    from doctrine.kernel.config import KernelConfig
    from eval.recipe import KernelOverrides

    expected = {f.name for f in dataclasses.fields(KernelConfig)} - {"model_context_limit", "is_tool_protected",
                                                                     "filters"}
    assert set(KernelOverrides.model_fields) == expected
    nudge = KernelOverrides.model_fields["nudge"].annotation.__args__[0]
    assert set(nudge.model_fields) == {f.name for f in dataclasses.fields(KernelConfig().nudge)}


@pytest.mark.parametrize(("override", "message"), [
    (f"workloads={json.dumps([{'name': 'scripted', 'settings': {'sesions': 'fixtures/sessions.jsonl'}}])}",
     "unknown key 'settings.sesions'"),
    ("kernel={nudge: {growth_flor: 1000}}", "unknown key 'kernel.nudge.growth_flor'"),
    ("backend.settings={policy: labels}", "unknown key 'backend.settings.policy'"),
])
def test_settings_typo_stops_eval_run_before_any_case(tmp_path, override, message):
    import subprocess
    import sys

    out = tmp_path / "eval"
    p = subprocess.run([sys.executable, "-m", "eval", "run", str(SMOKE), "--out", str(out), override],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and message in p.stderr and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert not out.exists()


def test_an_adapter_without_recorded_profiles_is_not_checked(tmp_path):
    from eval.harness import serving_profiles

    adapter = _adapter_with_profiles(tmp_path, [])
    out = serving_profiles(load_config(SMOKE, EvalRecipe, [f"backend.adapter_dir={adapter}"]))
    assert out["adapter_profiles"] == "not recorded" and "profile_mismatch" not in out


def test_an_empty_model_spec_fails_when_the_recipe_loads():
    from plumbing.recipe_loader import ConfigError

    with pytest.raises(ConfigError, match="backend.model: .*empty model spec"):
        load_config(SMOKE, EvalRecipe, ["backend.model="])
