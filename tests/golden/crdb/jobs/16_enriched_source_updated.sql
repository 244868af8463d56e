-- cockroachdb-changefeed-message-envelopes, enriched: "To order messages when using
-- envelope=enriched, you must also use enriched_properties='source' with the updated option": the
-- source gets ts_hlc and ts_ns (the commit time).
-- kafka
CREATE DATABASE test;
USE test;
CREATE TABLE products (id UUID PRIMARY KEY, name STRING NOT NULL, description STRING, price DECIMAL(10,2) NOT NULL, in_stock BOOL, category STRING, created_at TIMESTAMP);
INSERT INTO products (id, name, description, price, in_stock, category, created_at) VALUES
  ('4b36388a-f7e6-4b95-9f78-3aee9e2060d6', 'LED Desk Lamp', 'Adjustable LED desk lamp with touch controls', 22.30, true, 'Home & Kitchen', '2025-04-30 20:02:35.40316');
-- job
CREATE CHANGEFEED FOR TABLE products INTO 'kafka://localhost:9092' WITH envelope=enriched,enriched_properties=source, updated;
-- expect
topic,key,value
products,"{""id"": ""4b36388a-f7e6-4b95-9f78-3aee9e2060d6""}","{""after"": {""category"": ""Home & Kitchen"", ""created_at"": ""2025-04-30T20:02:35.40316"", ""description"": ""Adjustable LED desk lamp with touch controls"", ""id"": ""4b36388a-f7e6-4b95-9f78-3aee9e2060d6"", ""in_stock"": true, ""name"": ""LED Desk Lamp"", ""price"": 22.30}, ""op"": ""c"", ""source"": {""changefeed_sink"": ""kafka"", ""cluster_id"": ""<cluster>"", ""cluster_name"": """", ""database_name"": ""test"", ""db_version"": ""changefeed v0.1.0"", ""job_id"": ""<job>"", ""node_id"": ""1"", ""node_name"": ""localhost"", ""origin"": ""cockroachdb"", ""primary_keys"": [""id""], ""schema_name"": ""public"", ""source_node_locality"": """", ""table_name"": ""products"", ""ts_hlc"": ""<ts1>"", ""ts_ns"": <ns>}, ""ts_ns"": <ns>}"
