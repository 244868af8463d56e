"""CockroachDB's ``enriched`` envelope (v25.2+), in JSON: ``op``, ``ts_ns``, the key as an object,
``source`` and the Kafka Connect ``schema``/``payload`` wrapping (``enriched_properties``).

A value, keys sorted as CockroachDB prints JSON::

    {"after": {..}|null, "before": {..}|null (diff), "key": {"id": 1} (key_in_value),
     "op": "c"|"u"|"d", "source": {..} (enriched_properties=source), "ts_ns": <ns>}

and with ``enriched_properties=schema`` that object is the ``payload`` of
``{"payload": .., "schema": {"fields": [..], "name": "cockroachdb.envelope", ..}}``; the message
key is then ``{"payload": {"id": 1}, "schema": {.. "name": "<table>.key" ..}}``, else just the
key object. ``op`` is ``c`` for an insert (and an initial-scan row), ``u`` for an update, ``d``
for a delete. ``ts_ns`` is when the changefeed processed the event (the encoding time: the
batch's on the Python face, the micro-batch's ``current_timestamp()`` on Spark; a ``pt``
column of the batch overrides it, as the faces' equality tests do); the commit time is
``source.ts_ns``/``ts_hlc`` with ``updated``, and ``source.mvcc_timestamp`` with
``mvcc_timestamp`` (not top-level fields).

The ``source`` block holds what applies to a single node: ``changefeed_sink`` (``kafka`` for the
embedded topics and Kafka, ``webhook``, ``sinkless buffer``), ``cluster_id`` (this database's),
``cluster_name`` (empty), ``database_name``, ``db_version`` (this product's version),
``job_id`` (``0`` for a sinkless changefeed), ``node_id`` (``1``), ``node_name``
(``localhost``), ``origin`` (``cockroachdb``), ``primary_keys``, ``schema_name`` (``public``),
``source_node_locality`` (empty), ``table_name``. Its Kafka Connect schema lists the fields in
alphabetical order (CockroachDB's follows a Go map, so it varies from one run to the next).

Types in the Kafka Connect schema (CockroachDB's ``kcjsonschema``): INT ``int64``, FLOAT
``float64``, BOOL ``boolean``, DECIMAL ``float64`` named ``decimal`` with its precision and
scale, DATE/TIME/TIMESTAMP ``string`` named ``date``/``time``/``timestamp``, BYTES ``bytes``,
JSONB ``json``, arrays ``array`` with ``items``, everything else ``string``.

Both faces assemble the same pieces through :class:`Build`, an Arrow one and a Spark one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Protocol

from changefeed.engine import json_doc
from changefeed.engine.catalog import ColumnSchema, TableSchema
from changefeed.engine.types import Kind, SqlType
from changefeed.feeds.crdb_options import CrdbOptions
from changefeed.formats import crdb_values as V

NODE_ID = "1"
NODE_NAME = "localhost"
ORIGIN = "cockroachdb"
SCHEMA_NAME = "public"
DEFAULT_DATABASE = "defaultdb"


def db_version() -> str:
    """``source.db_version``: this product and its version."""
    try:
        return f"changefeed v{metadata.version('changefeed')}"
    except metadata.PackageNotFoundError:
        return "changefeed"


def database_of(table: TableSchema) -> str:
    return table.name.rsplit(".", 1)[0] if "." in table.name else DEFAULT_DATABASE


# ============================================================================ Kafka Connect schemas


def connect_type(t: SqlType) -> dict[str, Any]:
    """The Kafka Connect schema of a column type (without ``field``/``optional``)."""
    k = t.kind
    if k in (Kind.INT, Kind.UINT, Kind.VARINT):
        return {"type": "int64"}
    if k is Kind.BOOL:
        return {"type": "boolean"}
    if k is Kind.FLOAT:
        return {"type": "float64"}
    if k is Kind.DECIMAL:
        return {
            "name": "decimal",
            "parameters": {"precision": str(t.precision or 0), "scale": str(t.scale or 0)},
            "type": "float64",
        }
    if k is Kind.BYTES:
        return {"type": "bytes"}
    if k is Kind.DATE:
        return {"name": "date", "type": "string"}
    if k is Kind.TIME:
        return {"name": "time", "type": "string"}
    if k in (Kind.TIMESTAMP, Kind.DATETIME):
        return {"name": "timestamp", "type": "string"}
    if k is Kind.JSON:
        return {"type": "json"}
    if k is Kind.ARRAY and t.element is not None:
        return {"items": {**connect_type(t.element), "optional": True}, "type": "array"}
    return {"type": "string"}


def _field(name: str, schema: dict[str, Any], optional: bool) -> dict[str, Any]:
    return {"field": name, **schema, "optional": optional}


def _struct(
    name: str, fields: list[dict[str, Any]], optional: bool, field: str | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {"fields": fields, "name": name, "optional": optional, "type": "struct"}
    if field is not None:
        out["field"] = field
    return out


def _nullable(c: ColumnSchema) -> bool:
    return not (c.not_null or c.is_key)


def row_schema(table: TableSchema, name: str, optional: bool, field: str) -> dict[str, Any]:
    cols = [c for c in table.columns if not c.virtual]
    fields = [_field(c.name, connect_type(c.type), _nullable(c)) for c in cols]
    return _struct(name, fields, optional, field)


#: The source block's fields and whether each may be absent.
SOURCE_FIELDS: tuple[tuple[str, dict[str, Any], bool], ...] = tuple(
    sorted(
        [
            ("changefeed_sink", {"type": "string"}, False),
            ("cluster_id", {"type": "string"}, False),
            ("cluster_name", {"type": "string"}, False),
            ("database_name", {"type": "string"}, False),
            ("db_version", {"type": "string"}, False),
            ("job_id", {"type": "string"}, False),
            ("mvcc_timestamp", {"type": "string"}, True),
            ("node_id", {"type": "string"}, False),
            ("node_name", {"type": "string"}, False),
            ("origin", {"type": "string"}, False),
            ("primary_keys", {"items": {"optional": False, "type": "string"}, "type": "array"}, False),
            ("schema_name", {"type": "string"}, False),
            ("source_node_locality", {"type": "string"}, False),
            ("table_name", {"type": "string"}, False),
            ("ts_hlc", {"type": "string"}, True),
            ("ts_ns", {"type": "int64"}, True),
        ]
    )
)


def source_schema() -> dict[str, Any]:
    return _struct("cockroachdb.source", [_field(n, s, o) for n, s, o in SOURCE_FIELDS], True, "source")


def key_schema(table: TableSchema) -> dict[str, Any]:
    fields = [_field(c.name, connect_type(c.type), False) for c in table.key]
    return _struct(f"{table.short_name}.key", fields, False)


def envelope_schema(table: TableSchema, opts: CrdbOptions) -> dict[str, Any]:
    fields: list[dict[str, Any]] = []
    if opts.diff:
        fields.append(row_schema(table, f"{table.short_name}.before.value", True, "before"))
    fields.append(row_schema(table, f"{table.short_name}.after.value", False, "after"))
    if opts.enriched_source:
        fields.append(source_schema())
    if opts.key_in_value:
        fields.append({**key_schema(table), "field": "key"})
    fields.append({"field": "ts_ns", "optional": False, "type": "int64"})
    fields.append({"field": "op", "optional": False, "type": "string"})
    return _struct("cockroachdb.envelope", fields, False)


def json_text(v: Any) -> str:
    """A JSON document printed as CockroachDB prints it (keys sorted, ``", "``/``": "``)."""
    return V.json_document(json_doc.loads(json_doc.dumps(v)))


# ============================================================================ assembly


class Build(Protocol):
    """String assembly over one face's values: Arrow arrays/scalars or Spark columns."""

    def cat(self, *parts: Any) -> Any: ...

    def when(self, cond: Any, then: Any, otherwise: Any) -> Any: ...


@dataclass(frozen=True, slots=True)
class Enriched:
    """The fixed parts of one table's enriched messages."""

    table: TableSchema
    opts: CrdbOptions
    key_schema: str
    envelope_schema: str
    source_head: str  # '{"changefeed_sink": .. "job_id": ".."'
    source_tail: str  # ', "node_id": .. "table_name": ".."'

    @staticmethod
    def of(table: TableSchema, opts: CrdbOptions) -> Enriched:
        def member(name: str, value: Any) -> str:
            return f"{V.json_string(name)}: {json_text(value)}"

        head = [
            member("changefeed_sink", opts.sink_kind),
            member("cluster_id", opts.cluster_id),
            member("cluster_name", ""),
            member("database_name", database_of(table)),
            member("db_version", db_version()),
            member("job_id", str(opts.job_id)),
        ]
        tail = [
            member("node_id", NODE_ID),
            member("node_name", NODE_NAME),
            member("origin", ORIGIN),
            member("primary_keys", [c.name for c in table.key]),
            member("schema_name", SCHEMA_NAME),
            member("source_node_locality", ""),
            member("table_name", table.short_name),
        ]
        return Enriched(
            table=table,
            opts=opts,
            key_schema=json_text(key_schema(table)),
            envelope_schema=json_text(envelope_schema(table, opts)),
            source_head="{" + ", ".join(head),
            source_tail=", " + ", ".join(tail),
        )

    def key(self, b: Build, key_texts: Sequence[Any]) -> tuple[Any, Any]:
        """(the key object, the message key)."""
        parts: list[Any] = ["{"]
        cols = sorted(zip(self.table.key, key_texts, strict=True), key=lambda p: p[0].name.encode())
        for i, (c, text) in enumerate(cols):
            parts += [("" if i == 0 else ", ") + V.json_string(c.name) + ": ", text]
        parts.append("}")
        obj = b.cat(*parts)
        if not self.opts.enriched_schema:
            return obj, obj
        return obj, b.cat('{"payload": ', obj, ', "schema": ' + self.key_schema + "}")

    def value(
        self,
        b: Build,
        *,
        key_obj: Any,
        after: Any,
        before: Any,
        erased: Any,
        had: Any,
        hlc: Any,
        wall: Any,
        processed: Any,
    ) -> Any:
        """The message value. ``after``/``before`` the row objects (``before`` null without a
        previous row), ``erased`` a delete, ``had`` a previous row (an update), ``hlc`` the
        commit time's HLC text (quoted), ``wall`` its nanoseconds, ``processed`` ``ts_ns``."""
        o = self.opts
        parts: list[Any] = ['{"after": ', b.when(erased, "null", after)]
        if o.diff:
            parts += [', "before": ', b.when(had, before, "null")]
        if o.key_in_value:
            parts += [', "key": ', key_obj]
        parts += [', "op": ', b.when(erased, '"d"', b.when(had, '"u"', '"c"'))]
        if o.enriched_source:
            parts += [', "source": ', self.source_head]
            if o.mvcc_timestamp:
                parts += [', "mvcc_timestamp": ', hlc]
            parts.append(self.source_tail)
            if o.updated:
                parts += [', "ts_hlc": ', hlc, ', "ts_ns": ', wall]
            parts.append("}")
        parts += [', "ts_ns": ', processed, "}"]
        payload = b.cat(*parts)
        if not o.enriched_schema:
            return payload
        return b.cat('{"payload": ', payload, ', "schema": ' + self.envelope_schema + "}")


class ArrowBuild:
    """:class:`Build` over Arrow arrays (``str`` pieces broadcast)."""

    def cat(self, *parts: Any) -> Any:
        import pyarrow.compute as pc

        return pc.binary_join_element_wise(*parts, "")

    def when(self, cond: Any, then: Any, otherwise: Any) -> Any:
        import pyarrow.compute as pc

        return pc.if_else(cond, then, otherwise)


class SparkBuild:
    """:class:`Build` over Spark columns (``str`` pieces as literals)."""

    @staticmethod
    def _col(x: Any) -> Any:
        from pyspark.sql import functions as F

        return F.lit(x) if isinstance(x, str) else x

    def cat(self, *parts: Any) -> Any:
        from pyspark.sql import functions as F

        return F.concat(*[self._col(p) for p in parts])

    def when(self, cond: Any, then: Any, otherwise: Any) -> Any:
        from pyspark.sql import functions as F

        return F.when(cond, self._col(then)).otherwise(self._col(otherwise))


__all__ = [
    "SOURCE_FIELDS",
    "ArrowBuild",
    "Build",
    "Enriched",
    "SparkBuild",
    "connect_type",
    "database_of",
    "db_version",
    "envelope_schema",
    "key_schema",
    "source_schema",
]
