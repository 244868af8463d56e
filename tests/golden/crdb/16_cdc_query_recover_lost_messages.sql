-- cockroachdb-cdc-queries, Recover lost messages: a changefeed that watches only the affected row(s),
-- by primary key (the document's five location rows; its output exactly, "lat": 1E+1 included).
-- The document's placeholder sink 'scheme://cloud' is left out: a sinkless changefeed.
CREATE DATABASE movr;
CREATE TABLE movr.vehicle_location_histories (city STRING NOT NULL, ride_id UUID NOT NULL, "timestamp" TIMESTAMP NOT NULL, lat FLOAT8, long FLOAT8, PRIMARY KEY (city, ride_id, "timestamp"));
INSERT INTO movr.vehicle_location_histories (city, ride_id, "timestamp", lat, long) VALUES
  ('washington dc', 'efe6468e-f443-463f-a21c-4cb0f6ecf235', '2023-06-02 15:11:30.316547', 128, 11),
  ('washington dc', 'efe6468e-f443-463f-a21c-4cb0f6ecf235', '2023-06-02 15:11:33.700297', 45, -66),
  ('washington dc', 'efe6468e-f443-463f-a21c-4cb0f6ecf235', '2023-06-02 15:11:34.050312', -34, -49),
  ('washington dc', 'efe6468e-f443-463f-a21c-4cb0f6ecf235', '2023-06-02 15:11:36.408561', 10, -27),
  ('washington dc', 'efe6468e-f443-463f-a21c-4cb0f6ecf235', '2023-06-02 15:11:38.026542', 83, 84),
  ('washington dc', '0a0a0a0a-f443-463f-a21c-4cb0f6ecf235', '2023-06-02 15:11:30.316547', 1, 2);
-- changefeed
CREATE CHANGEFEED
AS SELECT * FROM movr.vehicle_location_histories
WHERE ride_id = 'efe6468e-f443-463f-a21c-4cb0f6ecf235';
-- expect
table,key,value
vehicle_location_histories,"[""washington dc"", ""efe6468e-f443-463f-a21c-4cb0f6ecf235"", ""2023-06-02T15:11:30.316547""]","{""city"": ""washington dc"", ""lat"": 128, ""long"": 11, ""ride_id"": ""efe6468e-f443-463f-a21c-4cb0f6ecf235"", ""timestamp"": ""2023-06-02T15:11:30.316547""}"
vehicle_location_histories,"[""washington dc"", ""efe6468e-f443-463f-a21c-4cb0f6ecf235"", ""2023-06-02T15:11:33.700297""]","{""city"": ""washington dc"", ""lat"": 45, ""long"": -66, ""ride_id"": ""efe6468e-f443-463f-a21c-4cb0f6ecf235"", ""timestamp"": ""2023-06-02T15:11:33.700297""}"
vehicle_location_histories,"[""washington dc"", ""efe6468e-f443-463f-a21c-4cb0f6ecf235"", ""2023-06-02T15:11:34.050312""]","{""city"": ""washington dc"", ""lat"": -34, ""long"": -49, ""ride_id"": ""efe6468e-f443-463f-a21c-4cb0f6ecf235"", ""timestamp"": ""2023-06-02T15:11:34.050312""}"
vehicle_location_histories,"[""washington dc"", ""efe6468e-f443-463f-a21c-4cb0f6ecf235"", ""2023-06-02T15:11:36.408561""]","{""city"": ""washington dc"", ""lat"": 1E+1, ""long"": -27, ""ride_id"": ""efe6468e-f443-463f-a21c-4cb0f6ecf235"", ""timestamp"": ""2023-06-02T15:11:36.408561""}"
vehicle_location_histories,"[""washington dc"", ""efe6468e-f443-463f-a21c-4cb0f6ecf235"", ""2023-06-02T15:11:38.026542""]","{""city"": ""washington dc"", ""lat"": 83, ""long"": 84, ""ride_id"": ""efe6468e-f443-463f-a21c-4cb0f6ecf235"", ""timestamp"": ""2023-06-02T15:11:38.026542""}"
