#!/usr/bin/env python3
"""The kafka transport against bare confluent-kafka loops: client CPU per message, side by side
against the same broker (Tansu on 127.0.0.1:9092, contrib/brokers/brokers.sh start kafka).

    .venv/bin/python contrib/bench/kafka.py [--seconds 5] [--repeat 3] [--paced-rate 5000]

Rows, each a bare loop and the harness alternately, --repeat times, medians shown:
- producer, unthrottled: produce() of 256-byte bodies (the harness's frame for the bare loop
  too), linger 5 ms, acks all, a delivery report each (the harness times it as its confirm;
  the bare loop's counts it), served every 64 sends;
- producer, paced at --paced-rate: the same, each send when due, waiting in poll();
- consumer, fed: a harness Sender paced at --fed-rate fills a topic while the bare consumer
  loop (consume() of up to 500) or a harness Receiver reads it, each in a group of its own;
- then an unthrottled harness Sender group in --processes 2 against 1, by its rate.
CPU per message is the process's CPU time (every thread, librdkafka's own included) over the
messages it counted in the window after one second of warm-up, for the bare loop; the run's
client_us_per_msg for the harness. The issue's bar: harness / bare at most 1.15.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BROKER = "127.0.0.1:9092"
WARMUP = 1.0
BODY = 256


def bare(kind: str, topic: str, seconds: float, rate: float) -> float:
    """A bare loop in a child process: its CPU us per message over the window."""
    code = f"""
import resource, time, sys
from confluent_kafka import Producer, Consumer
kind, topic, seconds, rate = {kind!r}, {topic!r}, {seconds}, {rate}
payload = bytes(38) + bytes({BODY})
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
count = [0]
start = time.monotonic()
if kind == "produce":
    p = Producer({{"bootstrap.servers": "{BROKER}", "linger.ms": 5, "acks": "all"}})
    def report(err, msg):
        count[0] += 1
    n = 0
    mark = None
    while True:
        now = time.monotonic()
        if mark is None and now - start >= {WARMUP}:
            mark = (cpu(), count[0])
        if now - start >= {WARMUP} + seconds:
            break
        try:
            p.produce(topic, payload, on_delivery=report)
        except BufferError:
            p.poll(0.001)
            continue
        n += 1
        if n % 64 == 0:
            p.poll(0)
        if rate:
            due = start + n / rate
            while (left := due - time.monotonic()) >= 0.001:
                p.poll(left)
            if left > 0:
                time.sleep(left)
    used, counted = cpu() - mark[0], count[0] - mark[1]
else:
    c = Consumer({{"bootstrap.servers": "{BROKER}", "group.id": "bare-" + topic,
                  "auto.offset.reset": "latest", "max.poll.interval.ms": 10000,
                  "session.timeout.ms": 6000, "topic.metadata.refresh.interval.ms": 1000}})
    c.subscribe([topic])
    first = None
    mark = None
    while True:
        got = c.consume(500, 0.1)
        now = time.monotonic()
        if got and first is None:
            first = now
        if first is not None and mark is None and now - first >= {WARMUP}:
            mark = (cpu(), count[0])
        if first is not None and now - first >= {WARMUP} + seconds:
            break
        count[0] += len(got)
    used, counted = cpu() - mark[0], count[0] - mark[1]
print(used * 1e6 / max(counted, 1))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    return float(out.stdout.split()[-1])


def harness(groups: list[str], seconds: float, group: str, figure: str = "client_us_per_msg",
            warmup: float = 1.0) -> float:
    """A harness run: one of the group's figures over the measured span after `warmup`
    seconds (a consumer group forms in about 3 s on Tansu: 4 for a consumer)."""
    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, "-m", "harness", "run", *groups, "-sw", str(warmup), "-rl",
                   str(warmup + seconds), "-ss", "1", "--drain", "2", "-o", out, "--no-ui"]
        subprocess.run(command, check=True, capture_output=True, cwd=ROOT, timeout=300)
        (run_dir,) = Path(out).iterdir()
        summary = json.loads((run_dir / "summary.json").read_text())
    return summary["groups"][group][figure]


def fed_bare(topic: str, seconds: float, rate: float) -> float:
    """The bare consumer, fed by a harness Sender paced at rate."""
    with tempfile.TemporaryDirectory() as out:
        feeder = subprocess.Popen(
            [sys.executable, "-m", "harness", "run", "-m", "kafka.Sender", "-d", topic, "-rt",
             str(rate), "-rl", str(seconds + 12), "-o", out, "--no-ui"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
        try:
            return bare("consume", topic, seconds, 0)
        finally:
            feeder.kill()
            feeder.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds a run")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each, alternating")
    parser.add_argument("--paced-rate", type=float, default=5000, help="the paced rows' rate")
    parser.add_argument("--fed-rate", type=float, default=5000, help="the consumer's feed")
    args = parser.parse_args()
    rows: dict[str, tuple[list[float], list[float]]] = {}

    def topic() -> str:
        return f"bench-{uuid.uuid4().hex[:10]}"

    for _ in range(args.repeat):
        for label, rate in (("producer, unthrottled", 0.0),
                            (f"producer, paced {args.paced_rate:g}/s", args.paced_rate)):
            bares, ours = rows.setdefault(label, ([], []))
            bares.append(bare("produce", topic(), args.seconds, rate))
            pace = ["-rt", str(rate)] if rate else []
            ours.append(harness(["-m", "kafka.Sender", "-d", topic(), *pace], args.seconds,
                                "sender"))
        label = f"consumer, fed {args.fed_rate:g}/s"
        bares, ours = rows.setdefault(label, ([], []))
        bares.append(fed_bare(topic(), args.seconds, args.fed_rate))
        name = topic()
        ours.append(harness(["-m", "kafka.Sender", "-d", name, "-rt", str(args.fed_rate),
                             "-g", f"-m kafka.Receiver -d {name}"], args.seconds, "receiver",
                            warmup=4.0))
    print(f"{'row':<28} {'bare us/msg':>12} {'harness us/msg':>15} {'harness / bare':>15}")
    for label, (bares, ours) in rows.items():
        b, h = statistics.median(bares), statistics.median(ours)
        print(f"{label:<28} {b:>12.1f} {h:>15.1f} {h / b:>15.2f}")
    # Scaling out: an unthrottled Sender group in two processes against one, by its rate.
    rates: dict[int, list[float]] = {1: [], 2: []}
    for _ in range(args.repeat):
        for processes in rates:
            rates[processes].append(harness(
                ["-m", "kafka.Sender", "-d", topic(), "--processes", str(processes)],
                args.seconds, "sender", "rate"))
    one, two = statistics.median(rates[1]), statistics.median(rates[2])
    print(f"unthrottled sender rate: 1 process {one:,.0f} msg/s, 2 processes {two:,.0f} "
          f"msg/s, 2 / 1 = {two / one:.2f}")


if __name__ == "__main__":
    main()
