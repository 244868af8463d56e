"""More of PostgreSQL's and CockroachDB's scalar functions (``sql.builtins`` merges them in):
regular expression replacement, arrays and text (``string_to_array``, ``array_to_string``,
``array_position``, ``cardinality``, ``translate``), ``format`` and ``quote_ident``, and JSONB
building and inspection (``jsonb_build_object``, ``to_jsonb``, ``jsonb_array_length``,
``jsonb_typeof``). JSONB values are JSON text, as the engine holds them."""

from __future__ import annotations

import datetime as dt
import math
import re
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from changefeed.engine import json_doc
from changefeed.engine.array_text import array_literal
from changefeed.engine.patterns import regex_replace
from changefeed.exceptions import (
    DivisionByZero,
    NumericValueOutOfRange,
    UnsupportedFeature,
)
from changefeed.sql.function_errors import invalid_argument, unknown_signature
from changefeed.sql.json_ops import document
from changefeed.sql.numeric import numeric_log
from changefeed.sql.text_out import to_text

__all__ = ["JSON_RESULTS", "MORE", "json_array_of", "json_object_of"]

#: Functions whose result is JSONB (what a prepared statement describes).
JSON_RESULTS = frozenset({"jsonb_build_object", "json_build_object", "to_jsonb", "to_json", "jsonb_build_array",
                          "json_build_array", "json_agg", "jsonb_agg", "json_object_agg", "jsonb_object_agg",
                          "jsonb_set"})  # fmt: skip


def _array(name: str, v: Any, args: tuple[Any, ...]) -> list[Any]:
    if isinstance(v, str):
        return array_literal(v)
    if not isinstance(v, list | tuple):
        raise unknown_signature(name, args)
    return list(v)


# ------------------------------------------------------------------------------ text and arrays


def _regexp_replace(*args: Any) -> str | None:
    """``regexp_replace(s, pattern, replacement [, flags])``: the first match replaced (every
    one with flag ``g``; ``i``: ignoring case); ``\\1``..``\\9`` in the replacement are the
    groups, ``\\&`` the whole match."""
    if not 3 <= len(args) <= 4:
        raise unknown_signature("regexp_replace", args)
    if any(a is None for a in args):
        return None
    s, pattern, replacement = args[0], args[1], args[2]
    flags = args[3] if len(args) == 4 else ""
    if not all(isinstance(a, str) for a in (s, pattern, replacement, flags)):
        raise unknown_signature("regexp_replace", args)
    unknown = set(flags) - set("gi")
    if unknown:
        raise invalid_argument(f'invalid regular expression option: "{"".join(sorted(unknown))}"', "22023")
    return regex_replace(pattern, s, _replacer(replacement), insensitive="i" in flags, every="g" in flags)


def _replacer(replacement: str) -> Callable[[Any], str]:
    parts = re.split(r"(\\[0-9&\\])", replacement)

    def fill(m: Any) -> str:
        out = []
        for p in parts:
            if len(p) == 2 and p[0] == "\\":
                if p[1] == "\\":
                    out.append("\\")
                else:
                    g = 0 if p[1] == "&" else int(p[1])
                    out.append((m.group(g) or "") if g <= (m.re.groups or 0) else "")
            else:
                out.append(p)
        return "".join(out)

    return fill


def _string_to_array(*args: Any) -> list[Any] | None:
    """``string_to_array(s, delimiter [, null_string])``: NULL delimiter splits into characters,
    an empty one keeps the string whole."""
    if not 2 <= len(args) <= 3:
        raise unknown_signature("string_to_array", args)
    s, delim = args[0], args[1]
    null = args[2] if len(args) == 3 else None
    if s is None:
        return None
    if not isinstance(s, str) or not (delim is None or isinstance(delim, str)):
        raise unknown_signature("string_to_array", args)
    if s == "":
        return []
    parts = list(s) if delim is None else [s] if delim == "" else s.split(delim)
    return [None if null is not None and p == null else p for p in parts]


def _array_to_string(*args: Any) -> str | None:
    """``array_to_string(array, delimiter [, null_string])``: NULLs left out unless
    ``null_string`` stands for them."""
    if not 2 <= len(args) <= 3:
        raise unknown_signature("array_to_string", args)
    arr, delim = args[0], args[1]
    null = args[2] if len(args) == 3 else None
    if arr is None or delim is None:
        return None
    items = _array("array_to_string", arr, args)
    texts = [to_text(v) if v is not None else null for v in items]
    return str(delim).join(t for t in texts if t is not None)


def _array_position(*args: Any) -> int | None:
    if len(args) != 2:
        raise unknown_signature("array_position", args)
    if args[0] is None:
        return None
    items = _array("array_position", args[0], args)
    target = args[1]
    for i, v in enumerate(items, 1):  # IS NOT DISTINCT FROM: a NULL finds a NULL
        if v is None or target is None:
            if v is None and target is None:
                return i
        elif v == target and isinstance(v, bool) == isinstance(target, bool):
            return i
    return None


def _cardinality(*args: Any) -> int | None:
    if len(args) != 1:
        raise unknown_signature("cardinality", args)
    return None if args[0] is None else len(_array("cardinality", args[0], args))


def _translate(*args: Any) -> str | None:
    if len(args) != 3:
        raise unknown_signature("translate", args)
    if any(a is None for a in args):
        return None
    s, src, dst = args
    if not all(isinstance(a, str) for a in args):
        raise unknown_signature("translate", args)
    table: dict[int, int | None] = {}
    for i, ch in enumerate(src):
        table.setdefault(ord(ch), ord(dst[i]) if i < len(dst) else None)
    return str(s).translate(table)


def _quote_ident(*args: Any) -> str | None:
    if len(args) != 1:
        raise unknown_signature("quote_ident", args)
    s = args[0]
    if s is None:
        return None
    if not isinstance(s, str):
        raise unknown_signature("quote_ident", args)
    return s if re.fullmatch(r"[a-z_][a-z0-9_$]*", s) else '"' + s.replace('"', '""') + '"'


def _format(*args: Any) -> str | None:
    """``format(fmt, ..)``: ``%s`` a value's text (NULL: empty), ``%I`` an identifier quoted as
    needed, ``%L`` a literal quoted (NULL: ``NULL``), ``%%`` a percent sign; ``%n$`` picks the
    n-th argument."""
    if not args:
        raise unknown_signature("format", args)
    fmt, values = args[0], args[1:]
    if fmt is None:
        return None
    if not isinstance(fmt, str):
        raise unknown_signature("format", args)
    out: list[str] = []
    i = 0
    next_arg = 0
    while i < len(fmt):
        ch = fmt[i]
        if ch != "%":
            out.append(ch)
            i += 1
            continue
        m = re.match(r"%(?:(\d+)\$)?([sIL%])", fmt[i:])
        if m is None:
            raise invalid_argument("unrecognized format() type specifier", "22023")
        i += m.end()
        kind = m.group(2)
        if kind == "%":
            out.append("%")
            continue
        at = int(m.group(1)) - 1 if m.group(1) else next_arg
        next_arg = at + 1
        if at >= len(values):
            raise invalid_argument("too few arguments for format()", "22023")
        v = values[at]
        if kind == "s":
            out.append("" if v is None else to_text(v))
        elif kind == "I":
            if v is None:
                raise invalid_argument("null values cannot be formatted as an SQL identifier", "22004")
            quoted = _quote_ident(to_text(v))
            out.append(quoted if quoted is not None else "")
        else:
            out.append("NULL" if v is None else "'" + to_text(v).replace("'", "''") + "'")
    return "".join(out)


# ------------------------------------------------------------------------------------ to_char

_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")  # fmt: skip
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
#: PostgreSQL's date/time template patterns, longest first (so ``HH24`` is not ``HH`` then ``24``).
_PATTERNS = ("HH24", "HH12", "YYYY", "MONTH", "Month", "month", "A.M.", "P.M.", "a.m.", "p.m.", "DDD", "DAY",
             "Day", "day", "MON", "Mon", "mon", "YYY", "HH", "MI", "SS", "MS", "US", "YY", "MM", "DD", "DY",
             "Dy", "dy", "AM", "PM", "am", "pm", "IW", "WW", "ID", "Q", "D", "Y", "J")  # fmt: skip
_TEMPLATE = re.compile(
    r"(FM)?(" + "|".join(re.escape(p) for p in _PATTERNS) + r')|"((?:[^"\\]|\\.)*)"|\\(.)|(.)', re.S
)


def _to_char(*args: Any) -> str | None:
    """``to_char(timestamp|date|interval, template)`` with PostgreSQL's date/time template
    patterns (``YYYY-MM-DD HH24:MI:SS``, ``Mon``, ``Day``, ``AM``, ``FM`` to drop padding, text in
    double quotes)."""
    if len(args) != 2:
        raise unknown_signature("to_char", args)
    v, template = args
    if v is None or template is None:
        return None
    if not isinstance(template, str):
        raise unknown_signature("to_char", args)
    if isinstance(v, int | float | Decimal) and not isinstance(v, bool):
        raise _unsupported("to_char of a number (its numeric template patterns) is not supported")
    if isinstance(v, dt.date) and not isinstance(v, dt.datetime):
        v = dt.datetime(v.year, v.month, v.day)
    if not isinstance(v, dt.datetime):
        raise unknown_signature("to_char", args)
    out: list[str] = []
    for m in _TEMPLATE.finditer(template):
        fm, pattern, quoted, escaped, other = m.groups()
        if pattern is not None:
            out.append(_field(v, pattern, fm is not None))
        elif quoted is not None:
            out.append(re.sub(r"\\(.)", r"\1", quoted))
        else:
            out.append(escaped if escaped is not None else other)
    return "".join(out)


def _field(t: dt.datetime, p: str, fm: bool) -> str:
    def num(n: int, width: int) -> str:
        return str(n) if fm else f"{n:0{width}d}"

    def name(full: str, width: int) -> str:
        text = full.upper() if p.isupper() else full.lower() if p.islower() else full
        return text if fm else text.ljust(width)

    hour12 = t.hour % 12 or 12
    if p == "YYYY":
        return num(t.year, 4)
    if p == "YYY":
        return num(t.year % 1000, 3)
    if p == "YY":
        return num(t.year % 100, 2)
    if p == "Y":
        return str(t.year % 10)
    if p == "MM":
        return num(t.month, 2)
    if p.lower() == "month":
        return name(_MONTHS[t.month - 1], 9)
    if p.lower() == "mon":
        return name(_MONTHS[t.month - 1][:3], 3)
    if p == "DD":
        return num(t.day, 2)
    if p == "DDD":
        return num(t.timetuple().tm_yday, 3)
    if p == "D":
        return str(t.isoweekday() % 7 + 1)
    if p == "ID":
        return str(t.isoweekday())
    if p.lower() == "day":
        return name(_DAYS[t.weekday()], 9)
    if p.lower() == "dy":
        return name(_DAYS[t.weekday()][:3], 3)
    if p in ("HH", "HH12"):
        return num(hour12, 2)
    if p == "HH24":
        return num(t.hour, 2)
    if p == "MI":
        return num(t.minute, 2)
    if p == "SS":
        return num(t.second, 2)
    if p == "MS":
        return num(t.microsecond // 1000, 3)
    if p == "US":
        return num(t.microsecond, 6)
    if p == "Q":
        return str((t.month - 1) // 3 + 1)
    if p == "WW":
        return num((t.timetuple().tm_yday - 1) // 7 + 1, 2)
    if p == "IW":
        return num(t.isocalendar()[1], 2)
    if p == "J":
        return str(t.toordinal() + 1721425)
    meridiem = "AM" if t.hour < 12 else "PM"
    if "." in p:
        meridiem = meridiem[0] + "." + meridiem[1] + "."
    return meridiem.lower() if p.islower() else meridiem


def _unsupported(message: str) -> UnsupportedFeature:
    return UnsupportedFeature(message)


# ------------------------------------------------------------------------------------ JSONB


def _json_value(v: Any) -> Any:
    """A SQL value as the JSON value ``to_jsonb`` makes of it."""
    if v is None or isinstance(v, bool | int | float | str):
        return v
    if isinstance(v, Decimal):  # exact, as PostgreSQL's numeric in JSONB (NaN and infinities as text)
        return v if v.is_finite() else str(v)
    if isinstance(v, list | tuple):
        return [_json_value(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _json_value(x) for k, x in v.items()}
    if isinstance(v, dt.datetime | dt.date | dt.time):
        return v.isoformat()
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, bytes):
        return "\\x" + v.hex()
    return str(v)


def json_array_of(values: list[Any]) -> str:
    """``jsonb_agg``: the values as a JSON array."""
    return json_doc.JsonText(json_doc.dumps([_json_value(v) for v in values]))


def json_object_of(pairs: list[tuple[Any, Any]]) -> str:
    """``jsonb_object_agg``: the (key, value) pairs as a JSON object (a NULL key is 22004)."""
    obj: dict[str, Any] = {}
    for k, v in pairs:
        if k is None:
            raise invalid_argument("field name must not be null", "22004")
        obj[to_text(k)] = _json_value(v)
    return json_doc.JsonText(json_doc.dumps(obj))


def _jsonb_build_object(*args: Any) -> str:
    if len(args) % 2:
        raise invalid_argument("argument list must have even number of elements", "22023")
    obj: dict[str, Any] = {}
    for k, v in zip(args[0::2], args[1::2], strict=True):
        if k is None:
            raise invalid_argument("argument 1: key must not be null", "22004")
        obj[to_text(k)] = _json_value(v)
    return json_doc.JsonText(json_doc.dumps(obj))


def _jsonb_build_array(*args: Any) -> str:
    return json_doc.JsonText(json_doc.dumps([_json_value(v) for v in args]))


def _to_jsonb(*args: Any) -> str | None:
    if len(args) != 1:
        raise unknown_signature("to_jsonb", args)
    return None if args[0] is None else json_doc.JsonText(json_doc.dumps(_json_value(args[0])))


def _document(name: str, v: Any) -> Any:
    return document(v, lambda: unknown_signature(name, (v,)))


def _jsonb_array_length(*args: Any) -> int | None:
    if len(args) != 1:
        raise unknown_signature("jsonb_array_length", args)
    if args[0] is None:
        return None
    doc = _document("jsonb_array_length", args[0])
    if not isinstance(doc, list):
        kind = "a scalar" if not isinstance(doc, dict) else "an object"
        raise invalid_argument(f"cannot get array length of {kind}", "22023")
    return len(doc)


def _jsonb_typeof(*args: Any) -> str | None:
    if len(args) != 1:
        raise unknown_signature("jsonb_typeof", args)
    if args[0] is None:
        return None
    doc = _document("jsonb_typeof", args[0])
    if doc is None:
        return "null"
    if isinstance(doc, bool):
        return "boolean"
    if isinstance(doc, int | float | Decimal):
        return "number"
    if isinstance(doc, str):
        return "string"
    return "array" if isinstance(doc, list) else "object"


# ------------------------------------------------------------------------------------ numbers
_INT8_MIN, _INT8_MAX = -(1 << 63), (1 << 63) - 1


def _integers(name: str, args: tuple[Any, ...]) -> tuple[int, int] | None:
    if len(args) != 2:
        raise unknown_signature(name, args)
    if any(a is None for a in args):
        return None
    a, b = args
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in (a, b)):
        raise unknown_signature(name, args)
    return a, b


def _gcd(*args: Any) -> int | None:
    """``gcd(a, b)``: the greatest common divisor, never negative (``gcd(0, 0)`` is 0)."""
    ab = _integers("gcd", args)
    if ab is None:
        return None
    g = math.gcd(*ab)
    if g > _INT8_MAX:  # gcd(INT8 min, 0)
        raise NumericValueOutOfRange("bigint out of range")
    return g


def _lcm(*args: Any) -> int | None:
    """``lcm(a, b)``: the least common multiple, never negative (0 when either is 0)."""
    ab = _integers("lcm", args)
    if ab is None:
        return None
    a, b = ab
    m = 0 if a == 0 or b == 0 else abs(a * b) // math.gcd(a, b)
    if m > _INT8_MAX:
        raise NumericValueOutOfRange("bigint out of range")
    return m


def log_base(*args: Any) -> Any:
    """``log(b, x)``: the logarithm of ``x`` to base ``b``, a numeric, as PostgreSQL's."""
    if len(args) != 2:
        raise unknown_signature("log", args)
    if any(a is None for a in args):
        return None
    if not all(isinstance(v, int | float | Decimal) and not isinstance(v, bool) for v in args):
        raise unknown_signature("log", args)
    b, x = (Decimal(repr(v)) if isinstance(v, float) else Decimal(v) for v in args)
    for v in (b, x):
        if v <= 0:
            word = "zero" if v == 0 else "a negative number"
            raise invalid_argument(f"cannot take logarithm of {word}", "2201E")
    if b == 1:
        raise DivisionByZero("division by zero")
    return numeric_log(b, x)


def _jsonb_set(*args: Any) -> Any:
    """``jsonb_set(target, path, new [, create_if_missing])``: ``target`` with the value at
    ``path`` replaced by ``new`` (added as the path's last step when missing, unless told not
    to), as PostgreSQL's; a path through a scalar changes nothing."""
    if len(args) not in (3, 4):
        raise unknown_signature("jsonb_set", args)
    if any(a is None for a in args):
        return None
    doc = _document("jsonb_set", args[0])
    path = args[1]
    steps = (
        array_literal(path)
        if isinstance(path, str)
        else list(path)
        if isinstance(path, list | tuple)
        else None
    )
    if steps is None:
        raise unknown_signature("jsonb_set", args)
    new = _document("jsonb_set", args[2])
    create = True if len(args) == 3 else bool(args[3])
    if not steps:
        return json_doc.JsonText(json_doc.dumps(doc))
    parent = doc
    for step in steps[:-1]:
        found = _child(parent, step)
        if found is None:
            return json_doc.JsonText(json_doc.dumps(doc))
        parent = found
    last = steps[-1]
    if isinstance(parent, dict):
        if str(last) in parent or create:
            parent[str(last)] = new
    elif isinstance(parent, list):
        try:
            at = int(str(last))
        except ValueError:
            raise invalid_argument(
                f'path element at position {len(steps)} is not an integer: "{last}"', "22P02"
            ) from None
        if -len(parent) <= at < len(parent):
            parent[at] = new
        elif create:
            parent.insert(0 if at < 0 else len(parent), new)
    return json_doc.JsonText(json_doc.dumps(doc))


def _child(node: Any, step: Any) -> Any:
    if isinstance(node, dict):
        return node.get(str(step))
    if isinstance(node, list):
        try:
            at = int(str(step))
        except ValueError:
            return None
        return node[at] if -len(node) <= at < len(node) else None
    return None


def _jsonb_pretty(*args: Any) -> str | None:
    """``jsonb_pretty``: four spaces an indentation level, one item a line, as PostgreSQL's."""
    if len(args) != 1:
        raise unknown_signature("jsonb_pretty", args)
    if args[0] is None:
        return None
    return json_doc.pretty(_document("jsonb_pretty", args[0]))


def _strip_nulls(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip_nulls(v) for k, v in node.items() if v is not None}
    if isinstance(node, list):
        return [_strip_nulls(v) for v in node]
    return node


def _jsonb_strip_nulls(*args: Any) -> Any:
    """``jsonb_strip_nulls``: every object field whose value is null removed, at any depth
    (nulls in arrays stay), as PostgreSQL's."""
    if len(args) != 1:
        raise unknown_signature("jsonb_strip_nulls", args)
    if args[0] is None:
        return None
    return json_doc.JsonText(json_doc.dumps(_strip_nulls(_document("jsonb_strip_nulls", args[0]))))


#: The functions by lower-case name.
MORE: dict[str, Callable[..., Any]] = {
    "jsonb_strip_nulls": _jsonb_strip_nulls,
    "json_strip_nulls": _jsonb_strip_nulls,
    "jsonb_set": _jsonb_set,
    "jsonb_pretty": _jsonb_pretty,
    "gcd": _gcd,
    "lcm": _lcm,
    "regexp_replace": _regexp_replace,
    "string_to_array": _string_to_array,
    "array_to_string": _array_to_string,
    "array_position": _array_position,
    "cardinality": _cardinality,
    "translate": _translate,
    "quote_ident": _quote_ident,
    "format": _format,
    "to_char": _to_char,
    "jsonb_build_object": _jsonb_build_object,
    "json_build_object": _jsonb_build_object,
    "jsonb_build_array": _jsonb_build_array,
    "json_build_array": _jsonb_build_array,
    "to_jsonb": _to_jsonb,
    "to_json": _to_jsonb,
    "jsonb_array_length": _jsonb_array_length,
    "json_array_length": _jsonb_array_length,
    "jsonb_typeof": _jsonb_typeof,
    "json_typeof": _jsonb_typeof,
}
