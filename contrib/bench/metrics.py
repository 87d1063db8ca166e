#!/usr/bin/env python3
"""Throughput and p99 with the Prometheus endpoint scraped every second against without it,
in one run; or (--page) with the run's page open in a browser against without it.

    .venv/bin/python contrib/bench/metrics.py [--seconds 10] [--pairs 3] [--page browser|screen]

Each pair runs the same loopback job (an unthrottled sender and a receiver on one queue, or
with --rate a paced one) twice, in alternating order: once plain, once with --metrics-port
and a thread that fetches /metrics every second as a Prometheus server would, asking for
OpenMetrics; with --page, once with --serve and its page open: in headless Chromium on this
machine (browser), or its WebSocket read without drawing (screen: the screen the page starts
runs here, four refreshes a second, in a process of its own; the browser is elsewhere). The script
prints each run's measured-phase receive rate and receiver latency
p99, and the median ratios with / without (the thresholds and dashboards issue asks for a
rate ratio of at least 0.97 and no change in p99 beyond run-to-run noise).
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WARMUP = 2.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int, stop: threading.Event, seen: list[int]) -> None:
    """Once a second, as Prometheus does, until stopped; counts the scrapes that answered."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={
        "Accept": "application/openmetrics-text; version=1.0.0"})
    while not stop.wait(1.0):
        try:
            with urllib.request.urlopen(request, timeout=2) as response:
                response.read()
            seen[0] += 1
        except OSError:
            pass  # not serving yet, or no more


def screen_only(port: int, stop: threading.Event, seen: list[int]) -> None:
    """The page's WebSocket opened and read as a browser would, drawing nothing: the screen
    the page starts runs on this machine, its browser elsewhere."""
    import websocket

    while not stop.is_set():
        try:
            ws = websocket.create_connection(f"ws://127.0.0.1:{port}/ws?width=160&height=48",
                                             timeout=1)
            break
        except OSError:
            stop.wait(0.3)
    else:
        return
    seen[0] += 1
    while not stop.is_set():
        try:
            ws.recv()
        except websocket.WebSocketTimeoutException:
            continue
        except (OSError, websocket.WebSocketException):
            return
    ws.close()


def watch(port: int, stop: threading.Event, seen: list[int]) -> None:
    """The run's page open in headless Chromium until stopped; counts the pages opened."""
    sys.path.insert(0, str(ROOT))
    from tests.browser import Page

    page = Page()
    try:
        while not stop.is_set():
            try:
                page.goto(f"http://127.0.0.1:{port}/")
                page.wait_for("following", seconds=20)
                seen[0] += 1
                break
            except (AssertionError, OSError):
                stop.wait(0.5)  # not serving yet
        stop.wait()
    finally:
        page.close()


def measure(seconds: float, rate: int, scraped: bool, page: str = ""
            ) -> tuple[float, float, int]:
    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, "-m", "harness", "run", "-m", "loopback.Sender", "-d", "Q",
                   "-sw", str(WARMUP), "-rl", str(WARMUP + seconds), "-ss", "1", "-o", out,
                   "--no-ui", "-g", "-m loopback.Receiver -d Q"]
        if rate:
            command += ["-rt", str(rate)]
        seen, stop = [0], threading.Event()
        if scraped:
            port = free_port()
            command += ["--serve" if page else "--metrics-port", str(port)]
            reader = {"": scrape, "browser": watch, "screen": screen_only}[page]
            threading.Thread(target=reader, args=(port, stop, seen), daemon=True).start()
        try:
            subprocess.run(command, check=True, capture_output=True, cwd=ROOT)
        finally:
            stop.set()
        (run_dir,) = Path(out).iterdir()
        receiver = json.loads((run_dir / "summary.json").read_text())["groups"]["receiver"]
    return receiver["rate"], receiver["latency"]["p99"], seen[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds a run")
    parser.add_argument("--pairs", type=int, default=3, help="runs with and without")
    parser.add_argument("--rate", type=int, default=0, help="the sender's rate (0: unthrottled)")
    parser.add_argument("--page", choices=("browser", "screen"), default="",
                        help="with the run's page open (--serve) instead of the metrics "
                        "endpoint scraped: in headless Chromium on this machine, or its screen "
                        "only (the page's WebSocket read, the browser elsewhere)")
    args = parser.parse_args()
    what = f"--serve, page open ({args.page})" if args.page else "--metrics-port"
    rates: list[float] = []
    p99s: list[float] = []
    for pair in range(args.pairs):
        order = (False, True) if pair % 2 == 0 else (True, False)
        results = {}
        for scraped in order:
            results[scraped] = measure(args.seconds, args.rate, scraped, args.page)
        (plain_rate, plain_p99, _), (with_rate, with_p99, scrapes) = results[False], \
            results[True]
        rates.append(with_rate / plain_rate)
        p99s.append(with_p99 / plain_p99 if plain_p99 else float("nan"))
        print(f"pair {pair + 1}: without {plain_rate:,.0f} msg/s p99 {plain_p99} us; with "
              f"{what} ({scrapes} {'pages' if args.page else 'scrapes'}) {with_rate:,.0f} msg/s "
              f"p99 {with_p99} us",
              flush=True)
    print(f"rate with / without: median {statistics.median(rates):.3f} "
          f"({', '.join(f'{r:.3f}' for r in rates)})")
    print(f"p99 with / without: median {statistics.median(p99s):.2f} "
          f"({', '.join(f'{r:.2f}' for r in p99s)})")


if __name__ == "__main__":
    main()
