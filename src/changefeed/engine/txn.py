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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from changefeed.engine import phoenix, privileges, replicas
from changefeed.engine.captures import Capture, SeqNos, Undo, erased_mask
from changefeed.engine.catalog import Role, TableSchema
from changefeed.engine.clock import CommitTs
from changefeed.engine.database import BUSY_TIMEOUT_MS, Database, WriteGate
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
    insert_columns,
    token,
)
from changefeed.exceptions import InvalidSavepoint, LockNotAvailable, TransactionError, UndefinedTable

NS = 1_000_000_000
#: A table's first bulk write with row markers in a transaction has SQLite read the old rows and
#: write its change rows at once (``TableStore.capture_bulk_write``) instead of reading the old
#: rows into Python; False takes the Python way (tests compare the two).
CAPTURE_IN_SQLITE = True


@dataclass(frozen=True, slots=True)
class _Mark:
    """A savepoint: what rolling back to it restores of the transaction's own state (SQLite
    restores the rows, the change rows written at once and the sequence counters)."""

    name: str
    undo_at: int  # where the undo log stood (``captures.Undo.mark``)
    after_commit: int
    phoenix_event: int
    catalog_changed: bool


def _savepoint_sql(name: str) -> str:
    """A user's savepoint as SQLite's, quoted and set apart from any the engine might take."""
    return '"user ' + name.replace('"', '""') + '"'


@dataclass(frozen=True, slots=True)
class Bound:
    """One side of a clustering range: the value of the ranged column and whether it is included."""

    value: Any
    inclusive: bool


class Transaction:
    """A SQLite transaction on a :class:`Database`; see the module docstring."""

    def __init__(self, db: Database, *, write: bool = True, replica_writer: bool = False) -> None:
        self.db = db
        #: The apply of an asynchronous replication: the only writer replica tables accept.
        self.replica_writer = replica_writer
        self.conn: sqlite3.Connection = db.conn
        self.write = write
        self.active = False
        self.ts: CommitTs | None = None
        self.txid = 0
        self._captures: dict[int, Capture] = {}
        self._bsn: dict[int, SeqNos] = {}  # per table id
        #: Takes the two back to a savepoint (on while the transaction has one).
        self._undo_log = Undo()
        #: The kind of Phoenix CDC event this transaction's changes index as (a TTL expiry pass
        #: sets ``phoenix.EV_TTL_DELETE``).
        self.phoenix_event = 0
        self._after_commit: list[Callable[[], None]] = []
        #: Savepoints, oldest first (a name may be taken again: the latest one counts).
        self._marks: list[_Mark] = []
        self._gate: WriteGate | None = None
        #: The commit group this transaction is a member of (``engine.commit_group``): it begins
        #: and ends as a savepoint of the group's SQLite transaction, which holds the gate.
        self._group = db.group
        if self._group is not None:
            self._group.enter()
        elif write:
            if not db.writers_wait:
                if not db.write_gate.acquire(blocking=False):
                    raise LockNotAvailable("another transaction of this process is writing")
            elif not db.write_gate.acquire(timeout=BUSY_TIMEOUT_MS / 1000):
                raise sqlite3.OperationalError("database is locked")
            self._gate = db.write_gate
        if self._group is None:
            try:
                if write and not db.writers_wait:
                    db.begin_immediate_nowait()
                else:
                    db.wait_for_locks()
                    self.conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            except BaseException:
                self._release()
                raise
        self.active = True
        try:
            if write:
                self.ts, self.txid, version = db.begin_write()
                db.refresh_catalog(version)
            else:
                db.refresh_catalog()
        except BaseException:
            self._undo()
            self.active = False
            self._release()
            raise
        self.now_ns = self.ts.wall if self.ts is not None else db.clock.now_ns()

    # ------------------------------------------------------------------ lifecycle
    def commit(self) -> None:
        if not self.active:
            raise TransactionError("there is no transaction in progress")
        try:
            for cap in self._captures.values():
                # Apache Phoenix (issue 11): a table with a CDC object indexes its change rows by
                # time, in this same transaction.
                cdc = phoenix.cdc_of(cap.store.schema) is not None
                before = 0
                if cdc:
                    before = (
                        cap.seq_floor
                        if cap.seq_floor is not None
                        else phoenix.last_change_seq(self.conn, cap.store.schema)
                    )
                self._flush_capture(cap)
                if cdc:
                    phoenix.index_changes(
                        self.conn, cap.store.schema, before, self._require_write().wall, self.phoenix_event
                    )
            if self._group is not None:
                self._group.leave(self._after_commit)
                self._after_commit = []
            else:
                ticket = self.db.commit_sqlite(wrote=self.write)
        except BaseException:
            self._undo()
            if self.db.catalog_changed:
                privileges.forget(self.conn)
            raise
        finally:
            self.active = False
            self.db.catalog_changed = False
            self._release()
        if self._group is not None:
            return  # committed (and acknowledged) with its group
        # Group commit: durable before acknowledged, waited for after the write lock is released
        # so that the transactions queued behind this one commit while it syncs.
        self.db.wait_durable(ticket)
        if self.write:
            self.db.commit_signal.notify()
        after, self._after_commit = self._after_commit, []
        for fn in after:
            fn()

    # ------------------------------------------------------------------ savepoints
    def savepoint(self, name: str) -> None:
        """``SAVEPOINT name``: a point this transaction can roll back to and go on from."""
        self._require_active()
        self.conn.execute(f"SAVEPOINT {_savepoint_sql(name)}")
        self._marks.append(
            _Mark(
                name,
                self._undo_log.mark(),
                len(self._after_commit),
                self.phoenix_event,
                self.db.catalog_changed,
            )
        )

    def release_savepoint(self, name: str) -> None:
        """``RELEASE SAVEPOINT name``: forget it and every savepoint taken after it; what was
        done since stays in the transaction."""
        at = self._mark_at(name)
        self.conn.execute(f"RELEASE {_savepoint_sql(name)}")
        del self._marks[at:]
        if not self._marks:
            self._undo_log.forget()

    def rollback_to_savepoint(self, name: str) -> None:
        """``ROLLBACK TO SAVEPOINT name``: undo everything done since it (rows, change rows,
        savepoints taken after it); it stays, to be rolled back to again or released."""
        at = self._mark_at(name)
        mark = self._marks[at]
        self.conn.execute(f"ROLLBACK TO {_savepoint_sql(name)}")
        del self._marks[at + 1 :]
        self._undo_log.back_to(mark.undo_at)
        del self._after_commit[mark.after_commit :]
        self.phoenix_event = mark.phoenix_event
        if self.db.catalog_changed:
            # DDL since the savepoint (or before it: reloading is harmless): the catalog as it is now
            privileges.forget(self.conn)
            self.db.refresh_catalog()
            self.db.catalog_changed = mark.catalog_changed

    def _mark_at(self, name: str) -> int:
        self._require_active()
        for at in range(len(self._marks) - 1, -1, -1):
            if self._marks[at].name == name:
                return at
        raise InvalidSavepoint(f'savepoint "{name}" does not exist')

    def _require_active(self) -> None:
        if not self.active:
            raise TransactionError("there is no transaction in progress")

    def after_commit(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` once this transaction has committed (never if it rolls back): for effects
        outside the database file, e.g. dropping a dropped feed's topic."""
        self._after_commit.append(fn)

    def rollback(self) -> None:
        if self.active:
            self.active = False
            try:
                self._undo()
            finally:
                self._release()
            if self.db.catalog_changed:
                # Privileges cached at a catalog version this rollback takes back.
                self.db.catalog_changed = False
                privileges.forget(self.conn)

    def _undo(self) -> None:
        """Take back what this transaction did: its SQLite transaction, or in a commit group its
        savepoint."""
        if self._group is not None:
            self._group.undo()
        elif self.conn.in_transaction:
            self.conn.execute("ROLLBACK")

    def _release(self) -> None:
        gate, self._gate = self._gate, None
        if gate is not None:
            gate.release()

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

    def _require_table_write(self, schema: TableSchema) -> CommitTs:
        """A write to ``schema``: a write transaction, and not a replica (issue 20) unless this is
        the replication's own apply."""
        ts = self._require_write()
        if not self.replica_writer:
            replicas.check_writable(schema)
        return ts

    # ------------------------------------------------------------------ helpers
    def _next_bsn(self, schema: TableSchema, pk: tuple[Any, ...]) -> int:
        seqnos = self._seqnos(schema.id)
        seqnos.index()
        n = seqnos.get(pk)
        seqnos.set(pk, n + 1)
        return n

    def _seqnos(self, tid: int) -> SeqNos:
        seqnos = self._bsn.get(tid)
        if seqnos is None:
            seqnos = self._bsn[tid] = SeqNos(self._undo_log)
            self._undo_log.record(lambda: self._bsn.pop(tid, None))
        return seqnos

    def _capture(self, st: TableStore) -> Capture:
        tid = st.schema.id
        cap = self._captures.get(tid)
        if cap is None:
            cap = self._captures[tid] = Capture(st, self._undo_log)
            self._undo_log.record(lambda: self._captures.pop(tid, None))
        return cap

    def _touch(
        self, st: TableStore, static: bool, key: tuple[Any, ...], old: Row | None, cells: Iterable[int]
    ) -> None:
        self._capture(st).touch(self.conn, static, key, old, cells)

    def _log(
        self,
        st: TableStore,
        op: int,
        key: tuple[Any, ...],
        cells: dict[int, Any],
        *,
        deleted_flags: bool,
        ttl: int | None = None,
    ) -> None:
        """One ScyllaDB log row. ``key`` may be a key prefix (range bounds, partition deletes)."""
        ts = self._require_write()
        pk = key[: len(st.pk_cols)]
        row: dict[str, Any] = {
            "ts": ts.wall,
            "lg": ts.logical,
            "tx": self.txid,
            "tok": token(pk) if st.cql else None,  # SQL tables: computed when the log is read
            "bsn": self._next_bsn(st.schema, pk),
            "op": op,
            "ttl": ttl,
        }
        row.update(zip((c.db for c in st.key_cols), key, strict=False))
        row.update((f"c{i}", v) for i, v in cells.items())
        if deleted_flags:
            row.update((f"d{i}", 1) for i, v in cells.items() if v is None)
        insert_columns(self.conn, st.j, row, {}, 1)

    def _log_statement(
        self,
        st: TableStore,
        key: tuple[Any, ...],
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
            self._log(st, OP_PREIMAGE, key, {i: old.get(i) for i in ids}, deleted_flags=False)
        self._log(st, op, key, cells if cdc.delta == "full" else {}, deleted_flags=True, ttl=ttl)
        if cdc.postimage and new is not None:
            after = new()
            if after is not None:
                self._log(st, OP_POSTIMAGE, key, {i: after.get(i) for i in image_ids}, deleted_flags=False)

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
        columns = {i: (v,) for i, v in cells.items()}
        self.write_rows(schema, [key], columns, marker=marker, op=op, ttl=ttl, olds=olds)

    def write_rows(
        self,
        schema: TableSchema,
        keys: Sequence[tuple[Any, ...]],
        cells: Mapping[int, Sequence[Any]],
        *,
        marker: bool,
        op: int,
        ttl: int | None = None,
        olds: dict[tuple[Any, ...], Row] | None = None,
    ) -> None:
        """``write_row`` for many distinct keys that set the same cells, given column-wise:
        ``cells`` maps each regular column written to its values, one per key.

        Old rows are read in bulk when images need them (``olds`` passes rows the caller already
        read: a key missing from it did not exist); data and journal rows are built column by
        column and written with multi-row INSERTs (``storage.insert_columns``)."""
        self._require_table_write(schema)
        n = len(keys)
        if n == 0:
            return
        if ttl is None and marker:
            ttl = phoenix.row_ttl_s(schema)  # Apache Phoenix's table TTL: rows expire after it
        st = self.store(schema)
        if st.float_ids:
            st.check_no_nan(keys, cells)
        cdc = schema.cdc
        ids = tuple(cells)
        pks, toks = st.partitions(keys)
        need_old = schema.changes or (cdc.enabled and (cdc.preimage != "false" or cdc.postimage))
        floor: int | None = None
        if CAPTURE_IN_SQLITE and schema.changes and marker and not st.cql and not cdc.enabled and not olds:
            # The table's first statement in the transaction, with nothing else needing the old
            # rows: SQLite reads them and writes the change rows before the write itself, which
            # then takes the keys and cells from those change rows (bound once).
            # A later bulk write of the same columns to keys none of the earlier ones wrote (the
            # chunks of one pipelined batch) goes the same way: its change rows follow theirs.
            cap = self._capture(st)
            if cap.bulk is None and not cap.touched and cap.direct_more(ids, keys):
                ts = self._require_write()
                cap.set_direct(ids)
                try:
                    floor = st.capture_bulk_write(
                        self.conn, (ts.wall, ts.logical, self.txid, self.now_ns), keys, cells
                    )
                except BaseException:
                    cap.set_direct(None)
                    raise
                cap.direct_written(floor, keys)
        direct = floor is not None
        if need_old and olds is None and not direct:
            olds = st.get_rows(self.conn, keys, self.now_ns, toks or None)
        olds = olds or {}
        # A bulk write with row markers of fresh keys keeps its change rows column-wise.
        bulk_capture = direct or (
            marker and schema.changes and self._capture(st).add_bulk((False, keys, cells, olds))
        )
        if schema.changes and not bulk_capture:
            for key in keys:
                self._touch(st, False, key, olds.get(key), ids)
        marker_at, exp = self._ttl_params(ttl, ids)
        consts = {"_m": (marker_at or 0) if marker else None, "_exp": exp}
        tail = st.upsert_tail(ids, marker, exp is not None, False)
        if floor is not None:
            st.upsert_from_changes(self.conn, ids, consts, floor, tail)
            return  # no ScyllaDB log (cdc off), no CQL row to vanish
        key_columns = st.key_columns(keys)
        data: dict[str, Sequence[Any]] = {"_tok": toks} if st.cql else {}
        data.update(key_columns)
        data.update((f"c{i}", cells[i]) for i in ids)
        insert_columns(self.conn, st.t, consts, data, n, tail)
        if st.cql and not marker and any(None in cells[i] for i in ids):
            gone = [r for r in range(n) if any(cells[i][r] is None for i in ids)]
            self.conn.executemany(st.vanish_sql(), [[toks[r], *keys[r]] for r in gone])
        if cdc.enabled:
            self._journal_writes(st, keys, pks, toks, key_columns, cells, olds, marker=marker, op=op, ttl=ttl)

    def _journal_writes(
        self,
        st: TableStore,
        keys: Sequence[tuple[Any, ...]],
        pks: Sequence[tuple[Any, ...]],
        toks: list[int],
        key_columns: Mapping[str, Sequence[Any]],
        cells: Mapping[int, Sequence[Any]],
        olds: dict[tuple[Any, ...], Row],
        *,
        marker: bool,
        op: int,
        ttl: int | None,
    ) -> None:
        """The ScyllaDB log rows of ``write_rows`` and ``delete_rows``: per key its pre-image (if
        the row existed), its delta and its post-image (if the row exists afterwards), numbered
        by ``cdc$batch_seq_no`` per partition."""
        ts = self._require_write()
        cdc = st.schema.cdc
        n = len(keys)
        ids = tuple(cells)
        regular_ids = tuple(c.id for c in st.regular_cols)
        # Which rows get a pre-image and a post-image (None: every row), and the post columns.
        pre: list[int] = []
        if cdc.preimage != "false" and olds:
            pre = [r for r in range(n) if keys[r] in olds]
        post: list[int] | None = []
        post_cols: dict[int, Sequence[Any]] = {}
        if cdc.postimage and op == OP_ROW_DELETE:
            pass  # nothing is left to image
        elif cdc.postimage and marker:
            # The row exists afterwards: old cells merged with the new.
            post = None
            for i in regular_ids:
                if i in cells:
                    post_cols[i] = cells[i]
                elif olds:
                    post_cols[i] = [o.get(i) if (o := olds.get(k)) is not None else None for k in keys]
        elif cdc.postimage:
            news = st.get_rows(self.conn, keys, self.now_ns, toks or None)
            post = [r for r in range(n) if keys[r] in news]
            post_rows = [news[keys[r]] for r in post]
            post_cols = {i: [row.get(i) for row in post_rows] for i in regular_ids}
        # cdc$batch_seq_no: row r takes pre + 1 + post numbers in its partition, after those the
        # transaction already used there (base, all zero in the common case: new partitions).
        pre_flag = [0] * n
        for r in pre:
            pre_flag[r] = 1
        post_flag = [1] * n if post is None else [0] * n
        for r in post or ():
            post_flag[r] = 1
        seqnos = self._seqnos(st.schema.id)
        base: list[int] | None = None
        if seqnos.empty() and (pks is keys or len(set(pks)) == n):
            if pre or post:
                seqnos.add_pending(pks, [1 + a + b for a, b in zip(pre_flag, post_flag, strict=True)])
            else:
                seqnos.add_pending(pks, 1 if post == [] else 2)
        else:
            seqnos.index()
            base = []
            for r, pk in enumerate(pks):
                used = seqnos.get(pk)
                base.append(used)
                seqnos.set(pk, used + pre_flag[r] + 1 + post_flag[r])

        def seq_no(rows: list[int] | None, offset: list[int] | int) -> tuple[dict[str, Any], dict[str, Any]]:
            """(constants, columns) giving cdc$batch_seq_no = base + offset for ``rows``."""
            if base is None and isinstance(offset, int):
                return {"bsn": offset}, {}
            b = base or [0] * n
            off = [offset] * n if isinstance(offset, int) else offset
            return {}, {"bsn": [b[r] + off[r] for r in (range(n) if rows is None else rows)]}

        def key_subset(rows: list[int] | None) -> dict[str, Sequence[Any]]:
            """Token (CQL tables) and key columns of ``rows`` (None: every row)."""
            if rows is None:
                return {"tok": toks, **key_columns} if toks else dict(key_columns)
            out = st.key_columns([keys[r] for r in rows])
            return {"tok": [toks[r] for r in rows], **out} if toks else out

        head = {"ts": ts.wall, "lg": ts.logical, "tx": self.txid}
        if pre:
            # A delete changes every column, so even preimage = true shows them all.
            pre_ids = regular_ids if cdc.preimage == "full" or op == OP_ROW_DELETE else ids
            consts, cols = seq_no(pre, 0)
            cols.update(key_subset(pre))
            old_rows = [olds[keys[r]] for r in pre]
            cols.update((f"c{i}", [o.get(i) for o in old_rows]) for i in pre_ids)
            insert_columns(self.conn, st.j, {**head, **consts, "op": OP_PREIMAGE}, cols, len(pre))
        consts, cols = seq_no(None, pre_flag if pre else 0)
        cols.update(key_subset(None))
        if cdc.delta == "full":
            for i in ids:
                col = cells[i]
                cols[f"c{i}"] = col
                if None in col:  # else the flags stay NULL: nothing deleted
                    cols[f"d{i}"] = [1 if v is None else 0 for v in col]
        post_cols = {i: col for i, col in post_cols.items() if col.count(None) != len(col)}
        if post is None and cdc.delta == "full" and all(col is cells.get(i) for i, col in post_cols.items()):
            # Every post-image holds exactly the delta's values (the other columns null): insert
            # it as the delta row's twin, from the same bound values.
            twin = {"op": str(OP_POSTIMAGE), "bsn": "{} + 1", "ttl": "NULL"}
            twin.update((f"d{i}", "NULL") for i in ids)
            insert_columns(self.conn, st.j, {**head, **consts, "op": op, "ttl": ttl}, cols, n, twin=twin)
            return
        insert_columns(self.conn, st.j, {**head, **consts, "op": op, "ttl": ttl}, cols, n)
        if post is None or post:
            consts, cols = seq_no(post, [f + 1 for f in pre_flag] if pre else 1)
            cols.update(key_subset(post))
            cols.update((f"c{i}", col) for i, col in post_cols.items())
            count = n if post is None else len(post)
            insert_columns(self.conn, st.j, {**head, **consts, "op": OP_POSTIMAGE}, cols, count)

    def write_static(
        self, schema: TableSchema, pk: tuple[Any, ...], cells: dict[int, Any], *, ttl: int | None = None
    ) -> None:
        """Set static cells of partition ``pk`` (a CQL static-row update, always Scylla op 1)."""
        self._require_table_write(schema)
        st = self.store(schema)
        if st.float_ids:
            st.check_no_nan([pk], {i: (v,) for i, v in cells.items()})
        cdc = schema.cdc
        need_old = schema.changes or (cdc.enabled and (cdc.preimage != "false" or cdc.postimage))
        old = st.get_static(self.conn, pk, self.now_ns) if need_old else None
        if schema.changes:
            self._touch(st, True, pk, old, tuple(cells))
        _, exp = self._ttl_params(ttl, tuple(cells))
        row: dict[str, Any] = {"_tok": token(pk)}
        row.update(zip((c.db for c in st.pk_cols), pk, strict=True))
        row.update((f"c{i}", v) for i, v in cells.items())
        row["_exp"] = exp
        insert_columns(
            self.conn, st.s, row, {}, 1, st.upsert_tail(tuple(cells), False, exp is not None, True)
        )
        if any(v is None for v in cells.values()):
            self.conn.execute(st.static_vanish_sql(), st.pk_params(pk))
        if cdc.enabled:
            self._log_statement(
                st,
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
        """Delete one clustering row (CQL row delete, SQL DELETE of one row): Scylla op 3.
        ``old`` may pass the row as already read by the caller (False: not read yet)."""
        olds = None if old is False else ({key: old} if isinstance(old, dict) else {})
        self.delete_rows(schema, [key], olds=olds)

    def delete_rows(
        self,
        schema: TableSchema,
        keys: Sequence[tuple[Any, ...]],
        *,
        olds: dict[tuple[Any, ...], Row] | None = None,
    ) -> None:
        """``delete_row`` for many distinct keys, in bulk. A key without a row still logs its
        delete, as ScyllaDB does; only rows that existed get a pre-image."""
        self._require_table_write(schema)
        n = len(keys)
        if n == 0:
            return
        st = self.store(schema)
        cdc = schema.cdc
        pks, toks = st.partitions(keys)
        need_old = schema.changes or (cdc.enabled and cdc.preimage != "false")
        if need_old and olds is None:
            olds = st.get_rows(self.conn, keys, self.now_ns, toks or None)
        olds = olds or {}
        if schema.changes and not self._capture(st).add_bulk((True, keys, {}, olds)):
            erased = erased_mask(st, False)
            for key in keys:
                self._touch(st, False, key, olds.get(key), erased)
        params = [[t, *k] for t, k in zip(toks, keys, strict=True)] if st.cql else keys
        self.conn.executemany(st.delete_row_sql(), params)
        if cdc.enabled:
            self._journal_writes(
                st,
                keys,
                pks,
                toks,
                st.key_columns(keys),
                {},
                olds,
                marker=False,
                op=OP_ROW_DELETE,
                ttl=None,
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
        self._require_table_write(schema)
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
            erased = erased_mask(st, False)
            for row in removed:
                self._touch(st, False, tuple(row[c.id] for c in st.key_cols), row, erased)
        cur = self.conn.execute(
            f"DELETE FROM {st.t} WHERE {st.pk_where} AND {where}", [*st.pk_params(pk), *params]
        )
        if schema.cdc.enabled:
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
                self._log(st, lop, lower_key, {}, deleted_flags=False)
            if upper_key is not None:
                self._log(st, rop, upper_key, {}, deleted_flags=False)
        return int(cur.rowcount)

    def delete_partition(self, schema: TableSchema, pk: tuple[Any, ...]) -> int:
        """Delete a whole CQL partition, its static row included: Scylla op 4."""
        self._require_table_write(schema)
        st = self.store(schema)
        if schema.changes:
            erased = erased_mask(st, False)
            for row in st.scan_rows(self.conn, self.now_ns, pk):
                self._touch(st, False, tuple(row[c.id] for c in st.key_cols), row, erased)
            for srow in st.scan_statics(self.conn, self.now_ns, pk):
                self._touch(st, True, pk, srow, erased_mask(st, True))
        n = self.conn.execute(f"DELETE FROM {st.t} WHERE {st.pk_where}", st.pk_params(pk)).rowcount
        if st.static_cols:
            n += self.conn.execute(f"DELETE FROM {st.s} WHERE {st.pk_where}", st.pk_params(pk)).rowcount
        if schema.cdc.enabled:
            self._log(st, OP_PARTITION_DELETE, pk, {}, deleted_flags=False)
        return int(n)

    # ================================================================== change stream
    def _flush_capture(self, cap: Capture) -> None:
        if cap.direct_ids is not None:
            return  # the only statement's change rows are written already
        if cap.bulk is not None and not cap.touched:
            self._flush_bulk_capture(cap.store, *cap.bulk)
            return
        st = cap.store
        ts = self._require_write()
        cap.per_key(self.conn)
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

    def _flush_bulk_capture(
        self,
        st: TableStore,
        erased: bool,
        keys: Sequence[tuple[Any, ...]],
        cells: Mapping[int, Sequence[Any]],
        olds: dict[tuple[Any, ...], Row],
    ) -> None:
        """The change rows of one bulk statement, column-wise: after a write with row markers
        every row exists, its old cells overwritten by the written ones; after a delete none does
        (the new image is the key alone)."""
        ts = self._require_write()
        op = CHANGE_ERASE if erased else CHANGE_UPSERT
        consts: dict[str, Any] = {"ts": ts.wall, "lg": ts.logical, "tx": self.txid, "op": op, "st": 0}
        cols = st.key_columns(keys)
        old_rows = [olds.get(k) for k in keys] if olds else []
        if olds:
            cols["ox"] = [0 if o is None else 1 for o in old_rows]
        else:
            consts["ox"] = 0
        for c in st.value_cols:
            i = c.id
            if c.role is Role.STATIC:
                continue  # clustering-row changes carry no static cells
            olds_i = [None if o is None else o.get(i) for o in old_rows] if olds else []
            had = olds_i.count(None) != len(olds_i)  # else the column stays NULL
            if had:
                cols[f"o{i}"] = olds_i
            if erased:
                consts[f"u{i}"] = 1  # a delete writes every column (``erased_mask``)
                continue
            if i in cells:
                cols[c.db] = cells[i]
                consts[f"u{i}"] = 1
            elif had:
                cols[c.db] = olds_i
        insert_columns(self.conn, st.x, consts, cols, len(keys))
