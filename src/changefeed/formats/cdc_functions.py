"""The functions and operators CDC queries may call, each with its Python face and its Spark
face (built-in column functions only), and the names CockroachDB refuses.

A function is a list of overloads (:class:`Sig`): parameter type classes, a return type, a
factory of the Python implementation (on the domain values of :mod:`changefeed.formats.cdc_casts`)
and the Spark implementation. ``key`` names an overload in a stored plan, so keys never change.
Overloads are strict (NULL in, NULL out) unless they say otherwise.

What CockroachDB allows (``cdceval``): immutable functions, the stable functions of its list
(``age``, ``array_to_json``, ``array_to_string``, ``crdb_internal.cluster_id``, ``date_part``,
``date_trunc``, ``extract``, ``format``, ``jsonb_build_array``, ``jsonb_build_object``,
``to_json``, ``to_jsonb``, ``row_to_json``, ``overlaps``, ``pg_collation_for``, ``pg_typeof``,
``quote_literal``, ``quote_nullable``, ``timezone``, ``to_char``), its CDC functions
(``event_op``, ``event_schema_timestamp``, ``changefeed_creation_timestamp``, and
``statement_timestamp``/``transaction_timestamp`` as the event's MVCC timestamp). Volatile
functions, other stable ones, aggregates, window functions and generators are refused with
``function "now" unsupported by CDC`` (:data:`DENIED`).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import ROUND_DOWN, ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal
from typing import TYPE_CHECKING, Any

from changefeed.engine.types import Kind, SqlType
from changefeed.exceptions import ChangefeedFailed
from changefeed.feeds.cdc_plan import (
    BOOL,
    BYTES,
    DECIMAL,
    FLOAT8,
    INT8,
    JSONB,
    JSONB_CANONICAL,
    STRING,
)
from changefeed.formats import cdc_casts as C, crdb_values as V

if TYPE_CHECKING:
    from pyspark.sql import Column

Py = Callable[..., Any]
PyFactory = Callable[[Sequence[SqlType], SqlType], Py]
SparkFn = Callable[[Sequence["Column"], Sequence[SqlType], SqlType, Sequence[Any]], "Column"]
RetFn = Callable[[Sequence[SqlType]], SqlType]


@dataclass(frozen=True, slots=True)
class Sig:
    """One overload: ``params`` are type classes (:func:`matches`); a last ``"..."`` repeats the
    class before it. ``ret`` is a class name, ``"arg0"`` (the first argument's type) or a
    function of the argument types."""

    key: str
    params: tuple[str, ...]
    ret: str | RetFn
    py: PyFactory
    spark: SparkFn
    strict: bool = True
    #: the result has its arguments' exact type (coalesce(d, 0) of a DECIMAL(10,2) is one)
    same: bool = False

    def result(self, args: Sequence[SqlType]) -> SqlType:
        if callable(self.ret):
            return self.ret(args)
        if self.ret == "arg0":
            return args[0]
        return CLASS_TYPES[self.ret]

    def arity_ok(self, n: int) -> bool:
        if self.params and self.params[-1] == "...":
            return n >= len(self.params) - 2
        return n == len(self.params)

    def param(self, i: int) -> str:
        if self.params and self.params[-1] == "...":
            fixed = len(self.params) - 2
            return self.params[min(i, fixed)]
        return self.params[i]


#: The canonical type of each type class (a constant argument takes it).
CLASS_TYPES: dict[str, SqlType] = {
    "int": INT8,
    "float": FLOAT8,
    "decimal": DECIMAL,
    "string": STRING,
    "bool": BOOL,
    "bytes": BYTES,
    "jsonb": JSONB,
    "date": SqlType(Kind.DATE, "DATE"),
    "timestamp": SqlType(Kind.TIMESTAMP, "TIMESTAMP", zoned=False),
    "timestamptz": SqlType(Kind.TIMESTAMP, "TIMESTAMPTZ"),
    "interval": SqlType(Kind.INTERVAL, "INTERVAL"),
    "uuid": SqlType(Kind.UUID, "UUID"),
    "time": SqlType(Kind.TIME, "TIME"),
}


def matches(cls: str, t: SqlType) -> bool:
    """Whether a value of ``t`` fits the parameter class ``cls``."""
    k = t.kind
    if cls in ("any", "anynonarray"):
        return cls == "any" or k is not Kind.ARRAY
    if cls == "int":
        return k in (Kind.INT, Kind.UINT)
    if cls == "timestamp":
        return k is Kind.TIMESTAMP and not t.zoned
    if cls == "timestamptz":
        return k is Kind.TIMESTAMP and t.zoned
    if cls == "string":
        return k is Kind.TEXT
    if cls == "array":
        return k is Kind.ARRAY
    return CLASS_TYPES[cls].kind is k


# ============================================================================ helpers

_SIGS: list[tuple[str, Sig]] = []


def fn(name: str, key: str, params: tuple[str, ...], ret: str | RetFn, py: PyFactory, spark: SparkFn,
       *, strict: bool = True, same: bool = False) -> None:  # fmt: skip
    _SIGS.append((name, Sig(key, params, ret, py, spark, strict, same)))


def p1(f: Py) -> PyFactory:
    """A factory of a Python implementation that needs no types."""
    return lambda types, ret: f


def F_() -> Any:
    from pyspark.sql import functions as F

    return F


def fail(message: str) -> Any:
    raise ChangefeedFailed(message)


def dec_type(precision: int | None, scale: int | None) -> SqlType:
    if precision is None or scale is None or precision > 38:
        return DECIMAL
    return SqlType(Kind.DECIMAL, f"DECIMAL({precision},{scale})", precision=precision, scale=scale)


def as_dec(t: SqlType) -> tuple[int | None, int | None]:
    """(precision, scale) of a numeric type as a decimal: INT is (19, 0), DECIMAL its own."""
    if t.kind in (Kind.INT, Kind.UINT):
        return (19 if t.kind is Kind.INT else 20, 0)
    return t.precision, t.scale


# ============================================================================ arithmetic

INT_MIN, INT_MAX = -(1 << 63), (1 << 63) - 1


def _int(v: int) -> int:
    if not INT_MIN <= v <= INT_MAX:
        raise ChangefeedFailed("integer out of range")
    return v


def _ret_add(args: Sequence[SqlType]) -> SqlType:
    (p1_, s1), (p2, s2) = as_dec(args[0]), as_dec(args[1])
    if None in (p1_, s1, p2, s2):
        return DECIMAL
    assert p1_ is not None and s1 is not None and p2 is not None and s2 is not None
    s = max(s1, s2)
    return dec_type(max(p1_ - s1, p2 - s2) + s + 1, s)


def _ret_mul(args: Sequence[SqlType]) -> SqlType:
    (p1_, s1), (p2, s2) = as_dec(args[0]), as_dec(args[1])
    if None in (p1_, s1, p2, s2):
        return DECIMAL
    assert p1_ is not None and s1 is not None and p2 is not None and s2 is not None
    return dec_type(p1_ + p2 + 1, s1 + s2)


def _spark_dec_op(op: str) -> SparkFn:
    def build(c: Sequence[Column], types: Sequence[SqlType], ret: SqlType, k: Sequence[Any]) -> Column:
        a, b = (_spark_decimal_operand(x, t) for x, t in zip(c, types, strict=True))
        out = {"+": a + b, "-": a - b, "*": a * b}[op]
        return out.cast(C.spark_type(ret))

    return build


def _spark_decimal_operand(c: Column, t: SqlType) -> Column:
    if t.kind in (Kind.INT, Kind.UINT):
        return c.cast("decimal(20,0)" if t.kind is Kind.UINT else "decimal(19,0)")
    return c


def _py_dec_op(op: str) -> PyFactory:
    def make(types: Sequence[SqlType], ret: SqlType) -> Py:
        f: Py = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}[op]

        def run(a: Any, b: Any) -> Decimal:
            with_ctx = _EXACT.create_decimal(f(Decimal(a), Decimal(b)))
            return C.quantize(with_ctx, ret) if ret.precision is not None else with_ctx

        return run

    return make


import decimal as _decimal  # noqa: E402

_EXACT = _decimal.Context(prec=200, rounding=ROUND_HALF_UP, Emax=999999, Emin=-999999)
#: CockroachDB's DecimalCtx: 20 significant digits, half up (division, sqrt on decimals).
DECIMAL_CTX = _decimal.Context(prec=20, rounding=ROUND_HALF_UP, Emax=999999, Emin=-999999)


def _py_div(types: Sequence[SqlType], ret: SqlType) -> Py:
    def run(a: Any, b: Any) -> Decimal:
        if b == 0:
            raise ChangefeedFailed("division by zero")
        return DECIMAL_CTX.divide(Decimal(a), Decimal(b))

    return run


def _spark_div(c: Sequence[Column], types: Sequence[SqlType], ret: SqlType, k: Sequence[Any]) -> Column:
    """Decimal division as CockroachDB's DecimalCtx does it (20 significant digits, half up,
    exact results reduced to the ideal exponent), by long division on Spark."""
    from changefeed.formats.cdc_decimal import spark_divide

    return spark_divide(c[0], types[0], c[1], types[1])


def _py_int_floordiv(a: int, b: int) -> int:
    if b == 0:
        raise ChangefeedFailed("division by zero")
    q = abs(a) // abs(b)
    return _int(q if (a >= 0) == (b >= 0) else -q)


def _py_mod_int(a: int, b: int) -> int:
    if b == 0:
        raise ChangefeedFailed("zero modulus")
    r = abs(a) % abs(b)
    return r if a >= 0 else -r


def _py_pow_int(a: int, b: int) -> int:
    if b < 0:
        raise ChangefeedFailed("integer out of range")
    return _int(a**b)


def _register_arithmetic() -> None:
    for op in ("+", "-", "*"):
        fn(op, f"{op}:int", ("int", "int"), "int",
           p1({"+": lambda a, b: _int(a + b), "-": lambda a, b: _int(a - b), "*": lambda a, b: _int(a * b)}[op]),
           lambda c, t, r, _k, op=op: {"+": c[0] + c[1], "-": c[0] - c[1], "*": c[0] * c[1]}[op])  # type: ignore[misc]  # fmt: skip
        fn(op, f"{op}:float", ("float", "float"), "float",
           p1({"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}[op]),
           lambda c, t, r, _k, op=op: {"+": c[0] + c[1], "-": c[0] - c[1], "*": c[0] * c[1]}[op])  # type: ignore[misc]  # fmt: skip
        ret = _ret_add if op != "*" else _ret_mul
        for params in (("decimal", "decimal"), ("int", "decimal"), ("decimal", "int")):
            fn(op, f"{op}:{params[0]}:{params[1]}", params, ret, _py_dec_op(op), _spark_dec_op(op))
    # dates and times
    fn("+", "+:date:int", ("date", "int"), "date", p1(lambda a, b: a + b),
       lambda c, t, r, _k: F_().date_add(c[0], c[1].cast("int")))  # fmt: skip
    fn("-", "-:date:int", ("date", "int"), "date", p1(lambda a, b: a - b),
       lambda c, t, r, _k: F_().date_sub(c[0], c[1].cast("int")))  # fmt: skip
    fn("-", "-:date:date", ("date", "date"), "int", p1(lambda a, b: a - b),
       lambda c, t, r, _k: F_().datediff(c[0], c[1]).cast("bigint"))  # fmt: skip
    for ts in ("timestamp", "timestamptz"):
        fn("+", f"+:{ts}:interval", (ts, "interval"), ts, p1(lambda a, b: a + b),
           lambda c, t, r, _k: F_().timestamp_micros(F_().unix_micros(c[0]) + c[1]))  # fmt: skip
        fn("-", f"-:{ts}:interval", (ts, "interval"), ts, p1(lambda a, b: a - b),
           lambda c, t, r, _k: F_().timestamp_micros(F_().unix_micros(c[0]) - c[1]))  # fmt: skip
        fn("-", f"-:{ts}:{ts}", (ts, ts), "interval", p1(lambda a, b: a - b),
           lambda c, t, r, _k: F_().unix_micros(c[0]) - F_().unix_micros(c[1]))  # fmt: skip
    for op in ("+", "-"):
        fn(op, f"{op}:interval", ("interval", "interval"), "interval",
           p1((lambda a, b: a + b) if op == "+" else (lambda a, b: a - b)),
           lambda c, t, r, _k, op=op: c[0] + c[1] if op == "+" else c[0] - c[1])  # type: ignore[misc]  # fmt: skip
    # division
    fn("/", "/:int", ("int", "int"), "decimal", _py_div, _spark_div)
    fn("/", "/:decimal", ("decimal", "decimal"), "decimal", _py_div, _spark_div)
    fn("/", "/:float", ("float", "float"), "float",
       p1(lambda a, b: a / b if b != 0 else fail("division by zero")),
       lambda c, t, r, _k: F_().when(c[1] == 0, F_().raise_error(F_().lit("division by zero"))).otherwise(c[0] / c[1]))  # fmt: skip
    fn("//", "//:int", ("int", "int"), "int", p1(_py_int_floordiv),
       lambda c, t, r, _k: F_().when(c[1] == 0, F_().raise_error(F_().lit("division by zero")))
       .otherwise((F_().abs(c[0]) / F_().abs(c[1])).cast("bigint") * F_().signum(c[0]).cast("bigint") * F_().signum(c[1]).cast("bigint")))  # fmt: skip
    fn("%", "%:int", ("int", "int"), "int", p1(_py_mod_int),
       lambda c, t, r, _k: F_().when(c[1] == 0, F_().raise_error(F_().lit("zero modulus"))).otherwise(c[0] % c[1]))  # fmt: skip
    fn("%", "%:float", ("float", "float"), "float", p1(lambda a, b: math.fmod(a, b)),
       lambda c, t, r, _k: c[0] % c[1])  # fmt: skip
    fn("^", "^:int", ("int", "int"), "int", p1(_py_pow_int),
       lambda c, t, r, _k: F_().pow(c[0], c[1]).cast("bigint"))  # fmt: skip
    fn("^", "^:float", ("float", "float"), "float", p1(lambda a, b: math.pow(a, b)),
       lambda c, t, r, _k: F_().pow(c[0], c[1]))  # fmt: skip
    # unary minus, bitwise
    fn("neg", "neg:int", ("int",), "int", p1(lambda a: _int(-a)), lambda c, t, r, _k: -c[0])
    fn("neg", "neg:float", ("float",), "float", p1(lambda a: -a), lambda c, t, r, _k: -c[0])
    fn("neg", "neg:decimal", ("decimal",), "arg0", p1(lambda a: -a),
       lambda c, t, r, _k: _spark_neg_decimal(c[0], t[0]))  # fmt: skip
    fn("neg", "neg:interval", ("interval",), "interval", p1(lambda a: -a), lambda c, t, r, _k: -c[0])
    for op, py_op in (("&", lambda a, b: a & b), ("|", lambda a, b: a | b), ("#", lambda a, b: a ^ b)):
        fn(op, f"{op}:int", ("int", "int"), "int", p1(py_op),
           lambda c, t, r, _k, op=op: {"&": c[0].bitwiseAND(c[1]), "|": c[0].bitwiseOR(c[1]), "#": c[0].bitwiseXOR(c[1])}[op])  # type: ignore[misc]  # fmt: skip
    fn("<<", "<<:int", ("int", "int"), "int", p1(lambda a, b: _wrap64(a << b)),
       lambda c, t, r, _k: F_().call_function("shiftleft", c[0], c[1].cast("int")))  # fmt: skip
    fn(">>", ">>:int", ("int", "int"), "int", p1(lambda a, b: a >> b),
       lambda c, t, r, _k: F_().call_function("shiftright", c[0], c[1].cast("int")))  # fmt: skip
    fn("bitnot", "~:int", ("int",), "int", p1(lambda a: ~a), lambda c, t, r, _k: F_().bitwise_not(c[0]))


def _wrap64(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


def _spark_neg_decimal(c: Column, t: SqlType) -> Column:
    from pyspark.sql import functions as F

    if t.precision is not None:
        return -c
    return F.when(F.startswith(c, F.lit("-")), F.substr(c, F.lit(2))).otherwise(
        F.when(c.isin("0", "NaN"), c).otherwise(F.concat(F.lit("-"), c))
    )


# ============================================================================ strings


def _text_args(c: Sequence[Column], types: Sequence[SqlType]) -> list[Column]:
    return [C.spark_text(x, t) for x, t in zip(c, types, strict=True)]


def _py_texts(types: Sequence[SqlType]) -> list[Callable[[Any], str]]:
    def text(t: SqlType) -> Callable[[Any], str]:
        return lambda v: C.text_of(v, t)

    return [text(t) for t in types]


def _concat_py(types: Sequence[SqlType], ret: SqlType) -> Py:
    texts = _py_texts(types)
    return lambda *a: "".join(f(v) for f, v in zip(texts, a, strict=True) if v is not None)


def _concat_ws_py(types: Sequence[SqlType], ret: SqlType) -> Py:
    texts = _py_texts(types)

    def run(*a: Any) -> str | None:
        if a[0] is None:
            return None
        return str(a[0]).join(f(v) for f, v in zip(texts[1:], a[1:], strict=True) if v is not None)

    return run


def _spark_concat_ws(c: Sequence[Column], t: Sequence[SqlType], r: SqlType, k: Sequence[Any]) -> Column:
    from pyspark.sql import functions as F

    if not isinstance(k[0], str):
        return F.raise_error(F.lit("concat_ws() on Spark needs a constant separator"))
    return F.concat_ws(k[0], *_text_args(c[1:], t[1:]))


def _concat_op_py(types: Sequence[SqlType], ret: SqlType) -> Py:
    ta, tb = types
    return lambda a, b: C.text_of(a, ta) + C.text_of(b, tb)


def _substring_py(s: str, start: int, length: int | None = None) -> str:
    if length is None:
        return s[max(start, 1) - 1 :]
    if length < 0:
        raise ChangefeedFailed("negative substring length not allowed")
    end = start + length
    begin = max(start, 1)
    return s[begin - 1 : max(end - 1, begin - 1)]


def _spark_substring(c: Sequence[Column], t: Sequence[SqlType], r: SqlType, k: Sequence[Any]) -> Column:
    from pyspark.sql import functions as F

    s, start = c[0], c[1]
    begin = F.greatest(start, F.lit(1))
    if len(c) == 2:
        return F.substr(s, begin.cast("int"))
    end = start + c[2]
    n = F.greatest(end - begin, F.lit(0))
    return F.when(c[2] < 0, F.raise_error(F.lit("negative substring length not allowed"))).otherwise(
        F.substr(s, begin.cast("int"), n.cast("int"))
    )


def _left_py(s: str, n: int) -> str:
    return s[:n] if n >= 0 else s[: max(len(s) + n, 0)]


def _right_py(s: str, n: int) -> str:
    if n >= 0:
        return s[len(s) - n :] if n <= len(s) else s
    return s[-n:]


def _spark_left(c: Sequence[Column], t: Sequence[SqlType], r: SqlType, k: Sequence[Any]) -> Column:
    from pyspark.sql import functions as F

    s, n = c[0], c[1]
    size = F.when(n >= 0, n).otherwise(F.greatest(F.length(s) + n, F.lit(0)))
    return F.substr(s, F.lit(1), size.cast("int"))


def _spark_right(c: Sequence[Column], t: Sequence[SqlType], r: SqlType, k: Sequence[Any]) -> Column:
    from pyspark.sql import functions as F

    s, n = c[0], c[1]
    start = F.when(n >= 0, F.greatest(F.length(s) - n + 1, F.lit(1))).otherwise(-n + 1)
    return F.substr(s, start.cast("int"))


def _split_part_py(s: str, d: str, n: int) -> str:
    if n == 0:
        raise ChangefeedFailed("field position must not be zero")
    parts = s.split(d) if d else [s]
    if n < 0:
        n = len(parts) + n + 1
        if n <= 0:
            return ""
    return parts[n - 1] if n <= len(parts) else ""


def _trim_py(which: str) -> PyFactory:
    def make(types: Sequence[SqlType], ret: SqlType) -> Py:
        def run(s: str, chars: str = " ") -> str:
            if which == "both":
                return s.strip(chars)
            return s.lstrip(chars) if which == "left" else s.rstrip(chars)

        return run

    return make


def _spark_trim(which: str) -> SparkFn:
    def build(c: Sequence[Column], t: Sequence[SqlType], r: SqlType, k: Sequence[Any]) -> Column:
        from pyspark.sql import functions as F

        f = {"both": F.trim, "left": F.ltrim, "right": F.rtrim}[which]
        return f(c[0]) if len(c) == 1 else f(c[0], c[1])

    return build


def _pad_py(left: bool) -> PyFactory:
    def make(types: Sequence[SqlType], ret: SqlType) -> Py:
        def run(s: str, n: int, fill: str = " ") -> str:
            if n <= 0:
                return ""
            if len(s) >= n or not fill:
                return s[:n]
            pad = (fill * (n // len(fill) + 1))[: n - len(s)]
            return pad + s if left else s + pad

        return run

    return make


def _spark_pad(left: bool) -> SparkFn:
    def build(c: Sequence[Column], t: Sequence[SqlType], r: SqlType, k: Sequence[Any]) -> Column:
        from pyspark.sql import functions as F

        fill = c[2] if len(c) == 3 else F.lit(" ")
        n = F.greatest(c[1], F.lit(0)).cast("int")
        padded = F.lpad(c[0], n, fill) if left else F.rpad(c[0], n, fill)
        return F.when(fill == "", F.substr(c[0], F.lit(1), n)).otherwise(padded)

    return build


def _strpos_py(s: str, sub: str) -> int:
    return s.find(sub) + 1


def _register_strings() -> None:
    fn("||", "||:string", ("string", "string"), "string", p1(lambda a, b: a + b),
       lambda c, t, r, _k: F_().concat(c[0], c[1]))  # fmt: skip
    fn("||", "||:string:any", ("string", "anynonarray"), "string", _concat_op_py,
       lambda c, t, r, _k: F_().concat(c[0], C.spark_text(c[1], t[1])))  # fmt: skip
    fn("||", "||:any:string", ("anynonarray", "string"), "string", _concat_op_py,
       lambda c, t, r, _k: F_().concat(C.spark_text(c[0], t[0]), c[1]))  # fmt: skip
    fn("||", "||:bytes", ("bytes", "bytes"), "bytes", p1(lambda a, b: a + b),
       lambda c, t, r, _k: F_().concat(c[0], c[1]))  # fmt: skip
    fn("concat", "concat", ("any", "..."), "string", _concat_py,
       lambda c, t, r, _k: F_().concat_ws("", *_text_args(c, t)), strict=False)  # fmt: skip
    fn("concat_ws", "concat_ws", ("string", "any", "..."), "string", _concat_ws_py,
       _spark_concat_ws, strict=False)  # fmt: skip
    for name in ("lower", "upper"):
        fn(name, name, ("string",), "string", p1(str.lower if name == "lower" else str.upper),
           lambda c, t, r, _k, name=name: getattr(F_(), name)(c[0]))  # type: ignore[misc]  # fmt: skip
    for name in ("length", "char_length", "character_length"):
        fn(
            name,
            f"{name}:string",
            ("string",),
            "int",
            p1(len),
            lambda c, t, r, _k: F_().length(c[0]).cast("bigint"),
        )
        fn(
            name,
            f"{name}:bytes",
            ("bytes",),
            "int",
            p1(len),
            lambda c, t, r, _k: F_().length(c[0]).cast("bigint"),
        )
    fn("octet_length", "octet_length", ("string",), "int", p1(lambda s: len(s.encode())),
       lambda c, t, r, _k: F_().octet_length(c[0]).cast("bigint"))  # fmt: skip
    fn("left", "left", ("string", "int"), "string", p1(_left_py), _spark_left)
    fn("right", "right", ("string", "int"), "string", p1(_right_py), _spark_right)
    for name in ("substr", "substring"):
        fn(name, f"{name}:2", ("string", "int"), "string", p1(_substring_py), _spark_substring)
        fn(name, f"{name}:3", ("string", "int", "int"), "string", p1(_substring_py), _spark_substring)
    for name, which in (("btrim", "both"), ("ltrim", "left"), ("rtrim", "right")):
        fn(name, f"{name}:1", ("string",), "string", _trim_py(which), _spark_trim(which))
        fn(name, f"{name}:2", ("string", "string"), "string", _trim_py(which), _spark_trim(which))
    fn("replace", "replace", ("string", "string", "string"), "string",
       p1(lambda s, a, b: s.replace(a, b) if a else s), lambda c, t, r, _k: F_().replace(c[0], c[1], c[2]))  # fmt: skip
    fn("split_part", "split_part", ("string", "string", "int"), "string", p1(_split_part_py),
       lambda c, t, r, _k: F_().when(c[2] == 0, F_().raise_error(F_().lit("field position must not be zero")))
       .otherwise(F_().split_part(c[0], c[1], c[2].cast("int"))))  # fmt: skip
    fn("strpos", "strpos", ("string", "string"), "int", p1(_strpos_py),
       lambda c, t, r, _k: F_().position(c[1], c[0]).cast("bigint"))  # fmt: skip
    fn(
        "reverse",
        "reverse",
        ("string",),
        "string",
        p1(lambda s: s[::-1]),
        lambda c, t, r, _k: F_().reverse(c[0]),
    )
    fn("repeat", "repeat", ("string", "int"), "string", p1(lambda s, n: s * max(n, 0)),
       lambda c, t, r, _k: F_().repeat(c[0], F_().greatest(c[1], F_().lit(0)).cast("int")))  # fmt: skip
    for name, left in (("lpad", True), ("rpad", False)):
        fn(name, f"{name}:2", ("string", "int"), "string", _pad_py(left), _spark_pad(left))
        fn(name, f"{name}:3", ("string", "int", "string"), "string", _pad_py(left), _spark_pad(left))
    fn("starts_with", "starts_with", ("string", "string"), "bool", p1(str.startswith),
       lambda c, t, r, _k: F_().startswith(c[0], c[1]))  # fmt: skip
    fn("md5", "md5", ("string",), "string", p1(lambda s: hashlib.md5(s.encode()).hexdigest()),
       lambda c, t, r, _k: F_().md5(c[0]))  # fmt: skip
    fn("sha1", "sha1", ("string",), "string", p1(lambda s: hashlib.sha1(s.encode()).hexdigest()),
       lambda c, t, r, _k: F_().sha1(c[0]))  # fmt: skip
    fn("sha256", "sha256", ("string",), "string", p1(lambda s: hashlib.sha256(s.encode()).hexdigest()),
       lambda c, t, r, _k: F_().sha2(c[0], 256))  # fmt: skip
    fn("to_hex", "to_hex:int", ("int",), "string", p1(lambda v: format(v & ((1 << 64) - 1), "x")),
       lambda c, t, r, _k: F_().lower(F_().hex(c[0])))  # fmt: skip
    fn("to_hex", "to_hex:bytes", ("bytes",), "string", p1(lambda v: bytes(v).hex()),
       lambda c, t, r, _k: F_().lower(F_().hex(c[0])))  # fmt: skip
    fn("quote_literal", "quote_literal", ("anynonarray",), "string",
       lambda types, ret: (lambda v, t=types[0]: C.quote_literal(C.text_of(v, t))),
       lambda c, t, r, _k: C.spark_quote_literal(C.spark_text(c[0], t[0])))  # fmt: skip
    fn("quote_nullable", "quote_nullable", ("anynonarray",), "string",
       lambda types, ret: (lambda v, t=types[0]: "NULL" if v is None else C.quote_literal(C.text_of(v, t))),
       lambda c, t, r, _k: F_().coalesce(C.spark_quote_literal(C.spark_text(c[0], t[0])), F_().lit("NULL")),
       strict=False)  # fmt: skip
    fn("quote_ident", "quote_ident", ("string",), "string", p1(C.quote_ident),
       lambda c, t, r, _k: C.spark_quote_ident(c[0]))  # fmt: skip


# ============================================================================ math


def _round_py(types: Sequence[SqlType], ret: SqlType) -> Py:
    t = types[0]
    if t.kind is Kind.FLOAT:
        return lambda x, n=0: _round_float(x, n)
    return lambda x, n=0: Decimal(x).quantize(Decimal(1).scaleb(-n), rounding=ROUND_HALF_UP, context=_EXACT)


def _round_float(x: float, n: int) -> float:
    if not math.isfinite(x):
        return x
    return float(Decimal(repr(x)).quantize(Decimal(1).scaleb(-n), rounding=ROUND_HALF_EVEN, context=_EXACT))


def _ret_round(args: Sequence[SqlType]) -> SqlType:
    return FLOAT8 if args[0].kind is Kind.FLOAT else DECIMAL


def _spark_round(c: Sequence[Column], t: Sequence[SqlType], r: SqlType, k: Sequence[Any]) -> Column:
    from pyspark.sql import functions as F

    n = 0
    if len(c) == 2:
        if not isinstance(k[1], int):
            raise ChangefeedFailed("round(x, n) on Spark needs a constant n")
        n = k[1]
    if t[0].kind is Kind.FLOAT:
        return F.bround(c[0], n)
    dec = c[0] if t[0].precision is not None else c[0].cast("decimal(38,18)")
    return C.spark_text(F.round(dec, n), dec_type(38, max(n, 0)))


#: Doubles of at least this magnitude are integers already.
_INTEGRAL_FLOAT = float(2**52)


def _float_int(f: Callable[[float], int]) -> Py:
    """ceil/floor/trunc of a FLOAT, as a FLOAT (large, infinite and NaN values as they are)."""
    return lambda x: float(f(x)) if math.isfinite(x) and abs(x) < _INTEGRAL_FLOAT else x


def _spark_float_int(c: Column, f: Callable[[Column], Column]) -> Column:
    from pyspark.sql import functions as F

    return F.when(F.isnan(c) | (F.abs(c) >= F.lit(_INTEGRAL_FLOAT)), c).otherwise(f(c).cast("double"))


def _register_math() -> None:
    fn("abs", "abs:int", ("int",), "int", p1(lambda a: _int(abs(a))), lambda c, t, r, _k: F_().abs(c[0]))
    fn("abs", "abs:float", ("float",), "float", p1(abs), lambda c, t, r, _k: F_().abs(c[0]))
    fn("abs", "abs:decimal", ("decimal",), "arg0", p1(abs),
       lambda c, t, r, _k: F_().abs(c[0]) if t[0].precision is not None else F_().ltrim(c[0], F_().lit("-")))  # fmt: skip
    for name in ("ceil", "ceiling", "floor"):
        up = name != "floor"
        fn(name, f"{name}:float", ("float",), "float", p1(_float_int(math.ceil if up else math.floor)),
           lambda c, t, r, _k, up=up: _spark_float_int(c[0], F_().ceil if up else F_().floor))  # type: ignore[misc]  # fmt: skip
        fn(name, f"{name}:decimal", ("decimal",), "decimal",
           p1(lambda d, up=up: Decimal(d).to_integral_value(rounding="ROUND_CEILING" if up else "ROUND_FLOOR")),
           lambda c, t, r, _k, up=up: C.spark_text((F_().ceil(c[0] if t[0].precision is not None else c[0].cast("decimal(38,18)")) if up  # type: ignore[misc]
                                                 else F_().floor(c[0] if t[0].precision is not None else c[0].cast("decimal(38,18)"))), dec_type(38, 0)))  # fmt: skip
    fn("round", "round:float", ("float",), "float", _round_py, _spark_round)
    fn("round", "round:float:int", ("float", "int"), "float", _round_py, _spark_round)
    fn("round", "round:decimal", ("decimal",), "decimal", _round_py, _spark_round)
    fn("round", "round:decimal:int", ("decimal", "int"), "decimal", _round_py, _spark_round)
    fn("trunc", "trunc:float", ("float",), "float", p1(_float_int(math.trunc)),
       lambda c, t, r, _k: _spark_float_int(c[0], lambda x: F_().when(x >= 0, F_().floor(x)).otherwise(F_().ceil(x))))  # fmt: skip
    fn("trunc", "trunc:decimal", ("decimal",), "decimal",
       p1(lambda d: Decimal(d).to_integral_value(rounding=ROUND_DOWN)),
       lambda c, t, r, _k: C.spark_text(F_().round(F_().when(c[0].cast("decimal(38,18)") >= 0, F_().floor(c[0].cast("decimal(38,18)")))
                                               .otherwise(F_().ceil(c[0].cast("decimal(38,18)"))), 0), dec_type(38, 0)))  # fmt: skip
    fn("mod", "mod:int", ("int", "int"), "int", p1(_py_mod_int),
       lambda c, t, r, _k: F_().when(c[1] == 0, F_().raise_error(F_().lit("zero modulus"))).otherwise(c[0] % c[1]))  # fmt: skip
    fn("mod", "mod:float", ("float", "float"), "float", p1(math.fmod), lambda c, t, r, _k: c[0] % c[1])
    for name in ("power", "pow"):
        fn(
            name,
            f"{name}:float",
            ("float", "float"),
            "float",
            p1(math.pow),
            lambda c, t, r, _k: F_().pow(c[0], c[1]),
        )
    fn("sqrt", "sqrt:float", ("float",), "float",
       p1(lambda x: math.sqrt(x) if x >= 0 else fail("cannot take square root of a negative number")),
       lambda c, t, r, _k: F_().when(c[0] < 0, F_().raise_error(F_().lit("cannot take square root of a negative number")))
       .otherwise(F_().sqrt(c[0])))  # fmt: skip
    fn("sign", "sign:int", ("int",), "int", p1(lambda a: (a > 0) - (a < 0)),
       lambda c, t, r, _k: F_().signum(c[0]).cast("bigint"))  # fmt: skip
    fn("sign", "sign:float", ("float",), "float", p1(lambda a: float((a > 0) - (a < 0))),
       lambda c, t, r, _k: F_().signum(c[0]))  # fmt: skip
    fn("pi", "pi", (), "float", p1(lambda: math.pi), lambda c, t, r, _k: F_().lit(math.pi))
    for name, pick in (("greatest", max), ("least", min)):
        for cls in ("int", "float", "string", "timestamptz", "timestamp", "date"):
            fn(name, f"{name}:{cls}", (cls, cls, "..."), cls,
               p1(lambda *a, pick=pick: pick((x for x in a if x is not None), default=None)),
               lambda c, t, r, _k, name=name: getattr(F_(), name)(*c), strict=False, same=True)  # type: ignore[misc]  # fmt: skip


# ============================================================================ conditionals


def _register_conditionals() -> None:
    for cls in ("int", "float", "decimal", "string", "bool", "bytes", "date", "timestamp", "timestamptz",
                "interval", "uuid", "jsonb", "time"):  # fmt: skip
        fn("coalesce", f"coalesce:{cls}", (cls, cls, "..."), cls,
           p1(lambda *a: next((x for x in a if x is not None), None)),
           lambda c, t, r, _k: F_().coalesce(*c), strict=False, same=True)  # fmt: skip
        fn("ifnull", f"ifnull:{cls}", (cls, cls), cls,
           p1(lambda a, b: a if a is not None else b), lambda c, t, r, _k: F_().coalesce(*c), strict=False,
           same=True)  # fmt: skip
        fn("nullif", f"nullif:{cls}", (cls, cls), cls,
           p1(lambda a, b: None if a is not None and b is not None and a == b else a),
           lambda c, t, r, _k: F_().when(c[0] == c[1], F_().lit(None)).otherwise(c[0]), strict=False,
           same=True)  # fmt: skip
        fn("if", f"if:{cls}", ("bool", cls, cls), cls,
           p1(lambda cond, a, b: a if cond else b),
           lambda c, t, r, _k: F_().when(c[0], c[1]).otherwise(c[2]), strict=False, same=True)  # fmt: skip


# ============================================================================ JSON


def _json_object_py(types: Sequence[SqlType], ret: SqlType) -> Py:
    def run(*a: Any) -> str:
        if len(a) % 2:
            raise ChangefeedFailed("argument list must have even number of elements")
        pairs: dict[str, str] = {}
        for i in range(0, len(a), 2):
            if a[i] is None:
                raise ChangefeedFailed(f"argument {i + 1} cannot be null")
            pairs[C.text_of(a[i], types[i])] = C.json_text(a[i + 1], types[i + 1])
        body = ", ".join(f"{V.json_string(k)}: {pairs[k]}" for k in sorted(pairs, key=str.encode))
        return "{" + body + "}"

    return run


def _spark_json_object(c: Sequence[Column], t: Sequence[SqlType], r: SqlType, k: Sequence[Any]) -> Column:
    from pyspark.sql import functions as F

    keys = [C.spark_text(c[i], t[i]) for i in range(0, len(c), 2)]
    values = [C.spark_json(c[i + 1], t[i + 1]) for i in range(0, len(c), 2)]
    entries = F.array(*[F.struct(kc.alias("k"), vc.alias("v")) for kc, vc in zip(keys, values, strict=True)])
    ordered = F.array_sort(entries)
    body = F.array_join(
        F.transform(ordered, lambda e: F.concat(V.spark_json_string(e["k"]), F.lit(": "), e["v"])), ", "
    )
    null_key = F.lit(False)
    for kc in keys:
        null_key = null_key | kc.isNull()
    return F.when(null_key, F.raise_error(F.lit("argument cannot be null"))).otherwise(
        F.concat(F.lit("{"), body, F.lit("}"))
    )


def _json_array_py(types: Sequence[SqlType], ret: SqlType) -> Py:
    return lambda *a: "[" + ", ".join(C.json_text(v, t) for v, t in zip(a, types, strict=True)) + "]"


def _spark_json_array(c: Sequence[Column], t: Sequence[SqlType], r: SqlType, k: Sequence[Any]) -> Column:
    from pyspark.sql import functions as F

    parts = [C.spark_json(x, ty) for x, ty in zip(c, t, strict=True)]
    return F.concat(F.lit("["), F.concat_ws(", ", *parts), F.lit("]")) if parts else F.lit("[]")


def _register_json() -> None:
    for name in ("jsonb_build_object", "json_build_object"):
        fn(
            name,
            name,
            ("any", "..."),
            lambda a: JSONB_CANONICAL,
            _json_object_py,
            _spark_json_object,
            strict=False,
        )
    for name in ("jsonb_build_array", "json_build_array"):
        fn(
            name,
            name,
            ("any", "..."),
            lambda a: JSONB_CANONICAL,
            _json_array_py,
            _spark_json_array,
            strict=False,
        )
    for name in ("to_json", "to_jsonb", "row_to_json"):
        fn(name, name, ("any",), lambda a: JSONB_CANONICAL,
           lambda types, ret: (lambda v, t=types[0]: C.json_text(v, t)),
           lambda c, t, r, _k: F_().when(c[0].isNotNull(), C.spark_json(c[0], t[0])))  # fmt: skip
    fn("array_to_json", "array_to_json", ("array",), lambda a: JSONB_CANONICAL,
       lambda types, ret: (lambda v, t=types[0]: C.json_text(v, t)),
       lambda c, t, r, _k: F_().when(c[0].isNotNull(), C.spark_json(c[0], t[0])))  # fmt: skip


def _register_all() -> None:
    _register_arithmetic()
    _register_strings()
    _register_math()
    _register_conditionals()
    _register_json()
    from changefeed.formats import cdc_functions_more

    cdc_functions_more.register(fn)


_register_all()

#: name -> overloads, in preference order.
FUNCTIONS: dict[str, tuple[Sig, ...]] = {}
for _name, _sig in _SIGS:
    FUNCTIONS[_name] = (*FUNCTIONS.get(_name, ()), _sig)
#: overload key -> overload (how a stored plan names it).
SIGS: dict[str, Sig] = {s.key: s for _, s in _SIGS}

__all__ = [
    "CLASS_TYPES",
    "DECIMAL_CTX",
    "FUNCTIONS",
    "SIGS",
    "Sig",
    "matches",
]
