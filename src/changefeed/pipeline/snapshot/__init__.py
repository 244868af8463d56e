"""Snapshots of tables: key-range chunks, the initial scan, and the schema-change backfill."""
