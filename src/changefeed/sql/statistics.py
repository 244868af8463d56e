"""PostgreSQL's statistical aggregates: ``variance``/``var_samp``, ``var_pop``, ``stddev``/
``stddev_samp``, ``stddev_pop``, digit for digit.

Of integers and numerics the result is a numeric computed as PostgreSQL's
``numeric_stddev_internal`` does: ``(N·Σx² − (Σx)²) / (N·(N−1))`` (``N·N`` for the population
forms) at the scale ``select_div_scale`` picks (16 significant digits, at least the inputs'),
rounded half away from zero, and the square root at that scale for the standard deviations.
Of floats the result is a float accumulated as ``float8_accum`` does (Youngs–Cramer)."""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Context, Decimal, localcontext
from typing import Any

from changefeed.engine.type_errors import value_type
from changefeed.exceptions import UndefinedFunction
from changefeed.sql.numeric import div_scale, numeric_scale

__all__ = ["STATISTICS", "statistic"]

#: Aggregate name -> (sample, square root).
STATISTICS: dict[str, tuple[bool, bool]] = {
    "variance": (True, False),
    "var_samp": (True, False),
    "var_pop": (False, False),
    "stddev": (True, True),
    "stddev_samp": (True, True),
    "stddev_pop": (False, True),
}


def statistic(name: str, vals: list[Any]) -> Any:
    """``name`` over the non-NULL ``vals`` (at least one)."""
    sample, root = STATISTICS[name]
    for v in vals:
        if isinstance(v, bool) or not isinstance(v, int | float | Decimal):
            raise UndefinedFunction(f"unknown signature: {name}({value_type(v)})")
    n = len(vals)
    if sample and n < 2:
        return None
    if any(isinstance(v, float) for v in vals):
        return _float_statistic([float(v) for v in vals], sample, root)
    return _numeric_statistic([Decimal(v) for v in vals], sample, root)


def _float_statistic(vals: list[float], sample: bool, root: bool) -> float:
    n, sx, sxx = 0.0, 0.0, 0.0
    for x in vals:  # float8_accum: Youngs-Cramer
        n += 1.0
        sx += x
        if n > 1.0:
            tmp = x * n - sx
            sxx += tmp * tmp / (n * (n - 1.0))
    var = sxx / ((n - 1.0) if sample else n)
    return math.sqrt(var) if root else var


def _numeric_statistic(vals: list[Decimal], sample: bool, root: bool) -> Decimal:
    with localcontext(Context(prec=1000)):
        n = Decimal(len(vals))
        sum_x = sum(vals, Decimal(0))
        sum_x2 = sum((v * v for v in vals), Decimal(0))
        num = n * sum_x2 - sum_x * sum_x
        dscale = max((numeric_scale(v) for v in vals), default=0) * 2
        if num <= 0:
            return Decimal(0).quantize(Decimal(1).scaleb(-dscale))
        den = n * (n - 1) if sample else n * n
        rscale = div_scale(num, den, at_least=dscale)
        step = Decimal(1).scaleb(-rscale)
        var = (num / den).quantize(step, rounding=ROUND_HALF_UP)
        if not root:
            return var
        return var.sqrt().quantize(step, rounding=ROUND_HALF_UP)
