"""Physical storage of one table in SQLite, and the SQL that reads and writes it.

Layout (see catalog.py): ``t<id>`` rows keyed by the primary key (CQL tables lead with ``_tok``,
the partition token, so partitions come back in token order like ScyllaDB); ``s<id>`` the static
row of each CQL partition; ``j<id>`` the ScyllaDB CDC log; ``x<id>`` the change stream.

Rows travel as ``dict[column id, storage value]``; conversion to Python values happens only when
results are returned to a user. TTLs: ``_m`` is the row marker (NULL none, 0 live, >0 expiry ns),
``_exp`` a JSON map ``{"c<id>": expiry ns}`` for cells written with ``USING TTL``.
"""

from __future__ import annotations

import operator
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import lru_cache
from itertools import chain
from typing import Any

import orjson
import xxhash

from changefeed.engine.catalog import ColumnSchema, Role, TableSchema
from changefeed.engine.types import Kind
from changefeed.exceptions import UnsupportedFeature

Row = dict[int, Any]

# Scylla cdc$operation codes, plus the change-stream kinds.
OP_PREIMAGE = 0
OP_UPDATE = 1
OP_INSERT = 2
OP_ROW_DELETE = 3
OP_PARTITION_DELETE = 4
OP_RANGE_LEFT_INCL = 5
OP_RANGE_LEFT_EXCL = 6
OP_RANGE_RIGHT_INCL = 7
OP_RANGE_RIGHT_EXCL = 8
OP_POSTIMAGE = 9
CHANGE_UPSERT = 10
CHANGE_ERASE = 11


def token(values: Sequence[Any]) -> int:
    """The partition token of a partition key (storage values): a signed 64-bit hash."""
    h = xxhash.xxh64_intdigest(repr(tuple(values)).encode("utf-8"))
    return h - (1 << 64) if h >= (1 << 63) else h


_U64 = 1 << 64
_I64_MAX = 1 << 63


def tokens(pks: Iterable[tuple[Any, ...]]) -> list[int]:
    """``token`` of many partition keys, without a Python frame per key."""
    hashes = map(xxhash.xxh64_intdigest, map(str.encode, map(repr, pks)))
    return [h - _U64 if h >= _I64_MAX else h for h in hashes]


# ---------------------------------------------------------------------- bulk inserts
#: SQLite's historical default limit on host parameters per statement (newer builds allow more).
MAX_PARAMS = 999
#: SQLite's limit on one function call's arguments (SQLITE_MAX_FUNCTION_ARG's default).
_MAX_FUNCTION_ARGS = 127
#: Rows per multi-row INSERT: large enough to amortise each statement step, small enough to keep
#: the set of cached statement texts small (one per power of two up to this).
MAX_ROWS_PER_STATEMENT = 64


def statement_chunks(n: int, width: int, head: int) -> Iterator[tuple[int, int]]:
    """(first row, rows) of the multi-row statements that write ``n`` rows of ``width``
    parameters after ``head`` shared ones: power-of-two sizes from MAX_ROWS_PER_STATEMENT down,
    within MAX_PARAMS, so a few statement shapes are prepared and reused."""
    size = MAX_ROWS_PER_STATEMENT
    while size > 1 and head + size * width > MAX_PARAMS:
        size //= 2
    i = 0
    while i < n:
        while size > n - i:
            size //= 2
        yield i, size
        i += size


@lru_cache(maxsize=2048)
def _values_sql(
    table: str,
    const_cols: tuple[str, ...],
    row_cols: tuple[str, ...],
    rows: int,
    tail: str,
    twin: tuple[tuple[str, str], ...],
) -> str:
    consts = [f"?{i + 1}" for i in range(len(const_cols))]
    width = len(row_cols)
    first = len(const_cols) + 1
    names = const_cols + row_cols
    overrides = dict(twin)
    tuples = []
    for r in range(rows):
        base = first + r * width
        refs = consts + [f"?{base + j}" for j in range(width)]
        tuples.append("(" + ", ".join(refs) + ")")
        if twin:
            second = [
                overrides[c].replace("{}", ref) if c in overrides else ref
                for c, ref in zip(names, refs, strict=True)
            ]
            tuples.append("(" + ", ".join(second) + ")")
    return f"INSERT INTO {table} ({', '.join(names)}) VALUES {', '.join(tuples)}{tail}"


def insert_columns(
    conn: sqlite3.Connection,
    table: str,
    consts: Mapping[str, Any],
    columns: Mapping[str, Sequence[Any]],
    n: int,
    tail: str = "",
    *,
    twin: Mapping[str, str] | None = None,
) -> None:
    """Insert ``n`` rows given column-wise: ``columns`` maps a column to its ``n`` values and
    ``consts`` a column to the one value every row gets (a ``None`` constant is left out, so the
    column takes its default, NULL). ``tail`` follows the VALUES list (an ``ON CONFLICT`` clause).
    ``twin`` inserts a second row after each row: the same values except the columns it maps to
    SQL expressions, in which ``{}`` stands for the first row's value (``{"bsn": "{} + 1"}``).

    Rows go in multi-row ``INSERT .. VALUES`` statements of up to 64 rows, whose constants are
    numbered parameters bound once per statement (a twin reuses its row's parameters): binding
    and stepping one statement per row costs about twice as much, and binding ``None`` (which
    Python's sqlite3 adapts the slow way) more still. Statement texts depend only on the column
    names and a power-of-two row count, so they stay in the connection's statement cache."""
    if n <= 0:
        return
    const_cols = tuple(k for k, v in consts.items() if v is not None)
    head = [consts[k] for k in const_cols]
    row_cols = tuple(columns)
    width = len(row_cols)
    twin_key = tuple(sorted(twin.items())) if twin else ()
    if width == 0:
        sql = _values_sql(table, const_cols, (), 1, tail, twin_key)
        conn.executemany(sql, [head] * n)
        return
    values = list(columns.values())
    flat = list(values[0]) if width == 1 else list(chain.from_iterable(zip(*values, strict=True)))
    if len(flat) != n * width:
        raise ValueError(f"insert_columns: expected {n} values per column")
    for i, size in statement_chunks(n, width, len(head)):
        sql = _values_sql(table, const_cols, row_cols, size, tail, twin_key)
        conn.execute(sql, head + flat[i * width : (i + size) * width])


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class TableStore:
    """SQL text and row operations for one version of one table's schema."""

    def __init__(self, schema: TableSchema) -> None:
        self.schema = s = schema
        self.t = f"t{s.id}"
        self.s = f"s{s.id}"
        self.j = f"j{s.id}"
        self.x = f"x{s.id}"
        self.cql = s.is_cql
        self.key_cols: tuple[ColumnSchema, ...] = s.key
        self.pk_cols: tuple[ColumnSchema, ...] = s.partition_key
        self.ck_cols: tuple[ColumnSchema, ...] = s.clustering_key
        self.row_cols: tuple[ColumnSchema, ...] = tuple(
            c for c in s.stored if c.role in (Role.PARTITION, Role.CLUSTERING, Role.REGULAR)
        )
        self.regular_cols: tuple[ColumnSchema, ...] = tuple(c for c in s.stored if c.role is Role.REGULAR)
        self.static_cols: tuple[ColumnSchema, ...] = tuple(c for c in s.stored if c.role is Role.STATIC)
        self.all_cols: tuple[ColumnSchema, ...] = s.stored
        self.value_cols: tuple[ColumnSchema, ...] = tuple(c for c in s.stored if not c.is_key)
        #: FLOAT columns by id (value columns) and position (key columns): SQLite reads a stored
        #: NaN back as NULL, so a write of one is refused (:meth:`check_no_nan`)
        self.float_ids = frozenset(c.id for c in s.stored if c.type.kind is Kind.FLOAT)
        self.float_key_at = tuple(i for i, c in enumerate(self.key_cols) if c.type.kind is Kind.FLOAT)
        lead = "_tok = ? AND " if self.cql else ""
        self.key_where = lead + " AND ".join(f"{c.db} = ?" for c in self.key_cols)
        self.pk_where = lead + " AND ".join(f"{c.db} = ?" for c in self.pk_cols)
        self._row_select = ", ".join([c.db for c in self.row_cols] + ["_m", "_exp"])
        self._static_select = ", ".join([c.db for c in self.pk_cols + self.static_cols] + ["_exp"])
        self._upsert_tail: dict[tuple[Any, ...], str] = {}
        self._x_capture: dict[tuple[tuple[int, ...], int], str] = {}
        self.x_sql = self._x_insert_sql()

    def check_no_nan(self, keys: Sequence[tuple[Any, ...]], cells: Mapping[int, Sequence[Any]]) -> None:
        """Refuse NaN in a FLOAT column (0A000) before anything is written: SQLite stores NaN as
        NULL, which would lose the value (or, in a key, the row)."""
        floats = [cells[i] for i in self.float_ids.intersection(cells)]
        floats += [[k[at] for k in keys] for at in self.float_key_at]
        for values in floats:
            if any(v != v for v in values if type(v) is float):
                raise UnsupportedFeature(
                    "NaN cannot be stored in a FLOAT column: SQLite, which keeps the rows, reads it "
                    "back as NULL (store NULL, or NaN inside an array)"
                )

    @property
    def row_select(self) -> str:
        """The select list of a stored row: ``row_cols``, then the marker and the expiry map."""
        return self._row_select

    # ================================================================== DDL
    def create_sql(self) -> list[str]:
        s = self.schema
        stmts = []
        cols = ["_tok INTEGER NOT NULL"] if self.cql else []
        cols += [f"{c.db}" for c in self.row_cols]
        cols += ["_m INTEGER", "_exp TEXT"]
        pk = (["_tok"] if self.cql else []) + [
            c.db + (" DESC" if c.descending else "") for c in self.key_cols
        ]
        stmts.append(
            f"CREATE TABLE {self.t} ({', '.join(cols)}, PRIMARY KEY ({', '.join(pk)})) WITHOUT ROWID"
        )
        if self.cql and self.static_cols:
            scols = (
                ["_tok INTEGER NOT NULL"] + [c.db for c in self.pk_cols + self.static_cols] + ["_exp TEXT"]
            )
            spk = ["_tok"] + [c.db for c in self.pk_cols]
            stmts.append(
                f"CREATE TABLE {self.s} ({', '.join(scols)}, PRIMARY KEY ({', '.join(spk)})) WITHOUT ROWID"
            )
        if s.cdc.enabled:
            stmts.append(self.journal_create_sql())
        if s.changes:
            stmts.append(self.changes_create_sql())
        return stmts

    def journal_create_sql(self) -> str:
        # Plain rowid (no AUTOINCREMENT, which costs a sqlite_sequence update per row): the log is
        # read in (token, seq) order only, and new rows always get a seq above every live row.
        # The change stream keeps AUTOINCREMENT because feeds keep offsets into it.
        # ``tok`` is stored for CQL tables, which compute it anyway (it orders their rows); SQL
        # tables leave it NULL and the log view computes it from the key when read.
        # ``d<id>`` (cdc$deleted_<col>) is 1 on a delta that deleted the cell; 0 or NULL
        # otherwise (0 only where a bulk write deleted that column in some of its rows).
        cols = [
            "seq INTEGER PRIMARY KEY",
            "ts INTEGER NOT NULL",
            "lg INTEGER NOT NULL",
            "tx INTEGER NOT NULL",
            "tok INTEGER",
            "bsn INTEGER NOT NULL",
            "op INTEGER NOT NULL",
            "ttl INTEGER",
        ]
        cols += [c.db for c in self.all_cols]
        cols += [f"d{c.id} INTEGER" for c in self.value_cols]
        return f"CREATE TABLE {self.j} ({', '.join(cols)})"

    def changes_create_sql(self) -> str:
        cols = [
            "seq INTEGER PRIMARY KEY AUTOINCREMENT",
            "ts INTEGER NOT NULL",
            "lg INTEGER NOT NULL",
            "tx INTEGER NOT NULL",
            "op INTEGER NOT NULL",
            "ox INTEGER NOT NULL",
            "st INTEGER NOT NULL DEFAULT 0",
        ]
        cols += [c.db for c in self.all_cols]
        cols += [f"u{c.id} INTEGER" for c in self.value_cols]
        cols += [f"o{c.id}" for c in self.value_cols]
        return f"CREATE TABLE {self.x} ({', '.join(cols)})"

    def drop_sql(self) -> list[str]:
        return [f"DROP TABLE IF EXISTS {n}" for n in (self.t, self.s, self.j, self.x)]

    # ================================================================== keys
    def key_params(self, key: Sequence[Any]) -> list[Any]:
        """WHERE parameters for a full primary key (storage values, in key column order)."""
        if self.cql:
            return [token(key[: len(self.pk_cols)]), *key]
        return list(key)

    def key_columns(self, keys: Sequence[tuple[Any, ...]]) -> dict[str, Sequence[Any]]:
        """Full primary keys turned column-wise: ``{key column: its values, one per key}``."""
        return dict(zip((c.db for c in self.key_cols), zip(*keys, strict=True), strict=True))

    def partitions(self, keys: Sequence[tuple[Any, ...]]) -> tuple[Sequence[tuple[Any, ...]], list[int]]:
        """The partition key of each full key (``keys`` itself when there is no clustering key),
        and their tokens for CQL tables (SQL tables store none: an empty list)."""
        npk = len(self.pk_cols)
        pks = keys if npk == len(self.key_cols) else [k[:npk] for k in keys]
        return pks, tokens(pks) if self.cql else []

    def pk_params(self, pk: Sequence[Any]) -> list[Any]:
        return [token(pk), *pk] if self.cql else list(pk)

    # ================================================================== reads
    def get_row(self, conn: sqlite3.Connection, key: Sequence[Any], now_ns: int) -> Row | None:
        r = conn.execute(
            f"SELECT {self._row_select} FROM {self.t} WHERE {self.key_where}", self.key_params(key)
        ).fetchone()
        return None if r is None else self._decode_row(r, now_ns)

    def get_rows(
        self,
        conn: sqlite3.Connection,
        keys: Sequence[tuple[Any, ...]],
        now_ns: int,
        toks: Sequence[int] | None = None,
    ) -> dict[tuple[Any, ...], Row]:
        """Bulk point reads: the live rows among ``keys`` (missing keys are absent from the result).

        Each key column is restricted with ``IN (...)`` over the chunk's distinct values, so
        SQLite walks the primary-key index; the exact key set is then filtered here."""
        out: dict[tuple[Any, ...], Row] = {}
        if not keys:
            return out
        nk = len(self.key_cols)
        chunk = max(1, 900 // (nk + 1))
        for i in range(0, len(keys), chunk):
            part = keys[i : i + chunk]
            wanted = set(part)
            conds: list[str] = []
            params: list[Any] = []
            # SQLite probes the cross product of the IN lists on leading index columns: restrict
            # further columns only while that product stays near the number of keys wanted.
            probes = 1
            if self.cql:
                part_toks = sorted(
                    set(toks[i : i + chunk])
                    if toks is not None
                    else {token(k[: len(self.pk_cols)]) for k in part}
                )
                conds.append(f"_tok IN ({', '.join('?' * len(part_toks))})")
                params.extend(part_toks)
                probes = len(part_toks)
            for j, c in enumerate(self.key_cols):
                vals = list({k[j] for k in part})
                if conds and probes * len(vals) > 4 * len(part):
                    break
                conds.append(f"{c.db} IN ({', '.join('?' * len(vals))})")
                params.extend(vals)
                probes *= len(vals)
            for r in conn.execute(
                f"SELECT {self._row_select} FROM {self.t} WHERE {' AND '.join(conds)}", params
            ):
                key = tuple(r[j] for j in range(nk))
                if key in wanted:
                    row = self._decode_row(r, now_ns)
                    if row is not None:
                        out[key] = row
        return out

    def _decode_row(self, r: Sequence[Any], now_ns: int) -> Row | None:
        n = len(self.row_cols)
        row = {c.id: r[i] for i, c in enumerate(self.row_cols)}
        marker, exp = r[n], r[n + 1]
        if exp is None and (marker is None or marker == 0):
            if marker is None and self.cql and all(row[c.id] is None for c in self.regular_cols):
                return None
            return row
        live_marker = marker is not None and (marker == 0 or marker > now_ns)
        if exp is not None:
            for cname, at in orjson.loads(exp).items():
                if at <= now_ns:
                    row[int(cname[1:])] = None
        if not live_marker and all(row[c.id] is None for c in self.regular_cols):
            return None
        return row

    def cell_expiries(
        self, conn: sqlite3.Connection
    ) -> tuple[dict[tuple[Any, ...], dict[int, int]], dict[tuple[Any, ...], dict[int, int]]]:
        """The expiry (ns) of every cell written with a TTL: by stored primary key (row cells)
        and by stored partition key (static cells), each a map column id -> expiry."""
        rows: dict[tuple[Any, ...], dict[int, int]] = {}
        statics: dict[tuple[Any, ...], dict[int, int]] = {}
        keys = ", ".join(c.db for c in self.key_cols)
        for r in conn.execute(f"SELECT {keys}, _exp FROM {self.t} WHERE _exp IS NOT NULL"):
            rows[tuple(r[:-1])] = {int(k[1:]): int(v) for k, v in orjson.loads(r[-1]).items()}
        if self.cql and self.static_cols:
            pks = ", ".join(c.db for c in self.pk_cols)
            for r in conn.execute(f"SELECT {pks}, _exp FROM {self.s} WHERE _exp IS NOT NULL"):
                statics[tuple(r[:-1])] = {int(k[1:]): int(v) for k, v in orjson.loads(r[-1]).items()}
        return rows, statics

    def scan_rows(
        self,
        conn: sqlite3.Connection,
        now_ns: int,
        pk: Sequence[Any] | None = None,
        where_sql: str = "",
        params: Sequence[Any] = (),
    ) -> Iterable[Row]:
        """Rows in storage order, optionally within one partition and an extra SQL condition."""
        for r in self.scan_rows_raw(conn, pk, where_sql, params):
            row = self._decode_row(r, now_ns)
            if row is not None:
                yield row

    def scan_rows_raw(
        self,
        conn: sqlite3.Connection,
        pk: Sequence[Any] | None = None,
        where_sql: str = "",
        params: Sequence[Any] = (),
    ) -> sqlite3.Cursor:
        """The stored rows (``row_cols`` then marker and expiry) in storage order, undecoded."""
        conds: list[str] = []
        args: list[Any] = []
        if pk is not None:
            conds.append(self.pk_where)
            args.extend(self.pk_params(pk))
        if where_sql:
            conds.append(where_sql)
            args.extend(params)
        where = f" WHERE {' AND '.join(conds)}" if conds else ""
        order = ", ".join(
            (["_tok"] if self.cql else []) + [c.db + (" DESC" if c.descending else "") for c in self.key_cols]
        )
        return conn.execute(f"SELECT {self._row_select} FROM {self.t}{where} ORDER BY {order}", args)

    def scan_tuples(
        self, conn: sqlite3.Connection, now_ns: int, ids: Sequence[int], pk: Sequence[Any] | None = None
    ) -> Iterator[tuple[Any, ...]]:
        """:meth:`scan_rows` as tuples of the stored values of columns ``ids`` (in that order):
        no per-row dict for the common row (no TTL, no CQL row-marker question)."""
        pos = {c.id: i for i, c in enumerate(self.row_cols)}
        idx = [pos[i] for i in ids]
        n = len(self.row_cols)
        whole = idx == list(range(n))
        pick = operator.itemgetter(*idx) if len(idx) > 1 else None
        fast_ok = not self.cql
        for r in self.scan_rows_raw(conn, pk):
            if fast_ok and r[n + 1] is None and not r[n]:
                yield r[:n] if whole else (pick(r) if pick is not None else (r[idx[0]],))
                continue
            row = self._decode_row(r, now_ns)
            if row is not None:
                yield tuple(row.get(i) for i in ids)

    def get_static(self, conn: sqlite3.Connection, pk: Sequence[Any], now_ns: int) -> Row | None:
        if not self.static_cols:
            return None
        r = conn.execute(
            f"SELECT {self._static_select} FROM {self.s} WHERE {self.pk_where}", self.pk_params(pk)
        ).fetchone()
        return None if r is None else self._decode_static(r, now_ns)

    def _decode_static(self, r: Sequence[Any], now_ns: int) -> Row | None:
        cols = self.pk_cols + self.static_cols
        row = {c.id: r[i] for i, c in enumerate(cols)}
        exp = r[len(cols)]
        if exp is not None:
            for cname, at in orjson.loads(exp).items():
                if at <= now_ns:
                    row[int(cname[1:])] = None
        if all(row[c.id] is None for c in self.static_cols):
            return None
        return row

    def scan_statics(
        self, conn: sqlite3.Connection, now_ns: int, pk: Sequence[Any] | None = None
    ) -> Iterable[Row]:
        if not self.static_cols:
            return
        where, args = "", []
        if pk is not None:
            where, args = f" WHERE {self.pk_where}", self.pk_params(pk)
        order = ", ".join(["_tok"] + [c.db for c in self.pk_cols])
        for r in conn.execute(f"SELECT {self._static_select} FROM {self.s}{where} ORDER BY {order}", args):
            row = self._decode_static(r, now_ns)
            if row is not None:
                yield row

    # ================================================================== writes
    def upsert_tail(self, cell_ids: tuple[int, ...], marker: bool, ttl: bool, static: bool) -> str:
        """The ``ON CONFLICT`` clause that makes an INSERT of a key plus the given cells an upsert.

        The INSERT's columns: [``_tok``,] key..., ``c<id>`` of the cells, ``_m`` (if marker),
        ``_exp`` (if ttl)."""
        ck = (cell_ids, marker, ttl, static)
        tail = self._upsert_tail.get(ck)
        if tail is not None:
            return tail
        keys = self.pk_cols if static else self.key_cols
        conflict = ", ".join((["_tok"] if self.cql else []) + [c.db for c in keys])
        sets = [f"c{i} = excluded.c{i}" for i in cell_ids]
        if marker and not static:
            sets.append("_m = excluded._m")
        if ttl:
            sets.append("_exp = json_patch(COALESCE(_exp, '{}'), excluded._exp)")
        elif cell_ids:
            removed = "_exp"
            # SQLite takes at most 127 arguments per function call: nest the calls on wide rows
            for at in range(0, len(cell_ids), _MAX_FUNCTION_ARGS - 1):
                paths = ", ".join(f"'$.c{i}'" for i in cell_ids[at : at + _MAX_FUNCTION_ARGS - 1])
                removed = f"json_remove({removed}, {paths})"
            sets.append(f"_exp = CASE WHEN _exp IS NULL THEN NULL ELSE {removed} END")
        update = f"DO UPDATE SET {', '.join(sets)}" if sets else "DO NOTHING"
        tail = f" ON CONFLICT ({conflict}) {update}"
        self._upsert_tail[ck] = tail
        return tail

    def vanish_sql(self) -> str:
        """Delete a CQL row that has no live marker and no non-null regular cell left."""
        nulls = " AND ".join(f"{c.db} IS NULL" for c in self.regular_cols) or "1"
        return f"DELETE FROM {self.t} WHERE {self.key_where} AND _m IS NULL AND {nulls}"

    def static_vanish_sql(self) -> str:
        nulls = " AND ".join(f"{c.db} IS NULL" for c in self.static_cols) or "1"
        return f"DELETE FROM {self.s} WHERE {self.pk_where} AND {nulls}"

    def delete_row_sql(self) -> str:
        return f"DELETE FROM {self.t} WHERE {self.key_where}"

    # ================================================================== journal
    def _x_insert_sql(self) -> str:
        cols = ["ts", "lg", "tx", "op", "ox", "st"]
        cols += [c.db for c in self.all_cols]
        cols += [f"u{c.id}" for c in self.value_cols]
        cols += [f"o{c.id}" for c in self.value_cols]
        return f"INSERT INTO {self.x} ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})"

    def last_seq_number(self, conn: sqlite3.Connection) -> int:
        """The last ``seq`` the change stream handed out (AUTOINCREMENT: never reused), 0 if none."""
        r = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (self.x,)).fetchone()
        return int(r[0]) if r is not None else 0

    def x_capture_sql(self, cell_ids: tuple[int, ...], rows: int) -> str:
        """One statement that writes the change rows of a bulk write with row markers *before*
        the write, reading each old row inside SQLite instead of into Python: the written keys
        and cells are bound as a ``VALUES`` list (``?1`` ts, ``?2`` logical, ``?3`` txid, ``?4``
        now in ns, then per row its key columns and ``cell_ids``' values) and left-joined to the
        table. The rows are exactly those :meth:`Transaction._flush_bulk_capture` builds from
        :meth:`get_rows`: ``ox`` whether the row is live (:meth:`_decode_row`'s rules: cells past
        their ``_exp`` are NULL, a row without a live marker and no cell is gone), ``o<id>`` its
        old values, the new image the written cells over the old ones, ``u<id>`` the written
        columns; in statement order (the VALUES list is the outer loop of the LEFT JOIN, so
        rows come out in its order without a sort). SQL tables only (no ``_tok``, no static
        cells)."""
        got = self._x_capture.get((cell_ids, rows))
        if got is not None:
            return got
        keys = [c.db for c in self.key_cols]
        written = set(cell_ids)
        width = len(keys) + len(cell_ids)
        names = [f"k{j}" for j in range(len(keys))] + [f"w{i}" for i in cell_ids]
        tuples = []
        for r in range(rows):
            base = 5 + r * width
            tuples.append("(" + ", ".join(f"?{base + j}" for j in range(width)) + ")")
        join = " AND ".join(f"t.{k} = v.k{j}" for j, k in enumerate(keys))
        # Most old rows have no cell TTLs and a plain marker: CASE takes them on its first branch
        # (SQLite evaluates every operand of AND/OR in a value, but only the CASE branch taken).
        plain = "t._exp IS NULL AND COALESCE(t._m, 0) = 0"

        def cell(c: ColumnSchema) -> str:
            return f"CASE WHEN t._exp IS NULL OR COALESCE(json_extract(t._exp, '$.c{c.id}') > ?4, 1) THEN t.{c.db} END"

        live = " OR ".join(
            ["COALESCE(t._m = 0 OR t._m > ?4, 0)", *(f"({cell(c)}) IS NOT NULL" for c in self.regular_cols)]
        )
        ox = f"CASE WHEN t.{keys[0]} IS NULL THEN 0 WHEN {plain} THEN 1 WHEN {live} THEN 1 ELSE 0 END"

        def old(c: ColumnSchema) -> str:
            return f"CASE WHEN {plain} THEN t.{c.db} WHEN {live} THEN {cell(c)} END"

        cols = ["ts", "lg", "tx", "op", "st", "ox", *keys]
        sel = ["?1", "?2", "?3", str(CHANGE_UPSERT), "0", ox, *(f"v.k{j}" for j in range(len(keys)))]
        for c in self.value_cols:
            cols.append(c.db)
            sel.append(f"v.w{c.id}" if c.id in written else old(c))
        for i in cell_ids:
            cols.append(f"u{i}")
            sel.append("1")
        for c in self.value_cols:
            cols.append(f"o{c.id}")
            sel.append(old(c))
        sql = (
            f"WITH v({', '.join(names)}) AS (VALUES {', '.join(tuples)})"
            f" INSERT INTO {self.x} ({', '.join(cols)})"
            f" SELECT {', '.join(sel)} FROM v LEFT JOIN {self.t} AS t ON {join}"
        )
        self._x_capture[(cell_ids, rows)] = sql
        return sql

    def capture_bulk_write(
        self,
        conn: sqlite3.Connection,
        head: Sequence[Any],
        keys: Sequence[tuple[Any, ...]],
        cells: Mapping[int, Sequence[Any]],
    ) -> int:
        """Run :meth:`x_capture_sql` over ``keys`` and ``cells`` (column-wise), ``head`` being
        ``(ts, logical, txid, now_ns)``, in statements of up to 64 rows. Returns the last ``seq``
        handed out before these change rows (their seqs are consecutive: AUTOINCREMENT, one
        writer), which saves reading ``sqlite_sequence`` first."""
        n = len(keys)
        ids = tuple(cells)
        values = [*zip(*keys, strict=True), *cells.values()]
        width = len(values)
        flat = list(chain.from_iterable(zip(*values, strict=True)))
        last = 0
        for i, size in statement_chunks(n, width, len(head)):
            cur = conn.execute(self.x_capture_sql(ids, size), [*head, *flat[i * width : (i + size) * width]])
            last = int(cur.lastrowid or 0)
        return last - n

    def upsert_from_changes(
        self,
        conn: sqlite3.Connection,
        cell_ids: tuple[int, ...],
        consts: Mapping[str, Any],
        after_seq: int,
        tail: str,
    ) -> None:
        """The write whose change rows :meth:`capture_bulk_write` just put in ``x<id>`` (those
        after ``after_seq``), taken from them: the keys and written cells are bound once, for
        the change rows. ``consts`` and ``tail`` as :func:`insert_columns` takes them."""
        const_cols = [k for k, v in consts.items() if v is not None]
        names = [c.db for c in self.key_cols] + [f"c{i}" for i in cell_ids]
        sql = (
            f"INSERT INTO {self.t} ({', '.join(names + const_cols)})"
            f" SELECT {', '.join(names + ['?'] * len(const_cols))} FROM {self.x} WHERE seq > ?{tail}"
        )
        conn.execute(sql, [*(consts[k] for k in const_cols), after_seq])
