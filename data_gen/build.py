"""Build an SFT curriculum: ``python -m data_gen build RECIPE.yaml --out runs/<name>/data``.

setup (doctrine) -> sources (sessions, rejects counted) -> replay + labels (per window and
gate preset) -> length filter -> split by session -> de-duplicate -> mixture -> stages ->
parquet shards per split -> dataset card -> manifest (last).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from doctrine.session import Session, SessionError
from plumbing.runs import (
    MANIFEST,
    atomic_write_text,
    claim_run_folder,
    file_sha256,
    fingerprint_sha256,
    paths_sha256,
    redact_secrets,
    write_manifest,
)

from .curriculum import (
    SPLITS,
    WHY_NONE,
    apply_mixture,
    assign_split,
    cap_shares,
    dedupe,
    normalise_sample,
    order_by_stage,
    sample_to_shares,
    token_percentiles,
    write_split,
)
from .memorisation import audit_lines, memorisation_audit
from .recipe import DataRecipe

__all__ = ["build_curriculum", "collect_sessions", "data_fingerprint", "replay_rows", "sample_tokens"]

LICENSES = {"synthetic": "project-generated (MIT)", "swe_rebench": "CC-BY-4.0 (nebius/SWE-rebench-openhands-trajectories)",
            "logged": "the operator's own kernel logs", "teacher": "outputs of the configured teacher model",
            "real_tools": "outputs of read-only commands over local source trees (each tree's own licence)"}


def sample_tokens(sample: dict) -> int:
    """Estimated prompt+target tokens of a sample (the kernel's chars/4 estimator)."""
    from plumbing.tokens import default_count_tokens

    n = default_count_tokens(json.dumps(sample["tools"], ensure_ascii=False))
    for m in sample["messages"]:
        n += default_count_tokens(m.get("content") or "") + 4
        for c in m.get("tool_calls") or []:
            n += default_count_tokens(c["function"]["arguments"]) + 8
    return n


# --------------------------------------------------------------------------- sources


def collect_sessions(recipe: DataRecipe, rejects: Counter) -> Iterator[Session]:
    """Sessions from every configured source; bad inputs are counted, never raised."""
    src = recipe.sources
    if src.synthetic is not None:
        from .synthetic import generate

        for family in src.synthetic.families:
            for k in range(src.synthetic.sessions_per_family):
                seed = src.synthetic.seed * 1000 + k
                try:
                    yield generate(family, seed, src.synthetic.session_size()).validate()
                except SessionError as exc:
                    rejects[f"synthetic:{exc.__class__.__name__}"] += 1
    if src.swe_rebench is not None and src.swe_rebench.path:
        from .sources import swe_rebench as swe

        accepted = 0
        for row in swe.iter_rows(src.swe_rebench.path, revision=src.swe_rebench.revision):
            converted = swe.convert_row(row)
            if isinstance(converted, swe.Rejected):
                rejects[f"swe_rebench:{converted.reason}"] += 1
                continue
            try:
                yield swe.to_session(converted).validate()
            except SessionError:
                rejects["swe_rebench:bad_session"] += 1
                continue
            accepted += 1
            if src.swe_rebench.max_rows and accepted >= src.swe_rebench.max_rows:
                break
    if src.real_tools is not None:
        from .sources.real_tools import real_tool_sessions

        yield from real_tool_sessions(src.real_tools, rejects)


# --------------------------------------------------------------------------- build


def data_fingerprint(recipe: DataRecipe, doctrine) -> dict[str, Any]:
    """What a build's rows are computed from: the resolved recipe (secrets redacted), the
    doctrine's version and hash, and the content of the local input files (SWE-rebench rows
    on disk, logged kernel states). The manifest records it; a rerun compares."""
    inputs: dict[str, str] = {}
    src = recipe.sources
    if src.swe_rebench is not None and src.swe_rebench.path and Path(src.swe_rebench.path).exists():
        inputs["swe_rebench"] = paths_sha256([src.swe_rebench.path])
    if src.logged is not None and src.logged.paths:
        inputs["logged"] = paths_sha256(src.logged.paths, patterns=("*",))
    if src.real_tools is not None:  # the interpreter, each tree's root, version and files
        from .sources.real_tools_sandbox import provenance

        inputs["real_tools"] = provenance([*src.real_tools.trees, *src.real_tools.heldout_trees])
    return {"recipe": redact_secrets(recipe.model_dump(mode="json")),
            "doctrine": {"version": doctrine.version, "sha256": doctrine.sha256}, "inputs": inputs}




def label_source(session: Session) -> str:
    """The source a session's labelling is counted under: a synthetic family by its name
    (procedural ecosystems included), any other source (real_tools, swe_rebench) by the source."""
    return session.family if session.source == "synthetic" else session.source


def replay_rows(session: Session, recipe: DataRecipe, doctrine, window: int, gate: str, rejects: Counter,
                run_dir: Path, labeler=None, rw=None, tally: Counter | None = None, policy=None):
    """The rows of one replay; ``rw`` (a RecoveryWindow): only its kept kinds, tagged
    ``meta.recovery_window``, its skips counted apart (``recovery_window:skipped:...``).
    ``tally``: the session source's points, labels and skips (the card's per-source table),
    and with a ``policy`` (on-policy replay, ``data_gen.student``) its moves as ``policy:<what>``."""
    from .replay import ReplayStats, replay_session

    stats = ReplayStats()
    r = recipe.replay
    style = r.nudge_style(window, recipe.nudge_style) if rw is None else ("none" if rw.silent else recipe.nudge_style)
    try:
        for sample in replay_session(session, window=window, gate=gate, host=r.host,
                                     prompt_mode=recipe.prompt_mode,
                                     doctrine=doctrine, horizon=r.horizon if rw is None else rw.horizon, seed=r.seed,
                                     stats=stats, run_dir=str(run_dir), labeler=labeler, nudge_style=style,
                                     usage_counter=r.usage_counter,
                                     kernel_overrides=None if rw is None else rw.kernel_overrides(),
                                     label_config=r.label_config(window) if rw is None else r.recovery_label_config(rw),
                                     policy=policy):
            row = sample.to_dict()
            if rw is not None:
                if not rw.keeps(row["meta"]):
                    continue
                row["meta"]["recovery_window"] = True
            yield row
    except Exception as exc:  # one bad session never stops a long build
        rejects[f"replay_error:{type(exc).__name__}"] += 1
        if tally is not None:
            tally[f"replay_error:{type(exc).__name__}"] += 1
    prefix = "skipped" if rw is None else "recovery_window:skipped"
    for reason, n in stats.skipped.items():
        rejects[f"{prefix}:{reason}"] += n
    if tally is not None:  # the same skips, per source: a whole-build rate hides a weak source
        tally["points"] += stats.points
        tally["labelled"] += stats.samples
        for reason, n in stats.skipped.items():
            tally[f"{prefix}:{reason}"] += n
        for what, n in stats.policy.items():
            tally[f"policy:{what}"] += n


class EmptyCurriculum(ValueError):
    """A build whose recipe yields no row at all: refused before its manifest is written."""


class TeacherFailed(EmptyCurriculum):
    """A build whose teacher kept none of its replies (or under ``min_accepted_share``):
    refused before any shard or the manifest is written."""


def secret_envs(recipe: DataRecipe) -> list[str]:
    """The environment variables whose values no row may hold: the teacher's key and the
    recipe's ``secret_envs``."""
    teacher = recipe.sources.teacher
    return [*([teacher.api_key_env] if teacher is not None and teacher.api_key_env else []), *recipe.secret_envs]


def drop_secret_rows(samples: list[dict], names: list[str], rejects: Counter) -> list[dict]:
    """``samples`` less every row that holds a configured secret or a common key shape
    (plumbing.secret_scan), counted as ``secret:<kind>`` (never the value)."""
    from plumbing.secret_scan import SecretScanner

    scanner = SecretScanner(names)
    kept = []
    for sample in samples:
        hit = scanner.row(sample)
        if hit:
            rejects[f"secret:{hit}"] += 1
            continue
        kept.append(sample)
    return kept


def _model_length(spec: str):
    """Length of a sample in ``spec``'s tokens, as the trainer tokenises it (tools included)."""
    from plumbing.chat_templates import choose_template
    from plumbing.models import load_tokenizer

    from .lengths import sample_lengths

    tok = load_tokenizer(spec)
    template = choose_template(tok).template
    return lambda sample: sample_lengths(sample, tok, template)[0]


def build_curriculum(recipe: DataRecipe, out: str | Path, *, log=print, progress: bool = True) -> Path:
    from doctrine.spec import resolve_doctrine

    started = time.time()
    out = Path(out)
    # Only a new, empty or earlier data folder, and no split folder that is a link (its
    # stale shards are cleaned): nothing is written or deleted outside the run.
    claim_run_folder(out, "data", writes=(*SPLITS, "README.md"))
    if (out / MANIFEST).exists():
        (out / MANIFEST).unlink()  # rebuilding: incomplete until the end
    doctrine = resolve_doctrine(recipe.doctrine_version)
    rejects: Counter = Counter()
    sessions = list(collect_sessions(recipe, rejects))
    jobs = [(s, w, g, None) for s in sessions for w in recipe.replay.windows for g in recipe.replay.gates]
    jobs += [(s, rw.window, g, rw) for s in sessions for rw in recipe.replay.recovery_windows
             for g in recipe.replay.gates]
    # Where a replayed decompress-to-file writes: a fresh private folder per build (nothing
    # shared or symlinked in $TMPDIR is followed). Rows name it by a fixed virtual root
    # (data_gen.replay.VIRTUAL_RUN_DIR), so the dataset does not depend on TMPDIR.
    scratch = Path(tempfile.mkdtemp(prefix="dtw-replay-"))
    try:
        return _build(recipe, out, doctrine, rejects, sessions, jobs, scratch, started, log, progress)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _build(recipe: DataRecipe, out: Path, doctrine, rejects: Counter, sessions: list[Session], jobs: list,
           scratch: Path, started: float, log, progress: bool) -> Path:
    from doctrine.kernel.profile import resolve_profile, unique_records

    # The serving profiles the rows are rendered under (replay resolves the same ones).
    profiles = [resolve_profile(w, g, recipe.replay.host, prompt_mode=recipe.prompt_mode,
                                nudge_style=recipe.replay.nudge_style(w, recipe.nudge_style),
                                usage_counter=recipe.replay.usage_counter)
                for w in recipe.replay.windows for g in recipe.replay.gates]
    profiles += [resolve_profile(rw.window, g, recipe.replay.host, prompt_mode=recipe.prompt_mode,
                                 nudge_style="none" if rw.silent else recipe.nudge_style,
                                 usage_counter=recipe.replay.usage_counter, kernel_overrides=rw.kernel_overrides())
                 for rw in recipe.replay.recovery_windows for g in recipe.replay.gates]
    samples: list[dict] = []
    sessions_by_split: Counter = Counter()
    sources: Counter = Counter()
    labelling: dict[str, Counter] = {}
    too_long: Counter = Counter()  # rows of the ordinary windows dropped for length, by decision kind
    teacher = None
    if recipe.sources.teacher is not None and recipe.sources.teacher.enabled:
        from .sources.teacher import make_teacher_labeler

        teacher = make_teacher_labeler(recipe.sources.teacher, rejects, tuple(recipe.secret_envs))
    model_len = _model_length(recipe.length_model) if recipe.max_model_tokens else None
    bar = _progress(progress, len(jobs))
    for session, window, gate, rw in jobs:
        split = assign_split(session.session_id, session.family, recipe.split)
        # Per-source labelling counts the ordinary windows only: the recovery window keeps a
        # few kinds by design, so its skips are no measure of the labeler.
        tally = labelling.setdefault(label_source(session), Counter()) if rw is None else None
        for sample in replay_rows(session, recipe, doctrine, window, gate, rejects, scratch, labeler=teacher,
                                  rw=rw, tally=tally):
            tag = "" if rw is None else f"recovery_window:{sample['meta']['kind']}:"
            if sample_tokens(sample) > recipe.max_tokens:
                rejects[tag + "too_long"] += 1
                too_long[sample["meta"].get("kind", "?")] += rw is None
                continue
            if model_len is not None and model_len(sample) > recipe.max_model_tokens:
                rejects[tag + "too_long_model"] += 1  # dropped whole: no sample is ever truncated
                too_long[sample["meta"].get("kind", "?")] += rw is None
                continue
            sample["meta"].setdefault("family", session.family)
            sample["meta"].setdefault("license", session.license)
            sample["meta"]["split"] = split
            samples.append(sample)
        bar(f"{session.family} {window} {gate}{' recovery' if rw else ''}")
    for s in sessions:
        sessions_by_split[assign_split(s.session_id, s.family, recipe.split)] += 1
        sources[s.source] += 1
    if recipe.sources.logged is not None and recipe.sources.logged.paths:
        from .sources.logged import logged_samples

        logged_sessions = set()
        for window in recipe.replay.windows:
            for sample in logged_samples(recipe.sources.logged.paths, doctrine=doctrine, prompt_mode=recipe.prompt_mode,
                                         window=window, min_score=recipe.sources.logged.min_score,
                                         below_threshold=recipe.sources.logged.below_threshold, rejects=rejects,
                                         nudge_style=recipe.nudge_style, host=recipe.replay.host,
                                         profiles=profiles):
                if sample_tokens(sample) > recipe.max_tokens:
                    rejects["too_long"] += 1
                    continue
                sid = sample["meta"]["session_id"]
                split = assign_split(sid, sample["meta"]["family"], recipe.split)
                if sid not in logged_sessions:
                    logged_sessions.add(sid)
                    sessions_by_split[split] += 1
                    sources["logged"] += 1
                sample["meta"]["split"] = split
                samples.append(sample)
    if teacher is not None and (problem := teacher.shortfall(recipe.sources.teacher.min_accepted_share)):
        cut = ", ".join(f"{k} {n}" for k, n in sorted(rejects.items()) if k.startswith("replay_error:"))
        raise TeacherFailed(problem + (f" Sessions cut short: {cut}." if cut else ""))
    samples = drop_secret_rows(samples, secret_envs(recipe), rejects)  # before anything is written
    samples, removed = dedupe(samples, recipe.dedupe)
    rejects.update(removed)
    by_split: dict[str, list[dict]] = {name: [] for name in SPLITS}
    for s in samples:
        by_split[s["meta"].pop("split")].append(s)
    train = apply_mixture(by_split["train"], recipe.mixture, recipe.split.seed)
    mix: dict[str, Any] = {}
    if recipe.mixture.shares:
        train, mix = sample_to_shares(train, recipe.mixture.shares, recipe.mixture.max_repeat, recipe.split.seed)
    mix["by_source"] = _kinds_by_source(samples)
    mix["why_none"] = {src: {k: WHY_NONE[k] for k in sorted(recipe.mixture.shares or {})
                             if recipe.mixture.shares[k] > 0 and not kinds.get(k)}
                       for src, kinds in mix["by_source"].items()}
    mix["why_none"] = {src: v for src, v in mix["why_none"].items() if v}
    by_split["train"] = order_by_stage(train, recipe.stages)
    if recipe.mixture.eval_caps:
        mix["eval_caps"] = {}
        for name in SPLITS[1:]:
            by_split[name], mix["eval_caps"][name] = cap_shares(by_split[name], recipe.mixture.eval_caps,
                                                                recipe.mixture.eval_min_rows, recipe.split.seed)
    counts: dict[str, Any] = {"sessions": len(sessions), "sessions_by_split": dict(sorted(sessions_by_split.items())),
                              "sources": dict(sorted(sources.items())), "rejects": dict(sorted(rejects.items())),
                              "labelling": {k: dict(sorted(c.items())) for k, c in sorted(labelling.items())},
                              "too_long_by_kind": {k: n for k, n in sorted(too_long.items()) if n},
                              "mixture": mix}
    if not any(by_split.values()):
        top = ", ".join(f"{k} {n}" for k, n in Counter(rejects).most_common(3)) or "none"
        raise EmptyCurriculum(
            f"the recipe yields no rows from {len(sessions)} sessions (most rejected: {top}); nothing "
            "was marked complete. Give more sessions, larger windows or a higher max_tokens")
    kinds: dict[str, dict[str, int]] = {}
    lengths: dict[str, dict[str, int]] = {}
    files: dict[str, str] = {}
    written: dict[str, list[dict]] = {}
    for name, rows in by_split.items():
        written[name] = [normalise_sample(s) for s in rows]
        for path in write_split(written[name], out / name, recipe.shard_rows):
            files[f"{name}/{path.name}"] = file_sha256(path)
        counts[name] = len(rows)
        kinds[name] = dict(sorted(Counter(s["meta"]["kind"] for s in rows).items()))
        lengths[name] = token_percentiles(sample_tokens(s) for s in rows)
    counts["kinds"] = kinds
    counts["token_percentiles"] = lengths
    # Could a split be passed from memory of train? (data_gen.memorisation; dtw audit DIR prints it again)
    counts["memorisation"] = memorisation_audit(written)
    for line in audit_lines(counts["memorisation"]):
        log(line)
    atomic_write_text(out / "README.md", _card(recipe, doctrine, counts))
    fingerprint = data_fingerprint(recipe, doctrine)
    write_manifest(out, stage="data", config=recipe, counts=counts, doctrine=doctrine.to_manifest(),
                   extra={"splits": list(SPLITS), "layout": "<split>/shard-NNNNN.parquet",
                          "serving_profiles": unique_records(profiles),
                          "fingerprint": fingerprint, "fingerprint_sha256": fingerprint_sha256(fingerprint)},
                   files=files, started_at=started)
    log(f"[data] {sum(counts[s] for s in SPLITS)} samples from {len(sessions)} sessions -> {out}")
    return out


def _kinds_by_source(samples: list[dict]) -> dict[str, dict[str, int]]:
    out: dict[str, Counter] = {}
    for s in samples:
        out.setdefault(str(s["meta"].get("source")), Counter())[str(s["meta"].get("kind"))] += 1
    return {src: dict(sorted(c.items())) for src, c in sorted(out.items())}


def _progress(enabled: bool, total: int):
    if not enabled or total == 0:
        return lambda _desc: None
    from rich.progress import Progress

    prog = Progress(transient=True)
    prog.start()
    task = prog.add_task("replaying", total=total)
    done = [0]

    def step(desc: str) -> None:
        done[0] += 1
        prog.update(task, advance=1, description=f"replaying {desc}")
        if done[0] >= total:
            prog.stop()

    return step


def _card(recipe: DataRecipe, doctrine, counts: dict) -> str:
    lines = [
        "# Doctrine curriculum (SFT)",
        "",
        f"Compression decisions labeled by doctrine **{doctrine.version}** (`{doctrine.sha256}`),",
        f"rendered in **{recipe.prompt_mode}** prompt mode. One row is `{{messages, tools, meta}}`;",
        "the last message is the target (the decision's action). Splits are by session; the",
        f"`heldout` split holds whole held-out families ({', '.join(recipe.split.held_out) or 'none'}).",
        "",
        "## Held-out families and the evals they protect",
        "",
        "| eval | families held out of train |",
        "|---|---|",
    ]
    for ev, fams in sorted(recipe.split.held_out_for.items()):
        lines.append(f"| {ev} | {', '.join(fams) or '-'} |")
    other = [f for f in recipe.split.held_out_families
             if not any(f in v for v in recipe.split.held_out_for.values())]
    if other:
        lines.append(f"| held_out (unseen-family decisions) | {', '.join(other)} |")
    lines += [
        "",
        "Load it with `datasets.load_dataset(\"parquet\", data_files={\"train\": \"train/*.parquet\"})`.",
        "",
        "## Sources and licences",
        "",
        "| source | sessions | licence |",
        "|---|---|---|",
    ]
    for name, n in counts["sources"].items():
        lines.append(f"| {name} | {n} | {LICENSES.get(name, 'see source')} |")
    lines += ["", "## Rows per split and kind", "", "| split | rows | kinds |", "|---|---|---|"]
    for split in SPLITS:
        kinds = ", ".join(f"{k} {v}" for k, v in counts["kinds"][split].items()) or "-"
        lines.append(f"| {split} | {counts[split]} | {kinds} |")
    mix = counts.get("mixture") or {}
    if mix.get("target"):
        lines += ["", f"## Train mix (target shares, a row repeated at most {recipe.mixture.max_repeat}x)", "",
                  "| kind | target | reached | rows | available |", "|---|---|---|---|---|"]
        for k in sorted(set(mix["target"]) | set(mix["available"])):
            lines.append(f"| {k} | {mix['target'].get(k, 0):.3f} | {mix['reached'].get(k, 0):.3f} | "
                         f"{mix['rows'].get(k, 0)} | {mix['available'].get(k, 0)} |")
        for k in mix.get("short") or []:
            lines.append(f"\n`{k}` falls short of its share: {mix['available'].get(k, 0)} row(s), each repeated at most "
                         f"{recipe.mixture.max_repeat}x.")
        for k in mix.get("missing") or []:
            lines.append(f"\nNo train row of `{k}`: {WHY_NONE[k]}; its share went to the other kinds.")
    if mix.get("eval_caps"):
        caps = ", ".join(f"{k} {v:.2f}" for k, v in sorted(recipe.mixture.eval_caps.items()))
        lines += ["", f"## Evaluation splits (share caps: {caps}; at least {recipe.mixture.eval_min_rows} rows "
                  "of a capped kind; no row repeated)", "", "| split | kind | available | rows | reached |",
                  "|---|---|---|---|---|"]
        for name, rep in mix["eval_caps"].items():
            for k, n in rep["available"].items():
                lines.append(f"| {name} | {k} | {n} | {rep['rows'].get(k, 0)} | {rep['reached'].get(k, 0):.3f} |")
    for src, why in (mix.get("why_none") or {}).items():
        for k, text in why.items():
            lines.append(f"\n- `{src}` supplies no `{k}` rows: {text}.")
    memo = counts.get("memorisation") or {}
    if memo:
        tr = memo.get("train") or {}
        lines += ["", "## Memorisation audit (each split against train; `dtw audit DIR` prints it)", "",
                  f"Train: {tr.get('compress_targets', 0)} compress targets, {tr.get('distinct_skeletons', 0)} "
                  f"distinct skeletons, {tr.get('range_shapes', 0)} (kind, range-shape) combinations. "
                  "structure_seen: share of a split's compress targets whose skeleton (numbers, ids, "
                  "identifiers, paths and quoted spans masked) equals a train target's; content_seen: share "
                  "of their exact items found verbatim in a train target (`data_gen/memorisation.py`).", "",
                  "| split | compress targets | sessions | structure_seen | content_seen | exact items | "
                  "(kind, range-shape) |", "|---|---|---|---|---|---|---|"]
        for split, f in memo.items():
            if split != "train":
                lines.append(f"| {split} | {f['compress_targets']} | {f['sessions']} | {f['structure_seen']:.3f} | "
                             f"{'-' if f['content_seen'] is None else format(f['content_seen'], '.3f')} | "
                             f"{f['exact_items']} | {f['range_shapes']} |")
    lines += ["", "## Estimated tokens per row (chars/4)", "", "| split | min | p50 | p90 | p99 | max |",
              "|---|---|---|---|---|---|"]
    for split in SPLITS:
        p = counts["token_percentiles"][split]
        if p:
            lines.append(f"| {split} | {p['min']} | {p['p50']} | {p['p90']} | {p['p99']} | {p['max']} |")
    lines += _labelling_lines(counts.get("labelling") or {})
    if counts.get("too_long_by_kind"):
        lines += ["", "## Labelled rows over the length bounds, by kind (ordinary windows; dropped whole)", "",
                  "| kind | dropped |", "|---|---|"]
        lines += [f"| {k} | {n} |" for k, n in counts["too_long_by_kind"].items()]
    lines += ["", "## Rejected and removed", "", "| reason | count |", "|---|---|"]
    for reason, n in counts["rejects"].items():
        lines.append(f"| {reason} | {n} |")
    if not counts["rejects"]:
        lines.append("| (none) | 0 |")
    lines += ["", f"Windows {recipe.replay.windows}, gate presets {recipe.replay.gates}, "
              f"horizon {recipe.replay.horizon} steps, seed {recipe.replay.seed}.", ""]
    return "\n".join(lines)


def _labelling_lines(labelling: dict[str, dict[str, int]]) -> list[str]:
    """The card's per-source labelling table: decision points attempted, labelled, and the
    skips the labeler and the kernel cause (the rest of the skips summed)."""
    if not labelling:
        return []
    lines = ["", "## Labelling per source (decision points replayed; labelled before the length filter)", "",
             "failed: share of the points whose label the checker or the kernel refused "
             "(summary_failed + kernel_rejected); other skips (nothing to fold, the action limit) are no "
             "failed label.", "",
             "| source | points | labelled | skipped:summary_failed | skipped:kernel_rejected | failed | "
             "other skips |", "|---|---|---|---|---|---|---|"]
    for src, c in labelling.items():
        points, done = c.get("points", 0), c.get("labelled", 0)
        other = sum(n for k, n in c.items() if k.startswith(("skipped:", "replay_error:"))
                    and k not in ("skipped:summary_failed", "skipped:kernel_rejected"))
        sf, kr = c.get("skipped:summary_failed", 0), c.get("skipped:kernel_rejected", 0)
        failed = f"{(sf + kr) / points:.3f}" if points else "-"
        lines.append(f"| {src} | {points} | {done} | {sf} | {kr} | {failed} | {other} |")
    return lines
