-- The design's SALT_BUCKETS: the time index is spread over buckets; the query merges them back
-- into global time order (ties by key), here on a salted data table too.
CREATE TABLE T (k INTEGER PRIMARY KEY, v1 INTEGER, v2 INTEGER) SALT_BUCKETS=4;
CREATE CDC C ON T INCLUDE (PRE, POST, CHANGE) SALT_BUCKETS = 3;
BEGIN;
UPSERT INTO T VALUES (1, 10, 100), (2, 20, 200), (3, 30, 300), (4, 40, 400), (5, 50, 500);
COMMIT;
UPSERT INTO T (k, v1) VALUES (4, 41);
UPSERT INTO T (k, v1) VALUES (1, 11);
DELETE FROM T WHERE k = 2;
UPSERT INTO T (k, v2) SELECT k, v1 FROM T WHERE k >= 4;
SELECT * FROM C;
>>>
+-------------------------+---+-----------------------------------------------------------------------------------------------------------------+
| PHOENIX_ROW_TIMESTAMP() | K |                                                     CDC JSON                                                    |
+-------------------------+---+-----------------------------------------------------------------------------------------------------------------+
| 2024-05-28 09:55:30.523 | 1 | {"change_image":{"V1":10,"V2":100},"post_image":{"V2":100,"V1":10},"event_type":"upsert","pre_image":{}}        |
| 2024-05-28 09:55:30.523 | 2 | {"change_image":{"V1":20,"V2":200},"post_image":{"V2":200,"V1":20},"event_type":"upsert","pre_image":{}}        |
| 2024-05-28 09:55:30.523 | 3 | {"change_image":{"V1":30,"V2":300},"post_image":{"V2":300,"V1":30},"event_type":"upsert","pre_image":{}}        |
| 2024-05-28 09:55:30.523 | 4 | {"change_image":{"V1":40,"V2":400},"post_image":{"V2":400,"V1":40},"event_type":"upsert","pre_image":{}}        |
| 2024-05-28 09:55:30.523 | 5 | {"change_image":{"V1":50,"V2":500},"post_image":{"V2":500,"V1":50},"event_type":"upsert","pre_image":{}}        |
| 2024-05-28 09:55:30.723 | 4 | {"change_image":{"V1":41},"post_image":{"V2":400,"V1":41},"event_type":"upsert","pre_image":{"V1":40,"V2":400}} |
| 2024-05-28 09:55:30.823 | 1 | {"change_image":{"V1":11},"post_image":{"V2":100,"V1":11},"event_type":"upsert","pre_image":{"V1":10,"V2":100}} |
| 2024-05-28 09:55:30.923 | 2 | {"event_type":"delete","pre_image":{"V1":20,"V2":200}}                                                          |
| 2024-05-28 09:55:31.023 | 4 | {"change_image":{"V2":41},"post_image":{"V2":41,"V1":41},"event_type":"upsert","pre_image":{"V1":41,"V2":400}}  |
| 2024-05-28 09:55:31.023 | 5 | {"change_image":{"V2":50},"post_image":{"V2":50,"V1":50},"event_type":"upsert","pre_image":{"V1":50,"V2":500}}  |
+-------------------------+---+-----------------------------------------------------------------------------------------------------------------+
10 rows selected
<<<
SELECT PHOENIX_ROW_TIMESTAMP(), K FROM C ORDER BY PHOENIX_ROW_TIMESTAMP() DESC;
>>>
+-------------------------+---+
| PHOENIX_ROW_TIMESTAMP() | K |
+-------------------------+---+
| 2024-05-28 09:55:31.023 | 5 |
| 2024-05-28 09:55:31.023 | 4 |
| 2024-05-28 09:55:30.923 | 2 |
| 2024-05-28 09:55:30.823 | 1 |
| 2024-05-28 09:55:30.723 | 4 |
| 2024-05-28 09:55:30.523 | 5 |
| 2024-05-28 09:55:30.523 | 4 |
| 2024-05-28 09:55:30.523 | 3 |
| 2024-05-28 09:55:30.523 | 2 |
| 2024-05-28 09:55:30.523 | 1 |
+-------------------------+---+
10 rows selected
<<<
SELECT K, "CDC JSON" FROM C WHERE K = 4;
>>>
+---+-----------------------------------------------------------------------------------------------------------------+
| K |                                                     CDC JSON                                                    |
+---+-----------------------------------------------------------------------------------------------------------------+
| 4 | {"change_image":{"V1":40,"V2":400},"post_image":{"V2":400,"V1":40},"event_type":"upsert","pre_image":{}}        |
| 4 | {"change_image":{"V1":41},"post_image":{"V2":400,"V1":41},"event_type":"upsert","pre_image":{"V1":40,"V2":400}} |
| 4 | {"change_image":{"V2":41},"post_image":{"V2":41,"V1":41},"event_type":"upsert","pre_image":{"V1":41,"V2":400}}  |
+---+-----------------------------------------------------------------------------------------------------------------+
3 rows selected
<<<
