"""Apache Phoenix CDC in the engine: table properties, CDC objects, the time index, max lookback.

Phoenix builds CDC from two things (the PHOENIX-7001 design): history kept for the table's *max
lookback* age, and an uncovered global index on the change time. Here the history is the table's
change stream ``x<id>`` (one row per transaction and key, with the old image, the new image and
the columns written: exactly what a Phoenix event needs), and the time index is ``p<id>``:

    p<id> (b bucket, ms PHOENIX_ROW_TIMESTAMP() in ms, <key columns>, seq -> x<id>.seq, ev kind)
    PRIMARY KEY (b, ms, <key columns>, seq)

written at commit in the same SQLite transaction as the data and the change rows (capture once,
at commit), for the changes Phoenix reports: an upsert that wrote a non-key column, and the
delete of a row that existed. A time range is one index range scan per bucket, joined to the
change stream by ``seq``.

Buckets: Phoenix 5.3 partitions its CDC index by *data table region* (``PARTITION_ID()``, the
region's encoded name, leads the index key), so one row's changes are in one partition, in time
order. Here the regions of a table are its salt buckets (Phoenix ``SALT_BUCKETS`` on CREATE TABLE)
or its partitions (YDB ``UNIFORM_PARTITIONS``), fixed when the CDC is created; a key's region is a
hash of its key values (``region_of``, registered in SQLite as ``cf_region``). The design's
``SALT_BUCKETS`` on CREATE CDC further spreads each region's rows over that many buckets (by change
sequence). Bucket ``b = region * salt + seq % salt``; a region is buckets ``[region * salt,
(region + 1) * salt)``, and readers merge buckets back into (time, key) order.

What is Phoenix about a table lives in ``TableSchema.options["phoenix"]`` (see
:class:`PhoenixTable`), so it travels with the catalog and needs no table of its own.
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from changefeed.engine.catalog import ColumnSchema, TableSchema
from changefeed.engine.database import Database
from changefeed.engine.regions import region_of, register_functions
from changefeed.engine.storage import CHANGE_ERASE, CHANGE_UPSERT

NS_PER_MS = 1_000_000
#: Default max lookback when neither the table nor the database sets one. Phoenix's cluster
#: default is 0 (disabled), which keeps no history for CDC to read; a day is kept here instead.
DEFAULT_MAX_LOOKBACK_S = 86_400
#: ``_meta`` key of the database-level default (Phoenix's cluster setting, in seconds).
META_MAX_LOOKBACK = "phoenix.max.lookback.age.seconds"
#: Index row kinds.
EV_CHANGE = 0
EV_TTL_DELETE = 1


@dataclass(frozen=True, slots=True)
class CdcObject:
    """One ``CREATE CDC name ON t [INCLUDE (..)] [SALT_BUCKETS = n]``."""

    name: str
    include: tuple[str, ...] = ()  # sorted scope words, () when no INCLUDE
    salt_buckets: int = 0  # 0: unsalted (one bucket per region)
    created_ms: int = 0
    #: The data table's regions (salt buckets or partitions) when the CDC was created: Phoenix
    #: 5.3's partitions (``PARTITION_ID()``).
    regions: int = 1

    @property
    def salt(self) -> int:
        """Index buckets per region (the design's ``SALT_BUCKETS`` on CREATE CDC)."""
        return max(1, self.salt_buckets)

    @property
    def buckets(self) -> int:
        """Index buckets in all: ``regions * salt``."""
        return max(1, self.regions) * self.salt

    def region_buckets(self, region: int) -> list[int]:
        return list(range(region * self.salt, (region + 1) * self.salt))

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "include": list(self.include),
            "salt_buckets": self.salt_buckets,
            "created_ms": self.created_ms,
            "regions": self.regions,
        }

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> CdcObject:
        return CdcObject(
            d["name"],
            tuple(d.get("include", ())),
            int(d.get("salt_buckets", 0)),
            int(d.get("created_ms", 0)),
            int(d.get("regions", 1)),
        )


#: ``SYSTEM.CDC_STREAM_STATUS.STREAM_STATUS`` values (``CDCUtil.CdcStreamStatus``).
STREAM_ENABLED = "ENABLED"
STREAM_ENABLING = "ENABLING"
STREAM_DISABLED = "DISABLED"
STREAM_DISABLING = "DISABLING"
#: ``CDCUtil.CDC_STREAM_NAME_FORMAT``: table, CDC name, CDC index timestamp, its UTC date-time.
STREAM_NAME_FORMAT = "phoenix/cdc/stream/{table}/{cdc}/{ms}/{utc}"


@dataclass(frozen=True, slots=True)
class Stream:
    """A CDC stream of a table (``SYSTEM.CDC_STREAM_STATUS``): made by CREATE CDC, DISABLED by
    DROP CDC, forgotten with the table. Its partitions (``SYSTEM.CDC_STREAM``) are the table's
    regions when the CDC was made, all opened at ``created_ms`` and never split."""

    name: str
    status: str
    regions: int
    created_ms: int

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "regions": self.regions,
            "created_ms": self.created_ms,
        }

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> Stream:
        return Stream(d["name"], d["status"], int(d["regions"]), int(d["created_ms"]))


def stream_name(table: str, cdc: str, created_ms: int) -> str:
    import datetime as dt

    utc = (
        dt.datetime.fromtimestamp(created_ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.")
        + f"{created_ms % 1000:03d}"
    )
    return STREAM_NAME_FORMAT.format(table=table, cdc=cdc, ms=created_ms, utc=utc)


def region_keys(region: int, regions: int) -> tuple[bytes | None, bytes | None]:
    """A region's start and end row keys: salt-byte prefixes, as Phoenix pre-splits a salted
    table (None: the table's first start / last end)."""
    start = None if region == 0 else bytes([region])
    end = None if region == regions - 1 else bytes([region + 1])
    return start, end


def partition_id(table: str, region: int, regions: int, created_ms: int) -> str:
    """``PARTITION_ID()``: HBase's encoded region name, the MD5 (hex) of the region name
    ``<table>,<start key>,<region id>`` (32 characters)."""
    start, _ = region_keys(region, regions)
    name = table.encode() + b"," + (start or b"") + b"," + str(created_ms).encode()
    return hashlib.md5(name, usedforsecurity=False).hexdigest()


def partition_ids(table: str, cdc: CdcObject) -> list[str]:
    """The partition id of each region (index = region)."""
    return [partition_id(table, r, cdc.regions, cdc.created_ms) for r in range(max(1, cdc.regions))]


@dataclass(frozen=True, slots=True)
class PhoenixTable:
    """The Phoenix side of a table (``options["phoenix"]``)."""

    #: Created with Phoenix DDL: identifiers folded to upper case, Phoenix types and families.
    ddl: bool = False
    max_lookback_ms: int | None = None
    ttl_s: int | None = None
    salt_buckets: int | None = None
    immutable_rows: bool = False
    #: Other properties as written (``COLUMN_ENCODED_BYTES``, ``MULTI_TENANT``...), kept verbatim.
    properties: dict[str, Any] = field(default_factory=dict)
    cdc: tuple[CdcObject, ...] = ()
    #: CDC streams (Phoenix 5.3's ``SYSTEM.CDC_STREAM_STATUS``), newest last
    streams: tuple[Stream, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "ddl": self.ddl,
            "max_lookback_ms": self.max_lookback_ms,
            "ttl_s": self.ttl_s,
            "salt_buckets": self.salt_buckets,
            "immutable_rows": self.immutable_rows,
            "properties": self.properties,
            "cdc": [c.to_json() for c in self.cdc],
            "streams": [st.to_json() for st in self.streams],
        }

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> PhoenixTable:
        return PhoenixTable(
            ddl=bool(d.get("ddl", False)),
            max_lookback_ms=d.get("max_lookback_ms"),
            ttl_s=d.get("ttl_s"),
            salt_buckets=d.get("salt_buckets"),
            immutable_rows=bool(d.get("immutable_rows", False)),
            properties=dict(d.get("properties", {})),
            cdc=tuple(CdcObject.from_json(c) for c in d.get("cdc", ())),
            streams=tuple(Stream.from_json(st) for st in d.get("streams", ())),
        )


def phoenix_of(schema: TableSchema) -> PhoenixTable:
    raw = schema.options.get("phoenix")
    return PhoenixTable.from_json(raw) if isinstance(raw, Mapping) else PhoenixTable()


def with_phoenix(schema: TableSchema, pt: PhoenixTable) -> TableSchema:
    return replace(schema, options={**schema.options, "phoenix": pt.to_json()}, version=schema.version + 1)


def cdc_of(schema: TableSchema) -> CdcObject | None:
    """The table's CDC object (a table has at most one, as in released Phoenix)."""
    raw = schema.options.get("phoenix")
    if not isinstance(raw, Mapping) or not raw.get("cdc"):
        return None
    return CdcObject.from_json(raw["cdc"][0])


def row_ttl_s(schema: TableSchema) -> int | None:
    """A Phoenix table's ``TTL`` in seconds (None: rows never expire)."""
    raw = schema.options.get("phoenix")
    if not isinstance(raw, Mapping):
        return None
    ttl = raw.get("ttl_s")
    return int(ttl) if ttl else None


def display_name(schema: TableSchema, col: ColumnSchema) -> str:
    """How Phoenix names a column inside CDC images: ``V1``, or ``B.VB`` outside the default family."""
    if col.family and phoenix_of(schema).ddl:
        return f"{col.family}.{col.name}"
    return col.name


# ====================================================================================== max lookback


def max_lookback_ms(conn: sqlite3.Connection, schema: TableSchema) -> int:
    """The table's max lookback: its own setting, else the database's, else a day."""
    own = phoenix_of(schema).max_lookback_ms
    if own is not None:
        return int(own)
    row = conn.execute("SELECT value FROM _meta WHERE key = ?", (META_MAX_LOOKBACK,)).fetchone()
    seconds = int(row[0]) if row is not None and row[0] is not None else DEFAULT_MAX_LOOKBACK_S
    return seconds * 1000


def set_default_max_lookback(conn: sqlite3.Connection, seconds: int) -> None:
    """Set the database-level max lookback (Phoenix's ``phoenix.max.lookback.age.seconds``)."""
    if seconds < 0:
        raise ValueError("max lookback must not be negative")
    conn.execute(
        "INSERT INTO _meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (META_MAX_LOOKBACK, int(seconds)),
    )


# ====================================================================================== the time index


def index_table(schema: TableSchema) -> str:
    return f"p{schema.id}"


def index_create_sql(schema: TableSchema) -> str:
    keys = [c.db for c in schema.key]
    cols = ["b INTEGER NOT NULL", "ms INTEGER NOT NULL", *keys, "seq INTEGER NOT NULL", "ev INTEGER NOT NULL"]
    pk = ", ".join(["b", "ms", *keys, "seq"])
    return f"CREATE TABLE IF NOT EXISTS {index_table(schema)} ({', '.join(cols)}, PRIMARY KEY ({pk})) WITHOUT ROWID"


def index_drop_sql(schema: TableSchema) -> str:
    return f"DROP TABLE IF EXISTS {index_table(schema)}"


def last_change_seq(conn: sqlite3.Connection, schema: TableSchema) -> int:
    return int(conn.execute(f"SELECT COALESCE(MAX(seq), 0) FROM x{schema.id}").fetchone()[0])


def _event_filter(schema: TableSchema) -> str:
    """Change rows Phoenix reports: an upsert that wrote a non-key column; a delete of a row."""
    written = " OR ".join(f"u{c.id} = 1" for c in schema.stored_values) or "0"
    return f"((op = {CHANGE_UPSERT} AND ({written})) OR (op = {CHANGE_ERASE} AND ox = 1))"


def table_regions(schema: TableSchema) -> int:
    """The regions a CDC created now partitions by: the Phoenix table's salt buckets, else the
    table's partitions (YDB ``UNIFORM_PARTITIONS``), else one."""
    salt = phoenix_of(schema).salt_buckets
    return max(1, int(salt)) if salt else max(1, schema.partitions)


def bucket_sql(schema: TableSchema, cdc: CdcObject) -> str:
    """The index bucket of a change row (columns of ``x<id>``): its key's region, then its salt."""
    salt = f"seq % {cdc.salt}" if cdc.salt > 1 else ""
    if cdc.regions <= 1:
        return salt or "0"
    region = f"cf_region({cdc.regions}, {', '.join(c.db for c in schema.key)})"
    return f"{region} * {cdc.salt} + {salt}" if salt else region


def index_changes(
    conn: sqlite3.Connection, schema: TableSchema, after_seq: int, wall_ns: int, ev: int = EV_CHANGE
) -> None:
    """Index the change rows one commit just wrote (``seq > after_seq``) at its time."""
    cdc = cdc_of(schema)
    if cdc is None:
        return
    keys = ", ".join(c.db for c in schema.key)
    bucket = bucket_sql(schema, cdc)
    conn.execute(
        f"INSERT INTO {index_table(schema)} (b, ms, {keys}, seq, ev)"
        f" SELECT {bucket}, ?, {keys}, seq, ? FROM x{schema.id} WHERE seq > ? AND {_event_filter(schema)}",
        (wall_ns // NS_PER_MS, ev, after_seq),
    )


class ChangeRow(NamedTuple):
    """One CDC event as read from the index and the change stream (storage values)."""

    ms: int
    key: tuple[Any, ...]
    seq: int
    ev: int
    upsert: bool
    existed: bool
    new: tuple[Any, ...]  # value columns after the change (schema.stored_values order)
    written: tuple[bool, ...]
    old: tuple[Any, ...]


def change_row(r: Sequence[Any], nk: int, nv: int) -> ChangeRow:
    """A row of :func:`scan_raw` (not ``coded``) as a :class:`ChangeRow`."""
    base = nk + 5
    return ChangeRow(
        r[0],
        tuple(r[1 : 1 + nk]),
        r[1 + nk],
        r[2 + nk],
        r[3 + nk] == CHANGE_UPSERT,
        bool(r[4 + nk]),
        tuple(r[base : base + nv]),
        tuple(r[base + nv : base + 2 * nv]),  # 1 or NULL: truthy exactly when written
        tuple(r[base + 2 * nv : base + 3 * nv]),
    )


#: Shape bits fit one signed 64-bit SQLite integer up to this many value columns.
MAX_CODED_COLUMNS = 20


def shape_sql(schema: TableSchema) -> str:
    """A change's shape as one integer: bits 0-1 the event (0 delete, 1 upsert, 2 TTL delete),
    bit 2 the row existed, then three bits per value column ``i`` from bit ``3 + 3i``: old value
    present, column written, new value NULL."""
    parts = [
        f"(CASE WHEN p.ev = {EV_TTL_DELETE} THEN 2 WHEN x.op = {CHANGE_UPSERT} THEN 1 ELSE 0 END)",
        "((COALESCE(x.ox, 0) != 0) << 2)",
    ]
    for i, c in enumerate(schema.stored_values):
        b = 3 + 3 * i
        parts.append(f"((x.o{c.id} IS NOT NULL) << {b})")
        parts.append(f"((COALESCE(x.u{c.id}, 0) != 0) << {b + 1})")
        parts.append(f"((x.{c.db} IS NULL) << {b + 2})")
    return " | ".join(parts)


def differs_sql(schema: TableSchema, shift: int = 0) -> str:
    """Bit ``shift + i`` set when value column ``i``'s new value is not its old value."""
    vals = schema.stored_values
    return " | ".join(f"((x.{c.db} IS NOT x.o{c.id}) << {shift + i})" for i, c in enumerate(vals)) or "0"


#: Up to this many value columns the differs bits go into the shape's integer, above its
#: ``3 + 3 * n`` bits (one column less to read per change); beyond it they are a column of their own.
MAX_FOLDED_COLUMNS = 15


def folded(schema: TableSchema) -> bool:
    """Whether coded rows carry the differs bits in the shape's integer (:func:`range_sql`)."""
    return len(schema.stored_values) <= MAX_FOLDED_COLUMNS


def range_sql(
    schema: TableSchema,
    lo_ms: int | None,
    hi_ms: int | None,
    *,
    key_eq: Mapping[int, Any] | None = None,
    descending: bool = False,
    after: tuple[int, tuple[Any, ...], int] | None = None,
    coded: bool = False,
    with_old: bool = True,
) -> tuple[str, list[Any]]:
    """The query of one bucket of :func:`scan_raw` and its parameters after the bucket (the
    first parameter, ``?1``)."""
    p = index_table(schema)
    keys = [c.db for c in schema.key]
    vals = schema.stored_values
    conds = ["p.b = ?"]
    params: list[Any] = []
    if lo_ms is not None:
        conds.append("p.ms >= ?")
        params.append(lo_ms)
    if hi_ms is not None:
        conds.append("p.ms < ?")
        params.append(hi_ms)
    for cid, v in (key_eq or {}).items():
        conds.append(f"p.c{cid} = ?")
        params.append(v)
    if after is not None:
        ams, akey, aseq = after
        row_value = "(" + ", ".join(["p.ms", *(f"p.{k}" for k in keys), "p.seq"]) + ")"
        conds.append(f"{row_value} > ({', '.join('?' * (len(keys) + 2))})")
        params.extend([ams, *akey, aseq])
    select = ["p.ms", *(f"p.{k}" for k in keys), "p.seq"]
    if coded:
        if folded(schema):
            select.append(f"{shape_sql(schema)} | {differs_sql(schema, 3 + 3 * len(vals))}")
        else:
            select += [shape_sql(schema), differs_sql(schema)]
        select += [f"x.{c.db}" for c in vals]
        select += [f"x.o{c.id}" for c in vals] if with_old else []
    else:
        select += ["p.ev", "x.op", "x.ox"]
        select += [f"x.{c.db}" for c in vals] + [f"x.u{c.id}" for c in vals] + [f"x.o{c.id}" for c in vals]
    direction = " DESC" if descending else ""
    order = ", ".join(f"{c}{direction}" for c in ["p.ms", *(f"p.{k}" for k in keys), "p.seq"])
    sql = (
        f"SELECT {', '.join(select)} FROM {p} p CROSS JOIN x{schema.id} x ON x.seq = p.seq"
        f" WHERE {' AND '.join(conds)} ORDER BY {order}"
    )
    return sql, params


def scan_raw(
    conn: sqlite3.Connection,
    schema: TableSchema,
    lo_ms: int | None,
    hi_ms: int | None,
    *,
    key_eq: Mapping[int, Any] | None = None,
    descending: bool = False,
    after: tuple[int, tuple[Any, ...], int] | None = None,
    buckets: Sequence[int] | None = None,
    coded: bool = False,
    with_old: bool = True,
) -> Iterator[tuple[Any, ...]]:
    """Events with ``lo_ms <= ms < hi_ms`` (None: unbounded) in (time, key, seq) order, merged
    across buckets; ``key_eq`` pins key columns (column id -> storage value); ``after`` resumes
    strictly after a (ms, key, seq) position; ``buckets`` reads only those buckets. Rows are as
    SQLite returns them: ``(ms, key.., seq, ev, op, ox, new.., written.., old..)``
    (:func:`change_row` makes a :class:`ChangeRow` of one).

    ``coded``: ``(ms, key.., seq, code, [differs,] new.., [old..])`` instead, for the batch
    encoder: SQLite computes each change's shape bits (:func:`shape_sql`) and which columns'
    new values differ from the old ones (:func:`differs_sql`: above the shape bits in ``code``
    when :func:`folded`, else a column of their own), so only the values cross into Python (old
    values only ``with_old``)."""
    for batch in scan_batches(
        conn,
        schema,
        lo_ms,
        hi_ms,
        key_eq=key_eq,
        descending=descending,
        after=after,
        buckets=buckets,
        coded=coded,
        with_old=with_old,
    ):
        yield from batch


def scan_batches(
    conn: sqlite3.Connection,
    schema: TableSchema,
    lo_ms: int | None,
    hi_ms: int | None,
    *,
    key_eq: Mapping[int, Any] | None = None,
    descending: bool = False,
    after: tuple[int, tuple[Any, ...], int] | None = None,
    buckets: Sequence[int] | None = None,
    coded: bool = False,
    with_old: bool = True,
    first: int = 64,
    most: int = 4096,
) -> Iterator[list[tuple[Any, ...]]]:
    """:func:`scan_raw`'s rows in lists, as ``fetchmany`` returns them when one bucket is read:
    the first list holds up to ``first`` rows (the first row of a range comes at once), each
    later one up to four times more, at most ``most``."""
    cdc = cdc_of(schema)
    if cdc is None:
        return
    sql, params = range_sql(
        schema,
        lo_ms,
        hi_ms,
        key_eq=key_eq,
        descending=descending,
        after=after,
        coded=coded,
        with_old=with_old,
    )
    nk = len(schema.key)
    wanted = list(range(cdc.buckets)) if buckets is None else list(buckets)
    if len(wanted) == 1:
        cur = conn.execute(sql, [wanted[0], *params])
        size = first
        while batch := cur.fetchmany(size):
            yield batch
            size = min(size * 4, most)
        return

    def rows(bucket: int) -> Iterator[tuple[Any, ...]]:
        cur = conn.execute(sql, [bucket, *params])
        size = min(first, 64)
        while batch := cur.fetchmany(size):
            yield from batch
            size = min(size * 4, 4096)

    merged = heapq.merge(
        *(rows(b) for b in wanted),
        key=lambda r: (r[0], r[1 : 1 + nk], r[1 + nk]),
        reverse=descending,
    )
    size = first
    while batch := list(itertools.islice(merged, size)):
        yield batch
        size = min(size * 4, most)


# ====================================================================================== retention


def history_floor_ns(conn: sqlite3.Connection, schema: TableSchema, now_ns: int) -> int | None:
    """Change rows committed before this time are beyond the table's max lookback (None: no CDC)."""
    if cdc_of(schema) is None:
        return None
    return now_ns - max_lookback_ms(conn, schema) * NS_PER_MS


def expire_index(conn: sqlite3.Connection, schema: TableSchema, before_ms: int) -> int:
    """Delete the index rows older than ``before_ms``: one range delete per bucket."""
    cdc = cdc_of(schema)
    if cdc is None:
        return 0
    n = 0
    for b in range(cdc.buckets):
        n += conn.execute(
            f"DELETE FROM {index_table(schema)} WHERE b = ? AND ms < ?", (b, before_ms)
        ).rowcount
    return n


__all__ = [
    "DEFAULT_MAX_LOOKBACK_S",
    "EV_CHANGE",
    "EV_TTL_DELETE",
    "META_MAX_LOOKBACK",
    "STREAM_DISABLED",
    "STREAM_DISABLING",
    "STREAM_ENABLED",
    "STREAM_ENABLING",
    "CdcObject",
    "ChangeRow",
    "PhoenixTable",
    "Stream",
    "bucket_sql",
    "cdc_of",
    "display_name",
    "expire_index",
    "find_cdc_table",
    "folded",
    "history_floor_ns",
    "index_changes",
    "index_create_sql",
    "index_drop_sql",
    "index_table",
    "last_change_seq",
    "max_lookback_ms",
    "partition_id",
    "partition_ids",
    "phoenix_of",
    "range_sql",
    "region_keys",
    "region_of",
    "register_functions",
    "row_ttl_s",
    "safe_upper_ms",
    "scan_batches",
    "scan_raw",
    "set_default_max_lookback",
    "stream_name",
    "table_regions",
    "with_phoenix",
]


# ====================================================================================== reading safely


def safe_upper_ms(db: Database, safety_ms: int, now_ns: int | None = None) -> int:
    """The end (exclusive, ms) of a time range that is safe to read now and never changes later:
    ``safety_ms`` behind the clock (the design's margin ``s`` against clock skew), and not past a
    freshly closed timestamp. Closing takes the write lock, so every transaction that could still
    commit at an earlier time has committed (or failed) when it returns."""
    closed, _ = db.close_timestamp()
    now = db.clock.now_ns() if now_ns is None else now_ns
    return min(closed.wall // NS_PER_MS, now // NS_PER_MS - safety_ms)


def find_cdc_table(tables: Sequence[TableSchema], name: str) -> TableSchema | None:
    """The table whose CDC object is ``name`` (``[schema.]NAME``; Phoenix's case rules: an exact
    match first, then the upper-cased name)."""
    prefix, _, short = name.rpartition(".")
    for wanted in (short, short.upper()):
        for t in tables:
            cdc = cdc_of(t)
            if cdc is not None and cdc.name == wanted and (t.keyspace or "").upper() == prefix.upper():
                return t
    return None
