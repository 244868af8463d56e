"""Values as JSON would carry them, so that journal, table and record values compare equal: the
:data:`Key` and :data:`Image` the checks compare."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

import orjson

__all__ = ["Image", "Key", "norm", "norm_image", "norm_key"]

Key = tuple[Any, ...]
Image = dict[str, Any]


def norm(v: Any) -> Any:
    """A value as JSON would carry it, so journal, table and record values compare equal."""
    if isinstance(v, Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, bool | int | float | str) or v is None:
        return v
    if isinstance(v, list | tuple):
        return [norm(x) for x in v]
    if isinstance(v, dict):
        return {k: norm(x) for k, x in v.items()}
    return orjson.loads(orjson.dumps(v, default=str))


def norm_key(values: Iterable[Any]) -> Key:
    """A key's column values, normalised."""
    return tuple(norm(v) for v in values)


def norm_image(d: Mapping[str, Any] | None) -> Image | None:
    """An image (column -> value), normalised; ``None`` stays ``None`` (no row)."""
    return None if d is None else {k: norm(v) for k, v in d.items()}
