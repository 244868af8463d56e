-- cockroachdb-changefeed-message-envelopes, bare, In CDC queries: "A changefeed containing a SELECT
-- clause without any additional options": {"city": "los angeles", "type": "skateboard"}
CREATE DATABASE movr;
CREATE TABLE movr.vehicles (id UUID NOT NULL, city STRING NOT NULL, type STRING, owner_id UUID, creation_time TIMESTAMP, status STRING, current_location STRING, ext JSONB, PRIMARY KEY (city, id));
INSERT INTO movr.vehicles (id, city, type, status) VALUES ('aaaaaaaa-aaaa-4800-8000-00000000000a', 'los angeles', 'skateboard', 'in_use');
CREATE EXTERNAL CONNECTION kafka AS 'topics://';
-- job
CREATE CHANGEFEED INTO 'external://kafka' AS SELECT city, type FROM movr.vehicles;
-- expect
topic,key,value
vehicles,"[""los angeles"", ""aaaaaaaa-aaaa-4800-8000-00000000000a""]","{""city"": ""los angeles"", ""type"": ""skateboard""}"
