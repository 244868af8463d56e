"""The PostgreSQL wire protocol (v3) over one database directory: psql, psycopg, asyncpg, JDBC.

See ``docs/pg.md``. :func:`create` is the factory ``changefeed serve --pg`` calls.
"""

from __future__ import annotations

from changefeed.server import Endpoint, EndpointConfig


def create(config: EndpointConfig) -> Endpoint:
    from changefeed.server.pg.server import PgEndpoint

    return PgEndpoint(config)
