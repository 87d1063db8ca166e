"""Kafka through confluent-kafka (librdkafka, the client most Kafka users run, with the lowest
cost a message from Python).

- Sender / Receiver: a topic read by one consumer group (--consumer-group, default
  harness.<topic>): the receivers compete, each partition read by one of them. A group with no
  committed offset starts at --offset-reset (earliest: what was sent before it joined is
  read, as a queue keeps it).
- Publisher / Subscriber: each Subscriber reads every partition itself from the topic's end
  when it subscribed (assigned by hand, no group: a group of one would wait for its first
  rebalance), so each sees every message published after it subscribed.
- Requestor / Responder: requests on a topic read by the Responders' group; each Requestor
  its replies on a topic of its own (one partition, deleted when it closes), named in the
  request's frame with the correlation id.

A send is produce() with a delivery report: the time from the send to the report is the
confirm metric (acks 1 or all; with acks 0 the report says only that the client wrote it, so
no confirm is timed). A report with an error the broker gave is a failed send with its reason;
one the client gave because the outcome is unknown (the message timed out, or was in flight
when the connection closed) is in doubt. librdkafka reconnects by itself: its "all brokers
down" starts an outage, the next delivery or fetch ends it. Producers serve their reports
between sends and while they wait (ClientLoop). Topics the harness sends to or reads are
created when missing, with --partitions and --replication.
"""

from harness.modules.kafka.options import KafkaOptions, client_config
from harness.modules.kafka.transport import KafkaTransport

__all__ = ["KafkaOptions", "KafkaTransport", "client_config"]
