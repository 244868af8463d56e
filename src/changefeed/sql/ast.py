"""The abstract syntax tree shared by both dialects.

The parser (``changefeed.sql.parser``) turns CQL or SQL text into these frozen dataclasses; the
statement families (``changefeed.sql.statements``) run them against the engine. Nothing here
knows about storage. Identifiers are kept as written, with ``quoted`` telling whether they were
quoted; name resolution (case folding) is the session's job because it differs per dialect.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal as Lit

from changefeed.sql.ast_cql import CqlSelect as CqlSelect, InsertJson as InsertJson
from changefeed.sql.ast_expressions import (
    ArrayLit as ArrayLit,
    Between as Between,
    BinaryOp as BinaryOp,
    BinOpName as BinOpName,
    Case as Case,
    Cast as Cast,
    Column as Column,
    DefaultValue as DefaultValue,
    Expr as Expr,
    FrameBound as FrameBound,
    FuncCall as FuncCall,
    Ident as Ident,
    InList as InList,
    IsDistinct as IsDistinct,
    IsNull as IsNull,
    Like as Like,
    Literal as Literal,
    MapLit as MapLit,
    Option as Option,
    OrderItem as OrderItem,
    Param as Param,
    Pos as Pos,
    QName as QName,
    QualifiedStar as QualifiedStar,
    Quantified as Quantified,
    RegexMatch as RegexMatch,
    Star as Star,
    Subquery as Subquery,
    Subscript as Subscript,
    TupleLit as TupleLit,
    TypeName as TypeName,
    UnaryOp as UnaryOp,
    WindowCall as WindowCall,
    WindowFrame as WindowFrame,
)
from changefeed.sql.ast_replication import (
    AlterAsyncReplication as AlterAsyncReplication,
    CreateAsyncReplication as CreateAsyncReplication,
    CreateSecret as CreateSecret,
    DropAsyncReplication as DropAsyncReplication,
    DropSecret as DropSecret,
    ReplicationItem as ReplicationItem,
)

# --------------------------------------------------------------------------------------------------
# Statements


@dataclass(frozen=True, slots=True)
class ColumnDef:
    name: Ident
    type: TypeName
    primary_key: bool = False  # inline ``id INT PRIMARY KEY``
    static: bool = False  # CQL ``s int static``
    not_null: bool = False
    default: Expr | None = None
    computed: Expr | None = None  # ``AS (expr) STORED|VIRTUAL``
    virtual: bool = False
    family: Ident | None = None  # ``FAMILY f`` after the column


@dataclass(frozen=True, slots=True)
class PrimaryKey:
    """``PRIMARY KEY ((p1, p2), c1, c2)``: partition columns then clustering columns.
    For SQL tables every key column is a partition column and ``clustering`` is empty."""

    partition: tuple[Ident, ...]
    clustering: tuple[Ident, ...] = ()


@dataclass(frozen=True, slots=True)
class FamilyDef:
    """CockroachDB ``FAMILY name (a, b)``."""

    name: Ident
    columns: tuple[Ident, ...]


@dataclass(frozen=True, slots=True)
class ClusteringOrder:
    column: Ident
    descending: bool = False


@dataclass(frozen=True, slots=True)
class CreateTable:
    name: QName
    columns: tuple[ColumnDef, ...]
    primary_key: PrimaryKey | None = None
    families: tuple[FamilyDef, ...] = ()
    options: tuple[Option, ...] = ()  # CQL ``WITH cdc = {...} AND ...``; YQL ``WITH (...)``
    clustering_order: tuple[ClusteringOrder, ...] = ()
    if_not_exists: bool = False
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class DropTable:
    name: QName
    if_exists: bool = False
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class AddColumn:
    column: ColumnDef
    if_not_exists: bool = False


@dataclass(frozen=True, slots=True)
class DropColumn:
    name: Ident
    if_exists: bool = False


@dataclass(frozen=True, slots=True)
class SetOptions:
    """CQL ``ALTER TABLE t WITH cdc = {...}``; YQL ``ALTER TABLE t SET (...)``."""

    options: tuple[Option, ...]


@dataclass(frozen=True, slots=True)
class AddChangefeed:
    """YQL ``ADD CHANGEFEED name WITH (MODE = 'UPDATES', FORMAT = 'JSON', ...)``."""

    name: Ident
    options: tuple[Option, ...]


@dataclass(frozen=True, slots=True)
class DropChangefeed:
    name: Ident


@dataclass(frozen=True, slots=True)
class ConfigureZone:
    """CockroachDB ``ALTER TABLE t CONFIGURE ZONE USING gc.ttlseconds = n[, ...]`` (variable names
    lower-cased, dotted)."""

    options: tuple[Option, ...]


@dataclass(frozen=True, slots=True)
class PhoenixSetProperties:
    """Apache Phoenix ``ALTER TABLE t SET "phoenix.max.lookback.age.seconds" = 50, TTL = 100``."""

    properties: tuple[PhoenixProperty, ...]


AlterAction = (
    AddColumn
    | DropColumn
    | SetOptions
    | AddChangefeed
    | DropChangefeed
    | ConfigureZone
    | PhoenixSetProperties
)


@dataclass(frozen=True, slots=True)
class AlterTable:
    name: QName
    actions: tuple[AlterAction, ...]
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class CreateKeyspace:
    """CQL ``CREATE KEYSPACE``; SQL ``CREATE DATABASE``/``CREATE SCHEMA``."""

    name: Ident
    if_not_exists: bool = False
    options: tuple[Option, ...] = ()
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class DropKeyspace:
    name: Ident
    if_exists: bool = False
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class UseKeyspace:
    """CQL ``USE ks``; SQL ``USE db`` / ``SET DATABASE = db``."""

    name: Ident
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class CreateEnum:
    """CockroachDB ``CREATE TYPE name AS ENUM ('a', 'b')``."""

    name: QName
    labels: tuple[str, ...]
    if_not_exists: bool = False
    pos: Pos = field(default=Pos(), compare=False)


InsertMode = Lit["insert", "upsert", "replace"]


@dataclass(frozen=True, slots=True)
class Insert:
    """``INSERT``/``UPSERT``/``REPLACE INTO t (cols) VALUES (...), (...)``.

    ``columns`` is empty when the statement names none (then all columns in table order).
    ``on_conflict_do_nothing`` is CockroachDB/PostgreSQL ``ON CONFLICT DO NOTHING``; CQL
    ``IF NOT EXISTS`` sets ``if_not_exists``."""

    table: QName
    columns: tuple[Ident, ...]
    rows: tuple[tuple[Expr, ...], ...]
    mode: InsertMode = "insert"
    if_not_exists: bool = False
    on_conflict_do_nothing: bool = False
    ttl: Expr | None = None  # CQL USING TTL
    timestamp: Expr | None = None  # CQL USING TIMESTAMP
    returning: tuple[SelectItem, ...] = ()
    pos: Pos = field(default=Pos(), compare=False)
    on_conflict_update: OnConflictUpdate | None = None


@dataclass(frozen=True, slots=True)
class OnConflictUpdate:
    """``ON CONFLICT (target) DO UPDATE SET c = e, .. [WHERE cond]``: the existing row's columns
    by name (or ``t.c``), the row the INSERT proposed as ``excluded.c``."""

    target: tuple[Ident, ...]
    assignments: tuple[tuple[Ident, Expr], ...]
    where: Expr | None = None


@dataclass(frozen=True, slots=True)
class Update:
    table: QName
    assignments: tuple[tuple[Ident, Expr], ...]
    where: Expr | None = None
    if_exists: bool = False
    ttl: Expr | None = None
    timestamp: Expr | None = None
    returning: tuple[SelectItem, ...] = ()
    pos: Pos = field(default=Pos(), compare=False)
    alias: Ident | None = None
    #: ``UPDATE t SET .. FROM a [JOIN b ..]``: the other tables, as ``SELECT * FROM a ..``.
    source: Select | None = None


@dataclass(frozen=True, slots=True)
class Delete:
    """``DELETE [c1, c2] FROM t WHERE ...``; ``columns`` is the CQL column-deletion list."""

    table: QName
    columns: tuple[Ident, ...] = ()
    where: Expr | None = None
    if_exists: bool = False
    timestamp: Expr | None = None
    returning: tuple[SelectItem, ...] = ()
    pos: Pos = field(default=Pos(), compare=False)
    alias: Ident | None = None
    #: ``DELETE FROM t USING a [JOIN b ..]``: the other tables, as ``SELECT * FROM a ..``.
    source: Select | None = None


@dataclass(frozen=True, slots=True)
class Truncate:
    """``TRUNCATE [TABLE] t [, ..]``: every row of each table goes, in the statement's
    transaction. CQL names one table and its CDC log does not show the truncation (ScyllaDB);
    SQL (PostgreSQL, CockroachDB) names one or more, and each row's delete is a change like any
    other (``statements.truncate``)."""

    tables: tuple[QName, ...]
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class SelectItem:
    expr: Expr  # Star() for ``*``
    alias: Ident | None = None


#: How a join combines its sides.
JoinKind = Lit["inner", "left", "right", "full", "cross"]


@dataclass(frozen=True, slots=True)
class Join:
    """``[INNER] JOIN t [AS a] ON ..``, ``LEFT|RIGHT|FULL [OUTER] JOIN``, ``CROSS JOIN t`` or
    ``, t``."""

    kind: JoinKind
    table: QName
    alias: Ident | None = None
    on: Expr | None = None
    #: A WITH query's rows joined (``table`` is then its name as written).
    source: Statement | None = None
    #: ``USING (a, b)``: the columns both sides are joined on, each then one column; with
    #: ``natural``, the columns the two sides have in common (``NATURAL JOIN``).
    using: tuple[Ident, ...] | None = None
    natural: bool = False


@dataclass(frozen=True, slots=True)
class Select:
    items: tuple[SelectItem, ...]
    table: QName | None  # None for ``SELECT 1``
    where: Expr | None = None
    order_by: tuple[OrderItem, ...] = ()
    limit: Expr | None = None
    distinct: bool = False
    allow_filtering: bool = False
    as_of: Expr | None = None  # ``AS OF SYSTEM TIME x``
    #: ``SELECT DISTINCT ON (a, b) ..``: the first row (in ORDER BY's order) of each distinct
    #: ``(a, b)``.
    distinct_on: tuple[Expr, ...] = ()
    pos: Pos = field(default=Pos(), compare=False)
    #: CockroachDB's statement source ``FROM [SHOW JOBS]`` (``table`` is then None): the rows
    #: the bracketed statement returns.
    source: Statement | None = None
    group_by: tuple[Expr, ...] = ()
    having: Expr | None = None
    offset: Expr | None = None
    #: ``GROUP BY ROLLUP (..)``, ``CUBE (..)``, ``GROUPING SETS (..)``: the sets of expressions
    #: grouped by in turn (``group_by`` then holds each expression of them once).
    grouping_sets: tuple[tuple[Expr, ...], ...] = ()
    #: ``FROM t AS a``: the name the statement gives the table (qualified columns may use it).
    alias: Ident | None = None
    #: Tables joined to ``table``, in order (left-deep).
    joins: tuple[Join, ...] = ()


@dataclass(frozen=True, slots=True)
class Batch:
    """CQL ``BEGIN [UNLOGGED|COUNTER] BATCH [USING TIMESTAMP t] ... APPLY BATCH``."""

    statements: tuple[Insert | Update | Delete, ...]
    kind: Lit["logged", "unlogged", "counter"] = "logged"
    timestamp: Expr | None = None
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class Begin:
    """``BEGIN``/``START TRANSACTION`` with its modes: ``READ ONLY`` (True) or ``READ WRITE``
    (False) is kept, None when neither is said (the session's default); every isolation level is
    accepted and runs serializable, as CockroachDB's do."""

    pos: Pos = field(default=Pos(), compare=False)
    read_only: bool | None = None


@dataclass(frozen=True, slots=True)
class Commit:
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class Rollback:
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class Savepoint:
    """``SAVEPOINT name``."""

    name: Ident
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class ReleaseSavepoint:
    """``RELEASE [SAVEPOINT] name``."""

    name: Ident
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class RollbackToSavepoint:
    """``ROLLBACK [WORK | TRANSACTION] TO [SAVEPOINT] name``."""

    name: Ident
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class Grant:
    """``GRANT CHANGEFEED, SELECT ON TABLE t TO u`` (``revoke`` for REVOKE ... FROM)."""

    privileges: tuple[str, ...]
    tables: tuple[QName, ...]
    grantees: tuple[Ident, ...]
    revoke: bool = False
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class CreateUser:
    """``CREATE USER|ROLE name [WITH opt ...]``."""

    name: Ident
    if_not_exists: bool = False
    options: tuple[Option, ...] = ()
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class ChangefeedTarget:
    table: QName
    family: Ident | None = None


@dataclass(frozen=True, slots=True)
class CreateChangefeed:
    """CockroachDB ``CREATE CHANGEFEED FOR [TABLE] t[, ...] [INTO 'uri'] [WITH ...]`` and
    ``EXPERIMENTAL CHANGEFEED FOR ...`` (``core`` true, no sink)."""

    targets: tuple[ChangefeedTarget, ...]
    sink: Expr | None = None
    options: tuple[Option, ...] = ()
    core: bool = False
    pos: Pos = field(default=Pos(), compare=False)
    #: a CDC query (``CREATE CHANGEFEED .. AS SELECT ..``): the SELECT clause as written, and
    #: where it starts (parsed by ``changefeed.sql.cdc_parse``); ``targets`` is then empty
    query: str | None = None
    query_pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class Show:
    """``SHOW TABLES``, ``SHOW CHANGEFEED JOBS``, ``SHOW CREATE TABLE t``, ``DESCRIBE TABLE t``..."""

    what: str  # lower-case words, e.g. "tables", "changefeed jobs", "create table", "columns"
    name: QName | None = None
    pos: Pos = field(default=Pos(), compare=False)


# ---------------------------------------------------------------------------- access (users, roles)


@dataclass(frozen=True, slots=True)
class DropUser:
    """``DROP USER|ROLE [IF EXISTS] a, b``."""

    names: tuple[Ident, ...]
    if_exists: bool = False
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class AlterUser:
    """``ALTER USER|ROLE [IF EXISTS] name [WITH] opt ...`` (``PASSWORD 'x'``, ``PASSWORD NULL``,
    ``CONTROLCHANGEFEED``, ``NOCONTROLCHANGEFEED``, ...)."""

    name: Ident
    options: tuple[Option, ...] = ()
    if_exists: bool = False
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class GrantRole:
    """``GRANT role, .. TO member, .. [WITH ADMIN OPTION]`` / ``REVOKE [ADMIN OPTION FOR] role, .. FROM ..``."""

    roles: tuple[Ident, ...]
    members: tuple[Ident, ...]
    revoke: bool = False
    admin_option: bool = False
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class ShowGrants:
    """``SHOW GRANTS [ON [TABLE] t, ..] [FOR user, ..]``."""

    tables: tuple[QName, ...] = ()
    grantees: tuple[Ident, ...] = ()
    pos: Pos = field(default=Pos(), compare=False)


# ------------------------------------------------------------------ CockroachDB changefeed jobs
@dataclass(frozen=True, slots=True)
class JobControl:
    """``PAUSE JOB id``, ``RESUME JOB id``, ``CANCEL JOB id`` (``action``: pause|resume|cancel)."""

    action: str
    job_id: Expr
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class CreateExternalConnection:
    """``CREATE EXTERNAL CONNECTION [IF NOT EXISTS] name AS 'uri'``."""

    name: str
    uri: Expr
    if_not_exists: bool = False
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class DropExternalConnection:
    """``DROP EXTERNAL CONNECTION [IF EXISTS] name``."""

    name: str
    if_exists: bool = False
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class ShowChangefeedJob:
    """``SHOW CHANGEFEED JOB id``."""

    job_id: Expr
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class ShowJobsOf:
    """CockroachDB ``SHOW JOB [WHEN COMPLETE] id``, ``SHOW JOBS [WHEN COMPLETE] <select>`` and
    ``SHOW CHANGEFEED JOBS <select>``: the jobs whose ids ``job_id`` or the rows of ``query``
    give; ``block`` (WHEN COMPLETE) returns once every one of them has finished."""

    job_id: Expr | None = None
    query: Select | None = None
    block: bool = False
    changefeed: bool = False  # SHOW CHANGEFEED JOBS' columns
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class AlterChangefeedCmd:
    """One command of ``ALTER CHANGEFEED``: ``add``/``drop`` targets (``options``: the scan
    options of ADD), ``set`` options, ``unset`` option names (in ``names``)."""

    kind: str
    targets: tuple[ChangefeedTarget, ...] = ()
    options: tuple[Option, ...] = ()
    names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class AlterChangefeed:
    """``ALTER CHANGEFEED id ADD t | DROP t | SET opt = v | UNSET opt ...``."""

    job_id: Expr
    commands: tuple[AlterChangefeedCmd, ...]
    pos: Pos = field(default=Pos(), compare=False)


# --------------------------------------------------------------------------------------------------
# Apache Phoenix (issue 11)


@dataclass(frozen=True, slots=True)
class PhoenixProperty:
    """A Phoenix table property ``[family.]NAME = value`` (``TTL = 100``, ``SALT_BUCKETS = 4``,
    ``"phoenix.max.lookback.age.seconds" = 97200``). ``name`` is as written (quoted names keep
    their case); ``family`` is the column family prefix, when written."""

    name: Ident
    value: Expr
    family: Ident | None = None


@dataclass(frozen=True, slots=True)
class FamilyColumnDef(ColumnDef):
    """A Phoenix column written with its column family: ``B.vb INTEGER`` (``family`` is ``B``)."""


@dataclass(frozen=True, slots=True)
class PhoenixCreateTable:
    """A CREATE TABLE written with Phoenix-only syntax: ``CREATE IMMUTABLE TABLE``, table
    properties after the column list, column families in column names (``B.vb INTEGER``) or a
    Phoenix-only type. Such a table is a Phoenix table: its unquoted identifiers fold to upper
    case and its types are Phoenix's."""

    table: CreateTable
    properties: tuple[PhoenixProperty, ...] = ()
    immutable: bool = False
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class CreateCdc:
    """``CREATE CDC [IF NOT EXISTS] name ON t [INCLUDE (PRE, POST, CHANGE)] [SALT_BUCKETS = n]``.
    ``include`` holds the scope words as written (validated by the executor), or None."""

    name: Ident
    table: QName
    include: tuple[Ident, ...] | None = None
    properties: tuple[PhoenixProperty, ...] = ()
    if_not_exists: bool = False
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class DropCdc:
    """``DROP CDC [IF EXISTS] name ON t``."""

    name: Ident
    table: QName
    if_exists: bool = False
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class UpsertSelect:
    """``UPSERT INTO t [(cols)] SELECT ...`` (Phoenix), and ``INSERT``/``REPLACE INTO t SELECT``
    (``mode``: each row written as that statement writes it), with PostgreSQL's and
    CockroachDB's ``ON CONFLICT DO NOTHING`` and ``RETURNING`` as an ``INSERT .. VALUES`` takes
    them."""

    table: QName
    columns: tuple[Ident, ...]
    query: Select | SetOperation
    pos: Pos = field(default=Pos(), compare=False)
    mode: Lit["insert", "upsert", "replace"] = "upsert"
    on_conflict_do_nothing: bool = False
    returning: tuple[SelectItem, ...] = ()
    on_conflict_update: OnConflictUpdate | None = None


@dataclass(frozen=True, slots=True)
class CommonTableQuery:
    """A WITH query read as a statement source where a column list renames its columns
    (``WITH t (a, b) AS (..)``) or it is recursive: ``query UNION [ALL] step``, ``step`` reading
    the rows the last round added (:class:`WorkingTable`) until it adds none."""

    name: Ident
    columns: tuple[Ident, ...]
    query: Select | SetOperation
    step: Select | SetOperation | None = None
    union_all: bool = True
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class TableFunction:
    """A set-returning function read as a table: ``FROM generate_series(1, 10) AS i``,
    ``FROM unnest(ARRAY[..])``; ``column`` names its one column (the alias, else the function)."""

    call: FuncCall
    column: str
    pos: Pos = field(default=Pos(), compare=False)
    #: ``AS a (x, y)``: new names for the first columns.
    names: tuple[str, ...] = ()
    #: ``WITH ORDINALITY``: a last column ``ordinality``, the row's position from 1.
    ordinality: bool = False


@dataclass(frozen=True, slots=True)
class WorkingTable:
    """A recursive WITH query's own name read in its recursive term: the rows its last round
    added."""

    name: Ident
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class Values:
    """``VALUES (1, 'a'), (2, 'b')`` as a query: its columns ``column1``, ``column2`` .., or the
    names of ``(VALUES ..) AS v(x, y)`` (``names``)."""

    rows: tuple[tuple[Expr, ...], ...]
    names: tuple[Ident, ...] = ()
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class SetOperation:
    """``q1 UNION|INTERSECT|EXCEPT [ALL] q2``: ``left`` may itself be one (left-deep, INTERSECT
    binding tighter, as PostgreSQL reads them); ``ORDER BY``, ``LIMIT`` and ``OFFSET`` are the
    whole result's."""

    left: Select | SetOperation
    op: Lit["union", "intersect", "except"]
    all: bool
    right: Select | SetOperation
    order_by: tuple[OrderItem, ...] = ()
    limit: Expr | None = None
    offset: Expr | None = None
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class HintedSelect:
    """A SELECT with a Phoenix hint comment right after SELECT: ``SELECT /*+ CDC_INCLUDE(PRE) */ ..``.
    ``hint`` is the comment's text between ``/*+`` and ``*/``."""

    select: Select
    hint: str
    pos: Pos = field(default=Pos(), compare=False)


Statement = (
    CreateTable
    | SetOperation
    | Values
    | CommonTableQuery
    | WorkingTable
    | TableFunction
    | Savepoint
    | ReleaseSavepoint
    | RollbackToSavepoint
    | DropTable
    | AlterTable
    | CreateKeyspace
    | DropKeyspace
    | UseKeyspace
    | CreateEnum
    | Insert
    | Update
    | Delete
    | Select
    | Batch
    | Begin
    | Commit
    | Rollback
    | Grant
    | CreateUser
    | CreateChangefeed
    | Show
    | DropUser
    | AlterUser
    | GrantRole
    | ShowGrants
    | JobControl
    | ShowChangefeedJob
    | ShowJobsOf
    | AlterChangefeed
    | CreateExternalConnection
    | DropExternalConnection
    # Apache Phoenix (issue 11)
    | PhoenixCreateTable
    | CreateCdc
    | DropCdc
    | UpsertSelect
    | HintedSelect
    # YDB asynchronous replication (issue 20)
    | CreateAsyncReplication
    | AlterAsyncReplication
    | DropAsyncReplication
    | CreateSecret
    | DropSecret
    | Truncate
    # CQL statements of their own (``ast_cql``)
    | InsertJson
    | CqlSelect
)
