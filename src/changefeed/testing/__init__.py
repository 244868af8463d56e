"""Test support usable outside this repository: a seeded random workload (the "nemesis" of
CockroachDB's cdctest) and validators that check a changefeed's topic against the journal.

* :mod:`changefeed.testing.workload` — random SQL (YDB-style) and CQL (ScyllaDB-style) writers,
  single or several processes, with an optional shadow history of table states per transaction.
* :mod:`changefeed.testing.validators` — replay/fingerprint checks of the engine journal and the
  feed validators (per-key order, exactly once, before/after images, resolved fingerprints,
  initial-scan ordering), returning a :class:`~changefeed.testing.validators.Report`; one module
  per concern (report, values, journal, scylla_log, records, feed), all names importable from
  the package.
"""

from __future__ import annotations

__all__ = ["validators", "workload"]
