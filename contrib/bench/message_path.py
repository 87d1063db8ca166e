#!/usr/bin/env python3
"""What the harness adds to each message on its producer and consumer paths, measured on one
thread: no thread switches, no interpreter-lock hand-offs, so the figures repeat to a few
percent even on a busy machine. Prints figures; asserts nothing.

    .venv/bin/python contrib/bench/message_path.py [--messages 300000] [--rate 0]
    taskset -c 1 .venv/bin/python contrib/bench/message_path.py --paced-rate 4000

With --paced-rate N, the producers only, each sending N a second and sleeping between sends,
three runs alternated: CPU per message (best of 3), and for each run the wall time from each
wake-up to the next sleep (the median of its sends): the code a send runs with the caches
cold, apart from what the sleep and the wake-up cost the kernel, which the CPU figure holds
too. The runs show how far one figure moves on the machine.

The producer side runs a real loopback.Sender worker's loop (pacing checks, a Message with
the harness fields, the send, service and delay recorded, counters) for N messages into a
loopback queue; the consumer side then feeds each queued message to a real Receiver's
consume() (latency and service recorded, sequence checked). The bare side makes the same
transport calls with nothing else. CPU time per message, best of 5; garbage collection off
on both sides, so that what is compared is the code on the path (the run's own handling of
collections is measured by a run, not here).

The floor line is a lower bound for any harness that measures every message in CPython:
the least the measurement definitions ask of a message, inline in one loop with every name
local (no role, no transport, no Message object, one producer, no counters). A producer reads
the clock, stamps its sequence number and send time into the message (the prefix of the
transports without headers) and records the send's service time after reading the clock
again; a consumer reads the three fields back, reads the clock, records latency and service
time and checks the sequence number. What the floor adds over a loop that passes a ready-made
payload along is what no such harness can shed; set beside a client library's own cost per
message (the bare loops of transports.py), it says where a target of 0.90 of the bare loop's
efficiency (a tenth of the library's cost, at most, for the harness) cannot be met.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from array import array
from collections import deque

from bare import produce  # this directory's bare.py
from harness.modules.interface.message import MAGIC, PREFIX, Message
from harness.modules.loopback import LoopbackTransport, reset_broker
from loopback import bare_pair  # this directory's loopback.py

from harness.clock import EPOCH_OFFSET_NS, now_ns
from harness.engine.roles import Receiver, Sender
from harness.engine.worker import Control, WorkerSetup
from harness.plan.group import group_spec
from harness.plan.run import RunSpec, assign_group_names
from harness.stats.timeline import Timeline

BODY = bytes(256)


class Waits:
    """A paced producer's sleeps, timed: the wall time from each wake-up to the next sleep is
    the code a send runs with the caches cold."""

    def __init__(self) -> None:
        self.woke = 0
        self.between: list[int] = []

    def sleep(self, seconds: float) -> None:
        if self.woke:
            self.between.append(time.perf_counter_ns() - self.woke)
        time.sleep(seconds)
        self.woke = time.perf_counter_ns()

    def median_us(self) -> float:
        return statistics.median(self.between) / 1000 if self.between else 0.0


def harness_paths(n: int, rate: float, waits: Waits | None = None) -> tuple[float, float]:
    """(producer, consumer) CPU ns per message of the harness's own loops; waits, if given,
    times the producer's sleeps."""
    reset_broker()
    sender = {"module": "loopback.Sender", "destination": "Q", "messages": n}
    if rate:
        sender["rate"] = rate
    groups = [group_spec(sender), group_spec({"module": "loopback.Receiver",
                                              "destination": "Q"})]
    assign_group_names(groups)
    run = RunSpec(groups=groups, interval=1.0)
    start = now_ns()
    control = Control(Timeline.of(run, start), 10**9)
    workers = []
    for g, (group, role) in enumerate(zip(groups, (Sender, Receiver), strict=True)):
        transport = LoopbackTransport(group.settings(run.node, 0, 0, 0))
        if waits is not None:
            transport.idle = waits.sleep  # type: ignore[method-assign]
        setup = WorkerSetup(group, g, 0, 0, run.node, control, deque(), transport, BODY, True,
                            10**9, run_id="bench")
        worker = role(setup)
        worker.prepare()
        worker.move_to(start)
        if worker.schedule is not None:
            worker.schedule.start = start
        workers.append(worker)
    producer, consumer = workers
    before = time.process_time()
    producer.work()
    produced = time.process_time()
    receive, consume = consumer.transport.receive, consumer.consume
    while (message := receive(0)) is not None:
        consume(message, now_ns())
    consumed = time.process_time()
    return (produced - before) / n * 1e9, (consumed - produced) / n * 1e9


def bare_paths(n: int) -> tuple[float, float]:
    """(producer, consumer) CPU ns per message of the same transport calls alone."""
    sender, receiver, destination = bare_pair()
    send, receive = sender.send, receiver.receive
    before = time.process_time()
    for seq in range(n):
        send(destination, Message(BODY, "bench", seq, 0, 0))
    produced = time.process_time()
    while receive(0) is not None:
        pass
    consumed = time.process_time()
    return (produced - before) / n * 1e9, (consumed - produced) / n * 1e9


def floor_paths(n: int) -> tuple[float, float]:
    """(producer, consumer) CPU ns per message that the least measurement adds to passing a
    ready-made payload along."""
    pack, unpack_from, clock, offset = PREFIX.pack, PREFIX.unpack_from, now_ns, EPOCH_OFFSET_NS
    producer = b"run:sender-0-0"
    size, tail = len(producer), producer + BODY
    ready = pack(MAGIC, 1, 0, 0, 0, 0, 0, size, 0, 0) + tail
    payloads: list[bytes] = []
    keep = payloads.append
    before = time.process_time()
    for _ in range(n):
        keep(ready)
    passed = time.process_time() - before
    payloads.clear()
    service = array("q")
    record = service.append
    before = time.process_time()
    for seq in range(n):
        now = clock()
        keep(pack(MAGIC, 1, 0, seq, now + offset, now + offset, 0, size, 0, 0) + tail)
        record((clock() - now) // 1000)
    stamped = time.process_time() - before
    before = time.process_time()
    for _ in payloads:
        pass
    taken = time.process_time() - before
    latencies, services = array("q"), array("q")
    latency, service_time = latencies.append, services.append
    expected = gaps = 0
    before = time.process_time()
    for payload in payloads:
        _, _, _, seq, intended, sent, _, _, _, _ = unpack_from(payload)
        now = clock() + offset
        latency((now - intended) // 1000)
        service_time((now - sent) // 1000)
        if seq == expected:
            expected = seq + 1
        else:
            gaps += 1
    measured = time.process_time() - before
    return (stamped - passed) / n * 1e9, (measured - taken) / n * 1e9


def bare_paced(rate: float, seconds: float, waits: Waits) -> float:
    """Producer CPU ns per message of the same send alone, paced by the bare loops' own
    pacing (transports.py's produce: each send when due, a sleep until then)."""
    sender, _, destination = bare_pair()
    start = time.monotonic()
    before = time.process_time()
    sent = produce(lambda: sender.send(destination, Message(BODY, "bench", 0, 0, 0)),
                   lambda: None, start, start + seconds, rate, waits.sleep)
    return (time.process_time() - before) / sent * 1e9


def paced(rate: float, seconds: float = 4.0) -> None:
    """What the harness's producer adds to a send that comes after a sleep: at a few thousand
    sends a second each send is a wake-up of its own, and the caches are cold."""
    n = int(rate * seconds)
    bares, harnesses = [], []
    for _ in range(3):  # alternated
        waits = Waits()
        bares.append((bare_paced(rate, seconds, waits), waits.median_us()))
        waits = Waits()
        harnesses.append((harness_paths(n, rate, waits)[0] / 1000, waits.median_us()))
    bare = min(b[0] for b in bares) / 1000
    harness = min(h[0] for h in harnesses)
    print(f"{n:,} messages, 256-byte bodies, a send every {1e6 / rate:,.0f} us, the thread "
          "sleeping between sends; producer CPU us per message on one thread, best of 3")
    print(f"producer : bare {bare:6.1f}  harness {harness:6.1f}  harness adds "
          f"{harness - bare:5.1f}")
    between = [h[1] - b[1] for b, h in zip(bares, harnesses, strict=True)]
    print("from a wake-up to the next sleep, median wall us, each run: bare "
          + ", ".join(f"{b[1]:.1f}" for b in bares) + "; harness "
          + ", ".join(f"{h[1]:.1f}" for h in harnesses) + "; harness adds "
          + ", ".join(f"{d:.1f}" for d in between))


def best(measure) -> tuple[float, float]:
    runs = [measure() for _ in range(5)]
    return min(r[0] for r in runs), min(r[1] for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--rate", type=float, default=0.0,
                        help="the harness sender's schedule in msg/s (0: unthrottled); set "
                             "it above what the loop reaches, so that every send is due")
    parser.add_argument("--paced-rate", type=float, default=0.0, metavar="N",
                        help="instead: the producers only, harness and bare, each sending N "
                             "msg/s for 4 s and sleeping between sends (a wake-up a send)")
    args = parser.parse_args()
    gc.disable()
    if args.paced_rate:
        paced(args.paced_rate)
        return
    bare_p, bare_c = best(lambda: bare_paths(args.messages))
    harness_p, harness_c = best(lambda: harness_paths(args.messages, args.rate))
    floor_p, floor_c = best(lambda: floor_paths(args.messages))
    print(f"{args.messages:,} messages, 256-byte bodies, CPU ns per message on one thread, "
          f"best of 5" + (f", sender paced at {args.rate:,.0f} msg/s" if args.rate else ""))
    print(f"producer : bare {bare_p:6.0f}  harness {harness_p:6.0f}  harness adds "
          f"{harness_p - bare_p:5.0f}")
    print(f"consumer : bare {bare_c:6.0f}  harness {harness_c:6.0f}  harness adds "
          f"{harness_c - bare_c:5.0f}")
    print(f"both     : bare {bare_p + bare_c:6.0f}  harness {harness_p + harness_c:6.0f}  "
          f"harness / bare {(harness_p + harness_c) / (bare_p + bare_c):.2f}")
    print(f"floor    : the least measurement adds {floor_p:5.0f} to a producer, {floor_c:5.0f} "
          "to a consumer")


if __name__ == "__main__":
    main()
