#!/usr/bin/env python3
"""What the harness's receiving callback costs beside a bare one, on one thread: both are fed
the same deliveries (256-byte bodies carrying the harness's fields, built before the clock
starts) as the client library hands them to its callback. Prints CPU ns a message, best of
5; asserts nothing.

    .venv/bin/python contrib/bench/callback.py [--transport nats] [--core] [--role Subscriber]
                                               [--messages 100000]

The harness side is a real Receiver or Subscriber worker of the transport, connected and
subscribed, whose transport's callback hands what came to the worker, which measures it in
place without building a Message, as in a run:

- nats (nats-server on 127.0.0.1:4222): through JetStream, or with --core through core
  NATS, the payload behind the harness's prefix (Consumer.consume_frame) on nats-py's event
  loop; through JetStream both sides acknowledge every message with nats-py's `msg.ack()`.
- amqp (RabbitMQ on 5672): pika's basic_consume callback, auto acknowledgements; the
  harness header's value and the body (Consumer.consume_header).
- stomp (RabbitMQ's STOMP on 61614): stomp.py's listener, auto acknowledgements; the same,
  under the lock that keeps a worker's interval hand-off whole (stomp.py's receiver thread
  is not the worker's).

The bare side counts the message and reads the clock. No thread switches and no socket reads
are in either figure: what a consumer costs in a run, where the library's reading and parsing
come first, is transports.py's to measure.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from harness.modules import transport_class
from harness.modules.interface.message import HEADER, Message, frame, header

from harness.clock import now_ns
from harness.engine.roles import Receiver, Subscriber
from harness.engine.worker import Control, WorkerSetup
from harness.plan.group import group_spec
from harness.plan.run import RunSpec, assign_group_names
from harness.stats.timeline import Timeline

DESTINATION = "bench.callback"
ROUNDS = itertools.count()
CONNECTION = {"nats": {}, "amqp": {},
              "stomp": {"port": 61614, "flavour": "rabbitmq", "vhost": "/"}}


def consumer(transport: str, role: str, jetstream: bool) -> Receiver | Subscriber:
    group = group_spec({"module": f"{transport}.{role}", "destination": DESTINATION,
                        **({"jetstream": True} if jetstream else {}),
                        **CONNECTION[transport]})
    assign_group_names([group])
    run = RunSpec(groups=[group], interval=1.0)
    start = now_ns()
    control = Control(Timeline.of(run, start), 10**9)
    setup = WorkerSetup(group, 0, 0, 0, run.node, control, deque(),
                        transport_class(transport)(group.settings(run.node, 0, 0, 0)),
                        bytes(256), True, 10**9, run_id="bench")
    worker = {"Receiver": Receiver, "Subscriber": Subscriber}[role](setup)
    worker.prepare()
    worker.move_to(start)
    worker.transport.deliver(*worker.sinks())
    return worker


def sent(worker: Receiver | Subscriber, n: int) -> list[Message]:
    """n messages of a new producer (each round's numbers start at 0 again)."""
    producer, now = worker.run_prefix + f"bench-{next(ROUNDS)}-0", time.time_ns()
    return [Message(bytes(256), producer, i, now, now) for i in range(n)]


# -- each transport: its deliveries as the library makes them, and (bare, harness) callbacks
def nats(worker: Any, n: int, counted: list[int]) -> tuple[list[Any], Callable, Callable]:
    from nats.aio.msg import Msg
    transport = worker.transport
    jetstream = transport.js is not None
    # Through JetStream first deliveries all, whose acknowledgements go to a subject nobody
    # consumes.
    deliveries = [Msg(_client=transport.nc, subject=DESTINATION, data=frame(m),
                      reply=f"$JS.ACK.bench.callback.1.{m.seq + 1}.{m.seq + 1}.{m.ts}.0"
                      if jetstream else "") for m in sent(worker, n)]

    async def bare(msg: Msg) -> None:
        counted[0] += 1
        time.monotonic()
        if jetstream:
            await msg.ack()

    return deliveries, bare, transport._on_message if jetstream else transport._on_measured


def amqp(worker: Any, n: int, counted: list[int]) -> tuple[list[Any], Callable, Callable]:
    import pika.spec
    deliveries = [(None, pika.spec.Basic.Deliver(delivery_tag=m.seq + 1, redelivered=False),
                   pika.spec.BasicProperties(headers={HEADER: header(m)}), m.body)
                  for m in sent(worker, n)]

    def bare(channel: Any, method: Any, properties: Any, body: bytes) -> None:
        counted[0] += 1
        time.monotonic()

    return deliveries, bare, worker.transport._on_message


def stomp(worker: Any, n: int, counted: list[int]) -> tuple[list[Any], Callable, Callable]:
    import stomp.utils
    from harness.modules.stomp import _Listener
    deliveries = [(stomp.utils.Frame("MESSAGE", {HEADER: header(m), "subscription": "1",
                                                 "destination": f"/topic/{DESTINATION}",
                                                 "message-id": str(m.seq)}, m.body),)
                  for m in sent(worker, n)]

    def bare(frame: Any) -> None:
        counted[0] += 1
        time.monotonic()

    return deliveries, bare, _Listener(worker.transport).on_message


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--transport", choices=("nats", "amqp", "stomp"), default="nats")
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--role", choices=("Receiver", "Subscriber"), default="Subscriber")
    parser.add_argument("--core", action="store_true", help="nats: core NATS, not JetStream")
    args = parser.parse_args()
    jetstream = args.transport == "nats" and not args.core
    worker = consumer(args.transport, args.role, jetstream)
    transport = worker.transport
    counted = [0]
    make = {"nats": nats, "amqp": amqp, "stomp": stomp}[args.transport]

    async def feed(callback: Callable, deliveries: list[Any]) -> None:
        for msg in deliveries:
            await callback(msg)
        await transport.nc.flush()

    def measure(callback: Callable, deliveries: list[Any]) -> float:
        gc.collect()
        before = time.process_time()
        if args.transport == "nats":
            transport.loop.run_until_complete(feed(callback, deliveries))
        else:
            for delivery in deliveries:
                callback(*delivery)
        worker.settle()  # the last batch measured too, as the worker's loop would
        return (time.process_time() - before) / args.messages * 1e9

    gc.disable()
    runs: dict[str, list[float]] = {"bare": [], "harness": []}
    try:
        for _ in range(5):
            # Deliveries of their own for each side: a JetStream message is acknowledged once.
            deliveries, bare, _ = make(worker, args.messages, counted)
            runs["bare"].append(measure(bare, deliveries))
            deliveries, _, harness = make(worker, args.messages, counted)
            runs["harness"].append(measure(harness, deliveries))
    finally:
        gc.enable()
        worker.done = True
        if jetstream:
            from harness.modules.nats import stream_name
            transport.loop.run_until_complete(
                transport.js.delete_stream(stream_name(DESTINATION)))
        transport.close()
    bare_ns, harness_ns = min(runs["bare"]), min(runs["harness"])
    kind = {"nats": "core NATS" if args.core else "JetStream", "amqp": "AMQP 0-9-1 (pika)",
            "stomp": "STOMP (stomp.py)"}[args.transport]
    print(f"{kind} {args.transport}.{args.role} callback, {args.messages:,} messages, CPU ns a "
          f"message on one thread, best of 5")
    print(f"bare {bare_ns:6.0f}  harness {harness_ns:6.0f}  harness adds "
          f"{harness_ns - bare_ns:5.0f}")


if __name__ == "__main__":
    main()
