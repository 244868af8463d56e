"""Correctness validators, after CockroachDB's ``cdctest`` (order, before/after, fingerprint).

Engine (journal) checks, independent of any changefeed:

* :func:`check_scylla_replay` — replaying ``<table>_scylla_cdc_log`` with the same CQL statements
  into a fresh table reproduces the table (``SELECT *`` equal);
* :func:`check_scylla_images` — every pre-image (op 0) equals the row before its statement and
  every post-image (op 9) the row after, by simulating the log;
* :func:`check_change_stream` — replaying the change stream ``x<id>`` (upsert the new image,
  delete on erase) reproduces the table; per key, each old image equals the previous new image;
  with a workload :class:`~changefeed.testing.workload.History`, each old image equals the table
  read before the transaction and each new image the table read after it.

Feed checks (:func:`validate_feed`), reading every record of a feed's topic:

* ``order`` — records of one key are all in the partition ``partition_of(key)`` and in commit order;
* ``exactly_once`` — the (key, transaction) pairs delivered equal exactly the change rows committed
  after the feed's creation (plus one snapshot per row for an initial scan): no duplicates, no gaps;
* ``images`` — old/new images (or the UPDATES columns) equal the journal's, and per key each old
  image equals the previous record's new image;
* ``resolved`` — after a resolved record no record of that partition is at or below its timestamp,
  and replaying the feed up to it reproduces the table as of that timestamp (all keys the feed covers);
* ``initial_scan`` — per key at most one snapshot record, preceding all its updates, equal to the
  row at the feed's creation.

CockroachDB changefeed messages (feeds of kind ``crdb``) decode into the same events: ``after``
is the new image, ``before`` (``diff``) the old one, ``updated`` the commit time, resolved
messages per partition; so the same checks are cdctest's order validator (per key order, one
partition per key, nothing at or below a partition's resolved timestamp after it), its
before/after validator (``before`` equals the previous ``after`` and the journal's old image),
exactly-once (no duplicates or gaps), and its fingerprint validator (replaying the feed up to
each resolved timestamp gives the table as of then).

Every check returns or adds to a :class:`Report`; an empty report means the check passed.

Where each part lives (everything is importable from this package):

* :mod:`~changefeed.testing.validators.report` — :class:`Report`, :class:`Violation`;
* :mod:`~changefeed.testing.validators.values` — JSON-normalised values, keys and images;
* :mod:`~changefeed.testing.validators.journal` — the change stream as :class:`ChangeRow` s and
  its check;
* :mod:`~changefeed.testing.validators.scylla_log` — the ScyllaDB log's replay and image checks;
* :mod:`~changefeed.testing.validators.records` — reading a feed's topic and decoding its records
  (YDB, Debezium, CockroachDB) into :class:`FeedEvent` s;
* :mod:`~changefeed.testing.validators.feed` — the feed checks.
"""

from __future__ import annotations

from changefeed.testing.validators.feed import validate_events, validate_feed, validate_records
from changefeed.testing.validators.journal import (
    CHANGE_ERASE,
    CHANGE_UPSERT,
    ChangeRow,
    change_rows,
    check_change_stream,
    table_schema,
    table_state,
)
from changefeed.testing.validators.records import FeedEvent, decode_records, find_feed, read_topic
from changefeed.testing.validators.report import MAX_KEPT, Report, Violation
from changefeed.testing.validators.scylla_log import check_scylla_images, check_scylla_replay
from changefeed.testing.validators.values import Image, Key, norm

__all__ = [
    "CHANGE_ERASE",
    "CHANGE_UPSERT",
    "MAX_KEPT",
    "ChangeRow",
    "FeedEvent",
    "Image",
    "Key",
    "Report",
    "Violation",
    "change_rows",
    "check_change_stream",
    "check_scylla_images",
    "check_scylla_replay",
    "decode_records",
    "find_feed",
    "norm",
    "read_topic",
    "table_schema",
    "table_state",
    "validate_events",
    "validate_feed",
    "validate_records",
]
