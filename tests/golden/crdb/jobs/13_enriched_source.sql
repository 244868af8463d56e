-- cockroachdb-changefeed-message-envelopes, Preserve the origin of data: enriched_properties=source
-- adds the "source" block (cluster, database, job, node, table, primary keys), produced to the
-- Kafka endpoint the document names.
-- kafka
CREATE DATABASE test;
USE test;
CREATE TABLE products (id UUID PRIMARY KEY, name STRING NOT NULL, description STRING, price DECIMAL(10,2) NOT NULL, in_stock BOOL, category STRING, created_at TIMESTAMP);
INSERT INTO products (id, name, description, price, in_stock, category, created_at) VALUES
  ('58390d92-2472-43e1-86bc-1642395e8dad', 'Bluetooth Speaker', 'Portable speaker with Bluetooth 5.0', 45.00, true, 'Electronics', '2025-04-24 14:59:28.96273');
-- job
CREATE CHANGEFEED FOR TABLE products INTO 'kafka://localhost:9092' WITH envelope=enriched, enriched_properties=source;
-- expect
topic,key,value
products,"{""id"": ""58390d92-2472-43e1-86bc-1642395e8dad""}","{""after"": {""category"": ""Electronics"", ""created_at"": ""2025-04-24T14:59:28.96273"", ""description"": ""Portable speaker with Bluetooth 5.0"", ""id"": ""58390d92-2472-43e1-86bc-1642395e8dad"", ""in_stock"": true, ""name"": ""Bluetooth Speaker"", ""price"": 45.00}, ""op"": ""c"", ""source"": {""changefeed_sink"": ""kafka"", ""cluster_id"": ""<cluster>"", ""cluster_name"": """", ""database_name"": ""test"", ""db_version"": ""changefeed v0.1.0"", ""job_id"": ""<job>"", ""node_id"": ""1"", ""node_name"": ""localhost"", ""origin"": ""cockroachdb"", ""primary_keys"": [""id""], ""schema_name"": ""public"", ""source_node_locality"": """", ""table_name"": ""products""}, ""ts_ns"": <ns>}"
