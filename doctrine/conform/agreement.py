"""Agreement of the checker with hand-labelled verdicts (the set in benchmarks/data/conform_agreement/).

    from doctrine.conform.agreement import load_cases, score_cases
    cases = load_cases("benchmarks/data/conform_agreement")
    result = score_cases(cases)            # the deterministic checker
    result.agreement, result.kappa, result.disagreements

A case is one summary of one source with a reader's ``verdict`` (``pass``/``fail``); the
checker agrees when its ``passed`` equals that verdict. Cohen's kappa corrects the raw
agreement for what two raters agreeing by chance would reach given how often each says pass.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = ["AgreementCase", "AgreementResult", "cohen_kappa", "load_cases", "score_cases"]

VERDICTS = ("pass", "fail")


class CaseError(ValueError):
    """A malformed agreement file; the message names the file and case."""


@dataclass
class AgreementCase:
    id: str
    tier: int
    style: str
    verdict: str
    summary: str
    source: list[dict[str, Any]]
    kept: list[str] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)
    why: str = ""
    file: str = ""
    set: str = "tuning"  # "holdout": written after the checker was tuned, kept as a check


@dataclass
class AgreementResult:
    n: int
    agree: int
    kappa: float
    rows: list[dict[str, Any]]

    @property
    def agreement(self) -> float:
        return self.agree / self.n if self.n else 0.0

    @property
    def disagreements(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if not r["agree"]]


def _repo_root(folder: Path) -> Path:
    for p in [folder, *folder.parents]:
        if (p / "pyproject.toml").is_file():
            return p
    return folder


def _read_source(ref: str, root: Path, where: str) -> list[dict[str, Any]]:
    path, _, key = ref.partition("#")
    full = root / path
    try:
        text = full.read_text(encoding="utf-8")
    except OSError as exc:
        raise CaseError(f"{where}: cannot read source_file {ref!r} ({exc})") from None
    if key:
        data = yaml.safe_load(text)
        if not isinstance(data, dict) or not isinstance(data.get(key), list):
            raise CaseError(f"{where}: {ref!r} has no list {key!r}")
        return data[key]
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _call(mid: str, cid: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"id": mid, "role": "assistant", "content": None, "tool_calls": [
        {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}


def expand_session(session: Any, where: str = "session") -> list[dict[str, Any]]:
    """Chat messages from the compact ``session:`` form of a case file.

    ``{first_id: 1101, steps: [...]}`` where a step is ``{user: text}``, ``{say: text}``,
    ``{run: command, out: text}``, ``{view: path, out: text}`` or
    ``{edit: path, old: text, new: text, out: text}``; messages get the ids m01101, m01102...
    in order and each call/result pair an OpenHands tool name (execute_bash, str_replace_editor).
    """
    if not isinstance(session, dict) or not isinstance(session.get("steps"), list):
        raise CaseError(f"{where}: 'session' needs a 'steps' list")
    n = int(session.get("first_id", 1))
    out: list[dict[str, Any]] = []

    def mid() -> str:
        nonlocal n
        n += 1
        return f"m{n - 1:05d}"

    for i, st in enumerate(session["steps"]):
        if not isinstance(st, dict):
            raise CaseError(f"{where}: step {i} is not a mapping")
        cid = f"call_{session.get('first_id', 1)}_{i}"
        if "user" in st or "say" in st:
            role = "user" if "user" in st else "assistant"
            out.append({"id": mid(), "role": role, "content": str(st.get("user", st.get("say")))})
            continue
        if "run" in st:
            name, args = "execute_bash", {"command": str(st["run"])}
        elif "view" in st:
            name, args = "str_replace_editor", {"command": "view", "path": str(st["view"])}
        elif "edit" in st:
            name, args = "str_replace_editor", {"command": "str_replace", "path": str(st["edit"]),
                                                "old_str": str(st.get("old", "")), "new_str": str(st.get("new", ""))}
        else:
            raise CaseError(f"{where}: step {i} has none of user/say/run/view/edit")
        out.append(_call(mid(), cid, name, args))
        default = f"The file {st.get('edit')} has been edited." if "edit" in st else ""
        out.append({"id": mid(), "role": "tool", "tool_call_id": cid, "name": name,
                    "content": str(st.get("out", default)).rstrip("\n")})
    return out


def load_cases(folder: str | Path) -> list[AgreementCase]:
    """Every case of every ``*.yaml`` in ``folder``, in file then case order."""
    folder = Path(folder)
    root = _repo_root(folder.resolve())
    out: list[AgreementCase] = []
    seen: set[str] = set()
    for f in sorted(folder.glob("*.yaml")):
        data = yaml.safe_load(f.read_text(encoding="utf-8"))
        where = str(f)
        if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
            raise CaseError(f"{where}: expected a mapping with a 'cases' list")
        if "source" in data:
            source = data["source"]
        elif "session" in data:
            source = expand_session(data["session"], where)
        elif "source_file" in data:
            source = _read_source(str(data["source_file"]), root, where)
        else:
            raise CaseError(f"{where}: needs 'source', 'session' or 'source_file'")
        for c in data["cases"]:
            cid = c.get("id") if isinstance(c, dict) else None
            if not cid or cid in seen:
                raise CaseError(f"{where}: case without an id, or a duplicate id {cid!r}")
            seen.add(cid)
            if c.get("verdict") not in VERDICTS:
                raise CaseError(f"{where}: {cid}: verdict must be one of {VERDICTS}")
            if "summary" in c:
                summary = str(c["summary"])
            elif "summary_file" in c:
                summary = (root / str(c["summary_file"])).read_text(encoding="utf-8")
            else:
                raise CaseError(f"{where}: {cid}: needs 'summary' or 'summary_file'")
            out.append(AgreementCase(
                id=cid, tier=int(c.get("tier", 1)), style=str(c.get("style", "")), verdict=c["verdict"],
                summary=summary, source=source, kept=list(c.get("kept") or []), missed=list(c.get("missed") or []),
                why=str(c.get("why", "")), file=f.name, set=str(data.get("set", "tuning"))))
    return out


def cohen_kappa(pairs: list[tuple[bool, bool]]) -> float:
    """Cohen's kappa of two binary raters; 1.0 when both always agree on one label."""
    n = len(pairs)
    if not n:
        return 0.0
    po = sum(a == b for a, b in pairs) / n
    pa = sum(a for a, _ in pairs) / n
    pb = sum(b for _, b in pairs) / n
    pe = pa * pb + (1 - pa) * (1 - pb)
    return 1.0 if pe == 1 else round((po - pe) / (1 - pe), 4)


def score_cases(cases: list[AgreementCase], judge: Callable[[AgreementCase], Any] | None = None) -> AgreementResult:
    """Run ``judge`` (default: :func:`doctrine.conform.check_summary`) on every case."""
    if judge is None:
        from .check import check_summary

        def judge(c: AgreementCase) -> Any:
            return check_summary(c.source, c.summary, tier=c.tier)

    rows = []
    pairs = []
    for c in cases:
        rep = judge(c)
        want = c.verdict == "pass"
        rows.append({"id": c.id, "style": c.style, "tier": c.tier, "verdict": c.verdict, "set": c.set,
                     "checker": "pass" if rep.passed else "fail", "score": rep.score,
                     "agree": bool(rep.passed) == want, "reasons": list(rep.reasons)})
        pairs.append((want, bool(rep.passed)))
    return AgreementResult(n=len(rows), agree=sum(r["agree"] for r in rows), kappa=cohen_kappa(pairs), rows=rows)
