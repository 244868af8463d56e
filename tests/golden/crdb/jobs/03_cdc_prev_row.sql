-- cockroachdb-cdc-queries, Emit the previous state of a row: "cdc_prev is a tuple-typed column
-- that contains the table's columns ... For newly inserted rows in a table, the cdc_prev column
-- will emit as NULL."
CREATE DATABASE movr;
CREATE TABLE movr.rides (id UUID NOT NULL, city STRING NOT NULL, vehicle_city STRING, rider_id UUID, vehicle_id UUID, start_address STRING, end_address STRING, start_time TIMESTAMP, end_time TIMESTAMP, revenue DECIMAL(10,2), PRIMARY KEY (city, id));
INSERT INTO movr.rides (id, city, vehicle_city, rider_id, vehicle_id, start_address, end_address, start_time, end_time, revenue) VALUES
  ('ab020c49-ba5e-4800-8000-00000000014e', 'amsterdam', 'amsterdam', 'c28f5c28-f5c2-4000-8000-000000000026', 'aaaaaaaa-aaaa-4800-8000-00000000000a', '1905 Christopher Locks Apt. 77', '66037 Belinda Plaza Apt. 93', '2018-12-13 03:04:05', '2018-12-14 08:04:05', 77.00);
CREATE EXTERNAL CONNECTION sink AS 'topics://';
-- job
CREATE CHANGEFEED INTO 'external://sink' AS SELECT rider_id, vehicle_id, cdc_prev FROM movr.rides;
-- then
UPDATE movr.rides SET revenue = 80.00 WHERE id = 'ab020c49-ba5e-4800-8000-00000000014e';
INSERT INTO movr.rides (id, city, vehicle_city, rider_id, vehicle_id, start_address, revenue) VALUES
  ('ab851eb8-51eb-4800-8000-00000000014f', 'amsterdam', 'amsterdam', 'b3333333-3333-4000-8000-000000000023', 'bbbbbbbb-bbbb-4800-8000-00000000000b', '2 Canal St', 10.50);
DELETE FROM movr.rides WHERE id = 'ab020c49-ba5e-4800-8000-00000000014e';
-- expect
topic,key,value
rides,"[""amsterdam"", ""ab020c49-ba5e-4800-8000-00000000014e""]","{""cdc_prev"": null, ""rider_id"": ""c28f5c28-f5c2-4000-8000-000000000026"", ""vehicle_id"": ""aaaaaaaa-aaaa-4800-8000-00000000000a""}"
rides,"[""amsterdam"", ""ab020c49-ba5e-4800-8000-00000000014e""]","{""cdc_prev"": {""city"": ""amsterdam"", ""end_address"": ""66037 Belinda Plaza Apt. 93"", ""end_time"": ""2018-12-14T08:04:05"", ""id"": ""ab020c49-ba5e-4800-8000-00000000014e"", ""revenue"": 77.00, ""rider_id"": ""c28f5c28-f5c2-4000-8000-000000000026"", ""start_address"": ""1905 Christopher Locks Apt. 77"", ""start_time"": ""2018-12-13T03:04:05"", ""vehicle_city"": ""amsterdam"", ""vehicle_id"": ""aaaaaaaa-aaaa-4800-8000-00000000000a""}, ""rider_id"": ""c28f5c28-f5c2-4000-8000-000000000026"", ""vehicle_id"": ""aaaaaaaa-aaaa-4800-8000-00000000000a""}"
rides,"[""amsterdam"", ""ab851eb8-51eb-4800-8000-00000000014f""]","{""cdc_prev"": null, ""rider_id"": ""b3333333-3333-4000-8000-000000000023"", ""vehicle_id"": ""bbbbbbbb-bbbb-4800-8000-00000000000b""}"
rides,"[""amsterdam"", ""ab020c49-ba5e-4800-8000-00000000014e""]","{""cdc_prev"": {""city"": ""amsterdam"", ""end_address"": ""66037 Belinda Plaza Apt. 93"", ""end_time"": ""2018-12-14T08:04:05"", ""id"": ""ab020c49-ba5e-4800-8000-00000000014e"", ""revenue"": 80.00, ""rider_id"": ""c28f5c28-f5c2-4000-8000-000000000026"", ""start_address"": ""1905 Christopher Locks Apt. 77"", ""start_time"": ""2018-12-13T03:04:05"", ""vehicle_city"": ""amsterdam"", ""vehicle_id"": ""aaaaaaaa-aaaa-4800-8000-00000000000a""}, ""rider_id"": null, ""vehicle_id"": null}"
