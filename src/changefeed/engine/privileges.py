"""Users, roles and privileges, as CockroachDB checks them.

Storage (engine tables): ``_users(name, options)`` holds users and roles with their role options
(JSON: ``{"controlchangefeed": true, "password": "SCRAM-SHA-256$...", "nologin": true}``);
``_role_members(role, member, admin_option)`` role membership; ``_grants(grantee, table_id,
privilege)`` table privileges, where table id 0 holds the default privileges given to every
table created later (``ALTER DEFAULT PRIVILEGES``).

Built in, as in CockroachDB: ``root`` (always an admin), the ``admin`` role (its members may do
everything) and ``public`` (every user is a member). A user's *effective* privileges are its own
plus those of every role it belongs to, directly or through other roles; they are computed once
per catalog version and cached, so a statement's check is a dictionary look-up. Every statement
that changes users, roles or grants bumps the catalog version.

Errors are :class:`~changefeed.exceptions.PermissionDenied` (SQLSTATE 42501) with CockroachDB's
texts, naming the user, the privilege and the table.
"""

from __future__ import annotations

import enum
import sqlite3
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import orjson

from changefeed.engine.catalog import TableSchema
from changefeed.exceptions import InvalidAuthorization, InvalidStatement, PermissionDenied

ROOT = "root"
ADMIN = "admin"
PUBLIC = "public"
#: Roles that exist in every database and cannot be created or dropped.
BUILTIN_ROLES = (ROOT, ADMIN, PUBLIC)

#: Table id under which ``ALTER DEFAULT PRIVILEGES`` grants are kept.
DEFAULT_PRIVILEGES_TABLE = 0

# Role options (``CREATE/ALTER USER u WITH OPT``); ``NOOPT`` turns one off.
CONTROLCHANGEFEED = "CONTROLCHANGEFEED"
CONTROLJOB = "CONTROLJOB"
CREATEROLE = "CREATEROLE"
CREATEDB = "CREATEDB"
LOGIN = "LOGIN"
PASSWORD = "PASSWORD"
VALID_UNTIL = "VALID UNTIL"
ROLE_OPTIONS = frozenset({CONTROLCHANGEFEED, CONTROLJOB, CREATEROLE, CREATEDB, LOGIN, PASSWORD, VALID_UNTIL})


class Privilege(enum.Enum):
    """Table privileges (CockroachDB ``privilege.Kind``); ``ALL`` holds every other one."""

    ALL = "ALL"
    CHANGEFEED = "CHANGEFEED"
    CREATE = "CREATE"
    DROP = "DROP"
    SELECT = "SELECT"
    INSERT = "INSERT"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    ZONECONFIG = "ZONECONFIG"

    @staticmethod
    def parse(word: str) -> Privilege:
        w = word.upper()
        if w == "ALL PRIVILEGES":
            w = "ALL"
        try:
            return Privilege(w)
        except ValueError:
            raise InvalidStatement(f"invalid privilege type {w} for table") from None


#: Privileges in the order CockroachDB lists them.
TABLE_PRIVILEGES = tuple(p for p in Privilege if p is not Privilege.ALL)


@dataclass(frozen=True, slots=True)
class UserPrivileges:
    """Everything one user may do, at one catalog version."""

    user: str
    exists: bool
    admin: bool
    #: The user and every role it belongs to, directly or not (``public`` included).
    roles: frozenset[str]
    #: Role options held by the user or any of its roles, upper case.
    options: frozenset[str]
    #: Table id -> privileges (``ALL`` expanded).
    tables: Mapping[int, frozenset[Privilege]]

    def on(self, table_id: int) -> frozenset[Privilege]:
        return self.tables.get(table_id, frozenset())

    def has(self, privilege: Privilege, table_id: int) -> bool:
        if self.admin:
            return True
        held = self.tables.get(table_id)
        if held is None:
            return False
        if privilege is Privilege.ALL:
            return Privilege.ALL in held
        return privilege in held


# ===================================================================================== reading


def catalog_version(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT value FROM _meta WHERE key = 'catalog_version'").fetchone()
    return int(row[0]) if row else 0


def role_options(conn: sqlite3.Connection, name: str) -> dict[str, object] | None:
    """A user's or role's stored options, or None when it does not exist (``root`` always does)."""
    row = conn.execute("SELECT options FROM _users WHERE name = ?", (name,)).fetchone()
    if row is None:
        return {} if name in BUILTIN_ROLES else None
    opts = orjson.loads(row[0])
    return opts if isinstance(opts, dict) else {}


def role_exists(conn: sqlite3.Connection, name: str) -> bool:
    return role_options(conn, name) is not None


def memberships(conn: sqlite3.Connection, user: str) -> frozenset[str]:
    """``user`` and every role it is a member of, transitively, plus ``public``."""
    seen = {user, PUBLIC}
    todo = [user]
    while todo:
        member = todo.pop()
        for (role,) in conn.execute("SELECT role FROM _role_members WHERE member = ?", (member,)):
            if role not in seen:
                seen.add(role)
                todo.append(role)
    if user == ROOT:
        seen.add(ADMIN)
    return frozenset(seen)


def _compute(conn: sqlite3.Connection, user: str) -> UserPrivileges:
    roles = memberships(conn, user)
    options: set[str] = set()
    for role in roles:
        for k, v in (role_options(conn, role) or {}).items():
            if v is True and k.upper() in ROLE_OPTIONS:
                options.add(k.upper())
    tables: dict[int, set[Privilege]] = {}
    marks = ",".join("?" * len(roles))
    for table_id, priv in conn.execute(
        f"SELECT table_id, privilege FROM _grants WHERE grantee IN ({marks}) AND table_id > 0", tuple(roles)
    ):
        try:
            p = Privilege(priv)
        except ValueError:
            continue
        held = tables.setdefault(table_id, set())
        held.update(Privilege if p is Privilege.ALL else (p,))
    return UserPrivileges(
        user=user,
        exists=role_exists(conn, user),
        admin=ADMIN in roles,
        roles=roles,
        options=frozenset(options),
        tables={t: frozenset(ps) for t, ps in tables.items()},
    )


_CACHE_SIZE = 256
_cache: dict[tuple[int, str], tuple[sqlite3.Connection, int, UserPrivileges]] = {}
_cache_lock = threading.Lock()


def effective(conn: sqlite3.Connection, user: str, *, version: int | None = None) -> UserPrivileges:
    """The user's effective privileges, computed once per catalog version (pass ``version`` when
    the caller knows it, to save reading it)."""
    if version is None or version < 0:
        version = catalog_version(conn)
    key = (id(conn), user)
    hit = _cache.get(key)
    # The cache keeps the connection object alive, so its id cannot be reused while cached.
    if hit is not None and hit[0] is conn and hit[1] == version:
        return hit[2]
    privs = _compute(conn, user)
    with _cache_lock:
        if len(_cache) >= _CACHE_SIZE:
            _cache.pop(next(iter(_cache)))
        _cache[key] = (conn, version, privs)
    return privs


def forget(conn: sqlite3.Connection) -> None:
    """Drop a closed connection's cache entries."""
    with _cache_lock:
        for key in [k for k, v in _cache.items() if v[0] is conn]:
            del _cache[key]


# ===================================================================================== questions


def is_admin(conn: sqlite3.Connection, user: str) -> bool:
    """``root`` and members (direct or not) of the ``admin`` role."""
    return effective(conn, user).admin


def has_role_option(conn: sqlite3.Connection, user: str, option: str) -> bool:
    """Whether the user holds a role option (e.g. ``CONTROLCHANGEFEED``), itself or through a role."""
    return option.upper() in effective(conn, user).options


def has_table_privilege(
    conn: sqlite3.Connection, user: str, privilege: Privilege, table: TableSchema
) -> bool:
    return effective(conn, user).has(privilege, table.id)


def denied(user: str, privilege: Privilege, table: TableSchema) -> PermissionDenied:
    return PermissionDenied(f"user {user} does not have {privilege.value} privilege on relation {table.name}")


def check_table_privilege(
    conn: sqlite3.Connection,
    user: str,
    privilege: Privilege,
    table: TableSchema,
    *,
    version: int | None = None,
) -> None:
    """Raise :class:`PermissionDenied` (CockroachDB's text) unless the user holds ``privilege``."""
    if not effective(conn, user, version=version).has(privilege, table.id):
        raise denied(user, privilege, table)


def check_table_privileges(privs: UserPrivileges, table: TableSchema, needed: Iterable[Privilege]) -> None:
    """Every privilege of ``needed``, in order: the first one missing is the error."""
    if privs.admin:
        return
    held = privs.tables.get(table.id, frozenset())
    for p in needed:
        if p not in held:
            raise denied(privs.user, p, table)


def check_any_table_privilege(privs: UserPrivileges, table: TableSchema) -> None:
    """Some privilege on the table (to see its definition)."""
    if not privs.admin and not privs.on(table.id):
        raise PermissionDenied(f"user {privs.user} has no privileges on relation {table.name}")


def check_changefeed_privileges(
    conn: sqlite3.Connection, user: str, tables: Sequence[TableSchema], *, core: bool = False
) -> None:
    """May ``user`` create a changefeed on ``tables``? The spec's rule: admins always; a user with
    the ``CONTROLCHANGEFEED`` role option needs SELECT on every target; otherwise the CHANGEFEED
    privilege on every target suffices, for core changefeeds too (which SELECT on every target
    also allows, as in CockroachDB)."""
    privs = effective(conn, user)
    if privs.admin:
        return
    has_select = all(privs.has(Privilege.SELECT, t.id) for t in tables)
    has_changefeed = all(privs.has(Privilege.CHANGEFEED, t.id) for t in tables)
    if CONTROLCHANGEFEED in privs.options:
        if not has_select:
            raise PermissionDenied(
                f"user {user} with {CONTROLCHANGEFEED} role option requires the SELECT privilege on all "
                "target tables to be able to run an enterprise changefeed"
            )
        return
    if has_changefeed:
        return
    if core:
        if has_select:
            return
        raise PermissionDenied(
            f"user {user} requires the SELECT privilege on all target tables to be able to run a core changefeed"
        )
    raise PermissionDenied(
        f"user {user} requires the CHANGEFEED privilege on all target tables to be able to run an enterprise changefeed"
    )


def check_job_control(
    conn: sqlite3.Connection, user: str, owner: str, job_id: int, tables: Sequence[TableSchema] = ()
) -> None:
    """May ``user`` pause, resume, cancel or alter job ``job_id`` owned by ``owner``? Admins
    always; jobs of admins only admins; otherwise the owner (or a member of the owning role), a
    holder of ``CONTROLJOB``, or one with CHANGEFEED on every table the changefeed watches."""
    privs = effective(conn, user)
    if privs.admin:
        return
    if effective(conn, owner).admin:
        raise PermissionDenied("only admins can control jobs owned by other admins")
    if owner in privs.roles or CONTROLJOB in privs.options:
        return
    if tables and all(privs.has(Privilege.CHANGEFEED, t.id) for t in tables):
        return
    raise PermissionDenied(f"user {user} does not have privileges for job {job_id}")


def check_role_option(privs: UserPrivileges, option: str) -> None:
    """Admins, or holders of the role option (e.g. ``CREATEROLE``)."""
    if privs.admin or option in privs.options:
        return
    raise PermissionDenied(f"user {privs.user} does not have {option} privilege")


def check_login(conn: sqlite3.Connection, user: str) -> None:
    """May ``user`` open a session? It must exist and not be ``NOLOGIN`` (PostgreSQL's texts)."""
    opts = role_options(conn, user)
    if opts is None:
        raise InvalidAuthorization(f'role "{user}" does not exist')
    if opts.get("login") is False or user in (ADMIN, PUBLIC):
        raise InvalidAuthorization(f"{user} does not have login privilege")


def check_topic_read(conn: sqlite3.Connection, user: str, topic: str, tables: Sequence[TableSchema]) -> None:
    """May ``user`` read ``topic``, the output of changefeeds on ``tables``? Admins always; others
    need SELECT or CHANGEFEED on every table (whoever may create the feed may read what it
    emits); a topic no changefeed writes is for admins only."""
    privs = effective(conn, user)
    if privs.admin:
        return
    if not tables:
        raise PermissionDenied(
            f"user {user} may not read topic {topic}: no changefeed writes it (admins only)"
        )
    for t in tables:
        if not (privs.has(Privilege.SELECT, t.id) or privs.has(Privilege.CHANGEFEED, t.id)):
            raise PermissionDenied(
                f"user {user} does not have SELECT or CHANGEFEED privilege on relation {t.name}"
                f" (needed to read topic {topic})"
            )
