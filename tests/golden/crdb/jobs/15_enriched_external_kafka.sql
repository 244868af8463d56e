-- cockroachdb-changefeed-message-envelopes, enriched: "To add the operation type and the processing
-- timestamp of the change event to the envelope, use envelope=enriched".
CREATE DATABASE test;
USE test;
CREATE TABLE products (id UUID PRIMARY KEY, name STRING NOT NULL, description STRING, price DECIMAL(10,2) NOT NULL, in_stock BOOL, category STRING, created_at TIMESTAMP);
INSERT INTO products (id, name, description, price, in_stock, category, created_at) VALUES
  ('cb1a3e43-dccf-422f-a27d-ea027c233682', 'Wireless Mouse', 'Ergonomic wireless mouse with USB receiver', 29.99, true, 'Electronics', '2025-04-24 14:59:28.96273');
CREATE EXTERNAL CONNECTION kafka AS 'topics://';
-- job
CREATE CHANGEFEED FOR TABLE products INTO 'external://kafka' WITH envelope=enriched;
-- expect
topic,key,value
products,"{""id"": ""cb1a3e43-dccf-422f-a27d-ea027c233682""}","{""after"": {""category"": ""Electronics"", ""created_at"": ""2025-04-24T14:59:28.96273"", ""description"": ""Ergonomic wireless mouse with USB receiver"", ""id"": ""cb1a3e43-dccf-422f-a27d-ea027c233682"", ""in_stock"": true, ""name"": ""Wireless Mouse"", ""price"": 29.99}, ""op"": ""c"", ""ts_ns"": <ns>}"
