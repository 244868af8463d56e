"""One flat exception hierarchy for the whole package.

Every error a user can cause (bad SQL, wrong types, unknown tables, invalid options, corrupt files)
is a subclass of :class:`ChangefeedError`. Each carries a message that says *where* and *why*;
the CLI prints ``ERROR: <message>`` and exits non-zero. Nothing is ever half-applied when one of
these is raised from a statement: the surrounding transaction is rolled back.
"""

from __future__ import annotations

from typing import Any


class ChangefeedError(Exception):
    """Base of every error raised by changefeed."""

    #: A short SQLSTATE-like code, used by the CLI and by tests to tell errors apart.
    code: str = "XX000"
    #: For an error of one parameter row of a bulk statement (``Session.execute_many``): that
    #: row's 0-based index among them (the PostgreSQL endpoint answers that row's Execute).
    row: int | None = None
    #: Where in the client's input the error is, beyond the statement (PostgreSQL's CONTEXT
    #: field: ``COPY t, line 3, column n: "x"``).
    context: str | None = None
    #: More about the error than its message (PostgreSQL's DETAIL field: ``Key (id)=(2) already
    #: exists.``); the CLI prints it on a line of its own, as psql does.
    detail: str | None = None
    #: The constraint violated, if any (PostgreSQL's constraint name field: ``t_pkey``).
    constraint: str | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as it is (a process pool's or Spark's worker sends it back): rebuilt without
        calling ``__init__`` again, whose arguments some subclasses shape into the message."""
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))


def _rebuild(cls: type[ChangefeedError], args: tuple[Any, ...], state: dict[str, Any]) -> ChangefeedError:
    exc = cls.__new__(cls)
    exc.args = args
    exc.__dict__.update(state)
    return exc


class SyntaxError_(ChangefeedError):
    """A statement could not be parsed. ``line``/``column`` are 1-based."""

    code = "42601"

    def __init__(self, message: str, *, line: int = 0, column: int = 0, expected: tuple[str, ...] = ()):
        self.line = line
        self.column = column
        self.expected = expected
        where = f"at line {line}, column {column}: " if line else ""
        super().__init__(f"syntax error {where}{message}")


# Public name; the trailing underscore only avoids shadowing the builtin inside this module.
StatementSyntaxError = SyntaxError_


class InvalidStatement(ChangefeedError):
    """A statement parsed, but is not valid (e.g. a WHERE clause that does not name a full key)."""

    code = "42000"


class GroupingError(InvalidStatement):
    """An aggregate where none may stand (``RETURNING count(*)``)."""

    code = "42803"


class InvalidRecursion(InvalidStatement):
    """A recursive WITH query not of the form ``non-recursive-term UNION [ALL] recursive-term``
    (``42P19``)."""

    code = "42P19"


class WindowingError(InvalidStatement):
    """A window function where none may stand: in WHERE, GROUP BY or HAVING, nested in another
    window call, or with a frame that cannot be (``42P20``)."""

    code = "42P20"


class WrongObjectType(InvalidStatement):
    """``OVER`` after a function that is neither a window function nor an aggregate, or a window
    function called without ``OVER`` (``42809``)."""

    code = "42809"


class DivisionByZero(InvalidStatement):
    """``n / 0``, ``n % 0`` (``22012``)."""

    code = "22012"


class ColumnCountMismatch(InvalidStatement):
    """An INSERT's values and its target columns that do not pair up, a scalar subquery of
    several columns (``42601``)."""

    code = "42601"


class UnsupportedFeature(ChangefeedError):
    """A statement or option that is understood but not supported by this implementation."""

    code = "0A000"


class UndefinedObject(ChangefeedError):
    """A table, column, keyspace, type, changefeed or topic does not exist."""

    code = "42P01"


class UndefinedTable(UndefinedObject):
    code = "42P01"


class UndefinedColumn(UndefinedObject):
    code = "42703"


class UndefinedType(UndefinedObject):
    """A type name that names no type (``CAST(x AS nosuch)``, a column declared of it)."""

    code = "42704"


class UndefinedFunction(UndefinedObject):
    """An unknown function, or an operator that does not apply to its operands' types (also
    CockroachDB's CDC queries: ``function "now" unsupported by CDC``, ``unknown signature:
    btrim(int)``)."""

    code = "42883"


class CardinalityViolation(ChangefeedError):
    """A subquery used as a value that gives more than one row (``21000``)."""

    code = "21000"


class InvalidColumnReference(ChangefeedError):
    """``ORDER BY 5`` of a select list of fewer columns (``42P10``)."""

    code = "42P10"


class DuplicateObject(ChangefeedError):
    """A table, column, changefeed or topic of that name already exists."""

    code = "42710"


class DuplicateAlias(DuplicateObject):
    """``FROM t JOIN t``: one name for two tables of a FROM (``42712``)."""

    code = "42712"


class AmbiguousColumn(InvalidStatement):
    """A column name two joined tables have, used without its table (``42702``)."""

    code = "42702"


class DuplicateColumn(DuplicateObject):
    """A column named twice where each may appear once (``COPY t (a, a)``)."""

    code = "42701"


class TypeMismatch(ChangefeedError):
    """A value does not fit its column's type (wrong type, out of range, too long, bad literal)."""

    code = "22000"


class ValueTooLarge(TypeMismatch):
    code = "22001"


class InvalidTextRepresentation(TypeMismatch):
    """A string that does not parse as the type it must be (``could not parse "x" as type int``)."""

    code = "22P02"


class InvalidBinaryRepresentation(TypeMismatch):
    """A bound parameter in binary format that is not its type's binary representation."""

    code = "22P03"


class InvalidDatetimeFormat(TypeMismatch):
    """A string that does not parse as a date, time or timestamp."""

    code = "22007"


class DatetimeFieldOverflow(TypeMismatch):
    """Date or time arithmetic past the range the type holds (``22008``)."""

    code = "22008"


class DatatypeMismatch(TypeMismatch):
    """A value of another type where a column or operator wants this one."""

    code = "42804"


class NumericValueOutOfRange(TypeMismatch):
    code = "22003"


class InvalidArgument(TypeMismatch):
    """A function's argument outside what it takes (``sqrt(-1)``, ``split_part(s, ',', 0)``);
    the instance carries PostgreSQL's code for the function (22011, 2201E, 2201F, 22023 ..)."""

    code = "22023"


class CharacterNotInRepertoire(ChangefeedError):
    """Bytes that are not UTF-8 where text is (``invalid byte sequence for encoding "UTF8"``)."""

    code = "22021"


class InvalidRegularExpression(ChangefeedError):
    """A pattern of ``~`` that does not compile (``2201B``)."""

    code = "2201B"


class InvalidEscape(ChangefeedError):
    """A ``LIKE .. ESCAPE`` string that is neither empty nor one character."""

    code = "22025"


class BadCopyFormat(ChangefeedError):
    """``COPY .. FROM STDIN`` data that does not have the shape its format says (a row with
    too few or too many fields, a bad binary header)."""

    code = "22P04"


class NotNullViolation(ChangefeedError):
    code = "23502"


class UniqueViolation(ChangefeedError):
    """INSERT of a key that already exists: PostgreSQL's and CockroachDB's message, naming the
    primary key's constraint ``<table>_pkey``, and the key in the detail."""

    code = "23505"

    def __init__(self, table: str, columns: str, values: str) -> None:
        self.constraint = f"{table}_pkey"
        super().__init__(f'duplicate key value violates unique constraint "{self.constraint}"')
        self.detail = f"Key ({columns})=({values}) already exists."


class InvalidOption(ChangefeedError):
    """An unknown option name, or a value of the wrong type or out of range."""

    code = "22023"


class PermissionDenied(ChangefeedError):
    code = "42501"


class QueryCanceled(ChangefeedError):
    """A statement was canceled while it ran or waited (a pgwire CancelRequest, ``CANCEL QUERY``)."""

    code = "57014"


class TransactionError(ChangefeedError):
    """Misuse of transactions (COMMIT without BEGIN, nested BEGIN, use after close)."""

    code = "25000"


class ReadOnlyTransaction(TransactionError):
    """A write in a ``READ ONLY`` transaction (``25006``)."""

    code = "25006"


class NoActiveTransaction(TransactionError):
    """A statement that needs a transaction block outside one (PostgreSQL's ``25P01``:
    ``SAVEPOINT can only be used in transaction blocks``)."""

    code = "25P01"


class InvalidSavepoint(TransactionError):
    """``RELEASE`` or ``ROLLBACK TO`` a savepoint the transaction does not have (``3B001``)."""

    code = "3B001"


class ActiveTransaction(TransactionError):
    """A statement that cannot run inside a transaction block (PostgreSQL's ``25001``)."""

    code = "25001"


class StatementTooComplex(ChangefeedError):
    """A statement nested deeper than the parser or evaluator can follow (PostgreSQL's
    ``stack depth limit exceeded``)."""

    code = "54001"


class LockNotAvailable(TransactionError):
    """A write transaction that was asked not to wait found another writer (of this process or
    another) at work, and refused as it started, before changing anything (an endpoint's event
    loop then waits for the writer another way: ``server.gate_wait``). Raised nowhere else."""

    code = "55P03"


class TransactionConflict(TransactionError):
    """A serialization conflict: the transaction was rolled back and may be retried."""

    code = "40001"


class DatabaseError(ChangefeedError):
    """The database directory or one of its files is missing, not ours, or corrupt."""

    code = "58000"


class CorruptFile(DatabaseError):
    code = "XX001"


class TopicError(ChangefeedError):
    """Errors of the embedded topic log (unknown topic/partition, offset out of range)."""

    code = "58P01"


class PipelineError(ChangefeedError):
    """The Spark pipeline could not start or a checkpoint is unreadable."""

    code = "58P02"


class EndpointError(ChangefeedError):
    """A network endpoint could not start: its port is in use, its address is not this machine's."""

    code = "58030"


class SinkError(ChangefeedError):
    """A sink refused or failed a write."""

    code = "58P03"


# ---------------------------------------------------------------------------- Avro / schema registry
class SchemaRegistryError(SinkError):
    """The Confluent schema registry could not be reached, or refused a schema."""

    code = "58P04"


# ---------------------------------------------------------------------------- access (users, roles)


class UndefinedWindow(UndefinedObject):
    """``OVER w`` naming no window of the query's WINDOW clause."""

    code = "42704"


class UndefinedRole(UndefinedObject):
    """A user or role that does not exist."""

    code = "42704"


class InvalidAuthorization(ChangefeedError):
    """Connecting as a user that does not exist or may not log in."""

    code = "28000"


# ---------------------------------------------------------------- CockroachDB changefeed jobs
class JobNotFound(UndefinedObject):
    """``PAUSE JOB``/``SHOW CHANGEFEED JOB``/``ALTER CHANGEFEED`` of a job id that does not exist."""

    code = "42704"


class JobStateError(ChangefeedError):
    """A job statement that the job's status does not allow (e.g. ALTER of a running changefeed)."""

    code = "55000"


class GcThresholdError(ChangefeedError):
    """History a changefeed needs was garbage-collected (a ``cursor`` older than the GC threshold)."""

    code = "XXUUU"


# ---------------------------------------------------------------------------- CockroachDB changefeeds
class ChangefeedFailed(ChangefeedError):
    """A running changefeed stopped on purpose, e.g. ``schema_change_policy='stop'`` at a schema
    change (``shut down due to schema change ...: schema change occurred at <hlc>``)."""

    code = "XXC01"


# --------------------------------------------------------------------------------------------------
# Apache Phoenix (issue 11): errors with Phoenix's own codes (``SQLExceptionCode``). ``code`` is
# Phoenix's SQLState; ``vendor_code`` its error number; the message reads as Phoenix prints it,
# ``ERROR <vendor_code> (<code>): <text>``.


class _PhoenixCode:
    vendor_code: int = 0
    code: str = "XX000"
    text: str = ""

    def phoenix_message(self, detail: str) -> str:
        return f"ERROR {self.vendor_code} ({self.code}): {self.text}{detail}"


class PhoenixTableUndefined(_PhoenixCode, UndefinedTable):
    """``TABLE_UNDEFINED``: a CDC on a missing table, DROP CDC of a missing CDC."""

    vendor_code, code, text = 1012, "42M03", "Table undefined."

    def __init__(self, detail: str = "") -> None:
        super().__init__(self.phoenix_message(detail))


class PhoenixTableAlreadyExists(_PhoenixCode, DuplicateObject):
    """``TABLE_ALREADY_EXIST``: a CDC name already taken."""

    vendor_code, code, text = 1013, "42M04", "Table already exists."

    def __init__(self, detail: str = "") -> None:
        super().__init__(self.phoenix_message(detail))


class CdcAlreadyEnabled(_PhoenixCode, DuplicateObject):
    """``CDC_ALREADY_ENABLED``: a second CDC on a table."""

    vendor_code, code = 10963, "44A45"
    text = "CDC on this table is either enabled or is in the process of being enabled."

    def __init__(self, detail: str = "") -> None:
        super().__init__(self.phoenix_message(detail))


class UnknownChangeScope(_PhoenixCode, InvalidStatement):
    """``UNKNOWN_INCLUDE_CHANGE_SCOPE``: a bad ``CDC_INCLUDE`` hint (message ends with the scope)."""

    vendor_code, code, text = 10958, "44A40", "Unknown change scope for CDC INCLUDE"

    def __init__(self, detail: str = "") -> None:
        super().__init__(self.phoenix_message(detail))


class PhoenixSyntaxError(_PhoenixCode, InvalidStatement):
    """Phoenix's parse error (``42P00``), e.g. an unknown scope in ``INCLUDE (..)``."""

    vendor_code, code, text = 601, "42P00", "Syntax error."

    def __init__(self, detail: str = "") -> None:
        super().__init__(self.phoenix_message(detail))


class PhoenixIllegalData(_PhoenixCode, TypeMismatch):
    """``ILLEGAL_DATA``: a string ``TO_DATE``/``TO_TIMESTAMP`` cannot parse."""

    vendor_code, code, text = 201, "22000", "Illegal data."

    def __init__(self, detail: str = "") -> None:
        super().__init__(self.phoenix_message(detail))
        self.detail = detail.strip()


# --------------------------------------------------------------------------------------------------
# YDB asynchronous replication (issue 20): YDB's texts for writes to replicas and for schema
# operations on them; the replication's own errors.


class ReplicaReadOnly(ChangefeedError):
    """A write to a replica of a running asynchronous replication (YDB answers the same text, with
    status BAD_REQUEST): ``Can't execute write tx at replicated table``."""

    code = "25006"


class ReplicaSchemaLocked(ChangefeedError):
    """A schema operation (ALTER TABLE, changefeeds, DROP TABLE) on a replica of a running
    asynchronous replication: ``path is an async replica table``, as YDB's scheme shard says."""

    code = "55000"


class ReplicationError(ChangefeedError):
    """An asynchronous replication failed: its source could not be reached or refused a request,
    a replica could not be written. The replication's state shows the same text."""

    code = "58P05"
