#!/usr/bin/env python3
"""What the harness's NATS subscription callback costs beside a bare one, on one thread:
both are fed the same messages (256-byte bodies behind the harness's prefix, built before
the clock starts) on one nats-py connection's event loop; through JetStream each acknowledges
every message with nats-py's `msg.ack()`. Prints CPU ns a message, best of 5; asserts nothing.

    .venv/bin/python contrib/bench/callback.py [--messages 100000] [--role Subscriber] [--core]

The harness side is a real nats.Receiver or nats.Subscriber worker subscribed through
JetStream, or with --core through core NATS (nats-server on 127.0.0.1:4222), whose
transport's callback hands the payload to the worker, which reads the prefix and measures it
in place (Consumer.consume_frame, as in a run); the bare
side counts the message and reads the clock. No thread switches and no socket reads are in
either figure: what a consumer costs in a run, where nats-py's reading and parsing come
first, is transports.py's to measure.
"""

from __future__ import annotations

import argparse
import gc
import time
from collections import deque

from harness.transports.message import Message, frame
from harness.transports.nats import NatsTransport, stream_name
from nats.aio.msg import Msg

from harness.clock import now_ns
from harness.engine.roles import Receiver, Subscriber
from harness.engine.worker import Control, WorkerSetup
from harness.spec.group import group_spec
from harness.spec.run import RunSpec, assign_group_names
from harness.stats.timeline import Timeline

SUBJECT = "bench.callback"


def consumer(role: str, jetstream: bool) -> Receiver | Subscriber:
    group = group_spec({"module": f"nats.{role}", "destination": SUBJECT,
                        "jetstream": jetstream})
    assign_group_names([group])
    run = RunSpec(groups=[group], interval=1.0)
    start = now_ns()
    control = Control(Timeline.of(run, start), 10**9)
    transport = NatsTransport(group.settings(run.node, 0, 0, 0))
    setup = WorkerSetup(group, 0, 0, 0, run.node, control, deque(), transport, bytes(256),
                        True, 10**9, run_id="bench")
    worker = {"Receiver": Receiver, "Subscriber": Subscriber}[role](setup)
    worker.prepare()
    worker.move_to(start)
    transport.deliver(*worker.sinks())
    return worker


def messages(worker: Receiver | Subscriber, n: int) -> list[Msg]:
    """Deliveries as nats-py makes them; through JetStream first deliveries all, whose
    acknowledgements go to a subject nobody consumes."""
    producer, now = worker.run_prefix + "bench-0-0", time.time_ns()
    nc = worker.transport.nc
    jetstream = worker.transport.js is not None
    return [Msg(_client=nc, subject=SUBJECT, data=frame(Message(bytes(256), producer, i, now,
                                                                now)),
                reply=f"$JS.ACK.bench.callback.1.{i + 1}.{i + 1}.{now}.0" if jetstream
                else "") for i in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--role", choices=("Receiver", "Subscriber"), default="Subscriber")
    parser.add_argument("--core", action="store_true", help="core NATS, not JetStream")
    args = parser.parse_args()
    worker = consumer(args.role, not args.core)
    transport = worker.transport
    counted = [0]

    async def bare_core(msg: Msg) -> None:
        counted[0] += 1
        time.monotonic()

    async def bare_jetstream(msg: Msg) -> None:
        counted[0] += 1
        time.monotonic()
        await msg.ack()

    bare, harness = (bare_core, transport._on_measured) if args.core else \
        (bare_jetstream, transport._on_message)

    async def feed(callback, batch: list[Msg]) -> None:
        for msg in batch:
            await callback(msg)
        await transport.nc.flush()

    def measure(callback) -> float:
        batch = messages(worker, args.messages)
        gc.collect()
        before = time.process_time()
        transport.loop.run_until_complete(feed(callback, batch))
        return (time.process_time() - before) / args.messages * 1e9

    gc.disable()
    runs: dict[str, list[float]] = {"bare": [], "harness": []}
    try:
        for _ in range(5):
            runs["bare"].append(measure(bare))
            if worker.expected is not None:
                worker.expected.clear()  # every run's numbers start at 0 again
            runs["harness"].append(measure(harness))
    finally:
        gc.enable()
        worker.done = True
        if not args.core:
            transport.loop.run_until_complete(transport.js.delete_stream(stream_name(SUBJECT)))
        transport.close()
    bare_ns, harness_ns = min(runs["bare"]), min(runs["harness"])
    kind = "core NATS" if args.core else "JetStream"
    print(f"{kind} nats.{args.role} callback, {args.messages:,} messages, CPU ns a message "
          f"on one thread, best of 5")
    print(f"bare {bare_ns:6.0f}  harness {harness_ns:6.0f}  harness adds "
          f"{harness_ns - bare_ns:5.0f}")


if __name__ == "__main__":
    main()
