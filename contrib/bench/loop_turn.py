#!/usr/bin/env python3
"""What a paced nats-py producer pays to write each send out, on one thread and one CPU: a
publish followed by one turn of the event loop (nats-py's flusher writes it), N times, four
ways against nats-server on 127.0.0.1:4222. Prints CPU us a send, best of 5; asserts
nothing.

    taskset -c 1 .venv/bin/python contrib/bench/loop_turn.py [--sends 30000] [--paced-rate N]

- bare: one coroutine, `await nc.publish(); await asyncio.sleep(0)`, never leaving the loop
  (what a bare asyncio producer does between sends);
- run_until_complete: the thread enters the loop for each send with a coroutine that
  publishes and yields once (a task and three passes of the loop a send);
- transport: the harness's nats transport, send() then flush(), as a paced Publisher does
  before it sleeps (until ccfe7a6 a turn by its long-lived task; since, the way by_hand
  below with the transport's own work around it, and its pass entered as `turned` enters it);
- by_hand: the publish coroutine driven outside the loop (`send(None)`, which completes
  while nats-py's buffer has room), then one pass of the loop for nats-py's flusher, entered
  by run_forever(): the mechanism the transport's paced sends used from ccfe7a6, alone;
- turned: the same, the pass entered by TurnedLoop.turn(once=True) (harness.modules.kit.turned),
  which sets up and tears down only what a pass needs, and runs one pass without a stop's
  handle: the transport's way since.

No sleep comes between sends unless --paced-rate N asks for N sends a second, each way
then sleeping until each send is due, as a paced producer does: the caches go cold between
sends, as in a run. Beside transports.py --paced-rate (the whole harness against the bare
loop), this says how much of the difference is the transport and its loop turn, and how
much the rest of the harness (the role, the pacing, the measuring).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import time
from collections.abc import Callable

from harness.modules import transport_class
from harness.modules.interface.message import Destination, Message, frame

from harness.plan.group import group_spec
from harness.plan.run import RunSpec, assign_group_names

SUBJECT = "bench.loop_turn"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sends", type=int, default=30_000)
    parser.add_argument("--paced-rate", type=float, default=0.0, metavar="N",
                        help="sends a second, each way (default: back to back)")
    args = parser.parse_args()
    if args.paced_rate < 0:
        parser.error(f"--paced-rate must be positive, not {args.paced_rate:g}")
    n = args.sends
    period = 1 / args.paced_rate if args.paced_rate else 0.0
    # Each way's sends: when due, the next due time (time.monotonic), as produce() paces.
    due = [0.0]

    def wait() -> None:
        if period:
            due[0] = max(due[0] + period, time.monotonic() - period)
            left = due[0] - time.monotonic()
            if left > 0:
                time.sleep(left)

    group = group_spec({"module": "nats.Publisher", "destination": SUBJECT})
    assign_group_names([group])
    run = RunSpec(groups=[group], interval=1.0)
    transport = transport_class("nats")(group.settings(run.node, 0, 0, 0))
    transport.open()
    loop, nc = transport.loop, transport.nc
    destination = Destination("topic", SUBJECT)
    payload = frame(Message(bytes(256), "bench", 0, 0, 0))

    def bare() -> None:
        async def sends() -> None:
            for _ in range(n):
                wait()
                await nc.publish(SUBJECT, payload)
                await asyncio.sleep(0)
        loop.run_until_complete(sends())

    def entered() -> None:
        async def turn() -> None:
            await nc.publish(SUBJECT, payload)
            await asyncio.sleep(0)
        for _ in range(n):
            wait()
            loop.run_until_complete(turn())

    def by_hand(enter: Callable[[], None]) -> Callable[[], None]:
        def way() -> None:
            asyncio.set_event_loop(loop)  # the futures nats-py makes outside the loop are its
            for _ in range(n):
                wait()
                publish = nc.publish(SUBJECT, payload)
                try:
                    publish.send(None)
                except StopIteration:
                    pass
                else:  # it waited for room: the measurement would be wrong, so stop
                    publish.close()
                    raise SystemExit("loop_turn.py: a publish waited for nats-py's buffer")
                enter()
        return way

    def harness() -> None:
        send, flush = transport.send, transport.flush
        for seq in range(n):
            wait()
            send(destination, Message(bytes(256), "bench", seq, 0, 0))
            flush()

    def one_pass() -> None:
        loop.call_soon(loop.stop)
        loop.run_forever()

    ways: dict[str, Callable[[], None]] = {
        "bare": bare, "run_until_complete": entered, "transport": harness,
        "by_hand": by_hand(one_pass), "turned": by_hand(functools.partial(loop.turn, once=True))}
    best: dict[str, float] = {}
    gc.disable()
    try:
        for _ in range(5):
            for name, way in ways.items():
                before = time.process_time()
                way()
                us = (time.process_time() - before) / n * 1e6
                best[name] = min(best.get(name, us), us)
    finally:
        gc.enable()
        transport.close()
    pace = f", {args.paced_rate:,g} a second" if period else ""
    print(f"nats-py publish and one loop turn, {n:,} sends{pace}, CPU us a send, best of 5")
    print("  ".join(f"{name} {us:5.1f}" for name, us in best.items()))


if __name__ == "__main__":
    main()
