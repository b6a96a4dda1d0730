"""Schema of ``configs/data/*.yaml``: one SFT curriculum build.

Sources produce sessions; replay drives them through the kernel under each window and gate
preset and labels every decision point with the doctrine; the curriculum step weights,
de-duplicates and splits the samples by session. Every field has a default that suits the
demo; ``configs/data/reference.yaml`` is the full curriculum for a GPU run.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from plumbing.recipe_loader import BaseConfig

KINDS = ("nudged_compress", "refusal", "spontaneous_compress", "tier2", "tier3", "emergency",
         "recovery", "ordinary")


class SyntheticSource(BaseConfig):
    families: list[str] = Field(default_factory=lambda: ["ts_repo", "py_bughunt", "dep_migration",
                                                         "log_triage", "data_analysis"])
    sessions_per_family: int = 2
    seed: int = 0
    steps: int = Field(12, description="task steps per session")
    tool_output_lines: tuple[int, int] = Field((20, 120), description="min, max lines of a long tool output")


class SweRebenchSource(BaseConfig):
    path: str | None = Field(None, description="local parquet/JSONL, or the hub dataset id")
    revision: str = "35455389ab51bf5e2306bfd436ef72d0f98bf882"
    max_rows: int | None = Field(None, description="stop after this many accepted rows")


class LoggedSource(BaseConfig):
    paths: list[str] = Field(default_factory=list, description="kernel state files or folders of them")
    min_score: float | None = Field(None, description="None: the doctrine version's pass threshold")
    below_threshold: Literal["drop", "relabel"] = "drop"


class TeacherSource(BaseConfig):
    enabled: bool = False
    base_url: str = "http://127.0.0.1:8000/v1"
    model: str = "teacher"
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
    sessions_per_tree: int = Field(4, ge=1)
    seed: int = 0
    tasks: list[Literal["default_of", "failing_check", "constant_of"]] = Field(
        default_factory=lambda: ["default_of", "failing_check", "constant_of"])
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
    synthetic: SyntheticSource | None = Field(default_factory=SyntheticSource)
    swe_rebench: SweRebenchSource | None = None
    logged: LoggedSource | None = None
    teacher: TeacherSource | None = None
    real_tools: RealToolsSource | None = None


class ReplaySettings(BaseConfig):
    windows: list[int] = Field(default_factory=lambda: [16384, 32768])
    gates: list[Literal["reference", "default", "aggressive", "pocket"]] = Field(
        default_factory=lambda: ["default", "aggressive"],
        description="gate presets of the serving profiles (doctrine.kernel.profile)")
    host: Literal["proxy", "pi"] = Field("proxy", description="host variant of the serving profiles")
    horizon: int = Field(2, description="steps ahead that decide whether a message is still needed")
    seed: int = 0


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

    kind: dict[str, float] = Field(default_factory=dict)
    source: dict[str, float] = Field(default_factory=dict)
    family: dict[str, float] = Field(default_factory=dict)
    window: dict[str, float] = Field(default_factory=dict)
    shares: dict[str, float] = Field(default_factory=dict, description="target share of train rows per kind")
    max_repeat: int = Field(3, ge=1, description="most copies of one row that shares may make")
    eval_caps: dict[str, float] = Field(default_factory=dict,
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
    exact: bool = True
    near: bool = True
    near_threshold: float = Field(0.9, description="Jaccard similarity of targets (MinHash estimate)")


class Split(BaseConfig):
    validation_fraction: float = Field(0.1, ge=0.0, le=1.0)
    test_fraction: float = Field(0.1, ge=0.0, le=1.0)
    held_out_families: list[str] = Field(default_factory=lambda: ["data_analysis"],
                                         description="whole families kept out of train: the 'heldout' split")
    held_out_for: dict[str, list[str]] = Field(
        default_factory=dict,
        description="eval workload -> families held out because that eval mirrors them (they join 'heldout')")
    seed: int = 0

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
    name: str
    kinds: list[str]


class DataRecipe(BaseConfig):
    # Doctrine and prompts
    doctrine_version: str = "v1"
    prompt_mode: Literal["distilled", "doctrine"] = "distilled"
    nudge_style: Literal["list", "list_only", "none"] = "list"
    # Sources
    sources: Sources = Field(default_factory=Sources)
    # Replay
    replay: ReplaySettings = Field(default_factory=ReplaySettings)
    max_tokens: int = Field(4096, description="samples longer than this (estimated tokens) are dropped")
    max_model_tokens: int | None = Field(
        None, ge=1, description="also drop samples longer than this in length_model's tokens, rendered through "
                                "its training chat template with the tool schemas (None: no such filter)")
    length_model: str = Field("embedded:smollm2-135m-instruct", description="model whose tokenizer max_model_tokens counts")
    secret_envs: list[str] = Field(
        default_factory=list, description="names of environment variables whose values no row may hold (the "
                                          "teacher's api_key_env is always scanned for, and common key shapes)")
    # Curriculum
    mixture: Mixture = Field(default_factory=Mixture)
    dedupe: Dedupe = Field(default_factory=Dedupe)
    split: Split = Field(default_factory=Split)
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
