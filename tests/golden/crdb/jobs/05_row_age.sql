-- cockroachdb-cdc-queries, Determine the age of a row: crdb_internal_mvcc_timestamp minus
-- (cdc_prev).crdb_internal_mvcc_timestamp. As in the document's output ({"age":
-- 1679504962492204986.0000000000}: the whole timestamp), the previous row's MVCC timestamp reads 0
-- (CockroachDB's rangefeed does not carry it); a row with no previous state has a NULL age.
CREATE DATABASE movr;
CREATE TABLE movr.rides (id UUID NOT NULL, city STRING NOT NULL, rider_id UUID, revenue DECIMAL(10,2), PRIMARY KEY (city, id));
INSERT INTO movr.rides (id, city, rider_id, revenue) VALUES ('ab020c49-ba5e-4800-8000-00000000014e', 'amsterdam', 'c28f5c28-f5c2-4000-8000-000000000026', 77.00);
CREATE EXTERNAL CONNECTION sink AS 'topics://';
-- job
CREATE CHANGEFEED INTO 'external://sink'
AS SELECT crdb_internal_mvcc_timestamp - (cdc_prev).crdb_internal_mvcc_timestamp
AS age
FROM movr.rides;
-- then
UPDATE movr.rides SET revenue = 78.00 WHERE city = 'amsterdam';
-- expect
topic,key,value
rides,"[""amsterdam"", ""ab020c49-ba5e-4800-8000-00000000014e""]","{""age"": null}"
rides,"[""amsterdam"", ""ab020c49-ba5e-4800-8000-00000000014e""]","{""age"": <ts1>}"
