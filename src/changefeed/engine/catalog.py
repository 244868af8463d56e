"""Table schemas and CDC options, as frozen dataclasses serialised to the ``_catalog`` table.

A table's physical SQLite objects are named by its numeric id, never by its user-visible name:
``t<id>`` rows, ``s<id>`` static rows (CQL), ``j<id>`` the ScyllaDB-shaped CDC log, ``x<id>`` the
change stream (one row per transaction and key with old/new images) that changefeeds read.
Columns are ``c<column id>``, so renames and drops never rewrite data.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from typing import Any

from changefeed.engine.type_errors import sql_text
from changefeed.engine.types import SqlType, is_ydb_type
from changefeed.exceptions import InvalidOption, UndefinedColumn

#: Default retention of the Scylla-visible CDC log (ScyllaDB's ``ttl`` option default: 24 h).
DEFAULT_CDC_TTL_S = 86_400


class Role(enum.Enum):
    PARTITION = "partition"
    CLUSTERING = "clustering"
    STATIC = "static"
    REGULAR = "regular"


@dataclass(frozen=True, slots=True)
class ColumnSchema:
    id: int
    name: str
    type: SqlType
    role: Role
    not_null: bool = False
    default: Any = None  # a serialised AST expression (see changefeed.sql.astjson), or None
    computed: Any = None
    virtual: bool = False
    family: str | None = None
    descending: bool = False  # clustering order

    @property
    def is_key(self) -> bool:
        return self.role in (Role.PARTITION, Role.CLUSTERING)

    @property
    def db(self) -> str:
        """The SQLite column holding this column's values."""
        return f"c{self.id}"

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "type": self.type.to_json(),
            "role": self.role.value,
            "not_null": self.not_null,
            "default": self.default,
            "computed": self.computed,
            "virtual": self.virtual,
            "family": self.family,
            "descending": self.descending,
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> ColumnSchema:
        return ColumnSchema(
            id=d["id"],
            name=d["name"],
            type=SqlType.from_json(d["type"]),
            role=Role(d["role"]),
            not_null=d.get("not_null", False),
            default=d.get("default"),
            computed=d.get("computed"),
            virtual=d.get("virtual", False),
            family=d.get("family"),
            descending=d.get("descending", False),
        )


@dataclass(frozen=True, slots=True)
class CdcOptions:
    """ScyllaDB's ``WITH cdc = {'enabled': .., 'preimage': .., 'postimage': .., 'delta': .., 'ttl': ..}``."""

    enabled: bool = False
    preimage: str = "false"  # "false" | "true" (changed columns only) | "full"
    postimage: bool = False
    delta: str = "full"  # "full" | "keys"
    ttl: int = DEFAULT_CDC_TTL_S  # seconds; 0 = kept forever

    KEYS = ("enabled", "preimage", "postimage", "delta", "ttl")

    @staticmethod
    def parse(options: object, base: CdcOptions | None = None) -> CdcOptions:
        if not isinstance(options, dict):
            raise InvalidOption("the cdc option takes a map, e.g. {'enabled': true}")
        cur = base or CdcOptions()
        out: dict[str, Any] = {}
        for raw_key, value in options.items():
            key = str(raw_key).lower()
            if key not in CdcOptions.KEYS:
                raise InvalidOption(
                    f"unknown cdc option {raw_key!r}; valid options are: {', '.join(CdcOptions.KEYS)}"
                )
            text = str(value).lower() if not isinstance(value, bool) else ("true" if value else "false")
            if key in ("enabled", "postimage"):
                if text not in ("true", "false"):
                    raise InvalidOption(f"cdc option '{key}' must be true or false, not {sql_text(value)}")
                out[key] = text == "true"
            elif key == "preimage":
                if text not in ("true", "false", "full"):
                    raise InvalidOption(
                        f"cdc option 'preimage' must be true, false or 'full', not {sql_text(value)}"
                    )
                out[key] = text
            elif key == "delta":
                if text not in ("full", "keys"):
                    raise InvalidOption(f"cdc option 'delta' must be 'full' or 'keys', not {sql_text(value)}")
                out[key] = text
            else:
                try:
                    ttl = int(str(value))
                except ValueError:
                    raise InvalidOption(
                        f"cdc option 'ttl' must be a number of seconds, not {value!r}"
                    ) from None
                if ttl < 0:
                    raise InvalidOption(f"cdc option 'ttl' must not be negative, got {ttl}")
                out[key] = ttl
        return replace(cur, **out)

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.KEYS}

    @staticmethod
    def from_json(d: dict[str, Any]) -> CdcOptions:
        return CdcOptions(**{k: d[k] for k in CdcOptions.KEYS if k in d})


@dataclass(frozen=True, slots=True)
class TableSchema:
    id: int
    name: str  # qualified as written: "ks.t" or "orders"
    dialect: str  # "cql" or "sql": which row semantics apply (row markers, statics)
    columns: tuple[ColumnSchema, ...]
    cdc: CdcOptions = field(default_factory=CdcOptions)
    #: Write the change stream x<id> (old/new images per transaction and key): set while any
    #: changefeed exists on the table, or by ``WITH (CHANGES = TRUE)``.
    changes: bool = False
    partitions: int = 1  # YDB table partitions (default topic partition count)
    options: dict[str, Any] = field(default_factory=dict)
    version: int = 1
    next_column_id: int = 0
    #: The primary key: :attr:`partition_key` then :attr:`clustering_key` (made once: read for
    #: every row written).
    key: tuple[ColumnSchema, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", self.partition_key + self.clustering_key)

    # ------------------------------------------------------------------ views of the columns
    @property
    def crdb_history(self) -> bool:
        """A CockroachDB table (``sql`` dialect, no column declared with a YDB spelling): it keeps
        its change history from its creation for ``gc.ttlseconds`` (engine/gc.py), as CockroachDB
        keeps MVCC history, unless created ``WITH (changes = false)``."""
        return (
            self.dialect == "sql"
            and self.options.get("changes") is not False
            and not any(is_ydb_type(c.type) for c in self.columns)
        )

    @property
    def partition_key(self) -> tuple[ColumnSchema, ...]:
        return tuple(c for c in self.columns if c.role is Role.PARTITION)

    @property
    def clustering_key(self) -> tuple[ColumnSchema, ...]:
        return tuple(c for c in self.columns if c.role is Role.CLUSTERING)

    @property
    def statics(self) -> tuple[ColumnSchema, ...]:
        return tuple(c for c in self.columns if c.role is Role.STATIC)

    @property
    def regulars(self) -> tuple[ColumnSchema, ...]:
        return tuple(c for c in self.columns if c.role is Role.REGULAR)

    @property
    def non_key(self) -> tuple[ColumnSchema, ...]:
        return tuple(c for c in self.columns if not c.is_key)

    @property
    def stored(self) -> tuple[ColumnSchema, ...]:
        """Columns with storage (virtual computed columns are computed on read)."""
        return tuple(c for c in self.columns if not c.virtual)

    @property
    def stored_values(self) -> tuple[ColumnSchema, ...]:
        """Non-key columns with storage, in table order."""
        return tuple(c for c in self.columns if not c.is_key and not c.virtual)

    @property
    def is_cql(self) -> bool:
        return self.dialect == "cql"

    @property
    def keyspace(self) -> str | None:
        return self.name.rsplit(".", 1)[0] if "." in self.name else None

    @property
    def short_name(self) -> str:
        return self.name.rsplit(".", 1)[-1]

    def column(self, name: str) -> ColumnSchema:
        found = self.find_column(name)
        if found is None:
            raise UndefinedColumn(f'column "{name}" does not exist in table {self.name}')
        return found

    def find_column(self, name: str, quoted: bool = True) -> ColumnSchema | None:
        for c in self.columns:
            if c.name == name:
                return c
        lowered = name.lower()
        matches = [c for c in self.columns if c.name.lower() == lowered]
        return matches[0] if len(matches) == 1 else None

    def column_by_id(self, cid: int) -> ColumnSchema:
        for c in self.columns:
            if c.id == cid:
                return c
        raise UndefinedColumn(f"column id {cid} does not exist in table {self.name}")

    # ------------------------------------------------------------------ serialisation
    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "dialect": self.dialect,
            "columns": [c.to_json() for c in self.columns],
            "cdc": self.cdc.to_json(),
            "changes": self.changes,
            "partitions": self.partitions,
            "options": self.options,
            "version": self.version,
            "next_column_id": self.next_column_id,
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> TableSchema:
        return TableSchema(
            id=d["id"],
            name=d["name"],
            dialect=d["dialect"],
            columns=tuple(ColumnSchema.from_json(c) for c in d["columns"]),
            cdc=CdcOptions.from_json(d.get("cdc", {})),
            changes=d.get("changes", False),
            partitions=d.get("partitions", 1),
            options=d.get("options", {}),
            version=d.get("version", 1),
            next_column_id=d.get("next_column_id", 0),
        )
