"""What the NATS transport's parts share: its timeouts and limits, and the helpers for
nats-py's coroutines and errors."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from functools import cache
from typing import Any

from harness.modules.interface.base import TransportError
from harness.modules.kit.library import library

# nats-py, imported at its first use (harness.modules.kit.library)
nats = library("nats", "errors", "js", "js.errors", "js.api")
api = library("nats.js.api")

DEFAULT_PORT = 4222
CONNECT_TIMEOUT_S = 5
# How long a consumer closing waits for its pending count, for the run's last interval.
PENDING_AT_CLOSE_S = 2.0
CALL_TIMEOUT_S = 10.0  # stream and consumer management, fetch requests
ACK_TIMEOUT_S = 10.0  # a JetStream publish not acknowledged by then is in doubt
CLOSE_TIMEOUT_S = 10.0
RECONNECT_WAIT_S = 0.5
# nats-py's buffer for commands not yet written (its default, given explicitly). A core NATS
# publish is driven on the worker's thread while it leaves that buffer at least half free: a
# publish that would pass it waits for nats-py's flusher, which only the loop can run.
PENDING_SIZE = 2 * 1024 * 1024
# The passes of the loop a readable client is turned for at most: what a read wakes is a
# pass behind it (nats-py's reader task, a subscription's task, its flusher).
READABLE_PASSES = 16
BY_HAND_FIRST = 16  # below write_every: a send published by hand never owes a write
QUEUE_GROUP = "harness"


# The status the server answers a request with when nothing subscribes to its subject.
NO_RESPONDERS = "503"


class _Resumed:
    """A coroutine that began outside the loop and waits, continued by the task that awaits
    this: what it waits for is handed to that task, as its own await would have."""

    def __init__(self, coroutine: Any, waiting: Any) -> None:
        self.coroutine, self.waiting = coroutine, waiting

    def __await__(self) -> Any:
        coroutine, waiting = self.coroutine, self.waiting
        while True:
            try:
                try:
                    yield waiting
                except BaseException as exc:  # the task cancelled, or what it waited for failed
                    waiting = coroutine.throw(exc)
                else:
                    waiting = coroutine.send(None)
            except StopIteration as stop:
                return stop.value


@cache
def in_doubt() -> tuple[type[BaseException], ...]:
    """What a publish's acknowledgement can end with that says nothing of the message: in
    doubt (asked at every acknowledgement: made once)."""
    return (asyncio.TimeoutError, nats.errors.TimeoutError, nats.errors.ConnectionClosedError)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _require_tls(host: str, port: int) -> None:
    """nats-py upgrades to TLS only when the server's INFO requires it: given a TLS context,
    it still speaks in clear (credentials included) to a server that does not. --tls must
    never do that, so the INFO is read first, on a connection of our own."""
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S) as sock:
            line = sock.makefile("rb").readline(65536)
    except OSError as exc:
        raise TransportError(f"cannot connect to {host}:{port}: {exc.strerror or exc}",
                             kind="connect") from None
    try:
        info = json.loads(line.partition(b" ")[2]) if line.startswith(b"INFO ") else {}
    except ValueError:
        info = {}
    if not info.get("tls_required"):
        raise TransportError(f"--tls: the server at {host}:{port} does not require TLS, and "
                             "nats-py would connect to it in clear", kind="connect")


def _reason(exc: BaseException | None) -> str:
    if exc is None:
        return "no answer"
    if isinstance(exc, nats.js.errors.APIError) and exc.description:
        return f"{exc.code} {exc.description}"
    if isinstance(exc, ConnectionError) and exc.errno:
        return os.strerror(exc.errno)  # asyncio's own words name only the address
    text = str(exc).removeprefix("nats: ")
    return text or type(exc).__name__

