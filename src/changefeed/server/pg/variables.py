"""Session variables: their defaults and the ones reported to the client in ParameterStatus."""

from __future__ import annotations

from changefeed.engine import auth
from changefeed.sql.functions import version_string

#: The server_version reported to clients (CockroachDB reports a PostgreSQL 13 server).
SERVER_VERSION = "13.0.0"


#: Session variables: name (lower case) -> (display name, default). ``None``: from the session.
REPORTED = (
    "server_version", "server_encoding", "client_encoding", "application_name", "DateStyle",
    "IntervalStyle", "TimeZone", "integer_datetimes", "standard_conforming_strings", "is_superuser",
    "session_authorization", "crdb_version",
)  # fmt: skip


def defaults(user: str, version: str) -> dict[str, str]:
    return {
        "server_version": version,
        "server_version_num": "".join(f"{int(x):02d}" for x in version.split(".")[:3]).lstrip("0")
        if version.count(".") >= 2
        else "130000",
        "server_encoding": "UTF8",
        "client_encoding": "UTF8",
        "application_name": "",
        "DateStyle": "ISO, MDY",
        "IntervalStyle": "postgres",
        "TimeZone": "UTC",
        "integer_datetimes": "on",
        "standard_conforming_strings": "on",
        "is_superuser": "on" if user == auth.ROOT else "off",
        "session_authorization": user,
        "extra_float_digits": "1",
        "search_path": '"$user", public',
        "transaction_isolation": "serializable",
        "default_transaction_isolation": "serializable",
        "transaction_read_only": "off",
        "default_transaction_read_only": "off",
        "max_identifier_length": "63",
        "lc_messages": "C",
        "lc_monetary": "C",
        "lc_numeric": "C",
        "lc_time": "C",
        "statement_timeout": "0",
        "lock_timeout": "0",
        "idle_in_transaction_session_timeout": "0",
        "bytea_output": "hex",
        "database": "defaultdb",
        "node_id": "1",
        "crdb_version": version_string(),
    }
