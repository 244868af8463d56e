"""CockroachDB changefeed JSON messages (format ``crdb-json``).

One message per change row (one transaction's net change to one key, so several writes to a row
in one transaction give one message). The message key is the JSON array of the primary-key
values, ``[1]`` or ``[2, "a"]``. The value depends on the envelope (``CrdbOptions.envelope``):

* ``wrapped`` (default): ``{"after": {..}|null, "before": .., "key": [..], "mvcc_timestamp": "..",
  "topic": "..", "updated": ".."}``, each member after ``after`` only with its option
  (``diff``, ``key_in_value``, ``topic_in_value``, ``mvcc_timestamp``, ``updated``);
* ``row``: the columns at the top level, metadata in ``"__crdb__": {"mvcc_timestamp", "updated"}``;
  a delete has an empty value;
* ``bare``: like ``row``; metadata may also hold ``key`` and ``topic``; a delete keeps only the
  key columns (the others ``null``);
* ``key_only``: an empty value.

Objects are printed the way CockroachDB prints JSON: keys sorted bytewise, ``", "`` and ``": "``
separators; values as :mod:`changefeed.formats.crdb_values` renders them. Timestamps are HLC
decimals ``<wall ns>.<logical, 10 digits>``. A resolved message is compact:
``{"resolved":"<hlc>"}``, or ``{"__crdb__":{"resolved":"<hlc>"}}`` outside ``wrapped``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from changefeed.engine.changes import CHANGE_SNAPSHOT
from changefeed.engine.storage import CHANGE_ERASE
from changefeed.feeds.crdb_options import (
    ENVELOPE_BARE,
    ENVELOPE_KEY_ONLY,
    ENVELOPE_WRAPPED,
    VIRTUAL_COLUMNS_NULL,
    CrdbOptions,
)
from changefeed.formats import crdb_values as V
from changefeed.formats.base import Encoder, Record, partition_of, register

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

    from changefeed.engine.catalog import ColumnSchema, TableSchema
    from changefeed.engine.clock import CommitTs
    from changefeed.feeds.spec import FeedSpec

DEFAULT_OPTIONS = CrdbOptions()


def options_of(feed: FeedSpec) -> CrdbOptions:
    return feed.crdb if feed.crdb is not None else DEFAULT_OPTIONS


def hlc(wall: int, logical: int) -> str:
    """CockroachDB's HLC decimal: ``<wall ns>.<logical, 10 digits>``."""
    return f"{wall}.{logical:010d}"


def topic_of(table: TableSchema, opts: CrdbOptions) -> str:
    """The topic name of a table's messages (``topic_in_value``; the ``table`` of a core feed)."""
    return opts.topic_name(table.short_name)


def _sort_key(name: str) -> bytes:
    return name.encode()


@dataclass(frozen=True, slots=True)
class Member:
    """One member of a row object: ``prefix`` is ``"name": ``; ``column`` None for a virtual
    column shown as null."""

    name: str
    prefix: str
    column: ColumnSchema | None


@dataclass(frozen=True, slots=True)
class Layout:
    """What a table's messages contain, worked out once per (table, options)."""

    key: tuple[ColumnSchema, ...]
    columns: tuple[ColumnSchema, ...]  # the row's columns, sorted bytewise by name
    virtual_nulls: tuple[str, ...]  # virtual columns shown as null (virtual_columns='null')
    opts: CrdbOptions
    topic: str

    @staticmethod
    def of(table: TableSchema, feed: FeedSpec) -> Layout:
        opts = options_of(feed)
        virtual = tuple(c.name for c in table.columns if c.virtual)
        return Layout(
            key=table.key,
            columns=tuple(sorted(table.stored, key=lambda c: _sort_key(c.name))),
            virtual_nulls=virtual if opts.virtual_columns == VIRTUAL_COLUMNS_NULL else (),
            opts=opts,
            topic=topic_of(table, opts),
        )

    def members(self) -> list[Member]:
        """The row object's members, sorted bytewise by name."""
        out: list[tuple[str, ColumnSchema | None]] = [(c.name, c) for c in self.columns]
        out += [(n, None) for n in self.virtual_nulls]
        out.sort(key=lambda m: _sort_key(m[0]))
        return [Member(n, V.json_string(n) + ": ", c) for n, c in out]

    def meta_fields(self) -> list[str]:
        """Metadata member names in output order (inside ``__crdb__`` outside ``wrapped``)."""
        o = self.opts
        names = []
        if o.key_in_value and o.envelope in (ENVELOPE_WRAPPED, ENVELOPE_BARE):
            names.append("key")
        if o.mvcc_timestamp:
            names.append("mvcc_timestamp")
        if o.topic_in_value and o.envelope in (ENVELOPE_WRAPPED, ENVELOPE_BARE):
            names.append("topic")
        if o.updated:
            names.append("updated")
        return names


class CrdbJsonEncoder(Encoder):
    name = "crdb-json"

    # ------------------------------------------------------------------ Python
    def encode_python(self, batch: pa.RecordBatch, table: TableSchema, feed: FeedSpec) -> list[Record]:
        n = batch.num_rows
        if n == 0:
            return []
        lay = Layout.of(table, feed)
        opts = lay.opts
        keys = self._python_keys(batch, lay)
        tss: list[int] = batch.column("ts").to_pylist()
        key_bytes = [k.encode() for k in keys]
        parts = feed.partitions

        if opts.envelope == ENVELOPE_KEY_ONLY:
            return [(partition_of(kb, parts), kb, b"", t) for kb, t in zip(key_bytes, tss, strict=True)]
        ops: list[int] = batch.column("op").to_pylist()
        lgs: list[int] = batch.column("lg").to_pylist()
        stamps = [hlc(t, lg) for t, lg in zip(tss, lgs, strict=True)]
        members = lay.members()
        new_texts = {
            m.column.id: V.python_values(batch.column(m.column.db), m.column.type)
            for m in members
            if m.column is not None
        }
        meta = lay.meta_fields()

        def meta_values(i: int) -> list[tuple[str, str]]:
            out = []
            for m in meta:
                if m == "key":
                    out.append((m, keys[i]))
                elif m == "topic":
                    out.append((m, V.json_string(lay.topic)))
                else:  # updated, mvcc_timestamp
                    out.append((m, '"' + stamps[i] + '"'))
            return out

        def items(texts: dict[int, list[str]], i: int, only_key: bool = False) -> list[str]:
            return [
                m.prefix
                + (
                    V.NULL
                    if m.column is None or (only_key and not m.column.is_key)
                    else texts[m.column.id][i]
                )
                for m in members
            ]

        def obj(texts: dict[int, list[str]], i: int) -> str:
            return "{" + ", ".join(items(texts, i)) + "}"

        values: list[bytes] = []
        if opts.envelope == ENVELOPE_WRAPPED:
            old_texts: dict[int, list[str]] = {}
            oxs: list[bool] = []
            if opts.diff:
                oxs = batch.column("ox").to_pylist()
                for m in members:
                    c = m.column
                    if c is not None:
                        col = batch.column(c.db if c.is_key else f"o{c.id}")
                        old_texts[c.id] = V.python_values(col, c.type)
            for i in range(n):
                erased = ops[i] == CHANGE_ERASE
                out = '{"after": ' + ("null" if erased else obj(new_texts, i))
                if opts.diff:
                    had = oxs[i] and ops[i] != CHANGE_SNAPSHOT
                    out += ', "before": ' + (obj(old_texts, i) if had else "null")
                for name, text in meta_values(i):
                    out += f', "{name}": {text}'
                values.append((out + "}").encode())
        else:  # row, deprecated_row, bare
            bare = opts.envelope == ENVELOPE_BARE
            pos = _meta_position(members)
            for i in range(n):
                erased = ops[i] == CHANGE_ERASE
                if erased and not bare:
                    values.append(b"")
                    continue
                body = items(new_texts, i, only_key=erased)
                mv = meta_values(i)
                if mv:
                    body.insert(pos, '"__crdb__": {' + ", ".join(f'"{k}": {v}' for k, v in mv) + "}")
                values.append(("{" + ", ".join(body) + "}").encode())
        return [(partition_of(kb, parts), kb, v, t) for kb, v, t in zip(key_bytes, values, tss, strict=True)]

    @staticmethod
    def _python_keys(batch: pa.RecordBatch, lay: Layout) -> list[str]:
        cols = [V.python_values(batch.column(c.db), c.type) for c in lay.key]
        return ["[" + ", ".join(row) + "]" for row in zip(*cols, strict=True)]

    # ------------------------------------------------------------------ Spark
    def encode_spark(self, df: DataFrame, table: TableSchema, feed: FeedSpec) -> DataFrame:
        from pyspark.sql import functions as F

        from changefeed.formats.ydb_json import session_tz, spark_output

        lay = Layout.of(table, feed)
        opts = lay.opts
        tz = session_tz(df)
        op = F.col("op")
        erased = op == CHANGE_ERASE
        key = F.concat(
            F.lit("["),
            F.concat_ws(", ", *[V.spark_value(F.col(c.db), c.type, tz) for c in lay.key]),
            F.lit("]"),
        )
        if opts.envelope == ENVELOPE_KEY_ONLY:
            return spark_output(df, key, F.lit(""), feed.partitions)
        members = lay.members()
        stamp = F.concat(F.lit('"'), F.col("ts").cast("string"), F.lit("."))
        stamp = F.concat(stamp, F.lpad(F.col("lg").cast("string"), 10, "0"), F.lit('"'))

        def meta_cols() -> list[tuple[str, Column]]:
            out: list[tuple[str, Column]] = []
            for m in lay.meta_fields():
                if m == "key":
                    out.append((m, key))
                elif m == "topic":
                    out.append((m, F.lit(V.json_string(lay.topic))))
                else:
                    out.append((m, stamp))
            return out

        def obj(old: bool = False, only_key: Column | None = None) -> list[Column]:
            parts: list[Column] = []
            for i, m in enumerate(members):
                c = m.column
                parts.append(F.lit(("{" if i == 0 else ", ") + m.prefix))
                if c is None:
                    parts.append(F.lit(V.NULL))
                    continue
                name = f"o{c.id}" if old and not c.is_key else c.db
                text = V.spark_value(F.col(name), c.type, tz)
                if only_key is not None and not c.is_key:
                    text = F.when(only_key, F.lit(V.NULL)).otherwise(text)
                parts.append(text)
            if not parts:
                return [F.lit("{}")]
            return [*parts, F.lit("}")]

        value: Column
        if opts.envelope == ENVELOPE_WRAPPED:
            after = F.when(erased, F.lit("null")).otherwise(F.concat(*obj()))
            pieces = [F.lit('{"after": '), after]
            if opts.diff:
                had = F.col("ox") & (op != CHANGE_SNAPSHOT)
                before = F.when(had, F.concat(*obj(old=True))).otherwise(F.lit("null"))
                pieces += [F.lit(', "before": '), before]
            for name, col in meta_cols():
                pieces += [F.lit(f', "{name}": '), col]
            value = F.concat(*pieces, F.lit("}"))
        else:
            bare = opts.envelope == ENVELOPE_BARE
            meta = meta_cols()
            parts = obj(only_key=erased if bare else None)
            if meta:
                inner: list[Column] = []
                for j, (name, col) in enumerate(meta):
                    inner += [F.lit(("{" if j == 0 else ", ") + f'"{name}": '), col]
                meta_obj = F.concat(F.lit('"__crdb__": '), *inner, F.lit("}"))
                parts = _spark_insert_member(parts, members, meta_obj)
            body = F.concat(*parts)
            value = body if bare else F.when(erased, F.lit("")).otherwise(body)
        return spark_output(df, key, value, feed.partitions)

    # ------------------------------------------------------------------ resolved
    def resolved(self, ts: CommitTs, tx: int, feed: FeedSpec) -> bytes:
        return resolved_message(ts, options_of(feed))


def resolved_message(ts: CommitTs, opts: CrdbOptions) -> bytes:
    """A resolved-timestamp message: compact, as CockroachDB's ``gojson.Marshal`` writes it."""
    if opts.envelope == ENVELOPE_WRAPPED:
        return f'{{"resolved":"{hlc(ts.wall, ts.logical)}"}}'.encode()
    return f'{{"__crdb__":{{"resolved":"{hlc(ts.wall, ts.logical)}"}}}}'.encode()


_CRDB = b"__crdb__"


def _meta_position(members: list[Member]) -> int:
    """Index among the (sorted) members where ``__crdb__`` goes."""
    return sum(1 for m in members if m.name.encode() < _CRDB)


def _spark_insert_member(parts: list[Column], members: list[Member], member: Column) -> list[Column]:
    """The Spark face of :func:`_insert_member`: ``parts`` is ``[lit, value, lit, value, .., "}"]``."""
    from pyspark.sql import functions as F

    pos = _meta_position(members)
    if not members:
        return [F.lit("{"), member, F.lit("}")]
    out: list[Column] = []
    for i, m in enumerate(members):
        lead = "{" if i == 0 else ", "
        if i == pos:
            out += [F.lit(lead), member, F.lit(", " + m.prefix)]
        else:
            out.append(F.lit(lead + m.prefix))
        out.append(parts[2 * i + 1])
    if pos >= len(members):
        out += [F.lit(", "), member]
    out.append(F.lit("}"))
    return out


@register("crdb-json")
def _factory() -> Encoder:
    return CrdbJsonEncoder()


__all__ = ["CrdbJsonEncoder", "Layout", "Member", "hlc", "options_of", "resolved_message", "topic_of"]
