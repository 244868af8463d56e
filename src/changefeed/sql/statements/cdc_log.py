"""ScyllaDB's CDC log table ``ks.t_scylla_cdc_log`` over the journal ``j<id>``: reads and deletes.

The log's partition key is ``cdc$stream_id`` and its clustering key ``(cdc$time,
cdc$batch_seq_no)``, as in ScyllaDB: rows come back stream by stream (streams in token order, see
``engine.cdc_streams``), each stream's changes in time order. A base partition's stream is that of
the vnode owning its token; ``cdc$time`` is the commit time, made distinct per base partition
within one transaction (``CommitTs.timeuuid``), and ``cdc$end_of_batch`` closes each
(stream, time) group, so ScyllaDB's CDC libraries see one change per base partition and commit.

Restrictions a ScyllaDB CDC reader sends, ``"cdc$stream_id" IN (..) AND "cdc$time" > ? AND
"cdc$time" <= ?``, are pushed down: the time window becomes a range of the journal's insertion
order (its time is monotonic in it), the streams a condition on the stored token, so a window read
costs the rows of the window, not of the log. Every other condition is then evaluated per row.
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from changefeed.engine.catalog import TableSchema
from changefeed.engine.cdc_streams import VNODES, generation, generation_at, vnode_of
from changefeed.engine.clock import CommitTs, timeuuid_key
from changefeed.engine.storage import tokens
from changefeed.engine.txn import Transaction
from changefeed.engine.type_names import resolve_type
from changefeed.engine.types import Kind, SqlType
from changefeed.exceptions import InvalidStatement
from changefeed.sql import ast
from changefeed.sql.evaluator import Evaluator, conjuncts, is_const
from changefeed.sql.statements.sqlite_columns import read_columns

#: The log's own columns, before the base table's.
META_COLUMNS = (
    ("cdc$stream_id", "blob"),
    ("cdc$time", "timeuuid"),
    ("cdc$batch_seq_no", "int"),
    ("cdc$end_of_batch", "boolean"),
    ("cdc$operation", "tinyint"),
    ("cdc$ttl", "bigint"),
)
#: Bits of the partition token that break ties between partitions of one commit (see module doc).
_TIEBREAK_MASK = (1 << 40) - 1


def _t(name: str) -> SqlType:
    return resolve_type(name, dialect="cql")


@dataclass(frozen=True, slots=True)
class Window:
    """What a WHERE pins down: streams (vnode indexes) and a time interval, as timeuuid keys."""

    vnodes: frozenset[int] | None = None
    lower: tuple[tuple[int, int], bool] | None = None  # (timeuuid_key, inclusive)
    upper: tuple[tuple[int, int], bool] | None = None
    #: The conjuncts of the WHERE the window does not apply (None: it applies all of them).
    residual: ast.Expr | None = None

    def admits(self, key: tuple[int, int]) -> bool:
        if self.lower is not None and (key < self.lower[0] or (key == self.lower[0] and not self.lower[1])):
            return False
        return not (
            self.upper is not None and (key > self.upper[0] or (key == self.upper[0] and not self.upper[1]))
        )

    def admits_all(self, ticks: np.ndarray, low: np.ndarray) -> np.ndarray:
        """:meth:`admits` of many timeuuid keys ``(ticks[i], low[i])`` at once."""
        keep = np.ones(len(ticks), dtype=bool)
        if self.lower is not None:
            (lt, ll), inclusive = self.lower
            at = (low >= ll) if inclusive else (low > ll)
            keep &= (ticks > lt) | ((ticks == lt) & at)
        if self.upper is not None:
            (ut, ul), inclusive = self.upper
            at = (low <= ul) if inclusive else (low < ul)
            keep &= (ticks < ut) | ((ticks == ut) & at)
        return keep


@dataclass(frozen=True, slots=True)
class LogColumns:
    """A window of a CDC log column-wise (:meth:`LogView.columns`): ``values[i]`` holds column
    ``names[i]`` of every row, as an Arrow array or, for types whose Python value Arrow does not
    carry as such, a list of Python values."""

    names: list[str]
    types: list[SqlType | None]
    rows: int
    values: list[pa.Array | list[Any]]


class LogView:
    """The log of one base table as a relation: column names, types, and rows for a window."""

    def __init__(self, txn: Transaction, base: TableSchema) -> None:
        self.txn = txn
        self.base = base
        self.st = txn.store(base)
        self.cols = [c for c in base.columns if not c.virtual]
        self.value_cols = [c for c in self.cols if not c.is_key]
        self.names = [n for n, _ in META_COLUMNS]
        self.names += [c.name for c in self.cols] + [f"cdc$deleted_{c.name}" for c in self.value_cols]
        self.types: list[SqlType | None] = [_t(t) for _, t in META_COLUMNS]
        self.types += [c.type for c in self.cols] + [_t("boolean") for _ in self.value_cols]
        self.gen = generation(txn.conn) or generation_at(0)
        # ``cdc$deleted_<col>`` flags come as one bit mask (mostly 0: no per-row list to build).
        mask = " | ".join(f"(COALESCE(d{c.id}, 0) << {i})" for i, c in enumerate(self.value_cols)) or "0"
        self._select = ", ".join(
            ["tok", "ts", "lg", "tx", "bsn", "op", "ttl", "seq"] + [c.db for c in self.cols]
        )
        self._select += f", {mask}"
        self._mask = mask
        n = len(self.value_cols)
        self._dels: dict[int, tuple[bool | None, ...]] = {0: (None,) * n}
        self._ndels = n
        self._pk_at = [8 + self.cols.index(c) for c in self.st.pk_cols]

    # ------------------------------------------------------------------ pushdown
    def window(self, session: Any, where: ast.Expr | None, evaluator: Evaluator) -> Window:
        """The streams and time bounds the conjuncts of ``where`` fix (others are left to the caller)."""
        if where is None:
            return Window()
        vnodes: set[int] | None = None
        lower: tuple[tuple[int, int], bool] | None = None
        upper: tuple[tuple[int, int], bool] | None = None
        rest: list[ast.Expr] = []
        for rel in conjuncts(where):
            col, op, values = _restriction(session, rel, evaluator)
            if col == "cdc$stream_id" and op in ("=", "in") and all(isinstance(v, bytes) for v in values):
                found = {self.gen.index_of(v) for v in values if isinstance(v, bytes)}
                found.discard(None)
                picked = {i for i in found if i is not None}
                vnodes = picked if vnodes is None else vnodes & picked
            elif col == "cdc$time" and op in ("<", "<=", ">", ">=", "=") and len(values) == 1:
                v = values[0]
                if not isinstance(v, uuid.UUID) or v.version != 1:
                    rest.append(rel)
                    continue
                key = timeuuid_key(v)
                if op in (">", ">=", "="):
                    cand = (key, op != ">")
                    if lower is None or cand[0] > lower[0] or (cand[0] == lower[0] and not cand[1]):
                        lower = cand
                if op in ("<", "<=", "="):
                    cand = (key, op != "<")
                    if upper is None or cand[0] < upper[0] or (cand[0] == upper[0] and not cand[1]):
                        upper = cand
            else:
                rest.append(rel)
        residual: ast.Expr | None = None
        for rel in rest:
            residual = rel if residual is None else ast.BinaryOp("AND", residual, rel)
        return Window(None if vnodes is None else frozenset(vnodes), lower, upper, residual)

    # ------------------------------------------------------------------ rows
    def rows(self, window: Window = Window()) -> Iterator[tuple[Any, ...]]:
        """The log's rows within ``window``, in ScyllaDB's order (the hot loop of every log read:
        per row one tuple, one UUID, and conversions only for columns not stored as they are)."""
        raw = self._raw(window)
        ncols = len(self.cols)
        convert = [(8 + i, c.type.from_db) for i, c in enumerate(self.cols) if not c.type.stored_as_is]
        nvals = 8 + ncols
        dmasks = self._dels
        ndels = self._ndels
        streams = self.gen.streams
        lower, upper = window.lower, window.upper
        check_time = lower is not None or upper is not None
        new_uuid = _uuid_from_int
        last_wall = -1
        ticks = msb = sub = 0
        count = len(raw)
        for i in range(count):
            r = raw[i]
            tok, wall, lg, tx = r[0], r[1], r[2], r[3]
            if wall != last_wall:
                last_wall = wall
                ticks = wall // 100 + _GREGORIAN_TICKS
                msb = _msb_of(ticks) << 64
                sub = (wall % 100) << 55
            low = sub | (lg if lg < _LOGICAL_MAX else _LOGICAL_MAX) << 40 | (tok & _TIEBREAK_MASK)
            if check_time and not window.admits((ticks, low)):  # (ticks, low) is its timeuuid_key
                continue
            t = new_uuid(msb | (0x80 | (low >> 56) & 0x3F) << 56 | ((low & _LOW56) ^ _FLIP))
            if i + 1 < count:
                nxt = raw[i + 1]
                end = True if nxt[0] != tok or nxt[3] != tx else None
            else:
                end = True
            vals: Sequence[Any]
            if convert:
                changed = list(r[8:nvals])
                for at, f in convert:
                    changed[at - 8] = f(changed[at - 8])
                vals = changed
            else:
                vals = r[8:nvals]
            dmask = r[nvals]
            dels = dmasks.get(dmask)
            if dels is None:
                dels = dmasks[dmask] = tuple(True if dmask >> b & 1 else None for b in range(ndels))
            yield (streams[(tok >> _SHIFT) + _HALF], t, r[4], end, r[5], r[6], *vals, *dels)

    def _raw(self, window: Window) -> list[tuple[Any, ...]]:
        """The journal rows of ``window``'s seq range and streams, in log order (see :func:`log_order`)."""
        raw = self._fetch(window)
        if not raw:
            return raw
        keys = list(zip(*raw, strict=True))
        return list(_take(raw, log_order(keys[0], keys[1], keys[2], keys[4], keys[7])))

    def _fetch(self, window: Window) -> list[tuple[Any, ...]]:
        """The journal rows of ``window``'s seq range and streams in insertion (= commit) order,
        each ``(tok, ts, lg, tx, bsn, op, ttl, seq, <stored columns>, <deleted-columns mask>)``.
        The time bounds are applied only as far as the seq range goes (by tick)."""
        conn = self.txn.conn
        j = self.st.j
        found = self._conditions(window, streams=self.st.cql)
        if found is None:
            return []
        conds, params = found
        if self.st.cql:
            where = f" WHERE {' AND '.join(conds)}" if conds else ""
            # Read in insertion order and order here (numpy's lexsort of the keys): cheaper than
            # SQLite's sorter writing every fetched row to a temporary b-tree.
            return conn.execute(f"SELECT {self._select} FROM {j}{where} ORDER BY seq", params).fetchall()
        # SQL tables store no token: compute it from the partition key.
        where = f" WHERE {' AND '.join(conds)}" if conds else ""
        logged = conn.execute(f"SELECT {self._select} FROM {j}{where} ORDER BY seq", params).fetchall()
        toks = tokens(tuple(r[i] for i in self._pk_at) for r in logged)
        return [
            (tok, *r[1:])
            for tok, r in zip(toks, logged, strict=True)
            if window.vnodes is None or vnode_of(tok) in window.vnodes
        ]

    def _conditions(self, window: Window, streams: bool = True) -> tuple[list[str], list[Any]] | None:
        """The journal conditions (and their parameters) of ``window``'s seq range and, with
        ``streams``, its streams (as token ranges of the stored token); None when no row can match."""
        if window.vnodes is not None and not window.vnodes:
            return None
        conds: list[str] = []
        params: list[Any] = []
        lo, hi = self._seq_bounds(window)
        if lo is not None:
            conds.append("seq >= ?")
            params.append(lo)
        if hi is not None:
            conds.append("seq <= ?")
            params.append(hi)
        if streams and window.vnodes is not None:
            # vnode v holds the tokens t with t >> _SHIFT == v - _HALF: a range each (contiguous
            # vnodes merged), cheaper for SQLite than computing every row's vnode
            ranges: list[str] = []
            for first, last in _runs(sorted(window.vnodes)):
                lo_tok = (first - _HALF) << _SHIFT
                if last + 1 - _HALF >= 1 << (63 - _SHIFT):
                    ranges.append(f"tok >= {lo_tok}")
                else:
                    ranges.append(f"(tok >= {lo_tok} AND tok < {(last + 1 - _HALF) << _SHIFT})")
            conds.append(f"({' OR '.join(ranges)})")
        return conds, params

    # ------------------------------------------------------------------ column-wise
    def columns(self, window: Window = Window()) -> LogColumns:
        """The log's rows within ``window`` column-wise, in log order: the same values as
        :meth:`rows`, as Arrow arrays (``cdc$stream_id`` and ``cdc$time`` as 16-byte binaries,
        ``cdc$time`` holding the timeuuid's bytes) or, for columns whose stored form is not their
        value (decimals, dates, UUIDs..), as lists of Python values. Nothing is built per row but
        the database driver's tuples: Arrow converts them, and keys, order, times and flags are
        computed on arrays."""
        stored = self._read_stored(window)
        tok, ts, lg, tx, bsn = (_ints(stored[i]) for i in (0, 1, 2, 3, 4))
        n = len(tok)
        # insertion order (seq) breaks the remaining ties
        order = log_order(tok, ts, lg, bsn, _ints(stored[7]))
        # end of batch: the last row of its (partition, transaction) in log order, before the
        # exact time bounds apply (rows of one partition and transaction share one cdc$time)
        stok, stx = tok[order], tx[order]
        end = np.ones(n, dtype=bool)
        if n:
            end[:-1] = (stok[1:] != stok[:-1]) | (stx[1:] != stx[:-1])
        ticks = ts // 100 + _GREGORIAN_TICKS
        low = (ts % 100) << 55 | np.minimum(lg, _LOGICAL_MAX) << 40 | (tok & _TIEBREAK_MASK)
        if window.lower is not None or window.upper is not None:
            keep = window.admits_all(ticks[order], low[order])
            order, end = order[keep], end[keep]
        n = len(order)
        idx = pa.array(order, type=pa.int64())
        streams = np.frombuffer(b"".join(self.gen.streams), dtype="S16")
        out: list[pa.Array | list[Any]] = [
            _fixed16(streams[(tok[order] >> _SHIFT) + _HALF].tobytes(), n),
            _fixed16(_timeuuids(ticks[order], low[order]), n),
            pa.array(bsn[order], type=pa.int32()),
            _true_or_null(end),
            _as_array(stored[5], pa.int8()).take(idx),
            _as_array(stored[6], pa.int64()).take(idx),
        ]
        for i, c in enumerate(self.cols):
            out.append(_column(c.type, stored[8 + i], idx))
        mask = _ints(stored[8 + len(self.cols)])[order]
        for b in range(self._ndels):
            out.append(_true_or_null((mask >> b) & 1 == 1))
        return LogColumns(list(self.names), list(self.types), n, out)

    def _read_stored(self, window: Window) -> list[pa.Array | tuple[Any, ...]]:
        """The journal columns of ``window`` (as :meth:`_fetch` reads them), column-wise: read by
        SQLite's aggregates (``sqlite_columns``) where every column is an integer, text or blob,
        else converted from the fetched tuples."""
        classes = [pa.int64()] * 8 + [_STORAGE.get(c.type.kind) for c in self.cols] + [pa.int64()]
        if self.st.cql and all(c is not None and c != pa.float64() for c in classes):
            found = self._conditions(window)
            if found is None:
                return [pa.array([], type=c) for c in classes]
            exprs = [
                "tok",
                "ts",
                "lg",
                "tx",
                "bsn",
                "op",
                "ttl",
                "seq",
                *(c.db for c in self.cols),
                self._mask,
            ]
            nullable = (
                [True, False, False, False, False, False, True, False] + [True] * len(self.cols) + [False]
            )
            got = read_columns(self.txn.conn, self.st.j, exprs, classes, found[0], found[1], nullable)
            if got is not None:
                return list(got)
        return self._stored_arrays(self._fetch(window))

    def _stored_arrays(self, raw: list[tuple[Any, ...]]) -> list[pa.Array | tuple[Any, ...]]:
        """The fetched rows' columns: Arrow arrays of the storage class each column's values are
        stored as (one conversion of all tuples), or, where a value of another class defeats
        that, that column's values as they were fetched."""
        classes = [pa.int64()] * 8 + [_STORAGE.get(c.type.kind) for c in self.cols] + [pa.int64()]
        if all(t is not None for t in classes):
            struct = pa.struct([pa.field(f"f{i}", t) for i, t in enumerate(classes)])
            try:
                arrays: list[pa.Array | tuple[Any, ...]] = list(pa.array(raw, type=struct).flatten())
                return arrays
            except (pa.ArrowException, TypeError, ValueError, OverflowError):
                pass
        cols = list(zip(*raw, strict=True)) if raw else [()] * len(classes)
        out: list[pa.Array | tuple[Any, ...]] = []
        for col, t in zip(cols, classes, strict=True):
            try:
                out.append(col if t is None else pa.array(col, type=t))
            except (pa.ArrowException, TypeError, ValueError, OverflowError):
                out.append(col)
        return out

    def _seq_bounds(self, window: Window) -> tuple[int | None, int | None]:
        """The insertion-order range that holds the window's times (time is monotonic in ``seq``)."""
        lo = hi = None
        if window.lower is not None:
            lo = self._first_seq_at_or_after(window.lower[0][0] * 100 - _GREGORIAN_NS)
        if window.upper is not None:
            nxt = self._first_seq_at_or_after((window.upper[0][0] + 1) * 100 - _GREGORIAN_NS)
            hi = None if nxt is None else nxt - 1
        if window.lower is not None and lo is None:
            lo = 1 << 62  # nothing at or after the lower bound
        return lo, hi

    def _first_seq_at_or_after(self, wall: int) -> int | None:
        """The smallest ``seq`` whose commit time is at least ``wall`` ns (binary search on seq)."""
        conn = self.txn.conn
        j = self.st.j
        # (two subqueries: SQLite answers each from the rowid b-tree, but scans for min() and max() together)
        bounds = conn.execute(f"SELECT (SELECT min(seq) FROM {j}), (SELECT max(seq) FROM {j})").fetchone()
        if bounds is None or bounds[0] is None:
            return None
        lo, hi = int(bounds[0]), int(bounds[1])
        if conn.execute(f"SELECT ts FROM {j} WHERE seq = ?", (hi,)).fetchone()[0] < wall:
            return None
        probe = f"SELECT seq, ts FROM {j} WHERE seq >= ? ORDER BY seq LIMIT 1"
        while lo < hi:  # the first seq whose next row is at or after ``wall`` (monotonic)
            mid = (lo + hi) // 2
            seq, ts = conn.execute(probe, (mid,)).fetchone()
            if ts >= wall:
                hi = mid
            else:
                lo = int(seq) + 1
        return int(conn.execute(probe, (lo,)).fetchone()[0])

    # ------------------------------------------------------------------ deletes
    def delete(self, session: Any, where: ast.Expr | None, evaluator: Evaluator) -> int:
        """``DELETE FROM ks.t_scylla_cdc_log WHERE "cdc$stream_id" = .. [AND ..]``: the stream
        (the partition key) must be restricted, as ScyllaDB requires; any further conditions on
        ``cdc$time`` and ``cdc$batch_seq_no`` narrow it to rows of that partition."""
        window = self.window(session, where, evaluator)
        if window.vnodes is None:
            raise InvalidStatement("Some partition key parts are missing: cdc$stream_id")
        assert where is not None
        rest = [
            rel
            for rel in conjuncts(where)
            if _restriction(session, rel, evaluator)[0] not in ("cdc$stream_id", "cdc$time")
        ]
        for rel in rest:
            col = _restriction(session, rel, evaluator)[0]
            if col != "cdc$batch_seq_no":
                raise InvalidStatement(
                    "Invalid where clause: only the primary key (cdc$stream_id, cdc$time, "
                    "cdc$batch_seq_no) may be restricted in a DELETE from a CDC log"
                )
        index = {n: i for i, n in enumerate(self.names)}
        doomed: list[int] = []
        seqs = self._row_seqs(window)
        for row, seq in zip(self.rows(window), seqs, strict=True):
            scope = _scope(row, index)
            if all(evaluator.eval(rel, scope) is True for rel in rest):
                doomed.append(seq)
        for i in range(0, len(doomed), 500):
            part = doomed[i : i + 500]
            self.txn.conn.execute(
                f"DELETE FROM {self.st.j} WHERE seq IN ({', '.join('?' * len(part))})", part
            )
        return len(doomed)

    def _row_seqs(self, window: Window) -> list[int]:
        out = []
        for r in self._raw(window):
            if window.lower is None and window.upper is None:
                out.append(int(r[7]))
                continue
            t = CommitTs(r[1], r[2]).timeuuid(r[0] & _TIEBREAK_MASK)
            if window.admits(timeuuid_key(t)):
                out.append(int(r[7]))
        return out


_GREGORIAN_TICKS = 0x01B21DD213814000
_GREGORIAN_NS = _GREGORIAN_TICKS * 100
_LOGICAL_MAX = (1 << 15) - 1
_LOW56 = (1 << 56) - 1
_FLIP = 0x0080_8080_8080_8080
_SHIFT = 64 - VNODES.bit_length() + 1
_HALF = VNODES // 2


def log_order(
    tok: Sequence[int] | np.ndarray,
    ts: Sequence[int] | np.ndarray,
    lg: Sequence[int] | np.ndarray,
    bsn: Sequence[int] | np.ndarray,
    seq: Sequence[int] | np.ndarray,
) -> np.ndarray:
    """The positions of journal rows in ScyllaDB's log order: stream, time (commit time, logical
    counter, the partition tiebreak), ``cdc$batch_seq_no``, then insertion order."""
    t = np.asarray(tok, dtype=np.int64)
    order: np.ndarray = np.lexsort(
        (
            np.asarray(seq, dtype=np.int64),
            np.asarray(bsn, dtype=np.int64),
            t & _TIEBREAK_MASK,
            np.asarray(lg, dtype=np.int64),
            np.asarray(ts, dtype=np.int64),
            t >> _SHIFT,
        )
    )
    return order


def _runs(values: list[int]) -> list[tuple[int, int]]:
    """Sorted integers as (first, last) runs of consecutive ones."""
    out: list[tuple[int, int]] = []
    for v in values:
        if out and out[-1][1] + 1 == v:
            out[-1] = (out[-1][0], v)
        else:
            out.append((v, v))
    return out


def _take(rows: list[tuple[Any, ...]], order: np.ndarray) -> list[tuple[Any, ...]]:
    if len(order) == 1:
        return [rows[int(order[0])]]
    return list(operator.itemgetter(*order.tolist())(rows))


def _fixed16(data: bytes, n: int) -> pa.Array:
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(16), n, [None, pa.py_buffer(data)])


def _true_or_null(flags: np.ndarray) -> pa.Array:
    """A boolean column that is true where ``flags`` is and null elsewhere (``cdc$end_of_batch``
    and ``cdc$deleted_<col>`` are never false)."""
    return pa.array(np.ones(len(flags), dtype=bool), mask=~flags)


def _column(t: SqlType, stored: pa.Array | tuple[Any, ...], idx: pa.Array) -> pa.Array | list[Any]:
    """A base column's values in log order: an Arrow array for integers, text, bytes, booleans
    and floats stored as their value; Python values (``from_db``) otherwise."""
    if isinstance(stored, pa.Array):
        k = t.kind
        if (t.stored_as_is and k in (Kind.INT, Kind.TEXT, Kind.JSON, Kind.ENUM, Kind.BIT, Kind.INET)) or (
            k in (Kind.BYTES, Kind.FLOAT)
        ):
            return stored.take(idx)
        if k is Kind.BOOL:
            return pc.not_equal(stored.take(idx), 0)
        values = stored.take(idx).to_pylist()
    else:
        values = [stored[i] for i in idx.to_pylist()]
    f = t.from_db
    return [f(v) for v in values]


def _ints(stored: pa.Array | tuple[Any, ...]) -> np.ndarray:
    if isinstance(stored, pa.Array) and not stored.null_count:
        out: np.ndarray = stored.to_numpy()
        return out
    return np.array(stored if not isinstance(stored, pa.Array) else stored.to_pylist(), dtype=np.int64)


def _as_array(stored: pa.Array | tuple[Any, ...], t: pa.DataType) -> pa.Array:
    return stored.cast(t) if isinstance(stored, pa.Array) else pa.array(stored, type=t)


def _timeuuids(ticks: np.ndarray, low: np.ndarray) -> bytes:
    """The bytes of the version-1 UUIDs of timeuuid keys ``(ticks, low)`` (see ``CommitTs.timeuuid``)."""
    uticks = ticks.astype(np.uint64)
    ulow = low.astype(np.uint64)
    stamp = np.empty(len(ticks), dtype=[("msb", ">u8"), ("lsb", ">u8")])
    stamp["msb"] = (
        (uticks & np.uint64(0xFFFFFFFF)) << np.uint64(32)
        | ((uticks >> np.uint64(32)) & np.uint64(0xFFFF)) << np.uint64(16)
        | np.uint64(0x1000)
        | ((uticks >> np.uint64(48)) & np.uint64(0x0FFF))
    )
    stamp["lsb"] = (np.uint64(0x80) | (ulow >> np.uint64(56)) & np.uint64(0x3F)) << np.uint64(56) | (
        (ulow & np.uint64(_LOW56)) ^ np.uint64(_FLIP)
    )
    return stamp.tobytes()


#: The Arrow type of each kind's stored values (``SqlType.to_db``); kinds stored as more than one
#: class (varints: integers, or text past 64 bits) are read value by value.
_STORAGE: dict[Kind, pa.DataType] = {
    **dict.fromkeys(
        (Kind.BOOL, Kind.INT, Kind.UINT, Kind.DATE, Kind.DATETIME, Kind.TIMESTAMP, Kind.TIME, Kind.INTERVAL),
        pa.int64(),
    ),
    Kind.FLOAT: pa.float64(),
    **dict.fromkeys(
        (
            Kind.DECIMAL,
            Kind.TEXT,
            Kind.JSON,
            Kind.UUID,
            Kind.TIMEUUID,
            Kind.INET,
            Kind.BIT,
            Kind.ENUM,
            Kind.ARRAY,
        ),
        pa.string(),
    ),
    Kind.BYTES: pa.binary(),
}


def _msb_of(ticks: int) -> int:
    return (ticks & 0xFFFFFFFF) << 32 | ((ticks >> 32) & 0xFFFF) << 16 | 0x1000 | ((ticks >> 48) & 0x0FFF)


_UUID_NEW = object.__new__
_SET = object.__setattr__


def _uuid_from_int(value: int) -> uuid.UUID:
    """``uuid.UUID(int=value)`` without its argument checks (the value is built to be valid)."""
    u: uuid.UUID = _UUID_NEW(uuid.UUID)
    _SET(u, "int", value)
    _SET(u, "is_safe", uuid.SafeUUID.unknown)
    return u


def _scope(row: Sequence[Any], index: dict[str, int]) -> Any:
    from changefeed.sql.evaluator import RowMap, Scope

    return Scope(RowMap(tuple(row), index, {n.lower(): i for n, i in index.items()}))


def _restriction(session: Any, rel: ast.Expr, evaluator: Evaluator) -> tuple[str | None, str, list[Any]]:
    """(column, operator, constant values) of a ``column op constant`` or ``column IN (..)`` conjunct."""
    if isinstance(rel, ast.BinaryOp) and rel.op in ("=", "<", "<=", ">", ">="):
        left, right, op = rel.left, rel.right, str(rel.op)
        if not isinstance(left, ast.Column) and isinstance(right, ast.Column):
            left, right = right, left
            op = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(op, op)
        if isinstance(left, ast.Column) and is_const(right):
            return session.ident(left.name), op, [evaluator.eval(right, None)]
    if (
        isinstance(rel, ast.InList)
        and not rel.negated
        and isinstance(rel.expr, ast.Column)
        and all(is_const(x) for x in rel.items)
    ):
        values: list[Any] = []
        for x in rel.items:
            v = evaluator.eval(x, None)
            values.extend(v if isinstance(v, list | tuple) else [v])
        return session.ident(rel.expr.name), "in", values
    return None, "", []


__all__ = ["META_COLUMNS", "LogColumns", "LogView", "Window", "log_order"]
