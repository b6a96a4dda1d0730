"""Secrets in text: the shapes of common keys, and a scan that says *what kind* was found.

One place for the patterns: ``plumbing.runs.redact_secrets`` masks known values before
they reach a manifest or a log; this module finds secrets in content that is about to
become data (a teacher's reply, a curriculum row) so the caller can drop it. A hit is
reported by kind only (``configured:OPENAI_API_KEY``, ``shape:openai``), never by value.

Also here: :func:`env_name_error`, the check that an ``api_key_env`` setting names an
environment variable and is not a pasted key (the message never repeats the value).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["KEY_SHAPES", "ENV_NAME", "SecretScanner", "env_name_error", "find_secret"]

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# Common key shapes (long enough that prose, refs like m00012 and hashes do not match).
KEY_SHAPES: dict[str, re.Pattern[str]] = {
    "openai": re.compile(r"\bsk-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_-]{16,}"),
    "github": re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{22,})"),
    "aws_access_key": re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    "slack": re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    "huggingface": re.compile(r"\bhf_[A-Za-z0-9]{20,}"),
    "private_key": re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----"),
    "bearer": re.compile(r"\bBearer\s+[A-Za-z0-9._~+/=-]{16,}"),
}

# A literal each shape starts with: a pattern runs only on text that holds one (``in`` is
# ~100x faster than a regex that must try every position).
_HINTS: dict[str, tuple[str, ...]] = {
    "openai": ("sk-",), "github": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "aws_access_key": ("AKIA", "ASIA"), "slack": ("xox",), "huggingface": ("hf_",),
    "private_key": ("PRIVATE KEY-----",), "bearer": ("Bearer",),
}

MIN_SECRET_CHARS = 8  # shorter configured values are not searched for (they would match prose)


def env_name_error(value: Any, where: str = "api_key_env") -> str | None:
    """Why ``value`` is not an environment variable *name* (a pasted key, a blank), or None.
    The message never contains the value."""
    if isinstance(value, str) and ENV_NAME.fullmatch(value):
        return None
    kind = type(value).__name__ if not isinstance(value, str) else f"a {len(value)}-character string"
    return (f"{where} must be the NAME of an environment variable ([A-Za-z_][A-Za-z0-9_]*), not the key "
            f"itself; got {kind} (not shown). Put the key in a variable, e.g. export MY_KEY=..., and set "
            f"{where}: MY_KEY")


def find_secret(text: str, values: Mapping[str, str] | None = None) -> str | None:
    """The kind of the first secret in ``text``: ``configured:<NAME>`` for the value of a
    configured variable (``values`` maps name -> value), ``shape:<kind>`` for a common key
    shape; None when clean."""
    for name, value in (values or {}).items():
        if value and len(value) >= MIN_SECRET_CHARS and value in text:
            return f"configured:{name}"
    for kind, pattern in KEY_SHAPES.items():
        if any(h in text for h in _HINTS[kind]) and pattern.search(text):
            return f"shape:{kind}"
    return None


class SecretScanner:
    """A scan for the values of the named environment variables (read once, when built)
    and the common key shapes; :meth:`row` scans every string of a nested row."""

    def __init__(self, env_names: Iterable[str] = (), environ: Mapping[str, str] | None = None):
        env = os.environ if environ is None else environ
        self.values = {n: env[n] for n in dict.fromkeys(env_names) if n and env.get(n)}

    def text(self, text: str) -> str | None:
        return find_secret(text, self.values)

    def row(self, obj: Any) -> str | None:
        """The kind of the first secret in any string of ``obj`` (dicts, lists, keys too)."""
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, Mapping):
            for k, v in obj.items():
                hit = self.row(k) or self.row(v)
                if hit:
                    return hit
        elif isinstance(obj, (list, tuple)):
            for v in obj:
                hit = self.row(v)
                if hit:
                    return hit
        return None
