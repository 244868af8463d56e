"""A transaction: the row operations of both dialects and the journal they write.

All values handed to these methods are storage values (already checked and converted by the
executor). Each operation updates the table and, in the same SQLite transaction,

* appends ScyllaDB CDC log rows to ``j<id>`` when ``cdc`` is enabled on the table: pre-images
  (op 0), deltas (1 update, 2 insert, 3 row delete, 4 partition delete, 5-8 range bounds) and
  post-images (9), numbered by ``cdc$batch_seq_no`` per partition within the transaction;
* records, when the table's change stream is on, the first image of every key it touches. At
  commit, one change row per touched key goes to ``x<id>``: old image, new image, the set of
  columns written, and whether the row exists afterwards. Several writes to one key in one
  transaction therefore give one change, and a range or partition delete gives one erase per
  row it removed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from changefeed.engine.catalog import TableSchema
from changefeed.engine.clock import CommitTs
from changefeed.engine.database import Database
from changefeed.engine.storage import (
    CHANGE_ERASE,
    CHANGE_UPSERT,
    OP_PARTITION_DELETE,
    OP_POSTIMAGE,
    OP_PREIMAGE,
    OP_RANGE_LEFT_EXCL,
    OP_RANGE_LEFT_INCL,
    OP_RANGE_RIGHT_EXCL,
    OP_RANGE_RIGHT_INCL,
    OP_ROW_DELETE,
    OP_UPDATE,
    Row,
    TableStore,
    token,
)
from changefeed.exceptions import TransactionError, UndefinedTable

NS = 1_000_000_000


@dataclass(slots=True)
class _Touch:
    static: bool
    key: tuple[Any, ...]
    old: Row | None
    mask: set[int] = field(default_factory=set)


@dataclass(slots=True)
class _Capture:
    store: TableStore
    touched: dict[tuple[bool, tuple[Any, ...]], _Touch] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Bound:
    """One side of a clustering range: the value of the ranged column and whether it is included."""

    value: Any
    inclusive: bool


class Transaction:
    """A SQLite transaction on a :class:`Database`; see the module docstring."""

    def __init__(self, db: Database, *, write: bool = True) -> None:
        self.db = db
        self.conn: sqlite3.Connection = db.conn
        self.write = write
        self.active = False
        self.ts: CommitTs | None = None
        self.txid = 0
        self._captures: dict[int, _Capture] = {}
        self._bsn: dict[tuple[int, int], int] = {}
        self.conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        self.active = True
        try:
            db.refresh_catalog()
            if write:
                self.ts, self.txid = db.allocate_ts()
        except BaseException:
            self.conn.execute("ROLLBACK")
            self.active = False
            raise
        self.now_ns = self.ts.wall if self.ts is not None else db.clock.now_ns()

    # ------------------------------------------------------------------ lifecycle
    def commit(self) -> None:
        if not self.active:
            raise TransactionError("there is no transaction in progress")
        try:
            for cap in self._captures.values():
                self._flush_capture(cap)
            self.conn.execute("COMMIT")
        except BaseException:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise
        finally:
            self.active = False

    def rollback(self) -> None:
        if self.active:
            self.active = False
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")

    # ------------------------------------------------------------------ catalog access
    def table(self, name: str) -> TableSchema:
        schema = self.db.find_table(name)
        if schema is None:
            raise UndefinedTable(f'table "{name}" does not exist')
        return schema

    def store(self, schema: TableSchema) -> TableStore:
        return self.db.store(schema)

    def _require_write(self) -> CommitTs:
        if self.ts is None:
            raise TransactionError("cannot write in a read-only transaction")
        return self.ts

    # ------------------------------------------------------------------ helpers
    def _next_bsn(self, schema: TableSchema, tok: int) -> int:
        k = (schema.id, tok)
        n = self._bsn.get(k, 0)
        self._bsn[k] = n + 1
        return n

    def _touch(
        self, st: TableStore, static: bool, key: tuple[Any, ...], old: Row | None, cells: Sequence[int]
    ) -> None:
        cap = self._captures.get(st.schema.id)
        if cap is None or cap.store is not st:
            cap = self._captures.setdefault(st.schema.id, _Capture(st))
        t = cap.touched.get((static, key))
        if t is None:
            t = _Touch(static, key, old)
            cap.touched[(static, key)] = t
        t.mask.update(cells)

    def _log(
        self,
        st: TableStore,
        tok: int,
        op: int,
        key: Sequence[Any],
        cells: dict[int, Any],
        *,
        deleted_flags: bool,
        ttl: int | None = None,
    ) -> None:
        ts = self._require_write()
        ids = tuple(cells)
        params: list[Any] = [ts.wall, ts.logical, self.txid, tok, self._next_bsn(st.schema, tok), op, ttl]
        params.extend(key)
        params.extend([None] * (len(st.key_cols) - len(key)))
        params.extend(cells.values())
        if deleted_flags:
            params.extend(1 if v is None else None for v in cells.values())
        else:
            params.extend(None for _ in ids)
        self.conn.execute(st.journal_sql(ids), params)

    def _log_statement(
        self,
        st: TableStore,
        tok: int,
        key: Sequence[Any],
        op: int,
        cells: dict[int, Any],
        *,
        old: Row | None,
        image_ids: tuple[int, ...],
        ttl: int | None = None,
        new: Callable[[], Row | None] | None = None,
    ) -> None:
        """The ScyllaDB log entries of one statement on one row: its pre-image (the columns it
        changes, or all of ``image_ids`` with ``preimage = 'full'``; only if the row existed), its
        delta, and its post-image (``new`` reads the row afterwards; deletes have none)."""
        cdc = st.schema.cdc
        if cdc.preimage != "false" and old is not None:
            ids = image_ids if cdc.preimage == "full" or not cells else tuple(cells)
            self._log(st, tok, OP_PREIMAGE, key, {i: old.get(i) for i in ids}, deleted_flags=False)
        self._log(st, tok, op, key, cells if cdc.delta == "full" else {}, deleted_flags=True, ttl=ttl)
        if cdc.postimage and new is not None:
            after = new()
            if after is not None:
                self._log(
                    st, tok, OP_POSTIMAGE, key, {i: after.get(i) for i in image_ids}, deleted_flags=False
                )

    def _ttl_params(self, ttl: int | None, ids: Sequence[int]) -> tuple[int | None, str | None]:
        if ttl is None:
            return None, None
        at = self.now_ns + ttl * NS
        return at, orjson.dumps({f"c{i}": at for i in ids}).decode()

    # ================================================================== row writes
    def write_row(
        self,
        schema: TableSchema,
        key: tuple[Any, ...],
        cells: dict[int, Any],
        *,
        marker: bool,
        op: int,
        ttl: int | None = None,
        old: Row | bool | None = False,
    ) -> None:
        """Set ``cells`` (regular columns) of the row at ``key``; ``marker`` creates the row marker
        (CQL INSERT, every SQL write). ``op`` is the Scylla delta operation (1 update, 2 insert).
        ``old`` may pass the row as already read by the caller (False: not read yet)."""
        olds = None if old is False else ({key: old} if isinstance(old, dict) else {})
        self.write_rows(schema, [(key, cells)], marker=marker, op=op, ttl=ttl, olds=olds)

    def write_rows(
        self,
        schema: TableSchema,
        items: Sequence[tuple[tuple[Any, ...], dict[int, Any]]],
        *,
        marker: bool,
        op: int,
        ttl: int | None = None,
        olds: dict[tuple[Any, ...], Row] | None = None,
    ) -> None:
        """``write_row`` for many distinct keys that all set the same cells, in bulk: one bulk read
        of the old rows when images are needed (``olds`` passes rows the caller already read: a
        key missing from it did not exist), and ``executemany`` for data and journal."""
        ts = self._require_write()
        if not items:
            return
        st = self.store(schema)
        cdc = schema.cdc
        ids = tuple(items[0][1])
        keys = [k for k, _ in items]
        npk = len(st.pk_cols)
        toks = [token(k[:npk]) for k in keys]
        need_old = schema.changes or (cdc.enabled and (cdc.preimage != "false" or cdc.postimage))
        if need_old and olds is None:
            olds = st.get_rows(self.conn, keys, self.now_ns, toks)
        olds = olds or {}
        if schema.changes:
            for key, _ in items:
                self._touch(st, False, key, olds.get(key), ids)
        marker_at, exp = self._ttl_params(ttl, ids)
        tail: list[Any] = []
        if marker:
            tail.append(0 if marker_at is None else marker_at)
        if exp is not None:
            tail.append(exp)
        lead = st.cql
        data = []
        vanish = []
        for (key, cells), tok in zip(items, toks, strict=True):
            kp = [tok, *key] if lead else list(key)
            data.append([*kp, *cells.values(), *tail])
            if lead and not marker and None in cells.values():
                vanish.append(kp)
        self.conn.executemany(st.upsert_sql(ids, marker, exp is not None, False), data)
        if vanish:
            self.conn.executemany(st.vanish_sql(), vanish)
        if not cdc.enabled:
            return
        head = [ts.wall, ts.logical, self.txid]
        regular_ids = tuple(c.id for c in st.regular_cols)
        pre_ids = regular_ids if cdc.preimage == "full" else ids
        pre_rows, delta_rows, post_rows = [], [], []
        news: dict[tuple[Any, ...], Row] = {}
        if cdc.postimage and not marker:
            news = st.get_rows(self.conn, keys, self.now_ns, toks)
        delta_ids = ids if cdc.delta == "full" else ()
        bsn = self._bsn
        sid = schema.id
        for (key, cells), tok in zip(items, toks, strict=True):
            old = olds.get(key)
            n = bsn.get((sid, tok), 0)
            if cdc.preimage != "false" and old is not None:
                pre_rows.append(
                    [
                        *head,
                        tok,
                        n,
                        OP_PREIMAGE,
                        None,
                        *key,
                        *(old.get(i) for i in pre_ids),
                        *(None for _ in pre_ids),
                    ]
                )
                n += 1
            vals = [cells[i] for i in delta_ids]
            delta_rows.append(
                [*head, tok, n, op, ttl, *key, *vals, *(1 if v is None else None for v in vals)]
            )
            n += 1
            if cdc.postimage:
                # With a row marker written the row exists afterwards: old cells merged with the new.
                new = {**old, **cells} if marker and old is not None else cells if marker else news.get(key)
                if new is not None:
                    post_rows.append(
                        [
                            *head,
                            tok,
                            n,
                            OP_POSTIMAGE,
                            None,
                            *key,
                            *(new.get(i) for i in regular_ids),
                            *(None for _ in regular_ids),
                        ]
                    )
                    n += 1
            bsn[(sid, tok)] = n
        if pre_rows:
            self.conn.executemany(st.journal_sql(pre_ids), pre_rows)
        self.conn.executemany(st.journal_sql(delta_ids), delta_rows)
        if post_rows:
            self.conn.executemany(st.journal_sql(regular_ids), post_rows)

    def write_static(
        self, schema: TableSchema, pk: tuple[Any, ...], cells: dict[int, Any], *, ttl: int | None = None
    ) -> None:
        """Set static cells of partition ``pk`` (a CQL static-row update, always Scylla op 1)."""
        self._require_write()
        st = self.store(schema)
        cdc = schema.cdc
        need_old = schema.changes or (cdc.enabled and (cdc.preimage != "false" or cdc.postimage))
        old = st.get_static(self.conn, pk, self.now_ns) if need_old else None
        if schema.changes:
            self._touch(st, True, pk, old, tuple(cells))
        _, exp = self._ttl_params(ttl, tuple(cells))
        params = st.pk_params(pk)
        params.extend(cells.values())
        if exp is not None:
            params.append(exp)
        self.conn.execute(st.upsert_sql(tuple(cells), False, exp is not None, True), params)
        if any(v is None for v in cells.values()):
            self.conn.execute(st.static_vanish_sql(), st.pk_params(pk))
        if cdc.enabled:
            self._log_statement(
                st,
                token(pk),
                pk,
                OP_UPDATE,
                cells,
                old=old,
                image_ids=tuple(c.id for c in st.static_cols),
                ttl=ttl,
                new=lambda: st.get_static(self.conn, pk, self.now_ns),
            )

    def delete_row(
        self, schema: TableSchema, key: tuple[Any, ...], *, old: Row | bool | None = False
    ) -> None:
        """Delete one clustering row (CQL row delete, SQL DELETE of one row): Scylla op 3."""
        self._require_write()
        st = self.store(schema)
        cdc = schema.cdc
        need_old = schema.changes or (cdc.enabled and cdc.preimage != "false")
        if need_old and old is False:
            old = st.get_row(self.conn, key, self.now_ns)
        old_row = old if isinstance(old, dict) else None
        if schema.changes:
            self._touch(st, False, key, old_row, ())
        self.conn.execute(st.delete_row_sql(), st.key_params(key))
        if cdc.enabled:
            self._log_statement(
                st,
                token(key[: len(st.pk_cols)]),
                key,
                OP_ROW_DELETE,
                {},
                old=old_row,
                image_ids=tuple(c.id for c in st.regular_cols),
            )

    def delete_range(
        self,
        schema: TableSchema,
        pk: tuple[Any, ...],
        prefix: tuple[Any, ...],
        lower: Bound | None,
        upper: Bound | None,
    ) -> int:
        """Delete the clustering rows of partition ``pk`` whose clustering key starts with
        ``prefix`` and whose next clustering column lies between the bounds. Scylla ops 5-8."""
        self._require_write()
        st = self.store(schema)
        conds, params = [], []
        for c, v in zip(st.ck_cols, prefix, strict=False):
            conds.append(f"{c.db} = ?")
            params.append(v)
        if lower is not None or upper is not None:
            col = st.ck_cols[len(prefix)]
            if lower is not None:
                conds.append(f"{col.db} {'>=' if lower.inclusive else '>'} ?")
                params.append(lower.value)
            if upper is not None:
                conds.append(f"{col.db} {'<=' if upper.inclusive else '<'} ?")
                params.append(upper.value)
        where = " AND ".join(conds) or "1"
        removed = list(st.scan_rows(self.conn, self.now_ns, pk, where, params))
        if schema.changes:
            for row in removed:
                self._touch(st, False, tuple(row[c.id] for c in st.key_cols), row, ())
        cur = self.conn.execute(
            f"DELETE FROM {st.t} WHERE {st.pk_where} AND {where}", [*st.pk_params(pk), *params]
        )
        if schema.cdc.enabled:
            tok = token(pk)
            if lower is None and upper is None:
                lower_key: tuple[Any, ...] | None = pk + prefix
                upper_key: tuple[Any, ...] | None = pk + prefix
                lop, rop = OP_RANGE_LEFT_INCL, OP_RANGE_RIGHT_INCL
            else:
                lower_key = pk + prefix + (lower.value,) if lower is not None else None
                upper_key = pk + prefix + (upper.value,) if upper is not None else None
                lop = OP_RANGE_LEFT_INCL if lower is not None and lower.inclusive else OP_RANGE_LEFT_EXCL
                rop = OP_RANGE_RIGHT_INCL if upper is not None and upper.inclusive else OP_RANGE_RIGHT_EXCL
            if lower_key is not None:
                self._log(st, tok, lop, lower_key, {}, deleted_flags=False)
            if upper_key is not None:
                self._log(st, tok, rop, upper_key, {}, deleted_flags=False)
        return int(cur.rowcount)

    def delete_partition(self, schema: TableSchema, pk: tuple[Any, ...]) -> int:
        """Delete a whole CQL partition, its static row included: Scylla op 4."""
        self._require_write()
        st = self.store(schema)
        if schema.changes:
            for row in st.scan_rows(self.conn, self.now_ns, pk):
                self._touch(st, False, tuple(row[c.id] for c in st.key_cols), row, ())
            for srow in st.scan_statics(self.conn, self.now_ns, pk):
                self._touch(st, True, pk, srow, ())
        n = self.conn.execute(f"DELETE FROM {st.t} WHERE {st.pk_where}", st.pk_params(pk)).rowcount
        if st.static_cols:
            n += self.conn.execute(f"DELETE FROM {st.s} WHERE {st.pk_where}", st.pk_params(pk)).rowcount
        if schema.cdc.enabled:
            self._log(st, token(pk), OP_PARTITION_DELETE, pk, {}, deleted_flags=False)
        return int(n)

    # ================================================================== change stream
    def _flush_capture(self, cap: _Capture) -> None:
        st = cap.store
        ts = self._require_write()
        rows = []
        news = st.get_rows(self.conn, [t.key for t in cap.touched.values() if not t.static], self.now_ns)
        for t in cap.touched.values():
            if t.static:
                new = st.get_static(self.conn, t.key, self.now_ns)
                key_vals = dict(zip((c.id for c in st.pk_cols), t.key, strict=True))
            else:
                new = news.get(t.key)
                key_vals = dict(zip((c.id for c in st.key_cols), t.key, strict=True))
            op = CHANGE_UPSERT if new is not None else CHANGE_ERASE
            image = new if new is not None else key_vals
            params: list[Any] = [
                ts.wall,
                ts.logical,
                self.txid,
                op,
                1 if t.old is not None else 0,
                1 if t.static else 0,
            ]
            params.extend(image.get(c.id) for c in st.all_cols)
            params.extend(1 if c.id in t.mask else None for c in st.value_cols)
            old = t.old or {}
            params.extend(old.get(c.id) for c in st.value_cols)
            rows.append(params)
        if rows:
            self.conn.executemany(st.x_sql, rows)
