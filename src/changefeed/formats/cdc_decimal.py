"""Decimal division on Spark, exactly as CockroachDB's ``DecimalCtx`` (and Python's ``decimal``
with the same context) divides: 20 significant digits rounded half up, an exact quotient
reduced to the ideal exponent (``10 / 4`` is ``2.5``, ``10 / 5`` is ``2``, ``1.50 / 0.5`` is
``3.0``, ``1 / 3`` is ``0.33333333333333333333``).

Spark's own decimal division keeps a scale fixed by the operand types, so the quotient is
computed here by long division over ``decimal(38,0)`` integers: ``a = A * 10^-sa`` and
``b = B * 10^-sb`` give ``a / b = (A / B) * 10^(sb - sa)``; the first 21 significant digits of
``|A| / |B|`` come from up to three steps of 19 digits each (every intermediate product stays
below 10^38), the last one rounds, and a remainder of zero makes the result exact. Operands
have at most 19 digits (INT, or DECIMAL(p, s) with p <= 19): the checker refuses others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from changefeed.engine.types import Kind, SqlType
from changefeed.formats import crdb_values as V
from changefeed.formats.cdc_casts import let

if TYPE_CHECKING:
    from pyspark.sql import Column

#: Significant digits of CockroachDB's DecimalCtx.
PRECISION = 20
#: The widest operand (digits) the long division handles.
MAX_DIGITS = 19
_STEP = 19


def divisible(t: SqlType) -> bool:
    """Whether a value of ``t`` can be an operand of decimal division on Spark."""
    if t.kind in (Kind.INT, Kind.UINT):
        return t.kind is Kind.INT
    return t.kind is Kind.DECIMAL and t.precision is not None and t.precision <= MAX_DIGITS


def _pow10(n: Column) -> Column:
    """10^n as decimal(38,0), 0 <= n <= 37."""
    from pyspark.sql import functions as F

    table = F.array(*[F.lit(str(10**i)).cast("decimal(38,0)") for i in range(38)])
    return F.element_at(table, (n + F.lit(1)).cast("int"))


def _unscaled(c: Column, t: SqlType) -> Column:
    """|c| as an integer decimal(38,0) (its digits without the point)."""
    from pyspark.sql import functions as F

    if t.kind in (Kind.INT, Kind.UINT):
        return F.abs(c).cast("decimal(38,0)")
    scale = t.scale or 0
    return (F.abs(c) * F.lit(10**scale).cast("decimal(38,0)")).cast("decimal(38,0)")


def _digits(x: Column) -> Column:
    """Number of digits of a non-negative integer decimal (0 for 0)."""
    from pyspark.sql import functions as F

    s = x.cast("string")
    return F.when(x == 0, F.lit(0)).otherwise(F.length(s))


def spark_divide(a: Column, ta: SqlType, b: Column, tb: SqlType) -> Column:
    """``a / b`` as apd's text of the quotient (DECIMAL), NULL when either is NULL."""
    from pyspark.sql import functions as F

    sa = 0 if ta.kind is not Kind.DECIMAL else ta.scale or 0
    sb = 0 if tb.kind is not Kind.DECIMAL else tb.scale or 0
    e0 = sb - sa  # the ideal exponent

    def divide(v: Column) -> Column:
        x, y = v["x"], v["y"]
        # magnitude: the decimal exponent of the quotient's first digit is mag - 1
        d = _digits(x) - _digits(y)
        up = F.greatest(-d, F.lit(0))
        down = F.greatest(d, F.lit(0))
        mag = d + F.when(x * _pow10(up) >= y * _pow10(down), F.lit(1)).otherwise(F.lit(0))
        k = F.lit(PRECISION + 1) - mag  # Q = floor(x * 10^k / y) has 21 digits
        k1 = F.least(F.greatest(k, F.lit(0)), F.lit(_STEP))
        k2 = F.least(F.greatest(k - k1, F.lit(0)), F.lit(_STEP))
        k3 = F.greatest(k - k1 - k2, F.lit(0))
        return let(
            F.struct(
                x.alias("x"), y.alias("y"), k.alias("k"), k1.alias("k1"), k2.alias("k2"), k3.alias("k3")
            ),
            lambda s: _steps(s, v["neg"], e0),
        )

    operands = F.struct(
        _unscaled(a, ta).alias("x"), _unscaled(b, tb).alias("y"), ((a < 0) != (b < 0)).alias("neg")
    )
    zero = V.spark_sci_string(F.lit(""), F.lit("0"), F.lit(e0))
    return (
        F.when(a.isNull() | b.isNull(), F.lit(None))
        .when(b == 0, F.raise_error(F.lit("division by zero")))
        .when(a == 0, zero)
        .otherwise(let(operands, divide))
    )


def _quotient(n: Column, y: Column) -> Column:
    """floor(n / y) of non-negative integer decimals, exactly."""
    return ((n - n % y) / y).cast("decimal(38,0)")


def _steps(s: Column, neg: Column, e0: int) -> Column:
    """The long division of ``s.x / s.y`` in three steps of ``k1``, ``k2``, ``k3`` digits, then
    rounding to 20 digits and reduction to the ideal exponent ``e0``."""
    from pyspark.sql import functions as F

    x, y = s["x"], s["y"]
    n1 = x * _pow10(s["k1"])
    r1 = n1 % y
    n2 = r1 * _pow10(s["k2"])
    r2 = n2 % y
    n3 = r2 * _pow10(s["k3"])
    q = (
        (_quotient(n1, y) * _pow10(s["k2"]) + _quotient(n2, y)).cast("decimal(38,0)") * _pow10(s["k3"])
        + _quotient(n3, y)
    ).cast("decimal(38,0)")
    state = F.struct(q.alias("q"), (n3 % y).alias("r"), s["k"].alias("k"))

    def finish(t: Column) -> Column:
        q, r = t["q"], t["r"]
        exact = (r == 0) & (q % 10 == 0)
        up5 = q + F.lit(5)
        c = ((up5 - up5 % 10) / F.lit(10)).cast("decimal(38,0)")  # round half up to 20 digits
        carry = _digits(c) > PRECISION
        c = F.when(carry, (c / 10).cast("decimal(38,0)")).otherwise(c)
        exp = F.lit(1) - t["k"] + F.lit(e0) + F.when(carry, F.lit(1)).otherwise(F.lit(0))
        text = c.cast("string")
        zeros = F.length(text) - F.length(F.rtrim(text, F.lit("0")))
        strip = F.when(exact, F.least(zeros, F.greatest(F.lit(e0) - exp, F.lit(0)))).otherwise(F.lit(0))
        digits = F.substring(text, F.lit(1), F.length(text) - strip)
        sign = F.when(neg, F.lit("-")).otherwise(F.lit(""))
        return V.spark_sci_string(sign, digits, exp + strip)

    return let(state, finish)


__all__ = ["MAX_DIGITS", "PRECISION", "divisible", "spark_divide"]
