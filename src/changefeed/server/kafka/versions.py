"""The API versions this endpoint advertises in ApiVersions.

Clients negotiate the highest version both sides support; librdkafka, kafka-python, aiokafka and
Kafka's Java client all speak these. Most APIs are served in their non-flexible versions only
(the first flexible version is the one after each maximum here); some are served up to their
flexible versions too (:data:`FLEXIBLE`): the group admin APIs, because clients only report a
group's state from ListGroups v4 on; ListOffsets, whose special timestamps past earliest and
latest (:data:`LIST_OFFSETS_SPECS`) come in flexible versions only; DeleteTopics, whose error
message (v5) says why a changefeed's topic stays; and the topic admin APIs that Kafka's 4.x
tools send (CreatePartitions, AlterConfigs, IncrementalAlterConfigs).
"""

from __future__ import annotations

PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
OFFSET_COMMIT = 8
OFFSET_FETCH = 9
FIND_COORDINATOR = 10
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
SASL_HANDSHAKE = 17
API_VERSIONS = 18
CREATE_TOPICS = 19
DELETE_TOPICS = 20
INIT_PRODUCER_ID = 22
DESCRIBE_CONFIGS = 32
ALTER_CONFIGS = 33
SASL_AUTHENTICATE = 36
CREATE_PARTITIONS = 37
DELETE_GROUPS = 42
INCREMENTAL_ALTER_CONFIGS = 44
OFFSET_DELETE = 47

#: api key -> (name, min version, max version)
SUPPORTED: dict[int, tuple[str, int, int]] = {
    PRODUCE: ("Produce", 3, 8),
    FETCH: ("Fetch", 4, 11),
    LIST_OFFSETS: ("ListOffsets", 1, 11),
    METADATA: ("Metadata", 0, 8),
    OFFSET_COMMIT: ("OffsetCommit", 2, 7),
    OFFSET_FETCH: ("OffsetFetch", 1, 5),
    FIND_COORDINATOR: ("FindCoordinator", 0, 2),
    JOIN_GROUP: ("JoinGroup", 0, 5),
    HEARTBEAT: ("Heartbeat", 0, 3),
    LEAVE_GROUP: ("LeaveGroup", 0, 2),
    SYNC_GROUP: ("SyncGroup", 0, 3),
    DESCRIBE_GROUPS: ("DescribeGroups", 0, 5),
    LIST_GROUPS: ("ListGroups", 0, 5),
    SASL_HANDSHAKE: ("SaslHandshake", 0, 1),
    API_VERSIONS: ("ApiVersions", 0, 2),
    CREATE_TOPICS: ("CreateTopics", 0, 4),
    DELETE_TOPICS: ("DeleteTopics", 0, 5),
    INIT_PRODUCER_ID: ("InitProducerId", 0, 1),
    DESCRIBE_CONFIGS: ("DescribeConfigs", 0, 2),
    ALTER_CONFIGS: ("AlterConfigs", 0, 2),
    SASL_AUTHENTICATE: ("SaslAuthenticate", 0, 1),
    CREATE_PARTITIONS: ("CreatePartitions", 0, 3),
    DELETE_GROUPS: ("DeleteGroups", 0, 2),
    INCREMENTAL_ALTER_CONFIGS: ("IncrementalAlterConfigs", 0, 1),
    OFFSET_DELETE: ("OffsetDelete", 0, 0),
}

#: api key -> its first flexible version (request header v2, response header v1, compact
#: strings and arrays, tagged fields), for the APIs served in flexible versions.
FLEXIBLE: dict[int, int] = {
    LIST_OFFSETS: 6,
    DESCRIBE_GROUPS: 5,
    LIST_GROUPS: 3,
    DELETE_TOPICS: 4,
    ALTER_CONFIGS: 2,
    CREATE_PARTITIONS: 2,
    DELETE_GROUPS: 2,
    INCREMENTAL_ALTER_CONFIGS: 1,
}

# ListOffsets' special timestamps (Kafka's ListOffsetsRequest constants).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3  #: KIP-734
EARLIEST_LOCAL_TIMESTAMP = -4  #: KIP-405
LATEST_TIERED_TIMESTAMP = -5  #: KIP-1005
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6  #: KIP-1023

#: ListOffsets special timestamp -> the first version that may carry it. As Kafka's broker does,
#: one in an older version, and any other negative timestamp, is UNSUPPORTED_VERSION for its
#: partition.
LIST_OFFSETS_SPECS: dict[int, int] = {
    LATEST_TIMESTAMP: 1,
    EARLIEST_TIMESTAMP: 1,
    MAX_TIMESTAMP: 7,
    EARLIEST_LOCAL_TIMESTAMP: 8,
    LATEST_TIERED_TIMESTAMP: 9,
    EARLIEST_PENDING_UPLOAD_TIMESTAMP: 11,
}
