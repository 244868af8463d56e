"""The statement families, one module each, merged into the dispatch table sessions use.

=================  ==========================================================================
``ddl``            CREATE/DROP TABLE, KEYSPACE/DATABASE, TYPE (enums), USE, ALTER TABLE columns
                   and options
``dml``            INSERT/UPSERT/REPLACE, UPDATE, DELETE, CQL BATCH (and the bulk INSERT plan)
``cql_statements`` CQL's INSERT .. JSON, SELECT with JSON, GROUP BY or PER PARTITION LIMIT
``truncate``       TRUNCATE, CQL's (no CDC log entry, as ScyllaDB) and SQL's (a delete per row)
``select``         SELECT over tables and ScyllaDB CDC logs, SHOW TABLES/COLUMNS/CREATE TABLE
``set_operations`` UNION, INTERSECT, EXCEPT [ALL] of queries
``values_lists``   VALUES (..), (..) as a query, alone or in FROM
``common_tables``  WITH queries with a column list, WITH RECURSIVE
``table_functions`` set-returning functions in FROM: generate_series, unnest
``access``         CREATE USER/ROLE, GRANT/REVOKE
``ydb_feeds``      YDB ALTER TABLE .. ADD/DROP CHANGEFEED, feeds dropped with their table
``crdb_feeds``     CockroachDB CREATE CHANGEFEED / EXPERIMENTAL CHANGEFEED FOR
``crdb_jobs``      CockroachDB changefeed jobs: CREATE CHANGEFEED .. INTO, SHOW (CHANGEFEED) JOB(S),
                   PAUSE/RESUME/CANCEL JOB, ALTER CHANGEFEED, CONFIGURE ZONE (gc.ttlseconds)
``crdb_introspection``  CockroachDB SHOW JOB [WHEN COMPLETE] id, SHOW JOBS <select>, the
                   ``crdb_internal.jobs`` table
``phoenix``        Apache Phoenix CREATE TABLE forms, ALTER TABLE .. SET, CREATE/DROP CDC, CDC
                   queries (with the CDC_INCLUDE hint), UPSERT .. SELECT
``replication``    YDB CREATE/ALTER/DROP ASYNC REPLICATION, CREATE/DROP SECRET, the
                   ``.sys/async_replications`` and ``.sys/table_schemas`` views
=================  ==========================================================================

A new family is a module with ``FAMILY = StatementFamily("name")`` whose handlers register with
``@FAMILY.statement(ast.Node)``, listed in :data:`STATEMENTS` below.
"""

from __future__ import annotations

from changefeed.engine.database import Database
from changefeed.sql.session import Session, StatementFamily
from changefeed.sql.statements import (
    access,
    common_tables,
    cql_statements,
    crdb_feeds,
    crdb_introspection,
    crdb_jobs,
    ddl,
    dml,
    phoenix,
    replication,
    select,
    set_operations,
    table_functions,
    truncate,
    values_lists,
    ydb_feeds,
)

#: Every statement a session runs, by AST node type.
STATEMENTS = StatementFamily.merge(
    "all",
    [
        f.FAMILY
        for f in (
            ddl,
            dml,
            cql_statements,
            truncate,
            select,
            set_operations,
            values_lists,
            common_tables,
            table_functions,
            access,
            ydb_feeds,
            crdb_feeds,
            crdb_jobs,
            crdb_introspection,
            phoenix,
            replication,
        )
    ],
)


def open_session(db: Database, *, user: str = "root", dialect: str = "sql") -> Session:
    """A session on ``db`` that runs every statement family."""
    return Session(db, STATEMENTS, user=user, dialect=dialect)
