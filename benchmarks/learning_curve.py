"""The learning curve: held-out decisions against LoRA training steps (``make learn``).

    python benchmarks/learning_curve.py [--data runs/pocket/data] [--steps 0,400]
        [--data-recipe configs/data/pocket.yaml] [--train-recipe configs/train/pocket.yaml]
        [--eval-recipe configs/eval/pocket_learn_sessions.yaml --eval-recipe configs/eval/pocket_learn.yaml]
        [--out runs/pocket] [--rescore] [--rounds N --round-recipe configs/on_policy/pocket.yaml]

(the defaults are `make learn`'s; the wide curriculum's curve: --data runs/learn/data
--data-recipe configs/data/learn.yaml --train-recipe configs/train/learn.yaml
--eval-recipe configs/eval/learn.yaml --out runs/learn)

Answers "did the doctrine get into the weights?" at a scale where one run cannot: it trains
one adapter, keeps a checkpoint at every step in ``--steps``, and evaluates each checkpoint on
the same held-out decisions (step 0 is the untrained model with the same distilled prompts,
i.e. the ``base_slim`` arm; step N is the ``distilled`` arm with checkpoint N). Each
``--eval-recipe`` is one question asked at every step; the first is the primary one
(``curve.json``'s ``points``), and every question's points are under ``questions``. Each point
carries n, the sessions its cases come from, and a 95 % interval by the eval's small-n rule
(Wilson; the cluster bootstrap over sessions where a session supplies more than one case;
eval/README.md); each step is also compared with step 0 case by case (Tango's paired interval),
so the curve says where training changed the replies and where the change is inside the noise.
Beside them, reading or recall: ``nearest_train_sim`` and ``values_not_in_context`` of the
compress replies (eval/workloads/held_out/recall.py).

Everything runs through the stage CLIs (``python -m data_gen build``, ``python -m train``,
``python -m eval run``), so the curve measures what the pipeline ships. ``--data`` is built
from ``--data-recipe`` when it has no manifest. Wall times of training and of every
evaluation are part of the output. Writes ``<out>/curve/curve.json`` (atomically, last),
``curve.md`` and ``curve.png``; prints the table. ``--rescore`` re-scores a finished curve's
recorded replies with today's scorer into ``<out>/curve-rescored/`` (seconds, no model).

``--rounds N`` adds on-policy rounds after the SFT steps (``rl/on_policy.py``, ``dtw on-policy``):
the last adapter plays new train sessions of ``--round-recipe``, training goes on from it on
the states it visited for ``--round-steps`` steps (``lora.init_adapter``), and each round's
checkpoint is a point of the curve (step = last SFT step + r x round steps), so the SFT-only
checkpoint and every round's stand side by side; ``curve.json`` ``rounds`` names their adapters.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# Per-case metrics of the held_out workload the curve follows (means over cases), and the
# per-kind one that balanced_acc averages. The graded compress steps (held_out's
# graded_compress: chosen -> parsed -> accepted / visible -> summary score, exact values ->
# success) exist on compress-labelled decisions only, so their means and paired differences
# are over those decisions: they show where learning stops when compress_success stays 0.
GRADED_METRICS = ("compress_chosen", "compress_parsed", "compress_accepted", "ranges_visible", "summary_score",
                  "exact_values_kept")
# The recovery reflex, beside the fold metrics so a gain in one that costs the other
# shows: recover_chosen / recover_success over recovery-labelled decisions, false_recovery over
# ordinary ones (counter-lessons included); absent (no cases) where the questions ask none.
RECOVERY_METRICS = ("recover_chosen", "recover_success", "false_recovery")
CURVE_METRICS = ("compress_success", "kind_correct", "tool_call_valid", "malformed_share",
                 "conformance_passed") + GRADED_METRICS + RECOVERY_METRICS
# Reading or recall (eval/workloads/held_out/recall.py), over the replies that write a summary:
# similarity to the nearest train label, and the share of exact items not in the context.
RECALL_METRICS = ("nearest_train_sim", "values_not_in_context_share")
RECALL_COUNTS = ("values_copied", "values_not_in_context")


# The pocket curve's two questions: unseen sessions of the trained families (the primary),
# then a family never trained on (pocket_cli: TypeScript, JSON settings, jest output).
DEFAULT_EVAL_RECIPES = ("configs/eval/pocket_learn_sessions.yaml", "configs/eval/pocket_learn.yaml")


class CurveError(RuntimeError):
    """A stage failed or the inputs are unusable; the message says which."""


def parse_steps(text: str) -> list[int]:
    """``"0,10,20"`` -> ``[0, 10, 20]``: distinct, ascending, non-negative, at least one > 0."""
    try:
        steps = sorted({int(s) for s in text.split(",") if s.strip()})
    except ValueError:
        raise CurveError(f"--steps {text!r}: expected comma-separated integers, e.g. 0,10,20") from None
    if not steps or steps[0] < 0 or steps[-1] == 0:
        raise CurveError(f"--steps {text!r}: need non-negative steps with at least one above 0")
    return steps


def save_interval(steps: list[int]) -> int:
    """The checkpoint interval that lands on every positive step (their gcd)."""
    return math.gcd(*[s for s in steps if s > 0])


def case_rows(eval_dir: Path, arm: str) -> dict[tuple[str, int], dict[str, Any]]:
    """``{(case_id, seed): metrics}`` of the finished held_out cases of ``arm``, with a
    ``malformed_share`` of 1.0 where the reply imitated markup or failed to parse."""
    out = {}
    for p in sorted(eval_dir.glob("cases/*/*.json")):
        try:
            r = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(r, dict) or r.get("status") != "done" or r.get("workload") != "held_out":
            continue
        if r.get("arm") != arm:
            continue
        m = dict(r.get("metrics") or {})
        m["malformed_share"] = float(m.get("reply_form") == "malformed" or bool(m.get("malformed_calls")))
        # The session the case comes from: the unit the intervals resample (eval.report.case_session).
        m["_session"] = str((r.get("meta") or {}).get("session_id") or f"case:{r['case_id']}")
        out[(str(r["case_id"]), int(r.get("seed", 0)))] = m
    return out


def _num(v: Any) -> float | None:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)) and math.isfinite(v):
        return float(v)
    return None


def mean_ci(values: list[float], seed: int = 0, metric: str = "", clusters: list[Any] | None = None) -> dict[str, Any]:
    """``{"mean", "ci95", "n", "sessions", "method"}`` of ``values`` (the eval's small-n
    interval rule, ``eval.metrics.mean_ci``; with ``clusters``, each value's session, the
    cluster bootstrap where a session has more than one value)."""
    from eval.metrics import interval_method, is_clustered, metric_scale
    from eval.metrics import mean_ci as interval

    if not values:
        return {"mean": None, "ci95": None, "n": 0}
    scale = metric_scale(metric, values) if metric else "real"
    out = {"mean": sum(values) / len(values), "ci95": interval(values, scale, seed=seed, clusters=clusters),
           "n": len(values), "method": interval_method(scale, len(values), clustered=is_clustered(clusters))}
    if clusters is not None:
        out["sessions"] = len(set(clusters))
    return out


def balanced_acc(rows: list[dict[str, Any]], seed: int = 0) -> dict[str, Any]:
    """The eval's balanced accuracy (mean over labelled kinds of the share answered with the
    right kind) and its interval (``eval.metrics.balanced_ci``: per-kind Wilson by MOVER, or
    the cluster bootstrap where a session supplies more than one case)."""
    from eval.metrics import balanced_accuracy, balanced_ci

    kinds = {str(m.get("label_kind")) for m in rows if _num(m.get("kind_correct")) is not None}
    point = balanced_accuracy(rows)
    if point is None:
        return {"mean": None, "ci95": None, "n": 0}
    clusters = [_session(m, i) for i, m in enumerate(rows)]
    judged = {c for m, c in zip(rows, clusters, strict=True) if _num(m.get("kind_correct")) is not None}
    return {"mean": point, "ci95": balanced_ci(rows, seed=seed, clusters=clusters),
            "n": sum(_num(m.get("kind_correct")) is not None for m in rows), "kinds": len(kinds),
            "sessions": len(judged)}


def _session(m: dict[str, Any], key: Any) -> str:
    """A case's session (``case_rows`` records it); a case without one is its own."""
    return str(m.get("_session") or f"case:{key}")


def paired(a: dict[Any, dict[str, Any]], b: dict[Any, dict[str, Any]], metric: str,
           seed: int = 0) -> dict[str, Any]:
    """Mean of a - b over the cases both have, with the eval's paired 95 % interval
    (``eval.metrics.paired_ci``: Tango's for rates)."""
    from eval.metrics import interval_method, is_clustered, metric_scale, paired_ci

    xs, ys, sess = [], [], []
    for key in sorted(set(a) & set(b), key=str):
        x, y = _num(a[key].get(metric)), _num(b[key].get(metric))
        if x is not None and y is not None:
            xs.append(x)
            ys.append(y)
            sess.append(_session(a[key], key))
    if not xs:
        return {"diff": None, "ci95": None, "n": 0}
    scale = metric_scale(metric, xs + ys)
    return {"diff": sum(xs) / len(xs) - sum(ys) / len(ys), "ci95": paired_ci(xs, ys, scale, seed=seed, clusters=sess),
            "n": len(xs), "sessions": len(set(sess)),
            "method": interval_method(scale, len(xs), paired=True, clustered=is_clustered(sess))}


def paired_balanced_acc(a: dict[Any, dict[str, Any]], b: dict[Any, dict[str, Any]]) -> dict[str, Any]:
    """Balanced accuracy of a minus b over the cases both have, with the eval's paired
    interval (``eval.metrics.paired_balanced``: Tango per kind, combined by MOVER)."""
    from eval.metrics import paired_balanced

    clusters = {key: _session(a[key], key) for key in a}
    return paired_balanced(a, b, clusters=clusters) or {"diff": None, "ci95": None, "n": 0}


def curve_point(step: int, rows: dict[Any, dict[str, Any]], base: dict[Any, dict[str, Any]]) -> dict[str, Any]:
    """One step of the curve: per metric mean/ci95/n, balanced_acc, and the paired difference
    to step 0 (absent for step 0 itself)."""
    vals = list(rows.values())
    sessions = {key: _session(m, key) for key, m in rows.items()}
    point: dict[str, Any] = {"step": step, "n_cases": len(vals), "n_sessions": len(set(sessions.values())),
                             "metrics": {}, "vs_step0": {}}
    for k in CURVE_METRICS + RECALL_METRICS:
        pairs = [(v, sessions[key]) for key, v in ((key, _num(m.get(k))) for key, m in rows.items()) if v is not None]
        point["metrics"][k] = mean_ci([v for v, _ in pairs], metric=k, clusters=[c for _, c in pairs])
    point["metrics"]["balanced_acc"] = balanced_acc(vals)
    point["recall_counts"] = {k: sum(int(_num(m.get(k)) or 0) for m in vals) for k in RECALL_COUNTS}
    if step > 0:
        for k in CURVE_METRICS + RECALL_METRICS:
            point["vs_step0"][k] = paired(rows, base, k)
        point["vs_step0"]["balanced_acc"] = paired_balanced_acc(rows, base)
    forms: dict[str, int] = {}
    for m in vals:
        forms[str(m.get("reply_form"))] = forms.get(str(m.get("reply_form")), 0) + 1
    point["reply_forms"] = dict(sorted(forms.items()))
    return point


def _fmt(res: dict[str, Any] | None, key: str = "mean") -> str:
    if not res or res.get(key) is None:
        return "-"
    if len(res.get("ci95") or []) != 2:
        return f"{res[key]:+.2f}" if key == "diff" else f"{res[key]:.2f}"
    lo, hi = res["ci95"]
    return f"{res[key]:+.2f} [{lo:+.2f}, {hi:+.2f}]" if key == "diff" else f"{res[key]:.2f} [{lo:.2f}, {hi:.2f}]"


def curve_table(curve: dict[str, Any]) -> list[list[str]]:
    head = ["step", "n", "sessions", "balanced_acc", "compress_chosen", "compress_parsed", "compress_accepted",
            "summary_score", "compress_success", "kind_correct", "malformed_share", "nearest_train_sim",
            "values_not_in_context", *RECOVERY_METRICS,
            "balanced_acc vs step 0", "compress_chosen vs step 0", "compress_success vs step 0",
            "kind_correct vs step 0", "malformed_share vs step 0", *(f"{k} vs step 0" for k in RECOVERY_METRICS)]
    rows = [head]
    for p in curve["points"]:
        m, d = p["metrics"], p["vs_step0"]
        counts = p.get("recall_counts") or {}
        items = counts.get("values_copied", 0) + counts.get("values_not_in_context", 0)
        not_in = f"{counts.get('values_not_in_context', 0)} of {items}" if items else "-"
        rows.append([str(p["step"]), str(p["n_cases"]), str(p.get("n_sessions", "-")), _fmt(m["balanced_acc"]),
                     _fmt(m.get("compress_chosen")),
                     _fmt(m.get("compress_parsed")), _fmt(m.get("compress_accepted")), _fmt(m.get("summary_score")),
                     _fmt(m["compress_success"]), _fmt(m["kind_correct"]), _fmt(m["malformed_share"]),
                     _fmt(m.get("nearest_train_sim")), not_in, *(_fmt(m.get(k)) for k in RECOVERY_METRICS),
                     _fmt(d.get("balanced_acc"), "diff"), _fmt(d.get("compress_chosen"), "diff"),
                     _fmt(d.get("compress_success"), "diff"),
                     _fmt(d.get("kind_correct"), "diff"), _fmt(d.get("malformed_share"), "diff"),
                     *(_fmt(d.get(k), "diff") for k in RECOVERY_METRICS)])
    return rows


def write_markdown(curve: dict[str, Any], path: Path) -> None:
    lines = ["# Learning curve: held-out decisions against training steps", "",
             f"Model `{curve.get('model')}`, data `{curve.get('data_dir')}` "
             "(step 0 = base_slim: the untrained model with the same distilled prompts).",
             "Each cell: mean [95 % interval, the eval's small-n rule: Wilson for rates, Tango for paired rates, "
             "MOVER over kinds for balanced_acc; where a session supplies more than one case (n above sessions), "
             "the cluster bootstrap over sessions]; `vs step 0`: paired difference per case.",
             "nearest_train_sim: difflib ratio of a compress reply's summaries to the nearest train label (mean "
             "over replies that write one); values_not_in_context: exact items of those summaries found nowhere "
             "in the context the model saw, of all their exact items (eval/workloads/held_out/recall.py).", ""]
    for q in curve.get("questions") or [{"name": "held_out", "eval_recipe": "?", "split": None, **curve}]:
        table = curve_table({"points": q["points"]})
        lines += [f"## {q['name']}: {q['n_cases']} cases of the `{q.get('split')}` split ({q['eval_recipe']})", "",
                  "| " + " | ".join(table[0]) + " |", "|" + "---|" * len(table[0])]
        lines += ["| " + " | ".join(r) + " |" for r in table[1:]]
        lines += ["", "Reply forms per step: " + "; ".join(
            f"{p['step']}: " + ", ".join(f"{k} {v}" for k, v in p["reply_forms"].items()) for p in q["points"]), ""]
    lines += ["Wall time: " + ", ".join(f"{k} {v:.0f} s" for k, v in curve.get("wall_time_s", {}).items()), ""]
    _atomic_write(path, "\n".join(lines))


def write_plot(curve: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(6.5, 4))
    steps = [p["step"] for p in curve["points"]]
    for k in ("balanced_acc", "compress_success", "malformed_share", *RECOVERY_METRICS):
        cells = [p["metrics"].get(k) or {} for p in curve["points"]]
        if any(c.get("mean") is None for c in cells):
            continue  # a metric the questions did not ask (no recovery-labelled decisions, say)
        means = [c["mean"] for c in cells]
        lows = [c["ci95"][0] if c.get("ci95") else None for c in cells]
        highs = [c["ci95"][1] if c.get("ci95") else None for c in cells]
        ax.plot(steps, means, marker="o", label=k)
        if all(v is not None for v in lows + highs):
            ax.fill_between(steps, lows, highs, alpha=0.15)
    ax.set_xlabel("LoRA training steps (0 = base_slim)")
    ax.set_ylabel("share of held-out decisions")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(loc="best", fontsize=8)
    what = f"{curve['question']}: `{curve.get('split')}` split, " if curve.get("question") else ""
    ax.set_title(f"held-out decisions against training steps ({what}95 % intervals)", fontsize=9)
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)
    return True


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _run(cmd: list[str], log: Path) -> float:
    """Run one stage CLI (output to ``log``); its wall time, or CurveError with the log's tail."""
    t0 = time.time()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w", encoding="utf-8") as fh:
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
    if proc.returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-5:]
        raise CurveError(f"{' '.join(cmd[:4])} ... failed (rc {proc.returncode}); {log}:\n  " + "\n  ".join(tail))
    return time.time() - t0


def checkpoint_dir(train_out: Path, step: int) -> Path:
    path = train_out / "train" / "checkpoints" / f"checkpoint-{step}"
    if not (path / "adapter_config.json").is_file():
        raise CurveError(f"{path}: no adapter checkpoint for step {step}")
    return path


def _manifest_wall_time(stage_dir: Path) -> float | None:
    try:
        return float(json.loads((stage_dir / "manifest.json").read_text(encoding="utf-8"))["wall_time_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _trained_model(out: Path) -> str | None:
    try:
        manifest = json.loads((out / "train" / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return ((manifest.get("config") or {}).get("model") or {}).get("spec")


def build_curve(args: argparse.Namespace) -> dict[str, Any]:
    out = Path(args.out)
    steps = parse_steps(args.steps)
    py = sys.executable
    walls: dict[str, float] = {}
    data = Path(args.data)
    if not (data / "manifest.json").is_file():
        walls["data"] = _run([py, "-m", "data_gen", "build", args.data_recipe, "--out", str(data)], out / "logs" / "data.log")
    positive = [s for s in steps if s > 0]
    train_cmd = [py, "-m", "train", args.train_recipe, "--out", str(out), f"data.dir={data}",
                 f"trainer.max_steps={positive[-1]}", f"trainer.save_steps={save_interval(steps)}",
                 f"trainer.save_total_limit={len(positive) * 2 + 2}"]
    if not (out / "train" / "manifest.json").is_file():
        walls["train"] = _run(train_cmd, out / "logs" / "train.log")
    elif _manifest_wall_time(out / "train") is not None:  # trained by an earlier run: its own wall time
        walls["train"] = _manifest_wall_time(out / "train")
    adapters = {s: checkpoint_dir(out, s) for s in positive}
    for r in range(1, args.rounds + 1):  # on-policy rounds after the SFT steps: a point each
        step = positive[-1] + r * args.round_steps
        adapters[step] = play_round(args, out, data, r, adapters[max(adapters)], walls)
        steps.append(step)
    eval_common = [f"data_dir={data}"]  # a rerun resumes or reuses a step's eval; a changed recipe is refused
    questions = []
    for n, recipe in enumerate(eval_recipes(args)):
        name = question_name(recipe)
        label = "" if n == 0 else f" ({name})"
        rows: dict[int, dict[Any, dict[str, Any]]] = {}
        for step in steps:
            eval_out = eval_dir(out, recipe, step, n)
            if step == 0:
                arm, extra = "base_slim", []
            else:
                arm, extra = "distilled", [f"backend.adapter_dir={adapters[step]}"]
            cmd = [py, "-m", "eval", "run", recipe, "--out", str(eval_out), f"arms=[{arm}]", *extra, *eval_common]
            reused = (eval_out / "manifest.json").is_file()
            key = f"eval step {step}{label}"
            walls[key] = _run(cmd, out / "logs" / f"eval-{name}-step-{step}.log")
            if reused:  # finished by an earlier run: that run's own wall time
                own = _manifest_wall_time(eval_out)
                walls[key] = own if own is not None else walls[key]
            rows[step] = case_rows(eval_out, arm)
            if not rows[step]:
                raise CurveError(f"{eval_out}: no finished held_out cases for arm {arm}")
        questions.append(question(recipe, steps, rows))
    curve = {"model": _trained_model(out), "data_dir": str(data), "steps": steps, **_primary(questions),
             "questions": questions, "wall_time_s": walls, "train_command": train_cmd[1:],
             "rounds": {str(s): str(adapters[s]) for s in steps[len(steps) - args.rounds:]} if args.rounds else {}}
    curve["wall_time_s"]["total"] = sum(walls.values())
    return curve


def play_round(args: argparse.Namespace, out: Path, data: Path, r: int, adapter: Path,
               walls: dict[str, float]) -> Path:
    """On-policy round ``r`` (rl/on_policy.py): ``adapter`` plays new train sessions, the doctrine
    labels the states it visits into ``<out>/round<r>/data``, and training goes on from
    ``adapter`` on them for ``--round-steps`` steps into ``<out>/round<r>``. Returns the
    round's last checkpoint."""
    py = sys.executable
    folder = out / f"round{r}"
    if not (folder / "data" / "manifest.json").is_file():
        walls[f"round {r} play"] = _run([py, "-m", "rl", "on-policy", args.round_recipe, "--out", str(folder / "data"),
                                          f"student.adapter_dir={adapter}", f"base_data={data}", f"round={r}",
                                          f"seed={args.round_seed + r}"], out / "logs" / f"round{r}-play.log")
    if not (folder / "train" / "manifest.json").is_file():
        walls[f"round {r} train"] = _run([py, "-m", "train", args.train_recipe, "--out", str(folder),
                                          f"data.dir={folder / 'data'}", f"lora.init_adapter={adapter}",
                                          f"trainer.max_steps={args.round_steps}",
                                          f"trainer.save_steps={args.round_steps}"], out / "logs" / f"round{r}-train.log")
    return checkpoint_dir(folder, args.round_steps)  # evaluated as the SFT checkpoints are


def eval_recipes(args: argparse.Namespace) -> list[str]:
    """The curve's questions, the first one primary (``points``): by default the pocket
    curriculum's unseen sessions of the trained families, then its unseen family."""
    return list(args.eval_recipe or DEFAULT_EVAL_RECIPES)


def question_name(recipe: str) -> str:
    return Path(recipe).stem


def eval_dir(out: Path, recipe: str, step: int, index: int) -> Path:
    """``<out>/curve/step-N`` for the primary question, ``<out>/curve/<recipe stem>/step-N``
    for each other one."""
    base = out / "curve" if index == 0 else out / "curve" / question_name(recipe)
    return base / f"step-{step}"


def _split_of(recipe: str) -> str | None:
    try:
        import yaml

        cfg = yaml.safe_load(Path(recipe).read_text(encoding="utf-8"))
        return str(next(w for w in cfg["workloads"] if w["name"] == "held_out")["settings"]["split"])
    except (OSError, KeyError, TypeError, StopIteration, ValueError):
        return None


def question(recipe: str, steps: list[int], rows: dict[int, dict[Any, dict[str, Any]]]) -> dict[str, Any]:
    base = rows[steps[0]] if steps[0] == 0 else {}
    return {"name": question_name(recipe), "eval_recipe": recipe, "split": _split_of(recipe),
            "n_cases": len(base) or len(rows[steps[-1]]), "points": [curve_point(s, rows[s], base) for s in steps]}


def _primary(questions: list[dict[str, Any]]) -> dict[str, Any]:
    q = questions[0]
    return {"points": q["points"], "n_cases": q["n_cases"], "eval_recipe": q["eval_recipe"], "split": q["split"],
            "question": q["name"]}


def rescore_curve(args: argparse.Namespace) -> dict[str, Any]:
    """The finished curve's evaluations re-scored with this checkout's scorer (``python -m eval
    rescore``: the recorded replies, no model call) into ``<out>/curve-rescored/``."""
    out = Path(args.out)
    old = out / "curve" / "curve.json"
    finished = json.loads(old.read_text(encoding="utf-8")) if old.is_file() else {}
    steps = finished.get("steps") or parse_steps(args.steps)  # the finished curve's (its rounds' points too)
    py = sys.executable
    walls: dict[str, float] = {}
    questions = []
    for n, recipe in enumerate(eval_recipes(args)):
        rows: dict[int, dict[Any, dict[str, Any]]] = {}
        for step in steps:
            src = eval_dir(out, recipe, step, n)
            if not (src / "manifest.json").is_file():
                raise CurveError(f"{src}: no finished evaluation to re-score (run the curve first)")
            dst = out / "curve-rescored" / src.relative_to(out / "curve")
            cmd = [py, "-m", "eval", "rescore", str(src), "--out", str(dst), "--data-dir", str(args.data)]
            walls[f"rescore {question_name(recipe)} step {step}"] = _run(
                cmd, out / "logs" / f"rescore-{question_name(recipe)}-step-{step}.log")
            rows[step] = case_rows(dst, "base_slim" if step == 0 else "distilled")
        questions.append(question(recipe, steps, rows))
    curve = finished or {"steps": steps}
    curve.update(_primary(questions), questions=questions, rescored_from=str(out / "curve"),
                 rescore_wall_time_s=walls)
    curve.setdefault("wall_time_s", {})
    return curve


def write_curve(curve: dict[str, Any], out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    write_markdown(curve, out_dir / "curve.md")
    write_plot(curve, out_dir / "curve.png")
    for q in curve.get("questions", [])[1:]:
        write_plot({**curve, **_primary([q])}, out_dir / f"curve-{q['name']}.png")
    _atomic_write(out_dir / "curve.json", json.dumps(curve, indent=1, sort_keys=True))  # last: marks complete


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python benchmarks/learning_curve.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="runs/pocket/data", help="a built curriculum (built from --data-recipe if missing)")
    ap.add_argument("--data-recipe", default="configs/data/pocket.yaml")
    ap.add_argument("--train-recipe", default="configs/train/pocket.yaml")
    ap.add_argument("--eval-recipe", action="append", default=None,
                    help="an eval recipe the curve asks at every step (repeat for more; the first is the "
                         "primary, curve.json's points); default: " + ", ".join(DEFAULT_EVAL_RECIPES))
    ap.add_argument("--steps", default="0,400", help="checkpoints to evaluate; 0 = the untrained model")
    ap.add_argument("--out", default="runs/pocket")
    ap.add_argument("--rounds", type=int, default=0,
                    help="on-policy rounds after the SFT steps (rl/on_policy.py): the last adapter plays new "
                         "sessions, training goes on from it on the states it visited; each round is a point")
    ap.add_argument("--round-recipe", default="configs/on_policy/pocket.yaml", help="the rounds' recipe")
    ap.add_argument("--round-steps", type=int, default=200, help="training steps of each round")
    ap.add_argument("--round-seed", type=int, default=7000, help="round r plays sessions of seed round-seed + r")
    ap.add_argument("--rescore", action="store_true",
                    help="re-score the finished curve's recorded replies with this checkout's scorer "
                         "(no training, no generation) into <out>/curve-rescored")
    args = ap.parse_args(argv)
    try:
        curve = rescore_curve(args) if args.rescore else build_curve(args)
    except CurveError as exc:
        print(f"learning curve: {exc}", file=sys.stderr)
        return 2
    write_curve(curve, Path(args.out) / ("curve-rescored" if args.rescore else "curve"))
    for row in curve_table(curve):
        print("  ".join(f"{c:<22}" for c in row))
    print(f"wall time: {curve['wall_time_s']['total']:.0f} s -> {Path(args.out) / ('curve-rescored' if args.rescore else 'curve')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
