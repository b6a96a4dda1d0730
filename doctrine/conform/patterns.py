"""Regexes and small text helpers shared by extraction and matching.

Everything here is pure ``re``; no state. The path pattern only accepts names with a known
source/config extension (or a few well-known extension-less files such as ``Makefile``),
so host names like ``db.example.com:5432`` and times like ``10:42:01`` are not taken for
``path:line``.
"""

from __future__ import annotations

import re

__all__ = [
    "CONFIG_EXTS",
    "PATH_LINE_PATTERNS",
    "UNIT_VALUE_RE",
    "VERSION_RE",
    "content_words",
    "find_path_lines",
    "norm",
    "norm_path",
    "path_suffix_match",
    "sentences",
    "truncate",
]

_EXTS = (
    "py pyi pyx ipynb js jsx ts tsx mjs cjs mts cts json jsonc yaml yml toml ini cfg conf env "
    "md rst txt sh bash zsh go rs java kt kts c h cc cpp cxx hpp cs rb php html htm css scss "
    "less vue svelte sql lock xml gradle swift scala lua pl r proto tf hcl log csv tsv graphql properties "
    "ex exs erl hrl dart cmake tfvars service "
    "zig ml mli hs lhs clj cljs cljc edn jl nix elm fs fsx groovy ps1 nim cr bzl bazel mk j2 jinja tpl "
    "vcl sbt cabal rebar mod sum tex"
).split()
# A backticked span of one line (a quote, a command, a value).
CODE_SPAN = re.compile(r"`[^`\n]+`")
CONFIG_EXTS = {"json", "jsonc", "yaml", "yml", "toml", "ini", "cfg", "conf", "env", "properties"}
_BARE_FILES = "Makefile|Dockerfile|Containerfile|Jenkinsfile|Procfile|Gemfile|Rakefile|Vagrantfile"

# A file path: optional directories, then a name with a known extension (or a bare file).
PATH = (
    r"(?<![\w./@~+-])"  # not in the middle of a longer token
    r"((?:[A-Za-z]:)?(?:~|\.{1,2})?/?(?:[\w.@+-]+/)*"
    r"(?:[\w.@+-]*[\w-]\.(?:" + "|".join(_EXTS) + r")|" + _BARE_FILES + r"))"
    r"(?![\w])"
)

# Each pattern yields groups (path, line) or (line, path) as named groups.
PATH_LINE_PATTERNS = [
    re.compile(r'File "(?P<path>[^"\n]+)", line (?P<line>\d+)'),
    re.compile(PATH.replace("((", "(?P<path>(", 1) + r":(?P<line>\d+)(?:[:-]\d+)?(?!\d)"),
    re.compile(PATH.replace("((", "(?P<path>(", 1) + r"\((?P<line>\d+)(?:,\s*\d+)?\)"),
    re.compile(PATH.replace("((", "(?P<path>(", 1) + r"[`'\"]?,? (?:at |on )?\(?lines? (?P<line>\d+)"),
    re.compile(r"\blines? (?P<line>\d+) (?:of|in) [`'\"]?" + PATH.replace("((", "(?P<path>(", 1)),
]

# Versions: x.y.z (three or more parts) with an optional range operator or a leading v;
# two-part numbers only with an operator, to avoid decimals.
VERSION_RE = re.compile(
    r"(?:(?P<op>\^|~=?|[<>]=?|==|!=|@)|(?<![\w.\-/])v?)"
    r"(?P<num>\d+\.\d+\.\d+(?:\.\d+)?(?:[-+][0-9A-Za-z]+(?:\.[0-9A-Za-z]+)*)?|(?<=[\^~<>=@])\d+\.\d+)"
    r"(?![\w]|\.\d)"
)

# Numbers with units. Single-letter units must touch the number (``5s``, ``2h``); longer
# ones may be spaced (``512 MiB``).
_LONG_UNITS = (
    r"ms|µs|us|ns|sec|secs|seconds?|mins?|minutes?|hrs?|hours?|days?|KB|MB|GB|TB|KiB|MiB|"
    r"GiB|TiB|Ki|Mi|Gi|Ti|kB|kb|mb|gb|bytes|tokens|px|rps|qps|req/s|ops/s|fps|Mbps|Gbps|%"
)
UNIT_VALUE_RE = re.compile(
    r"(?<![\w.])(?P<num>\d+(?:\.\d+)?)(?:(?P<sp>\s?)(?P<long>" + _LONG_UNITS + r")|(?P<short>[smhdBKkx×]))"
    r"(?![\w/])"
)

_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u00a0": " "})
_WS = re.compile(r"\s+")
_MD_ESCAPE = re.compile(r"\\([_*`\[\]#<>])")


def norm(text: str) -> str:
    """Whitespace-normalise: straight quotes, markdown escapes and backticks removed, runs
    of whitespace -> one space. Backticks are markdown formatting in a summary, so they are
    ignored on both sides."""
    if text.isascii() and "`" not in text and "\\" not in text:
        return " ".join(text.split())  # the common case, same result, several times faster
    text = _MD_ESCAPE.sub(r"\1", text.translate(_QUOTES)).replace("`", "")
    return _WS.sub(" ", text).strip()


def norm_path(path: str) -> str:
    """Compare paths by their components: strip quotes, ``./`` and a trailing slash."""
    path = path.strip().strip("`'\"").replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path.rstrip("/")


def path_suffix_match(a: str, b: str) -> bool:
    """True if one path ends with the other at a component boundary (same file name)."""
    pa = [p for p in norm_path(a).split("/") if p and p != "."]
    pb = [p for p in norm_path(b).split("/") if p and p != "."]
    if not pa or not pb or pa[-1] != pb[-1]:
        return False
    short, long_ = (pa, pb) if len(pa) <= len(pb) else (pb, pa)
    return long_[-len(short):] == short


# Cheap test run first on each line: the full patterns only where a file name can be.
_EXT_HINT = re.compile(r"\.(?:" + "|".join(_EXTS) + r")(?!\w)|" + _BARE_FILES + r'|File "')


def find_path_lines(text: str) -> list[tuple[str, int, int]]:
    """All ``(path, line, offset)`` mentions in ``text`` in any accepted form."""
    seen: set[tuple[str, int, int]] = set()
    out = []
    offset = 0
    for chunk in text.split("\n"):
        if _EXT_HINT.search(chunk):
            for pat in PATH_LINE_PATTERNS:
                for m in pat.finditer(chunk):
                    key = (norm_path(m.group("path")), int(m.group("line")), offset + m.start())
                    if key[0] and key not in seen:
                        seen.add(key)
                        out.append(key)
        offset += len(chunk) + 1
    out.sort(key=lambda t: t[2])
    return out


_STOP = set(
    "a an the and or but of to in on at for with by from as is are was were be been being it its "
    "this that these those i we you he she they me us my our your their will would should can "
    "could may might must shall do does did done not no so than then there here what which who "
    "when where why how all any some more most other into over under about also just only very "
    "use using used let lets let's ll ve re s t going want need have has had get got make".split()
)
_WORD = re.compile(r"[A-Za-z_][\w.\-/]*[\w]|[A-Za-z_]")


def content_words(text: str) -> list[str]:
    """Lower-cased content words (identifiers kept whole), in order, without stopwords."""
    return [w.lower() for w in _WORD.findall(text) if w.lower() not in _STOP and len(w) > 2]


_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(\[])|\n\s*\n|\n(?=\s*(?:[-*•]|\d+[.)])\s)")


def sentences(text: str) -> list[str]:
    """Split prose into sentences/bullets (code fences removed first); each normalised."""
    text = re.sub(r"```.*?(```|$)", "\n\n", text, flags=re.S)
    out = []
    for part in _SENT_SPLIT.split(text):
        part = norm(re.sub(r"^\s*(?:[-*•]|\d+[.)])\s+", "", part))
        if part:
            out.append(part)
    return out


def truncate(text: str, limit: int) -> str:
    """Cut ``text`` to at most ``limit`` chars at a word boundary (no ellipsis added)."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    return cut[:space] if space > limit // 2 else cut
