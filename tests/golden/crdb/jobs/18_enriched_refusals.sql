-- cockroachdb-changefeed-message-envelopes / create-changefeed: where CockroachDB refuses the
-- enriched envelope (options.go, the sinks' checks).
CREATE DATABASE test;
USE test;
CREATE TABLE products (id UUID PRIMARY KEY, name STRING NOT NULL, description STRING, price DECIMAL(10,2) NOT NULL, in_stock BOOL, category STRING, created_at TIMESTAMP);
CREATE EXTERNAL CONNECTION kafka AS 'topics://';
-- error
CREATE CHANGEFEED FOR TABLE products INTO 'nodelocal://1/enriched' WITH envelope=enriched;
ERROR: this sink is incompatible with envelope=enriched
CREATE CHANGEFEED INTO 'external://kafka' WITH envelope=enriched AS SELECT name FROM products;
ERROR: envelope=enriched is incompatible with SELECT statement
CREATE CHANGEFEED FOR TABLE products INTO 'external://kafka' WITH envelope=enriched, format=csv;
ERROR: envelope=enriched is only usable with format=json/avro
CREATE CHANGEFEED FOR TABLE products INTO 'external://kafka' WITH enriched_properties=source;
ERROR: enriched_properties is only usable with envelope=enriched
CREATE CHANGEFEED FOR TABLE products INTO 'external://kafka' WITH envelope=enriched, enriched_properties=potato;
ERROR: unknown enriched_properties: potato, valid values are: source, schema
