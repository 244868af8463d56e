"""changefeed.formats: record encoders, one module per format (see :mod:`.base` for the seam).

Built-in formats: ``ydb-json`` (:mod:`.ydb_json`), ``debezium-json`` (:mod:`.debezium`); value
rendering shared by them lives in :mod:`.values`. Importing this package does not import pyspark.
"""

from changefeed.formats.base import REGISTRY, Encoder, Record, get_encoder, partition_of, register

__all__ = ["REGISTRY", "Encoder", "Record", "get_encoder", "partition_of", "register"]
