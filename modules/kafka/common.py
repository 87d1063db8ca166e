"""What the Kafka transport's parts share: librdkafka's timeouts and statistics interval, its
logger, the lag's one definition and the errors in words."""

from __future__ import annotations

import logging

from confluent_kafka import KafkaError, KafkaException

DEFAULT_PORT = 9092
BATCH = 500  # messages a consume() takes at most
POLL_EVERY = 64  # sends between serving delivery reports
ADMIN_TIMEOUT_S = 15.0
CONNECT_TIMEOUT_S = 5.0
ASSIGN_TIMEOUT_S = 15.0
CLOSE_TIMEOUT_S = 10.0
# A member the broker hears nothing from for this long leaves its group (Kafka's default is
# 45 s: a receiver killed mid-run would hold its partitions that long).
SESSION_MS = 6000
METADATA_REFRESH_MS = 1000
# How often librdkafka reports its statistics (per-partition rates and lag): the worker reads
# the latest at each interval boundary.
STATS_MS = 1000
# librdkafka's errors that say the outcome of a send is unknown, not that the broker refused
# it: the send is in doubt.
UNKNOWN = {KafkaError._MSG_TIMED_OUT, KafkaError._TIMED_OUT, KafkaError._TRANSPORT,
           KafkaError._PURGE_INFLIGHT, KafkaError.REQUEST_TIMED_OUT,
           KafkaError.NETWORK_EXCEPTION, KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND}
DOWN = {KafkaError._ALL_BROKERS_DOWN, KafkaError._TRANSPORT}


# librdkafka writes its log to stderr unless given a logger: every failed connection attempt
# would be a line in the run's output. What matters of it reaches error_cb (an outage, or the
# reason a start failed) and is said once.
LOG = logging.getLogger("harness.modules.kafka")
LOG.addHandler(logging.NullHandler())
LOG.propagate = False


def _lag(end: int, position: int, committed: int) -> int:
    """Messages on a partition the consumer has not taken yet: its end offset (the last
    stable one under read_committed) minus the consumer's position, or minus its committed
    offset before it has taken any; -1 where neither is known. Not minus the committed
    offset throughout: under auto commit that trails the position by up to five seconds,
    and would show a lag where nothing waits."""
    done = position if position >= 0 else committed
    return max(end - done, 0) if end >= 0 and done >= 0 else -1


def _reason(exc: BaseException) -> str:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0].str()
    return str(exc) or type(exc).__name__

