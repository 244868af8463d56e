"""Reading YDB JSON changefeed records back into rows (the consumer side, issue 20).

An asynchronous replication reads its source's changefeeds (``FORMAT = 'JSON'``, ``MODE =
'UPDATES'``) and applies them to replicas; this module turns one record's JSON into what the
apply writes: the key's storage values, and either the columns the change wrote (``update``) or
an erase. Values are the inverse of :mod:`changefeed.formats.values` (YDB's rendering): numbers,
``"NaN"``/``"Infinity"`` doubles, Decimal strings, base64 ``String``, ISO dates and timestamps,
microsecond Intervals, embedded Json. A value that does not decode as its column's type is a
:class:`~changefeed.exceptions.TypeMismatch` naming the column: the apply stops the replication
with that error rather than write something else.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import orjson

from changefeed.engine.catalog import ColumnSchema, TableSchema
from changefeed.engine.types import Kind, SqlType
from changefeed.exceptions import TypeMismatch

UINT64_BIAS = 1 << 63
EPOCH_DATE = dt.date(1970, 1, 1)
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_SPECIAL_FLOATS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}

Decoder = Callable[[Any], Any]


def _bad(col: str, t: SqlType, v: Any) -> TypeMismatch:
    shown = repr(v) if len(repr(v)) <= 60 else repr(v)[:57] + "..."
    return TypeMismatch(f"column {col}: changefeed value {shown} is not a {t.name}")


def _iso_ts(text: str) -> dt.datetime:
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    v = dt.datetime.fromisoformat(text)
    return v if v.tzinfo is not None else v.replace(tzinfo=dt.UTC)


def _us(v: dt.datetime) -> int:
    d = v - EPOCH
    return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds


def raw_decoder(t: SqlType) -> Decoder:
    """JSON value (not None) -> storage value of type ``t``; raises TypeError, ValueError...
    on a value of another type (:func:`decoder` turns that into a TypeMismatch naming the column)."""
    k = t.kind
    if k is Kind.BOOL:

        def boolean(v: Any) -> int:
            if v is True:
                return 1
            if v is False:
                return 0
            raise TypeError

        return boolean
    if k in (Kind.INT, Kind.TIME, Kind.INTERVAL):

        def integer(v: Any) -> int:
            if type(v) is not int:
                raise TypeError
            return v

        return integer
    if k is Kind.UINT:
        bias = UINT64_BIAS if t.bits == 64 else 0

        def unsigned(v: Any) -> int:
            if type(v) is not int or v < 0:
                raise TypeError
            return v - bias

        return unsigned
    if k is Kind.VARINT:
        return lambda v: t.to_db(int(v))
    if k is Kind.FLOAT:

        def floating(v: Any) -> float:
            tv = type(v)
            if tv is float:
                return v  # type: ignore[no-any-return]
            if tv is int:
                return float(v)
            if tv is str:
                return _SPECIAL_FLOATS[v]
            raise TypeError

        return floating
    if k is Kind.DECIMAL:
        return lambda v: t.to_db(t.coerce(Decimal(v) if isinstance(v, str) else v))
    if k is Kind.BYTES:
        return lambda v: base64.b64decode(v, validate=True)
    if k is Kind.DATE:
        return lambda v: (dt.date.fromisoformat(v) - EPOCH_DATE).days
    if k is Kind.DATETIME:
        return lambda v: _us(_iso_ts(v)) // 1_000_000
    if k is Kind.TIMESTAMP:
        return lambda v: _us(_iso_ts(v))
    if k in (Kind.JSON, Kind.ARRAY):
        return lambda v: orjson.dumps(v).decode()

    def text(v: Any) -> str:  # text, uuid, timeuuid, inet, bit, enum: stored as their text
        if type(v) is not str:
            raise TypeError
        return v

    return text


def decoder(col: ColumnSchema) -> Decoder:
    """JSON value (as orjson parses it) -> storage value of ``col``; None stays None; a value of
    another type is a TypeMismatch naming the column."""
    t, name = col.type, col.name
    f = raw_decoder(t)

    def dec(v: Any) -> Any:
        if v is None:
            return None
        try:
            return f(v)
        except TypeMismatch:
            raise
        except (ValueError, TypeError, KeyError, InvalidOperation, OverflowError, binascii.Error):
            raise _bad(name, t, v) from None

    return dec


@dataclass(frozen=True, slots=True)
class Change:
    """One data record: the key (storage values) and the columns written (by column id), or an
    erase; ``ts`` is its virtual timestamp ``(step, txId)`` when the feed carries them."""

    key: tuple[Any, ...]
    erase: bool
    cells: Mapping[int, Any]
    ts: tuple[int, int] | None


@dataclass(frozen=True, slots=True)
class Barrier:
    """``{"resolved":[step,0]}``: every change below ``step`` (ms) is in this partition."""

    step: int
    tx: int


#: :meth:`RecordDecoder.parse`'s kinds of record.
UPDATE, ERASE, BARRIER = 0, 1, 2

Parsed = tuple[int, tuple[Any, ...], dict[int, Any], int | None]


def as_is(t: SqlType) -> type | None:
    """The JSON value type (as orjson parses it) a column of ``t`` stores unchanged, if any."""
    k = t.kind
    if k in (Kind.INT, Kind.TIME, Kind.INTERVAL):
        return int
    if k is Kind.FLOAT:
        return float
    if k in (Kind.TEXT, Kind.UUID, Kind.TIMEUUID, Kind.INET, Kind.BIT, Kind.ENUM):
        return str
    return None


def _key_decoder(fs: Sequence[Decoder]) -> Callable[[Any], tuple[Any, ...]]:
    """JSON key list -> key storage values (one- and two-column keys without a loop)."""
    if len(fs) == 1:
        f0 = fs[0]

        def one(key: Any) -> tuple[Any, ...]:
            (v,) = key
            return (None if v is None else f0(v),)

        return one
    if len(fs) == 2:
        f0, f1 = fs

        def two(key: Any) -> tuple[Any, ...]:
            a, b = key
            return (None if a is None else f0(a), None if b is None else f1(b))

        return two
    n = len(fs)

    def many(key: Any) -> tuple[Any, ...]:
        if len(key) != n:
            raise ValueError
        return tuple([None if v is None else f(v) for f, v in zip(fs, key)])  # noqa: B905

    return many


class RecordDecoder:
    """Decodes the records of one table's YDB JSON changefeed.

    The common case goes through :meth:`_fast` (no per-value error handling); a record it cannot
    decode is decoded again by :meth:`_checked`, which names what is wrong."""

    def __init__(self, table: TableSchema) -> None:
        self.table = table
        self.nk = len(table.key)
        self.keys = [decoder(c) for c in table.key]
        self.key_raw = [raw_decoder(c.type) for c in table.key]
        self.columns: dict[str, tuple[int, Decoder]] = {
            c.name: (c.id, decoder(c)) for c in table.stored_values
        }
        self.columns_raw: dict[str, tuple[int, Decoder]] = {
            c.name: (c.id, raw_decoder(c.type)) for c in table.stored_values
        }
        #: name -> (column id, decoder, the JSON value's type when it is stored as is)
        self.columns_fast: dict[str, tuple[int, Decoder, type | None]] = {
            c.name: (c.id, raw_decoder(c.type), as_is(c.type)) for c in table.stored_values
        }
        self.key_of = _key_decoder(self.key_raw)

    def decode(self, value: bytes | str | Mapping[str, Any]) -> Change | Barrier:
        rec = value if type(value) is dict else orjson.loads(value)  # type: ignore[arg-type]
        try:
            return self._fast(rec)
        except Exception:
            return self._checked(rec, value)

    def parse(self, rec: Any) -> Parsed:
        """One parsed record (orjson's dict) as ``(kind, key, cells, step)``, the apply's form:
        kind :data:`UPDATE` / :data:`ERASE` with the key's storage values and the columns written
        (by column id), and ``step`` the virtual timestamp's step (ms) when the feed carries
        them; or :data:`BARRIER` with the barrier's step. Same checks as :meth:`decode`."""
        try:
            if type(rec) is dict and "key" in rec:
                k = self.key_of(rec["key"])
                ts = rec.get("ts")
                step = ts[0] if ts is not None else None
                if type(step) is not int and step is not None:
                    raise TypeError
                if "erase" in rec:
                    return ERASE, k, {}, step
                cols = self.columns_fast
                cells: dict[int, Any] = {}
                for name, v in rec["update"].items():
                    cid, f, same = cols[name]
                    cells[cid] = v if v is None or type(v) is same else f(v)
                return UPDATE, k, cells, step
        except Exception:
            pass
        got = self._checked(rec, rec)
        if isinstance(got, Barrier):
            return BARRIER, (), {}, got.step
        return (ERASE if got.erase else UPDATE), got.key, dict(got.cells), (got.ts[0] if got.ts else None)

    def _fast(self, rec: dict[str, Any]) -> Change | Barrier:
        if "resolved" in rec:
            r = rec["resolved"]
            return Barrier(int(r[0]), int(r[1]))
        key = rec["key"]
        if len(key) != self.nk:
            raise ValueError
        k = tuple([None if v is None else f(v) for f, v in zip(self.key_raw, key)])  # noqa: B905
        ts = rec.get("ts")
        vts = (ts[0], ts[1]) if ts is not None else None
        if "erase" in rec:
            return Change(k, True, {}, vts)
        cols = self.columns_raw
        cells: dict[int, Any] = {}
        for name, v in rec["update"].items():
            cid, f = cols[name]
            cells[cid] = None if v is None else f(v)
        return Change(k, False, cells, vts)

    def _checked(self, rec: Any, value: Any) -> Change | Barrier:
        if not isinstance(rec, Mapping):
            raise TypeMismatch(f"changefeed record of {self.table.name} is not a JSON object: {value!r:.80}")
        if "resolved" in rec:
            r = rec["resolved"]
            try:
                return Barrier(int(r[0]), int(r[1]))
            except (TypeError, ValueError, IndexError, KeyError):
                raise TypeMismatch(f"changefeed record of {self.table.name}: bad barrier {r!r:.80}") from None
        key = rec.get("key")
        if not isinstance(key, list) or len(key) != len(self.keys):
            raise TypeMismatch(
                f"changefeed record of {self.table.name}: key {key!r:.80} does not match its {len(self.keys)} key column(s)"
            )
        k = tuple(d(v) for d, v in zip(self.keys, key, strict=True))
        ts = rec.get("ts")
        vts = (int(ts[0]), int(ts[1])) if isinstance(ts, list) and len(ts) == 2 else None
        if "erase" in rec:
            return Change(k, True, {}, vts)
        update = rec.get("update")
        if not isinstance(update, Mapping):
            raise TypeMismatch(
                f"changefeed record of {self.table.name} has neither update nor erase: {value!r:.80}"
            )
        cells: dict[int, Any] = {}
        for name, v in update.items():
            found = self.columns.get(name)
            if found is None:
                raise TypeMismatch(f"changefeed record of {self.table.name} names an unknown column {name!r}")
            cells[found[0]] = found[1](v)
        return Change(k, False, cells, vts)


def decode_many(dec: RecordDecoder, values: Sequence[bytes]) -> list[Change | Barrier]:
    return [dec.decode(v) for v in values]


__all__ = [
    "BARRIER",
    "ERASE",
    "UPDATE",
    "Barrier",
    "Change",
    "Decoder",
    "Parsed",
    "RecordDecoder",
    "decode_many",
    "decoder",
    "raw_decoder",
]
