"""acp-kernel prompt sets: import one as an override layer, export a doctrine mode as one.

A prompt set is a folder with a JSON manifest and Markdown files::

    manifest.json          {"format": "acp-prompt-set", "formatVersion": 1,
                            "acknowledgeRisk": true,
                            "prompts":  {"philosophy": "philosophy.md",
                                         "howToCompress": "how-to-compress.md",
                                         "tier2": "tier2.md", "tier3": "tier3.md"},
                            "sections": {"tool-compress": "sections/tool-compress.md", ...},
                            "source": {"doctrine": "v1", "sha256": "...", "mode": "distilled"}}
    philosophy.md  how-to-compress.md  tier2.md  tier3.md   (each optional)

``prompts`` holds the four kernel rule texts (Layer 0: load-bearing, gated by the caller's
``--acknowledge-risk``), ``sections`` the host's surface sections (Layer 1: tri-state: a file
replaces, ``null`` removes, absent keeps the default). Without a ``prompts`` key, any of
the four default file names present in the folder is used. The manifest may be named
``manifest.json`` or ``prompt-set.json``, or be the folder's only ``*.json`` file.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from doctrine.texts import Doctrine, DoctrineError, normalise_text

__all__ = ["PROMPT_KEYS", "export_prompt_set", "read_prompt_set"]

FORMAT = "acp-prompt-set"
FORMAT_VERSION = 1
# Spellings a prompt set may use for the four rule texts -> doctrine section names.
PROMPT_KEYS = {
    "philosophy": "philosophy",
    "how-to-compress": "how-to-compress",
    "howToCompress": "how-to-compress",
    "how_to_compress": "how-to-compress",
    "tier2": "tier2",
    "tier3": "tier3",
}
DEFAULT_FILES = {
    "philosophy": "philosophy.md",
    "how-to-compress": "how-to-compress.md",
    "tier2": "tier2.md",
    "tier3": "tier3.md",
}
_MANIFEST_NAMES = ("manifest.json", "prompt-set.json")
MAX_FILE_BYTES = 256 * 1024  # per manifest or section file; a prompt is a few KiB


def _read_bytes_capped(path: Path) -> bytes:
    """A regular file's bytes, at most MAX_FILE_BYTES; anything else is a DoctrineError.

    The file type is checked with ``os.stat`` before opening (a FIFO is never opened, a
    device never read), and again on the open descriptor in case the path changed between.
    """
    def kind(mode: int) -> str:
        return ("a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "a socket" if stat.S_ISSOCK(mode) else "a folder" if stat.S_ISDIR(mode) else "not a file")

    st = os.stat(path)  # follows a symlink: its target's type is what would be read
    if not stat.S_ISREG(st.st_mode):
        raise DoctrineError(f"{path} is {kind(st.st_mode)}, not a regular file")
    if st.st_size > MAX_FILE_BYTES:
        raise DoctrineError(f"{path} is {st.st_size} bytes, over the {MAX_FILE_BYTES // 1024} KiB limit per file")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(f.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise DoctrineError(f"{path} is {kind(mode)}, not a regular file")
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise DoctrineError(f"{path} is over the {MAX_FILE_BYTES // 1024} KiB limit per file")
    return data


def _find_manifest(folder: Path) -> Path:
    for name in _MANIFEST_NAMES:
        if (folder / name).is_file():
            return folder / name
    candidates = sorted(folder.glob("*.json"))
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise DoctrineError(f"prompt set {folder}: no JSON manifest (expected manifest.json)")
    raise DoctrineError(
        f"prompt set {folder}: several JSON files {[c.name for c in candidates]} and no manifest.json"
    )


def _read_file(folder: Path, rel: object, where: str) -> str:
    if not isinstance(rel, str) or not rel:
        raise DoctrineError(f"prompt set {folder}: {where} must be a file name or null, got {rel!r}")
    if "\x00" in rel:
        raise DoctrineError(f"prompt set {folder}: {where} is not a usable file name ({rel!r})")
    path = (folder / rel).resolve()
    if Path(rel).is_absolute() or folder.resolve() not in path.parents:
        raise DoctrineError(f"prompt set {folder}: {where} points outside the folder ({rel})")
    try:
        return normalise_text(_read_bytes_capped(path).decode("utf-8"))
    except FileNotFoundError:
        raise DoctrineError(f"prompt set {folder}: {where} names a missing file {rel}") from None
    except DoctrineError as exc:
        raise DoctrineError(f"prompt set {folder}: {where}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise DoctrineError(f"prompt set {folder}: cannot read {rel} (not UTF-8: {exc.reason})") from None
    except OSError as exc:
        raise DoctrineError(f"prompt set {folder}: cannot read {rel} ({exc})") from None


def read_prompt_set(folder: str | Path, doctrine: Doctrine | None = None,
                    acknowledge_risk: bool = False) -> dict[str, str]:
    """Read a prompt set into ``{section: text}`` overrides (an empty text removes a section).

    Checks the set itself (manifest shape, regular files of at most MAX_FILE_BYTES each).
    With ``doctrine``, a set that replaces load-bearing sections needs the caller's
    ``acknowledge_risk`` (CLI ``--acknowledge-risk``); the manifest's own
    ``"acknowledgeRisk": true`` records the author's intent but does not replace the
    caller's flag, which :func:`doctrine.spec.resolve_doctrine` passes here.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise DoctrineError(f"prompt set {folder}: not a folder")
    mpath = _find_manifest(folder)
    try:
        manifest = json.loads(_read_bytes_capped(mpath).decode("utf-8"))
    except json.JSONDecodeError as exc:
        raise DoctrineError(f"prompt set {mpath}: malformed JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise DoctrineError(f"prompt set {mpath}: malformed JSON (nested too deeply)") from None
    except UnicodeDecodeError as exc:
        raise DoctrineError(f"prompt set {mpath}: cannot read (not UTF-8: {exc.reason})") from None
    except DoctrineError as exc:
        raise DoctrineError(f"prompt set {mpath}: cannot read ({exc})") from None
    except ValueError as exc:  # a number past int()'s 4,300-digit limit
        why = "a number with too many digits" if "digits" in str(exc) else str(exc).splitlines()[0][:200]
        raise DoctrineError(f"prompt set {mpath}: malformed JSON ({why})") from None
    except OSError as exc:
        raise DoctrineError(f"prompt set {mpath}: cannot read ({exc})") from None
    if not isinstance(manifest, dict):
        raise DoctrineError(f"prompt set {mpath}: manifest must be a JSON object")
    fmt = manifest.get("format", FORMAT)
    if fmt != FORMAT or manifest.get("formatVersion", FORMAT_VERSION) != FORMAT_VERSION:
        raise DoctrineError(
            f"prompt set {mpath}: unsupported format {fmt!r} v{manifest.get('formatVersion')!r}; "
            f"expected {FORMAT!r} v{FORMAT_VERSION}"
        )

    layer: dict[str, str] = {}
    prompts = manifest.get("prompts")
    if prompts is None:
        for name, fname in DEFAULT_FILES.items():
            if (folder / fname).is_file():
                layer[name] = _read_file(folder, fname, fname)
    elif isinstance(prompts, dict):
        unknown = sorted(k for k in prompts if k not in PROMPT_KEYS)
        if unknown:
            raise DoctrineError(f"prompt set {mpath}: unknown prompt key(s) {unknown}; expected {sorted(PROMPT_KEYS)}")
        for key, rel in prompts.items():
            name = PROMPT_KEYS[key]
            if name in layer:
                raise DoctrineError(f"prompt set {mpath}: prompt {name!r} given twice")
            layer[name] = "" if rel is None else _read_file(folder, rel, f"prompts.{key}")
    else:
        raise DoctrineError(f"prompt set {mpath}: 'prompts' must be an object")

    sections = manifest.get("sections", {})
    if not isinstance(sections, dict):
        raise DoctrineError(f"prompt set {mpath}: 'sections' must be an object")
    for name, rel in sections.items():
        if name in layer:
            raise DoctrineError(f"prompt set {mpath}: section {name!r} given in both prompts and sections")
        layer[name] = "" if rel is None else _read_file(folder, rel, f"sections.{name}")

    if doctrine is not None:
        gated = sorted(n for n in layer if n in doctrine.load_bearing)
        if gated and not acknowledge_risk:
            declared = manifest.get("acknowledgeRisk") is True
            raise DoctrineError(
                f"prompt set {mpath}: replaces load-bearing section(s) {', '.join(gated)} (the compression "
                f"rules); pass --acknowledge-risk (acknowledge_risk=True) to apply it"
                + ("" if declared else "; its manifest does not set \"acknowledgeRisk\": true either")
            )
    return layer


def export_prompt_set(doctrine: Doctrine, mode: str, out_dir: str | Path) -> Path:
    """Write ``mode``'s texts of ``doctrine`` as a prompt set in ``out_dir``; returns the manifest path.

    The four rule texts go to their default files, every other rendered section to
    ``sections/<name>.md``; files are written atomically and the manifest last. Imported
    back with acknowledge_risk and rendered in doctrine mode, the set reproduces ``mode``.
    """
    from plumbing.runs import atomic_write_text

    if mode not in ("doctrine", "distilled"):
        raise DoctrineError(f"unknown prompt mode {mode!r}; expected 'doctrine' or 'distilled'")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise DoctrineError(f"prompt set {out}: exists and is not a folder")
    (out / "sections").mkdir(parents=True, exist_ok=True)

    prompts: dict[str, str] = {}
    for name, fname in DEFAULT_FILES.items():
        if name in doctrine.sections:
            text = doctrine.text(name, mode)
            atomic_write_text(out / fname, text + "\n" if text else "")
            prompts["howToCompress" if name == "how-to-compress" else name] = fname
    sections: dict[str, str] = {}
    for name in doctrine.sections:
        if name in DEFAULT_FILES or name in doctrine.reference_only:
            continue
        text = doctrine.text(name, mode)
        rel = f"sections/{name}.md"
        atomic_write_text(out / rel, text + "\n" if text else "")
        sections[name] = rel
    manifest = {
        "format": FORMAT,
        "formatVersion": FORMAT_VERSION,
        "acknowledgeRisk": True,
        "source": {"doctrine": doctrine.version, "sha256": doctrine.sha256, "mode": mode,
                   "overrides_applied": list(doctrine.overrides_applied)},
        "prompts": prompts,
        "sections": sections,
    }
    mpath = out / "manifest.json"
    atomic_write_text(mpath, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return mpath
