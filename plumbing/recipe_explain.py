"""``--explain``: a resolved recipe as YAML, each key under a comment with its meaning and default.

The output is the recipe ``--print-config`` prints, annotated: it still loads as YAML into
the same values. A free-form block that a typed model checks (``arm_settings``,
``backend.settings``, a workload's ``settings``; see :meth:`BaseConfig.explain_blocks`) is
shown with the keys it was given and, commented out, every other key that model accepts,
so the explanation also says what may be set there.
"""

from __future__ import annotations

import textwrap
from typing import Any

import yaml
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

__all__ = ["explain_config"]

WIDTH = 100


def _scalar(value: Any) -> str:
    """``value`` as one line of YAML flow style (lists and mappings inline)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10**6, sort_keys=False).strip()
    return text.removesuffix("\n...").removesuffix("...").strip()


def _default(field: Any) -> Any:
    if field.default_factory is not None:
        value = field.default_factory()
    elif field.default is PydanticUndefined:
        return PydanticUndefined
    else:
        value = field.default
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


def _comment(field: Any, value: Any, indent: str) -> list[str]:
    """The comment lines above a key: its meaning, then ``[default]`` when the value is the
    default, else ``[default: X]`` (``[required]`` for a key without one)."""
    text = field.description or ""
    default = _default(field)
    if isinstance(value, dict) and _nested(field) or isinstance(value, list) and value and _nested(field):
        pass  # a nested section: its keys say their own defaults
    elif default is PydanticUndefined:
        text += " [required]"
    elif _plain(default) == value:
        text += " [default]"
    else:
        text += f" [default: {_scalar(_plain(default))}]"
    return textwrap.wrap(text.strip(), WIDTH - len(indent) - 2, initial_indent=f"{indent}# ",
                         subsequent_indent=f"{indent}#   ") or [f"{indent}#"]


def _nested(field: Any) -> bool:
    """Whether ``field`` holds a recipe section (a model, or a list of them)."""
    def models(tp: Any) -> bool:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            return True
        return any(models(arg) for arg in getattr(tp, "__args__", ()))

    return models(field.annotation)


def _plain(value: Any) -> Any:
    """JSON-like form of a default (tuples as lists), what ``model_dump(mode="json")`` gives."""
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _model_lines(model: BaseModel, indent: str) -> list[str]:
    """Every field of ``model``: its comment, then ``key: value`` or the nested block."""
    blocks = model.explain_blocks() if hasattr(model, "explain_blocks") else {}
    lines: list[str] = []
    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        dumped = model.model_dump(mode="json", include={name})[name]
        lines += _comment(field, dumped, indent)
        if name in blocks and isinstance(value, dict):
            lines += _typed_block(name, value, blocks[name], indent)
        elif isinstance(value, BaseModel):
            lines.append(f"{indent}{name}:")
            lines += _model_lines(value, indent + "  ")
        elif isinstance(value, list) and value and all(isinstance(v, BaseModel) for v in value):
            lines.append(f"{indent}{name}:")
            for item in value:  # "- " then the item's keys, each under its comment
                lines.append(f"{indent}  -")
                lines += _model_lines(item, indent + "    ")
        else:
            lines.append(f"{indent}{name}: {_scalar(dumped)}")
    return lines


def _typed_block(name: str, value: dict[str, Any], schema: type[BaseModel], indent: str) -> list[str]:
    """A free-form block checked by ``schema``: the keys given, then the others commented out."""
    lines = [f"{indent}{name}:{' {}' if not value else ''}"]
    inner = indent + "  "
    lines.append(f"{inner}# keys checked by {schema.__name__}; those not given are commented out "
                 "with their default")
    for key, field in schema.model_fields.items():
        if key in value:
            lines += _comment(field, value[key], inner)
            lines.append(f"{inner}{key}: {_scalar(value[key])}")
        else:
            default = _default(field)
            shown = "(required)" if default is PydanticUndefined else _scalar(_plain(default))
            desc = f" ({field.description})" if field.description else ""
            lines += textwrap.wrap(f"{key}: {shown}{desc}", WIDTH - len(inner) - 2,
                                   initial_indent=f"{inner}# ", subsequent_indent=f"{inner}#   ")
    for key in value.keys() - schema.model_fields.keys():  # only where the block's check allows it
        lines.append(f"{inner}{key}: {_scalar(value[key])}")
    return lines


def explain_config(cfg: BaseModel) -> str:
    """``cfg`` as YAML with each key's meaning and default in a comment above it."""
    head = [f"# {type(cfg).__name__}: the resolved recipe; above each key its meaning and "
            "[default]"]
    return "\n".join(head + _model_lines(cfg, "")) + "\n"
