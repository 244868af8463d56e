-- cockroachdb-changefeed-message-envelopes, Route events based on operation type: envelope=enriched
-- adds "op" (c insert, u update, d delete) and "ts_ns" (when the changefeed processed the event).
-- The external connection is named as the document's URI names it (external://kafka:9092).
CREATE DATABASE test;
USE test;
CREATE TABLE products (id UUID PRIMARY KEY, name STRING NOT NULL, description STRING, price DECIMAL(10,2) NOT NULL, in_stock BOOL, category STRING, created_at TIMESTAMP);
CREATE EXTERNAL CONNECTION "kafka:9092" AS 'topics://';
-- job
CREATE CHANGEFEED FOR TABLE products INTO 'external://kafka:9092' WITH envelope=enriched;
-- then
INSERT INTO products (id, name, description, price, in_stock, category, created_at) VALUES
  ('32856ed8-34d3-45a3-a449-412bdeaa277c', 'LED Desk Lamp', 'Adjustable LED desk lamp with touch controls', 22.30, true, 'Home & Kitchen', '2025-04-01 17:55:46.812942');
UPDATE products SET in_stock = false WHERE name = 'LED Desk Lamp';
DELETE FROM products WHERE name = 'LED Desk Lamp';
-- expect
topic,key,value
products,"{""id"": ""32856ed8-34d3-45a3-a449-412bdeaa277c""}","{""after"": {""category"": ""Home & Kitchen"", ""created_at"": ""2025-04-01T17:55:46.812942"", ""description"": ""Adjustable LED desk lamp with touch controls"", ""id"": ""32856ed8-34d3-45a3-a449-412bdeaa277c"", ""in_stock"": true, ""name"": ""LED Desk Lamp"", ""price"": 22.30}, ""op"": ""c"", ""ts_ns"": <ns>}"
products,"{""id"": ""32856ed8-34d3-45a3-a449-412bdeaa277c""}","{""after"": {""category"": ""Home & Kitchen"", ""created_at"": ""2025-04-01T17:55:46.812942"", ""description"": ""Adjustable LED desk lamp with touch controls"", ""id"": ""32856ed8-34d3-45a3-a449-412bdeaa277c"", ""in_stock"": false, ""name"": ""LED Desk Lamp"", ""price"": 22.30}, ""op"": ""u"", ""ts_ns"": <ns>}"
products,"{""id"": ""32856ed8-34d3-45a3-a449-412bdeaa277c""}","{""after"": null, ""op"": ""d"", ""ts_ns"": <ns>}"
