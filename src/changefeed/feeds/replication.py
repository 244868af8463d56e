"""YDB asynchronous replication (issue 20): definitions, options, connection strings, and the
destination database's replication tables.

``CREATE ASYNC REPLICATION r FOR src AS dst [, ...] WITH (CONNECTION_STRING = .., ...)`` runs on
the *destination* database. For each item the destination creates a changefeed on the source table
(``MODE = 'UPDATES'``, ``FORMAT = 'JSON'``, ``INITIAL_SCAN = TRUE``; with ``CONSISTENCY_LEVEL =
'GLOBAL'`` also ``VIRTUAL_TIMESTAMPS = TRUE`` and ``BARRIERS_INTERVAL = COMMIT_INTERVAL``, as
YDB's replication controller does) and a read-only replica table here; the pipeline of the
destination (``changefeed run``) then reads the changefeeds' topics and applies them (see
``changefeed.pipeline`` for the apply and its exactly-once commit).

Connection strings (``CONNECTION_STRING``), the source being another database of this product:

* ``file:///abs/path/db`` or just ``/abs/path/db``: a database directory on this machine;
* ``changefeed://HOST[:PORT][/?database=NAME&kafka=HOST:PORT]``: a node (``changefeed start`` or
  ``changefeed serve --pg .. --kafka ..``) on another machine, reached only through its endpoints:
  the PostgreSQL endpoint (default port 26257) for DDL and schema, the Kafka endpoint (default: the
  same host, port 9092) for the changefeeds' topics. ``changefeeds://`` asks for TLS on both
  (``CA_CERT`` the PEM of the CA to trust).

The destination keeps, in its own database file: ``_replications`` (one row per replication: its
spec, state, error and how far it has applied), ``_replication_items`` (source path, replica table,
changefeed and topic of each item), ``_replication_offsets`` (per source topic partition: the next
offset to apply and the last barrier seen), and for ``GLOBAL`` ``_replication_buffer`` (received
changes waiting for the next barrier). ``_secrets`` holds ``CREATE SECRET`` values.
"""

from __future__ import annotations

import datetime as dt
import enum
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import orjson

from changefeed.engine.temporal_text import parse_interval
from changefeed.exceptions import DuplicateObject, InvalidOption, UndefinedObject

NS_PER_S = 1_000_000_000
NS_PER_MS = 1_000_000

# ------------------------------------------------------------------------------ states
#: YDB's replication states (``DescribeReplicationResult``: running, error, done; paused since
#: STATE = "Paused"). ``StandBy`` is what ALTER .. SET (STATE = "StandBy") asks for: running again.
RUNNING = "Running"
PAUSED = "Paused"
ERROR = "Error"
DONE = "Done"
STATES = (RUNNING, PAUSED, ERROR, DONE)


class Consistency(enum.Enum):
    ROW = "ROW"
    GLOBAL = "GLOBAL"

    @property
    def shown(self) -> str:
        """As YDB's ``scheme describe`` prints it: ``Row`` / ``Global``."""
        return self.value.capitalize()


# ------------------------------------------------------------------------------ options
OPT_CONNECTION_STRING = "connection_string"
OPT_CA_CERT = "ca_cert"
OPT_USER = "user"
OPT_PASSWORD_SECRET_NAME = "password_secret_name"
OPT_PASSWORD_SECRET_PATH = "password_secret_path"
OPT_TOKEN_SECRET_NAME = "token_secret_name"
OPT_TOKEN_SECRET_PATH = "token_secret_path"
OPT_CONSISTENCY_LEVEL = "consistency_level"
OPT_COMMIT_INTERVAL = "commit_interval"
OPT_STATE = "state"
OPT_FAILOVER_MODE = "failover_mode"

CREATE_OPTIONS = (
    OPT_CONNECTION_STRING,
    OPT_CA_CERT,
    OPT_USER,
    OPT_PASSWORD_SECRET_NAME,
    OPT_PASSWORD_SECRET_PATH,
    OPT_TOKEN_SECRET_NAME,
    OPT_TOKEN_SECRET_PATH,
    OPT_CONSISTENCY_LEVEL,
    OPT_COMMIT_INTERVAL,
)
ALTER_OPTIONS = (
    OPT_STATE,
    OPT_FAILOVER_MODE,
    OPT_USER,
    OPT_PASSWORD_SECRET_NAME,
    OPT_PASSWORD_SECRET_PATH,
    OPT_TOKEN_SECRET_NAME,
    OPT_TOKEN_SECRET_PATH,
)
#: YDB's default change commit interval (``COMMIT_INTERVAL``) of GLOBAL consistency.
DEFAULT_COMMIT_INTERVAL = dt.timedelta(seconds=10)
MIN_COMMIT_INTERVAL = dt.timedelta(milliseconds=1)
MAX_COMMIT_INTERVAL = dt.timedelta(days=1)
#: The source's changefeeds keep their records this long (YDB's replication default: a day).
SOURCE_RETENTION = "PT24H"

DEFAULT_PG_PORT = 26257
DEFAULT_KAFKA_PORT = 9092
DEFAULT_DATABASE = "defaultdb"
LOCAL_SCHEMES = ("file",)
NODE_SCHEMES = ("changefeed", "changefeeds")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where the source database is: a directory here (``path``) or a node's endpoints."""

    text: str  # the connection string as written
    path: str | None = None  # a database directory on this machine
    host: str = ""
    pg_port: int = DEFAULT_PG_PORT
    kafka_host: str = ""
    kafka_port: int = DEFAULT_KAFKA_PORT
    database: str = DEFAULT_DATABASE
    tls: bool = False

    @property
    def local(self) -> bool:
        return self.path is not None

    @property
    def shown(self) -> str:
        """The endpoint as YDB's describe prints it (``Endpoint:``)."""
        if self.path is not None:
            return f"file://{self.path}"
        return f"{self.host}:{self.pg_port}"

    @property
    def kafka(self) -> str:
        return f"{self.kafka_host}:{self.kafka_port}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> Endpoint:
        return Endpoint(**d)


def _port(text: str, what: str, conn: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = -1
    if not 1 <= n <= 65535:
        raise InvalidOption(
            f"CONNECTION_STRING {conn!r}: {what} port must be a number from 1 to 65535, not {text!r}"
        )
    return n


def parse_connection_string(text: str) -> Endpoint:
    """A ``CONNECTION_STRING`` (see the module docstring), or InvalidOption saying what is wrong."""
    s = text.strip()
    if not s:
        raise InvalidOption("CONNECTION_STRING must not be empty")
    if s.startswith("/"):
        return Endpoint(text, path=s.rstrip("/") or "/")
    try:
        u = urlsplit(s)
        port_text = u.netloc.rpartition(":")[2] if ":" in u.netloc.rsplit("]", 1)[-1] else ""
    except ValueError as exc:
        raise InvalidOption(f"CONNECTION_STRING {text!r} is not a valid URI: {exc}") from None
    scheme = u.scheme.lower()
    if scheme in LOCAL_SCHEMES:
        if u.netloc not in ("", "localhost"):
            raise InvalidOption(
                f"CONNECTION_STRING {text!r}: a file:// source is a directory on this machine (file:///path);"
                " reach another machine with changefeed://HOST"
            )
        path = unquote(u.path)
        if not path.startswith("/"):
            raise InvalidOption(f"CONNECTION_STRING {text!r}: the source directory must be an absolute path")
        return Endpoint(text, path=path.rstrip("/") or "/")
    if scheme in ("grpc", "grpcs"):
        raise InvalidOption(
            f"CONNECTION_STRING {text!r}: the source is a changefeed database, reached as"
            " changefeed://HOST[:PORT][/?database=NAME&kafka=HOST:PORT] (its PostgreSQL and Kafka endpoints)"
            " or file:///path on this machine; YDB's grpc:// endpoints are not served"
        )
    if scheme not in NODE_SCHEMES:
        raise InvalidOption(
            f"CONNECTION_STRING {text!r}: unknown scheme {u.scheme!r}; use changefeed://HOST[:PORT] or file:///path"
        )
    host = u.hostname or ""
    if not host:
        raise InvalidOption(f"CONNECTION_STRING {text!r} names no host")
    if u.username or u.password:
        raise InvalidOption(
            f"CONNECTION_STRING {text!r}: credentials do not go in the connection string;"
            " use USER and PASSWORD_SECRET_NAME"
        )
    pg_port = _port(port_text, "the PostgreSQL", text) if port_text else DEFAULT_PG_PORT
    if u.path not in ("", "/"):
        raise InvalidOption(f"CONNECTION_STRING {text!r}: unexpected path {u.path!r} (use ?database=NAME)")
    query = parse_qs(u.query, keep_blank_values=True)
    unknown = sorted(set(query) - {"database", "kafka"})
    if unknown:
        raise InvalidOption(
            f"CONNECTION_STRING {text!r}: unknown parameter {unknown[0]!r}; valid parameters are database and kafka"
        )
    database = query.get("database", [DEFAULT_DATABASE])[-1].strip("/") or DEFAULT_DATABASE
    kafka_host, kafka_port = host, DEFAULT_KAFKA_PORT
    if "kafka" in query:
        k = query["kafka"][-1]
        h, sep, p = k.rpartition(":")
        if not sep:
            h, p = k, str(DEFAULT_KAFKA_PORT)
        kafka_host = h.strip("[]") or host
        kafka_port = _port(p, "the Kafka", text)
    return Endpoint(
        text,
        host=host,
        pg_port=pg_port,
        kafka_host=kafka_host,
        kafka_port=kafka_port,
        database=database,
        tls=scheme == "changefeeds",
    )


@dataclass(frozen=True, slots=True)
class ReplicationSpec:
    """One replication's definition (``_replications.spec``)."""

    name: str
    endpoint: Endpoint
    consistency: Consistency = Consistency.ROW
    commit_interval_ns: int = int(DEFAULT_COMMIT_INTERVAL.total_seconds()) * NS_PER_S
    user: str | None = None
    password_secret: str | None = None
    ca_cert: str | None = None
    owner: str = "root"

    @property
    def global_(self) -> bool:
        return self.consistency is Consistency.GLOBAL

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "endpoint": self.endpoint.to_json(),
            "consistency": self.consistency.value,
            "commit_interval_ns": self.commit_interval_ns,
            "user": self.user,
            "password_secret": self.password_secret,
            "ca_cert": self.ca_cert,
            "owner": self.owner,
        }

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> ReplicationSpec:
        return ReplicationSpec(
            name=d["name"],
            endpoint=Endpoint.from_json(d["endpoint"]),
            consistency=Consistency(d["consistency"]),
            commit_interval_ns=int(d["commit_interval_ns"]),
            user=d.get("user"),
            password_secret=d.get("password_secret"),
            ca_cert=d.get("ca_cert"),
            owner=d.get("owner", "root"),
        )


def _text(value: Any, option: str) -> str:
    if isinstance(value, str):
        return value
    raise InvalidOption(f"asynchronous replication option {option.upper()} takes a string, got {value!r}")


def _interval(value: Any, option: str) -> dt.timedelta:
    if isinstance(value, dt.timedelta):
        return value
    if isinstance(value, str):
        try:
            return parse_interval(value)
        except ValueError:
            pass
    raise InvalidOption(
        f"asynchronous replication option {option.upper()} takes an Interval such as Interval('PT10S'), got {value!r}"
    )


def _lowered(options: Mapping[str, Any], valid: Iterable[str], statement: str) -> dict[str, Any]:
    opts = {k.lower(): v for k, v in options.items()}
    allowed = tuple(valid)
    unknown = sorted(set(opts) - set(allowed))
    if unknown:
        raise InvalidOption(
            f"unknown {statement} option {unknown[0].upper()}; valid options are: {', '.join(o.upper() for o in allowed)}"
        )
    return opts


def _credentials(opts: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """``USER`` and the password secret's name; token options are refused with the reason."""
    for tok in (OPT_TOKEN_SECRET_NAME, OPT_TOKEN_SECRET_PATH):
        if tok in opts:
            raise InvalidOption(
                f"{tok.upper()}: the source authenticates users by password (SCRAM-SHA-256), not by token;"
                " give USER and PASSWORD_SECRET_NAME"
            )
    if OPT_PASSWORD_SECRET_NAME in opts and OPT_PASSWORD_SECRET_PATH in opts:
        raise InvalidOption("give one of PASSWORD_SECRET_NAME and PASSWORD_SECRET_PATH")
    user = _text(opts[OPT_USER], OPT_USER) if OPT_USER in opts else None
    secret_opt = OPT_PASSWORD_SECRET_NAME if OPT_PASSWORD_SECRET_NAME in opts else OPT_PASSWORD_SECRET_PATH
    secret = _text(opts[secret_opt], secret_opt) if secret_opt in opts else None
    if secret is not None and user is None:
        raise InvalidOption(f"{secret_opt.upper()} needs USER")
    return user, secret


def parse_create_options(name: str, options: Mapping[str, Any], *, owner: str) -> ReplicationSpec:
    """Validate ``CREATE ASYNC REPLICATION .. WITH (..)`` options (already Python values)."""
    opts = _lowered(options, CREATE_OPTIONS, "asynchronous replication")
    if OPT_CONNECTION_STRING not in opts:
        raise InvalidOption("asynchronous replication option CONNECTION_STRING is required")
    endpoint = parse_connection_string(_text(opts[OPT_CONNECTION_STRING], OPT_CONNECTION_STRING))
    user, secret = _credentials(opts)
    ca_cert = _text(opts[OPT_CA_CERT], OPT_CA_CERT) if OPT_CA_CERT in opts else None
    if ca_cert is not None and not endpoint.tls:
        raise InvalidOption(
            "CA_CERT is for an encrypted connection: its CONNECTION_STRING starts with changefeeds://"
        )
    level = _text(opts.get(OPT_CONSISTENCY_LEVEL, "ROW"), OPT_CONSISTENCY_LEVEL).upper()
    try:
        consistency = Consistency(level)
    except ValueError:
        raise InvalidOption(
            f"invalid CONSISTENCY_LEVEL {opts[OPT_CONSISTENCY_LEVEL]!r}; expected ROW or GLOBAL"
        ) from None
    interval = DEFAULT_COMMIT_INTERVAL
    if OPT_COMMIT_INTERVAL in opts:
        if consistency is not Consistency.GLOBAL:
            raise InvalidOption("COMMIT_INTERVAL is an option of CONSISTENCY_LEVEL = 'GLOBAL'")
        interval = _interval(opts[OPT_COMMIT_INTERVAL], OPT_COMMIT_INTERVAL)
        if not MIN_COMMIT_INTERVAL <= interval <= MAX_COMMIT_INTERVAL:
            raise InvalidOption(f"COMMIT_INTERVAL must be from 1 millisecond to 1 day, got {interval}")
    return ReplicationSpec(
        name=name,
        endpoint=endpoint,
        consistency=consistency,
        commit_interval_ns=interval // dt.timedelta(microseconds=1) * 1_000,
        user=user,
        password_secret=secret,
        ca_cert=ca_cert,
        owner=owner,
    )


@dataclass(frozen=True, slots=True)
class Alter:
    """What ``ALTER ASYNC REPLICATION .. SET (..)`` asks for."""

    state: str | None = None  # DONE | PAUSED | RUNNING (StandBy)
    user: str | None = None
    password_secret: str | None = None
    credentials: bool = False


def parse_alter_options(options: Mapping[str, Any]) -> Alter:
    opts = _lowered(options, ALTER_OPTIONS, "asynchronous replication")
    state = None
    if OPT_STATE in opts:
        word = _text(opts[OPT_STATE], OPT_STATE).upper()
        states = {"DONE": DONE, "PAUSED": PAUSED, "STANDBY": RUNNING}
        if word not in states:
            raise InvalidOption(f"invalid STATE {opts[OPT_STATE]!r}; expected DONE, PAUSED or STANDBY")
        state = states[word]
    if OPT_FAILOVER_MODE in opts:
        mode = _text(opts[OPT_FAILOVER_MODE], OPT_FAILOVER_MODE).upper()
        if mode != "FORCE":
            raise InvalidOption(f"invalid FAILOVER_MODE {opts[OPT_FAILOVER_MODE]!r}; the only mode is FORCE")
        if state != DONE:
            raise InvalidOption("FAILOVER_MODE can only be used with STATE = 'DONE'")
    creds = any(k in opts for k in (OPT_USER, OPT_PASSWORD_SECRET_NAME, OPT_PASSWORD_SECRET_PATH))
    user, secret = _credentials(opts)
    if state is None and not creds:
        raise InvalidOption(
            "ALTER ASYNC REPLICATION .. SET needs STATE or credentials (USER, PASSWORD_SECRET_NAME)"
        )
    return Alter(state, user, secret, creds)


# ------------------------------------------------------------------------------ items
@dataclass(frozen=True, slots=True)
class Item:
    """One ``src AS dst`` of a replication."""

    item_id: int
    source_path: str  # the source table's name on the source
    target_table_id: int
    target_name: str
    changefeed: str  # the changefeed the replication made on the source table
    topic: str  # its topic on the source: ``<table>/<changefeed>``
    partitions: int
    source_table_id: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> Item:
        return Item(**d)


@dataclass(frozen=True, slots=True)
class Replication:
    """A replication as stored: id, spec, items, state."""

    id: int
    spec: ReplicationSpec
    items: tuple[Item, ...]
    state: str
    error: str | None
    created_ns: int
    modified_ns: int
    #: GLOBAL: the barrier (commit wall ns) the replicas are the source as of; ROW: the commit
    #: time of the newest change applied. 0 before anything was applied.
    applied_wall: int = 0
    applied_ns: int = 0  # when that was applied (wall clock)
    applied_rows: int = 0
    lag_ns: int = 0  # ROW: how long the changes of the last applied batch waited (YDB's lag)

    @property
    def name(self) -> str:
        return self.spec.name


# ------------------------------------------------------------------------------ store
_DDL = (
    "CREATE TABLE IF NOT EXISTS _replications (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE,"
    " spec TEXT NOT NULL, state TEXT NOT NULL, error TEXT, created_ns INTEGER NOT NULL, modified_ns INTEGER NOT NULL,"
    " applied_wall INTEGER NOT NULL DEFAULT 0, applied_ns INTEGER NOT NULL DEFAULT 0,"
    " applied_rows INTEGER NOT NULL DEFAULT 0, lag_ns INTEGER NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS _replication_items (replication_id INTEGER NOT NULL, item_id INTEGER NOT NULL,"
    " spec TEXT NOT NULL, PRIMARY KEY (replication_id, item_id))",
    # per source topic partition: the next offset to apply, the newest barrier (wall ns) and the
    # newest change (commit wall ns) received
    "CREATE TABLE IF NOT EXISTS _replication_offsets (replication_id INTEGER NOT NULL, item_id INTEGER NOT NULL,"
    " partition INTEGER NOT NULL, next_offset INTEGER NOT NULL, barrier INTEGER NOT NULL DEFAULT 0,"
    " newest INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (replication_id, item_id, partition))",
    # GLOBAL: changes received, not yet below a barrier every partition has passed
    "CREATE TABLE IF NOT EXISTS _replication_buffer (replication_id INTEGER NOT NULL, item_id INTEGER NOT NULL,"
    " partition INTEGER NOT NULL, offset INTEGER NOT NULL, ts INTEGER NOT NULL, value BLOB NOT NULL,"
    " PRIMARY KEY (replication_id, item_id, partition, offset)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS _secrets (name TEXT PRIMARY KEY, value TEXT NOT NULL, owner TEXT NOT NULL)",
)


def ensure_tables(conn: sqlite3.Connection) -> None:
    for stmt in _DDL:
        conn.execute(stmt)


def has_tables(conn: sqlite3.Connection) -> bool:
    return (
        conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_replications'").fetchone()
        is not None
    )


def _row(conn: sqlite3.Connection, r: tuple[Any, ...]) -> Replication:
    rid = int(r[0])
    items = tuple(
        Item.from_json(orjson.loads(s))
        for (s,) in conn.execute(
            "SELECT spec FROM _replication_items WHERE replication_id = ? ORDER BY item_id", (rid,)
        )
    )
    return Replication(
        id=rid,
        spec=ReplicationSpec.from_json(orjson.loads(r[1])),
        items=items,
        state=r[2],
        error=r[3],
        created_ns=int(r[4]),
        modified_ns=int(r[5]),
        applied_wall=int(r[6]),
        applied_ns=int(r[7]),
        applied_rows=int(r[8]),
        lag_ns=int(r[9]),
    )


_COLUMNS = "id, spec, state, error, created_ns, modified_ns, applied_wall, applied_ns, applied_rows, lag_ns"


def all_replications(conn: sqlite3.Connection) -> list[Replication]:
    if not has_tables(conn):
        return []
    rows = conn.execute(f"SELECT {_COLUMNS} FROM _replications ORDER BY id").fetchall()
    return [_row(conn, r) for r in rows]


def find(conn: sqlite3.Connection, name: str) -> Replication | None:
    if not has_tables(conn):
        return None
    r = conn.execute(f"SELECT {_COLUMNS} FROM _replications WHERE name = ?", (name,)).fetchone()
    return None if r is None else _row(conn, r)


def get(conn: sqlite3.Connection, rid: int) -> Replication | None:
    if not has_tables(conn):
        return None
    r = conn.execute(f"SELECT {_COLUMNS} FROM _replications WHERE id = ?", (rid,)).fetchone()
    return None if r is None else _row(conn, r)


def require(conn: sqlite3.Connection, name: str) -> Replication:
    rep = find(conn, name)
    if rep is None:
        raise UndefinedObject(f"asynchronous replication {name!r} does not exist")
    return rep


def insert_replication(conn: sqlite3.Connection, spec: ReplicationSpec, now_ns: int) -> int:
    ensure_tables(conn)
    if find(conn, spec.name) is not None:
        raise DuplicateObject(f"asynchronous replication {spec.name!r} already exists")
    cur = conn.execute(
        "INSERT INTO _replications (name, spec, state, created_ns, modified_ns) VALUES (?, ?, ?, ?, ?)",
        (spec.name, orjson.dumps(spec.to_json()).decode(), RUNNING, now_ns, now_ns),
    )
    return int(cur.lastrowid or 0)


def insert_item(conn: sqlite3.Connection, rid: int, item: Item) -> None:
    conn.execute(
        "INSERT INTO _replication_items VALUES (?, ?, ?)",
        (rid, item.item_id, orjson.dumps(item.to_json()).decode()),
    )
    conn.executemany(
        "INSERT OR IGNORE INTO _replication_offsets (replication_id, item_id, partition, next_offset) VALUES (?, ?, ?, 0)",
        [(rid, item.item_id, p) for p in range(item.partitions)],
    )


def update_spec(conn: sqlite3.Connection, rid: int, spec: ReplicationSpec, now_ns: int) -> None:
    conn.execute(
        "UPDATE _replications SET spec = ?, modified_ns = ? WHERE id = ?",
        (orjson.dumps(spec.to_json()).decode(), now_ns, rid),
    )


def set_state(conn: sqlite3.Connection, rid: int, state: str, now_ns: int, error: str | None = None) -> None:
    conn.execute(
        "UPDATE _replications SET state = ?, error = ?, modified_ns = ? WHERE id = ?",
        (state, error, now_ns, rid),
    )


def delete_replication(conn: sqlite3.Connection, rid: int) -> None:
    for t in ("_replication_buffer", "_replication_offsets", "_replication_items"):
        conn.execute(f"DELETE FROM {t} WHERE replication_id = ?", (rid,))
    conn.execute("DELETE FROM _replications WHERE id = ?", (rid,))


@dataclass(frozen=True, slots=True)
class PartitionPosition:
    next_offset: int
    barrier: int  # wall ns of the newest barrier received (0: none yet)
    newest: int  # commit wall ns of the newest change received


def positions(conn: sqlite3.Connection, rid: int) -> dict[tuple[int, int], PartitionPosition]:
    """Where the apply stands: (item, partition) -> position."""
    if not has_tables(conn):
        return {}
    return {
        (int(i), int(p)): PartitionPosition(int(o), int(b), int(n))
        for i, p, o, b, n in conn.execute(
            "SELECT item_id, partition, next_offset, barrier, newest FROM _replication_offsets"
            " WHERE replication_id = ?",
            (rid,),
        )
    }


def buffered(conn: sqlite3.Connection, rid: int) -> int:
    if not has_tables(conn):
        return 0
    return int(
        conn.execute("SELECT COUNT(*) FROM _replication_buffer WHERE replication_id = ?", (rid,)).fetchone()[
            0
        ]
    )


def with_credentials(spec: ReplicationSpec, alter: Alter) -> ReplicationSpec:
    return (
        replace(spec, user=alter.user, password_secret=alter.password_secret) if alter.credentials else spec
    )


def checkpoint_name(rid: int) -> str:
    """The apply's Spark checkpoint directory under ``<db>/checkpoints``."""
    return f"replication-{rid}"


# ------------------------------------------------------------------------------ status
@dataclass(frozen=True, slots=True)
class Status:
    """What the system view, ``changefeed feeds`` and the node's metrics show of a replication."""

    replication: Replication
    #: GLOBAL: how far behind the clock the barrier the replicas are consistent as of is (None
    #: before the first one); ROW: how long the changes of the last applied batch had waited
    #: (YDB's ``received_at - created_at``; None before anything was applied). None once done.
    lag_ns: int | None
    #: per item: the initial scan's progress in percent (None when the source does not say)
    scan_progress: tuple[float | None, ...]
    buffered: int


def _scan_progress(rep: Replication) -> tuple[float | None, ...]:
    """Read from the source's own feed rows when the source is on this machine."""
    ep = rep.spec.endpoint
    if ep.path is None:
        return tuple(None for _ in rep.items)
    from pathlib import Path

    from changefeed.engine.database import DB_FILE, open_sqlite

    try:
        src = open_sqlite(Path(ep.path) / DB_FILE, readonly=True)
    except Exception:
        return tuple(None for _ in rep.items)
    out: list[float | None] = []
    try:
        for item in rep.items:
            try:
                row = src.execute(
                    "SELECT f.state, p.detail FROM _feeds f LEFT JOIN _progress p ON p.feed_id = f.id"
                    " WHERE f.table_id = ? AND f.name = ?",
                    (item.source_table_id, item.changefeed),
                ).fetchone()
            except sqlite3.Error:
                row = None
            if row is None:
                out.append(None)
            elif row[0] != "scanning":
                out.append(100.0)
            else:
                detail = orjson.loads(row[1]) if row[1] else {}
                total = int(detail.get("total") or 0)
                out.append(round(100.0 * int(detail.get("scanned") or 0) / total, 2) if total else 0.0)
    finally:
        src.close()
    return tuple(out)


def status(conn: sqlite3.Connection, now_ns: int) -> list[Status]:
    out = []
    for rep in all_replications(conn):
        lag: int | None
        if rep.state == DONE:
            lag = None
        elif rep.spec.global_:
            lag = max(0, now_ns - rep.applied_wall) if rep.applied_wall else None
        else:
            lag = rep.lag_ns if rep.applied_ns else None
        out.append(Status(rep, lag, _scan_progress(rep), buffered(conn, rep.id)))
    return out


#: Metric names for a node's ``/metrics`` (Prometheus text): one sample per replication, label
#: ``replication``. ``*_lag_seconds`` is the status's lag (GLOBAL: behind the clock as of the
#: barrier applied; ROW: the last batch's wait); state is 1 for the replication's current state.
METRICS = (
    ("changefeed_replication_lag_seconds", "gauge", "Replica lag behind the source, seconds"),
    ("changefeed_replication_applied_rows", "counter", "Changes applied to the replicas"),
    ("changefeed_replication_buffered_changes", "gauge", "GLOBAL: changes received, waiting for a barrier"),
    (
        "changefeed_replication_barrier_seconds",
        "gauge",
        "GLOBAL: the barrier the replicas are consistent as of",
    ),
    ("changefeed_replication_running", "gauge", "1 while the replication runs, else 0"),
    ("changefeed_replication_error", "gauge", "1 when the replication stopped on an error or last failed"),
)


def metric_samples(conn: sqlite3.Connection, now_ns: int) -> list[tuple[str, dict[str, str], float]]:
    """The replications' figures as (metric name, labels, value), for a node's metrics endpoint."""
    out: list[tuple[str, dict[str, str], float]] = []
    for st in status(conn, now_ns):
        rep = st.replication
        labels = {"replication": rep.name, "consistency": rep.spec.consistency.shown}
        out += [
            ("changefeed_replication_lag_seconds", labels, (st.lag_ns or 0) / 1e9),
            ("changefeed_replication_applied_rows", labels, float(rep.applied_rows)),
            ("changefeed_replication_buffered_changes", labels, float(st.buffered)),
            (
                "changefeed_replication_barrier_seconds",
                labels,
                rep.applied_wall / 1e9 if rep.spec.global_ else 0.0,
            ),
            ("changefeed_replication_running", labels, 1.0 if rep.state == RUNNING else 0.0),
            ("changefeed_replication_error", labels, 1.0 if rep.error else 0.0),
        ]
    return out


# ------------------------------------------------------------------------------ secrets
def put_secret(conn: sqlite3.Connection, name: str, value: str, owner: str, *, replace_: bool) -> bool:
    """Store a secret; False when it exists and ``replace_`` is not set."""
    ensure_tables(conn)
    if conn.execute("SELECT 1 FROM _secrets WHERE name = ?", (name,)).fetchone() is not None and not replace_:
        return False
    conn.execute(
        "INSERT INTO _secrets VALUES (?, ?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value",
        (name, value, owner),
    )
    return True


def secret_owner(conn: sqlite3.Connection, name: str) -> str | None:
    if not has_tables(conn):
        return None
    r = conn.execute("SELECT owner FROM _secrets WHERE name = ?", (name,)).fetchone()
    return None if r is None else str(r[0])


def secret_value(conn: sqlite3.Connection, name: str) -> str:
    r = (
        conn.execute("SELECT value FROM _secrets WHERE name = ?", (name,)).fetchone()
        if has_tables(conn)
        else None
    )
    if r is None:
        raise UndefinedObject(f"secret {name!r} does not exist")
    return str(r[0])


def drop_secret(conn: sqlite3.Connection, name: str) -> bool:
    if not has_tables(conn):
        return False
    return conn.execute("DELETE FROM _secrets WHERE name = ?", (name,)).rowcount > 0


__all__ = [
    "ALTER_OPTIONS",
    "CREATE_OPTIONS",
    "DEFAULT_COMMIT_INTERVAL",
    "DONE",
    "ERROR",
    "METRICS",
    "PAUSED",
    "RUNNING",
    "SOURCE_RETENTION",
    "STATES",
    "Alter",
    "Consistency",
    "Endpoint",
    "Item",
    "PartitionPosition",
    "Replication",
    "ReplicationSpec",
    "Status",
    "all_replications",
    "buffered",
    "checkpoint_name",
    "delete_replication",
    "drop_secret",
    "ensure_tables",
    "find",
    "get",
    "has_tables",
    "insert_item",
    "insert_replication",
    "metric_samples",
    "parse_alter_options",
    "parse_connection_string",
    "parse_create_options",
    "positions",
    "put_secret",
    "require",
    "secret_owner",
    "secret_value",
    "set_state",
    "status",
    "update_spec",
    "with_credentials",
]
