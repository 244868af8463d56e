-- cockroachdb-cdc-queries, Filter columns: "create a changefeed that will emit messages including
-- only the name and city column data". The document's placeholder sink "scheme://sink-URI" is an
-- external connection here (external://sink).
CREATE TABLE users (id UUID NOT NULL, city STRING NOT NULL, name STRING, address STRING, credit_card STRING, PRIMARY KEY (city, id));
INSERT INTO users (id, city, name, address, credit_card) VALUES
  ('ae147ae1-47ae-4800-8000-000000000022', 'amsterdam', 'Tyler Dalton', '88194 Angela Gardens Suite 94', '4443538758'),
  ('b3333333-3333-4000-8000-000000000023', 'amsterdam', 'Dillon Martin', '29590 Butler Plain Apt. 25', '3750897994'),
  ('b851eb85-1eb8-4000-8000-000000000024', 'amsterdam', 'Deborah Carson', '32768 Eric Divide Suite 88', '8107478823');
CREATE EXTERNAL CONNECTION sink AS 'topics://';
-- job
CREATE CHANGEFEED INTO 'external://sink' WITH updated AS SELECT name, city FROM users;
-- then
UPDATE users SET address = '1 New Road' WHERE name = 'Dillon Martin';
-- expect
topic,key,value
users,"[""amsterdam"", ""ae147ae1-47ae-4800-8000-000000000022""]","{""__crdb__"": {""updated"": ""<ts1>""}, ""city"": ""amsterdam"", ""name"": ""Tyler Dalton""}"
users,"[""amsterdam"", ""b851eb85-1eb8-4000-8000-000000000024""]","{""__crdb__"": {""updated"": ""<ts1>""}, ""city"": ""amsterdam"", ""name"": ""Deborah Carson""}"
users,"[""amsterdam"", ""b3333333-3333-4000-8000-000000000023""]","{""__crdb__"": {""updated"": ""<ts1>""}, ""city"": ""amsterdam"", ""name"": ""Dillon Martin""}"
users,"[""amsterdam"", ""b3333333-3333-4000-8000-000000000023""]","{""__crdb__"": {""updated"": ""<ts2>""}, ""city"": ""amsterdam"", ""name"": ""Dillon Martin""}"
