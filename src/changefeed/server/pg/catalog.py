"""``pg_catalog`` and ``information_schema`` for the queries drivers and ``psql`` send.

Design: the relations are materialised from the engine's catalog into an in-memory SQLite
database (``pg_catalog`` and ``information_schema`` attached as schemas of their own), and the
client's query is translated from PostgreSQL to SQLite with ``sqlglot`` and run there. The few
PostgreSQL spellings SQLite lacks are rewritten on sqlglot's tree: ``pg_catalog.f(..)`` calls,
``OPERATOR(pg_catalog.~)``, casts to ``regclass``/``regtype``, ``ARRAY(SELECT ..)``, ``E'..'``
strings; ``pg_*`` functions and the regex operators are SQLite functions. A query goes here when
it names ``pg_catalog``, ``information_schema``, a ``pg_*`` relation or function, or one of a few
functions drivers call (``version()``, ``current_setting``, ``current_schema`` ...).

OIDs: namespaces and types have PostgreSQL's OIDs; a table's is ``100000 + id``, its primary-key
index ``200000 + id``.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

import orjson
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from changefeed.connection import Connection, Result
from changefeed.engine.auth import ROOT
from changefeed.engine.catalog import TableSchema
from changefeed.exceptions import (
    ChangefeedError,
    StatementSyntaxError,
    UndefinedColumn,
    UndefinedFunction,
    UndefinedTable,
)
from changefeed.server.pg import types as t
from changefeed.sql import ast, astjson
from changefeed.sql.functions import version_string
from changefeed.sql.render import expr_sql

PG_CATALOG, PUBLIC, INFORMATION_SCHEMA = 11, 2200, 13183
TABLE_OID, INDEX_OID = 100_000, 200_000
KEYSPACE_OID = 20_000
ROOT_OID = 10
DATABASE_OID = 1
CLASS_OID = 1259

_ROUTE = re.compile(
    r"\b(pg_catalog|information_schema|pg_[a-z_]+|current_setting\s*\(|current_schema"
    r"|current_database\s*\(|current_user|session_user|set_config\s*\(|has_\w+_privilege|::\s*reg\w+)",
    re.IGNORECASE,
)


def wants(sql: str) -> bool:
    """Whether a statement is a catalog query (read here, not by the engine)."""
    head = sql.lstrip().split(None, 1)
    if not head or head[0].upper() not in ("SELECT", "WITH", "("):
        return False
    return _ROUTE.search(sql) is not None


# ------------------------------------------------------------------------------------- relations
_RELATIONS: dict[str, str] = {
    "pg_catalog.pg_namespace": "oid, nspname, nspowner, nspacl",
    "pg_catalog.pg_class": (
        "oid, relname, relnamespace, reltype, reloftype, relowner, relam, relfilenode, reltablespace,"
        " relpages, reltuples, relallvisible, reltoastrelid, relhasindex, relisshared, relpersistence,"
        " relkind, relnatts, relchecks, relhasrules, relhastriggers, relhassubclass, relrowsecurity,"
        " relforcerowsecurity, relispopulated, relreplident, relispartition, relrewrite, relfrozenxid,"
        " relminmxid, relacl, reloptions, relpartbound, relhasoids"
    ),
    "pg_catalog.pg_attribute": (
        "attrelid, attname, atttypid, attstattarget, attlen, attnum, attndims, attcacheoff, atttypmod,"
        " attbyval, attstorage, attalign, attnotnull, atthasdef, atthasmissing, attidentity,"
        " attgenerated, attisdropped, attislocal, attinhcount, attcollation, attacl, attoptions,"
        " attfdwoptions, attmissingval, attcompression"
    ),
    "pg_catalog.pg_type": (
        "oid, typname, typnamespace, typowner, typlen, typbyval, typtype, typcategory, typispreferred,"
        " typisdefined, typdelim, typrelid, typelem, typarray, typinput, typoutput, typreceive, typsend,"
        " typmodin, typmodout, typanalyze, typalign, typstorage, typnotnull, typbasetype, typtypmod,"
        " typndims, typcollation, typdefaultbin, typdefault, typacl, typsubscript"
    ),
    "pg_catalog.pg_index": (
        "indexrelid, indrelid, indnatts, indnkeyatts, indisunique, indisprimary, indisexclusion,"
        " indimmediate, indisclustered, indisvalid, indcheckxmin, indisready, indislive,"
        " indisreplident, indkey, indcollation, indclass, indoption, indexprs, indpred, indnullsnotdistinct"
    ),
    "pg_catalog.pg_constraint": (
        "oid, conname, connamespace, contype, condeferrable, condeferred, convalidated, conrelid,"
        " contypid, conindid, conparentid, confrelid, confupdtype, confdeltype, confmatchtype,"
        " conislocal, coninhcount, connoinherit, conkey, confkey, conpfeqop, conppeqop, conffeqop,"
        " conexclop, conbin"
    ),
    "pg_catalog.pg_attrdef": "oid, adrelid, adnum, adbin",
    "pg_catalog.pg_roles": (
        "oid, rolname, rolsuper, rolinherit, rolcreaterole, rolcreatedb, rolcanlogin, rolreplication,"
        " rolconnlimit, rolpassword, rolvaliduntil, rolbypassrls, rolconfig"
    ),
    "pg_catalog.pg_authid": (
        "oid, rolname, rolsuper, rolinherit, rolcreaterole, rolcreatedb, rolcanlogin, rolreplication,"
        " rolconnlimit, rolpassword, rolvaliduntil, rolbypassrls"
    ),
    "pg_catalog.pg_user": "usename, usesysid, usecreatedb, usesuper, userepl, usebypassrls, passwd, valuntil, useconfig",
    "pg_catalog.pg_auth_members": "roleid, member, grantor, admin_option",
    "pg_catalog.pg_database": (
        "oid, datname, datdba, encoding, datcollate, datctype, datistemplate, datallowconn,"
        " datconnlimit, datlastsysoid, datfrozenxid, datminmxid, dattablespace, datacl"
    ),
    "pg_catalog.pg_am": "oid, amname, amhandler, amtype",
    "pg_catalog.pg_description": "objoid, classoid, objsubid, description",
    "pg_catalog.pg_inherits": "inhrelid, inhparent, inhseqno, inhdetachpending",
    "pg_catalog.pg_trigger": "oid, tgrelid, tgname, tgfoid, tgtype, tgenabled, tgisinternal, tgconstraint, tgparentid",
    "pg_catalog.pg_policy": "oid, polname, polrelid, polcmd, polpermissive, polroles, polqual, polwithcheck",
    "pg_catalog.pg_statistic_ext": "oid, stxrelid, stxname, stxnamespace, stxowner, stxkeys, stxkind, stxstattarget",
    "pg_catalog.pg_publication": "oid, pubname, pubowner, puballtables, pubinsert, pubupdate, pubdelete, pubtruncate",
    "pg_catalog.pg_publication_rel": "oid, prpubid, prrelid",
    "pg_catalog.pg_rewrite": "oid, rulename, ev_class, ev_type, ev_enabled, is_instead",
    "pg_catalog.pg_collation": "oid, collname, collnamespace, collowner, collprovider",
    "pg_catalog.pg_tablespace": "oid, spcname, spcowner",
    "pg_catalog.pg_range": "rngtypid, rngsubtype, rngmultitypid, rngcollation, rngsubopc, rngcanonical, rngsubdiff",
    "pg_catalog.pg_enum": "oid, enumtypid, enumsortorder, enumlabel",
    "pg_catalog.pg_extension": "oid, extname, extowner, extnamespace, extrelocatable, extversion",
    "pg_catalog.pg_proc": "oid, proname, pronamespace, proowner, prorettype, prokind",
    "pg_catalog.pg_settings": "name, setting, unit, category, short_desc, vartype, source",
    "pg_catalog.pg_foreign_table": "ftrelid, ftserver, ftoptions",
    "pg_catalog.pg_partitioned_table": "partrelid, partstrat, partnatts",
    "pg_catalog.pg_sequence": "seqrelid, seqtypid, seqstart, seqincrement, seqmax, seqmin, seqcache, seqcycle",
    "pg_catalog.pg_tables": "schemaname, tablename, tableowner, tablespace, hasindexes, hasrules, hastriggers, rowsecurity",
    "pg_catalog.pg_views": "schemaname, viewname, viewowner, definition",
    "pg_catalog.pg_matviews": "schemaname, matviewname, matviewowner, definition",
    "pg_catalog.pg_indexes": "schemaname, tablename, indexname, tablespace, indexdef",
    "pg_catalog.pg_stat_activity": "datid, datname, pid, usesysid, usename, application_name, state, query",
    "information_schema.schemata": "catalog_name, schema_name, schema_owner",
    "information_schema.tables": (
        "table_catalog, table_schema, table_name, table_type, self_referencing_column_name,"
        " reference_generation, user_defined_type_catalog, user_defined_type_schema,"
        " user_defined_type_name, is_insertable_into, is_typed, commit_action"
    ),
    "information_schema.columns": (
        "table_catalog, table_schema, table_name, column_name, ordinal_position, column_default,"
        " is_nullable, data_type, character_maximum_length, character_octet_length, numeric_precision,"
        " numeric_precision_radix, numeric_scale, datetime_precision, udt_catalog, udt_schema, udt_name,"
        " is_identity, is_generated, generation_expression, is_updatable"
    ),
    "information_schema.table_constraints": (
        "constraint_catalog, constraint_schema, constraint_name, table_catalog, table_schema,"
        " table_name, constraint_type, is_deferrable, initially_deferred"
    ),
    "information_schema.key_column_usage": (
        "constraint_catalog, constraint_schema, constraint_name, table_catalog, table_schema,"
        " table_name, column_name, ordinal_position, position_in_unique_constraint"
    ),
}


#: Catalog columns of type boolean (SQLite keeps them as 0/1; results turn them back into bools).
BOOL_COLUMNS = frozenset(
    [
        "nspacl",
        "relhasindex",
        "relisshared",
        "relhasrules",
        "relhastriggers",
        "relhassubclass",
        "relrowsecurity",
        "relforcerowsecurity",
        "relispopulated",
        "relispartition",
        "relhasoids",
        "attbyval",
        "attnotnull",
        "atthasdef",
        "atthasmissing",
        "attisdropped",
        "attislocal",
        "typbyval",
        "typispreferred",
        "typisdefined",
        "typnotnull",
        "indisunique",
        "indisprimary",
        "indisexclusion",
        "indimmediate",
        "indisclustered",
        "indisvalid",
        "indcheckxmin",
        "indisready",
        "indislive",
        "indisreplident",
        "indnullsnotdistinct",
        "condeferrable",
        "condeferred",
        "convalidated",
        "conislocal",
        "connoinherit",
        "rolsuper",
        "rolinherit",
        "rolcreaterole",
        "rolcreatedb",
        "rolcanlogin",
        "rolreplication",
        "rolbypassrls",
        "usecreatedb",
        "usesuper",
        "userepl",
        "usebypassrls",
        "admin_option",
        "datistemplate",
        "datallowconn",
        "inhdetachpending",
        "tgisinternal",
        "polpermissive",
        "puballtables",
        "pubinsert",
        "pubupdate",
        "pubdelete",
        "pubtruncate",
        "is_instead",
        "extrelocatable",
        "hasindexes",
        "hasrules",
        "hastriggers",
        "rowsecurity",
    ]
)


#: Columns holding OIDs or numbers: INTEGER affinity, so that ``oid = '16384'`` compares as in PostgreSQL.
_OID_COLUMN = re.compile(
    r"(^oid$|relid$|oid$|namespace$|owner$|typid$|^relam$|^reltype$|^relnatts$|^attnum$|^adnum$|^typelem$"
    r"|^typarray$|^typbasetype$|^typlen$|^attlen$|^atttypmod$|^roleid$|^member$|^grantor$|^datdba$|^encoding$"
    r"|^ev_class$|^inhparent$|^relchecks$|^objsubid$|^enumsortorder$|^indnatts$|^indnkeyatts$|^usesysid$"
    r"|^ordinal_position$|^conindid$|^conparentid$|^tgfoid$|^reltablespace$)"
)


def _type_of(col_type: Any) -> tuple[int, int]:
    """(type OID, typmod) of an engine column type."""
    oid = t.oid_of(col_type)
    typmod = -1
    if oid == t.NUMERIC and col_type.precision is not None:
        typmod = ((col_type.precision << 16) | (col_type.scale or 0)) + 4
    return oid, typmod


def format_type(oid: int | None, typmod: int | None) -> str | None:
    """PostgreSQL's ``format_type``: ``integer``, ``numeric(10,2)``, ``timestamp with time zone``."""
    if oid is None:
        return None
    names = {
        t.BOOL: "boolean", t.BYTEA: "bytea", t.INT8: "bigint", t.INT2: "smallint", t.INT4: "integer",
        t.TEXT: "text", t.FLOAT4: "real", t.FLOAT8: "double precision", t.VARCHAR: "character varying",
        t.BPCHAR: "character", t.DATE: "date", t.TIME: "time without time zone",
        t.TIMESTAMP: "timestamp without time zone", t.TIMESTAMPTZ: "timestamp with time zone",
        t.INTERVAL: "interval", t.NUMERIC: "numeric", t.UUID: "uuid", t.JSONB: "jsonb", t.JSON: "json",
        t.INET: "inet", t.NAME: "name", t.OID: "oid", t.CHAR: '"char"', t.BIT: "bit", t.VARBIT: "bit varying",
    }  # fmt: skip
    name = names.get(int(oid), t.TYPE_NAMES.get(int(oid), "???"))
    if oid == t.NUMERIC and typmod is not None and typmod >= 4:
        m = typmod - 4
        return f"numeric({m >> 16},{m & 0xFFFF})"
    return name


def _b(v: bool) -> int:
    return 1 if v else 0


def _materialise(db: sqlite3.Connection, conn: Connection, session_vars: dict[str, str]) -> None:
    for qname, cols in _RELATIONS.items():
        typed = ", ".join(
            f"{c} INTEGER" if c in BOOL_COLUMNS or _OID_COLUMN.search(c) else c
            for c in (x.strip() for x in cols.split(","))
        )
        db.execute(f"CREATE TABLE {qname} ({typed})")

    def put(rel: str, *rows: tuple[Any, ...]) -> None:
        if rows:
            marks = ",".join("?" * len(rows[0]))
            db.executemany(f"INSERT INTO {rel} VALUES ({marks})", rows)

    put(
        "pg_catalog.pg_namespace",
        (PG_CATALOG, "pg_catalog", ROOT_OID, None),
        (PUBLIC, "public", ROOT_OID, None),
        (INFORMATION_SCHEMA, "information_schema", ROOT_OID, None),
    )
    put("pg_catalog.pg_am", (2, "heap", "heap_tableam_handler", "t"), (403, "btree", "bthandler", "i"))
    put(
        "pg_catalog.pg_database",
        (
            DATABASE_OID,
            session_vars.get("database", "defaultdb"),
            ROOT_OID,
            6,
            "C.UTF-8",
            "C.UTF-8",
            0,
            1,
            -1,
            0,
            0,
            1,
            1663,
            None,
        ),
    )
    for name, oid, arr, length, cat in t.TYPES:
        put(
            "pg_catalog.pg_type",
            (oid, name, PG_CATALOG, ROOT_OID, length, _b(0 < length <= 8), "b", cat, 0, 1, ",", 0, 0, arr,
             f"{name}in", f"{name}out", f"{name}recv", f"{name}send", "-", "-", "-", "i", "p", 0, 0, -1, 0, 0,
             None, None, None, "-"),
        )  # fmt: skip
        if arr:
            put(
                "pg_catalog.pg_type",
                (arr, "_" + name, PG_CATALOG, ROOT_OID, -1, 0, "b", "A", 0, 1, ",", 0, oid, 0,
                 "array_in", "array_out", "array_recv", "array_send", "-", "-", "-", "i", "x", 0, 0, -1, 0, 0,
                 None, None, None, "array_subscript_handler"),
            )  # fmt: skip
    users = [(ROOT, {})] + [
        (name, orjson.loads(opts))
        for name, opts in conn.db.conn.execute("SELECT name, options FROM _users ORDER BY name")
    ]
    for i, (name, opts) in enumerate(users):
        oid = ROOT_OID if name == ROOT else 16384 + i
        superuser = name == ROOT
        login = bool(opts.get("login", True)) if isinstance(opts, dict) else True
        put(
            "pg_catalog.pg_roles",
            (
                oid,
                name,
                _b(superuser),
                1,
                _b(superuser),
                _b(superuser),
                _b(login),
                0,
                -1,
                "********",
                None,
                0,
                None,
            ),
        )
        put(
            "pg_catalog.pg_authid",
            (oid, name, _b(superuser), 1, _b(superuser), _b(superuser), _b(login), 0, -1, None, None, 0),
        )
        put("pg_catalog.pg_user", (name, oid, _b(superuser), _b(superuser), 0, 0, "********", None, None))
    conn.db.refresh_catalog()
    namespaces: dict[str, int] = {"public": PUBLIC}
    for schema in conn.db.tables():
        space = schema.name.rsplit(".", 1)[0] if "." in schema.name else "public"
        if space not in namespaces:  # a CQL keyspace is a schema of its own
            namespaces[space] = KEYSPACE_OID + len(namespaces)
            put("pg_catalog.pg_namespace", (namespaces[space], space, ROOT_OID, None))
        _put_table(put, schema, session_vars, space, namespaces[space])
    for k, v in session_vars.items():
        put("pg_catalog.pg_settings", (k, v, None, "", "", "string", "session"))


def _put_table(
    put: Callable[..., None], s: TableSchema, session_vars: dict[str, str], space: str, space_oid: int
) -> None:
    oid, ind = TABLE_OID + s.id, INDEX_OID + s.id
    name = s.name.rsplit(".", 1)[-1]
    cols = [c for c in s.columns]
    key_nums = [cols.index(k) + 1 for k in s.key]
    dbname = session_vars.get("database", "defaultdb")
    put(
        "pg_catalog.pg_class",
        (oid, name, space_oid, 0, 0, ROOT_OID, 2, oid, 0, 0, -1.0, 0, 0, 1, 0, "p", "r", len(cols), 0, 0, 0, 0,
         0, 0, 1, "d", 0, 0, 0, 0, None, None, None, 0),
        (ind, f"{name}_pkey", space_oid, 0, 0, ROOT_OID, 403, ind, 0, 0, 0.0, 0, 0, 0, 0, "p", "i", len(key_nums),
         0, 0, 0, 0, 0, 0, 1, "n", 0, 0, 0, 0, None, None, None, 0),
    )  # fmt: skip
    put(
        "pg_catalog.pg_index",
        (ind, oid, len(key_nums), len(key_nums), 1, 1, 0, 1, 0, 1, 0, 1, 1, 0,
         " ".join(map(str, key_nums)), "0", "0", "0", None, None, 0),
    )  # fmt: skip
    put(
        "pg_catalog.pg_constraint",
        (300_000 + s.id, f"{name}_pkey", space_oid, "p", 0, 0, 1, oid, 0, ind, 0, 0, " ", " ", " ", 1, 0, 1,
         "{" + ",".join(map(str, key_nums)) + "}", None, None, None, None, None, None),
    )  # fmt: skip
    put(
        "information_schema.tables",
        (dbname, space, name, "BASE TABLE", None, None, None, None, None, "YES", "NO", None),
    )
    put(
        "information_schema.table_constraints",
        (dbname, space, f"{name}_pkey", dbname, space, name, "PRIMARY KEY", "NO", "NO"),
    )
    for pos, k in enumerate(s.key, start=1):
        put(
            "information_schema.key_column_usage",
            (dbname, space, f"{name}_pkey", dbname, space, name, k.name, pos, None),
        )
    for num, c in enumerate(cols, start=1):
        typ, typmod = _type_of(c.type)
        notnull = c.not_null or c.is_key
        length = t.TYPE_LENGTHS.get(typ, -1)
        default = _default_text(c.default)
        generated = _default_text(c.computed)
        # PostgreSQL keeps a generated column's expression where a default's is (pg_attrdef)
        stored_expr = generated if generated is not None else default
        put(
            "pg_catalog.pg_attribute",
            (oid, c.name, typ, -1, length, num, 0, -1, typmod, _b(0 < length <= 8), "p", "i", _b(notnull),
             _b(stored_expr is not None), 0, "", "s" if c.computed is not None else "", 0, 1, 0, 0, None, None,
             None, None, ""),
        )  # fmt: skip
        if stored_expr is not None:
            put("pg_catalog.pg_attrdef", (400_000 + s.id * 1000 + num, oid, num, stored_expr))
        put(
            "information_schema.columns",
            (dbname, space, name, c.name, num, default, "NO" if notnull else "YES", format_type(typ, typmod),
             None, None, None, None, None, None, dbname, "pg_catalog", t.TYPE_NAMES.get(typ, "text"), "NO",
             "ALWAYS" if c.computed is not None else "NEVER", generated, "YES"),
        )  # fmt: skip


def _get_expr(expr: str | None, _rel: Any = None, pretty: Any = False) -> str | None:
    """``pg_get_expr(adbin, relid [, pretty])``: pretty printing drops the outermost parentheses
    (``(id * 10) + 1``), as PostgreSQL's does."""
    if expr is None or not pretty or not (expr.startswith("(") and expr.endswith(")")):
        return expr
    depth = 0
    for i, ch in enumerate(expr):  # the first parenthesis must close at the very end
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and i < len(expr) - 1:
            return expr
    return expr[1:-1]


def _default_text(default: Any) -> str | None:
    """A column's DEFAULT or generation expression (kept as the AST's JSON) as ``pg_get_expr``
    shows it: ``now()``, ``(id * 10)``, ``'x'::text``."""
    if default is None:
        return None
    if isinstance(default, str):
        return default
    node = astjson.from_json(default)
    if isinstance(node, ast.Literal) and isinstance(node.value, str):
        return "'" + node.value.replace("'", "''") + "'::text"
    return expr_sql(node)


# ------------------------------------------------------------------------------------- functions
def _functions(db: sqlite3.Connection, conn: Connection, session_vars: dict[str, str]) -> None:
    def regexp(pattern: str | None, value: str | None) -> int | None:
        if pattern is None or value is None:
            return None
        return 1 if re.search(pattern, str(value)) else 0

    def iregexp(pattern: str | None, value: str | None) -> int | None:
        if pattern is None or value is None:
            return None
        return 1 if re.search(pattern, str(value), re.IGNORECASE) else 0

    def userbyid(oid: int | None) -> str | None:
        if oid is None:
            return None
        row = db.execute("SELECT rolname FROM pg_catalog.pg_roles WHERE oid = ?", (oid,)).fetchone()
        return row[0] if row else f"unknown (OID={oid})"

    def visible(oid: int | None) -> int:
        """On the search path: pg_catalog and public, not a CQL keyspace's schema."""
        row = db.execute("SELECT relnamespace FROM pg_catalog.pg_class WHERE oid = ?", (oid,)).fetchone()
        return 1 if row is None or row[0] in (PUBLIC, PG_CATALOG) else 0

    def regclass(v: Any) -> Any:
        if isinstance(v, str):
            name = v.split(".")[-1].strip('"')
            row = db.execute("SELECT oid FROM pg_catalog.pg_class WHERE relname = ?", (name,)).fetchone()
            if row is None:
                raise ChangefeedError(f'relation "{v}" does not exist')
            return row[0]
        return v

    def regtype(v: Any) -> Any:
        if isinstance(v, str):
            row = db.execute("SELECT oid FROM pg_catalog.pg_type WHERE typname = ?", (v,)).fetchone()
            return row[0] if row else None
        return v

    def array_to_string(arr: Any, sep: str | None, *_: Any) -> str | None:
        if arr is None:
            return None
        text = str(arr).strip("{}")
        return (sep or "").join(x for x in text.split(",") if x) if text else ""

    def indexdef(oid: int, *_: Any) -> str | None:
        row = db.execute(
            "SELECT c.relname, t.relname, i.indkey FROM pg_catalog.pg_index i"
            " JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid JOIN pg_catalog.pg_class t ON t.oid = i.indrelid"
            " WHERE i.indexrelid = ?",
            (oid,),
        ).fetchone()
        if row is None:
            return None
        cols = [
            db.execute(
                "SELECT a.attname FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid"
                " WHERE c.relname = ? AND a.attnum = ?",
                (row[1], int(n)),
            ).fetchone()[0]
            for n in str(row[2]).split()
        ]
        if _ and _[0]:
            return cols[int(_[0]) - 1] if int(_[0]) <= len(cols) else ""
        return f"CREATE UNIQUE INDEX {row[0]} ON public.{row[1]} USING btree ({', '.join(cols)})"

    def constraintdef(oid: int, *_: Any) -> str | None:
        row = db.execute(
            "SELECT c.conindid FROM pg_catalog.pg_constraint c WHERE c.oid = ?", (oid,)
        ).fetchone()
        if row is None:
            return None
        d = indexdef(row[0])
        return "PRIMARY KEY (" + d.split("(", 1)[1] if d else None

    def array_contains(arr: Any, v: Any) -> int | None:
        if arr is None or v is None:
            return None
        items = [x.strip('"') for x in str(arr).strip("{}").split(",")]
        return 1 if str(v) in items else 0

    fns: dict[str, tuple[int, Callable[..., Any]]] = {
        "regexp": (2, regexp),
        "pg_iregexp": (2, iregexp),
        "pg_get_userbyid": (1, userbyid),
        "pg_table_is_visible": (1, visible),
        "pg_type_is_visible": (1, lambda oid: 1),
        "pg_function_is_visible": (1, lambda oid: 1),
        "pg_encoding_to_char": (1, lambda n: "UTF8"),
        "format_type": (2, format_type),
        "pg_get_expr": (-1, _get_expr),
        "pg_get_indexdef": (-1, indexdef),
        "pg_get_constraintdef": (-1, constraintdef),
        "pg_get_viewdef": (-1, lambda *_: None),
        "pg_get_triggerdef": (-1, lambda *_: None),
        "pg_get_statisticsobjdef_columns": (-1, lambda *_: None),
        "pg_get_partkeydef": (-1, lambda *_: None),
        "pg_get_serial_sequence": (-1, lambda *_: None),
        "obj_description": (-1, lambda *_: None),
        "col_description": (-1, lambda *_: None),
        "shobj_description": (-1, lambda *_: None),
        "pg_relation_size": (-1, lambda *_: 0),
        "pg_total_relation_size": (-1, lambda *_: 0),
        "pg_table_size": (-1, lambda *_: 0),
        "pg_size_pretty": (1, lambda n: f"{n} bytes"),
        "pg_backend_pid": (0, lambda: 1),
        "array_to_string": (-1, array_to_string),
        "version": (0, version_string),
        "current_setting": (-1, lambda name, *_: session_vars.get(name, session_vars.get(name.lower()))),
        "set_config": (3, lambda name, value, local: value),
        "current_schema": (0, lambda: "public"),
        "current_schemas": (-1, lambda *_: "{pg_catalog,public}"),
        "current_database": (0, lambda: session_vars.get("database", "defaultdb")),
        "current_user": (0, lambda: conn.user),
        "session_user": (0, lambda: conn.user),
        "regclass": (1, regclass),
        "regtype": (1, regtype),
        "has_table_privilege": (-1, lambda *_: 1),
        "has_schema_privilege": (-1, lambda *_: 1),
        "has_database_privilege": (-1, lambda *_: 1),
        "pg_has_role": (-1, lambda *_: 1),
        "quote_ident": (
            1,
            lambda s: (
                s if re.fullmatch(r"[a-z_][a-z0-9_]*", s or "") else '"' + str(s).replace('"', '""') + '"'
            ),
        ),
        "array_length": (
            2,
            lambda a, d: len(str(a).strip("{}").split(",")) if a and str(a).strip("{}") else None,
        ),
        "pg_array_contains": (2, array_contains),
        "pg_relation_is_publishable": (1, lambda *_: 0),
        "pg_is_other_temp_schema": (1, lambda *_: 0),
        "pg_get_function_arguments": (-1, lambda *_: ""),
        "pg_get_function_result": (-1, lambda *_: None),
        "pg_get_function_identity_arguments": (-1, lambda *_: ""),
        "pg_get_ruledef": (-1, lambda *_: None),
        "pg_is_in_recovery": (0, lambda: 0),
        "pg_postmaster_start_time": (0, lambda: None),
        "inet_server_addr": (0, lambda: None),
        "inet_server_port": (0, lambda: None),
        "txid_current": (0, lambda: 1),
        "pg_char_to_encoding": (1, lambda *_: 6),
        "pg_array_json": (
            1,
            lambda a: (
                "[]"
                if a is None
                else orjson.dumps(
                    [x.strip('"') for x in str(a).strip("{}").replace(" ", ",").split(",") if x]
                ).decode()
            ),
        ),
    }
    for name, (n, fn) in fns.items():
        db.create_function(name, n, fn, deterministic=False)
    db.create_aggregate("string_agg", 2, _StringAgg)  # type: ignore[arg-type]
    db.create_aggregate("array_agg", 1, _ArrayAgg)  # type: ignore[arg-type]


class _StringAgg:
    def __init__(self) -> None:
        self.items: list[str] = []
        self.sep = ","

    def step(self, value: Any, sep: Any) -> None:
        if value is not None:
            self.items.append(str(value))
            self.sep = "" if sep is None else str(sep)

    def finalize(self) -> str | None:
        return self.sep.join(self.items) if self.items else None


class _ArrayAgg:
    def __init__(self) -> None:
        self.items: list[str] = []

    def step(self, value: Any) -> None:
        self.items.append("NULL" if value is None else str(value))

    def finalize(self) -> str | None:
        return "{" + ",".join(self.items) + "}" if self.items else None


# ----------------------------------------------------------------------------------- translation
_OPERATOR = re.compile(r"OPERATOR\s*\(\s*pg_catalog\s*\.\s*([~!*=<>]+)\s*\)", re.IGNORECASE)
_COLLATE = re.compile(r"\s+COLLATE\s+pg_catalog\.\"?default\"?", re.IGNORECASE)


def _rewrite(node: Any) -> Any:
    # pg_catalog.f(..) -> f(..)
    if isinstance(node, exp.Dot) and isinstance(node.this, exp.Identifier | exp.Var | exp.Column):
        left = node.this.name if hasattr(node.this, "name") else ""
        if left.lower() == "pg_catalog" and isinstance(node.expression, exp.Func):
            return node.expression
    if isinstance(node, exp.Column) and node.table.lower() == "pg_catalog" and not node.args.get("db"):
        return node
    if isinstance(node, exp.Cast):
        to = node.to.sql("postgres").lower().removeprefix("pg_catalog.")
        if to in ("regclass", "regtype", "regproc", "regprocedure", "regnamespace", "regrole", "oid"):
            fn = "regclass" if to == "regclass" else "regtype" if to == "regtype" else None
            return exp.Anonymous(this=fn, expressions=[node.this]) if fn else node.this
        if to in ("name", "varchar", "char", '"char"', "bpchar", "character varying", "text"):
            return exp.Cast(this=node.this, to=exp.DataType.build("TEXT"))
        if to.endswith("[]") or to in ("int2vector", "oidvector"):
            return node.this
    if isinstance(node, exp.Table) and isinstance(node.this, exp.Explode):
        alias = node.args.get("alias")
        cols = alias.columns if isinstance(alias, exp.TableAlias) else []
        name = alias.name if isinstance(alias, exp.TableAlias) and alias.name else "unnest"
        # A scalar function's column is named by the column alias, else by the table alias
        # (``unnest(a) x``: the column is ``x``), as in PostgreSQL.
        col = cols[0].name if cols else name
        arg = node.this.this.sql("sqlite")
        sub = sqlglot.parse_one(
            f'SELECT value AS "{col}" FROM json_each(pg_array_json({arg}))', read="sqlite"
        )
        return exp.Subquery(this=sub, alias=exp.TableAlias(this=exp.to_identifier(name)))
    if isinstance(node, exp.EQ) and isinstance(node.expression, exp.Any):
        return exp.Anonymous(this="pg_array_contains", expressions=[node.expression.this, node.this])
    if isinstance(node, exp.ByteString):
        return exp.Literal.string(node.this.encode().decode("unicode_escape"))
    if (
        isinstance(node, exp.Array)
        and len(node.expressions) == 1
        and isinstance(node.expressions[0], exp.Subquery | exp.Select)
    ):
        sub = node.expressions[0]
        select = sub.this if isinstance(sub, exp.Subquery) else sub
        first = select.expressions[0]
        col = first.alias_or_name if isinstance(first, exp.Alias | exp.Column) else ""
        if not col:  # an expression: named here, so that the aggregate below can name it
            col = "_item"
            first.replace(exp.alias_(first.copy(), col))
        inner = select.sql("postgres")
        return exp.paren(
            sqlglot.parse_one(
                f"SELECT '{{' || COALESCE(string_agg(\"{col}\", ','), '') || '}}' FROM ({inner}) AS _a",
                read="postgres",
            ),
            copy=False,
        )
    if isinstance(node, exp.CurrentVersion):  # sqlglot would write SQLite's sqlite_version()
        return exp.Anonymous(this="version", expressions=[])
    if isinstance(node, exp.Anonymous) and str(node.this).lower() in ("current_user", "session_user"):
        return node
    if isinstance(node, exp.SessionUser):  # sqlglot would write the bare SESSION_USER, a column to SQLite
        return exp.Anonymous(this="session_user", expressions=[])
    return node


def _rewrite_tree(tree: Any) -> Any:
    """Apply :func:`_rewrite` children first (deepest nodes first), replacing in place."""
    for node in reversed(list(tree.walk(bfs=True))):
        new = _rewrite(node)
        if new is not node:
            if node is tree:
                tree = new
            else:
                node.replace(new)
    return tree


def translate(sql: str) -> str:
    text = _COLLATE.sub("", _OPERATOR.sub(r"\1", sql))
    try:
        trees = sqlglot.parse(text, read="postgres")
    except SqlglotError as exc:
        raise StatementSyntaxError(f"catalog query: {str(exc).splitlines()[0]}") from None
    out = []
    for tree in trees:
        if tree is None:
            continue
        tree = _rewrite_tree(tree)
        out.append(str(tree.sql("sqlite")))
    if len(out) != 1:
        raise StatementSyntaxError("a catalog query must be one statement")
    return out[0]


# ----------------------------------------------------------------------------------------- run
_PARAM = re.compile(r"\$(\d+)")


def run(conn: Connection, sql: str, params: Sequence[Any], session_vars: dict[str, str]) -> Result:
    """Run a catalog query against a fresh materialisation of the catalog."""
    db = sqlite3.connect(":memory:")
    try:
        db.execute("ATTACH ':memory:' AS pg_catalog")
        db.execute("ATTACH ':memory:' AS information_schema")
        _materialise(db, conn, session_vars)
        _functions(db, conn, session_vars)
        text = translate(sql)
        text = _PARAM.sub(lambda m: f"?{m.group(1)}", text)
        try:
            cur = db.execute(text, tuple(params))
        except sqlite3.Error as exc:
            raise _catalog_error(exc) from None
        # an unnamed call is labelled with the function's name, as PostgreSQL does
        columns = [_label(d[0]) for d in cur.description or ()]
        rows = [tuple(r) for r in cur.fetchall()]
        bools = [i for i, c in enumerate(columns) if c in BOOL_COLUMNS]
        if bools:
            rows = [
                tuple(bool(v) if i in bools and v is not None else v for i, v in enumerate(r)) for r in rows
            ]
        return Result(columns=columns, rows=rows, types=[None] * len(columns), status=f"SELECT {len(rows)}")
    finally:
        db.close()


_CALL = re.compile(r"^(?:\w+\.)?(\w+)\(.*\)$", re.DOTALL)


def _label(column: str) -> str:
    m = _CALL.match(column)
    return m.group(1).lower() if m else column


_NO_SUCH = re.compile(r"^no such (column|table|function): (\S+)$")


def _catalog_error(exc: sqlite3.Error) -> ChangefeedError:
    """PostgreSQL's words for what the materialised catalog lacks; SQLite's own text is not shown."""
    m = _NO_SUCH.match(str(exc))
    if m is None:
        return CatalogQueryError("this catalog query is not supported")
    what, name = m.group(1), m.group(2).split(".")[-1]
    if what == "column":
        return UndefinedColumn(f'column "{name}" does not exist')
    if what == "table":
        return UndefinedTable(f'relation "{name}" does not exist')
    return UndefinedFunction(f"unknown function: {name.lower()}()")


class CatalogQueryError(ChangefeedError):
    code = "0A000"
