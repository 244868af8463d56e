-- cockroachdb-cdc-queries, Capture delete messages: with envelope='wrapped', format='json' and diff
-- the delete message's "before" holds the entire row (not the query's projection):
-- {"after": null, "before": {"address": "95913 Thomas Key Apt. 99", "city": "washington dc", ...}}
-- The external connection 'cloud' stands for the document's cloud storage sink (its messages carry
-- no key_in_value for a CDC query either).
CREATE TABLE users (id UUID NOT NULL, city STRING NOT NULL, name STRING, address STRING, credit_card STRING, PRIMARY KEY (city, id));
INSERT INTO users (id, city, name, address, credit_card) VALUES
  ('49a8c43d-8ed8-4d50-ad99-fb314cbe20a1', 'washington dc', 'Tina Jones', '95913 Thomas Key Apt. 99', '2702281601'),
  ('4d4e3b2a-0000-4000-8000-000000000001', 'washington dc', 'Kim Lee', '1 Main St', '1111111111');
CREATE EXTERNAL CONNECTION cloud AS 'topics://';
-- job
CREATE CHANGEFEED INTO 'external://cloud' WITH envelope='wrapped', format='json', diff AS SELECT * FROM users WHERE event_op() = 'delete';
-- then
UPDATE users SET name = 'Kim Li' WHERE name = 'Kim Lee';
DELETE FROM users WHERE name = 'Tina Jones';
-- expect
topic,key,value
users,"[""washington dc"", ""49a8c43d-8ed8-4d50-ad99-fb314cbe20a1""]","{""after"": null, ""before"": {""address"": ""95913 Thomas Key Apt. 99"", ""city"": ""washington dc"", ""credit_card"": ""2702281601"", ""id"": ""49a8c43d-8ed8-4d50-ad99-fb314cbe20a1"", ""name"": ""Tina Jones""}}"
