"""``EvalRecipe``: the typed YAML schema of ``configs/eval/*.yaml``.

    dtw eval configs/eval/smoke.yaml --out runs/smoke/eval [key=value ...] [--explain]

A run is every (arm x workload case x window x seed) the recipe names. Every free-form
block is checked by a typed model when the recipe loads, before any case runs: each
workload's ``settings`` by that workload's ``Settings``, ``backend.settings`` by the
backend's (:data:`BACKEND_SETTINGS`), ``arm_settings`` by :class:`ArmSettings` and
``kernel`` by :class:`KernelOverrides`; a misspelt key or a wrong-typed value is a one-line
error naming it. The blocks are kept as given, so the run's fingerprint is what the recipe
says. Backend settings name the environment variable that holds an API key
(``api_key_env``); a key written into a recipe is refused.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from eval.arm_names import ARM_NAMES, DEFAULT_ARMS
from eval.arms.base import TUNABLE
from plumbing.recipe_loader import BaseConfig, describe_errors


def check_settings(model: type[BaseConfig], value: dict[str, Any], where: str, label: str = "") -> dict[str, Any]:
    """``value`` unchanged if ``model`` accepts it, else a ValueError naming every bad key
    (``where`` prefixes them: ``settings.sesions``) on one line, after ``label``."""
    try:
        model.model_validate(value)
    except ValidationError as exc:
        raise ValueError(label + "; ".join(describe_errors(exc, model, f"{where}."))) from None
    return value


def _settings_model(tunable: dict[str, type], name: str, doc: str) -> type[BaseConfig]:
    """A BaseConfig model with one field per key of ``tunable`` (a setting's name -> the
    dataclass that declares it): the dataclass field's type and default, and the description
    and bounds its metadata carries (eval.arms.base.setting). A setting without a description
    is an error here, at import, so every key ``--explain`` lists says what it is."""
    fields: dict[str, Any] = {}
    for key, group in tunable.items():
        f = next(f for f in dataclasses.fields(group) if f.name == key)
        if not (f.metadata.get("description") or "").strip():
            raise TypeError(f"{group.__name__}.{key} is a recipe setting without a description; "
                            "declare it with eval.arms.base.setting(default, description, ...)")
        if f.default is dataclasses.MISSING:
            raise TypeError(f"{group.__name__}.{key} is a recipe setting without a default")
        fields[key] = (typing.get_type_hints(group)[key],
                       Field(f.default, description=f.metadata["description"], **f.metadata.get("bounds", {})))
    return create_model(name, __base__=BaseConfig, __doc__=doc, **fields)


# What ``arm_settings`` may set: the keys of ``eval.arms.TUNABLE``, the fields of ArmEnv's settings
# groups (KernelSettings.deterministic_every, CompactionSettings, EngineSettings) declared with
# ``setting``; the rest of ArmEnv comes from the run (window, doctrine, serving profile). Built from
# the dataclasses, so a setting is declared once, there: name, type, default, bounds, description.
ArmSettings = _settings_model(
    TUNABLE, "ArmSettings",
    "What ``arm_settings`` may set: the settings of ArmEnv's groups (eval.arms.base), with their "
    "defaults, bounds and descriptions.")


class StrictSettings(BaseConfig):
    """Base of the settings models whose block is passed on as given (backend constructor
    keywords, kernel overrides): strict types, so what passes is what the consumer gets
    (``"4"`` is not an int here; an int is accepted where a float is expected)."""

    model_config = ConfigDict(strict=True)


# ----------------------------------------------------------------------------- backends
# What ``backend.settings`` may hold for each backend: the keyword arguments of its
# constructor (eval.backends.<name>), with the same defaults, less ``adapter_dir``: the adapter
# folder has one key, backend.adapter_dir. ``model`` is usually given as backend.model; a recipe
# may give it here instead (configs/eval/vllm_server.yaml does), never in both places.


class HFSettings(StrictSettings):
    model: str | None = Field(None, description="a model spec (plumbing.models)")
    dtype: Literal["float32", "bfloat16", "float16"] = Field("float32", description="dtype the weights load in")
    chat_template: str = Field(
        "auto", description="auto (the tokenizer's, else the project's) or a template name")
    batch_size: int = Field(4, ge=1, description="requests generated together (left-padded)")
    reuse_prefix_cache: bool = Field(True, description="keep the KV cache of the last prompt for the next one")
    kv_cache: Literal["growing", "dynamic"] = Field(
        "growing", description="the KV cache: plumbing.kv_cache's growing buffer, or transformers' own")


class VLLMSettings(StrictSettings):
    model: str | None = Field(None, description="a model spec (plumbing.models)")
    adapter_name: str = Field("adapter", description="LoRA module name of the adapter")
    max_lora_rank: int = Field(8, ge=1, description="vLLM's --max-lora-rank: at least the adapter's rank")
    max_model_len: int = Field(4096, ge=256, description="longest prompt plus reply vLLM accepts (tokens)")
    gpu_memory_utilization: float = Field(0.5, gt=0, le=1, description="share of GPU memory vLLM may take")
    chat_template: str = Field(
        "auto", description="auto (the tokenizer's, else the project's) or a template name")
    tensor_parallel_size: int = Field(1, ge=1, description="GPUs one model is split over")


class OpenAISettings(StrictSettings):
    base_url: str | None = Field(None, description="required: the server's /v1 root")
    model: str | None = Field(None, description="required: the served base model name")
    adapter_model: str | None = Field(
        None, description="served name of the adapter (a LoRA module), for the distilled arm")
    api_key_env: str | None = Field(None, description="the environment variable that holds the key")
    timeout_s: float = Field(120.0, gt=0, description="deadline of one request (seconds)")
    temperature: float = Field(0.0, ge=0, le=2, description="sampling temperature (0: greedy; the API takes 0 to 2)")
    tool_choice: str | None = Field(
        None, description="sent only when set (auto needs server-side tool parsing)")


class ReferenceSettings(StrictSettings):
    """oracle, never_compress, first_range: policies without a model take no settings."""


BACKEND_SETTINGS: dict[str, type[StrictSettings]] = {
    "hf": HFSettings, "vllm": VLLMSettings, "openai": OpenAISettings, "oracle": ReferenceSettings,
    "never_compress": ReferenceSettings, "first_range": ReferenceSettings,
}
REFERENCE_BACKENDS = tuple(k for k, v in BACKEND_SETTINGS.items() if v is ReferenceSettings)


def drop_model_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """A reference policy's ``backend.settings``: the keys a model backend takes are dropped
    (they belong to the backend the recipe was written for, so ``backend.name=oracle`` over a
    vllm recipe composes); any other key is kept, so the empty ReferenceSettings still refuses
    it as unknown (a typo fails as it does for every backend)."""
    model_keys = {k for v in BACKEND_SETTINGS.values() if v is not ReferenceSettings
                  for k in v.model_fields}
    return {k: v for k, v in settings.items() if k not in model_keys}


# ------------------------------------------------------------------------------ kernel
# ``kernel`` overrides the KernelConfig the gate preset resolves (doctrine.kernel.config),
# group by group (``kernel: {nudge: {growth_floor: 2000}, compress: {min_compress_range: 800}}``).
# The models are made from the kernel's own dataclasses, so they cannot drift from it.
# Left out: model_context_limit (the run's ``windows`` set it) and the callables
# (is_tool_protected, filters), which a YAML file cannot hold.
_KERNEL_NOT_IN_RECIPES = ("model_context_limit", "is_tool_protected", "filters")


def _overrides_model(cls: type, name: str, skip: tuple[str, ...] = ()) -> type[StrictSettings]:
    """A StrictSettings model with every field of dataclass ``cls`` optional (None: keep the
    preset's value); nested dataclasses become nested models, tuples lists (YAML has no tuple)."""
    hints = typing.get_type_hints(cls)
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp):
            tp = _overrides_model(tp, f"{name}{tp.__name__.removesuffix('Config')}")
        elif typing.get_origin(tp) is tuple:
            tp = list[typing.get_args(tp)[0]]  # type: ignore[valid-type]
        fields[f.name] = (tp | None, None)
    return create_model(name, __base__=StrictSettings, __doc__=f"Overrides of {cls.__name__}.", **fields)


def _kernel_overrides_model() -> type[StrictSettings]:
    from doctrine.kernel.config import KernelConfig

    return _overrides_model(KernelConfig, "KernelOverrides", _KERNEL_NOT_IN_RECIPES)


KernelOverrides = _kernel_overrides_model()


class BackendSpec(BaseConfig):
    name: Literal["hf", "vllm", "openai", "oracle", "never_compress", "first_range"] = Field(
        "oracle", description="the model backend; oracle, never_compress, first_range: the reference "
                              "policies (no model) the scorer is checked with")
    model: str | None = Field(
        None, description="a model spec (plumbing.models): embedded:..., tiny:..., hub id, local dir")
    adapter_dir: str | None = Field(
        None, description="PEFT adapter (the exported adapter/ folder) for the distilled arm")
    settings: dict[str, Any] = Field(
        default_factory=dict, description="the backend's own settings (BACKEND_SETTINGS[name]): base_url, "
                                          "batch_size, ...")

    @field_validator("model")
    @classmethod
    def _model_given(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("empty model spec; give one (e.g. embedded:smollm2-135m-instruct) or leave it out")
        return v

    @field_validator("settings")
    @classmethod
    def _no_keys(cls, v: dict[str, Any]) -> dict[str, Any]:
        if "adapter_dir" in v:  # one home: the harness, the checks and the fingerprint read that one
            raise ValueError("the adapter folder is backend.adapter_dir (its one key), not "
                             "backend.settings.adapter_dir; move it there")
        for k in v:
            if k.lower() in ("api_key", "key", "token", "password", "secret"):
                raise ValueError(f"backend.settings.{k}: never put a key in a recipe; name its "
                                 "environment variable with api_key_env")
        if v.get("api_key_env") is not None:  # checked here, on the whole block: the value is never echoed
            from plumbing.secret_scan import env_name_error

            problem = env_name_error(v["api_key_env"], "backend.settings.api_key_env")
            if problem:
                raise ValueError(problem)
        return v

    @model_validator(mode="before")
    @classmethod
    def _reference_takes_no_model_settings(cls, data: Any) -> Any:
        """A reference policy loads no model: the settings of a model backend are ignored."""
        if isinstance(data, dict) and data.get("name", "oracle") in REFERENCE_BACKENDS \
                and isinstance(data.get("settings"), dict):
            data = {**data, "settings": drop_model_settings(data["settings"])}
        return data

    @model_validator(mode="after")
    def _typed_settings(self) -> BackendSpec:
        """The backend's settings model checks ``settings`` here, before any case runs (a
        backend constructor would otherwise drop a misspelt keyword without a word)."""
        check_settings(BACKEND_SETTINGS[self.name], self.settings, "backend.settings", f"{self.name} backend: ")
        if self.model is not None and self.settings.get("model") is not None:  # neither may silently win
            raise ValueError(f"the model is given twice, backend.model {self.model!r} and backend.settings.model "
                             f"{self.settings['model']!r}; give it once, as backend.model (its key)")
        given = self.factory_settings()
        need = {"hf": ("model",), "vllm": ("model",), "openai": ("base_url", "model")}.get(self.name, ())
        for key in need:
            if not given.get(key):
                where = "backend.model" if key == "model" else f"backend.settings.{key}"
                raise ValueError(f"the {self.name} backend needs {where}")
        return self

    def explain_blocks(self) -> dict[str, type[BaseModel]]:
        return {"settings": BACKEND_SETTINGS[self.name]}

    def factory_settings(self) -> dict[str, Any]:
        out = dict(self.settings)
        if self.model is not None:  # settings.model is then unset or null (checked above)
            out["model"] = self.model
        if self.adapter_dir is not None:
            out["adapter_dir"] = self.adapter_dir
        return out


class WorkloadSpec(BaseConfig):
    name: str = Field(description="a key of eval.workloads.WORKLOADS (scripted, held_out, ...)")
    # Checked against the workload's Settings model (eval.workloads.<module>.<Name>Settings);
    # kept as given, so the run's fingerprint is what the recipe says.
    settings: dict[str, Any] = Field(
        default_factory=dict, description="the workload's own settings (its Settings model)")
    # e.g. the held-out decisions on the model arms only while the marathon also runs the baselines.
    arms: list[str] | None = Field(
        None, description="the recipe's arms this workload runs (None: every one of them it supports)")

    @field_validator("name")
    @classmethod
    def _known(cls, v: str) -> str:
        from eval.workloads import WORKLOADS

        if v not in WORKLOADS:
            raise ValueError(f"unknown workload {v!r}; expected one of {sorted(WORKLOADS)}")
        return v

    def explain_blocks(self) -> dict[str, type[BaseModel]]:
        from eval.workloads import WORKLOADS

        return {"settings": WORKLOADS[self.name].Settings}

    @model_validator(mode="after")
    def _settings(self) -> WorkloadSpec:
        """Each workload's ``Settings`` model checks its settings here, before any case runs
        (a misspelt key would otherwise be ignored and its cases silently dropped)."""
        from eval.workloads import WORKLOADS

        check_settings(WORKLOADS[self.name].Settings, self.settings, "settings", f"{self.name} workload: ")
        return self


class NonInferiority(BaseConfig):
    """``non_inferiority``: the report's verdict on each pair and metric. Arm a is
    non-inferior to arm b on a metric when the low end of the paired 95 % interval of a - b
    is above ``-margin`` (inferior when its high end is below it; else inconclusive)."""

    margin: float = Field(
        0.05, gt=0, le=1, description="the margin, in the metric's own units (rates: 0.05 = 5 points)")
    min_cases: int = Field(
        8, ge=1, description="below this many paired cases the verdict is inconclusive whatever the interval")
    # held_out: the label kinds of balanced_acc, the compress rows of compress_success.
    min_per_kind: int = Field(
        5, ge=1, description="below this many paired cases of some decision kind the difference is over, "
                             "inconclusive too")
    metrics: list[str] = Field(
        default_factory=lambda: ["balanced_acc", "compress_success", "conformance_passed"],
        description="metrics judged (rates where higher is better: eval.metrics NON_INFERIORITY_METRICS)")
    pairs: list[str] = Field(
        default_factory=lambda: ["distilled_vs_doctrine"], description="<a>_vs_<b>, arms of the recipe")

    @field_validator("metrics")
    @classmethod
    def _metrics(cls, v: list[str]) -> list[str]:
        from eval.metrics import NON_INFERIORITY_METRICS

        bad = [m for m in v if m not in NON_INFERIORITY_METRICS]
        if bad or not v:
            raise ValueError(f"unknown metrics {bad}; expected some of {list(NON_INFERIORITY_METRICS)} "
                             "(rates where higher is better)")
        return v

    @field_validator("pairs")
    @classmethod
    def _pairs(cls, v: list[str]) -> list[str]:
        for p in v:
            a, sep, b = p.partition("_vs_")
            if not sep or a not in ARM_NAMES or b not in ARM_NAMES or a == b:
                raise ValueError(f"pair {p!r} is not <arm>_vs_<other arm> (arms: {list(ARM_NAMES)})")
        if not v:
            raise ValueError("pairs: name at least one pair, e.g. distilled_vs_doctrine")
        return v

    def arm_pairs(self) -> list[tuple[str, str]]:
        return [tuple(p.split("_vs_", 1)) for p in self.pairs]  # type: ignore[misc]


class EvalRecipe(BaseConfig):
    name: str = Field("eval", description="the run's name in its manifest and report")
    doctrine_version: str = Field("v1", description="doctrine version (doctrine/versions/<v>) of the kernel arms")
    # The pipeline sets it, with backend.adapter_dir and doctrine_version, from its run folder.
    data_dir: str | None = Field(
        None, description="the run's curriculum (a data_gen output folder): what a workload that reads "
                          "curriculum rows (held_out) reads when its settings name no data_dir")
    backend: BackendSpec = Field(default_factory=BackendSpec, description="the model that answers")
    arms: list[str] = Field(
        default_factory=lambda: list(DEFAULT_ARMS),
        description="context policies compared (POLICY_ARMS and oracle run only where named)")
    workloads: list[WorkloadSpec] = Field(default_factory=list, description="what the arms are run on")
    windows: list[int] = Field(default_factory=lambda: [8192], description="context windows (tokens)")
    seeds: list[Annotated[int, Field(ge=0)]] = Field(default_factory=lambda: [0], min_length=1,
                                                     description="seeds of each case")
    concurrency: int = Field(1, ge=1, description="jobs run at once (hf: batched by the micro-batcher)")
    max_tokens: int = Field(256, ge=1, description="most tokens of one model reply")
    horizon: int = Field(2, ge=0, description="hindsight horizon (steps) of the oracle policy")
    # Serving profile of the kernel arms (doctrine.kernel.profile); each arm's prompt mode completes it.
    gate: Literal["reference", "default", "aggressive", "pocket", "proxy", "proxy_pocket"] = Field(
        "aggressive", description="gate preset of the serving profile (doctrine/kernel/profile.py)")
    host: Literal["proxy", "pi", "proxy_chat"] = Field(
        "proxy", description="host variant of the serving profile (proxy_chat: the proxy as recorded)")
    tool_parser: Literal["lenient", "hermes_strict"] = Field(
        "lenient", description="how replies' tool calls are read: lenient (the project's parser) or "
                               "hermes_strict (as vLLM's --tool-call-parser hermes: invalid JSON is no call)")
    nudge_style: Literal["list", "list_only", "none"] = Field(
        "list", description="how the kernel's nudges are rendered")
    allow_profile_mismatch: bool = Field(
        False, description="evaluate the distilled arm under a profile its adapter was not trained with "
                           "(its manifest's serving_profiles) on purpose; the report says so")
    kernel: dict[str, Any] = Field(
        default_factory=dict, description="KernelOverrides: KernelConfig fields over the gate preset")
    arm_settings: dict[str, Any] = Field(
        default_factory=dict, description="ArmSettings keys (the arms' thresholds and cadence)")
    output: str | None = Field(None, description="the stage folder when --out is not given")
    non_inferiority: NonInferiority | None = Field(
        None, description="the report's non-inferiority verdicts (report-only: changing them never reruns "
                          "a case)")

    @model_validator(mode="before")
    @classmethod
    def _run_data_dir(cls, data: Any) -> Any:
        """Give ``data_dir`` to every workload whose settings take one and name none; one that
        names another folder is an error (its cases would not be of this run's data)."""
        if not isinstance(data, dict) or not data.get("data_dir") or not isinstance(data.get("workloads"), list):
            return data
        from eval.workloads import WORKLOADS

        workloads = []
        for i, w in enumerate(data["workloads"]):
            wl = WORKLOADS.get(w.get("name")) if isinstance(w, dict) else None
            settings = w.get("settings") if isinstance(w, dict) else None
            if wl is None or "data_dir" not in wl.Settings.model_fields or not isinstance(settings or {}, dict):
                workloads.append(w)
                continue
            settings = dict(settings or {})
            given = settings.setdefault("data_dir", data["data_dir"])
            if given != data["data_dir"]:
                raise ValueError(f"workloads[{i}] ({w['name']}): settings.data_dir {given!r} is not the run's "
                                 f"data_dir {data['data_dir']!r}; drop settings.data_dir to read the run's data")
            workloads.append({**w, "settings": settings})
        return {**data, "workloads": workloads}

    def explain_blocks(self) -> dict[str, type[BaseModel]]:
        return {"arm_settings": ArmSettings}

    @field_validator("arm_settings")
    @classmethod
    def _arm_settings(cls, v: dict[str, Any]) -> dict[str, Any]:
        return check_settings(ArmSettings, v, "arm_settings")

    @field_validator("kernel")
    @classmethod
    def _kernel(cls, v: dict[str, Any]) -> dict[str, Any]:
        return check_settings(KernelOverrides, v, "kernel")

    @field_validator("arms")
    @classmethod
    def _arms(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("arms: name at least one arm (an eval of no arm has no case and would "
                             f"be complete with nothing done); arms are {list(ARM_NAMES)}")
        bad = [a for a in v if a not in ARM_NAMES]
        if bad:
            raise ValueError(f"unknown arms {bad}; expected some of {list(ARM_NAMES)}")
        if len(set(v)) != len(v):
            raise ValueError("arms are listed twice")
        return v

    @field_validator("windows")
    @classmethod
    def _windows(cls, v: list[int]) -> list[int]:
        if not v or any(w < 256 for w in v):
            raise ValueError("windows must be a non-empty list of token counts >= 256")
        return v

    @model_validator(mode="after")
    def _adapter(self) -> EvalRecipe:
        if "distilled" in self.arms and self.backend.name in ("hf", "vllm") and not self.backend.adapter_dir:
            raise ValueError("the distilled arm needs backend.adapter_dir with the hf and vllm backends")
        if not self.workloads:
            raise ValueError("workloads: name at least one workload (scripted or held_out)")
        for w in self.workloads:
            if w.arms is not None and (not w.arms or set(w.arms) - set(self.arms)):
                raise ValueError(f"workload {w.name}: arms {w.arms} must be a non-empty subset of the recipe's "
                                 f"arms {self.arms}")
        return self
