-- cockroachdb-cdc-queries, Emit the previous state of a row: a named field of the cdc_prev tuple,
-- (cdc_prev).current_location, for vehicles that were in use.
CREATE DATABASE movr;
CREATE TABLE movr.vehicles (id UUID NOT NULL, city STRING NOT NULL, type STRING, owner_id UUID, creation_time TIMESTAMP, status STRING, current_location STRING, ext JSONB, PRIMARY KEY (city, id));
INSERT INTO movr.vehicles (id, city, type, owner_id, creation_time, status, current_location, ext) VALUES
  ('11111111-1111-4100-8000-000000000001', 'new york', 'scooter', '147ae147-ae14-4b00-8000-000000000004', '2019-01-02 03:04:05', 'in_use', '86667 Edwards Valley', '{"color": "black"}'),
  ('22222222-2222-4200-8000-000000000002', 'boston', 'bike', '2e147ae1-47ae-4400-8000-000000000009', '2019-01-02 03:04:05', 'available', '19659 Christina Ville', '{"brand": "Merida", "color": "red"}');
CREATE EXTERNAL CONNECTION sink AS 'topics://';
-- job
CREATE CHANGEFEED INTO 'external://sink' AS SELECT owner_id, (cdc_prev).current_location AS previous_location FROM movr.vehicles WHERE (cdc_prev).status = 'in_use';
-- then
UPDATE movr.vehicles SET status = 'available', current_location = '1 Park Ave' WHERE id = '11111111-1111-4100-8000-000000000001';
UPDATE movr.vehicles SET status = 'in_use', current_location = '2 Elm St' WHERE id = '22222222-2222-4200-8000-000000000002';
UPDATE movr.vehicles SET current_location = '3 Oak St' WHERE id = '22222222-2222-4200-8000-000000000002';
-- expect
topic,key,value
vehicles,"[""new york"", ""11111111-1111-4100-8000-000000000001""]","{""owner_id"": ""147ae147-ae14-4b00-8000-000000000004"", ""previous_location"": ""86667 Edwards Valley""}"
vehicles,"[""boston"", ""22222222-2222-4200-8000-000000000002""]","{""owner_id"": ""2e147ae1-47ae-4400-8000-000000000009"", ""previous_location"": ""2 Elm St""}"
