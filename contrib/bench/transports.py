#!/usr/bin/env python3
"""The harness against bare client loops, side by side against the same broker.

    .venv/bin/python contrib/bench/transports.py [--seconds 5]

Needs the brokers of contrib/brokers/brokers.sh. Each case runs a producer and a consumer at
once, each in its own process, as fast as they go, with 256-byte bodies: once as bare
stomp.py, paho-mqtt, pika, Proton, nats-py or redis-py loops (no timing, no recording, no
checks), once as harness groups (every message timed and sequence-checked). Both count what
they sent and received over the same window after one second of warm-up, and the script
prints msgs/s and harness / bare.

The bare loops send the same frames as the harness (its `harness` header on STOMP, its 38-byte
prefix on MQTT, NATS and Redis), so the ratio is the cost of the harness's own work. MQTT runs at
QoS 0, where Mosquitto drops what a slow subscriber cannot take: there the subscriber's rate
is what it managed to receive. The bare MQTT producer uses paho's fastest public API, as the
harness does: its loop driven from the publishing thread (loop_write every 64 publishes).

Beside each rate, client CPU per message: the process's CPU time (every thread, the client
library's own included) over the messages it counted in the window, for the bare loop; the
figure the run reports (client_us_per_msg) for the harness. Last on each such row, "best":
the bare loop's cost plus the floor of message_path.py (the least a harness that times every
message in CPython must add, producer or consumer, measured once at the start), over the bare
loop's cost: no such harness can show a lower ratio on that row.

With --fed, each consumer is measured again, bare loop and harness group alike, fed by the
same harness producer paced at a fixed rate (a share of the case's slowest unthrottled rate,
or --fed-rate): unthrottled, each consumer runs behind its own producer, and one behind a
slower producer reads fewer messages per wake-up, each costing more; fed alike, the two
consumers' CPU per message compare the same load. --fed-rate N feeds every case at N msg/s,
so that two runs of the script (before and after a change) compare the same load.
With --together, the two consumers are measured at the same time instead, each behind its own
paced harness producer (on alternate runs each behind the other's), and each run's ratio
pairs figures from one window: on a virtual machine whose speed drifts by a third from one
minute to the next, ratios of runs taken a minute apart carry that drift, and paired ratios
do not. Both consumers then share the last CPU and the producers keep to the first (with two
CPUs or more): unpinned, the scheduler's placement of the broker and the producers moved one
consumer's cost and not the other's, and paired ratios of one case ranged from 0.7 to 1.6.
With --paced-rate too, the producers are paired the same way: the bare loop and a harness run
of the producer alone, each sending to its own destination, both on the last CPU, and one
harness run of the two consumers on the first.

The bare loops run with glibc's allocator set as the harness sets it in its own processes
(harness.engine.allocator): without it, a nats-py process whose imports never raised glibc's
mapping threshold maps, faults in and unmaps asyncio's read buffer for every socket read.

With --baseline PYTHON (and --fed-rate N), each consumer row pairs this checkout's harness
with the harness another Python runs, instead of with the bare loop: fed at once, as
--together pairs them. Give the Python of another checkout's environment, e.g. after
`git worktree add /tmp/base REV` and `python3 -m venv /tmp/base/.venv` and
`/tmp/base/.venv/bin/pip install -e '/tmp/base[all]'`, /tmp/base/.venv/bin/python. A change of
a few percent in what a message costs shows there, where two runs of the bench (before and
after) differ by more on this machine.

With --paced-rate N, each producer is measured again sending N msg/s, bare loop and harness
group alike: each send when it is due, what is queued written out before the loop sleeps.
At such rates a wake-up per message costs more than the message, for both.
Paced, the harness's JetStream producers wait in nats-py's loop, to time each publish
acknowledgement as it arrives (a wake-up each), where the bare loop sleeps outside it and
takes them at its next send, untimed: those rows come twice, the second against a bare loop
that waits in its loop as well ("bare loop waiting in its loop"), the same work without the
harness's.
With --poisson too (with --paced-rate, or --fed-rate for the feeding producers), every paced
producer draws exponential gaps of the same mean (Poisson arrivals) instead of a fixed gap.
Paired (--together) at a fixed gap, the two producers on one CPU lock into one phase for the
whole run, and which of them the other's wake-ups interrupt mid-send depends on that phase:
the runs of one row spread from 1.16 to 1.57. With random gaps every run sees the same mix,
and the runs of a row fall within 0.03 of its median. Two feeders paced alike send at the
same instants, so the consumers they feed wake together for every message.
--no-unthrottled skips the unthrottled rows (and the native peers below). With
--paired-unthrottled, each unthrottled producer row is paired as --together pairs paced ones:
the bare loop and the harness at once, both as fast as they go on the last CPU, sharing it,
and the median of the runs' paired ratios; alternated runs of one row spread from 1.04 to
1.51 within minutes on these machines (the same redis-py XADD path under Sender and
Publisher), paired runs do not carry the machine's drift. The harness's
statistics interval is 0.5 s unless --sample-seconds says otherwise: ten times the interval
work of its 5 s default, so its figures here are conservative.

Then redis.Publisher with 2 processes beside redis-benchmark PUBLISH (2 connections, 64
pipelined), http.Requestor beside a bare urllib3 loop (one kept-alive connection, a POST at a time)
against nginx; last, mqtt.Publisher with 2 processes beside mosquitto_pub --repeat, the
broker's own tool.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import gc
import json
import os
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from bare import POISSON, gaps, produce  # this directory's bare.py
from message_path import best, floor_paths  # this directory's message_path.py

ROOT = Path(__file__).resolve().parents[2]
WARMUP = 1.0
BODY = b"x" * 256
STOMP = {"activemq": ["--port", "61613", "--flavour", "activemq"],
         "rabbitmq": ["--port", "61614", "--flavour", "rabbitmq", "--vhost", "/"]}
MOSQUITTO = ["--port", "1883", "--flavour", "mosquitto"]
# Presettled on both sides: Proton's blocking round trip per settled message is the library's
# cost either way (see the manual's Benchmarks page), and would hide the harness's own.
AMQP10 = ["--flavour", "rabbitmq", "--settle", "at-most-once"]
AMQP10_PREFIX = {"queue": "/queue/", "topic": "/topic/"}
INFLIGHT = 256  # JetStream publish acknowledgements outstanding, on both sides
FED_WARMUP = 4.0  # a bare consumer fed by a harness producer: the producer's start-up, and more
FED_SHARE = 0.6  # the feed's rate: this share of the slowest unthrottled rate of the case


# -- the harness side --------------------------------------------------------------------------
SAMPLE = ["-ss", "0.5"]  # the harness's interval, set by --sample-seconds
# (producer, consumer) us a message: message_path.py's floor, measured once by main()
FLOOR = [0.0, 0.0]
# The bare loops' environment: glibc's allocator set as the harness sets it in each of its
# measuring processes (harness.engine.allocator), read by main(). Without it, a bare loop
# whose imports never raised glibc's mapping threshold paid a mapping and two page faults
# per socket read, a tenth of its CPU time, and the harness looked cheaper than it.
BARE_ENV: dict[str, str] = {}
# --baseline: the Python whose harness the consumer rows pair with this one's
BASELINE: list[str] = []


def poisson_flag() -> list[str]:
    """What a paced producer, this script's bare loop or the harness, is given for --poisson."""
    return ["--poisson"] if POISSON[0] else []


def paced(rate: float) -> list[str]:
    """A harness producer's flags for `rate` sends a second (0: none, unthrottled)."""
    return ["-rt", f"{rate:g}", *poisson_flag()] if rate else []


def harness(seconds: float, *groups: list[str], drain: float = 60.0,
            warmup: float = WARMUP, cpu: int | None = None) -> dict[str, tuple[float, float]]:
    """Measured-phase rate of each group (sent for producers, received for consumers) and
    its client CPU microseconds per message."""
    return harness_wait(harness_start(seconds, *groups, drain=drain, warmup=warmup, cpu=cpu))


def harness_start(seconds: float, *groups: list[str], drain: float = 60.0,
                  warmup: float = WARMUP, cpu: int | None = None, python: str | None = None
                  ) -> tuple[subprocess.Popen, tempfile.TemporaryDirectory, list[str]]:
    """A harness run started in the background (on one CPU if cpu is set, its group
    processes too; by another Python's harness if python is set); harness_wait() reads its
    figures."""
    first, *others = groups
    # Consumers drain what is left, or the broker keeps it and holds the next producer back.
    # -P: not this checkout's harness from the working directory, but the one python has.
    start = [sys.executable, "-m"] if python is None else [python, "-P", "-m"]
    command = [*start, "harness", "run", *first, "-sw", str(warmup),
               "-rl", str(warmup + seconds), *SAMPLE, "--drain", str(drain)]
    for group in others:
        command += ["-g", " ".join(group)]
    out = tempfile.TemporaryDirectory()
    run = subprocess.Popen([*command, "-o", out.name], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                           preexec_fn=pinned(cpu))
    return run, out, command


def harness_wait(started: tuple[subprocess.Popen, tempfile.TemporaryDirectory, list[str]]
                 ) -> dict[str, tuple[float, float]]:
    run, out, command = started
    with out:
        output = run.communicate()[0]
        if run.returncode:
            # A bench row from a run that failed would mislead: stop, saying why.
            sys.exit(f"bench: a harness run exited {run.returncode}: {' '.join(command)}\n"
                     f"{output[-3000:]}")
        (run_dir,) = Path(out.name).iterdir()
        summary = json.loads((run_dir / "summary.json").read_text())
    return {name: (g["rate"], g["client_us_per_msg"] or 0.0)
            for name, g in summary["groups"].items()}


def pinned(cpu: int | None) -> Callable[[], None] | None:
    """A child's preexec_fn that keeps it (and what it starts) on one CPU."""
    return None if cpu is None else functools.partial(os.sched_setaffinity, 0, {cpu})


def first_and_last_cpu() -> tuple[int | None, int | None]:
    """The CPUs --together keeps the two sides on; none with a single CPU."""
    cpus = sorted(os.sched_getaffinity(0))
    return (cpus[0], cpus[-1]) if len(cpus) > 1 else (None, None)


# -- the bare side: each loop is this script run as a child process --------------------------
def stomp_headers() -> dict[str, str]:
    now = time.time_ns()
    return {"harness": f"1,{now},{now},123456789,bench:sender:0:0"}


def stomp_connection(broker: str):
    import stomp
    conn = stomp.Connection12([("127.0.0.1", int(STOMP[broker][1]))], auto_decode=False,
                              vhost="/" if broker == "rabbitmq" else None)
    conn.connect(wait=True)
    conn.transport.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return conn


def framed() -> bytes:
    """A body with the harness's payload prefix (MQTT, NATS, Redis carry their fields so)."""
    from harness.modules.interface.message import Message, frame
    return frame(Message(BODY, "bench:publisher:0:0", 1, time.time_ns(), time.time_ns(), 1))


def mqtt_client(driven: bool = False):
    """A connected paho client: with its own network thread, or driven by the caller."""
    import paho.mqtt.client as paho
    client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=f"bench-{uuid.uuid4()}")
    if driven:
        client.on_socket_register_write = lambda *_: None  # publish() queues; we write
    client.connect("127.0.0.1", 1883)
    client.socket().setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if driven:
        while not client.is_connected():
            client.loop_write()
            client.loop_read()
    else:
        client.loop_start()
    return client


def pika_driven():
    """A pika SelectConnection and channel whose I/O loop the caller turns, as the amqp
    transport does: (connection, channel, turn)."""
    import pika
    from pika.adapters.select_connection import SelectConnection
    state: dict = {}
    conn = SelectConnection(pika.ConnectionParameters("127.0.0.1"),
                            on_open_callback=lambda c: state.setdefault("open", c))
    io = conn.ioloop
    io.activate_poller()

    def turn(timeout: float = 0.05) -> None:
        timer = io.call_later(timeout, lambda: None)
        io.poll()
        io.process_timeouts()
        io.remove_timeout(timer)

    while "open" not in state:
        turn()
    conn.channel(on_open_callback=lambda ch: state.setdefault("channel", ch))
    while "channel" not in state:
        turn()
    return conn, state["channel"], turn


def pika_call(turn, start) -> object:
    answers: list = []
    start(lambda frame: answers.append(frame))
    while not answers:
        turn()
    return answers[0]


def amqp_headers() -> dict[str, str]:
    now = time.time_ns()
    return {"harness": f"1,{now},{now},123456789,bench:sender:0:0"}


def proton_turn(conn, timeout: float) -> None:
    container = conn.container
    for _ in range(3):  # dispatch, wait on the socket, dispatch what it read
        container.timeout = timeout
        container.process()


async def nats_send(destination: str, start: float, end: float, jetstream: bool,
                    rate: float = 0.0, in_loop: bool = False) -> int:
    """nats-py's own fastest publishing: publish without waiting (core), or publish_async
    with INFLIGHT acknowledgements outstanding (JetStream), in one coroutine. Paced at
    `rate`, each is sent when due: the loop turns once (nats-py's flusher writes what is
    queued), then the thread sleeps, as the harness's do. An asyncio sleep would wake late:
    the loop waits on epoll, whose timeout is rounded up to a whole millisecond. in_loop: the
    loop (given a selector that waits to the microsecond) waits until each send is due
    instead, and takes each acknowledgement as it arrives, a wake-up each, as any program that
    times them must."""
    import nats
    name = destination.partition(":")[2]
    nc = await nats.connect("nats://127.0.0.1:4222")
    payload, count = framed(), 0
    if jetstream:
        js = nc.jetstream(publish_async_max_pending=INFLIGHT)
        stream = "harness-" + name.replace(".", "_")
        await js.add_stream(name=stream, subjects=[name])
    gap, due = gaps(rate) if rate else None, time.monotonic()
    while (now := time.monotonic()) < end:
        if gap is not None:
            if due > now and in_loop:  # the acknowledgements taken as they come
                await asyncio.sleep(due - now)
            elif due > now:
                await asyncio.sleep(0)
                time.sleep(max(due - time.monotonic(), 0))
            due += gap()
        if jetstream:
            await js.publish_async(name, payload)  # waits while INFLIGHT are outstanding
        else:
            await nc.publish(name, payload)
        count += now >= start
    if jetstream:
        await js.publish_async_completed()
    else:
        await nc.flush()
    await nc.close()
    return count


async def nats_receive(destination: str, on_message, counted: list[int], end: float,
                       jetstream: bool) -> None:
    import nats
    from nats.js import api
    where, _, name = destination.partition(":")
    nc = await nats.connect("nats://127.0.0.1:4222")

    async def callback(msg) -> None:
        on_message()
        if jetstream:
            await msg.ack()

    if jetstream:
        js = nc.jetstream()
        stream = "harness-" + name.replace(".", "_")
        with contextlib.suppress(Exception):
            await js.add_stream(name=stream, subjects=[name])
        await js.subscribe(name, stream=stream, cb=callback, manual_ack=True,
                           config=api.ConsumerConfig(deliver_policy=api.DeliverPolicy.NEW))
    else:
        await nc.subscribe(name, queue="harness" if where == "queue" else "", cb=callback)
    last, seen = time.monotonic(), 0
    while time.monotonic() < end + 1 or time.monotonic() - last < 1:
        await asyncio.sleep(0.2)
        if counted[1] != seen:
            seen, last = counted[1], time.monotonic()
    if jetstream:
        await nc.jsm().delete_stream(stream)
    await nc.close()


def redis_receive(destination: str, on_message, counted: list[int], end: float,
                  pubsub: bool) -> None:
    """redis-py's pub/sub get_message, or XREADGROUP COUNT 100 with the acknowledgements
    sent with the next read."""
    import redis
    name = destination.partition(":")[2]
    client = redis.Redis()
    last, seen = time.monotonic(), 0
    if pubsub:
        subscription = client.pubsub(ignore_subscribe_messages=True)
        subscription.subscribe(name)
        while time.monotonic() < end + 1 or time.monotonic() - last < 1:
            if subscription.get_message(timeout=0.2) is not None:
                on_message()
                last = time.monotonic()
        return
    with contextlib.suppress(redis.exceptions.ResponseError):
        client.xgroup_create(name, "harness", id="$", mkstream=True)
    to_ack: list[bytes] = []
    while time.monotonic() < end + 1 or time.monotonic() - last < 1:
        pipe = client.pipeline(transaction=False)
        if to_ack:
            pipe.xack(name, "harness", *to_ack)
        pipe.xreadgroup("harness", "bare", {name: ">"}, count=100, block=200)
        streams = pipe.execute()[-1]
        to_ack = []
        for _, entries in streams or ():
            for entry_id, _fields in entries:
                on_message()
                to_ack.append(entry_id)
        if counted[1] != seen:
            seen, last = counted[1], time.monotonic()
    client.delete(name)


def bare_producer(kind: str, broker: str, destination: str
                  ) -> tuple[Callable[[], object], Callable[[], object]]:
    """(send one message, write out what is queued) of a bare producer, each its library's
    fastest public API."""
    if kind == "stomp-send":  # stomp.py writes each frame as it is sent
        conn, headers = stomp_connection(broker), stomp_headers()
        # Bound calls (partial), not lambdas: a Python frame less per message than a lambda.
        return functools.partial(conn.send, destination, BODY, headers=headers), lambda: None
    if kind == "http-request":  # a round trip at a time on one kept-alive connection
        import urllib3
        pool = urllib3.HTTPConnectionPool("127.0.0.1", 8090, maxsize=1, retries=False)
        return functools.partial(pool.urlopen, "POST", destination, body=BODY,
                                 preload_content=True), lambda: None
    where, _, name = destination.partition(":")
    if kind == "amqp-send":
        import pika
        conn, channel, turn = pika_driven()
        if where == "queue":
            pika_call(turn, lambda cb: channel.queue_declare(name, durable=True, callback=cb))
        exchange = "" if where == "queue" else "amq.topic"

        def write_pika() -> None:
            turn(0)
            while conn._transport.get_write_buffer_size():  # full: wait for room
                turn(0.01)

        return lambda: channel.basic_publish(exchange, name, BODY, pika.BasicProperties(
            headers=amqp_headers())), write_pika
    if kind == "amqp10-send":
        import proton
        import proton.reactor
        import proton.utils
        conn = proton.utils.BlockingConnection("amqp://127.0.0.1:5672")
        link = conn.create_sender(AMQP10_PREFIX[where] + name,
                                  options=proton.reactor.AtMostOnce()).link

        def write_proton() -> None:
            proton_turn(conn, 0)
            while link.queued:  # no credit or a full socket: wait
                proton_turn(conn, 0.01)

        return lambda: link.send(proton.Message(body=BODY, properties=amqp_headers())), \
            write_proton
    if kind in ("redis-send", "redis-stream-send"):
        import redis
        # redis-py's fastest public way to queue a command, as the harness queues them:
        # publish() and xadd() build the same command through two and three calls more.
        pipe, payload = redis.Redis().pipeline(transaction=False), framed()
        queue = pipe.pipeline_execute_command
        if where == "topic" and kind == "redis-send":
            return functools.partial(queue, "PUBLISH", name, payload), pipe.execute
        return functools.partial(queue, "XADD", name, "*", b"m", payload), pipe.execute
    if kind == "mqtt-send":
        client, payload = mqtt_client(driven=True), framed()

        def write_mqtt() -> None:
            client.loop_write()
            while client.want_write():  # the socket is full: wait for room
                select.select([], [client.socket()], [], 0.01)
                client.loop_write()
            client.loop_read()

        return functools.partial(client.publish, destination, payload, 0), write_mqtt
    raise ValueError(f"no bare producer {kind}")


def bare_loop(kind: str, broker: str, destination: str, seconds: float,
              warmup: float = WARMUP, rate: float = 0.0) -> None:
    """Run one bare producer (paced at `rate` if set) or consumer; print what it counted in
    the window as JSON."""
    start = time.monotonic() + warmup
    end = start + seconds
    count = 0
    # CPU time at the window's start and end, read on time whatever the loop is doing.
    cpu: list[float] = []
    for at in (start, end):
        timer = threading.Timer(at - time.monotonic(), lambda: cpu.append(time.process_time()))
        timer.daemon = True
        timer.start()
    if kind in ("nats-send", "natsjs-send"):
        count = asyncio.run(nats_send(destination, start, end, kind == "natsjs-send", rate))
    elif kind == "natsjs-looped-send":
        # Waits in its loop to the microsecond, as the harness's JetStream producer does: an
        # asyncio sleep on epoll alone would send up to a millisecond late, in bursts.
        from harness.modules.kit.selector import MicrosecondSelector
        loop = asyncio.SelectorEventLoop(MicrosecondSelector())
        try:
            count = loop.run_until_complete(nats_send(destination, start, end, True, rate,
                                                      in_loop=True))
        finally:
            loop.close()
    elif kind.endswith(("-send", "-request")):
        count = produce(*bare_producer(kind, broker, destination), start, end, rate)
    else:
        counted = [0, 0]  # in the window, in all

        def on_message(*_args) -> None:
            counted[1] += 1
            if start <= time.monotonic() < end:
                counted[0] += 1

        turn = None
        if kind in ("nats-receive", "natsjs-receive"):
            asyncio.run(nats_receive(destination, on_message, counted, end,
                                     kind == "natsjs-receive"))
        elif kind in ("redis-receive", "redis-stream-receive"):
            redis_receive(destination, on_message, counted, end,
                          kind == "redis-receive" and destination.startswith("topic:"))
        elif kind == "amqp-receive":
            conn, channel, turn = pika_driven()
            where, _, name = destination.partition(":")
            if where == "queue":
                queue = name
                pika_call(turn, lambda cb: channel.queue_declare(name, durable=True,
                                                                 callback=cb))
            else:
                frame = pika_call(turn, lambda cb: channel.queue_declare(
                    "", exclusive=True, auto_delete=True, callback=cb))
                queue = frame.method.queue
                pika_call(turn, lambda cb: channel.queue_bind(queue, "amq.topic", name,
                                                              callback=cb))
            pika_call(turn, lambda cb: channel.basic_consume(
                queue, lambda *_: on_message(), auto_ack=True, callback=cb))
        elif kind == "amqp10-receive":
            import proton.handlers
            import proton.reactor
            import proton.utils

            class Counter(proton.handlers.MessagingHandler):
                def on_message(self, event) -> None:
                    on_message()

            where, _, name = destination.partition(":")
            conn = proton.utils.BlockingConnection("amqp://127.0.0.1:5672")
            # Kept: a BlockingReceiver that is collected takes its handler off the link.
            receiver = conn.create_receiver(AMQP10_PREFIX[where] + name, credit=100,
                                            handler=Counter(prefetch=100),
                                            options=proton.reactor.AtMostOnce())
            turn = functools.partial(proton_turn, conn)
            assert receiver.link.is_receiver
        elif kind == "stomp-receive":
            import stomp

            class Listener(stomp.ConnectionListener):
                def on_message(self, frame) -> None:
                    on_message()

            conn = stomp_connection(broker)
            conn.set_listener("count", Listener())
            conn.subscribe(destination, id="bench", ack="auto")
        else:
            client = mqtt_client()
            client.on_message = on_message
            client.subscribe(destination, 0)
        # Keep consuming (uncounted) until the producer has stopped too, and the queue is
        # drained: what the broker keeps would hold the next producer back.
        last_seen = time.monotonic()
        while not kind.startswith(("nats", "redis")) and \
                (time.monotonic() < end + 1 or time.monotonic() - last_seen < 1):
            before = counted[1]
            if turn is not None:  # this thread drives the client's I/O itself
                turn(0.2)
            else:
                time.sleep(0.2)
            if counted[1] != before:
                last_seen = time.monotonic()
        count = counted[0]
    while len(cpu) < 2:
        time.sleep(0.01)
    print(json.dumps({"rate": count / seconds, "us": (cpu[1] - cpu[0]) / count * 1e6
                      if count else 0.0}), flush=True)


def bare(seconds: float, broker: str, destination: str, send: str, receive: str,
         rate: float = 0.0) -> tuple[tuple[float, float], tuple[float, float]]:
    """(rate, CPU us per message) of the producer (paced at `rate` if set) and of the
    consumer, bare loops in two processes."""
    for _attempt in (1, 2):
        consumer = bare_child(receive, broker, destination[1], seconds)
        time.sleep(0.5)  # subscribed before the producer starts
        producer = bare_child(send, broker, destination[0], seconds,
                              *((WARMUP, rate) if rate else ()))
        try:
            out = [json.loads(p.communicate(timeout=seconds + 60)[0])
                   for p in (producer, consumer)]
            return (out[0]["rate"], out[0]["us"]), (out[1]["rate"], out[1]["us"])
        except subprocess.TimeoutExpired:
            # An unthrottled producer that the broker's flow control holds after the
            # consumer stopped draining (ActiveMQ, a topic) never returns from its send.
            for p in (producer, consumer):
                p.kill()
                p.wait()
    sys.exit(f"bench: the bare {send} / {receive} pair on {broker} hung twice "
             f"(the producer held by the broker's flow control?)")


def bare_child(kind: str, broker: str, destination: str, seconds: float, *extra: float,
               cpu: int | None = None) -> subprocess.Popen:
    """One bare loop (bare_loop), this script run again; extra: its warm-up and rate."""
    return subprocess.Popen([sys.executable, __file__, *poisson_flag(), "--loop", kind, broker,
                             destination, str(seconds), *map(str, extra)], stdout=subprocess.PIPE,
                            text=True, env=BARE_ENV, preexec_fn=pinned(cpu))


def destination(mqtt: bool) -> str:
    name = f"bench.{uuid.uuid4().hex[:8]}"
    return name.replace(".", "/") if mqtt else name


def bare_destination(kind: str, send: str, name: str) -> str:
    """How the bare loops name a destination."""
    return name if send.startswith("mqtt") else f"/{kind}/{name}" \
        if send.startswith("stomp") else f"{kind}:{name}"


def bare_case(seconds: float, kind: str, broker: str, send: str, receive: str,
              rate: float = 0.0) -> tuple[tuple[float, float], tuple[float, float]]:
    dest = bare_destination(kind, send, destination(send.startswith("mqtt")))
    return bare(seconds, broker, (dest, dest), send, receive, rate)


def fed_consumer(seconds: float, rate: int, producer: str, consumer: str, flags: list[str],
                 bare_side: tuple[str, str, str, str] | None) -> tuple[float, float]:
    """(rate, CPU us per message) of one consumer, bare loop or harness group, fed by the
    same harness producer paced at `rate`: both consumers see the same load. Unthrottled,
    a consumer behind a slower producer reads fewer messages per wake-up, and each costs
    more (a client library's per-read work is shared by fewer messages)."""
    name = destination(producer.startswith("mqtt"))
    feed = ["-m", producer, "-d", name, *paced(rate), *flags]
    if bare_side is None:
        rates = harness(seconds, feed, ["-m", consumer, "-d", name, *receiving(flags)])
        result = rates[consumer.split(".")[1].lower()]
    else:
        kind, broker, send, receive = bare_side
        # The bare window opens once the harness producer is surely sending and closes well
        # before it stops.
        child = bare_child(receive, broker, bare_destination(kind, send, name), seconds,
                           FED_WARMUP)
        time.sleep(0.5)
        harness(seconds + FED_WARMUP + 1, feed)
        out = json.loads(child.communicate(timeout=seconds + 60)[0])
        result = out["rate"], out["us"]
    forget(name, flags, producer)
    return result


def together_consumers(seconds: float, rate: int, producer: str, consumer: str,
                       flags: list[str], bare_side: tuple[str, str, str, str],
                       swap: bool = False
                       ) -> tuple[tuple[float, float], tuple[float, float]]:
    """(rate, CPU us per message) of the bare consumer and of the harness consumer, measured
    at the same time, each behind its own harness producer paced at `rate` (swap: each
    behind the other's). Whatever else the machine does in that window weighs on both
    alike, which alternating runs cannot promise on a machine whose speed drifts from minute
    to minute. With two CPUs or more, both consumers share the last and the producers keep
    to the first, so that the broker's and the producers' bursts land on both alike."""
    kind, broker, send, receive = bare_side
    producers_cpu, consumers_cpu = first_and_last_cpu()
    names = [destination(producer.startswith("mqtt")) for _ in range(2)]
    if swap:
        names.reverse()
    if BASELINE:  # the other harness in the bare loop's place
        child = harness_start(seconds, ["-m", consumer, "-d", names[0], *receiving(flags)],
                              warmup=FED_WARMUP - 1, cpu=consumers_cpu, python=BASELINE[0])
    else:
        child = bare_child(receive, broker, bare_destination(kind, send, names[0]), seconds,
                           FED_WARMUP, cpu=consumers_cpu)
    # A run of one group is one process. Its window opens about when the bare loop's does
    # (a run starts in about a second), and both close well before the producers stop.
    ours = harness_start(seconds, ["-m", consumer, "-d", names[1], *receiving(flags)],
                         warmup=FED_WARMUP - 1, cpu=consumers_cpu)
    time.sleep(1.5)  # both subscribed before the first message
    harness(seconds + FED_WARMUP + 1, *(["-m", producer, "-d", name, *paced(rate), *flags]
                                        for name in names), cpu=producers_cpu)
    rates = harness_wait(ours)
    key = consumer.split(".")[1].lower()
    if BASELINE:
        other = harness_wait(child)[key]  # type: ignore[arg-type]
    else:
        out = json.loads(child.communicate(timeout=seconds + 60)[0])
        other = (out["rate"], out["us"])
    for name in names:
        forget(name, flags, producer)
    return other, rates[key]


def together_producers(seconds: float, rate: int, producer: str, consumer: str,
                       flags: list[str], bare_side: tuple[str, str, str, str],
                       swap: bool = False
                       ) -> tuple[tuple[float, float], tuple[float, float]]:
    """together_consumers() for producers: the bare loop and a harness run of the producer
    alone send `rate` msg/s (0: as fast as they go, sharing the CPU) at the same time, each to
    a destination of its own, both on the last CPU; one harness run of two consumers on the
    first drains both (swap: each the other's)."""
    kind, broker, send, _ = bare_side
    consumers_cpu, producers_cpu = first_and_last_cpu()
    names = [destination(producer.startswith("mqtt")) for _ in range(2)]
    # Behind unthrottled producers the consumers only keep the broker from holding them back:
    # what they have not taken when the producers stop is left.
    drain = 2.0 if producer.startswith("mqtt") or not rate else 60.0
    consumers = harness_start(seconds + FED_WARMUP + 4,
                              *(["-m", consumer, "-d", name, *receiving(flags)]
                                for name in names[::-1 if swap else 1]),
                              drain=drain, cpu=consumers_cpu)
    time.sleep(2.5)  # both subscribed before the first message (two processes start)
    child = bare_child(send, broker, bare_destination(kind, send, names[0]), seconds,
                       FED_WARMUP, rate, cpu=producers_cpu)
    rates = harness(seconds, ["-m", producer, "-d", names[1], *paced(rate), *flags],
                    warmup=FED_WARMUP - 1, cpu=producers_cpu)
    out = json.loads(child.communicate(timeout=seconds + 60)[0])
    harness_wait(consumers)
    for name in names:
        forget(name, flags, producer)
    return (out["rate"], out["us"]), rates[producer.split(".")[1].lower()]


def forget(name: str, flags: list[str], producer: str) -> None:
    """Delete what a case left on the server: a JetStream stream keeps its messages, and so
    does a Redis stream."""
    if "--jetstream" in flags:
        asyncio.run(delete_stream("harness-" + name.replace(".", "_")))
    elif producer.startswith("redis"):
        import redis
        redis.Redis().delete(name)


def receiving(flags: list[str]) -> list[str]:
    """The flags a consumer group takes: a producer's own options (those for the groups
    that send) left out, which a consumer refuses."""
    from harness.plan.options import table

    send_only = {f"--{o.key}": o for o in table().values() if o.side == "send"}
    out: list[str] = []
    skip = False
    for flag in flags:
        if skip:
            skip = False
            continue
        option = send_only.get(flag)
        if option is None:
            out.append(flag)
        else:
            skip = option.type is not bool
    return out


def harness_case(seconds: float, producer: str, consumer: str, flags: list[str],
                 rate: float = 0.0) -> tuple[tuple[float, float], tuple[float, float]]:
    name = destination(producer.startswith("mqtt"))
    # At QoS 0 Mosquitto drops what the subscriber cannot take: the destination's balance
    # never closes, and a long drain would only wait it out.
    rates = harness(seconds, ["-m", producer, "-d", name, *paced(rate), *flags],
                    ["-m", consumer, "-d", name, *receiving(flags)],
                    drain=2.0 if producer.startswith("mqtt") else 60.0)
    forget(name, flags, producer)
    return rates[producer.split(".")[1].lower()], rates[consumer.split(".")[1].lower()]


async def delete_stream(name: str) -> None:
    import nats
    nc = await nats.connect("nats://127.0.0.1:4222")
    with contextlib.suppress(Exception):
        await nc.jsm().delete_stream(name)
    await nc.close()


def row(name: str, bares: list[tuple[float, float]],
        harnesses: list[tuple[float, float]] | list[float], floor_us: float = 0.0) -> None:
    """Medians of the alternating repeats, the spread of the rate ratios and, where both
    sides have it, client CPU per message, with the best ratio the floor allows."""
    costs = all(isinstance(x, tuple) for x in [*bares, *harnesses])
    bare_rates = [x[0] if isinstance(x, tuple) else x for x in bares]
    harness_rates = [x[0] if isinstance(x, tuple) else x for x in harnesses]
    ratios = sorted(h / b for h, b in zip(harness_rates, bare_rates, strict=True))
    b, h = statistics.median(bare_rates), statistics.median(harness_rates)
    line = (f"{name:<44} bare {b:>9,.0f}/s   harness {h:>9,.0f}/s   ratio {h / b:5.2f}  "
            f"(runs {ratios[0]:.2f}..{ratios[-1]:.2f})")
    if costs:
        bu = statistics.median(x[1] for x in bares)  # type: ignore[index]
        hu = statistics.median(x[1] for x in harnesses)  # type: ignore[index]
        line += f"   cpu/msg bare {bu:6.1f} us  harness {hu:6.1f} us  ratio {hu / bu:5.2f}"
        if floor_us:
            line += f"  best {(bu + floor_us) / bu:4.2f}"
    print(line, flush=True)


def paired_row(name: str, pairs: list[tuple[tuple[float, float], tuple[float, float]]],
               floor_us: float = 0.0) -> None:
    """A --together row: each run's ratio is of two consumers measured at once, and the
    figure is the median of those ratios (not a ratio of medians taken at other times)."""
    ratios = sorted(h[1] / b[1] for b, h in pairs)
    bu = statistics.median(b[1] for b, _ in pairs)
    hu = statistics.median(h[1] for _, h in pairs)
    rates = " ".join(f"{b[0]:,.0f}/{h[0]:,.0f}" for b, h in pairs)
    other = "baseline" if BASELINE else "bare"
    print(f"{name:<44} cpu/msg {other} {bu:6.1f} us  harness {hu:6.1f} us  paired ratio "
          f"{statistics.median(ratios):5.2f} (runs {', '.join(f'{r:.2f}' for r in ratios)})"
          + (f"  best {(bu + floor_us) / bu:4.2f}" if floor_us and not BASELINE else "")
          + f"  msg/s {other}/harness {rates}", flush=True)


def compare(repeat: int, one_bare, one_harness) -> tuple[list, list]:
    """Alternate bare and harness runs, so that drift in the broker hits both alike."""
    bares, harnesses = [], []
    for _ in range(repeat):
        bares.append(one_bare())
        harnesses.append(one_harness())
    return bares, harnesses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="measured window")
    parser.add_argument("--repeat", type=int, default=3, help="alternating runs per case")
    parser.add_argument("--only", default="", help="run the cases whose producer module "
                        "starts with this, e.g. amqp (default: all)")
    parser.add_argument("--fed", action="store_true", help="also measure each consumer, bare "
                        "and harness, fed by the same harness producer at a fixed rate")
    parser.add_argument("--fed-rate", type=int, metavar="N", help="feed every case's "
                        "consumers at N msg/s (implies --fed; default: a share of the "
                        "slowest unthrottled rate)")
    parser.add_argument("--together", action="store_true", help="measure each fed bare "
                        "consumer and harness consumer at the same time, each behind its own "
                        "paced producer, and with --paced-rate each pair of producers, and "
                        "give the median of the paired ratios (without --paced-rate, implies "
                        "--fed)")
    parser.add_argument("--no-unthrottled", action="store_true", help="skip the unthrottled "
                        "rows (with --fed-rate or --paced-rate)")
    parser.add_argument("--paired-unthrottled", action="store_true", help="the unthrottled "
                        "producer rows paired instead: the bare loop and the harness at once, "
                        "sharing the last CPU, and the median of the paired ratios (no "
                        "unthrottled consumer rows)")
    parser.add_argument("--paced-rate", type=int, metavar="N", help="also measure each "
                        "producer, bare and harness, sending at N msg/s (each send when due)")
    parser.add_argument("--sample-seconds", type=float, default=0.5, metavar="S",
                        help="the harness's statistics interval (-ss; default 0.5)")
    parser.add_argument("--baseline", metavar="PYTHON", help="pair each consumer row with the "
                        "harness this Python runs (another checkout's environment), fed at "
                        "once, instead of with the bare loop (needs --fed-rate; consumers "
                        "only)")
    parser.add_argument("--poisson", action="store_true", help="with --paced-rate or "
                        "--fed-rate: exponential gaps of the same mean (Poisson arrivals) for "
                        "every paced producer, bare loop and harness, instead of a fixed gap")
    parser.add_argument("--loop", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.baseline:
        if not args.fed_rate or args.paced_rate:
            parser.error("--baseline compares consumers fed at --fed-rate N; it takes no "
                         "--paced-rate")
        try:
            found = subprocess.run([args.baseline, "-P", "-c", "import harness.cli"],
                                   capture_output=True, text=True)
        except OSError as exc:
            parser.error(f"--baseline {args.baseline}: {exc.strerror}")
        if found.returncode:
            parser.error(f"--baseline {args.baseline}: no harness there "
                         f"({(found.stderr.strip().splitlines() or ['cannot run it'])[-1]})")
        BASELINE.append(args.baseline)
        args.together, args.no_unthrottled = True, True
    if args.no_unthrottled and not (args.fed_rate or args.paced_rate):
        parser.error("--no-unthrottled needs --fed-rate or --paced-rate: without them there "
                     "is nothing else to measure, and --fed takes its rate from the "
                     "unthrottled rows")
    if args.paced_rate is not None and args.paced_rate <= 0:
        parser.error(f"--paced-rate must be a positive rate, not {args.paced_rate}")
    if args.fed_rate is not None and args.fed_rate <= 0:
        parser.error(f"--fed-rate must be a positive rate, not {args.fed_rate}")
    if args.sample_seconds <= 0:
        parser.error(f"--sample-seconds must be positive, not {args.sample_seconds:g}")
    SAMPLE[1] = f"{args.sample_seconds:g}"
    if args.poisson and not (args.paced_rate or args.fed_rate or args.loop):
        parser.error("--poisson draws the gaps of --paced-rate N or --fed-rate N: give one")
    POISSON[0] = args.poisson
    args.fed = args.fed or bool(args.fed_rate) or (args.together and not args.paced_rate)
    if args.paired_unthrottled and (args.no_unthrottled or
                                    (args.fed and not args.fed_rate)):
        parser.error("--paired-unthrottled measures the unthrottled producers: it takes no "
                     "--no-unthrottled, and --fed or --together needs --fed-rate N "
                     "beside it")
    if args.loop:
        kind, broker, destination, seconds, *warmup = args.loop
        bare_loop(kind, broker, destination, float(seconds), *map(float, warmup))
        return
    seconds, repeat = args.seconds, args.repeat
    print(f"256-byte messages, producer and consumer in separate processes, {seconds:g} s "
          f"measured after {WARMUP:g} s warm-up; medians of {repeat} alternating runs")
    # Here, not at the top: the bare loops, this script's children, import no harness code
    # (but the microsecond selector of the JetStream loop that waits in its loop).

    from harness.engine.allocator import ENVIRONMENT
    BARE_ENV.update({**os.environ, **ENVIRONMENT})
    gc.disable()  # as message_path.py measures it
    FLOOR[:] = [ns / 1000 for ns in best(lambda: floor_paths(300_000))]
    gc.enable()
    print(f"floor (message_path.py): {FLOOR[0]:.2f} us a message for a producer, "
          f"{FLOOR[1]:.2f} for a consumer; best = (bare + floor) / bare")
    cases = [(f"stomp.{p}", f"stomp.{c}", kind, broker, flags, "stomp-send", "stomp-receive")
             for broker, flags in STOMP.items()
             for p, c, kind in (("Sender", "Receiver", "queue"),
                                ("Publisher", "Subscriber", "topic"))]
    cases.append(("mqtt.Publisher", "mqtt.Subscriber", "topic", "mosquitto", MOSQUITTO,
                  "mqtt-send", "mqtt-receive"))
    for transport, flags in (("amqp", []), ("amqp10", AMQP10)):
        cases += [(f"{transport}.{p}", f"{transport}.{c}", kind, "rabbitmq", flags,
                   f"{transport}-send", f"{transport}-receive")
                  for p, c, kind in (("Sender", "Receiver", "queue"),
                                     ("Publisher", "Subscriber", "topic"))]
    for transport, flags, send in (("nats", [], "nats"), ("nats", ["--jetstream", "--inflight",
                                                                  str(INFLIGHT)], "natsjs"),
                                   ("redis", [], "redis"), ("redis", ["--streams"],
                                                            "redis-stream")):
        for p, c, kind in (("Sender", "Receiver", "queue"), ("Publisher", "Subscriber", "topic")):
            if send == "redis-stream" and kind == "queue":
                continue  # Sender / Receiver are streams already
            label = {"natsjs": "jetstream", "redis-stream": "redis streams"}.get(send, send)
            cases.append((f"{transport}.{p}", f"{transport}.{c}", kind, label, flags,
                          f"{send}-send", f"{send}-receive"))
            if send == "natsjs" and args.paced_rate and not args.fed:
                # Paced, the harness takes each acknowledgement as it comes, to time it: the
                # same row against a bare loop that waits in its loop as well.
                cases.append((f"{transport}.{p}", f"{transport}.{c}", kind,
                              "jetstream, bare loop waiting in its loop", flags,
                              "natsjs-looped-send", f"{send}-receive"))
    cases = [c for c in cases if c[0].startswith(args.only)]
    for producer, consumer, kind, broker, flags, send, receive in cases:
        if send == "natsjs-looped-send":
            pass  # a paced row only: unthrottled, it is the JetStream row's bare loop
        elif args.paired_unthrottled:
            paired_row(f"{producer} ({broker}) unthrottled, together", [
                together_producers(seconds, 0, producer, consumer, flags,
                                   (kind, broker, send, receive), bool(i % 2))
                for i in range(repeat)], FLOOR[0])
        elif not args.no_unthrottled:
            bares, harnesses = compare(
                repeat, functools.partial(bare_case, seconds, kind, broker, send, receive),
                functools.partial(harness_case, seconds, producer, consumer, flags))
            row(f"{producer} ({broker})", [b[0] for b in bares], [h[0] for h in harnesses],
                FLOOR[0])
            row(f"{consumer} ({broker})", [b[1] for b in bares], [h[1] for h in harnesses],
                FLOOR[1])
        if args.paced_rate and args.together:
            paired_row(f"{producer} ({broker}) paced {args.paced_rate:,}/s, together", [
                together_producers(seconds, args.paced_rate, producer, consumer, flags,
                                   (kind, broker, send, receive), bool(i % 2))
                for i in range(repeat)], FLOOR[0])
        elif args.paced_rate:
            paced = compare(repeat, functools.partial(bare_case, seconds, kind, broker, send,
                                                      receive, args.paced_rate),
                            functools.partial(harness_case, seconds, producer, consumer, flags,
                                              args.paced_rate))
            row(f"{producer} ({broker}) paced {args.paced_rate:,}/s", *(
                [x[0] for x in side] for side in paced), FLOOR[0])
        if not args.fed or send.startswith("mqtt"):  # QoS 0 drops: no common load
            continue
        if args.fed_rate:
            rate = args.fed_rate
        else:
            slowest = min(statistics.median(x[i][0] for x in sides)
                          for sides in (bares, harnesses) for i in (0, 1))
            rate = max(1000, int(slowest * FED_SHARE) // 1000 * 1000)
        if args.together:
            paired_row(f"{consumer} ({broker}) fed {rate:,}/s, together", [
                together_consumers(seconds, rate, producer, consumer, flags,
                                   (kind, broker, send, receive), bool(i % 2))
                for i in range(repeat)], FLOOR[1])
            continue
        fed = compare(repeat, functools.partial(fed_consumer, seconds, rate, producer,
                                                consumer, flags, (kind, broker, send, receive)),
                      functools.partial(fed_consumer, seconds, rate, producer, consumer, flags,
                                        None))
        row(f"{consumer} ({broker}) fed {rate:,}/s", *fed, FLOOR[1])

    if args.no_unthrottled:
        return
    if "redis".startswith(args.only[:5]):
        channel = f"bench.{uuid.uuid4().hex[:8]}"

        def one_redis_benchmark() -> float:
            # Redis's own tool, PUBLISH of a 256-byte body, 2 connections pipelining 64.
            n = 400_000
            out = subprocess.run(["redis-benchmark", "-q", "-n", str(n), "-c", "2", "-P", "64",
                                  "PUBLISH", channel, BODY.decode()], capture_output=True,
                                 text=True, check=True).stdout
            return float(out.replace("\r", "\n").split("requests per second")[-2]
                         .split()[-1])

        def one_publishers() -> float:
            return harness(seconds, ["-m", "redis.Publisher", "-d", channel, "--processes",
                                     "2"])["publisher"][0]

        natives, ours = compare(repeat, one_redis_benchmark, one_publishers)
        row("redis.Publisher --processes 2 / redis-benchmark PUBLISH", natives, ours)
    if "http".startswith(args.only[:4]):
        def one_bare_http() -> tuple[float, float]:
            child = subprocess.run([sys.executable, __file__, "--loop", "http-request", "nginx",
                                    "/", str(seconds)], capture_output=True, text=True,
                                   check=True, env=BARE_ENV)
            out = json.loads(child.stdout)
            return out["rate"], out["us"]

        def one_http() -> tuple[float, float]:
            return harness(seconds, ["-m", "http.Requestor", "-d",
                                     "http://127.0.0.1:8090/"])["requestor"]

        bares, ours = compare(repeat, one_bare_http, one_http)
        row("http.Requestor (nginx)", bares, ours, FLOOR[0])  # it sends, as a producer
    if not "mqtt".startswith(args.only[:4]):
        return
    topic = f"bench/{uuid.uuid4().hex[:8]}"

    def one_native() -> float:
        n = 200_000
        started = time.perf_counter()
        subprocess.run(["mosquitto_pub", "-h", "127.0.0.1", "-p", "1883", "-t", topic, "-q",
                        "0", "--repeat", str(n), "-m", BODY.decode()], check=True)
        return n / (time.perf_counter() - started)

    def one_processes() -> float:
        return harness(seconds, ["-m", "mqtt.Publisher", "-d", topic, "--processes", "2",
                                 *MOSQUITTO])["publisher"][0]

    def one_process() -> float:
        return harness(seconds, ["-m", "mqtt.Publisher", "-d", topic,
                                 *MOSQUITTO])["publisher"][0]

    natives, ours = compare(repeat, one_native, one_processes)
    row("mqtt.Publisher --processes 2 / mosquitto_pub", natives, ours)
    natives, ours = compare(repeat, one_native, one_process)
    row("mqtt.Publisher 1 process / mosquitto_pub", natives, ours)


if __name__ == "__main__":
    main()
