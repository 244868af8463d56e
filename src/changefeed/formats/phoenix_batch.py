"""The ``"CDC JSON"`` of many changes at once, text-identical to :class:`EventEncoder`.

Per change, :meth:`EventEncoder.encode` decides the *shape* of the event (its type, which columns
the pre image holds, which the change wrote, whether the post image has to be rebuilt) and then
joins rendered values into that shape. In a batch the shapes are few: every change with the same
presence bits (event type, row existed, old value present, column written, new value null per
column) has the same keys in the same Java HashMap order. SQLite computes those bits as one
integer per change while it reads the range (:func:`changefeed.engine.phoenix.shape_sql`), numpy
groups the batch by it, each distinct shape becomes one ``%``-template built once by the scalar
encoder's own ordering rules, the values are rendered column by column, and each event is one
C-level ``template % values``. Shapes that need a per-row decision (a post image whose pre-image
columns changed: the row was deleted and re-written in one transaction) are split by a second
integer of per-column "new differs from old" bits, also computed by SQLite. Tables with too many
value columns to pack the bits use the scalar path.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator, Mapping, Sequence
from operator import itemgetter
from typing import Any

import numpy as np

from changefeed.engine import phoenix
from changefeed.engine.catalog import TableSchema
from changefeed.formats.phoenix_json import (
    CHANGE_IMAGE,
    DELETE,
    EVENT_TYPE,
    POST_IMAGE,
    PRE_IMAGE,
    TTL_DELETE,
    UPSERT,
    EventEncoder,
)

#: Tables with more value columns than fit the shape bits use the scalar encoder.
MAX_BATCH_COLUMNS = phoenix.MAX_CODED_COLUMNS
_EVENTS = (DELETE, UPSERT, TTL_DELETE)
_EPOCH = dt.datetime(1970, 1, 1)  # PHOENIX_ROW_TIMESTAMP(): ms since it, GMT, naive
_MS = dt.timedelta(milliseconds=1)
_NEW, _OLD = 0, 1


class BatchEncoder:
    """Encodes change rows read by :func:`changefeed.engine.phoenix.scan_raw` with
    ``coded=True``; the shape bits are the same as :func:`changefeed.engine.phoenix.shape_sql`'s."""

    def __init__(self, encoder: EventEncoder, key_count: int) -> None:
        self.enc = encoder
        self.nk = key_count
        self.nv = len(encoder.names)
        #: The coded rows' layout (:func:`changefeed.engine.phoenix.range_sql`): the differs bits
        #: above the shape's in one integer, or a column of their own; where the values start.
        self.folded = self.nv <= phoenix.MAX_FOLDED_COLUMNS
        self.shape_bits = 3 + 3 * self.nv
        self.values_at = key_count + (3 if self.folded else 4)
        self._templates: dict[tuple[int, bool], tuple[list[str], list[tuple[int, int]]]] = {}
        self._formats: dict[tuple[int, bool], tuple[str, list[tuple[int, int]]]] = {}

    # ------------------------------------------------------------------ shapes
    def _shape(self, code: int) -> tuple[str, bool, tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        nv = self.nv
        event = _EVENTS[code & 3]
        existed = bool(code >> 2 & 1)
        bits = [(code >> (3 + 3 * i)) & 7 for i in range(nv)]
        old_present = tuple(i for i in range(nv) if bits[i] & 1)
        written = tuple(i for i in range(nv) if bits[i] & 2)
        new_null = tuple(i for i in range(nv) if bits[i] & 4)
        return event, existed, old_present, written, new_null

    def pieces(self, code: int, rewrite: bool) -> tuple[list[str], list[tuple[int, int]]]:
        """``(texts, slots)``: the event's text cut where values go (one more text than slots),
        and for each slot (image, column) — the same decisions as :meth:`EventEncoder.encode`,
        taken once."""
        got = self._templates.get((code, rewrite))
        if got is not None:
            return got
        enc, nv = self.enc, self.nv
        event, existed, old_present, written, new_null = self._shape(code)
        scopes = enc.scopes
        want_pre = "PRE" in scopes
        want_change = event == UPSERT and "CHANGE" in scopes
        want_post = event == UPSERT and "POST" in scopes
        pre_idx: tuple[int, ...] = old_present if existed and (want_pre or want_post) else ()
        parts: dict[str, list[str | tuple[int, int]]] = {EVENT_TYPE: ['"' + event + '"']}

        def image(cols: Sequence[int], kind: int) -> list[str | tuple[int, int]]:
            out: list[str | tuple[int, int]] = ["{"]
            for j, i in enumerate(cols):
                out.append(("," if j else "") + enc.keys[i])
                out.append((kind, i))
            out.append("}")
            return out

        if want_pre:
            parts[PRE_IMAGE] = image(enc._order(pre_idx), _OLD)
        if want_change or want_post:
            immutable = enc.immutable
            change_idx = tuple(i for i in written if not (immutable and i in new_null))
            if want_change:
                parts[CHANGE_IMAGE] = image(enc._order(change_idx), _NEW)
            if want_post:
                merged = enc._post_order(pre_idx, change_idx)
                if rewrite:
                    post_idx = [i for i in range(nv) if i not in new_null or (i in written and not immutable)]
                    parts[POST_IMAGE] = image(enc._order(tuple(post_idx)), _NEW)
                else:
                    parts[POST_IMAGE] = image([i for i, _ in merged], _NEW)
        texts: list[str] = []
        text: list[str] = ["{"]
        slots: list[tuple[int, int]] = []
        for j, k in enumerate(enc._top_order(event)):
            text.append(("," if j else "") + '"' + k + '":')
            for piece in parts[k]:
                if isinstance(piece, tuple):
                    texts.append("".join(text))
                    text = []
                    slots.append(piece)
                else:
                    text.append(piece)
        text.append("}")
        texts.append("".join(text))
        got = self._templates[(code, rewrite)] = (texts, slots)
        return got

    def _template(self, code: int, rewrite: bool) -> tuple[str, list[tuple[int, int]]]:
        """``(format, slots)``: :meth:`pieces` as one ``%``-format with ``%s`` where values go."""
        got = self._formats.get((code, rewrite))
        if got is None:
            texts, slots = self.pieces(code, rewrite)
            got = self._formats[(code, rewrite)] = ("%s".join(t.replace("%", "%%") for t in texts), slots)
        return got

    def _rewrites(self, code: int) -> list[int]:
        """Columns whose pre-image value a post image of this shape keeps (not from the change):
        if any differs from the new value the row was re-written and the post image is rebuilt."""
        enc = self.enc
        event, existed, old_present, written, new_null = self._shape(code)
        if event != UPSERT or "POST" not in enc.scopes or not existed:
            return []
        change_idx = tuple(i for i in written if not (enc.immutable and i in new_null))
        return [i for i, from_change in enc._post_order(old_present, change_idx) if not from_change]

    # ------------------------------------------------------------------ encoding
    def groups(
        self, code: np.ndarray[Any, Any], differs: Callable[[], np.ndarray[Any, Any]]
    ) -> Iterator[tuple[np.ndarray[Any, Any] | None, int, bool]]:
        """The rows of a batch that share a template: ``(rows, shape, rewrite)``, ``rows`` an
        array of row numbers or None for all of them; ``differs()`` gives each row's differs bits
        when a shape needs them (:meth:`_rewrites`)."""
        n = len(code)
        uniq, inverse = np.unique(code, return_inverse=True)
        whole = len(uniq) == 1
        for g, c in enumerate(uniq.tolist()):
            idx = None if whole else np.flatnonzero(inverse == g)
            kept = self._rewrites(c)
            if not kept:
                yield idx, c, False
                continue
            mask = sum(1 << i for i in kept)
            rows = np.arange(n) if idx is None else idx
            diff = (differs()[rows] & mask) != 0
            for part, rewrite in ((rows[~diff], False), (rows[diff], True)):
                if len(part) == n:
                    yield None, c, rewrite
                elif len(part):
                    yield part, c, rewrite

    @property
    def wants_old(self) -> bool:
        """Whether :meth:`encode` needs the old values (a PRE image is asked for)."""
        return "PRE" in self.enc.scopes

    def encode(self, rows: Sequence[Sequence[Any]]) -> list[str]:
        """The texts of coded rows: ``(ms, key.., seq, code, [differs,] new.., [old..])`` as
        :func:`changefeed.engine.phoenix.scan_raw` reads them with ``coded=True`` (old values
        present exactly when :attr:`wants_old`)."""
        n = len(rows)
        if n == 0:
            return []
        nk, nv = self.nk, self.nv
        # Only the columns a shape uses are taken out of the rows, each when first needed.
        code = np.fromiter(map(itemgetter(2 + nk), rows), dtype=np.int64, count=n)
        differs_at: list[np.ndarray[Any, Any]] = []
        if self.folded:
            differs_at.append(code >> self.shape_bits)
            code = code & ((1 << self.shape_bits) - 1)
        base = self.values_at
        render = self.enc.render_column
        texts: list[list[list[str] | None]] = [[None] * nv, [None] * nv]

        def text(kind: int, i: int) -> list[str]:
            got = texts[kind][i]
            if got is None:
                at = base + i if kind == _NEW else base + nv + i
                got = texts[kind][i] = render[i](list(map(itemgetter(at), rows)))
            return got

        def differs() -> np.ndarray[Any, Any]:
            if not differs_at:
                differs_at.append(np.fromiter(map(itemgetter(3 + nk), rows), dtype=np.int64, count=n))
            return differs_at[0]

        out: list[str] = [""] * n
        for part, c, rewrite in self.groups(code, differs):
            fmt, slots = self._template(c, rewrite)
            if part is None:
                values = [text(k, i) for k, i in slots]
                out = [fmt % v for v in zip(*values, strict=True)] if values else [fmt % ()] * n
                continue
            sel = part.tolist()
            if not slots:
                s = fmt % ()
                for j in sel:
                    out[j] = s
                continue
            values = [[col[j] for j in sel] for col in (text(k, i) for k, i in slots)]
            for j, v in zip(sel, zip(*values, strict=True), strict=True):
                out[j] = fmt % v
        return out


def encoded_changes(
    conn: Any,
    schema: TableSchema,
    scopes: frozenset[str],
    lo_ms: int | None,
    hi_ms: int | None,
    *,
    key_eq: Mapping[int, Any] | None = None,
    descending: bool = False,
    buckets: Sequence[int] | None = None,
    after: tuple[int, tuple[Any, ...], int] | None = None,
    first: int = 64,
    most: int = 4096,
) -> Iterator[tuple[list[tuple[Any, ...]], list[str]]]:
    """The changes of a range in batches of ``(rows, CDC JSON texts)``; each row starts with
    ``(ms, key..)`` in storage values; ``after`` resumes strictly after a ``(ms, key, seq)``
    position. Batches grow from ``first`` rows (the first row of a
    time-range query comes at once) to ``most``."""
    enc = EventEncoder(schema, scopes)
    nk, nv = len(schema.key), len(schema.stored_values)
    batch = BatchEncoder(enc, nk) if nv <= MAX_BATCH_COLUMNS else None
    for chunk in phoenix.scan_batches(
        conn,
        schema,
        lo_ms,
        hi_ms,
        key_eq=key_eq,
        descending=descending,
        buckets=buckets,
        after=after,
        coded=batch is not None,
        with_old=batch is not None and batch.wants_old,
        first=first,
        most=most,
    ):
        if batch is not None:
            yield chunk, batch.encode(chunk)
        else:
            yield chunk, [enc.encode(phoenix.change_row(r, nk, nv)) for r in chunk]


#: Change rows encoded together by :func:`cdc_rows`.
CDC_BATCH_ROWS = 4096


def cdc_rows(
    conn: Any,
    schema: TableSchema,
    scopes: frozenset[str],
    lo_ms: int | None,
    hi_ms: int | None,
    *,
    key_eq: Mapping[int, Any] | None = None,
    descending: bool = False,
    buckets: Sequence[int] | None = None,
) -> Iterator[tuple[Any, ...]]:
    """CDC table rows ``(PHOENIX_ROW_TIMESTAMP(), key..., CDC JSON)`` in change order, encoded
    a batch at a time (:func:`~changefeed.formats.phoenix_batch.encoded_changes`); ``buckets``
    reads only those index buckets (one partition's, for ``PARTITION_ID()``)."""
    keys = schema.key
    nk = len(keys)
    convert = [(j, c.type.from_db) for j, c in enumerate(keys) if not c.type.stored_as_is]
    last_ms, when = None, _EPOCH
    for chunk, texts in encoded_changes(
        conn,
        schema,
        scopes,
        lo_ms,
        hi_ms,
        key_eq=key_eq,
        descending=descending,
        buckets=buckets,
        most=CDC_BATCH_ROWS,
    ):
        for r, text in zip(chunk, texts, strict=True):
            ms = r[0]
            if ms != last_ms:  # a commit's changes share their time: one datetime for them all
                last_ms, when = ms, _EPOCH + ms * _MS
            if convert:
                key = list(r[1 : 1 + nk])
                for j, f in convert:
                    key[j] = f(key[j])
                yield (when, *key, text)
            elif nk == 1:
                yield (when, r[1], text)
            else:
                yield (when, *r[1 : 1 + nk], text)
