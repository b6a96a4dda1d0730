"""A small SFT data folder in data_gen's layout, made here: parquet per split + manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from doctrine.spec import load_doctrine
from plumbing.runs import file_sha256, write_manifest

TOOLS = [
    {"type": "function", "function": {"name": "compress", "description": "Fold consumed messages into a summary block.",
     "parameters": {"type": "object", "properties": {"topic": {"type": "string"}, "content": {"type": "array", "items": {
         "type": "object", "properties": {"startId": {"type": "string"}, "endId": {"type": "string"},
                                          "summary": {"type": "string"}}, "required": ["startId", "endId", "summary"]}}},
                    "required": ["content"]}}},
    {"type": "function", "function": {"name": "bash", "description": "Run a shell command.",
     "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}},
]


def call(cid: str, name: str, args: dict) -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def _doctrine_sha() -> str:
    from doctrine.spec import load_doctrine

    return load_doctrine("v1").sha256


def make_row(i: int, kind: str, session: int | None = None) -> dict:
    """Row ``i``; rows given the same ``session`` share its history (decision points of one
    session, as shared-prefix training merges them), at step ``i``."""
    h = i if session is None else session
    path = f"src/module_{h}.py"
    history = [
        {"role": "system", "content": "You are a coding agent. Tools: compress, bash."},
        {"role": "user", "content": f"Fix the failing test in {path}."},
        {"role": "assistant", "content": "", "tool_calls": [call(f"c{h}a", "bash", {"cmd": f"pytest -q tests/test_{h}.py"})]},
        {"role": "tool", "tool_call_id": f"c{h}a", "name": "bash",
         "content": f"FAILED tests/test_{h}.py::test_parse - ValueError: bad token at line {10 + h}\n1 failed, {h} passed"},
    ]
    if kind == "compress":
        history.append({"role": "user", "content": f"Compressible ranges (1, oldest first):\n  m00002–m00004  3 msgs  {200 + i}  [tool 67% | text 33%]"})
        target = {"role": "assistant", "content": "", "tool_calls": [call(f"c{i}b", "compress", {
            "topic": f"test_{i} failure", "content": [{"startId": "m00002", "endId": "m00004",
            "summary": f"Ran pytest on tests/test_{i}.py: `ValueError: bad token at line {10 + i}` in {path}; 1 failed, {i} passed."}]})]}
    elif kind == "refusal":
        history.append({"role": "user", "content": "Compressible ranges (1, oldest first):\n  m00002–m00004  3 msgs  210  [tool 67% | text 33%]"})
        target = {"role": "assistant", "content": f"Not now: the traceback in m00004 is what I am fixing in {path}. I will compress after the fix."}
    else:
        target = {"role": "assistant", "content": "", "tool_calls": [call(f"c{i}c", "bash", {"cmd": f"sed -n {5 + i},{20 + i}p {path}"})]}
    return {"messages": history + [target], "tools": json.dumps(TOOLS),
            "meta": {"kind": kind, "source": "synthetic", "session_id": f"s{h}", "step": i, "doctrine_version": "v1",
                     "doctrine_sha256": _doctrine_sha(), "labeler": "fixture", "prompt_mode": "distilled"}}


def build_sft_data(root: Path, n_train: int = 12, n_val: int = 4, session_rows: int = 1) -> Path:
    """``session_rows`` > 1: consecutive rows form sessions of that many decision points."""
    from datasets import Dataset

    kinds = ["compress", "refusal", "ordinary"]

    def session(i: int) -> int | None:
        return None if session_rows == 1 else 1000 + i // session_rows

    for split, rows in (("train", [make_row(i, kinds[i % 3], session(i)) for i in range(n_train)]),
                        ("validation", [make_row(100 + i, kinds[i % 3], session(100 + i)) for i in range(n_val)])):
        (root / split).mkdir(parents=True, exist_ok=True)
        Dataset.from_list(rows).to_parquet(str(root / split / "shard-00000.parquet"))
    files = {f"{p.parent.name}/{p.name}": file_sha256(p) for p in sorted(root.glob("*/*.parquet"))}
    write_manifest(root, stage="data", counts={"train": n_train, "validation": n_val},
                   doctrine=load_doctrine("v1").to_manifest(), files=files)
    return root


@pytest.fixture(scope="session")
def sft_data_dir(tmp_path_factory) -> Path:
    return build_sft_data(tmp_path_factory.mktemp("sftdata") / "data")


@pytest.fixture(scope="session")
def session_sft_data_dir(tmp_path_factory) -> Path:
    """The same curriculum with sessions of three decision points sharing their history."""
    return build_sft_data(tmp_path_factory.mktemp("sessiondata") / "data", session_rows=3)
