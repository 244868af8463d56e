-- CockroachDB's option errors (reference §2), each statement on its own.
CREATE TABLE t (id INT PRIMARY KEY);
CREATE TABLE fam (a INT PRIMARY KEY, b STRING, c STRING, FAMILY most (a, b), FAMILY only_c (c));
-- error
EXPERIMENTAL CHANGEFEED FOR t WITH foo;
ERROR: invalid option "foo"
-- error
EXPERIMENTAL CHANGEFEED FOR t WITH initial_scan, no_initial_scan;
ERROR: cannot specify both initial_scan and no_initial_scan
-- error
EXPERIMENTAL CHANGEFEED FOR t WITH initial_scan = 'only', resolved;
ERROR: cannot specify both initial_scan='only' and resolved
-- error
EXPERIMENTAL CHANGEFEED FOR t WITH initial_scan_only, end_time = '2000000000000000000';
ERROR: cannot specify both initial_scan='only' and end_time
-- error
EXPERIMENTAL CHANGEFEED FOR t WITH envelope = nope;
ERROR: unknown envelope: nope
-- error
EXPERIMENTAL CHANGEFEED FOR t WITH format = nope;
ERROR: unknown format: nope
-- error
CREATE CHANGEFEED FOR t WITH envelope = 'row', diff;
ERROR: diff is only usable with envelope=wrapped
-- error
EXPERIMENTAL CHANGEFEED FOR t WITH resolved = '-1s';
ERROR: negative durations are not accepted: resolved='-1s'
-- error
EXPERIMENTAL CHANGEFEED FOR t WITH resolved = 'bar';
ERROR: time: invalid duration "bar"
-- error
EXPERIMENTAL CHANGEFEED FOR t WITH format = csv;
ERROR: format=csv is only usable with initial_scan_only
-- error
EXPERIMENTAL CHANGEFEED FOR t WITH on_error = 'not_valid';
ERROR: unknown on_error: not_valid, valid values are 'pause' and 'fail'
-- error
EXPERIMENTAL CHANGEFEED FOR nope;
ERROR: table "nope" does not exist
-- error
EXPERIMENTAL CHANGEFEED FOR fam;
ERROR: CHANGEFEED targeting a table (fam) with multiple column families requires WITH split_column_families and will emit multiple events per row.
