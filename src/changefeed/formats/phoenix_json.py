"""Apache Phoenix's ``"CDC JSON"`` column, byte for byte as Phoenix writes it.

Phoenix builds each event as ``java.util.HashMap`` objects (``CDCChangeBuilder.buildCDCEvent``) and
serialises them with a plain Jackson ``ObjectMapper``: compact, nulls kept, keys in the maps'
iteration order. That order is the order of the keys' hash buckets (``String.hashCode`` spread by
``h ^ (h >>> 16)``, masked by the table capacity), ties in insertion order; it is reproduced here
by :func:`java_hashmap_order`, capacity growth included, so the text equals Phoenix's, not just
the parsed JSON.

Values are rendered as ``CDCUtil.getColumnEncodedValue`` does (reference §2): integers and
booleans as JSON literals, FLOAT/DOUBLE as Java's ``toString``, DECIMAL as ``BigDecimal``
normalised, CHAR without its pad, DATE/TIME/TIMESTAMP as ``java.sql.*.toString()`` in GMT (the
server time zone here), binary as padded base64, arrays as ``PhoenixArray.toString()`` and JSON
columns as their text. Everything here is pure.
"""

from __future__ import annotations

import base64
import datetime as dt
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

import numpy as np

from changefeed.engine import phoenix
from changefeed.engine.catalog import TableSchema
from changefeed.engine.phoenix import ChangeRow
from changefeed.engine.phoenix_types import resolve_phoenix_type
from changefeed.engine.types import Kind, SqlType, single_digits
from changefeed.formats.phoenix_arrow import double_texts

EVENT_TYPE = "event_type"
PRE_IMAGE = "pre_image"
POST_IMAGE = "post_image"
CHANGE_IMAGE = "change_image"
UPSERT = "upsert"
DELETE = "delete"
TTL_DELETE = "ttl_delete"
#: The change scopes of ``INCLUDE (..)`` and the ``CDC_INCLUDE`` hint (Phoenix 5.3.0's set).
SCOPES = ("PRE", "POST", "CHANGE")

_INT_MASK = 0xFFFFFFFF


# ====================================================================================== HashMap order


def java_string_hash(s: str) -> int:
    """``java.lang.String.hashCode()`` (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & _INT_MASK
    return h - (1 << 32) if h >= (1 << 31) else h


def _bucket(key: str, capacity: int) -> int:
    h = java_string_hash(key) & _INT_MASK
    return (h ^ (h >> 16)) & (capacity - 1)


def _table_size_for(n: int) -> int:
    cap = 1
    while cap < n:
        cap <<= 1
    return cap


class JavaHashMap:
    """The key order of a ``java.util.HashMap<String, Object>`` built by ``put`` and ``putAll``
    (default capacity 16, load factor 0.75). Iteration order depends only on the final capacity
    and insertion order, because resizing keeps each bucket's relative order."""

    __slots__ = ("_cap", "_items", "_threshold")

    def __init__(self) -> None:
        self._items: dict[str, Any] = {}
        self._cap = 0  # no table yet
        self._threshold = 0

    def _grow_to_hold(self, size: int) -> None:
        if self._cap == 0:
            self._cap = self._threshold if self._threshold else 16
            self._threshold = int(self._cap * 0.75)
        while size > self._threshold:
            self._cap <<= 1
            self._threshold = int(self._cap * 0.75)

    def put(self, key: str, value: Any) -> None:
        if key not in self._items:
            self._grow_to_hold(len(self._items) + 1)
        self._items[key] = value

    def put_all(self, other: JavaHashMap) -> None:
        s = len(other._items)
        if s == 0:
            return
        if self._cap == 0:  # an empty map pre-sizes its first table for the incoming entries
            t = _table_size_for(int(s / 0.75 + 1.0))
            if t > self._threshold:
                self._threshold = t
        elif s > self._threshold:
            self._cap <<= 1
            self._threshold = int(self._cap * 0.75)
        for k, v in other.items():
            self.put(k, v)

    def items(self) -> list[tuple[str, Any]]:
        """Entries in Java's iteration order."""
        cap = self._cap or 16
        order = sorted(enumerate(self._items.items()), key=lambda iv: (_bucket(iv[1][0], cap), iv[0]))
        return [kv for _, kv in order]

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def to_dict(self) -> dict[str, Any]:
        return {k: (v.to_dict() if isinstance(v, JavaHashMap) else v) for k, v in self.items()}


def java_hashmap_order(keys: Iterable[str]) -> list[str]:
    """The iteration order of a HashMap into which ``keys`` were put one by one."""
    m = JavaHashMap()
    for k in keys:
        m.put(k, None)
    return [k for k, _ in m.items()]


# ====================================================================================== values


def java_double(x: float) -> str:
    """``Double.toString``: shortest round-trip digits, plain between 1e-3 and 1e7, else ``d.dddE±n``."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    digits, exp = _shortest(abs(x))
    if 1e-3 <= abs(x) < 1e7:
        point = exp + 1  # digits before the decimal point
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return f"{sign}{digits}{'0' * (point - len(digits))}.0"
        return f"{sign}{digits[:point]}.{digits[point:]}"
    mant = digits[0] + "." + (digits[1:] or "0")
    return f"{sign}{mant}E{exp}"


def java_float(x: float) -> str:
    """``Float.toString`` of a 32-bit float: the shortest digits that round-trip as a float."""
    if math.isnan(x) or math.isinf(x) or x == 0:
        return java_double(x)
    digits = single_digits(x)
    return java_double(x if digits is None else float(digits))


def _shortest(x: float) -> tuple[str, int]:
    """(significant digits, decimal exponent of the first digit) of ``repr(x)``, for x > 0."""
    mant, _, e = repr(x).lower().partition("e")
    int_part, _, frac = mant.partition(".")
    digits = int_part + frac
    lead = len(digits) - len(digits.lstrip("0"))
    return digits.strip("0") or "0", len(int_part) - 1 - lead + (int(e) if e else 0)


def java_big_decimal(d: Decimal) -> str:
    """``BigDecimal.toString()`` of Phoenix's normalised (``stripTrailingZeros``) decimal."""
    n = d.normalize()
    if n.is_zero():
        return "0"
    return str(n)


def _two(n: int) -> str:
    return f"{n:02d}"


def java_sql_timestamp(v: dt.datetime) -> str:
    """``java.sql.Timestamp.toString()``: ``yyyy-mm-dd hh:mm:ss.f`` (fraction without trailing zeros)."""
    frac = f"{v.microsecond:06d}".rstrip("0") or "0"
    return (
        f"{v.year:04d}-{_two(v.month)}-{_two(v.day)} {_two(v.hour)}:{_two(v.minute)}:{_two(v.second)}.{frac}"
    )


def _as_gmt(v: Any) -> dt.datetime:
    if isinstance(v, dt.datetime):
        return v.astimezone(dt.UTC).replace(tzinfo=None) if v.tzinfo is not None else v
    if isinstance(v, dt.date):
        return dt.datetime(v.year, v.month, v.day)
    raise TypeError(f"not a date/time value: {v!r}")


def _array_element(v: Any, t: SqlType) -> str:
    if v is None:
        return "null"
    if t.kind in (Kind.TEXT,) or isinstance(v, str):
        return f"'{v}'"
    return _scalar_text(v, t)


def _scalar_text(v: Any, t: SqlType) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return java_float(v) if t.bits == 32 else java_double(v)
    if isinstance(v, Decimal):
        return java_big_decimal(v)
    if isinstance(v, bytes):
        return base64.b64encode(v).decode("ascii")
    if isinstance(v, dt.datetime | dt.date):
        return str(render_value(v, t))
    return str(v)


def render_value(v: Any, t: SqlType) -> Any:
    """A column value (the engine's Python value) as Phoenix puts it into the JSON: a Python
    value that :func:`dumps` writes as Jackson would (floats and decimals come back as
    :class:`RawNumber` so their Java spelling survives)."""
    if v is None:
        return None
    k = t.kind
    if k is Kind.ARRAY:
        el = t.element or t
        return "[" + ", ".join(_array_element(x, el) for x in v) + "]"
    if k is Kind.BOOL:
        return bool(v)
    if k in (Kind.INT, Kind.UINT, Kind.VARINT):
        return int(v)
    if k is Kind.FLOAT:
        return RawNumber(java_float(float(v)) if t.bits == 32 else java_double(float(v)))
    if k is Kind.DECIMAL:
        return RawNumber(java_big_decimal(Decimal(v)))
    if k is Kind.BYTES:
        return base64.b64encode(bytes(v)).decode("ascii")
    if k is Kind.TEXT:
        s = str(v)
        return s.rstrip(" ") if t.name.startswith("CHAR(") else s
    if k in (Kind.TIMESTAMP, Kind.DATETIME, Kind.DATE):
        g = _as_gmt(v)
        base = t.name.split("(")[0].upper().removeprefix("UNSIGNED_")
        if base == "DATE" or k is Kind.DATE:
            return f"{g.year:04d}-{_two(g.month)}-{_two(g.day)}"  # java.sql.Date: date only
        if base == "TIME":
            return f"{_two(g.hour)}:{_two(g.minute)}:{_two(g.second)}"  # java.sql.Time
        return java_sql_timestamp(g)
    if k is Kind.TIME:
        return v.strftime("%H:%M:%S") if isinstance(v, dt.time) else str(v)
    if k is Kind.JSON:
        return str(v)
    return str(v)


class RawNumber(str):
    """A JSON number whose text is given (Java's spelling of a double or BigDecimal)."""

    __slots__ = ()


# ====================================================================================== the event


def parse_scopes(words: Iterable[str]) -> frozenset[str]:
    """Upper-cased scope words; raises ValueError naming the first unknown one."""
    out = set()
    for w in words:
        u = w.strip().upper()
        if not u:
            continue
        if u not in SCOPES:
            raise ValueError(u)
        out.add(u)
    return frozenset(out)


def build_event(
    event_type: str,
    pre: Sequence[tuple[str, Any]] | None,
    change: Sequence[tuple[str, Any]],
    scopes: frozenset[str],
    post_override: Sequence[tuple[str, Any]] | None = None,
) -> JavaHashMap:
    """``CDCChangeBuilder.buildCDCEvent``: the event map of one change.

    ``pre`` is the pre-image as (display name, rendered value) pairs in the order the scanner
    met the cells (None for a fresh row: an empty image); ``change`` the columns the change
    wrote. Delete and ttl_delete events carry at most the pre-image. ``post_override`` is the
    row after the change when it is not the pre-image overwritten by the change (a delete and a
    re-insert of the row in one transaction)."""
    pre_map = JavaHashMap()
    for k, v in pre or ():
        pre_map.put(k, v)
    out = JavaHashMap()
    if "PRE" in scopes:
        out.put(PRE_IMAGE, pre_map)
    if event_type == UPSERT:
        change_map = JavaHashMap()
        for k, v in change:
            change_map.put(k, v)
        if "CHANGE" in scopes:
            out.put(CHANGE_IMAGE, change_map)
        if "POST" in scopes:
            post = JavaHashMap()
            if post_override is None:
                post.put_all(pre_map)
                post.put_all(change_map)
            else:
                for k, v in post_override:
                    post.put(k, v)
            out.put(POST_IMAGE, post)
    out.put(EVENT_TYPE, event_type)
    return out


# ====================================================================================== the CDC table

#: The CDC table's columns around the data table's key: the change time and the JSON.
ROW_TIMESTAMP = "PHOENIX_ROW_TIMESTAMP()"
CDC_JSON = "CDC JSON"
_DATE = resolve_phoenix_type("DATE")
_VARCHAR = resolve_phoenix_type("VARCHAR")


#: DOUBLE columns of at least this many values are rendered by Arrow's cast
#: (:func:`~changefeed.formats.phoenix_arrow.double_texts`), shorter ones value by value.
ARROW_DOUBLES_FROM = 128
_FLOATS = {float}  # columns holding NULLs or other types take the value-by-value path


def _column_renderer(t: SqlType, one: Any) -> Callable[[Sequence[Any]], list[str]]:
    """``one`` (:func:`_text_renderer`'s function) over a column of storage values, ``None``
    rendered ``null``: VARCHAR columns without characters to escape and DOUBLE columns of
    plain-range values take one C-level pass instead of a call per value (DOUBLE: Arrow's
    shortest-digits cast, about twice as fast as ``repr``)."""
    k = t.kind
    if k is Kind.TEXT and not t.name.startswith("CHAR("):

        def texts(col: Sequence[Any]) -> list[str]:
            try:
                joined = "".join(col)  # TypeError: a None or a value that is not a str
            except TypeError:
                joined = None
            if joined is not None and '"' not in joined and "\\" not in joined and joined.isprintable():
                return ['"' + v + '"' for v in col]
            return ["null" if v is None else one(v) for v in col]

        return texts
    if k is Kind.FLOAT and t.bits == 64:

        def doubles(col: Sequence[Any]) -> list[str]:
            if len(col) >= ARROW_DOUBLES_FROM and set(map(type, col)) == _FLOATS:
                return double_texts(np.array(col, dtype=np.float64), one)
            # repr is Java's Double.toString for floats in [1e-3, 1e7) (see _text_renderer)
            return [
                "null" if v is None else repr(v) if type(v) is float and 1e-3 <= abs(v) < 1e7 else one(v)
                for v in col
            ]

        return doubles
    return lambda col: ["null" if v is None else one(v) for v in col]


def event_json(schema: TableSchema, row: ChangeRow, scopes: frozenset[str]) -> str:
    """The ``"CDC JSON"`` of one change (see :class:`EventEncoder` for many)."""
    return EventEncoder(schema, scopes).encode(row)


def _text_renderer(t: SqlType) -> Any:
    """A storage value -> its JSON text, as Jackson writes Phoenix's rendering of it."""
    k = t.kind
    if k is Kind.INT or (k is Kind.UINT and t.bits < 64):
        return str
    if k is Kind.BOOL:
        return lambda v: "true" if v else "false"
    if k is Kind.FLOAT and t.bits == 64:

        def double(v: Any) -> str:
            # Python's repr is Java's Double.toString in [1e-3, 1e7): plain digits, ".0" kept.
            if 1e-3 <= abs(v) < 1e7:
                return repr(float(v))
            return java_double(float(v))

        return double
    if k is Kind.TEXT:
        char = t.name.startswith("CHAR(")

        def text(v: Any) -> str:
            s = str(v).rstrip(" ") if char else str(v)
            if s.isprintable() and '"' not in s and "\\" not in s:
                return '"' + s + '"'
            out: list[str] = []
            _write_str(s, out)
            return out[0]

        return text

    def generic(v: Any) -> str:
        return dumps(render_value(t.from_db(v), t))

    return generic


class EventEncoder:
    """:func:`event_json` compiled for one table (version) and scope set: column keys, value
    renderers and the Java HashMap key orders of each shape of image are computed once, so an
    event costs a few string joins."""

    def __init__(self, schema: TableSchema, scopes: frozenset[str]) -> None:
        vals = schema.stored_values
        self.scopes = scopes
        self.names = [phoenix.display_name(schema, c) for c in vals]
        self.keys = [dumps(n) + ":" for n in self.names]
        self.render = [_text_renderer(c.type) for c in vals]
        #: The same rendering of a whole column of values (None -> ``null``), for batches.
        self.render_column = [_column_renderer(c.type, f) for c, f in zip(vals, self.render, strict=True)]
        self.immutable = phoenix.phoenix_of(schema).immutable_rows
        self._orders: dict[Any, list[int]] = {}
        self._post_orders: dict[Any, list[tuple[int, bool]]] = {}
        self._top: dict[tuple[str, bool], list[str]] = {}

    def _order(self, idx: tuple[int, ...]) -> list[int]:
        """Column indices in the iteration order of a HashMap they were put into in turn."""
        got = self._orders.get(idx)
        if got is None:
            m = JavaHashMap()
            for i in idx:
                m.put(self.names[i], i)
            got = self._orders[idx] = [i for _, i in m.items()]
        return got

    def _post_order(self, pre: tuple[int, ...], change: tuple[int, ...]) -> list[tuple[int, bool]]:
        """(column index, from the change) in the order of ``putAll(pre); putAll(change)``."""
        key = (pre, change)
        got = self._post_orders.get(key)
        if got is None:
            pm, cm = JavaHashMap(), JavaHashMap()
            for i in pre:
                pm.put(self.names[i], (i, False))
            for i in change:
                cm.put(self.names[i], (i, True))
            post = JavaHashMap()
            post.put_all(pm)
            post.put_all(cm)
            got = self._post_orders[key] = [v for _, v in post.items()]
        return got

    def _top_order(self, event: str) -> list[str]:
        got = self._top.get((event, True))
        if got is None:
            keys = []
            if "PRE" in self.scopes:
                keys.append(PRE_IMAGE)
            if event == UPSERT:
                keys += [k for k, s in ((CHANGE_IMAGE, "CHANGE"), (POST_IMAGE, "POST")) if s in self.scopes]
            keys.append(EVENT_TYPE)
            got = self._top[(event, True)] = java_hashmap_order(keys)
        return got

    def _image(self, order: list[int], texts: list[str]) -> str:
        keys = self.keys
        return "{" + ",".join([keys[i] + texts[i] for i in order]) + "}"

    def encode(self, row: ChangeRow) -> str:
        event = TTL_DELETE if row.ev == phoenix.EV_TTL_DELETE else UPSERT if row.upsert else DELETE
        scopes, render, n = self.scopes, self.render, len(self.names)
        parts: dict[str, str] = {EVENT_TYPE: '"' + event + '"'}
        want_pre = "PRE" in scopes
        want_change = event == UPSERT and "CHANGE" in scopes
        want_post = event == UPSERT and "POST" in scopes
        old = row.old
        pre_idx: tuple[int, ...] = ()
        if row.existed and (want_pre or want_post):
            pre_idx = tuple([i for i in range(n) if old[i] is not None])
        if want_pre:
            old_t = [""] * n
            for i in pre_idx:
                old_t[i] = render[i](old[i])
            parts[PRE_IMAGE] = self._image(self._order(pre_idx), old_t)
        if want_change or want_post:
            new, written = row.new, row.written
            immutable = self.immutable
            change_idx = tuple([i for i in range(n) if written[i] and not (immutable and new[i] is None)])
            new_t = ["null" if v is None else render[i](v) for i, v in enumerate(new)]
            if want_change:
                parts[CHANGE_IMAGE] = self._image(self._order(change_idx), new_t)
            if want_post:
                merged = self._post_order(pre_idx, change_idx)
                # A column taken from the pre-image has the same value afterwards unless the
                # transaction deleted and re-wrote the row: then the post image is the row as it is.
                if row.existed and any(not from_change and new[i] != old[i] for i, from_change in merged):
                    post_idx = [i for i in range(n) if new[i] is not None or (written[i] and not immutable)]
                    parts[POST_IMAGE] = self._image(self._order(tuple(post_idx)), new_t)
                else:
                    keys = self.keys
                    parts[POST_IMAGE] = "{" + ",".join([keys[i] + new_t[i] for i, _ in merged]) + "}"
        return "{" + ",".join(['"' + k + '":' + parts[k] for k in self._top_order(event)]) + "}"


_EPOCH = dt.datetime(1970, 1, 1)
_MS = dt.timedelta(milliseconds=1)


def row_time(ms: int) -> dt.datetime:
    """``PHOENIX_ROW_TIMESTAMP()``: a Phoenix DATE (millisecond instant, GMT, naive)."""
    return _EPOCH + ms * _MS


def cdc_columns(schema: TableSchema) -> tuple[list[str], list[SqlType | None]]:
    names = [ROW_TIMESTAMP, *(c.name for c in schema.key), CDC_JSON]
    types: list[SqlType | None] = [_DATE, *(c.type for c in schema.key), _VARCHAR]
    return names, types


def dumps(value: Any) -> str:
    """Compact JSON as Jackson writes it (``JavaHashMap`` in its iteration order)."""
    parts: list[str] = []
    _write(value, parts)
    return "".join(parts)


def _write(v: Any, out: list[str]) -> None:
    if isinstance(v, JavaHashMap):
        out.append("{")
        for i, (k, x) in enumerate(v.items()):
            if i:
                out.append(",")
            _write_str(k, out)
            out.append(":")
            _write(x, out)
        out.append("}")
    elif isinstance(v, Mapping):
        out.append("{")
        for i, (k, x) in enumerate(v.items()):
            if i:
                out.append(",")
            _write_str(str(k), out)
            out.append(":")
            _write(x, out)
        out.append("}")
    elif v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif isinstance(v, RawNumber):
        out.append(str.__str__(v))
    elif isinstance(v, int):
        out.append(str(v))
    elif isinstance(v, float):
        out.append(java_double(v))
    elif isinstance(v, str):
        _write_str(v, out)
    else:
        _write_str(str(v), out)


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _write_str(s: str, out: list[str]) -> None:
    """A JSON string as Jackson escapes it: quotes, backslash, and control characters."""
    buf = ['"']
    for ch in s:
        e = _ESCAPES.get(ch)
        if e is not None:
            buf.append(e)
        elif ord(ch) < 0x20:
            buf.append(f"\\u{ord(ch):04X}")
        else:
            buf.append(ch)
    buf.append('"')
    out.append("".join(buf))


__all__ = [
    "CDC_JSON",
    "CHANGE_IMAGE",
    "DELETE",
    "EVENT_TYPE",
    "POST_IMAGE",
    "PRE_IMAGE",
    "ROW_TIMESTAMP",
    "SCOPES",
    "TTL_DELETE",
    "UPSERT",
    "EventEncoder",
    "JavaHashMap",
    "RawNumber",
    "build_event",
    "cdc_columns",
    "dumps",
    "event_json",
    "java_double",
    "java_float",
    "java_hashmap_order",
    "java_string_hash",
    "parse_scopes",
    "render_value",
    "row_time",
]
