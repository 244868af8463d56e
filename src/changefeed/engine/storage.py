"""Physical storage of one table in SQLite, and the SQL that reads and writes it.

Layout (see catalog.py): ``t<id>`` rows keyed by the primary key (CQL tables lead with ``_tok``,
the partition token, so partitions come back in token order like ScyllaDB); ``s<id>`` the static
row of each CQL partition; ``j<id>`` the ScyllaDB CDC log; ``x<id>`` the change stream.

Rows travel as ``dict[column id, storage value]``; conversion to Python values happens only when
results are returned to a user. TTLs: ``_m`` is the row marker (NULL none, 0 live, >0 expiry ns),
``_exp`` a JSON map ``{"c<id>": expiry ns}`` for cells written with ``USING TTL``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

import orjson
import xxhash

from changefeed.engine.catalog import ColumnSchema, Role, TableSchema

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


def stream_id(tok: int) -> bytes:
    """ScyllaDB-style 16-byte CDC stream id for a token (token, then a generation/version word)."""
    return (tok & 0xFFFF_FFFF_FFFF_FFFF).to_bytes(8, "big") + (1).to_bytes(8, "big")


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
        lead = "_tok = ? AND " if self.cql else ""
        self.key_where = lead + " AND ".join(f"{c.db} = ?" for c in self.key_cols)
        self.pk_where = lead + " AND ".join(f"{c.db} = ?" for c in self.pk_cols)
        self._row_select = ", ".join([c.db for c in self.row_cols] + ["_m", "_exp"])
        self._static_select = ", ".join([c.db for c in self.pk_cols + self.static_cols] + ["_exp"])
        self._upsert_sql: dict[tuple[Any, ...], str] = {}
        self._j_sql: dict[tuple[int, ...], str] = {}
        self.x_sql = self._x_insert_sql()

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
        cols = [
            "seq INTEGER PRIMARY KEY",
            "ts INTEGER NOT NULL",
            "lg INTEGER NOT NULL",
            "tx INTEGER NOT NULL",
            "tok INTEGER NOT NULL",
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

    def scan_rows(
        self,
        conn: sqlite3.Connection,
        now_ns: int,
        pk: Sequence[Any] | None = None,
        where_sql: str = "",
        params: Sequence[Any] = (),
    ) -> Iterable[Row]:
        """Rows in storage order, optionally within one partition and an extra SQL condition."""
        conds, args = [], []
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
        for r in conn.execute(f"SELECT {self._row_select} FROM {self.t}{where} ORDER BY {order}", args):
            row = self._decode_row(r, now_ns)
            if row is not None:
                yield row

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
    def upsert_sql(self, cell_ids: tuple[int, ...], marker: bool, ttl: bool, static: bool) -> str:
        """INSERT .. ON CONFLICT DO UPDATE for a key plus the given cells.

        Parameters: [tok,] key..., cells..., marker value (if marker), exp json (if ttl)."""
        ck = (cell_ids, marker, ttl, static)
        sql = self._upsert_sql.get(ck)
        if sql is not None:
            return sql
        table = self.s if static else self.t
        keys = self.pk_cols if static else self.key_cols
        cols = (["_tok"] if self.cql else []) + [c.db for c in keys] + [f"c{i}" for i in cell_ids]
        conflict = ", ".join((["_tok"] if self.cql else []) + [c.db for c in keys])
        sets = [f"c{i} = excluded.c{i}" for i in cell_ids]
        if marker and not static:
            cols.append("_m")
            sets.append("_m = excluded._m")
        if ttl:
            cols.append("_exp")
            sets.append("_exp = json_patch(COALESCE(_exp, '{}'), excluded._exp)")
        elif cell_ids:
            paths = ", ".join(f"'$.c{i}'" for i in cell_ids)
            sets.append(f"_exp = CASE WHEN _exp IS NULL THEN NULL ELSE json_remove(_exp, {paths}) END")
        placeholders = ", ".join("?" for _ in cols)
        update = f"DO UPDATE SET {', '.join(sets)}" if sets else "DO NOTHING"
        sql = f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({placeholders}) ON CONFLICT ({conflict}) {update}"
        self._upsert_sql[ck] = sql
        return sql

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
    def journal_sql(self, cell_ids: tuple[int, ...]) -> str:
        """INSERT of one ScyllaDB log row. Params: ts, lg, tx, tok, bsn, op, ttl, key..., cells..., deleted flags..."""
        sql = self._j_sql.get(cell_ids)
        if sql is None:
            cols = ["ts", "lg", "tx", "tok", "bsn", "op", "ttl"]
            cols += [c.db for c in self.key_cols]
            cols += [f"c{i}" for i in cell_ids]
            cols += [f"d{i}" for i in cell_ids if not self.schema.column_by_id(i).is_key]
            sql = f"INSERT INTO {self.j} ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})"
            self._j_sql[cell_ids] = sql
        return sql

    def _x_insert_sql(self) -> str:
        cols = ["ts", "lg", "tx", "op", "ox", "st"]
        cols += [c.db for c in self.all_cols]
        cols += [f"u{c.id}" for c in self.value_cols]
        cols += [f"o{c.id}" for c in self.value_cols]
        return f"INSERT INTO {self.x} ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})"
