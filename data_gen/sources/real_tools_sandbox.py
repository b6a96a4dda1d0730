"""Read-only commands over real source trees, run once at build time.

The real-tool source (``real_tools.py``) records what real commands print over source trees
already on this machine: the Python standard library and installed packages. This module
owns the two things that make that safe and repeatable:

- **trees**: a tree is named ``stdlib/<package>`` (under ``sysconfig``'s stdlib) or
  ``site/<package>`` (an installed top-level package, found without importing it); its
  provenance (root, version, sha256 of every ``.py`` file) goes into the build's fingerprint,
  so a rebuild in a changed environment is refused rather than silently different;
- **the sandbox**: commands are argument lists (never a shell) from a short allow-list,
  checked before they run (``sed`` only prints line ranges, ``python`` only ``-c`` or
  ``-m doctest``); they run with a minimal environment (no inherited variable, so no secret
  reaches them), stdin closed, a per-command timeout, ``RLIMIT_FSIZE`` 0 (any attempt to
  write a regular file fails) and bytecode writing off, so no file in a tree changes.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import os
import re
import resource
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Ran", "Tree", "UnsafeCommand", "provenance", "resolve_tree", "run", "tree_family", "tree_files"]

PROGRAMS = ("ls", "grep", "sed", "wc", "cat", "python", "git")
GIT_READS = ("log", "show", "ls-files", "rev-parse")  # git subcommands that only read
_SED_SCRIPT = re.compile(r"^\d+,\d+p$")
SKIP_DIRS = {"tests", "test", "__pycache__", "idle_test", "testing"}


class UnsafeCommand(ValueError):
    """A command outside the read-only allow-list (a bug in a plan, never run)."""


# --------------------------------------------------------------------------- trees


@dataclass(frozen=True)
class Tree:
    name: str  # "stdlib/json", "site/click"
    root: Path  # the package directory
    module: str  # its import name
    version: str  # the Python version (stdlib) or the distribution's version
    dist: str  # "python" or the distribution's name

    @property
    def family(self) -> str:
        return tree_family(self.name)


def tree_family(name: str) -> str:
    """The split family of tree ``name``: one per tree, so a held-out tree is never trained on."""
    return "realtool_" + name.replace("/", "_")


def resolve_tree(name: str) -> Tree:
    """The tree ``name`` names on this machine; a clear ValueError when it is not here."""
    kind, _, pkg = name.partition("/")
    if kind not in ("stdlib", "site") or not pkg.isidentifier():
        raise ValueError(f"tree {name!r}: expected 'stdlib/<package>' or 'site/<package>'")
    if kind == "stdlib":
        root = Path(sysconfig.get_paths()["stdlib"]).resolve() / pkg
        if not (root / "__init__.py").is_file():
            raise ValueError(f"tree {name!r}: no package {pkg} in the standard library at {root.parent}")
        return Tree(name, root, pkg, sys.version.split()[0], "python")
    spec = importlib.util.find_spec(pkg)  # a top-level name: finds it without importing it
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"tree {name!r}: no installed package {pkg}")
    # resolved: the same installed files give the same paths from any checkout's venv link
    root = Path(list(spec.submodule_search_locations)[0]).resolve()
    if Path(sysconfig.get_paths()["stdlib"]).resolve() in root.parents:
        raise ValueError(f"tree {name!r}: {pkg} is in the standard library; name it stdlib/{pkg}")
    dists = _distributions().get(pkg) or []
    if not dists:
        raise ValueError(f"tree {name!r}: {pkg} belongs to no installed distribution")
    dist = sorted(dists)[0]
    return Tree(name, root, pkg, importlib.metadata.version(dist), dist)


@functools.lru_cache(maxsize=1)
def _distributions() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()  # scans every installed distribution: once


def tree_files(tree: Tree) -> list[str]:
    """The tree's ``.py`` files (relative, sorted), tests and ``__main__`` left out."""
    out = []
    for p in tree.root.rglob("*.py"):
        rel = p.relative_to(tree.root)
        if SKIP_DIRS.intersection(rel.parts[:-1]) or p.name == "__main__.py" or p.name.startswith("test_"):
            continue
        out.append(rel.as_posix())
    return sorted(out)


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def provenance(names: list[str]) -> dict:
    """What the recorded outputs are computed from: the interpreter and, per tree, its root,
    version and one sha256 over its files (relative name and content, sorted)."""
    trees = {}
    for name in sorted(names):
        try:
            t = resolve_tree(name)
        except ValueError as exc:
            trees[name] = {"missing": str(exc)}
            continue
        h = hashlib.sha256()
        for rel in tree_files(t):
            h.update(f"{rel}={file_sha256(t.root / rel)};".encode())
        trees[name] = {"root": str(t.root), "dist": t.dist, "version": t.version, "files_sha256": h.hexdigest()}
    return {"python": sys.version.split()[0], "executable": sys.executable, "trees": trees}


# --------------------------------------------------------------------------- sandbox


@dataclass(frozen=True)
class Ran:
    """One command as it ran: its exit code (None when it timed out) and its output
    (stdout and stderr together, in order)."""

    command: str  # as the agent wrote it
    code: int | None
    out: str
    timed_out: bool = False
    timeout_s: float = 0.0

    def tool_output(self) -> str:
        """What the shell tool returns: the output and the exit code, or the timeout
        (a timed-out command's partial output depends on the machine's load, so it is not kept)."""
        if self.timed_out:
            return f"[The command timed out after {self.timeout_s:g} seconds and was killed.]"
        body = self.out.rstrip("\n")
        return (body + "\n" if body else "") + f"[The command completed with exit code {self.code}.]"


def check_read_only(argv: list[str]) -> None:
    """Refuse (UnsafeCommand) anything but the read-only shapes the plans use."""
    if not argv or argv[0] not in PROGRAMS:
        raise UnsafeCommand(f"program {argv[:1]} is not in the allow-list {PROGRAMS}")
    prog, args = argv[0], argv[1:]
    if prog == "sed" and (len(args) != 3 or args[0] != "-n" or not _SED_SCRIPT.match(args[1])):
        raise UnsafeCommand(f"sed may only print a line range (sed -n A,Bp FILE), got {args}")
    if prog == "python" and not (args[:1] == ["-c"] and len(args) == 2 or args[:2] == ["-m", "doctest"]):
        raise UnsafeCommand(f"python may only run -c CODE or -m doctest FILE, got {args[:2]}")
    if prog == "git" and (not args or args[0] not in GIT_READS or any(a.startswith("--output") for a in args)):
        raise UnsafeCommand(f"git may only run {GIT_READS} (no --output), got {args[:1]}")
    if prog in ("grep", "ls", "wc", "cat") and any(a.startswith("--exclude-from") for a in args):
        raise UnsafeCommand(f"{prog}: option not allowed")


def _limits() -> None:  # runs in the child before exec
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))  # no regular file can be written
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _env(home: Path) -> dict[str, str]:
    # Nothing inherited: no key or token of the caller's environment can reach a command.
    return {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8", "HOME": str(home),
            "TMPDIR": str(home), "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1", "TERM": "dumb", "COLUMNS": "100", "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_PAGER": "cat", "GIT_OPTIONAL_LOCKS": "0"}


def run(argv: list[str], cwd: Path, *, shown: str, timeout_s: float, scratch: Path) -> Ran:
    """Run ``argv`` (checked read-only) in ``cwd``; ``shown`` is the command as the agent
    wrote it. A command that fails or times out is returned as such, never raised."""
    check_read_only(argv)
    real = [sys.executable, "-B", "-s", *argv[1:]] if argv[0] == "python" else argv
    try:
        proc = subprocess.run(real, cwd=cwd, env=_env(scratch), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout_s,
                              preexec_fn=_limits, check=False)
    except subprocess.TimeoutExpired:
        return Ran(shown, None, "", True, timeout_s)
    except OSError as exc:  # the program is missing on this machine
        return Ran(shown, 127, f"bash: {argv[0]}: {exc.strerror}\n")
    out = proc.stdout.decode("utf-8", errors="replace").replace(str(scratch), "/tmp/check")
    return Ran(shown, proc.returncode, out)


def env_for_tests() -> dict[str, str]:
    """The variables a command sees (the tests check that nothing secret is among them)."""
    return _env(Path(os.devnull))
