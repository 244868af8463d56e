"""The CQL native protocol (v4; v3) over one database directory: cqlsh, the ScyllaDB/Cassandra
drivers and ScyllaDB's CDC libraries. See ``docs/cql.md``. :func:`create` is the factory
``changefeed serve --cql`` calls.
"""

from __future__ import annotations

from changefeed.server import Endpoint, EndpointConfig


def create(config: EndpointConfig) -> Endpoint:
    from changefeed.server.cql.server import CqlEndpoint

    return CqlEndpoint(config)
