"""An on-policy round: the adapter plays new sessions, the doctrine labels the states it visits.

    dtw on-policy configs/on_policy/pocket.yaml --out runs/pocket_proc/round1 \\
        student.adapter_dir=runs/pocket_proc/train/final

SFT teaches the doctrine's move at the states the doctrine's own folds produce. A student
that folds differently (a range the kernel refuses, a summary that keeps the wrong lines, no
fold where one was due) reaches states no row shows it, and its errors compound. A round
(DAgger; on-policy distillation) replays new sessions of the trained ecosystems through the
kernel with the student answering at every decision point (``data_gen.replay``'s ``policy``,
``data_gen.student``): its folds are applied or refused by the kernel and the session goes
on from what it did; every state it visits is labelled by the doctrine, the corrected call
after a refused fold included, with the kernel's refusal in the context.

The round's folder is a data folder like ``dtw data`` writes (``train/`` shards, card,
manifest last): its train split is the base curriculum's train rows followed by the round's
rows (``meta.extra`` holds ``on_policy``: the round and the student), so ``dtw train`` with
``data.dir`` set to it continues training on both. ``rollouts.jsonl`` holds the student's
every reply with the move it made; the card and the manifest count them (asked, folds
attempted, applied, refused by reason).

Only sessions the data recipe's split puts in ``train`` are rolled out (new seeds: not the
base's sessions, never a test or held-out one), and rows over the recipe's token bounds are
dropped as the build drops them.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic import Field

from eval.recipe import BackendSpec
from plumbing.recipe_loader import BaseConfig

__all__ = ["OnPolicyError", "OnPolicyRecipe", "round_fingerprint", "run_round"]

WRITES = ("train", "README.md", "rollouts.jsonl")


class OnPolicyError(ValueError):
    """A round that cannot run (its base curriculum, doctrine or recipe); one line."""


class OnPolicyRecipe(BaseConfig):
    data_recipe: str = Field(description="the configs/data recipe whose generator, replay settings and bounds "
                             "the round uses (the one the base curriculum was built from)")
    data_overrides: list[str] = Field(default_factory=list, description="dotted KEY=VALUE overrides of data_recipe")
    base_data: str = Field(description="a built curriculum (dtw data): its train rows open the round's train split")
    student: BackendSpec = Field(description="the model that plays the sessions: an eval backend section "
                                 "(name, model, adapter_dir, settings)")
    round: int = Field(1, ge=1, description="the round's number (rows record it)")
    seed: int = Field(7000, ge=0, description="the rollout sessions' generator seed (other than the base's, so "
                      "the sessions are new)")
    sessions_per_family: int = Field(20, ge=1, description="sessions generated per family (only the ones the "
                                     "split puts in train are played)")
    max_tokens: int = Field(320, ge=1, description="most tokens of one student reply")
    workers: int = Field(8, ge=1, description="sessions played at once (their calls go to vLLM in one batch)")
    keep_base: bool = Field(True, description="the round's train split starts with the base curriculum's rows")


def _data_recipe(recipe: OnPolicyRecipe):
    from data_gen.recipe import DataRecipe
    from plumbing.recipe_loader import load_config

    overrides = [*recipe.data_overrides, f"sources.synthetic.seed={recipe.seed}",
                 f"sources.synthetic.sessions_per_family={recipe.sessions_per_family}"]
    return load_config(recipe.data_recipe, DataRecipe, overrides)


def _base_rows(base: Path, doctrine_sha: str) -> list[dict]:
    from plumbing.runs import StageInputError, read_manifest, stage_files
    from plumbing.shards import read_shard

    manifest = read_manifest(base)
    if manifest is None or manifest.get("stage") != "data":
        raise OnPolicyError(f"{base}: not a complete data folder (run dtw data first)")
    if (manifest.get("doctrine") or {}).get("sha256") != doctrine_sha:
        raise OnPolicyError(f"{base}: built under another doctrine than the data recipe's; rebuild it")
    try:
        return [r for p in stage_files(base, "train", ("*.parquet",)) for r in read_shard(p)]
    except StageInputError as exc:
        raise OnPolicyError(str(exc)) from None


def round_fingerprint(recipe: OnPolicyRecipe) -> dict[str, Any]:
    """What a round's rows depend on: its recipe, the base curriculum's manifest and the
    student adapter's files (a retrained adapter is another round)."""
    from plumbing.runs import fingerprint_sha256, manifest_content_sha256, paths_sha256

    adapter = Path(recipe.student.adapter_dir) if recipe.student.adapter_dir else None
    weights = sorted(p for p in adapter.iterdir() if p.is_file()) if adapter and adapter.is_dir() else []
    return {"recipe_sha256": fingerprint_sha256(recipe.model_dump(mode="json")),
            "base_data": manifest_content_sha256(recipe.base_data),
            "student_adapter": paths_sha256(weights) if weights else None}


def run_round(recipe: OnPolicyRecipe, out: str | Path, *, backend: Any = None, log=print) -> Path:
    """Play the round's sessions with the student and write the round's data folder."""
    from data_gen.build import _model_length, collect_sessions, replay_rows, sample_tokens
    from data_gen.curriculum import (
        apply_mixture,
        assign_split,
        dedupe,
        normalise_sample,
        sample_to_shares,
        write_split,
    )
    from data_gen.student import student_policy
    from doctrine.spec import resolve_doctrine
    from plumbing.runs import (
        MANIFEST,
        atomic_write_text,
        claim_run_folder,
        file_sha256,
        write_manifest,
    )

    started = time.time()
    out = Path(out)
    dr = _data_recipe(recipe)
    doctrine = resolve_doctrine(dr.doctrine_version)
    base = _base_rows(Path(recipe.base_data), doctrine.sha256) if recipe.keep_base else []
    claim_run_folder(out, "data", writes=WRITES)
    (out / MANIFEST).unlink(missing_ok=True)
    rejects: Counter = Counter()
    sessions = [s for s in collect_sessions(dr, rejects) if assign_split(s.session_id, s.family, dr.split) == "train"]
    if not sessions:
        raise OnPolicyError(f"the data recipe's split puts none of its {recipe.sessions_per_family} sessions a family "
                            "in train; give more sessions_per_family")
    jobs = [(s, w, g) for s in sessions for w in dr.replay.windows for g in dr.replay.gates]
    own = backend is None
    if own:
        from eval.backends import make_backend

        backend = make_backend(recipe.student.name, recipe.student.factory_settings())
    engine = backend
    if getattr(backend, "name", "") == "vllm" and recipe.workers > 1:
        from eval.backends.batching import MicroBatcher

        backend = MicroBatcher(engine, max_batch=recipe.workers)
    model_len = _model_length(dr.length_model) if dr.max_model_tokens else None
    lock, len_lock = threading.Lock(), threading.Lock()
    rows: list[dict] = []
    replies: list[dict] = []
    tally: Counter = Counter()
    scratch = Path(tempfile.mkdtemp(prefix="dtw-onpolicy-"))
    tag = {"round": recipe.round, "student": recipe.student.adapter_dir or recipe.student.model}
    done = [0]

    def play(job) -> None:
        session, window, gate = job
        mine_rejects: Counter = Counter()
        mine_tally: Counter = Counter()
        mine_replies: list[dict] = []
        mine: list[dict] = []
        policy = student_policy(backend, max_tokens=recipe.max_tokens, replies=mine_replies,
                                use_adapter=bool(recipe.student.adapter_dir))
        for sample in replay_rows(session, dr, doctrine, window, gate, mine_rejects, scratch, tally=mine_tally,
                                  policy=policy):
            if sample_tokens(sample) > dr.max_tokens:
                mine_rejects["too_long"] += 1
                continue
            if model_len is not None:
                with len_lock:  # the chat template's renderer is not thread-safe
                    n = model_len(sample)
            if model_len is not None and n > dr.max_model_tokens:
                mine_rejects["too_long_model"] += 1
                continue
            sample["meta"].setdefault("family", session.family)
            sample["meta"].setdefault("license", session.license)
            sample["meta"]["on_policy"] = tag
            mine.append(sample)
        with lock:
            rows.extend(mine)
            replies.extend(mine_replies)
            rejects.update(mine_rejects)
            tally.update(mine_tally)
            done[0] += 1
            if done[0] % max(1, len(jobs) // 10) == 0 or done[0] == len(jobs):
                log(f"[on-policy] {done[0]}/{len(jobs)} sessions played, {len(rows)} rows, "
                    f"{tally['policy:applied']}/{tally['policy:compress']} student folds applied")

    try:
        log(f"[on-policy] round {recipe.round}: {len(jobs)} sessions x windows with {recipe.workers} at once")
        with ThreadPoolExecutor(max_workers=recipe.workers) as pool:
            list(pool.map(play, jobs))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if own:
            engine.close()
    rows.sort(key=lambda r: (r["meta"]["session_id"], r["meta"]["window"], r["meta"]["step"],
                             r["meta"]["action_index"]))  # threads finish in any order; the folder does not
    new, removed = dedupe(rows, dr.dedupe)
    rejects.update(removed)
    new = apply_mixture(new, dr.mixture, dr.split.seed)  # the base's mixture (e.g. ordinary turns sampled down)
    if dr.mixture.shares:
        new, _mix = sample_to_shares(new, dr.mixture.shares, dr.mixture.max_repeat, dr.split.seed)
    written = [*base, *[normalise_sample(r) for r in new]]
    files = {f"train/{p.name}": file_sha256(p) for p in write_split(written, out / "train", dr.shard_rows)}
    replies.sort(key=lambda r: (str(r["session_id"]), r["window"] or 0, r["step"] or 0))
    atomic_write_text(out / "rollouts.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in replies))
    files["rollouts.jsonl"] = file_sha256(out / "rollouts.jsonl")
    policy = {k.split(":", 1)[1]: n for k, n in sorted(tally.items()) if k.startswith("policy:")}
    counts = {"sessions": len(sessions), "jobs": len(jobs), "base_rows": len(base), "on_policy_rows": len(new),
              "train": len(written), "kinds": {"train": dict(sorted(Counter(r["meta"]["kind"] for r in written).items())),
                                               "on_policy": dict(sorted(Counter(r["meta"]["kind"] for r in new).items()))},
              "policy": policy, "rejects": dict(sorted(rejects.items())),
              "labelling": {k: n for k, n in sorted(tally.items()) if not k.startswith("policy:")}}
    atomic_write_text(out / "README.md", _card(recipe, counts))
    inputs = {"base_data": Path(recipe.base_data)} if recipe.keep_base else {}
    if recipe.student.adapter_dir and (Path(recipe.student.adapter_dir) / "adapter_config.json").is_file():
        inputs["student_adapter"] = Path(recipe.student.adapter_dir) / "adapter_config.json"
    write_manifest(out, stage="data", config=recipe, inputs=inputs, counts=counts, doctrine=doctrine.to_manifest(),
                   extra={"splits": ["train"], "layout": "<split>/shard-NNNNN.parquet", "method": "on_policy",
                          "data_recipe": dr.model_dump(mode="json")},
                   files=files, started_at=started)
    log(f"[on-policy] {len(new)} rows from the student's states (+{len(base)} base rows) -> {out}")
    return out


def _card(recipe: OnPolicyRecipe, counts: dict[str, Any]) -> str:
    p = counts["policy"]
    asked, folds = p.get("asked", 0), p.get("compress", 0)
    reasons = sorted(((k.split(":", 1)[1], n) for k, n in p.items() if k.startswith("refusal:")), key=lambda x: -x[1])
    lines = [f"# On-policy round {recipe.round}", "",
             f"The student (`{recipe.student.name}`, model `{recipe.student.model}`, adapter "
             f"`{recipe.student.adapter_dir}`) played {counts['jobs']} sessions x windows of the data recipe "
             f"`{recipe.data_recipe}` (seed {recipe.seed}, train split only). At every decision point it answered and "
             "the session went on with its move; the rows are the doctrine's labels at the states it visited.", "",
             "| student moves | n |", "|---|---|",
             f"| decision points asked | {asked} |",
             f"| compress calls | {folds} |",
             f"| applied by the kernel | {p.get('applied', 0)} |",
             f"| refused by the kernel | {p.get('refused', 0)} |",
             f"| recovery calls | {p.get('recovery', 0)} |",
             f"| other moves (task call, text, decline) | {p.get('session', 0)} |",
             f"| of those: the backend failed | {p.get('session:backend_error', 0)} |",
             f"| of those: the prompt outgrew the student's context (session ended) | "
             f"{p.get('session:context_overflow', 0)} |", ""]
    if reasons:
        lines += ["| refusal reason | n |", "|---|---|", *[f"| {r} | {n} |" for r, n in reasons[:8]], ""]
    lines += [f"Rows: {counts['on_policy_rows']} from the student's states, {counts['base_rows']} from the base "
              f"curriculum (`{recipe.base_data}`); train split {counts['train']}.", "",
              "| kind | round rows |", "|---|---|",
              *[f"| {k} | {n} |" for k, n in counts["kinds"]["on_policy"].items()], ""]
    return "\n".join(lines)
