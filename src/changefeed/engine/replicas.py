"""Replica tables of YDB asynchronous replications (issue 20), as the engine sees them.

A replica carries ``options["replication"] = {"id": .., "name": ..}`` in its catalog entry while
the replication that feeds it runs (or is paused or failed): it is then read-only to everyone but
the replication's apply (a :class:`~changefeed.engine.txn.Transaction` made with
``replica_writer=True``), and its schema cannot change. Completing the replication
(``STATE = "DONE"``) or dropping it without CASCADE removes the mark: the table is an ordinary one
again. YDB keeps the same flag in the table's ``ReplicationConfig`` (``REPLICATION_MODE_READ_ONLY``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from changefeed.engine.catalog import TableSchema
from changefeed.exceptions import ReplicaReadOnly, ReplicaSchemaLocked

OPTION = "replication"
#: YDB's texts (datashard and scheme shard).
WRITE_REFUSED = "Can't execute write tx at replicated table"
SCHEMA_REFUSED = "path is an async replica table"


@dataclass(frozen=True, slots=True)
class ReplicaMark:
    replication_id: int
    replication: str

    def to_json(self) -> dict[str, Any]:
        return {"id": self.replication_id, "name": self.replication}


def replica_of(schema: TableSchema) -> ReplicaMark | None:
    raw = schema.options.get(OPTION)
    if not isinstance(raw, Mapping):
        return None
    return ReplicaMark(int(raw["id"]), str(raw["name"]))


def marked(schema: TableSchema, mark: ReplicaMark | None) -> TableSchema:
    """``schema`` with the replica mark set (``mark``) or removed (None), one version later."""
    options = {k: v for k, v in schema.options.items() if k != OPTION}
    if mark is not None:
        options[OPTION] = mark.to_json()
    return replace(schema, options=options, version=schema.version + 1)


def check_writable(schema: TableSchema) -> None:
    """Refuse a client's write to a replica, with YDB's text."""
    mark = replica_of(schema)
    if mark is not None:
        raise ReplicaReadOnly(
            f"{WRITE_REFUSED}: {schema.name} is a replica of asynchronous replication {mark.replication}"
        )


def check_schema_change(schema: TableSchema) -> None:
    """Refuse a schema operation on a replica, with YDB's text."""
    mark = replica_of(schema)
    if mark is not None:
        raise ReplicaSchemaLocked(
            f"{SCHEMA_REFUSED} ({schema.name} is a replica of asynchronous replication {mark.replication};"
            " complete it with ALTER ASYNC REPLICATION .. SET (STATE = 'DONE') or drop it first)"
        )


__all__ = [
    "OPTION",
    "SCHEMA_REFUSED",
    "WRITE_REFUSED",
    "ReplicaMark",
    "check_schema_change",
    "check_writable",
    "marked",
    "replica_of",
]
