"""Typed YAML recipes: load, override, validate, print.

Every run setting lives in a YAML file under ``configs/`` whose keys are the fields of a
pydantic model (``extra="forbid"``, so a misspelt key fails loudly). Precedence is
defaults < YAML < command-line overrides. Overrides are dotted ``key=value`` pairs given
after the recipe path, e.g. ``dtw train configs/train/demo.yaml trainer.learning_rate=1e-4``;
the value is parsed as a YAML scalar, so ``true``, ``3``, ``1e-4`` and ``[a, b]`` work.

This module imports nothing heavy: ``--help`` and ``--print-config`` stay fast.
"""

from __future__ import annotations

import difflib
import math
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

__all__ = [
    "BaseConfig",
    "ConfigError",
    "apply_overrides",
    "config_to_yaml",
    "describe_errors",
    "load_for_cli",
    "load_config",
    "parse_overrides",
]

C = TypeVar("C", bound="BaseConfig")


# Integers a recipe may hold: what a signed 64-bit slot (numpy, torch, parquet) takes.
MAX_RECIPE_INT = 2**63 - 1


def _bad_number(value: Any, where: str = "") -> str | None:
    """Why ``value`` (or a number anywhere inside a list or mapping of it) is no usable
    recipe number: a NaN or an infinity, or an integer past 64 bits. None when all are fine."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"{where}{': ' if where else ''}{value!r} is not a finite number (a recipe number must be finite)"
    if isinstance(value, int) and abs(value) > MAX_RECIPE_INT:
        return f"{where}{': ' if where else ''}integer out of range (a recipe integer must fit in 64 bits)"
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        why = _bad_number(item, f"{where}[{key!r}]")
        if why:
            return why
    return None


class BaseConfig(BaseModel):
    """Base of every recipe: unknown keys are errors, values are validated on assignment.

    Numbers are finite everywhere: a float field refuses NaN and infinities (pydantic's
    ``allow_inf_nan``), and every field, free-form blocks included, refuses a NaN, an
    infinity or an integer past 64 bits anywhere inside its value (:func:`_bad_number`), so
    ``trainer.learning_rate=.inf`` or ``windows=[1e30]`` is a one-line error naming the key."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, protected_namespaces=(),
                              allow_inf_nan=False)

    def explain_blocks(self) -> dict[str, type[BaseModel]]:
        """The typed models that check this recipe's free-form ``dict`` fields, by field name
        (``--explain`` lists the keys each accepts); none unless a recipe says so."""
        return {}

    @field_validator("*", mode="after")
    @classmethod
    def _finite_numbers(cls, value: Any) -> Any:
        why = _bad_number(value)
        if why:
            raise ValueError(why)
        return value


class ConfigError(ValueError):
    """A recipe or override that cannot be used. The message names the file and the key."""


# Recipes are a few hundred values; a YAML alias re-uses a whole anchored value, so a chain of
# them ("billion laughs") can stand for a value far larger than the file. Past this many
# values (counting every alias as a copy) a recipe is refused before anything walks it.
MAX_RECIPE_VALUES = 100_000
# Deepest nesting of lists and mappings a recipe may hold (real ones nest 4 or 5 levels).
MAX_RECIPE_DEPTH = 64
# Longest echo of an input value in an error message.
MAX_ECHO_CHARS = 300


def _echo(value: Any) -> str:
    """``repr(value)`` cut to :data:`MAX_ECHO_CHARS` (error messages stay one short line)."""
    text = repr(value)
    if len(text) > MAX_ECHO_CHARS:
        text = f"{text[:MAX_ECHO_CHARS - 25]}... ({len(text)} chars)"
    return text


class _RecipeYAMLError(yaml.YAMLError):
    """A recipe whose YAML parses but may not be used (duplicate key); the message is one line."""


class _RecipeLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key given twice in one mapping (PyYAML keeps the
    last value silently). Keys merged in with ``<<`` may still be overridden."""

    def construct_mapping(self, node, deep=False):  # type: ignore[no-untyped-def]
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: SafeLoader reports it below
                    continue
                if first is not None:
                    raise _RecipeYAMLError(f"duplicate key {_echo(key)} at line {line} "
                                           f"(first given at line {first})")
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _count_values(data: Any, limit: int) -> int:
    """How many values ``data`` holds once every alias is expanded (stops past ``limit``);
    nesting deeper than :data:`MAX_RECIPE_DEPTH` is an error."""
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(obj: Any) -> int:
        if not isinstance(obj, (dict, list)):
            return 1
        if len(active) >= MAX_RECIPE_DEPTH:
            raise _RecipeYAMLError(f"values nest more than {MAX_RECIPE_DEPTH} levels deep; a recipe that "
                                   "deep is refused")
        key = id(obj)
        if key in sizes:
            return sizes[key]
        if key in active:
            raise _RecipeYAMLError("a YAML alias refers to a value that contains it (recursive anchor)")
        active.add(key)
        total = 1
        for child in (obj.values() if isinstance(obj, dict) else obj):
            total += size(child) + isinstance(obj, dict)  # a mapping's key counts too
            if total > limit:
                break
        active.discard(key)
        sizes[key] = total
        return total

    return size(data)


def _load_yaml(text: str) -> Any:
    """Parse recipe YAML: duplicate keys, alias expansion past the budget and nesting past
    :data:`MAX_RECIPE_DEPTH` are errors."""
    try:
        data = yaml.load(text, Loader=_RecipeLoader)  # noqa: S506 - a SafeLoader subclass
    except RecursionError:  # PyYAML's composer recurses once per nesting level
        raise _RecipeYAMLError(f"values nest too deep to parse; a recipe nests at most "
                               f"{MAX_RECIPE_DEPTH} levels") from None
    n = _count_values(data, MAX_RECIPE_VALUES)
    if n > MAX_RECIPE_VALUES:
        raise _RecipeYAMLError(f"its aliases expand to more than {MAX_RECIPE_VALUES:,} values; "
                               "a recipe that large is refused (YAML alias bomb?)")
    return data


def _yaml_error(exc: yaml.YAMLError) -> str:
    """A YAML error as one line of bounded length."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 2 * MAX_ECHO_CHARS else text[:2 * MAX_ECHO_CHARS - 3] + "..."


def split_override_args(extra: list[str]) -> tuple[list[str], list[str]]:
    """Split a CLI's leftover arguments into overrides and strays.

    ``KEY=VALUE`` and ``--KEY=VALUE`` (a leading ``--`` is accepted: argparse leaves an
    unknown ``--trainer.max_steps=3`` over, and :func:`parse_overrides` strips the dashes)
    are overrides; anything else (``-x``, ``--flag``, a bare word) is a stray argument.
    """
    overrides: list[str] = []
    stray: list[str] = []
    for item in extra:
        key, sep, _ = item.partition("=")
        name = key[2:] if key.startswith("--") else key
        (overrides if sep and name.strip() and not name.startswith("-") else stray).append(item)
    return overrides, stray


def parse_overrides(items: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """Parse ``a.b=value`` strings into ``{"a.b": value}`` (values as YAML scalars)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip().removeprefix("--")
        if not sep or not key:
            raise ConfigError(f"override {_echo(item)}: expected KEY=VALUE, e.g. trainer.lr=1e-4")
        try:
            out[key] = _load_yaml(raw) if raw.strip() else ""
        except yaml.YAMLError as exc:
            raise ConfigError(f"override {_echo(item)}: value is not valid YAML ({_yaml_error(exc)})") from None
    return out


def _field_names(schema: type[BaseModel]) -> list[str]:
    return list(schema.model_fields)


def _sub_schema(schema: type[BaseModel] | None, key: str) -> type[BaseModel] | None:
    if schema is None or key not in schema.model_fields:
        return None
    ann = schema.model_fields[key].annotation
    for cand in (ann, *getattr(ann, "__args__", ())):
        if isinstance(cand, type) and issubclass(cand, BaseModel):
            return cand
    return None


def _suggest(key: str, schema: type[BaseModel] | None) -> str:
    if schema is None:
        return ""
    close = difflib.get_close_matches(key, _field_names(schema), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def apply_overrides(
    data: dict[str, Any], overrides: dict[str, Any], schema: type[BaseModel] | None = None
) -> dict[str, Any]:
    """Return a copy of ``data`` with dotted overrides applied.

    With a schema, an override whose path names no field fails here with a suggestion,
    before validation, so the user sees the key they typed rather than a nested error.
    """
    out = yaml.safe_load(yaml.safe_dump(data)) if data else {}
    for dotted, value in overrides.items():
        node, sub = out, schema
        keys = dotted.split(".")
        for i, key in enumerate(keys):
            # Past a free-form dict field (sub is None) any key is allowed.
            if sub is not None and key not in sub.model_fields:
                where = ".".join(keys[:i]) or "top level"
                raise ConfigError(
                    f"override {dotted}={_echo(value)}: unknown key {key!r} at {where}"
                    f"{_suggest(key, sub)}"
                )
            if i == len(keys) - 1:
                node[key] = value
            else:
                nxt = node.get(key)
                if not isinstance(nxt, dict):
                    nxt = {}
                    node[key] = nxt
                node, sub = nxt, _sub_schema(sub, key)
    return out


def describe_errors(exc: ValidationError, schema: type[BaseModel], prefix: str = "") -> list[str]:
    """One short line per error of ``exc`` (raised by ``schema``): the dotted key, with a
    suggestion for an unknown one; ``prefix`` is prepended to every key."""
    lines = []
    for err in exc.errors():
        loc = prefix + (".".join(str(p) for p in err["loc"]) or "<root>")
        if err["type"] == "extra_forbidden":
            parent: type[BaseModel] | None = schema
            for part in err["loc"][:-1]:
                parent = _sub_schema(parent, str(part))
            hint = _suggest(str(err["loc"][-1]), parent)
            lines.append(f"unknown key {loc!r}{hint}")
        elif err["type"] == "missing":
            lines.append(f"missing required key {loc!r}")
        else:
            got = err.get("input")
            got_s = f" (got {_echo(got)})" if not isinstance(got, dict) else ""
            msg = err["msg"].removeprefix("Value error, ")  # pydantic's prefix to a validator's reason
            lines.append(f"{loc}: {msg}{got_s}")
    return lines


def _format_validation_error(exc: ValidationError, source: str, schema: type[BaseModel]) -> str:
    lines = [f"{source}: invalid {schema.__name__}"]
    lines += [f"  {line}" for line in describe_errors(exc, schema)]
    return "\n".join(lines)


def load_config(
    path: str | Path | None,
    schema: type[C],
    overrides: list[str] | dict[str, Any] | None = None,
) -> C:
    """Load a YAML recipe into ``schema`` (``path`` None: the schema's defaults and the
    overrides). Which schema reads which ``configs/<kind>/`` folder is the pipeline's table
    (``pipeline.recipe.SCHEMAS``): this module knows no package above it."""
    source = str(path) if path is not None else "<defaults>"
    data: Any = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"{source}: no such recipe file")
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{source}: not a text recipe (byte {exc.object[exc.start]:#04x} at offset "
                              f"{exc.start} is not UTF-8)") from None
        except OSError as exc:
            raise ConfigError(f"{source}: cannot read ({exc.strerror or exc})") from None
        try:
            data = _load_yaml(text) or {}
        except _RecipeYAMLError as exc:
            raise ConfigError(f"{source}: {exc}") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"{source}: not valid YAML ({_yaml_error(exc)})") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: top level must be a mapping of keys, got {type(data).__name__}")
    if overrides:
        ov = parse_overrides(overrides) if isinstance(overrides, (list, tuple)) else overrides
        data = apply_overrides(data, ov, schema)
    try:
        return schema.model_validate(data)  # type: ignore[union-attr,return-value]
    except ValidationError as exc:
        raise ConfigError(_format_validation_error(exc, source, schema)) from None  # type: ignore[arg-type]


def load_for_cli(path: str | Path, schema: type[C], overrides: list[str] | None,
                 print_config: bool = False, explain: bool = False) -> C | int:
    """What every ``RECIPE.yaml [KEY=VALUE ...] [--print-config] [--explain]`` command does
    first: the resolved config, or an exit code (2 after printing the error, 0 after printing
    the config for ``--print-config``, or the config with each key's meaning and default for
    ``--explain``)."""
    import sys

    try:
        cfg = load_config(path, schema, overrides)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if explain:
        from plumbing.recipe_explain import explain_config

        print(explain_config(cfg), end="")
        return 0
    if print_config:
        print(config_to_yaml(cfg), end="")
        return 0
    return cfg


def config_to_yaml(cfg: BaseModel) -> str:
    """The resolved config as YAML (what ``--print-config`` shows and manifests record)."""
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)
