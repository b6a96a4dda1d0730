"""Curriculum shards as every reader checks them: ``<data>/<split>/*.parquet`` files of rows
``{messages, tools, meta}`` (``data_gen.curriculum`` writes them; train, eval, inspect and
audit read them). A file that is not one (another table, a file cut short, shards of two
builds mixed) is a :class:`ShardError`, one line naming the file and why, before any row is
used.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from plumbing.subcommands import CommandError

__all__ = ["ShardError", "check_shards", "messages_type", "read_shard"]


def messages_type():
    """The ``messages`` column's type: OpenAI-format messages, tool-call arguments as JSON text."""
    import pyarrow as pa

    call = pa.struct([("id", pa.string()), ("type", pa.string()),
                      ("function", pa.struct([("name", pa.string()), ("arguments", pa.string())]))])
    message = pa.struct([("role", pa.string()), ("content", pa.string()), ("tool_calls", pa.list_(call)),
                         ("tool_call_id", pa.string()), ("name", pa.string())])
    return pa.list_(message)


class ShardError(CommandError):
    """A parquet file under a split folder that is not a readable curriculum shard."""


def _reason(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:200]


def check_shards(paths: Iterable[str | Path]) -> None:
    """Raise :class:`ShardError` unless every file is a readable parquet shard with the
    curriculum's columns (``messages`` and ``tools`` as ``data_gen.curriculum.write_split`` writes them, a
    ``meta`` struct with a ``kind``) and all share one schema (a reader of the split needs one).
    Reads the footers only: the one check train, eval, inspect and audit apply before rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    first = None
    for path in paths:
        try:
            schema = pq.read_schema(path)
        except (pa.ArrowException, OSError) as exc:
            raise ShardError(f"{path}: unreadable parquet shard ({_reason(exc)})") from None
        meta = schema.field("meta").type if "meta" in schema.names else None
        if (any(name not in schema.names or schema.field(name).type != want
                for name, want in (("messages", messages_type()), ("tools", pa.string())))
                or not isinstance(meta, pa.StructType) or meta.get_field_index("kind") < 0):
            raise ShardError(f"{path}: not a curriculum shard (columns {', '.join(schema.names) or 'none'}; "
                             "a shard has messages, tools and meta as the data stage writes them)")
        if first is None:
            first = (path, schema)
        elif not schema.equals(first[1]):
            raise ShardError(f"{path}: its schema differs from {first[0]}'s; the shards of one split are "
                             "written by one data build (rebuild the folder with dtw data --force)")


def read_shard(path: str | Path) -> list[dict]:
    """A checked shard's rows (:func:`check_shards`); a file cut short is a :class:`ShardError`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    check_shards([path])
    try:
        return pq.read_table(path).to_pylist()
    except (pa.ArrowException, OSError) as exc:
        raise ShardError(f"{path}: unreadable parquet shard ({_reason(exc)})") from None
