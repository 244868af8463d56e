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

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from changefeed.engine.changes import CHANGE_SNAPSHOT
from changefeed.engine.storage import CHANGE_ERASE
from changefeed.engine.types import Kind
from changefeed.feeds.crdb_options import (
    ENVELOPE_BARE,
    ENVELOPE_KEY_ONLY,
    ENVELOPE_WRAPPED,
    VIRTUAL_COLUMNS_NULL,
    CrdbOptions,
)
from changefeed.formats import crdb_values as V
from changefeed.formats.base import Encoder, Record, records_table, register
from changefeed.formats.cdc_eval import apply_spark, evaluate_batch, output_columns
from changefeed.formats.crdb_enriched import ArrowBuild, Enriched, SparkBuild

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
    #: a CDC query's projection: ``columns`` are its outputs, evaluated already (a delete's
    #: non-key columns read NULL in them), and ``before`` (``diff``) is the whole previous row
    projected: bool = False
    before: tuple[ColumnSchema, ...] = ()
    diff: bool = False

    @staticmethod
    def of(table: TableSchema, feed: FeedSpec, family: str | None = None) -> Layout:
        """The layout of a table's messages; with ``family``, of that column family's messages
        (``split_column_families``): only its columns, topic ``table.family``."""
        opts = options_of(feed)
        if family is None:
            family = feed.family  # a job's family feed

        def mine(c: ColumnSchema) -> bool:
            return family is None or family_of(c) == family

        virtual = tuple(c.name for c in table.columns if c.virtual and mine(c))
        topic = topic_of(table, opts)
        stored = tuple(sorted((c for c in table.stored if mine(c)), key=lambda c: _sort_key(c.name)))
        q = feed.query
        if q is not None:
            return Layout(
                key=table.key,
                columns=tuple(sorted(output_columns(q), key=lambda c: _sort_key(c.name))),
                virtual_nulls=(),
                opts=opts,
                topic=topic,
                projected=True,
                before=tuple(sorted(table.stored, key=lambda c: _sort_key(c.name))),
                diff=opts.diff or q.uses_prev,
            )
        return Layout(
            key=table.key,
            columns=stored,
            virtual_nulls=virtual if opts.virtual_columns == VIRTUAL_COLUMNS_NULL else (),
            opts=opts,
            topic=topic if family is None else f"{topic}.{family}",
            before=stored,
            diff=opts.diff,
        )

    def members(self) -> list[Member]:
        """The row object's members, sorted bytewise by name."""
        out: list[tuple[str, ColumnSchema | None]] = [(c.name, c) for c in self.columns]
        out += [(n, None) for n in self.virtual_nulls]
        out.sort(key=lambda m: _sort_key(m[0]))
        return [Member(n, V.json_string(n) + ": ", c) for n, c in out]

    def before_members(self) -> list[Member]:
        """The members of ``before`` (``diff``): the previous row's columns (with a CDC query too:
        CockroachDB puts the whole row there, not the projection)."""
        if not self.projected:
            return self.members()
        return [Member(c.name, V.json_string(c.name) + ": ", c) for c in self.before]

    def blanks_deletes(self, c: ColumnSchema) -> bool:
        """Whether a delete shows ``c`` as null (``bare``): a non-key column, unless a query
        computed it (a query sees a delete's non-key columns as NULL itself)."""
        return not c.is_key and not self.projected

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

    def __init__(self) -> None:
        self._columns: dict[tuple[Any, ...], tuple[list[str], Column, Column]] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {"_columns": {}}  # Spark columns stay on the driver; a task builds none

    # ------------------------------------------------------------------ Python
    def encode_batch(self, batch: pa.RecordBatch, table: TableSchema, feed: FeedSpec) -> pa.Table:
        """The records of ``batch`` (the rows ``feed`` delivers: its column family's, see
        :func:`family_rows`) as Arrow columns: :class:`~changefeed.formats.base.ColumnarEncoder`."""
        if feed.query is not None:
            batch = evaluate_batch(feed.query, batch, table, diff=options_of(feed).diff)
        keys, values = self.encode_arrow(batch, table, feed, evaluated=True)
        return records_table(keys, values, batch.column("ts"), feed.partitions)

    def encode_python(self, batch: pa.RecordBatch, table: TableSchema, feed: FeedSpec) -> list[Record]:
        if batch.num_rows == 0:
            return []
        t = self.encode_batch(batch, table, feed)
        cols = [t.column(n).to_pylist() for n in ("partition", "key", "value", "ts")]
        return list(zip(*cols, strict=True))

    def encode_arrow(
        self,
        batch: pa.RecordBatch,
        table: TableSchema,
        feed: FeedSpec,
        family: str | None = None,
        *,
        evaluated: bool = False,
    ) -> tuple[pa.Array, pa.Array]:
        """Message keys and values as two Arrow binary arrays, computed column-wise with Arrow
        string kernels: each column rendered once, then the messages joined. With ``family``,
        the messages of that column family (filter the rows first with :func:`family_rows`).
        A CDC query is applied here unless ``evaluated`` says the batch already went through it."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if feed.query is not None and not evaluated:
            batch = evaluate_batch(feed.query, batch, table, diff=options_of(feed).diff)
        n = batch.num_rows
        if n == 0:
            return pa.array([], pa.binary()), pa.array([], pa.binary())
        lay = Layout.of(table, feed, family)
        opts = lay.opts
        join = pc.binary_join_element_wise
        key_texts = [V.arrow_values(batch.column(c.db), c.type) for c in lay.key]
        keys = join("[", _joined(key_texts, ", "), "]", "")
        value: pa.Array
        if opts.envelope == ENVELOPE_KEY_ONLY:
            value = pa.repeat(pa.scalar("", pa.string()), n)
        else:
            op = batch.column("op")
            erased = pc.equal(op, CHANGE_ERASE)
            members = lay.members()
            texts = {
                m.column.id: V.arrow_values(batch.column(m.column.db), m.column.type)
                for m in members
                if m.column is not None
            }
            stamps = join(
                pc.cast(batch.column("ts"), pa.string()),
                ".",
                pc.utf8_lpad(pc.cast(batch.column("lg"), pa.string()), 10, "0"),
                "",
            )
            meta: list[tuple[str, Any]] = []
            for name in lay.meta_fields():
                if name == "key":
                    meta.append((name, keys))
                elif name == "topic":
                    meta.append((name, V.json_string(lay.topic)))
                else:
                    meta.append((name, join('"', stamps, '"', "")))

            def obj(cols: dict[int, Any], blank: Any = None, of: list[Member] = members) -> Any:
                parts: list[Any] = []
                for m in of:
                    c = m.column
                    text: Any = V.NULL if c is None else cols[c.id]
                    if blank is not None and c is not None and lay.blanks_deletes(c):
                        text = pc.if_else(blank, V.NULL, text)
                    parts.append(join(m.prefix, text, ""))
                return join("{", _joined(parts, ", "), "}", "") if parts else "{}"

            if opts.enriched:
                had = pc.and_(batch.column("ox"), pc.not_equal(op, CHANGE_SNAPSHOT))
                prior = lay.before_members()
                old_texts = (
                    {
                        m.column.id: V.arrow_values(
                            batch.column(m.column.db if m.column.is_key else f"o{m.column.id}"), m.column.type
                        )
                        for m in prior
                        if m.column is not None
                    }
                    if opts.diff
                    else {}
                )
                env = Enriched.of(table, opts)
                key_obj, keys = env.key(ArrowBuild(), key_texts)
                wall = pc.cast(batch.column("ts"), pa.string())
                processed = (
                    pc.cast(batch.column("pt"), pa.string())
                    if "pt" in batch.schema.names
                    else pa.scalar(str(time.time_ns()), pa.string())
                )
                value = env.value(
                    ArrowBuild(),
                    key_obj=key_obj,
                    after=obj(texts),
                    before=obj(old_texts, of=prior) if opts.diff else "null",
                    erased=erased,
                    had=had,
                    hlc=join('"', stamps, '"', ""),
                    wall=wall,
                    processed=processed,
                )
            elif opts.envelope == ENVELOPE_WRAPPED:
                pieces: list[Any] = ['{"after": ', pc.if_else(erased, "null", obj(texts))]
                if lay.diff:
                    had = pc.and_(batch.column("ox"), pc.not_equal(op, CHANGE_SNAPSHOT))
                    prior = lay.before_members()
                    old = {
                        m.column.id: V.arrow_values(
                            batch.column(m.column.db if m.column.is_key else f"o{m.column.id}"),
                            m.column.type,
                        )
                        for m in prior
                        if m.column is not None
                    }
                    pieces += [', "before": ', pc.if_else(had, obj(old, of=prior), "null")]
                for name, col in meta:
                    pieces += [f', "{name}": ', col]
                value = join(*pieces, "}", "")
            else:  # row, deprecated_row, bare
                bare = opts.envelope == ENVELOPE_BARE
                parts: list[Any] = []
                for m in members:
                    c = m.column
                    text = V.NULL if c is None else texts[c.id]
                    if bare and c is not None and lay.blanks_deletes(c):
                        text = pc.if_else(erased, V.NULL, text)
                    parts.append(join(m.prefix, text, ""))
                if meta:
                    inner = [join(f'"{name}": ', col, "") for name, col in meta]
                    parts.insert(
                        _meta_position(members), join('"__crdb__": {', _joined(inner, ", "), "}", "")
                    )
                body = join("{", _joined(parts, ", "), "}", "") if parts else pa.repeat(pa.scalar("{}"), n)
                value = body if bare else pc.if_else(erased, "", body)
        return pc.cast(_array(keys, n), pa.binary()), pc.cast(_array(value, n), pa.binary())

    # ------------------------------------------------------------------ Spark
    def encode_spark(self, df: DataFrame, table: TableSchema, feed: FeedSpec) -> DataFrame:
        from changefeed.formats.ydb_json import session_tz, spark_output

        if feed.query is not None:
            df = apply_spark(feed.query, df, table, diff=options_of(feed).diff)
        tz = session_tz(df)
        memo = (repr(table), repr(feed), tz, tuple(df.columns))  # (specs hold dicts: not hashable)
        built = self._columns.get(memo)
        if built is None:
            # Building the expressions is thousands of py4j calls (~1 s); a job's micro-batches reuse them.
            built = self._columns[memo] = self._spark_columns(df.columns, table, feed, tz)
            while len(self._columns) > 16:
                self._columns.pop(next(iter(self._columns)))
        float_names, key, value = built
        # FLOAT columns' shortest decimal texts, computed once each (see V.with_float_texts)
        return spark_output(V.with_float_texts(df, float_names), key, value, feed.partitions)

    def _spark_columns(
        self, columns: list[str], table: TableSchema, feed: FeedSpec, tz: str
    ) -> tuple[list[str], Column, Column]:
        """(FLOAT columns to take the shortest text of, key, value) as Spark column expressions."""
        from pyspark.sql import functions as F

        lay = Layout.of(table, feed)
        opts = lay.opts
        floats = [c for c in table.stored if c.type.kind is Kind.FLOAT]
        float_names = [c.db for c in floats] + [f"o{c.id}" for c in floats if not c.is_key]
        if feed.query is not None:
            float_names = [f"o{c.id}" for c in floats if not c.is_key and lay.diff]
            float_names += [c.db for c in output_columns(feed.query) if c.type.kind is Kind.FLOAT]
        float_names = [n for n in float_names if n in columns]

        def value_of(name: str, c: ColumnSchema) -> Column:
            text = F.col(V.float_text_column(name)) if c.type.kind is Kind.FLOAT else None
            return V.spark_value(F.col(name), c.type, tz, float_text=text)

        op = F.col("op")
        erased = op == CHANGE_ERASE
        key = F.concat(
            F.lit("["),
            F.concat_ws(", ", *[value_of(c.db, c) for c in lay.key]),
            F.lit("]"),
        )
        if opts.envelope == ENVELOPE_KEY_ONLY:
            return float_names, key, F.lit("")
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
            for i, m in enumerate(lay.before_members() if old else members):
                c = m.column
                parts.append(F.lit(("{" if i == 0 else ", ") + m.prefix))
                if c is None:
                    parts.append(F.lit(V.NULL))
                    continue
                name = f"o{c.id}" if old and not c.is_key else c.db
                text = value_of(name, c)
                if only_key is not None and lay.blanks_deletes(c):
                    text = F.when(only_key, F.lit(V.NULL)).otherwise(text)
                parts.append(text)
            if not parts:
                return [F.lit("{}")]
            return [*parts, F.lit("}")]

        value: Column
        if opts.enriched:
            env = Enriched.of(table, opts)
            build = SparkBuild()
            key_obj, key = env.key(build, [value_of(c.db, c) for c in lay.key])
            wall = F.col("ts").cast("string")
            value = env.value(
                build,
                key_obj=key_obj,
                after=F.concat(*obj()),
                before=F.concat(*obj(old=True)) if opts.diff else "null",
                erased=erased,
                had=F.col("ox") & (op != CHANGE_SNAPSHOT),
                hlc=stamp,
                wall=wall,
                processed=(
                    F.col("pt") if "pt" in columns else F.unix_micros(F.current_timestamp()) * F.lit(1000)
                ).cast("string"),
            )
            return float_names, key, value
        if opts.envelope == ENVELOPE_WRAPPED:
            after = F.when(erased, F.lit("null")).otherwise(F.concat(*obj()))
            pieces = [F.lit('{"after": '), after]
            if lay.diff:
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
        return float_names, key, value

    # ------------------------------------------------------------------ resolved
    def resolved(self, ts: CommitTs, tx: int, feed: FeedSpec) -> bytes:
        return resolved_message(ts, options_of(feed))


# ============================================================================ column families

PRIMARY_FAMILY = "primary"


def family_of(c: ColumnSchema) -> str:
    return c.family or PRIMARY_FAMILY


def families(table: TableSchema) -> list[str]:
    """The table's column families, the primary (first) one first."""
    out: list[str] = []
    for c in table.columns:
        if family_of(c) not in out:
            out.append(family_of(c))
    return out


def family_rows(batch: pa.RecordBatch, table: TableSchema, family: str) -> pa.Array:
    """Which change rows give a message for ``family`` (CockroachDB's split_column_families): a
    delete gives one per family; an insert (or initial-scan row) the primary family, and another
    family when one of its columns is set; an update the families whose columns it wrote."""
    import pyarrow as pa
    import pyarrow.compute as pc

    cols = [c for c in table.stored if not c.is_key and family_of(c) == family]
    op = batch.column("op")
    erased = pc.equal(op, CHANGE_ERASE)
    created = pc.or_(pc.equal(op, CHANGE_SNAPSHOT), pc.invert(batch.column("ox")))
    false = pa.repeat(pa.scalar(False), batch.num_rows)
    if family == families(table)[0]:
        on_create: Any = pa.repeat(pa.scalar(True), batch.num_rows)
    else:
        on_create = false
        for c in cols:
            on_create = pc.or_(on_create, pc.is_valid(batch.column(c.db)))
    written: Any = false
    for c in cols:
        written = pc.or_(written, pc.fill_null(batch.column(f"u{c.id}"), False))
    return pc.or_(erased, pc.if_else(created, on_create, written))


def _joined(parts: list[Any], sep: str) -> Any:
    """Element-wise join of string arrays (or scalars) with ``sep`` between them."""
    import pyarrow.compute as pc

    if len(parts) == 1:
        return parts[0]
    return pc.binary_join_element_wise(*parts, sep)


def _array(x: Any, n: int) -> Any:
    """``x`` as an Arrow array of ``n`` rows (a scalar string is repeated)."""
    import pyarrow as pa

    if isinstance(x, str):
        return pa.repeat(pa.scalar(x, pa.string()), n)
    return x


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


__all__ = [
    "PRIMARY_FAMILY",
    "CrdbJsonEncoder",
    "Layout",
    "Member",
    "families",
    "family_of",
    "family_rows",
    "hlc",
    "options_of",
    "resolved_message",
    "topic_of",
]
