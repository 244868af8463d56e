-- cockroachdb-cdc-queries, Shard changefeed messages: left(ride_id::string, 1) IN (..) picks the
-- rows of one shard (the document's placeholder sink 'scheme://sink-URI-1' left out: sinkless).
CREATE DATABASE movr;
CREATE TABLE movr.vehicle_location_histories (city STRING NOT NULL, ride_id UUID NOT NULL, "timestamp" TIMESTAMP NOT NULL, lat FLOAT8, long FLOAT8, PRIMARY KEY (city, ride_id, "timestamp"));
INSERT INTO movr.vehicle_location_histories (city, ride_id, "timestamp", lat, long) VALUES
  ('rome', '1a0a0a0a-f443-463f-a21c-4cb0f6ecf235', '2023-06-02 15:11:30', 1, 2),
  ('rome', 'ca0a0a0a-f443-463f-a21c-4cb0f6ecf235', '2023-06-02 15:11:30', 3, 4);
-- changefeed
CREATE CHANGEFEED
AS SELECT * FROM movr.vehicle_location_histories
WHERE left(ride_id::string, 1) IN ('0','1','2','3');
-- expect
table,key,value
vehicle_location_histories,"[""rome"", ""1a0a0a0a-f443-463f-a21c-4cb0f6ecf235"", ""2023-06-02T15:11:30""]","{""city"": ""rome"", ""lat"": 1, ""long"": 2, ""ride_id"": ""1a0a0a0a-f443-463f-a21c-4cb0f6ecf235"", ""timestamp"": ""2023-06-02T15:11:30""}"
> INSERT INTO movr.vehicle_location_histories (city, ride_id, "timestamp", lat, long) VALUES ('rome', 'fa0a0a0a-f443-463f-a21c-4cb0f6ecf235', '2023-06-02 15:11:31', 5, 6), ('rome', '3a0a0a0a-f443-463f-a21c-4cb0f6ecf235', '2023-06-02 15:11:31', 7, 8);
vehicle_location_histories,"[""rome"", ""3a0a0a0a-f443-463f-a21c-4cb0f6ecf235"", ""2023-06-02T15:11:31""]","{""city"": ""rome"", ""lat"": 7, ""long"": 8, ""ride_id"": ""3a0a0a0a-f443-463f-a21c-4cb0f6ecf235"", ""timestamp"": ""2023-06-02T15:11:31""}"
