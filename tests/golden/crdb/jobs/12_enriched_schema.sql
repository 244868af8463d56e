-- cockroachdb-changefeed-message-envelopes, Add envelope schema fields: enriched_properties=schema
-- wraps the message as {"payload": .., "schema": ..} (Kafka Connect's JSON converter form).
CREATE DATABASE test;
USE test;
CREATE TABLE products (id UUID PRIMARY KEY, name STRING NOT NULL, description STRING, price DECIMAL(10,2) NOT NULL, in_stock BOOL, category STRING, created_at TIMESTAMP);
CREATE EXTERNAL CONNECTION "kafka:9092" AS 'topics://';
-- job
CREATE CHANGEFEED FOR TABLE products INTO 'external://kafka:9092' WITH envelope=enriched, enriched_properties=schema;
-- then
INSERT INTO products (id, name, description, price, in_stock, category, created_at) VALUES
  ('8320b051-3ff7-4aa8-9708-78142fde7e31', 'Coffee Mug', 'Ceramic mug with 350ml capacity', 12.50, true, 'Home & Kitchen', '2025-04-01 17:55:46.812942');
-- expect
topic,key,value
products,"{""payload"": {""id"": ""8320b051-3ff7-4aa8-9708-78142fde7e31""}, ""schema"": {""fields"": [{""field"": ""id"", ""optional"": false, ""type"": ""string""}], ""name"": ""products.key"", ""optional"": false, ""type"": ""struct""}}","{""payload"": {""after"": {""category"": ""Home & Kitchen"", ""created_at"": ""2025-04-01T17:55:46.812942"", ""description"": ""Ceramic mug with 350ml capacity"", ""id"": ""8320b051-3ff7-4aa8-9708-78142fde7e31"", ""in_stock"": true, ""name"": ""Coffee Mug"", ""price"": 12.50}, ""op"": ""c"", ""ts_ns"": <ns>}, ""schema"": {""fields"": [{""field"": ""after"", ""fields"": [{""field"": ""id"", ""optional"": false, ""type"": ""string""}, {""field"": ""name"", ""optional"": false, ""type"": ""string""}, {""field"": ""description"", ""optional"": true, ""type"": ""string""}, {""field"": ""price"", ""name"": ""decimal"", ""optional"": false, ""parameters"": {""precision"": ""10"", ""scale"": ""2""}, ""type"": ""float64""}, {""field"": ""in_stock"", ""optional"": true, ""type"": ""boolean""}, {""field"": ""category"", ""optional"": true, ""type"": ""string""}, {""field"": ""created_at"", ""name"": ""timestamp"", ""optional"": true, ""type"": ""string""}], ""name"": ""products.after.value"", ""optional"": false, ""type"": ""struct""}, {""field"": ""ts_ns"", ""optional"": false, ""type"": ""int64""}, {""field"": ""op"", ""optional"": false, ""type"": ""string""}], ""name"": ""cockroachdb.envelope"", ""optional"": false, ""type"": ""struct""}}"
