#!/usr/bin/env python3
"""Many MQTT clients on one thread (--clients) against a bare paho loop driving as many from
one selector: client CPU per message, side by side against the same Mosquitto (127.0.0.1:1883,
contrib/brokers/brokers.sh start).

    .venv/bin/python contrib/bench/clients.py [--clients 10000] [--seconds 20] [--repeat 1]

Each client publishes once a second (QoS 1, 256-byte bodies, the harness's frame for the bare
loop too), spread evenly over the second; the clients connect first (the bare loop one after
another, the harness at --connect-rate), then a warm-up of --warmup seconds, then the window.
CPU per message is the process's CPU time (every thread) over the messages sent in the window,
for the bare loop; the run's client_us_per_msg for the harness, which also gives its connect
times. The issue's bar: harness / bare at most 1.2.
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
BODY = 256


def bare(clients: int, topic: str, warmup: float, seconds: float) -> float:
    """The bare loop in a child process: its CPU us per message over the window."""
    code = f"""
import heapq, resource, select, time
import paho.mqtt.client as paho
clients, topic, warmup, seconds = {clients}, {topic!r}, {warmup}, {seconds}
payload = bytes(38) + bytes({BODY})
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
def ignore(*args):
    pass
epoll = select.epoll()
by_fd = {{}}
made = []
for i in range(clients):
    c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=f"bare-{{i}}-{{topic}}")
    c.on_socket_register_write = ignore
    c.max_inflight_messages_set(20)
    c.connect("127.0.0.1", 1883, 60)
    waiting = select.poll()
    waiting.register(c.socket(), select.POLLIN)
    while not c.is_connected():
        c.loop_write()
        waiting.poll(1000)
        c.loop_read()
    fd = c.socket().fileno()
    epoll.register(fd, select.EPOLLIN)
    by_fd[fd] = c
    made.append(c)
start = time.monotonic()
heap = [(start + i / clients, i) for i in range(clients)]
heapq.heapify(heap)
sent, mark, misc = 0, None, start + 5
while True:
    now = time.monotonic()
    if mark is None and now - start >= warmup:
        mark = (cpu(), sent)
    if now - start >= warmup + seconds:
        break
    if heap[0][0] <= now:
        due, i = heap[0]
        c = made[i]
        c.publish(topic, payload, 1)
        c.loop_write()
        sent += 1
        heapq.heapreplace(heap, (due + 1.0, i))
        continue
    if now >= misc:
        misc = now + 5
        for c in made:
            c.loop_misc()
        continue
    for fd, _ in epoll.poll(max(heap[0][0] - now, 0)):
        by_fd[fd].loop_read()
used, counted = cpu() - mark[0], sent - mark[1]
for c in made:
    c.disconnect()
    c.loop_write()
print(used * 1e6 / max(counted, 1))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=600)
    return float(out.stdout.split()[-1])


def harness(clients: int, topic: str, warmup: float, seconds: float,
            connect_rate: float) -> dict[str, float]:
    """A harness run of the same clients: its figures over the measured span."""
    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, "-m", "harness", "run", "-m", "mqtt.Publisher", "-d", topic,
                   "--qos", "1", "--clients", str(clients), "--rate", str(clients),
                   "--connect-rate", str(connect_rate), "-sw", str(warmup), "-rl",
                   str(warmup + seconds), "-ss", str(seconds), "-o", out, "--no-ui"]
        subprocess.run(command, check=True, capture_output=True, cwd=ROOT, timeout=600)
        (run_dir,) = Path(out).iterdir()
        group = json.loads((run_dir / "summary.json").read_text())["groups"]["publisher"]
        connects = [json.loads(line) for line in (run_dir / "intervals.jsonl").open()
                    if '"publisher.connect"' in line]
    return {"us": group["client_us_per_msg"], "rate": group["rate"],
            "connected": sum(r["count"] for r in connects)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=10_000, help="clients, each 1 msg/s")
    parser.add_argument("--seconds", type=float, default=20.0, help="the measured window")
    parser.add_argument("--warmup", type=float, default=10.0,
                        help="seconds before the window (the harness connects in them)")
    parser.add_argument("--connect-rate", type=float, default=2000.0,
                        help="the harness's --connect-rate")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each, alternating")
    args = parser.parse_args()
    bares, ours, rates, connected = [], [], [], []
    for _ in range(args.repeat):
        bares.append(bare(args.clients, f"bench/{uuid.uuid4().hex[:8]}", args.warmup,
                          args.seconds))
        got = harness(args.clients, f"bench/{uuid.uuid4().hex[:8]}", args.warmup,
                      args.seconds, args.connect_rate)
        ours.append(got["us"])
        rates.append(got["rate"])
        connected.append(got["connected"])
    b, h = statistics.median(bares), statistics.median(ours)
    print(f"{'row':<34} {'bare us/msg':>12} {'harness us/msg':>15} {'harness / bare':>15}")
    print(f"{f'{args.clients:,} clients at 1 msg/s':<34} {b:>12.1f} {h:>15.1f} {h / b:>15.2f}")
    print(f"harness: {statistics.median(rates):,.1f} msg/s sent of {args.clients:,} asked, "
          f"{min(connected):,} of {args.clients:,} clients connected")


if __name__ == "__main__":
    main()
