"""The system tables drivers, cqlsh and ScyllaDB's CDC libraries read, as ScyllaDB lays them out.

``system.local`` presents this store as a one-node cluster (one data center, one rack) that owns
the tokens of ``engine.cdc_streams`` under Murmur3Partitioner's name, so drivers build a token map
and token-aware routing sends everything here; ``system.peers`` is empty. ``system_schema.*``
describes every keyspace and table that CQL can address (tables named ``ks.t``), and each CDC
log table with ScyllaDB's log columns, so drivers' metadata, cqlsh's DESCRIBE and the CDC
libraries' ``TableMetadata`` work. ``system_distributed.cdc_generation_timestamps`` and
``cdc_streams_descriptions_v2`` publish the generation and its streams per vnode.

Each table is a :class:`~changefeed.sql.statements.select.Relation`, so WHERE, projections,
``count(*)`` and LIMIT work on it as on any table.
"""

from __future__ import annotations

import datetime as dt
import uuid
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from changefeed.engine.catalog import Role, TableSchema
from changefeed.engine.cdc_streams import TOKENS, generation, generation_at
from changefeed.engine.txn import Transaction
from changefeed.server.cql.types import CqlType, of_sql, parse
from changefeed.sql.session import Session
from changefeed.sql.statements.cdc_log import META_COLUMNS
from changefeed.sql.statements.common import LOG_SUFFIX
from changefeed.sql.statements.select import VIRTUAL_RELATIONS, Relation

#: What this node reports as its ScyllaDB version (``system.versions``) and Cassandra version.
SCYLLA_VERSION = "6.2.0"
RELEASE_VERSION = "3.0.8"
CQL_VERSION = "3.3.1"
CLUSTER_NAME = "changefeed"
DATA_CENTER = "datacenter1"
RACK = "rack1"
HOST_ID = uuid.UUID("6c6e7fd4-7c41-4bd4-9f4c-8bde2fbb04d1")
PARTITIONER = "org.apache.cassandra.dht.Murmur3Partitioner"
SYSTEM_KEYSPACES = ("system", "system_schema", "system_distributed", "system_auth", "system_traces")


@dataclass(frozen=True, slots=True)
class Node:
    """Where the session's endpoint listens (what ``system.local`` reports)."""

    address: str = "127.0.0.1"
    port: int = 9042


#: The node of each CQL endpoint session (sessions opened elsewhere see the default node).
NODES: weakref.WeakKeyDictionary[Session, Node] = weakref.WeakKeyDictionary()


@dataclass(frozen=True, slots=True)
class VirtualTable:
    keyspace: str
    name: str
    columns: tuple[tuple[str, str], ...]  # (name, CQL type)
    partition_key: tuple[str, ...]
    clustering: tuple[str, ...] = ()
    desc: frozenset[str] = field(default_factory=frozenset)
    rows: Callable[[Session, Transaction], Iterable[dict[str, Any]]] = lambda s, t: ()

    @property
    def qualified(self) -> str:
        return f"{self.keyspace}.{self.name}"


_OPTIONS = (
    ("bloom_filter_fp_chance", "double"),
    ("caching", "frozen<map<text, text>>"),
    ("comment", "text"),
    ("compaction", "frozen<map<text, text>>"),
    ("compression", "frozen<map<text, text>>"),
    ("crc_check_chance", "double"),
    ("dclocal_read_repair_chance", "double"),
    ("default_time_to_live", "int"),
    ("extensions", "frozen<map<text, blob>>"),
    ("gc_grace_seconds", "int"),
    ("max_index_interval", "int"),
    ("memtable_flush_period_in_ms", "int"),
    ("min_index_interval", "int"),
    ("read_repair_chance", "double"),
    ("speculative_retry", "text"),
)
_OPTION_VALUES: dict[str, Any] = {
    "bloom_filter_fp_chance": 0.01,
    "caching": {"keys": "ALL", "rows_per_partition": "ALL"},
    "comment": "",
    "compaction": {"class": "SizeTieredCompactionStrategy"},
    "compression": {"sstable_compression": "org.apache.cassandra.io.compress.LZ4Compressor"},
    "crc_check_chance": 1.0,
    "dclocal_read_repair_chance": 0.0,
    "default_time_to_live": 0,
    "extensions": {},
    "gc_grace_seconds": 864000,
    "max_index_interval": 2048,
    "memtable_flush_period_in_ms": 0,
    "min_index_interval": 128,
    "read_repair_chance": 0.0,
    "speculative_retry": "99.0PERCENTILE",
}


# ====================================================================== described tables
@dataclass(frozen=True, slots=True)
class Described:
    """A table as ``system_schema`` shows it: keyspace, name, columns with kinds and types."""

    keyspace: str
    name: str
    columns: tuple[tuple[str, str, str, int, str], ...]  # (name, kind, type, position, clustering order)
    id: uuid.UUID
    cdc: dict[str, str] | None = None


def _table_uuid(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_URL, f"changefeed:table:{name}")


def describe_table(schema: TableSchema) -> Described | None:
    if "." not in schema.name:
        return None
    ks, name = schema.name.split(".", 1)
    cols: list[tuple[str, str, str, int, str]] = []
    for i, c in enumerate(schema.partition_key):
        cols.append((c.name, "partition_key", str(of_sql(c.type)), i, "none"))
    for i, c in enumerate(schema.clustering_key):
        cols.append((c.name, "clustering", str(of_sql(c.type)), i, "desc" if c.descending else "asc"))
    for c in schema.columns:
        if not c.is_key and not c.virtual:
            kind = "static" if c.role is Role.STATIC else "regular"
            cols.append((c.name, kind, str(of_sql(c.type)), -1, "none"))
    cdc = None
    if schema.cdc.enabled:
        o = schema.cdc
        cdc = {
            "enabled": "true",
            "preimage": o.preimage,
            "postimage": str(o.postimage).lower(),
            "delta": o.delta,
            "ttl": str(o.ttl),
        }
    return Described(ks, name, tuple(cols), _table_uuid(schema.name), cdc)


def describe_log(schema: TableSchema) -> Described | None:
    if "." not in schema.name or not schema.cdc.enabled:
        return None
    ks, name = schema.name.split(".", 1)
    kinds = {
        "cdc$stream_id": ("partition_key", 0),
        "cdc$time": ("clustering", 0),
        "cdc$batch_seq_no": ("clustering", 1),
    }
    cols: list[tuple[str, str, str, int, str]] = []
    for n, t in META_COLUMNS:
        kind, pos = kinds.get(n, ("regular", -1))
        cols.append((n, kind, t, pos, "asc" if kind == "clustering" else "none"))
    stored = [c for c in schema.columns if not c.virtual]
    for c in stored:
        cols.append((c.name, "regular", str(of_sql(c.type)), -1, "none"))
    for c in stored:
        if not c.is_key:
            cols.append((f"cdc$deleted_{c.name}", "regular", "boolean", -1, "none"))
    return Described(ks, name + LOG_SUFFIX, tuple(cols), _table_uuid(schema.name + LOG_SUFFIX))


def _virtual_described(v: VirtualTable) -> Described:
    cols: list[tuple[str, str, str, int, str]] = []
    for n, t in v.columns:
        if n in v.partition_key:
            cols.append((n, "partition_key", t, v.partition_key.index(n), "none"))
        elif n in v.clustering:
            cols.append((n, "clustering", t, v.clustering.index(n), "desc" if n in v.desc else "asc"))
        else:
            cols.append((n, "regular", t, -1, "none"))
    return Described(v.keyspace, v.name, tuple(cols), _table_uuid(v.qualified))


def user_tables(session: Session) -> list[Described]:
    out: list[Described] = []
    for schema in session.db.tables():
        for d in (describe_table(schema), describe_log(schema)):
            if d is not None:
                out.append(d)
    return out


def all_tables(session: Session) -> list[Described]:
    return [_virtual_described(v) for v in TABLES.values()] + user_tables(session)


def keyspaces(session: Session) -> list[str]:
    names = set(session.db.keyspaces)
    names.update(d.keyspace for d in user_tables(session))
    return sorted(names)


def schema_version(session: Session) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_URL, f"changefeed:schema:{session.db.catalog_version}")


# ====================================================================== rows
def _node(session: Session) -> Node:
    return NODES.get(session) or Node()


def _local(session: Session, txn: Transaction) -> Iterable[dict[str, Any]]:
    node = _node(session)
    addr = node.address if node.address not in ("0.0.0.0", "::", "") else "127.0.0.1"
    yield {
        "key": "local",
        "bootstrapped": "COMPLETED",
        "broadcast_address": addr,
        "cluster_name": CLUSTER_NAME,
        "cql_version": CQL_VERSION,
        "data_center": DATA_CENTER,
        "gossip_generation": 1,
        "host_id": HOST_ID,
        "listen_address": addr,
        "native_protocol_version": "4",
        "partitioner": PARTITIONER,
        "rack": RACK,
        "release_version": RELEASE_VERSION,
        "rpc_address": addr,
        "rpc_port": node.port,
        "schema_version": schema_version(session),
        "supported_features": "CDC,CDC_GENERATIONS_V2,UNBOUNDED_RANGE_TOMBSTONES",
        "tokens": {str(t) for t in TOKENS},
    }


def _versions(session: Session, txn: Transaction) -> Iterable[dict[str, Any]]:
    yield {"key": "local", "version": SCYLLA_VERSION, "build_mode": "release", "build_id": "changefeed"}


def _keyspaces(session: Session, txn: Transaction) -> Iterable[dict[str, Any]]:
    for ks in SYSTEM_KEYSPACES:
        yield {
            "keyspace_name": ks,
            "durable_writes": True,
            "replication": {"class": "org.apache.cassandra.locator.LocalStrategy"},
        }
    for ks in keyspaces(session):
        if ks in SYSTEM_KEYSPACES:
            continue
        yield {
            "keyspace_name": ks,
            "durable_writes": True,
            "replication": {
                "class": "org.apache.cassandra.locator.SimpleStrategy",
                "replication_factor": "1",
            },
        }


def _tables(session: Session, txn: Transaction) -> Iterable[dict[str, Any]]:
    for d in all_tables(session):
        row = {"keyspace_name": d.keyspace, "table_name": d.name, "id": d.id, "flags": {"compound"}}
        row.update(_OPTION_VALUES)
        if d.cdc is not None:
            row["extensions"] = {"cdc": cdc_extension(d.cdc)}
        yield row


def cdc_extension(options: dict[str, str]) -> bytes:
    """ScyllaDB's serialised ``cdc`` schema extension: a map of strings, little-endian lengths."""
    out = [len(options).to_bytes(4, "little")]
    for k, v in options.items():
        for text in (k, v):
            b = text.encode()
            out.append(len(b).to_bytes(4, "little") + b)
    return b"".join(out)


def _scylla_tables(session: Session, txn: Transaction) -> Iterable[dict[str, Any]]:
    for d in all_tables(session):
        yield {
            "keyspace_name": d.keyspace,
            "table_name": d.name,
            "version": d.id,
            "cdc": d.cdc,
            "partitioner": "com.scylladb.dht.CDCPartitioner" if d.name.endswith(LOG_SUFFIX) else None,
            "in_memory": False,
        }


def _columns(session: Session, txn: Transaction) -> Iterable[dict[str, Any]]:
    for d in all_tables(session):
        for name, kind, t, pos, order in d.columns:
            yield {
                "keyspace_name": d.keyspace,
                "table_name": d.name,
                "column_name": name,
                "clustering_order": order,
                "column_name_bytes": name.encode(),
                "kind": kind,
                "position": pos,
                "type": t,
            }


def _generation_ts(session: Session, txn: Transaction) -> Iterable[dict[str, Any]]:
    gen = generation(txn.conn) or generation_at(0)
    yield {"key": "timestamps", "time": _ms(gen.time_ms), "expired": None}


def _streams_v2(session: Session, txn: Transaction) -> Iterable[dict[str, Any]]:
    gen = generation(txn.conn) or generation_at(0)
    for i, end in enumerate(TOKENS):
        yield {"time": _ms(gen.time_ms), "range_end": end, "streams": {gen.streams[i]}, "ignore_msb": 0}


def _ms(ms: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=ms)


def _vt(
    ks: str,
    name: str,
    columns: Iterable[tuple[str, str]],
    pk: tuple[str, ...],
    ck: tuple[str, ...] = (),
    rows: Callable[[Session, Transaction], Iterable[dict[str, Any]]] = lambda s, t: (),
    desc: Iterable[str] = (),
) -> VirtualTable:
    return VirtualTable(ks, name, tuple(columns), pk, ck, frozenset(desc), rows)


_T = "text"
_PEER_COLUMNS = (
    ("peer", "inet"),
    ("data_center", _T),
    ("host_id", "uuid"),
    ("preferred_ip", "inet"),
    ("rack", _T),
    ("release_version", _T),
    ("rpc_address", "inet"),
    ("schema_version", "uuid"),
    ("supported_features", _T),
    ("tokens", "set<text>"),
)
_LIST_T = "frozen<list<text>>"

TABLES: dict[str, VirtualTable] = {
    v.qualified: v
    for v in (
        _vt(
            "system",
            "local",
            (
                ("key", _T),
                ("bootstrapped", _T),
                ("broadcast_address", "inet"),
                ("cluster_name", _T),
                ("cql_version", _T),
                ("data_center", _T),
                ("gossip_generation", "int"),
                ("host_id", "uuid"),
                ("listen_address", "inet"),
                ("native_protocol_version", _T),
                ("partitioner", _T),
                ("rack", _T),
                ("release_version", _T),
                ("rpc_address", "inet"),
                ("rpc_port", "int"),
                ("schema_version", "uuid"),
                ("supported_features", _T),
                ("tokens", "set<text>"),
            ),
            ("key",),
            rows=_local,
        ),
        _vt("system", "peers", _PEER_COLUMNS, ("peer",)),
        _vt(
            "system",
            "versions",
            (("key", _T), ("build_id", _T), ("build_mode", _T), ("version", _T)),
            ("key",),
            rows=_versions,
        ),
        _vt(
            "system_schema",
            "keyspaces",
            (
                ("keyspace_name", _T),
                ("durable_writes", "boolean"),
                ("replication", "frozen<map<text, text>>"),
            ),
            ("keyspace_name",),
            rows=_keyspaces,
        ),
        _vt(
            "system_schema",
            "tables",
            (
                ("keyspace_name", _T),
                ("table_name", _T),
                *_OPTIONS,
                ("flags", "frozen<set<text>>"),
                ("id", "uuid"),
            ),
            ("keyspace_name",),
            ("table_name",),
            rows=_tables,
        ),
        _vt(
            "system_schema",
            "scylla_tables",
            (
                ("keyspace_name", _T),
                ("table_name", _T),
                ("cdc", "frozen<map<text, text>>"),
                ("in_memory", "boolean"),
                ("partitioner", _T),
                ("version", "uuid"),
            ),
            ("keyspace_name",),
            ("table_name",),
            rows=_scylla_tables,
        ),
        _vt(
            "system_schema",
            "columns",
            (
                ("keyspace_name", _T),
                ("table_name", _T),
                ("column_name", _T),
                ("clustering_order", _T),
                ("column_name_bytes", "blob"),
                ("kind", _T),
                ("position", "int"),
                ("type", _T),
            ),
            ("keyspace_name",),
            ("table_name", "column_name"),
            rows=_columns,
        ),
        _vt(
            "system_schema",
            "dropped_columns",
            (
                ("keyspace_name", _T),
                ("table_name", _T),
                ("column_name", _T),
                ("dropped_time", "timestamp"),
                ("type", _T),
            ),
            ("keyspace_name",),
            ("table_name", "column_name"),
        ),
        _vt(
            "system_schema",
            "triggers",
            (
                ("keyspace_name", _T),
                ("table_name", _T),
                ("trigger_name", _T),
                ("options", "frozen<map<text, text>>"),
            ),
            ("keyspace_name",),
            ("table_name", "trigger_name"),
        ),
        _vt(
            "system_schema",
            "views",
            (
                ("keyspace_name", _T),
                ("view_name", _T),
                ("base_table_id", "uuid"),
                ("base_table_name", _T),
                *_OPTIONS,
                ("id", "uuid"),
                ("include_all_columns", "boolean"),
                ("where_clause", _T),
            ),
            ("keyspace_name",),
            ("view_name",),
        ),
        _vt(
            "system_schema",
            "types",
            (("keyspace_name", _T), ("type_name", _T), ("field_names", _LIST_T), ("field_types", _LIST_T)),
            ("keyspace_name",),
            ("type_name",),
        ),
        _vt(
            "system_schema",
            "functions",
            (
                ("keyspace_name", _T),
                ("function_name", _T),
                ("argument_types", _LIST_T),
                ("argument_names", _LIST_T),
                ("body", _T),
                ("called_on_null_input", "boolean"),
                ("language", _T),
                ("return_type", _T),
            ),
            ("keyspace_name",),
            ("function_name", "argument_types"),
        ),
        _vt(
            "system_schema",
            "aggregates",
            (
                ("keyspace_name", _T),
                ("aggregate_name", _T),
                ("argument_types", _LIST_T),
                ("final_func", _T),
                ("initcond", _T),
                ("return_type", _T),
                ("state_func", _T),
                ("state_type", _T),
            ),
            ("keyspace_name",),
            ("aggregate_name", "argument_types"),
        ),
        _vt(
            "system_schema",
            "indexes",
            (
                ("keyspace_name", _T),
                ("table_name", _T),
                ("index_name", _T),
                ("kind", _T),
                ("options", "frozen<map<text, text>>"),
            ),
            ("keyspace_name",),
            ("table_name", "index_name"),
        ),
        _vt(
            "system_schema",
            "scylla_keyspaces",
            (
                ("keyspace_name", _T),
                ("consistency", _T),
                ("initial_tablets", "int"),
                ("storage_options", "frozen<map<text, text>>"),
                ("storage_type", _T),
            ),
            ("keyspace_name",),
        ),
        _vt(
            "system_distributed",
            "cdc_generation_timestamps",
            (("key", _T), ("time", "timestamp"), ("expired", "timestamp")),
            ("key",),
            ("time",),
            rows=_generation_ts,
            desc=("time",),
        ),
        _vt(
            "system_distributed",
            "cdc_streams_descriptions_v2",
            (
                ("time", "timestamp"),
                ("range_end", "bigint"),
                ("ignore_msb", "tinyint"),
                ("streams", "frozen<set<blob>>"),
            ),
            ("time",),
            ("range_end",),
            rows=_streams_v2,
        ),
    )
}

#: CQL types of each virtual table's columns, for the result metadata.
TYPES: dict[str, dict[str, CqlType]] = {
    name: {c: parse(t) for c, t in v.columns} for name, v in TABLES.items()
}


def virtual_table(session: Session, name: str) -> VirtualTable | None:
    if session.dialect != "cql":
        return None
    return TABLES.get(name) or TABLES.get(name.lower())


def _relation(session: Session, txn: Transaction, name: str) -> Relation | None:
    v = virtual_table(session, name)
    if v is None:
        return None
    names = [c for c, _ in v.columns]
    star = (
        list(v.partition_key)
        + list(v.clustering)
        + sorted(n for n in names if n not in v.partition_key and n not in v.clustering)
    )

    def rows(_: Any) -> Iterable[tuple[Any, ...]]:
        for r in v.rows(session, txn):
            yield tuple(r.get(n) for n in names)

    return Relation(v.qualified, names, [None] * len(names), rows, [], star)


VIRTUAL_RELATIONS.append(_relation)
