"""The API versions this endpoint advertises in ApiVersions (all non-flexible encodings).

Clients negotiate the highest version both sides support; librdkafka, kafka-python and aiokafka
all speak these. The first flexible version of each API (compact strings, tagged fields) is the
one after each maximum here.
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
SASL_HANDSHAKE = 17
API_VERSIONS = 18
CREATE_TOPICS = 19
DELETE_TOPICS = 20
INIT_PRODUCER_ID = 22
DESCRIBE_CONFIGS = 32
SASL_AUTHENTICATE = 36

#: api key -> (name, min version, max version)
SUPPORTED: dict[int, tuple[str, int, int]] = {
    PRODUCE: ("Produce", 3, 8),
    FETCH: ("Fetch", 4, 11),
    LIST_OFFSETS: ("ListOffsets", 1, 5),
    METADATA: ("Metadata", 0, 8),
    OFFSET_COMMIT: ("OffsetCommit", 2, 7),
    OFFSET_FETCH: ("OffsetFetch", 1, 5),
    FIND_COORDINATOR: ("FindCoordinator", 0, 2),
    JOIN_GROUP: ("JoinGroup", 0, 5),
    HEARTBEAT: ("Heartbeat", 0, 3),
    LEAVE_GROUP: ("LeaveGroup", 0, 2),
    SYNC_GROUP: ("SyncGroup", 0, 3),
    SASL_HANDSHAKE: ("SaslHandshake", 0, 1),
    API_VERSIONS: ("ApiVersions", 0, 2),
    CREATE_TOPICS: ("CreateTopics", 0, 4),
    DELETE_TOPICS: ("DeleteTopics", 0, 3),
    INIT_PRODUCER_ID: ("InitProducerId", 0, 1),
    DESCRIBE_CONFIGS: ("DescribeConfigs", 0, 2),
    SASL_AUTHENTICATE: ("SaslAuthenticate", 0, 1),
}
