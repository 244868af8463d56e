"""PostgreSQL's numeric results, digit for digit: the scale (digits after the point) each
operation picks and its rounding, half away from zero.

PostgreSQL does not keep a numeric quotient, root or logarithm to a fixed precision: it picks a
result scale that gives at least 16 significant digits (``NUMERIC_MIN_SIG_DIGITS``) and no fewer
digits after the point than the operands were written with, from an estimate of the result's
weight. So ``1.0 / 3`` is ``0.33333333333333333333``, ``7.0 / 2`` is ``3.5000000000000000``,
``sqrt(2::numeric)`` ``1.414213562373095`` and ``ln(2::numeric)`` ``0.6931471805599453``. The
estimates here are ``select_div_scale``, ``numeric_sqrt``'s, ``estimate_ln_dweight`` and
``numeric_exp``'s, read from PostgreSQL's ``numeric.c``, over its base-10000 digits.

Also the SQL functions of a numeric's form: ``scale`` and ``width_bucket``."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from decimal import ROUND_DOWN, ROUND_HALF_UP, Context, Decimal, localcontext
from typing import Any

from changefeed.sql.function_errors import invalid_argument, unknown_signature

__all__ = [
    "div_scale",
    "numeric_div",
    "numeric_exp",
    "numeric_ln",
    "numeric_log",
    "numeric_scale",
    "numeric_sqrt",
]

#: PostgreSQL's ``NUMERIC_MIN_SIG_DIGITS``, ``DEC_DIGITS``, ``NBASE``, ``NUMERIC_MAX_DISPLAY_SCALE``.
_MIN_SIG_DIGITS = 16
_DEC_DIGITS = 4
_NBASE = 10_000
_MAX_SCALE = 1000
#: ``NUMERIC_MAX_RESULT_SCALE``: the bound of ``numeric_exp``'s weight estimate.
_MAX_RESULT_SCALE = 2000
#: Guard digits the exact computation carries before rounding to the chosen scale.
_GUARD = 10


#: Exact arithmetic: ``+``, ``-``, ``*``, ``%`` and sums of numerics keep every digit, as
#: PostgreSQL's numeric does (Python's default context rounds to 28 significant digits). The
#: precision is a bound, not a cost: operands as wide as PostgreSQL's widest (131,072 digits
#: before the point, 16,383 after) fit.
EXACT = Context(prec=150_000, Emax=999_999, Emin=-999_999)


def exact_sum(values: Iterable[Any]) -> Any:
    """The sum of ``values``, exact when any is a Decimal (see :data:`EXACT`): Python's ``sum``
    under that context, at the speed of its ``+``."""
    with localcontext(EXACT):
        return sum(values)


def exact_add(a: Any, b: Any) -> Any:
    """``a + b``, exact when either is a Decimal (see :data:`EXACT`)."""
    if isinstance(a, Decimal) or isinstance(b, Decimal):
        return EXACT.add(a, b)
    return a + b


def numeric_scale(v: Decimal) -> int:
    """The digits after the point ``v`` was written with (a numeric's display scale)."""
    exponent = v.as_tuple().exponent
    return max(-exponent, 0) if isinstance(exponent, int) else 0


def _digits(d: Decimal) -> tuple[int, list[int]]:
    """``|d|`` as PostgreSQL stores it: the weight of its first base-10000 digit (digits are
    grouped by fours from the point) and its digits, without leading or trailing zero digits
    (``(0, [])`` for zero)."""
    _, coefficient, exponent = abs(d).as_tuple()
    c = int("".join(map(str, coefficient)) or "0")
    if c == 0 or not isinstance(exponent, int):
        return 0, []
    aligned = exponent // _DEC_DIGITS * _DEC_DIGITS  # floor to a digit boundary
    c *= 10 ** (exponent - aligned)
    digits: list[int] = []
    while c:
        c, r = divmod(c, _NBASE)
        digits.append(r)
    digits.reverse()
    weight = len(digits) - 1 + aligned // _DEC_DIGITS
    while digits and digits[-1] == 0:
        digits.pop()
    return weight, digits


def _rounded(exact: Callable[[], Decimal], scale: int, magnitude: int) -> Decimal:
    """``exact()`` computed with enough digits for ``scale`` digits after the point of a result
    below about ``10 ** magnitude``, rounded half away from zero to ``scale``.

    The computation truncates (a quotient whose digits past the guard digits are cut, not
    rounded, cannot round up twice); ``ln`` and ``exp`` round their last guard digit themselves,
    which could only matter for a value within 10^-10 of a half unit, as no logarithm or
    exponential of a number other than 1 or 0 is a decimal fraction."""
    with localcontext(Context(prec=max(magnitude + 2, 1) + scale + _GUARD, rounding=ROUND_DOWN)):
        return exact().quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP)


def _clamp(scale: int) -> int:
    return min(max(scale, 0), _MAX_SCALE)


def div_scale(num: Decimal, den: Decimal, *, at_least: int = 0) -> int:
    """``select_div_scale`` for ``num / den``: digits after the point for 16 significant digits
    of the quotient, and at least either operand's (and ``at_least``)."""
    w1, d1 = _digits(num)
    w2, d2 = _digits(den)
    first1 = d1[0] if d1 else 0
    first2 = d2[0] if d2 else 0
    qweight = w1 - w2 - (1 if first1 <= first2 else 0)
    return _clamp(
        max(_MIN_SIG_DIGITS - qweight * _DEC_DIGITS, numeric_scale(num), numeric_scale(den), at_least)
    )


def numeric_div(a: Decimal, b: Decimal) -> Decimal:
    """``a / b`` (``b`` not 0) as ``numeric_div``."""
    if not (a.is_finite() and b.is_finite()):
        return a / b
    scale = div_scale(a, b)
    return _rounded(lambda: a / b, scale, a.adjusted() - b.adjusted() + 1)


def numeric_sqrt(x: Decimal) -> Decimal:
    """The square root of ``x`` (not negative) as ``numeric_sqrt``, exactly rounded: the integer
    square root of ``x`` scaled to one digit past the scale, then half up."""
    if not x.is_finite():
        return x.sqrt()
    weight, _ = _digits(x)
    sweight = int((weight + 1) * _DEC_DIGITS / 2) - 1  # C's division truncates toward zero
    scale = _clamp(max(_MIN_SIG_DIGITS - sweight, numeric_scale(x)))
    _, coefficient, exponent = x.as_tuple()
    assert isinstance(exponent, int)
    shift = 2 * (scale + 1) + exponent  # x * 10^(2 (scale + 1)) as an integer: exponent >= -scale
    n = int("".join(map(str, coefficient)) or "0") * 10**shift
    q, last = divmod(math.isqrt(n), 10)
    return Decimal(q + (last >= 5)).scaleb(-scale)


def _ln_dweight(x: Decimal) -> int:
    """``estimate_ln_dweight``: the decimal weight of ``ln(x)`` (``x`` > 0)."""
    if Decimal("0.9") <= x <= Decimal("1.1"):
        delta = x - 1
        return 0 if delta == 0 else abs(delta).adjusted()
    weight, digits = _digits(x)
    if not digits:
        return 0
    lead = digits[0]
    dweight = weight * _DEC_DIGITS
    if len(digits) > 1:
        lead = lead * _NBASE + digits[1]
        dweight -= _DEC_DIGITS
    ln_x = math.log(lead) + dweight * 2.302585092994046
    return int(math.log10(abs(ln_x)))  # truncated toward zero, as C's cast


def numeric_ln(x: Decimal) -> Decimal:
    """``ln(x)`` (``x`` > 0) as ``numeric_ln``."""
    if not x.is_finite():
        return x.ln()
    scale = _clamp(max(_MIN_SIG_DIGITS - _ln_dweight(x), numeric_scale(x)))
    return _rounded(x.ln, scale, _ln_dweight(x) + 1)


def numeric_log(base: Decimal, x: Decimal) -> Decimal:
    """The logarithm of ``x`` to ``base`` (both > 0, ``base`` not 1) as ``log_var``."""
    dweight = _ln_dweight(x) - _ln_dweight(base)
    scale = _clamp(max(_MIN_SIG_DIGITS - dweight, numeric_scale(base), numeric_scale(x)))
    return _rounded(lambda: x.ln() / base.ln(), scale, dweight + 1)


def numeric_exp(x: Decimal) -> Decimal:
    """``exp(x)`` as ``numeric_exp``."""
    if not x.is_finite():
        return x.exp()
    estimate = min(max(float(x) * 0.434294481903252, -_MAX_RESULT_SCALE), _MAX_RESULT_SCALE)
    scale = _clamp(max(_MIN_SIG_DIGITS - int(estimate), numeric_scale(x)))
    return _rounded(x.exp, scale, int(estimate) + 1)


def _scale(*args: Any) -> Any:
    """``scale(numeric)``: the digits after the point (NULL for NaN)."""
    if len(args) != 1:
        raise unknown_signature("scale", args)
    (v,) = args
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | Decimal):
        raise unknown_signature("scale", args)
    if isinstance(v, Decimal) and not v.is_finite():
        return None
    return numeric_scale(Decimal(v))


def _width_bucket(*args: Any) -> Any:
    """``width_bucket(operand, low, high, count)``: which of ``count`` equal buckets between
    ``low`` and ``high`` holds ``operand`` (0 below them, ``count + 1`` above), as PostgreSQL's;
    exact for integers and numerics, in double precision for floats."""
    if len(args) != 4:
        raise unknown_signature("width_bucket", args)
    if any(a is None for a in args):
        return None
    count = args[3]
    if not all(isinstance(a, int | float | Decimal) and not isinstance(a, bool) for a in args[:3]) or not (
        isinstance(count, int) and not isinstance(count, bool)
    ):
        raise unknown_signature("width_bucket", args)
    if count <= 0:
        raise invalid_argument("count must be greater than zero", "2201G")
    if any(isinstance(a, float) for a in args[:3]):
        x, lo, hi = (float(a) for a in args[:3])
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise invalid_argument("lower and upper bounds must be finite", "2201G")
        return _bucket(x, lo, hi, count)
    dx, dlo, dhi = (Decimal(a) for a in args[:3])
    return _bucket(dx, dlo, dhi, count)


def _bucket(x: Any, lo: Any, hi: Any, count: int) -> int:
    if lo == hi:
        raise invalid_argument("lower bound cannot equal upper bound", "2201G")
    if lo < hi:
        if x < lo:
            return 0
        return count + 1 if x >= hi else int((x - lo) * count / (hi - lo)) + 1
    if x > lo:
        return 0
    return count + 1 if x <= hi else int((lo - x) * count / (lo - hi)) + 1


#: The SQL functions of numerics this module answers.
NUMERIC_FUNCTIONS: dict[str, Callable[..., Any]] = {"scale": _scale, "width_bucket": _width_bucket}
