"""The NATS transport: its parts (connection, loop, publishing, consuming, streams)
composed, its capabilities, its state, and its close."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from harness.modules.interface.base import Capability
from harness.modules.interface.message import Destination
from harness.modules.interface.optional import (
    Acknowledgements,
    Declarations,
    FramedSends,
    Multiplexed,
    TemporaryQueues,
)
from harness.modules.interface.settings import Settings
from harness.modules.kit.client_config import config_problems
from harness.modules.kit.driven import DrivenTransport
from harness.modules.kit.selector import MicrosecondSelector
from harness.modules.kit.turned import TurnedLoop
from harness.modules.kit.unheard import Unheard
from harness.modules.nats.common import (
    CLOSE_TIMEOUT_S,
    DEFAULT_PORT,
    PENDING_AT_CLOSE_S,
    READABLE_PASSES,
)
from harness.modules.nats.connection import Connection
from harness.modules.nats.consuming import Consuming
from harness.modules.nats.loop import Turning
from harness.modules.nats.options import (
    ACK_MODES,
    BAD_STREAM_NAME,
    CORE,
    JETSTREAM,
    RETENTIONS,
    STORAGES,
    NatsOptions,
    _auth_problems,
    _subject_problems,
    client_settings,
)
from harness.modules.nats.publishing import Publishing
from harness.modules.nats.streams import Streams


class NatsTransport(Turning, Publishing, Connection, Streams, Consuming, DrivenTransport,
                    Declarations, FramedSends, Acknowledgements, TemporaryQueues,
                    Multiplexed):
    # nats-py's publish is cheap next to a turn of the loop: a turn every 64 sends was a
    # large share of an unthrottled producer's cost (the bare loop writes only when
    # nats-py's buffer fills).
    write_every = 256
    confirmations = "JetStream publish acknowledgements"
    name = "nats"
    files = 4  # the socket, and its own event loop's epoll and self-pipe
    default_port = DEFAULT_PORT
    description = "NATS via nats-py: core NATS and JetStream (--jetstream)"
    capabilities = CORE | JETSTREAM
    Options = NatsOptions
    settings: Settings[NatsOptions]

    @classmethod
    def capabilities_for(cls, settings: Settings[NatsOptions]) -> Capability:
        return JETSTREAM if settings.options.jetstream else CORE

    @classmethod
    def confirms(cls, settings: Settings[NatsOptions]) -> bool:
        return settings.options.jetstream

    @classmethod
    def problems(cls, settings: Settings[NatsOptions]) -> list[tuple[str, str]]:
        o = settings.options
        out = []
        if settings.selector:
            out.append(("--selector", "NATS has no selectors; subscribe to a narrower subject "
                        "(wildcards * and >) instead"))
        out.extend(("-d", problem) for problem in _subject_problems(settings))
        out.extend(_auth_problems(settings))
        out.extend(config_problems(o.client_config, client_settings))
        if o.stream and BAD_STREAM_NAME.search(o.stream):
            out.append(("--stream", f"{o.stream!r}: a stream name takes no '.', '*', '>', "
                        "'/', '\\' or white space"))
        if o.storage not in STORAGES:
            out.append(("--storage", f"storage is {' or '.join(STORAGES)}"))
        if o.retention not in RETENTIONS:
            out.append(("--retention", f"retention is {', '.join(RETENTIONS)}"))
        if o.ack not in ACK_MODES:
            out.append(("--ack", f"acknowledgement modes are {', '.join(ACK_MODES)}"))
        if not o.jetstream:
            for flag, given in (("--stream", o.stream), ("--pull-batch", o.pull_batch),
                                ("--ack-wait", o.ack_wait),
                                ("--durable-name", settings.durable_name)):
                if given:
                    out.append((flag, "is for JetStream: add --jetstream"))
            if settings.persistent:
                out.append(("-pp", "core NATS keeps nothing: add --jetstream for a stream "
                            "with file storage"))
            if o.ack != "auto":
                out.append(("--ack", "core NATS has no acknowledgements: add --jetstream"))
            if o.prefetch:
                out.append(("--prefetch", "is JetStream's max-ack-pending; core NATS "
                            "delivers as messages come: add --jetstream"))
        else:
            if settings.asks or settings.replies:
                out.append(("--jetstream", "request/reply is core NATS's: drop --jetstream"))
            if settings.persistent and o.storage == "memory":
                out.append(("-pp", "a memory stream does not persist: --storage file"))
            if o.pull_batch and settings.on_topic and settings.consumes and \
                    not settings.durable_name:
                out.append(("--pull-batch", "a pull Subscriber needs a durable consumer: give "
                            "--durable-name"))
        return out

    def __init__(self, settings: Settings[NatsOptions]) -> None:
        super().__init__(settings)
        self.o = settings.options
        self.loop = TurnedLoop(MicrosecondSelector() if self.exact_waits else None)
        self.nc: Any = None
        self.js: Any = None
        self.sub: Any = None
        self.pull: Any = None  # a JetStream pull subscription
        self.closing = False
        # (subject, payload, reply, headers, seq, sent ns) queued by send(); messages to ack
        self.queued: list[tuple[str, bytes, str, dict[str, str] | None, int, int]] = []
        # Core NATS publishes that waited after all when driven off the loop (send_frame),
        # each with what it waits for and its sequence number: the next turn continues them.
        self.resuming: list[tuple[Any, Any, int]] = []
        self.loop_thread = 0  # the thread whose current event loop is self.loop
        self.to_ack: list[Any] = []
        self.acks_on_arrival = False  # JetStream with --ack auto
        # An ack subject's start up to a first delivery's count; none begins with NUL, so the
        # first message sets it.
        self.first_delivery = "\0"
        self.waiter: asyncio.Future[None] | None = None
        self.streams: set[str] = set()
        self.send_stream: str | None = None  # the stream a JetStream producer publishes to
        self.watched: asyncio.Future[Any] | None = None  # the publish _acked waits for
        # In _await_acks, how many publishes may await acknowledgement for its turn to end
        self.room_at = -1
        self.stops_on_arrival = False  # in a wait of _turn's without its task
        self.connect_failed: asyncio.Future[Exception] | None = None
        # The task that turns the loop (_turn), woken by kick for each turn
        self.turner: asyncio.Task[None] | None = None
        self.kick: asyncio.Future[None] | None = None
        self.turn_for = 0.0
        self.failure: Exception | None = None
        # The liveness check (_watch): its next run, and when the server was last heard
        self.watcher: asyncio.TimerHandle | None = None
        self.heard: float | None = None
        self.progress = 0
        # A core publisher's sends: the last written before the latest PING, and the last
        # the server has surely read (its PONG to a PING written after it came back)
        self.unheard = Unheard()
        self.down = False  # lost, and nats-py reconnecting

    # -- many clients a thread (--clients)
    consumer_clients = True

    @classmethod
    def multiplexes(cls, settings: Settings[Any]) -> bool:
        # A pull consumer's fetches are requests a task of the loop waits on: a connection
        # a thread.
        return super().multiplexes(settings) and not settings.options.pull_batch

    @classmethod
    def multiplexed_roles(cls) -> str:
        return "Sender, Publisher, Receiver and Subscriber (JetStream: push consumers)"

    def fileno(self) -> int:
        # The epoll this connection's event loop waits on, readable while one of its own
        # descriptors is (the socket, the loop's self-pipe), the same through nats-py's
        # reconnects.
        loop = self.loop
        return -1 if self.nc is None or loop.is_closed() else loop._selector.fileno()  # type: ignore[attr-defined]

    def readable(self) -> None:
        """Turn the loop until what the socket brought has gone through nats-py's tasks (its
        reader, a subscription's, its flusher: each a pass after the one before)."""
        if self.nc is None or self.dispatching or self.loop.is_closed():
            return
        loop = self.loop
        for _ in range(READABLE_PASSES):
            loop.turn(once=True)
            if not loop._ready:  # type: ignore[attr-defined]
                break

    def temporary_queue(self) -> Destination:
        if not self.connected:
            self._check()
        return Destination("queue", self.nc.new_inbox())

    def close(self) -> None:
        nc = self.nc
        if nc is None:
            self._stop_turner()
            self.loop.close()
            return
        try:
            if self.connected:
                with contextlib.suppress(Exception):
                    self._await_acks(0)  # within ACK_TIMEOUT_S: then they count as failed
                consumer = self.pull or self.sub
                if self.gauge is not None and consumer is not None:
                    # What was left, for the run's last interval.
                    task = self.loop.create_task(asyncio.wait_for(consumer.consumer_info(),
                                                                  PENDING_AT_CLOSE_S))
                    self.info_asks += 1
                    with contextlib.suppress(Exception):
                        self.loop.run_until_complete(task)
                    self._pending(task)
            self.closing = True
            self._stop_turner()
            with contextlib.suppress(Exception):
                self.loop.run_until_complete(asyncio.wait_for(nc.close(), CLOSE_TIMEOUT_S))
        finally:
            if self.watcher is not None:
                self.watcher.cancel()
            # What a close that found the server silent left waiting (nats-py's reader, a
            # subscription's task), ended here: a task pending at the loop's close is a
            # traceback on stderr.
            tasks = [task for task in asyncio.all_tasks(self.loop) if not task.done()]
            for task in tasks:
                task.cancel()
            with contextlib.suppress(Exception):
                self.loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            self.connected = False
            for future, seq, _ in self.pending:
                if not future.done():
                    self.feedback.doubt.append((seq, "closed before the server acknowledged "
                                                "the publish"))
            self.pending.clear()
            self.nc = None
            with contextlib.suppress(Exception):
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

