"""changefeed: change data capture for tables, with its pipeline on Apache Spark.

``changefeed.connect(dir, user=..., dialect="sql"|"cql")`` opens a database directory; see
DESIGN.md's interface contract and the README.
"""

from changefeed.connection import Connection, Result, connect
from changefeed.exceptions import ChangefeedError

__all__ = ["ChangefeedError", "Connection", "Result", "connect"]
__version__ = "0.1.0"
