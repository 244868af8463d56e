-- cockroachdb-changefeed-message-envelopes: the enriched envelope is "supported for Kafka sinks,
-- webhook, Google Cloud Pub/Sub, and sinkless changefeeds"; a sinkless one's source names the
-- sink "sinkless buffer" and job 0.
CREATE DATABASE test;
USE test;
CREATE TABLE products (id UUID PRIMARY KEY, name STRING NOT NULL, price DECIMAL(10,2) NOT NULL);
-- changefeed
CREATE CHANGEFEED FOR TABLE test.products WITH envelope = enriched, enriched_properties = 'source', updated, diff;
-- expect
table,key,value
> INSERT INTO test.products (id, name, price) VALUES ('32856ed8-34d3-45a3-a449-412bdeaa277c', 'LED Desk Lamp', 22.30);
products,"{""id"": ""32856ed8-34d3-45a3-a449-412bdeaa277c""}","{""after"": {""id"": ""32856ed8-34d3-45a3-a449-412bdeaa277c"", ""name"": ""LED Desk Lamp"", ""price"": 22.30}, ""before"": null, ""op"": ""c"", ""source"": {""changefeed_sink"": ""sinkless buffer"", ""cluster_id"": ""<cluster>"", ""cluster_name"": """", ""database_name"": ""test"", ""db_version"": ""changefeed v0.1.0"", ""job_id"": ""<job>"", ""node_id"": ""1"", ""node_name"": ""localhost"", ""origin"": ""cockroachdb"", ""primary_keys"": [""id""], ""schema_name"": ""public"", ""source_node_locality"": """", ""table_name"": ""products"", ""ts_hlc"": ""<ts1>"", ""ts_ns"": <ns>}, ""ts_ns"": <ns>}"
> DELETE FROM test.products WHERE name = 'LED Desk Lamp';
products,"{""id"": ""32856ed8-34d3-45a3-a449-412bdeaa277c""}","{""after"": null, ""before"": {""id"": ""32856ed8-34d3-45a3-a449-412bdeaa277c"", ""name"": ""LED Desk Lamp"", ""price"": 22.30}, ""op"": ""d"", ""source"": {""changefeed_sink"": ""sinkless buffer"", ""cluster_id"": ""<cluster>"", ""cluster_name"": """", ""database_name"": ""test"", ""db_version"": ""changefeed v0.1.0"", ""job_id"": ""<job>"", ""node_id"": ""1"", ""node_name"": ""localhost"", ""origin"": ""cockroachdb"", ""primary_keys"": [""id""], ""schema_name"": ""public"", ""source_node_locality"": """", ""table_name"": ""products"", ""ts_hlc"": ""<ts2>"", ""ts_ns"": <ns>}, ""ts_ns"": <ns>}"
