"""Schema of ``configs/data/*.yaml``: one SFT curriculum build.

Sources produce sessions; replay drives them through the kernel under each window and gate
preset and labels every decision point with the doctrine; the curriculum step weights,
de-duplicates and splits the samples by session. Every field has a default that suits the
demo; ``configs/data/reference.yaml`` is the full curriculum for a GPU run.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from plumbing.recipe_loader import BaseConfig

KINDS = ("nudged_compress", "refusal", "spontaneous_compress", "tier2", "tier3", "emergency",
         "recovery", "ordinary")
# The smallest context window a recipe may name (tokens), as the eval recipe's windows: below
# it the fixed prompt alone fills the window.
MIN_WINDOW = 256
# A row weight of the mixture: 0 drops the rows, 2.5 keeps them twice and once more half the time.
Weight = Annotated[float, Field(ge=0)]


class GeneratedSize(BaseConfig):
    """How big a generated session is (data_gen.synthetic.SessionSize): the data recipe's
    synthetic source and the eval's scripted workload both declare it with this."""

    # data_gen/synthetic/_tools.py SessionSize: fewer steps leave no room for a compression.
    steps: int = Field(12, ge=3, description="task steps per session")
    tool_output_lines: tuple[Annotated[int, Field(ge=1)], Annotated[int, Field(ge=1)]] = Field(
        (20, 120), description="min, max lines of a long tool output")

    @field_validator("tool_output_lines")
    @classmethod
    def _lines_ordered(cls, v: tuple[int, int]) -> tuple[int, int]:
        if v[0] > v[1]:
            raise ValueError(f"min {v[0]} is above max {v[1]}; give [min, max]")
        return v

    def session_size(self):
        from data_gen.synthetic import SessionSize

        return SessionSize(steps=self.steps, tool_output_lines=tuple(self.tool_output_lines))


class SyntheticSource(GeneratedSize):
    families: list[str] = Field(
        default_factory=lambda: ["ts_repo", "py_bughunt", "dep_migration", "log_triage", "data_analysis"],
        min_length=1, description="synthetic task families to generate (data_gen/synthetic: FAMILIES and "
                                  "POCKET_FAMILIES)")
    sessions_per_family: int = Field(2, ge=1, description="sessions generated per family")
    seed: int = Field(0, ge=0, description="base seed: session k of a family uses seed * 1000 + k")

    @field_validator("families")
    @classmethod
    def _known_families(cls, v: list[str]) -> list[str]:
        from data_gen.synthetic import ALL_FAMILIES

        bad = [f for f in v if f not in ALL_FAMILIES]
        if bad:
            raise ValueError(f"unknown synthetic families {bad}; known: {list(ALL_FAMILIES)}")
        return v


class SweRebenchSource(BaseConfig):
    path: str | None = Field(None, description="local parquet/JSONL, or the hub dataset id")
    revision: str = Field("35455389ab51bf5e2306bfd436ef72d0f98bf882",
                          description="hub dataset revision (commit) read when path is a dataset id")
    max_rows: int | None = Field(None, ge=1, description="stop after this many accepted rows")


class LoggedSource(BaseConfig):
    paths: list[str] = Field(default_factory=list, description="kernel state files or folders of them")
    min_score: float | None = Field(None, ge=0, le=1, description="conformance score a logged summary needs "
                                    "(a score is in [0, 1]); None: the doctrine version's pass threshold")
    below_threshold: Literal["drop", "relabel"] = Field(
        "drop", description="a logged summary under min_score is dropped, or relabeled by the doctrine's labeler")


class TeacherSource(BaseConfig):
    enabled: bool = Field(False, description="ask the teacher model for the decision points' replies")
    base_url: str = Field("http://127.0.0.1:8000/v1", description="the teacher server's OpenAI-compatible /v1 root")
    model: str = Field("teacher", description="served model name the teacher requests ask for")
    api_key_env: str | None = Field(None, description="name of the env var holding the key (never the key)")
    timeout_s: float = Field(120.0, gt=0, description="deadline of one teacher call (connect to last byte)")
    max_tokens: int = Field(768, ge=1, description="most tokens of one teacher reply")
    min_accepted_share: float = Field(
        0.0, ge=0, le=1, description="fail the build when the teacher's kept replies are under this share of "
                                     "the points it was asked (it always fails when it kept none)")

    @model_validator(mode="before")
    @classmethod
    def _key_env_is_a_name(cls, data: Any) -> Any:
        # Checked on the whole section, so a pasted key is never echoed in the error.
        if isinstance(data, dict) and data.get("api_key_env") is not None:
            from plumbing.secret_scan import env_name_error

            problem = env_name_error(data["api_key_env"], "sources.teacher.api_key_env")
            if problem:
                raise ValueError(problem)
        return data


class RealToolsSource(BaseConfig):
    """Sessions whose tool outputs come from real read-only commands over source trees on
    this machine (data_gen/sources/real_tools.py). A tree is ``stdlib/<package>`` or
    ``site/<package>``; its family is ``realtool_<kind>_<package>``."""

    trees: list[str] = Field(default_factory=list, description="trees trained on")
    heldout_trees: list[str] = Field(default_factory=list,
                                     description="trees never trained on (their families go to split.held_out_families)")
    sessions_per_tree: int = Field(4, ge=1, description="sessions generated over each tree")
    seed: int = Field(0, ge=0, description="seed of the files, symbols and steps each session picks")
    tasks: list[Literal["default_of", "failing_check", "constant_of"]] = Field(
        default_factory=lambda: ["default_of", "failing_check", "constant_of"], min_length=1,
        description="the kinds of small task a session is drawn from")
    calls: tuple[int, int] = Field((4, 9), description="min, max tool calls of a session (core calls at least)")
    probes: int = Field(1, ge=0, description="questions answered from memory per session")
    max_output_lines: int = Field(12, ge=1, description="a candidate with a longer output is passed over (never cut)")
    max_output_chars: int = Field(700, ge=1, description="same, in characters")
    timeout_s: float = Field(20.0, gt=0, description="deadline of one command")
    max_candidates: int = Field(40, ge=1, description="candidates tried per session before it is rejected")

    @model_validator(mode="after")
    def _disjoint(self) -> RealToolsSource:
        both = sorted(set(self.trees) & set(self.heldout_trees))
        if both:
            raise ValueError(f"sources.real_tools: trees {both} are both trained on and held out")
        if not 1 <= self.calls[0] <= self.calls[1]:
            raise ValueError(f"sources.real_tools.calls must be (min, max) with 1 <= min <= max, got {self.calls}")
        return self


class Sources(BaseConfig):
    synthetic: SyntheticSource | None = Field(default_factory=SyntheticSource,
                                              description="seeded synthetic sessions (null: none)")
    swe_rebench: SweRebenchSource | None = Field(None, description="SWE-rebench agent trajectories (null: none)")
    logged: LoggedSource | None = Field(None, description="logged kernel states of real sessions (null: none)")
    teacher: TeacherSource | None = Field(None, description="a teacher model that writes replies (null: none)")
    real_tools: RealToolsSource | None = Field(
        None, description="sessions whose tool outputs are real read-only commands over source trees (null: none)")


class RecoveryWindow(BaseConfig):
    """A small window replayed only for its recovery lessons and their counter-lessons.

    A pocket window's urgent nudges fold first and its summaries keep the session's facts, so
    a detail is rarely lost from view; a silent window whose summaries keep only what is
    needed soon loses some, but nothing bounds its context, so most of its rows are over the
    pocket token bound. Replayed here, the window's folds shape the history (fold labels are
    not kept) and only the rows of ``keep`` are, so the recovery rows that fit join the build.
    """

    window: int = Field(1600, ge=MIN_WINDOW, description="context window (tokens) of the replay")
    silent: bool = Field(True, description="no nudge shown (nudge_style none): folds are the labeler's own "
                                           "spontaneous ones, so the next step sees no nudge to decline")
    horizon: int = Field(1, ge=0, description="look-ahead: later steps whose use of a message keeps it out of "
                                              "a fold (replay.horizon elsewhere); 1 folds a detail sooner")
    recent_messages: int = Field(1, ge=0, description="recent zone: the last messages the kernel never folds "
                                                      "(preserve_recent_messages; the pocket preset keeps 3)")
    label: dict[str, Any] = Field(
        default_factory=lambda: {"keep_session_facts": False, "min_piece_tokens": 48, "spontaneous_min_tokens": 48},
        description="LabelConfig overrides on top of replay.label: summaries keep only the facts needed soon, and "
                    "a fold comes once 48 tokens are consumed, so a detail is folded early while rows are short")
    keep: list[Literal["recovery", "counter_recovery", "ordinary"]] = Field(
        default_factory=lambda: ["recovery", "counter_recovery"], min_length=1,
        description="rows kept from this replay: recovery (calls and answers), counter_recovery (ordinary rows "
                    "whose detail is still in view, meta.counter_recovery), ordinary (every other ordinary row)")

    def kernel_overrides(self) -> dict[str, Any]:
        """The kernel settings this replay changes (recorded in its serving profile)."""
        return {"preserve_recent_messages": self.recent_messages}

    def keeps(self, meta: dict[str, Any]) -> bool:
        """Whether a row with ``meta`` is kept from this replay."""
        kind = meta.get("kind")
        if kind == "recovery":
            return "recovery" in self.keep
        if kind == "ordinary" and not meta.get("declined"):
            return ("counter_recovery" if meta.get("counter_recovery") else "ordinary") in self.keep
        return False


class ReplaySettings(BaseConfig):
    windows: list[Annotated[int, Field(ge=MIN_WINDOW)]] = Field(
        default_factory=lambda: [16384, 32768], min_length=1,
        description="context windows (tokens) every session is replayed under")
    gates: list[Literal["reference", "default", "aggressive", "pocket", "proxy", "proxy_pocket"]] = Field(
        default_factory=lambda: ["default", "aggressive"], min_length=1,
        description="gate presets of the serving profiles (doctrine.kernel.profile)")
    host: Literal["proxy", "pi", "proxy_chat"] = Field(
        "proxy", description="host variant of the serving profiles (proxy_chat: the proxy as recorded)")
    horizon: int = Field(2, ge=0, description="steps ahead that decide whether a message is still needed")
    seed: int = Field(0, ge=0, description="seed of the labeler's choices during replay")
    usage_counter: str = Field("acp-default", description="the host's fill counter: acp-default (chars/4) or "
                               "model:SPEC (the served model's tokenizer, as the proxy_chat host reads it)")
    silent_windows: list[int] = Field(
        default_factory=list, description="windows (of ``windows``) replayed with no nudge shown (nudge_style "
                                          "none): the kernel decides silently, so a fold there is spontaneous")
    label: dict[str, Any] = Field(
        default_factory=dict, description="LabelConfig fields to override (doctrine.label.config), e.g. a "
                                          "min_piece_tokens scaled to a pocket window")
    label_windows: dict[int, dict[str, Any]] = Field(
        default_factory=dict, description="per-window LabelConfig overrides on top of ``label`` (an entry "
                                          "for a window not in ``windows`` is unused), e.g. a silent window whose summaries keep only "
                                          "the facts needed soon, so a later step must recover a folded one")

    recovery_windows: list[RecoveryWindow] = Field(
        default_factory=list, description="extra replays kept only for their recovery rows and counter-lessons "
                                          "(RecoveryWindow), e.g. [{window: 1600}]")

    @model_validator(mode="after")
    def _label_fields(self) -> ReplaySettings:
        self.label_config()  # an unknown field or a bad value fails when the recipe loads
        for i, rw in enumerate(self.recovery_windows):
            try:
                self.recovery_label_config(rw)
            except ValueError as exc:
                raise ValueError(f"replay.recovery_windows[{i}].label: {exc}") from None
        stray = sorted(set(self.silent_windows) - set(self.windows))
        if stray:
            raise ValueError(f"replay.silent_windows {stray} are not among replay.windows {self.windows}")
        # An entry of label_windows for a window not replayed is unused, not an error: a command
        # line that narrows replay.windows keeps working. Its fields are checked all the same.
        for w in self.label_windows:
            self.label_config(w)
        return self

    def nudge_style(self, window: int, style: str) -> str:
        """The nudge style a replay at ``window`` runs: ``none`` for a silent window, else ``style``."""
        return "none" if window in self.silent_windows else style

    def recovery_label_config(self, rw: RecoveryWindow):
        """The labeler's thresholds of a recovery replay: ``label`` with ``rw.label`` on top."""
        return _label_config({**self.label, **rw.label}, "replay.recovery_windows.label")

    def label_config(self, window: int | None = None):
        """The labeler's thresholds: the defaults with ``label`` (and, for ``window``, its
        ``label_windows`` entry) applied; None when neither sets anything."""
        fields = {**self.label, **(self.label_windows.get(window, {}) if window is not None else {})}
        where = "replay.label" if window is None or window not in self.label_windows else f"replay.label_windows.{window}"
        return _label_config(fields, where) if fields else None


def _label_config(fields: dict, where: str):
    """A LabelConfig of ``fields``; an unknown field or a bad value is a ValueError naming ``where``."""
    import dataclasses

    from doctrine.label import LabelConfig

    known = {f.name for f in dataclasses.fields(LabelConfig)}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {unknown}; known: {sorted(known)}")
    try:
        return LabelConfig(**fields)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: {exc}") from None


class Mixture(BaseConfig):
    """What the train split is made of.

    Weights: row weight = kind x source x family x window weights (missing keys weigh 1); a
    row of weight w is kept floor(w) times plus once more with probability frac(w) (seeded).
    ``shares`` then samples the train rows to a target share per kind (seeded): kinds not
    listed share what is left in their natural proportion, a kind no source supplied is
    reported and its share goes to the others, and a row is repeated at most ``max_repeat``
    times (so a scarce kind caps the size of the split rather than being copied without
    end). The manifest and the card report the shares reached.

    Evaluation splits (validation, test, heldout) are never repeated or filled: ``eval_caps``
    gives the most share a kind may hold in each of them, and surplus rows of a capped kind
    are sampled out (never below ``eval_min_rows`` rows of it); uncapped kinds are kept
    whole. So the curriculum as a whole, not only train, keeps the recipe's balance.
    """

    kind: dict[str, Weight] = Field(default_factory=dict, description="row weight per decision kind (missing: 1)")
    source: dict[str, Weight] = Field(default_factory=dict, description="row weight per source (missing: 1)")
    family: dict[str, Weight] = Field(default_factory=dict, description="row weight per task family (missing: 1)")
    window: dict[str, Weight] = Field(default_factory=dict, description="row weight per window, keyed by its "
                                      "token count (missing: 1)")
    shares: dict[str, Annotated[float, Field(ge=0, le=1)]] = Field(
        default_factory=dict, description="target share of train rows per kind")
    max_repeat: int = Field(3, ge=1, description="most copies of one row that shares may make")
    eval_caps: dict[str, Annotated[float, Field(gt=0, le=1)]] = Field(default_factory=dict,
                                        description="most share of an eval split a kind may hold (surplus sampled out)")
    eval_min_rows: int = Field(10, ge=0, description="rows of a capped kind an eval split keeps at least")

    @model_validator(mode="after")
    def _shares(self) -> Mixture:
        unknown = sorted(set(self.shares) - set(KINDS))
        if unknown:
            raise ValueError(f"mixture.shares: unknown kind(s) {unknown}; kinds are {list(KINDS)}")
        if any(v < 0 for v in self.shares.values()) or sum(self.shares.values()) > 1 + 1e-9:
            raise ValueError("mixture.shares: shares are non-negative and sum to at most 1")
        bad = sorted(set(self.eval_caps) - set(KINDS))
        if bad:
            raise ValueError(f"mixture.eval_caps: unknown kind(s) {bad}; kinds are {list(KINDS)}")
        if any(not 0 < v <= 1 for v in self.eval_caps.values()) or sum(self.eval_caps.values()) >= 1:
            raise ValueError("mixture.eval_caps: caps are in (0, 1] and sum to less than 1")
        if self.shares and self.kind:
            raise ValueError("mixture: give kind weights or kind shares, not both")
        return self


class Dedupe(BaseConfig):
    exact: bool = Field(True, description="drop a row identical to an earlier one")
    near: bool = Field(True, description="drop a row whose target (20+ words) is near an earlier one's of its kind")
    near_threshold: float = Field(0.9, gt=0, le=1, description="Jaccard similarity of targets (MinHash "
                                  "estimate) from which a row is a near duplicate")


class Split(BaseConfig):
    validation_fraction: float = Field(0.1, ge=0.0, le=1.0, description="share of sessions in the validation split")
    test_fraction: float = Field(0.1, ge=0.0, le=1.0, description="share of sessions in the test split")
    held_out_families: list[str] = Field(default_factory=lambda: ["data_analysis"],
                                         description="whole families kept out of train: the 'heldout' split")
    held_out_for: dict[str, list[str]] = Field(
        default_factory=dict,
        description="eval workload -> families held out because that eval mirrors them (they join 'heldout')")
    seed: int = Field(0, ge=0, description="seed of the split by session and of the mixture's sampling")

    @property
    def held_out(self) -> list[str]:
        """Every held-out family: ``held_out_families`` and those of ``held_out_for``."""
        out = list(self.held_out_families)
        for fams in self.held_out_for.values():
            out += [f for f in fams if f not in out]
        return out

    @model_validator(mode="after")
    def _fractions(self) -> Split:
        total = self.validation_fraction + self.test_fraction
        if total > 1.0:
            raise ValueError(f"validation_fraction + test_fraction must be at most 1, got {total:g}")
        return self


# Eval workloads whose cases mirror a synthetic family (eval.workloads.marathon.tasks runs the
# ts_repo library task): a curriculum that trains on that family leaks the eval.
EVAL_MIRRORS: dict[str, tuple[str, ...]] = {"marathon": ("ts_repo",)}


def leaks(split: Split, families: list[str], workloads: list[str]) -> list[str]:
    """Problems (empty: none) of training on ``families`` while ``workloads`` are evaluated."""
    out = []
    for w in workloads:
        for fam in EVAL_MIRRORS.get(w, ()):
            if fam in families and fam not in split.held_out:
                out.append(f"family {fam!r} is trained on while the {w!r} eval, which mirrors it, runs: "
                           f"add it to split.held_out_for.{w}")
    return out


class Stage(BaseConfig):
    name: str = Field(min_length=1, description="stage name, written into each of its rows' meta.stage")
    kinds: list[Literal[KINDS]] = Field(  # type: ignore[valid-type]
        min_length=1, description="decision kinds trained in this stage (a kind joins its first stage)")


class DataRecipe(BaseConfig):
    # Doctrine and prompts
    doctrine_version: str = Field("v1", description="doctrine version (doctrine/versions/<v>) that labels the rows")
    prompt_mode: Literal["distilled", "doctrine"] = Field(
        "distilled", description="system prompt of the rows: distilled (no doctrine text) or doctrine (the full text)")
    nudge_style: Literal["list", "list_only", "none"] = Field(
        "list", description="how the kernel's nudges are rendered (doctrine/render/prompts.py NUDGE_STYLES)")
    # Sources
    sources: Sources = Field(default_factory=Sources, description="where sessions come from")
    # Replay
    replay: ReplaySettings = Field(default_factory=ReplaySettings,
                                   description="how sessions are replayed through the kernel and labeled")
    max_tokens: int = Field(4096, ge=1, description="samples longer than this (estimated tokens) are dropped")
    max_model_tokens: int | None = Field(
        None, ge=1, description="also drop samples longer than this in length_model's tokens, rendered through "
                                "its training chat template with the tool schemas (None: no such filter)")
    length_model: str = Field("embedded:smollm2-135m-instruct", description="model whose tokenizer max_model_tokens counts")
    secret_envs: list[str] = Field(
        default_factory=list, description="names of environment variables whose values no row may hold (the "
                                          "teacher's api_key_env is always scanned for, and common key shapes)")
    # Curriculum
    mixture: Mixture = Field(default_factory=Mixture, description="weights and shares of the train split")
    dedupe: Dedupe = Field(default_factory=Dedupe, description="which duplicate rows are dropped")
    split: Split = Field(default_factory=Split, description="how sessions are split into train and eval splits")
    stages: list[Stage] = Field(default_factory=list, description="optional ordering of train rows by stage")
    shard_rows: int = Field(1000, ge=1, description="rows per parquet shard")

    @model_validator(mode="after")
    def _real_tool_trees_split(self) -> DataRecipe:
        # The held-out trees are named once in the source; the split must agree, so a tree
        # meant to be unseen can never land in train by a forgotten line.
        rt = self.sources.real_tools
        if rt is None:
            return self
        from data_gen.sources.real_tools_sandbox import tree_family

        held = set(self.split.held_out)
        missing = [tree_family(t) for t in rt.heldout_trees if tree_family(t) not in held]
        trained = [tree_family(t) for t in rt.trees if tree_family(t) in held]
        if missing:
            raise ValueError(f"split.held_out_families must list the held-out trees' families {missing}")
        if trained:
            raise ValueError(f"split.held_out_families lists trained trees' families {trained}")
        return self

    @model_validator(mode="before")
    @classmethod
    def _secret_envs_are_names(cls, data: Any) -> Any:
        # Checked on the whole recipe, so a pasted key is never echoed in the error.
        names = data.get("secret_envs") if isinstance(data, dict) else None
        if isinstance(names, list):
            from plumbing.secret_scan import env_name_error

            for i, name in enumerate(names):
                problem = env_name_error(name, f"secret_envs[{i}]")
                if problem:
                    raise ValueError(problem)
        return data
