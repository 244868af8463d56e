-- cockroachdb-experimental-changefeed-for.txt, Examples, "Create a changefeed with Avro"
-- (a Confluent-compatible schema registry on localhost:8081: `changefeed serve --registry`)
-- serve --registry 127.0.0.1:8081
CREATE TABLE cdc_test (a INT PRIMARY KEY);
INSERT INTO cdc_test VALUES (0);
-- changefeed
EXPERIMENTAL CHANGEFEED FOR cdc_test WITH format = avro, confluent_schema_registry = 'http://localhost:8081';
-- expect
table,key,value
cdc_test,\000\000\000\000\001\002\000,\000\000\000\000\002\002\002\000
