"""The Session Marathon generator: shape, determinism, seeded order, phase variant, grading."""

from __future__ import annotations

import pytest

from data_gen.synthetic import approx_tokens
from eval.workloads.marathon.tasks import (
    DEPS,
    PROBES,
    SIZES,
    TASKS,
    WORK,
    marathon_session,
    marathon_with_repos,
    phase_checks,
)
from eval.workloads.marathon.workload import grade_items, item_correct, marathon_grades


@pytest.fixture(scope="module")
def rep():
    return marathon_session(0, 6, "repetitive", "demo")


@pytest.fixture(scope="module")
def phase():
    return marathon_with_repos(1, 6, "phase", "demo")


def test_shape_18_tasks_6_passes_84_items_2_deep(rep):
    tasks = rep.meta["tasks"]
    assert len(TASKS) == 18 and len(WORK) == 12 and len(PROBES) == 6
    assert len(tasks) == 108 and rep.meta["task_count"] == 108
    for p in range(1, 7):
        assert sorted(t["task"] for t in tasks if t["pass"] == p) == sorted(TASKS)
    probes = rep.meta["probes"]
    assert len(probes) == 36
    items = sum(len(v) for v in rep.meta["probe_items"].values())
    assert items >= 84
    assert sum(1 for m in probes.values() if m["deep"]) == 12  # two per pass
    for step, its in rep.meta["probe_items"].items():
        st = rep.steps[int(step)]
        assert st.kind == "probe"
        assert {i["fact"] for i in its} <= set(st.uses)
    assert rep.validate() is rep


def test_deterministic_and_seed_permutes_order(rep):
    again = marathon_session(0, 6, "repetitive", "demo")
    assert again.to_json() == rep.to_json()
    orders = {tuple(t["task"] for t in marathon_session(s, 1, "repetitive", "demo").meta["tasks"]) for s in range(4)}
    assert len(orders) >= 3


def test_dependencies_hold_in_every_pass():
    for seed in range(3):
        s = marathon_session(seed, 2, "repetitive", "demo")
        for p in (1, 2):
            order = [t["task"] for t in s.meta["tasks"] if t["pass"] == p]
            for task, deps in DEPS.items():
                assert all(order.index(d) < order.index(task) for d in deps)


def test_later_passes_need_early_facts(rep):
    # deep-recall probes of pass 6 use facts introduced in the first pass
    last_deep = [int(k) for k, m in rep.meta["probes"].items() if m["deep"] and m["pass"] == 6]
    first_pass_end = max(t["step"] for t in rep.meta["tasks"] if t["pass"] == 1)
    for step in last_deep:
        introduced = [f.message for f in rep.facts if f.id in rep.steps[step].uses]
        assert introduced and all(rep.steps[rep.step_of(i)].index <= first_pass_end for i in introduced)
    # a retune task uses the TTL fact the previous retune wrote
    assert any(f.text.startswith("SESSION_TTL_SECONDS = ") and len(f.used_at) >= 2 for f in rep.facts)


def test_sizes_scale_the_session():
    small = approx_tokens(marathon_session(0, 1, "repetitive", "demo"))
    full = approx_tokens(marathon_session(0, 1, "repetitive", "full"))
    assert 3000 < small < 9000 < full
    assert approx_tokens(marathon_session(0, 6, "repetitive", "large")) > 64_000
    assert SIZES["large"].tool_output_lines > SIZES["full"].tool_output_lines


def test_bad_arguments_are_clear_errors():
    for kw in ({"variant": "x"}, {"seed": -1}, {"passes": 0}, {"size": "huge"}):
        with pytest.raises(ValueError):
            marathon_session(**kw)


def test_phase_variant_plan_once_then_continue(phase):
    session, _, after = phase
    steps = session.meta["phase_steps"]
    assert [m["migration_step"] for m in steps.values()] == [1, 2, 3, 4, 5, 6]
    users = [m["content"] for m in session.messages if m["role"] == "user"]
    assert sum("This is the plan" in u for u in users) == 1
    asks = [session.messages[session.steps[int(k)].start]["content"] for k in steps]
    assert "This is the plan" in asks[0] and asks[1:] == ["continue"] * 5
    # the scripted execution really carries the plan out on the repository
    last = max(after)
    meta = session.meta
    assert meta["variant"] == "phase"
    repo = after[last]
    kv = repo.files["src/store/kv.ts"]
    ns = kv and session.messages[session.steps[int(next(iter(steps)))].start]["content"].split("STORE_NAMESPACE = '")[1].split("'")[0]
    test = [ln for ln in asks[0].split("\n") if ln.startswith("4.")][0].split("named '")[1].split("'")[0]
    changelog = [ln for ln in asks[0].split("\n") if ln.startswith("6.")][0].split("`- ")[1].split("`")[0]
    assert phase_checks(repo, ns, test, changelog) == [True] * 6
    assert repo.tsc() == ("", 0) and repo.jest()[1] == 0


def test_phase_grading_counts_execution_errors(phase):
    session = phase[0]
    steps = sorted(int(k) for k in session.meta["phase_steps"])
    items = session.meta["probe_items"]
    good = " ".join(a for it in items[str(steps[1])] for a in it["accept"])
    calls = [{"purpose": "probe", "step": steps[1], "raw_text": good},
             {"purpose": "probe", "step": steps[2], "raw_text": "I will carry on with the next step."}]
    g = marathon_grades(session, calls)
    by = {p["step"]: p for p in g["phase"]}
    assert by[steps[1]]["error"] is False and by[steps[1]]["fidelity"] == 1.0
    assert by[steps[2]]["error"] is True and by[steps[2]]["fidelity"] == 0.0
    assert g["metrics"]["exec_errors"] == 5  # steps never asked count as errors too
    assert g["metrics"]["phase_steps"] == 6


def test_item_matching_respects_word_boundaries():
    assert item_correct("It was 900 seconds.", ["900"])
    assert not item_correct("It was 9000 seconds.", ["900"])
    assert not item_correct("renamed to UrlSlug", ["Slug"])
    assert item_correct("Slug became UrlSlug", ["Slug"])
    assert item_correct('expected "hello-big-world"', ['"hello-big-world"', "hello-big-world"])
    assert grade_items("toCents  and\nCents", [{"accept": ["toCents"]}, {"accept": ["Cents"]}, {"accept": ["x"]}]) == [True, True, False]


def test_tool_outputs_are_realistic(rep):
    tool = [m["content"] for m in rep.messages if m["role"] == "tool"]
    assert any("● " in t and "Expected:" in t and "at Object.<anonymous> (tests/" in t for t in tool)
    assert any("error TS2305" in t for t in tool) and any("error TS2322" in t for t in tool)
    assert any(t.startswith("Here's the result of running `cat -n`") for t in tool)
    assert not any("command not found" in t or "No tests found" in t for t in tool)
