"""NATS through nats-py: core NATS (subjects, queue groups, request/reply on inbox subjects)
and JetStream (--jetstream: streams, publish acknowledgements, push and pull consumers).

nats-py is asyncio. Each transport has an event loop of its own, and the worker thread that
owns the transport turns it, as the amqp transport turns pika's: a send is queued, and every
write_every sends, before the producer sleeps and before a Requestor waits, one turn of the
loop publishes what is queued (nats-py's publish, back to back) and lets nats-py's flusher
write it in one go; a consumer's receive turns the loop, whose subscription callback takes
each message in on this same thread, with no hand-off. A turn that publishes wakes one
long-lived task and runs the loop until that task has done the turn's work (_turn), which
costs more than a bare publish loop's pass (contrib/bench/loop_turn.py measures it). So the
first core NATS sends since a write (a paced producer's) are not queued: nats-py's publish
coroutine is driven to its end on this thread outside the loop (in send_frame), and the
write is one pass of the loop for nats-py's flusher. The thread enters the loop through
TurnedLoop.turn() (harness.modules.kit.turned), not run_forever(), which is cheaper with the
caches cold. A turn that only waits (a consumer's receive, a JetStream producer waiting for
its next send with acknowledgements outstanding) runs the loop until its timer, or what it
waits for, stops it, with no task: each acknowledgement is timed as it arrives without the
producer's thread leaving the loop. nats-py reconnects by itself while the loop turns; its
disconnect and reconnect callbacks count the outage. What these choices save is in
contrib/bench/RESULTS.md.

The harness's fields travel in front of the body (harness.modules.interface.message.frame): nats-py
parses headers in Python, which would cost a consumer more than the rest of the message;
--property values are NATS headers.

Core NATS keeps nothing: a subscriber the server finds too slow is disconnected (an error
`disconnected` and an outage) and what it missed is gone; nats-py connects and subscribes
again, and the sequence numbers show exactly which messages (lost = sent - received).

JetStream: a stream (--stream, default `harness-` and the subject) is created if missing, with
--storage and --retention. Every publish is acknowledged by the server; --inflight keeps that
many acknowledgements outstanding, each timed as the `confirm` metric; a negative one is a
refused send, a missing one (after ACK_TIMEOUT_S, or the connection lost) in doubt. Receivers
share one durable consumer (push with a deliver group, or pull with --pull-batch N), each
Subscriber has its own (ephemeral, or durable with --durable-name); --prefetch is max-ack-
pending; messages are acknowledged one by one, and a message the server delivers again (another
consumer held it past --ack-wait, or this one's acknowledgement was lost) counts as
`redelivered`, and as a duplicate where this consumer had it already.
"""

from harness.modules.nats.common import _Resumed
from harness.modules.nats.options import NatsOptions, stream_name
from harness.modules.nats.transport import NatsTransport

__all__ = ["NatsOptions", "NatsTransport", "_Resumed", "stream_name"]
