"""What a transaction keeps of its own writes until it commits (``engine.txn``): per table the
keys it touched with their first images (:class:`Capture`), per table the next
``cdc$batch_seq_no`` of each partition it logged (:class:`SeqNos`), and, while it has
savepoints, the undo log that rolls this bookkeeping back to one of them (:class:`Undo`).

SQLite rolls the rows, the change rows and the log rows back to a savepoint itself; what lives
here is put back by the undo log: every change to it made while a savepoint exists records how
to take it back, so a ``SAVEPOINT`` costs nothing however much the transaction already wrote
(a copy of everything at each one made a savepoint per row of a bulk load quadratic), and
``ROLLBACK TO`` costs what was done since.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from changefeed.engine.catalog import Role
from changefeed.engine.storage import Row, TableStore

__all__ = ["Bulk", "Capture", "SeqNos", "Touch", "Undo", "erased_mask"]

#: A key's place in ``Capture.touched``: (static row, key).
TouchKey = tuple[bool, tuple[Any, ...]]
#: A bulk statement for the change stream: (erased, keys, cells column-wise, old rows by key).
Bulk = tuple[bool, Sequence[tuple[Any, ...]], Mapping[int, Sequence[Any]], dict[tuple[Any, ...], Row]]


class Undo:
    """The undo log of a transaction's bookkeeping: on (:meth:`mark`) while the transaction has
    a savepoint, each change records the call that takes it back; :meth:`back_to` runs them,
    latest first, down to a mark."""

    __slots__ = ("active", "entries")

    def __init__(self) -> None:
        self.entries: list[Callable[[], object]] = []
        self.active = False

    def record(self, take_back: Callable[[], object]) -> None:
        if self.active:
            self.entries.append(take_back)

    def mark(self) -> int:
        """A savepoint is taken: where rolling back to it stops."""
        self.active = True
        return len(self.entries)

    def back_to(self, at: int) -> None:
        while len(self.entries) > at:
            self.entries.pop()()

    def forget(self) -> None:
        """No savepoint is left: nothing will be rolled back but the whole transaction."""
        self.entries.clear()
        self.active = False


@dataclass(slots=True)
class Touch:
    static: bool
    key: tuple[Any, ...]
    old: Row | None
    mask: set[int] = field(default_factory=set)


def erased_mask(st: TableStore, static: bool) -> frozenset[int]:
    """The columns a delete writes (every value column of the row, to nothing): a key deleted
    then written again in one transaction has all of them in its change's written set, so an
    ``UPDATES`` record of it clears the columns the later write left out, as the table did."""
    return frozenset(c.id for c in st.value_cols if (c.role is Role.STATIC) == static)


@dataclass(slots=True)
class Capture:
    """The keys one transaction touched in one table, with their first (old) images. Changed
    only through its methods, which record their undo in ``undo``."""

    store: TableStore
    undo: Undo
    touched: dict[TouchKey, Touch] = field(default_factory=dict)
    #: The transaction's first statement on the table, when it was a bulk write with row markers
    #: or a bulk delete, kept column-wise: at commit its change rows are built from its cells
    #: without reading the rows back, unless a later statement on the table made it per key.
    bulk: Bulk | None = None
    #: Set when the first statement's change rows went to ``x<id>`` at once, old rows read by
    #: SQLite (``TableStore.capture_bulk_write``): the last ``seq`` number used before them, and the
    #: columns that statement wrote. ``direct_ids`` is None again once a later statement on the
    #: table has taken those rows back as per-key touches.
    seq_floor: int | None = None
    direct_ids: tuple[int, ...] | None = None
    #: The keys whose change rows went to ``x<id>`` at once (after ``seq_floor``).
    direct_keys: set[tuple[Any, ...]] = field(default_factory=set)

    def direct_more(self, ids: tuple[int, ...], keys: Sequence[tuple[Any, ...]]) -> bool:
        """Whether a bulk write of ``ids`` to ``keys`` may write its change rows at once: the
        table's first statement in the transaction, or one more after statements that all did,
        writing the same columns, none of them to one of ``keys``."""
        if self.seq_floor is None:
            return True
        return self.direct_ids == ids and self.direct_keys.isdisjoint(keys)

    def set_direct(self, ids: tuple[int, ...] | None) -> None:
        """The columns of the change rows written at once (None: none are, or they failed)."""
        self._restore_later("direct_ids")
        self.direct_ids = ids

    def direct_written(self, floor: int, keys: Sequence[tuple[Any, ...]]) -> None:
        """Change rows of ``keys`` went to ``x<id>`` at once, after ``seq`` ``floor`` if they
        were the table's first."""
        if self.seq_floor is None:
            self._restore_later("seq_floor")
            self.seq_floor = floor
        if self.undo.active:
            new = [k for k in keys if k not in self.direct_keys]
            direct = self.direct_keys
            self.undo.record(lambda: direct.difference_update(new))
        self.direct_keys.update(keys)

    def per_key(self, conn: sqlite3.Connection) -> dict[TouchKey, Touch]:
        if self.direct_ids is not None:
            self._take_back(conn, self.direct_ids)
        if self.bulk is not None:
            erased, keys, cells, olds = self.bulk
            self._restore_later("bulk")
            self.bulk = None
            mask = erased_mask(self.store, False) if erased else frozenset(cells)
            for key in keys:
                self._put((False, key), Touch(False, key, olds.get(key), set(mask)))
        return self.touched

    def touch(
        self,
        conn: sqlite3.Connection,
        static: bool,
        key: tuple[Any, ...],
        old: Row | None,
        cells: Iterable[int],
    ) -> None:
        """The transaction wrote ``cells`` of ``key``, whose row was ``old`` before it (kept
        only the first time: the first image)."""
        touched = self.per_key(conn)
        t = touched.get((static, key))
        if t is None:
            t = Touch(static, key, old)
            self._put((static, key), t)
        if self.undo.active:
            cells = tuple(cells)
            if not t.mask.issuperset(cells):
                before, mask = set(t.mask), t.mask
                self.undo.record(lambda: mask.intersection_update(before))
        t.mask.update(cells)

    def add_bulk(self, bulk: Bulk) -> bool:
        """Keep a bulk statement column-wise if it is the first on the table; False otherwise
        (the caller then touches its keys one by one)."""
        if self.bulk is not None or self.touched or self.seq_floor is not None:
            return False
        self._restore_later("bulk")
        self.bulk = bulk
        return True

    def _take_back(self, conn: sqlite3.Connection, mask: tuple[int, ...]) -> None:
        """Turn the change rows written at once back into per-key touches (their old images,
        the columns written) and delete them: the transaction's change rows for those keys are
        then written at commit, one per key, as for any other transaction (SQLite's savepoint
        brings the deleted rows back on a rollback to it)."""
        st = self.store
        if self.undo.active:
            ids, keys, direct = self.direct_ids, set(self.direct_keys), self.direct_keys

            def restore() -> None:
                self.direct_ids = ids
                direct.clear()
                direct.update(keys)

            self.undo.record(restore)
        self.direct_ids = None
        self.direct_keys.clear()
        kcols = [c.db for c in st.key_cols]
        vals = st.value_cols
        nk = len(kcols)
        select = ", ".join([*kcols, "ox", *(f"o{c.id}" for c in vals)])
        for r in conn.execute(f"SELECT {select} FROM {st.x} WHERE seq > ? ORDER BY seq", (self.seq_floor,)):
            key = tuple(r[:nk])
            old: Row | None = None
            if r[nk]:
                old = dict(zip((c.id for c in st.key_cols), key, strict=True))
                old.update(zip((c.id for c in vals), r[nk + 1 :], strict=True))
            self._put((False, key), Touch(False, key, old, set(mask)))
        conn.execute(f"DELETE FROM {st.x} WHERE seq > ?", (self.seq_floor,))
        # Give the numbers back: the change rows written at commit take them, as they would have.
        conn.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = ?", (self.seq_floor, st.x))

    def _put(self, k: TouchKey, t: Touch) -> None:
        if self.undo.active:
            touched, prev = self.touched, self.touched.get(k)
            if prev is None:
                self.undo.record(lambda: touched.pop(k, None))
            else:
                self.undo.record(lambda: touched.__setitem__(k, prev))
        self.touched[k] = t

    def _restore_later(self, name: str) -> None:
        if self.undo.active:
            value = getattr(self, name)
            self.undo.record(lambda: setattr(self, name, value))


@dataclass(slots=True)
class SeqNos:
    """The next ``cdc$batch_seq_no`` of each partition one transaction logged in one table.

    A bulk write of partitions the transaction has not logged yet is kept as a pending
    ``(partition keys, numbers used)`` segment and only indexed when a later write to the same
    table needs to look a partition up, so a one-statement transaction never builds the index."""

    undo: Undo
    next: dict[tuple[Any, ...], int] = field(default_factory=dict)
    pending: list[tuple[Sequence[tuple[Any, ...]], Sequence[int] | int]] = field(default_factory=list)

    def empty(self) -> bool:
        return not self.next and not self.pending

    def add_pending(self, pks: Sequence[tuple[Any, ...]], used: Sequence[int] | int) -> None:
        pending = self.pending
        self.undo.record(pending.pop)
        pending.append((pks, used))

    def get(self, pk: tuple[Any, ...]) -> int:
        """The numbers ``pk`` used so far (after :meth:`index`)."""
        return self.next.get(pk, 0)

    def set(self, pk: tuple[Any, ...], used: int) -> None:
        if self.undo.active:
            nxt = self.next
            prev = nxt.get(pk)
            if prev is None:
                self.undo.record(lambda: nxt.pop(pk, None))
            else:
                self.undo.record(lambda: nxt.__setitem__(pk, prev))
        self.next[pk] = used

    def index(self) -> None:
        """Fold the pending segments into the per-partition numbers."""
        if not self.pending:
            return
        if self.undo.active:
            pending, nxt = list(self.pending), self.next
            before = {pk: nxt.get(pk) for pks, _ in pending for pk in pks}

            def restore() -> None:
                for pk, v in before.items():
                    if v is None:
                        nxt.pop(pk, None)
                    else:
                        nxt[pk] = v
                self.pending[:] = pending

            self.undo.record(restore)
        for pks, used in self.pending:
            if isinstance(used, int):
                self.next.update(dict.fromkeys(pks, used))
            else:
                self.next.update(zip(pks, used, strict=True))
        self.pending.clear()
