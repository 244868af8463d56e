"""Round-trip AST expressions through JSON, for defaults and computed columns in the catalog."""

from __future__ import annotations

import base64
import dataclasses
import uuid
from decimal import Decimal
from typing import Any

from changefeed.exceptions import CorruptFile
from changefeed.sql import ast

_NODES: dict[str, type[Any]] = {
    cls.__name__: cls for cls in vars(ast).values() if isinstance(cls, type) and dataclasses.is_dataclass(cls)
}


def to_json(node: Any) -> Any:
    if node is None or isinstance(node, bool | int | float | str):
        return node
    if isinstance(node, Decimal):
        return {"$dec": str(node)}
    if isinstance(node, bytes):
        return {"$bytes": base64.b64encode(node).decode()}
    if isinstance(node, uuid.UUID):
        return {"$uuid": str(node)}
    if isinstance(node, tuple | list):
        return {"$tuple": [to_json(x) for x in node]}
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        out: dict[str, Any] = {"$node": type(node).__name__}
        for f in dataclasses.fields(node):
            if f.name != "pos":
                out[f.name] = to_json(getattr(node, f.name))
        return out
    raise TypeError(f"cannot serialise {type(node).__name__} in an expression")


def from_json(data: Any) -> Any:
    if data is None or isinstance(data, bool | int | float | str):
        return data
    if isinstance(data, dict):
        if "$dec" in data:
            return Decimal(data["$dec"])
        if "$bytes" in data:
            return base64.b64decode(data["$bytes"])
        if "$uuid" in data:
            return uuid.UUID(data["$uuid"])
        if "$tuple" in data:
            return tuple(from_json(x) for x in data["$tuple"])
        if "$node" in data:
            cls = _NODES.get(data["$node"])
            if cls is None:
                raise CorruptFile(f"catalog holds an unknown expression node {data['$node']!r}")
            return cls(**{k: from_json(v) for k, v in data.items() if k != "$node"})
    raise CorruptFile(f"catalog holds an unreadable expression: {data!r}")
