"""What a broker can do, as a transport declares it (and a role needs it): asking for a
feature a transport lacks fails before the run."""

from __future__ import annotations

import enum


class Capability(enum.Flag):
    QUEUES = enum.auto()
    TOPICS = enum.auto()
    PERSISTENT = enum.auto()
    TRANSACTIONS = enum.auto()
    SELECTORS = enum.auto()
    DURABLE = enum.auto()
    REQUEST_REPLY = enum.auto()
    TEMP_QUEUES = enum.auto()
    PROPERTIES = enum.auto()  # message properties (--property) carried to the consumer
    TTL = enum.auto()  # a time to live on each message (--ttl), after which the broker drops it
    PRIORITY = enum.auto()  # a priority on each message (--priority)
