"""AMQP 0-9-1 (RabbitMQ's own protocol) through pika.

Each worker thread drives its own pika SelectConnection: the thread itself turns pika's I/O
loop (IOLoop.poll and process_timeouts, pika's extension API for an external loop) whenever it
sends, receives or waits for the broker, so a message crosses no thread and no queue between
the socket and the measurement. pika's BlockingConnection does the same turning, but writes
every publish out on its own: one process sent about 21,000 msg/s through it and 49,000 msg/s
writing every write_every publishes at once (256-byte messages, RabbitMQ on the same 2 cores).

Queues go through the default exchange unless --exchange names one; topics through a topic
exchange (amq.topic unless --exchange names one), each Subscriber with a queue of its own:
exclusive and auto-deleted, or named after --durable-name and durable for a durable
subscription. The harness's fields travel in one header, `harness: <seq>,<intended ns>,<sent
ns>,<crc or ->,<producer id>`; --property values are headers too, so a headers exchange routes
on them (AMQP 0-9-1 has no selectors: that is its way to filter).

Publisher confirms (--confirm N) keep at most N sends awaiting the broker's confirmation; each
confirmation's time from the send is the `confirm` metric, a negative one is a failed send, and
sends still unconfirmed when the connection is lost count as failed (the broker may or may not
have them). Without confirms a send counts once it is written to the socket.
"""

from harness.modules.amqp.options import AmqpOptions
from harness.modules.amqp.transport import AmqpTransport

__all__ = ["AmqpOptions", "AmqpTransport"]
