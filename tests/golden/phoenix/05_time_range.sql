-- The design's query: SELECT * FROM <cdc> WHERE PHOENIX_ROW_TIMESTAMP() >= TO_DATE(..) AND
-- PHOENIX_ROW_TIMESTAMP() < TO_DATE(..) (TO_DATE in GMT, Phoenix's default format), ranges
-- inclusive/exclusive as written, extra predicates on key columns, LIMIT.
CREATE TABLE T (k INTEGER PRIMARY KEY, v INTEGER) IMMUTABLE_ROWS=false;
CREATE CDC C ON T INCLUDE (POST);
UPSERT INTO T VALUES (1, 1);
UPSERT INTO T VALUES (2, 2);
UPSERT INTO T VALUES (1, 3);
UPSERT INTO T VALUES (3, 4);
DELETE FROM T WHERE k = 2;
SELECT * FROM C WHERE PHOENIX_ROW_TIMESTAMP() >= TO_DATE('2024-05-28 09:55:30.423') AND PHOENIX_ROW_TIMESTAMP() < TO_DATE('2024-05-28 09:55:30.723');
>>>
+-------------------------+---+----------------------------------------------+
| PHOENIX_ROW_TIMESTAMP() | K |                   CDC JSON                   |
+-------------------------+---+----------------------------------------------+
| 2024-05-28 09:55:30.423 | 1 | {"post_image":{"V":1},"event_type":"upsert"} |
| 2024-05-28 09:55:30.523 | 2 | {"post_image":{"V":2},"event_type":"upsert"} |
| 2024-05-28 09:55:30.623 | 1 | {"post_image":{"V":3},"event_type":"upsert"} |
+-------------------------+---+----------------------------------------------+
3 rows selected
<<<
SELECT * FROM C WHERE PHOENIX_ROW_TIMESTAMP() > TO_DATE('2024-05-28 09:55:30.423') AND PHOENIX_ROW_TIMESTAMP() <= TO_DATE('2024-05-28T09:55:30.723Z');
>>>
+-------------------------+---+----------------------------------------------+
| PHOENIX_ROW_TIMESTAMP() | K |                   CDC JSON                   |
+-------------------------+---+----------------------------------------------+
| 2024-05-28 09:55:30.523 | 2 | {"post_image":{"V":2},"event_type":"upsert"} |
| 2024-05-28 09:55:30.623 | 1 | {"post_image":{"V":3},"event_type":"upsert"} |
| 2024-05-28 09:55:30.723 | 3 | {"post_image":{"V":4},"event_type":"upsert"} |
+-------------------------+---+----------------------------------------------+
3 rows selected
<<<
SELECT * FROM C WHERE PHOENIX_ROW_TIMESTAMP() >= TO_DATE('2024-05-28 11:55:30.523', 'yyyy-MM-dd HH:mm:ss.SSS', 'Europe/Berlin') AND K = 1;
>>>
+-------------------------+---+----------------------------------------------+
| PHOENIX_ROW_TIMESTAMP() | K |                   CDC JSON                   |
+-------------------------+---+----------------------------------------------+
| 2024-05-28 09:55:30.623 | 1 | {"post_image":{"V":3},"event_type":"upsert"} |
+-------------------------+---+----------------------------------------------+
1 row selected
<<<
SELECT * FROM C WHERE PHOENIX_ROW_TIMESTAMP() BETWEEN TO_DATE('2024-05-28') AND TO_DATE('2024-05-29') LIMIT 2;
>>>
+-------------------------+---+----------------------------------------------+
| PHOENIX_ROW_TIMESTAMP() | K |                   CDC JSON                   |
+-------------------------+---+----------------------------------------------+
| 2024-05-28 09:55:30.423 | 1 | {"post_image":{"V":1},"event_type":"upsert"} |
| 2024-05-28 09:55:30.523 | 2 | {"post_image":{"V":2},"event_type":"upsert"} |
+-------------------------+---+----------------------------------------------+
2 rows selected
<<<
SELECT * FROM C WHERE PHOENIX_ROW_TIMESTAMP() >= TO_DATE('2024-05-28 09:55:31') AND PHOENIX_ROW_TIMESTAMP() < TO_DATE('2024-05-28 09:55:30');
>>>
+-------------------------+---+----------+
| PHOENIX_ROW_TIMESTAMP() | K | CDC JSON |
+-------------------------+---+----------+
+-------------------------+---+----------+
0 rows selected
<<<
SELECT COUNT(*) FROM C WHERE PHOENIX_ROW_TIMESTAMP() < TO_DATE('2024-05-28 09:55:30.823');
>>>
+----------+
| COUNT(*) |
+----------+
| 4        |
+----------+
1 row selected
<<<
