-- cockroachdb-experimental-changefeed-for.txt, initial_scan_only: "will perform an initial scan and
-- then the changefeed job will complete with a successful status" (the statement returns).
CREATE TABLE t (id INT PRIMARY KEY, name STRING);
INSERT INTO t VALUES (1, 'a'), (2, 'b,c');
-- changefeed
EXPERIMENTAL CHANGEFEED FOR t WITH initial_scan_only, full_table_name, key_in_value, topic_in_value;
-- expect
table,key,value
defaultdb.public.t,[1],"{""after"": {""id"": 1, ""name"": ""a""}, ""key"": [1], ""topic"": ""defaultdb.public.t""}"
defaultdb.public.t,[2],"{""after"": {""id"": 2, ""name"": ""b,c""}, ""key"": [2], ""topic"": ""defaultdb.public.t""}"
-- end
