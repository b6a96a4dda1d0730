"""Plausible filler source code (Python and TypeScript) around the load-bearing lines.

Filler makes file views long and low in density, the way real views are: most lines are
never needed again, a few (the buggy line, a signature, a constant) are.
"""

from __future__ import annotations

from ._text import NOUNS, Picker

__all__ = ["py_function", "py_module", "ts_function", "ts_module"]

_PY_BODIES = (
    ["if not {a}:", "    return {ret}", "result = [item for item in {a} if item]", "return result"],
    ["seen = {{}}", "for item in {a}:", "    key = str(item).lower()", "    seen.setdefault(key, item)",
     "return list(seen.values())"],
    ["logger.debug(\"{v} %s\", {a})", "value = {a} or {ret}", "return value"],
    ["total = 0", "for item in {a}:", "    total += len(str(item))", "return total"],
    ["try:", "    return _cache[{a}]", "except KeyError:", "    _cache[{a}] = {ret}", "    return _cache[{a}]"],
    ["parts = str({a}).split(\":\")", "if len(parts) < 2:", "    raise ValueError(f\"bad {n}: {{{a}!r}}\")",
     "return parts[0].strip(), parts[1].strip()"],
)
_TS_BODIES = (
    ["if (!{a}) {{", "  return {ret};", "}}", "return {a}.filter(Boolean);"],
    ["const seen = new Map<string, unknown>();", "for (const item of {a}) {{", "  seen.set(String(item), item);",
     "}}", "return [...seen.values()];"],
    ["logger.debug(\"{v}\", {{ {a} }});", "return {a} ?? {ret};"],
    ["let total = 0;", "for (const item of {a}) {{", "  total += String(item).length;", "}}", "return total;"],
    ["const cached = cache.get({a});", "if (cached !== undefined) {{", "  return cached;", "}}",
     "cache.set({a}, {ret});", "return {ret};"],
)


def py_function(p: Picker, name: str | None = None) -> list[str]:
    """A small documented function, then a blank line."""
    name = name or p.snake()
    arg = p.choice(NOUNS) + "s"
    body = [ln.format(a=arg, ret=p.choice(["None", "[]", "0", "\"\""]), v=name, n=arg[:-1])
            for ln in p.choice(_PY_BODIES)]
    return ([f"def {name}({arg}):", f'    """{p.sentence()}"""'] + [f"    {b}" for b in body] + ["", ""])


def ts_function(p: Picker, name: str | None = None) -> list[str]:
    name = name or p.camel()
    arg = p.choice(NOUNS) + "s"
    body = [ln.format(a=arg, ret=p.choice(["undefined", "[]", "0", "''"]), v=name) for ln in p.choice(_TS_BODIES)]
    return ([f"/** {p.sentence()} */", f"export function {name}({arg}: unknown[]) {{"]
            + [f"  {b}" for b in body] + ["}", ""])


def py_module(p: Picker, blocks: list[list[str]], target: int, imports: list[str] | None = None) -> list[str]:
    """A module of about ``target`` lines: docstring, imports, filler functions and ``blocks``.

    ``blocks`` keep their order; filler goes before, between and after them.
    """
    lines = [f'"""{p.sentence()}"""', "", "from __future__ import annotations", ""]
    lines += (imports or []) + ["import logging", "", "logger = logging.getLogger(__name__)", "_cache: dict = {}", "", ""]
    per_gap = max(0, (target - len(lines) - sum(len(b) for b in blocks)) // (8 * (len(blocks) + 1)))
    for block in blocks + [None]:
        for _ in range(per_gap):
            lines += py_function(p)
        if block is not None:
            lines += block + ["", ""]
    return lines[:-1]


def ts_module(p: Picker, blocks: list[list[str]], target: int, imports: list[str] | None = None) -> list[str]:
    lines = (imports or []) + ["import { logger } from './logger';", "", "const cache = new Map<unknown, unknown>();", ""]
    per_gap = max(0, (target - len(lines) - sum(len(b) for b in blocks)) // (8 * (len(blocks) + 1)))
    for block in blocks + [None]:
        for _ in range(per_gap):
            lines += ts_function(p)
        if block is not None:
            lines += block + [""]
    return lines
