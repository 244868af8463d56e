"""Kafka protocol error codes this endpoint answers with (numbers as Kafka defines them), and
the code of each kind of error (``changefeed.exceptions``) a request can cause."""

from __future__ import annotations

from changefeed.exceptions import (
    ChangefeedError,
    InvalidOption,
    InvalidStatement,
    PermissionDenied,
    UndefinedObject,
    WrongObjectType,
)

NONE = 0
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_FETCH_SIZE = 4
NOT_LEADER_OR_FOLLOWER = 6
MESSAGE_TOO_LARGE = 10
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
INVALID_TOPIC_EXCEPTION = 17
INVALID_REQUIRED_ACKS = 21
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31
INVALID_TIMESTAMP = 32
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_CONFIG = 40
INVALID_REQUEST = 42
UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
POLICY_VIOLATION = 44
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
DUPLICATE_SEQUENCE_NUMBER = 46
INVALID_PRODUCER_EPOCH = 47
SASL_AUTHENTICATION_FAILED = 58
UNKNOWN_PRODUCER_ID = 59
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
UNSUPPORTED_COMPRESSION_TYPE = 76
GROUP_SUBSCRIBED_TO_TOPIC = 86
UNKNOWN_SERVER_ERROR = -1


#: Kafka's code for each kind of error, the first that matches.
_KINDS: tuple[tuple[type[ChangefeedError], int], ...] = (
    (PermissionDenied, TOPIC_AUTHORIZATION_FAILED),  # a user without the right
    (UndefinedObject, UNKNOWN_TOPIC_OR_PARTITION),
    (WrongObjectType, POLICY_VIOLATION),  # a changefeed's topic, which only its changefeed changes
    (InvalidStatement, INVALID_REQUEST),  # a request wrong as a whole: duplicates, unknown kinds
    (InvalidOption, INVALID_CONFIG),  # an unknown config, or a value Kafka would refuse
)


def error_of(exc: ChangefeedError, default: int) -> int:
    """The Kafka error code that answers ``exc``: by its kind, else ``default`` (the request's
    own code for what it cannot do: INVALID_PARTITIONS for CreatePartitions, INVALID_CONFIG for
    a config the topic log cannot honour)."""
    for kind, code in _KINDS:
        if isinstance(exc, kind):
            return code
    return default
