"""NATS through nats-py: core NATS (subjects, queue groups, request/reply on inbox subjects)
and JetStream (--jetstream: streams, publish acknowledgements, push and pull consumers).

nats-py is asyncio. Each transport has an event loop of its own, and the worker thread that
owns the transport turns it, as the amqp transport turns pika's: a send is queued, and every
write_every sends, before the producer sleeps and before a Requestor waits, one turn of the
loop publishes what is queued (nats-py's publish, back to back) and lets nats-py's flusher
write it in one go; a consumer's receive turns the loop, whose subscription callback takes
each message in on this same thread, with no hand-off. A turn that publishes wakes one
long-lived task and runs the loop until that task has done the turn's work (_turn), which
costs more than a bare publish loop's pass (contrib/bench/loop_turn.py measures it). So the
first core NATS sends since a write (a paced producer's) are not queued: nats-py's publish
coroutine is driven to its end on this thread outside the loop (in send_frame), and the
write is one pass of the loop for nats-py's flusher. The thread enters the loop through
TurnedLoop.turn() (harness.modules.kit.turned), not run_forever(), which is cheaper with the
caches cold. A turn that only waits (a consumer's receive, a JetStream producer waiting for
its next send with acknowledgements outstanding) runs the loop until its timer, or what it
waits for, stops it, with no task: each acknowledgement is timed as it arrives without the
producer's thread leaving the loop. nats-py reconnects by itself while the loop turns; its
disconnect and reconnect callbacks count the outage. What these choices save is in
contrib/bench/RESULTS.md.

The harness's fields travel in front of the body (harness.modules.interface.message.frame): nats-py
parses headers in Python, which would cost a consumer more than the rest of the message;
--property values are NATS headers.

Core NATS keeps nothing: a subscriber the server finds too slow is disconnected (an error
`disconnected` and an outage) and what it missed is gone; nats-py connects and subscribes
again, and the sequence numbers show exactly which messages (lost = sent - received).

JetStream: a stream (--stream, default `harness-` and the subject) is created if missing, with
--storage and --retention. Every publish is acknowledged by the server; --inflight keeps that
many acknowledgements outstanding, each timed as the `confirm` metric; a negative one is a
refused send, a missing one (after ACK_TIMEOUT_S, or the connection lost) in doubt. Receivers
share one durable consumer (push with a deliver group, or pull with --pull-batch N), each
Subscriber has its own (ephemeral, or durable with --durable-name); --prefetch is max-ack-
pending; messages are acknowledged one by one, and a message the server delivers again (another
consumer held it past --ack-wait, or this one's acknowledgement was lost) counts as
`redelivered`, and as a duplicate where this consumer had it already.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import re
import socket
import ssl
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import nats
import nats.errors
import nats.js.errors
from harness.modules.interface.base import Capability, TransportError
from harness.modules.interface.message import Destination, Message, frame, unframe
from harness.modules.interface.optional import (
    Acknowledgements,
    Declarations,
    FramedSends,
    Multiplexed,
    TemporaryQueues,
)
from harness.modules.interface.options import HEARTBEAT_S, option
from harness.modules.interface.settings import Settings
from harness.modules.kit.driven import DrivenTransport
from harness.modules.kit.selector import MicrosecondSelector
from harness.modules.kit.turned import TurnedLoop
from harness.modules.kit.unheard import Unheard
from nats.js import api

from harness.clock import now_ns

DEFAULT_PORT = 4222
CONNECT_TIMEOUT_S = 5
# How long a consumer closing waits for its pending count, for the run's last interval.
PENDING_AT_CLOSE_S = 2.0
CALL_TIMEOUT_S = 10.0  # stream and consumer management, fetch requests
ACK_TIMEOUT_S = 10.0  # a JetStream publish not acknowledged by then is in doubt
# What a publish's acknowledgement can end with that says nothing of the message: in doubt.
IN_DOUBT = (asyncio.TimeoutError, nats.errors.TimeoutError, nats.errors.ConnectionClosedError)
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
STORAGES = ("file", "memory")
RETENTIONS = {"limits": api.RetentionPolicy.LIMITS, "workqueue": api.RetentionPolicy.WORK_QUEUE,
              "interest": api.RetentionPolicy.INTEREST}
ACK_MODES = ("auto", "client", "client-individual")

# Properties travel as NATS headers, core and JetStream alike.
CORE = Capability.QUEUES | Capability.TOPICS | Capability.REQUEST_REPLY | \
    Capability.TEMP_QUEUES | Capability.PROPERTIES
JETSTREAM = Capability.QUEUES | Capability.TOPICS | Capability.PERSISTENT | \
    Capability.DURABLE | Capability.PROPERTIES


@dataclass(frozen=True)
class NatsOptions:
    heartbeat: float = option(HEARTBEAT_S, "", scope="connection", low=0)
    jetstream: bool = option(False, "NATS JetStream: publish to a stream (acknowledged by the "
                             "server) and consume through JetStream consumers.")
    stream: str | None = option(None, "JetStream stream name, created if missing (default: "
                                "harness- and the subject).")
    storage: str = option("file", "JetStream stream storage: file or memory.")
    retention: str = option("limits", "JetStream stream retention: limits, workqueue or "
                            "interest.")
    pull_batch: int = option(0, "JetStream pull consumer fetching N messages a request; 0 = a "
                             "push consumer.", low=0, side="receive")
    ack_wait: float = option(0.0, "JetStream: seconds a consumer's message may stay "
                             "unacknowledged before the server delivers it again (counted as "
                             "redelivered); 0 = the server's default, 30 s.", low=0, side="receive")
    pending_limit: int = option(0, "Messages a subscription may hold before nats-py drops "
                                "new ones as a slow consumer (counted as errors and lost); "
                                "0 = nats-py's default, 524,288.", low=0, side="receive")
    prefetch: int = option(0, "", scope="connection", low=0, side="receive")
    inflight: int = option(20, "", scope="connection", low=1, high=65535, side="send")
    ack: str = option("auto", "", scope="connection", side="receive")
    token: bool = option(False, "Authenticate with a token: the secret given by --password, "
                         "--password-env or --password-file, sent with no user.")
    nkey: str | None = option(None, "Authenticate with an nkey: the file holding its seed "
                              "(SU...), which signs the server's challenge; read at every "
                              "connection, so that a new seed takes effect at the next.")
    creds: str | None = option(None, "Authenticate as the user of a credentials file (.creds, "
                               "as nsc writes it: the user's JWT and nkey seed), for a server in "
                               "operator mode; read at every connection.")


def stream_name(subject: str) -> str:
    """A stream name from a subject: stream names take no dots, wildcards or spaces."""
    return "harness-" + re.sub(r"[^A-Za-z0-9_-]", "_", subject)


# The status the server answers a request with when nothing subscribes to its subject.
NO_RESPONDERS = "503"
BAD_STREAM_NAME = re.compile(r"[.*>/\\\s]|[^ -~]")


def _subject_problems(settings: Settings[Any]) -> list[str]:
    """What the protocol would misread: white space splits a PUB line (a second word is
    taken for the reply subject), and a producer's wildcard matches no subscription."""
    subject = settings.destination
    if not subject:
        return []
    if re.search(r"\s", subject):
        return [f"{subject!r}: a NATS subject takes no white space"]
    if "" in subject.split("."):
        return [f"{subject!r}: a NATS subject has no empty token (no leading, trailing or "
                "double '.')"]
    if settings.publishes and any(token in ("*", ">") for token in subject.split(".")):
        return [f"{subject!r}: {settings.role} publishes; wildcards (* and >) are for "
                "subscribing"]
    return []


# What a credentials file holds, in the markers nats-py looks for (it reads a file without
# the first for ever).
CREDS_MARKERS = ("BEGIN NATS USER JWT", "BEGIN USER NKEY SEED")


def _auth_problems(settings: Settings[NatsOptions]) -> list[tuple[str, str]]:
    """One way to authenticate, complete, its file readable and of its kind: nats-py would
    send a token and a user together, and hang on a credentials file without a JWT."""
    o = settings.options
    given = [flag for flag, on in (("--token", o.token), ("--nkey", o.nkey),
                                   ("--creds", o.creds)) if on]
    if len(given) > 1:
        return [(given[1], f"authenticates another way than {given[0]}: give one")]
    if not given:
        return []
    flag, out = given[0], []
    if settings.user:
        out.append((flag, "authenticates without a user: drop --user"))
    if o.token:
        if not settings.password:
            out.append((flag, "sends the password as the token: give --password-env or "
                        "--password-file"))
        return out
    path = o.nkey or o.creds
    assert path is not None
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            text = file.read()
    except OSError as exc:
        return [*out, (flag, f"cannot read {path}: {exc.strerror}")]
    if o.nkey and not text.strip().startswith("SU"):
        out.append((flag, f"{path} holds no user nkey seed (one line beginning SU)"))
    if o.creds and not all(marker in text for marker in CREDS_MARKERS):
        out.append((flag, f"{path} is not a credentials file (it has no "
                    f"{' and no '.join(m for m in CREDS_MARKERS if m not in text)})"))
    if importlib.util.find_spec("nkeys") is None:
        out.append((flag, "needs the nkeys package: pip install 'broker-harness[nats]'"))
    return out


class NatsTransport(DrivenTransport, Declarations, FramedSends, Acknowledgements,
                    TemporaryQueues, Multiplexed):
    # nats-py's publish is cheap next to a turn of the loop: a turn every 64 sends was a
    # large share of an unthrottled producer's cost (the bare loop writes only when
    # nats-py's buffer fills).
    write_every = 256
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

    # -- the loop, turned on this thread
    def _run(self, coro: Any, what: str) -> Any:
        try:
            return self.loop.run_until_complete(asyncio.wait_for(coro, CALL_TIMEOUT_S))
        except TimeoutError:
            raise TransportError(f"{what}: no answer within {CALL_TIMEOUT_S:g} s") from None
        except (nats.errors.Error, OSError) as exc:
            raise TransportError(f"{what}: {_reason(exc)}") from None

    def _turn(self, timeout: float) -> None:
        """Publish what is queued, then wait up to timeout for the socket and run what it
        brought. Where there is nothing to publish or fetch (a producer waiting for its next
        send with acknowledgements outstanding, a consumer waiting for messages), the loop
        runs until a timer or an arrival stops it, and no coroutine takes part."""
        if self.queued or self.to_ack or self.pull is not None or self.resuming:
            self._turn_task(timeout)
            return
        loop = self.loop
        if timeout <= 0 or len(self.inbox):
            loop.turn(once=True)  # what the socket holds now
            return
        # Stopped by the timer itself, in the pass that runs it: through a task, the wait's
        # end took two passes more.
        timer = loop.call_later(timeout, loop.stop)
        self.stops_on_arrival = True
        try:
            loop.turn()
        finally:
            self.stops_on_arrival = False
            timer.cancel()

    def _end_wait(self) -> None:
        """What _turn waits for came (a message for receive(), room in the window)."""
        if self.waiter is not None:
            _wake(self.waiter)
        elif self.stops_on_arrival:
            self.loop.stop()

    def _turn_task(self, timeout: float) -> None:
        """A turn by the one task that turns the loop. run_until_complete would make a task a
        turn and go round the loop three times; one long-lived task woken a turn costs less
        (contrib/bench/loop_turn.py compares them with a bare publish loop)."""
        turner = self.turner
        self.turn_for = timeout
        if turner is None or turner.done():
            self.turner = self.loop.create_task(self._turning())
        elif self.kick is not None:
            _wake(self.kick)
        self.loop.turn()
        failure, self.failure = self.failure, None
        if failure is not None:
            raise failure

    def _stop_turner(self) -> None:
        """Before the loop closes: a task still pending there would be reported destroyed."""
        turner, self.turner = self.turner, None
        if turner is not None and not turner.done():
            turner.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                self.loop.run_until_complete(turner)

    async def _turning(self) -> None:
        loop = self.loop
        while True:
            try:
                await self._wait(self.turn_for)
            except Exception as exc:  # raised by _turn, on the thread that asked
                self.failure = exc
            finally:
                # After what the turn made ready (nats-py's flusher writing what _pump
                # published, the socket polled once): the loop goes round once more.
                loop.call_soon(loop.stop)
            self.kick = loop.create_future()
            await self.kick

    async def _wait(self, timeout: float) -> None:
        """Publish what is queued, then wait up to timeout for a message (a pull consumer:
        fetch one batch)."""
        await self._pump()
        if self.pull is not None and self.subscription is not None:
            await self._fetch(timeout)
        elif timeout > 0 and not len(self.inbox):
            waiter = self.waiter = self.loop.create_future()
            timer = self.loop.call_later(timeout, _wake, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                self.waiter = None

    async def _pump(self) -> None:
        """Publish the queued sends and acknowledgements (on the loop)."""
        if self.resuming:
            resuming, self.resuming = self.resuming, []
            for publish, waiting, seq in resuming:
                try:
                    await _Resumed(publish, waiting)
                except nats.errors.Error as exc:
                    self._failed((seq,), exc)
        if self.to_ack:
            acks, self.to_ack = self.to_ack, []
            for raw in acks:
                # Not contextlib.suppress: a context manager a message is measurable here.
                try:  # noqa: SIM105
                    await raw.ack()
                except nats.errors.Error:
                    pass  # a lost connection: the server delivers the message again
        if not self.queued:
            return
        queued, self.queued = self.queued, []
        nc, js, pending = self.nc, self.js, self.pending
        published = 0
        try:
            if js is None:
                for subject, payload, reply, headers, _, _ in queued:
                    await nc.publish(subject, payload, reply, headers)
                    published += 1
                return
            # The stream is checked in the acknowledgement, not by an expected-stream header
            # on every publish, which nats-py would encode in Python each time.
            for subject, payload, _, headers, seq, sent in queued:
                future = await js.publish_async(subject, payload, headers=headers)
                pending.append((future, seq, sent))
                published += 1
        except nats.errors.Error as exc:
            # Not published (nats-py's buffer for an outage is full, or it gave up): failed.
            # Those before it were published: sent, and JetStream's await their
            # acknowledgement among the pending, so none is counted twice.
            self._failed([seq for *_, seq, _ in queued[published:]], exc)
        finally:
            self._watch_oldest()

    def _failed(self, seqs: Iterable[int], exc: nats.errors.Error) -> None:
        """Sends nats-py refused to publish (closed, or its buffer for an outage is full)."""
        reason = f"send failed: {_reason(exc)}"
        self.feedback.failed.extend((seq, "send", reason) for seq in seqs)

    def _watch_oldest(self) -> None:
        """One done-callback, on the oldest publish awaiting acknowledgement: the server
        acknowledges in order, and asyncio's scheduling of a callback per publish cost more
        than the publish."""
        if self.pending:
            oldest = self.pending[0][0]
            if oldest is not self.watched:
                self.watched = oldest
                oldest.add_done_callback(self._acked)

    def _acked(self, future: asyncio.Future[Any]) -> None:
        """The oldest publish's acknowledgement (or its absence) arrived: take every one
        that has, in order."""
        at = now_ns()
        acks, feedback, stream = self.pending, self.feedback, self.send_stream
        while acks and acks[0][0].done():
            done, seq, sent = acks.popleft()
            if done.cancelled() or isinstance(done.exception(), IN_DOUBT):
                feedback.doubt.append((seq, "no publish acknowledgement (within "
                                       f"{ACK_TIMEOUT_S:g} s, or the connection was lost)"))
            elif done.exception() is not None:
                feedback.failed.append((seq, "nack", f"the server refused the message: "
                                        f"{_reason(done.exception())}"))
            elif done.result().stream != stream:
                # Its consumers read the run's stream: there, the message is not.
                feedback.failed.append((seq, "nack", f"stored in stream "
                                        f"{done.result().stream}, not {stream}: another "
                                        "stream holds the subject"))
            else:
                feedback.confirm_us.append((at - sent) // 1000)
        self._watch_oldest()
        if len(acks) <= self.room_at:
            # A producer waiting for room in the window has it. One that waits until its
            # next send is due (idle) stays in the loop: leaving and entering it again for
            # every acknowledgement cost more than the acknowledgement.
            self._end_wait()

    def _expire_acks(self) -> None:
        """Give up on acknowledgements older than ACK_TIMEOUT_S (a restarted server may or
        may not have stored the message): they become failed sends."""
        deadline = now_ns() - int(ACK_TIMEOUT_S * 1e9)
        for future, _, sent in list(self.pending):
            if sent > deadline:
                break
            future.cancel()

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

    # -- connection
    def open(self) -> None:
        s, o = self.settings, self.o
        host, port = s.address(DEFAULT_PORT)
        if self.loop.is_closed():  # opened again after close() (--connect-retry)
            self.loop = TurnedLoop(MicrosecondSelector() if self.exact_waits else None)
        tls = None
        if s.tls:
            _require_tls(host, port)
            tls = ssl.create_default_context(cafile=s.ca)
            if s.cert:
                tls.load_cert_chain(s.cert, s.key)
        scheme = "tls" if s.tls else "nats"
        try:
            self.nc = self.loop.run_until_complete(self._first_connect(
                f"{scheme}://{host}:{port}", name=self.settings.connection_id(stable=False),
                **self._credentials(), tls=tls, connect_timeout=CONNECT_TIMEOUT_S,
                pending_size=PENDING_SIZE,
                allow_reconnect=True, max_reconnect_attempts=-1,
                reconnect_time_wait=RECONNECT_WAIT_S, error_cb=self._error,
                disconnected_cb=self._disconnected, reconnected_cb=self._reconnected,
                closed_cb=self._closed))
        except (nats.errors.Error, OSError, TimeoutError) as exc:
            raise TransportError(f"cannot connect to {host}:{port}: {_reason(exc)}") from None
        self.connected = True
        if o.heartbeat:
            if self.watcher is not None:
                self.watcher.cancel()
            self.heard = None
            self.watcher = self.loop.call_later(o.heartbeat, self._watch)
        if o.jetstream:
            self.js = self.nc.jetstream(publish_async_max_pending=o.inflight + 1)

    def _credentials(self) -> dict[str, Any]:
        """nats-py's arguments for the one way the run authenticates (_auth_problems)."""
        s, o = self.settings, self.o
        if o.token:
            return {"token": s.password}
        if o.creds:
            return {"user_credentials": o.creds}
        if o.nkey:
            return {"nkeys_seed": o.nkey}
        return {"user": s.user, "password": s.password}

    def _watch(self) -> None:
        """The liveness check (--heartbeat): a PING every heartbeat, the connection stale when
        nothing came back for two. Written straight to the socket: nats-py's own pings go
        through its flusher, which a partition blocks for ever once the socket's buffer is
        full (a producer's), and its ping task with it."""
        nc, heartbeat = self.nc, self.o.heartbeat
        if nc is None or self.closing or self.loop.is_closed():
            return
        self.watcher = self.loop.call_later(heartbeat, self._watch)
        if not nc.is_connected or nc._transport is None:
            self.heard = None  # reconnecting: nats-py times its attempts
            return
        now = time.monotonic()
        progress = nc._pongs_received + nc.stats["in_msgs"]
        if self.heard is None or progress != self.progress:
            self.progress, self.heard = progress, now
            self.unheard.proved()
        elif now - self.heard > 2 * heartbeat:
            self.heard = None
            self._unheard()
            # Aborted, not closed: nats-py's reconnection first waits for the socket to close,
            # which a close does only once what is buffered is written, never in a partition.
            writer = getattr(nc._transport, "_io_writer", None)
            if writer is not None:
                writer.transport.abort()
            self.loop.create_task(nc._process_op_err(nats.errors.StaleConnectionError()))
            return
        self.unheard.mark()
        nc._pongs.append(self.loop.create_future())
        nc._transport.write(b"PING\r\n")

    def _unheard(self) -> None:
        """A core publisher's sends written since the server last proved it had read
        them: a connection found dead may have taken them or not, so they are in doubt,
        never quietly sent (nothing acknowledges a core publish)."""
        if self.js is None and self.settings.sends_only:
            self.unheard.lost(self.feedback, "written to a connection then found dead (no "
                              "PONG): read or not")

    async def _first_connect(self, url: str, **options: Any) -> Any:
        """One connection attempt, as every transport makes (--connect-retry makes more):
        nats-py, allowed to reconnect for ever as a run needs, would also retry a first
        connection for ever, and a server that is down or a certificate that does not verify
        would hang the start."""
        failed = self.connect_failed = self.loop.create_future()
        attempt = asyncio.ensure_future(nats.connect(url, **options))
        try:
            await asyncio.wait((attempt, failed), return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.connect_failed = None
        if attempt.done():
            return attempt.result()
        attempt.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await attempt
        raise failed.result()

    async def _error(self, exc: Exception) -> None:
        """nats-py's reports; a lost connection counts through the disconnect callbacks."""
        failed = self.connect_failed
        if failed is not None and not failed.done():
            failed.set_result(exc)  # the first connection attempt failed
            return
        if isinstance(exc, nats.errors.SlowConsumerError):
            # The message itself shows as lost in the sequence numbers.
            self.feedback.error("slow consumer", "nats-py dropped a message: the "
                                "subscription held --pending-limit messages")

    async def _disconnected(self) -> None:
        if not self.closing and self.outages.down_since is None:
            # One error for the outage, beside its time and reconnects.
            self.feedback.error("disconnected", "the connection was lost (a server restart, "
                                "or the server cut off a consumer that read too slowly: its "
                                "log says which)")
            self.outages.went_down()
        if not self.closing:
            self.down = True
            if self.o.heartbeat:
                self._unheard()
        # A publish whose acknowledgement was due on the lost connection never gets it: in
        # doubt (the server may have stored it), a failed send now rather than at the timeout.
        for future, _, _ in self.pending:
            future.cancel()

    async def _reconnected(self) -> None:
        self.down = False
        self.outages.came_up()

    async def _closed(self) -> None:
        if not self.closing:
            self.connected = False  # nats-py gave up: the next call connects again

    def _reopen(self) -> None:
        self.down = False
        self.nc = self.js = self.sub = self.pull = None
        self.streams.clear()
        self.send_stream = None
        self.open()

    # -- JetStream topology
    def _ensure_stream(self, subject: str) -> str:
        o = self.o
        name = o.stream or stream_name(subject)
        if name in self.streams:
            return name

        async def ensure() -> None:
            try:
                await self.js.stream_info(name)
                return
            except nats.js.errors.NotFoundError:
                pass
            try:
                await self.js.add_stream(name=name, subjects=[subject],
                                         storage=api.StorageType(o.storage),
                                         retention=RETENTIONS[o.retention])
            except nats.js.errors.BadRequestError:
                # Another client made it since stream_info (the server has answered such a
                # race "subjects overlap with an existing stream"): used as it is, as a stream
                # found there is; with none there, the refusal stands.
                with contextlib.suppress(nats.js.errors.NotFoundError):
                    await self.js.stream_info(name)
                    return
                raise

        self._run(ensure(), f"stream {name}")
        self.streams.add(name)
        return name

    def declare(self, destination: Destination) -> None:
        if self.js is not None and self.send_stream is None:
            self.send_stream = self._ensure_stream(destination.name)

    # -- messages
    def send(self, destination: Destination, message: Message) -> None:
        reply = message.reply_to.name if message.reply_to is not None else ""
        self.send_frame(destination, frame(message, "", message.correlation_id or ""),
                        message.seq, reply, message.properties)

    def send_frame(self, destination: Destination, payload: bytes, seq: int, reply: str = "",
                   headers: dict[str, str] | None = None) -> None:
        if not self.connected or self.down:
            if self.down:
                self.loop.turn(once=True)  # nats-py's reconnection goes on in the loop
            if self.down:
                # nats-py would hold it for a reconnection that may never come, and it would
                # count as sent: it fails, as a send on any transport does while it
                # reconnects.
                raise TransportError("not connected: the connection was lost (reconnecting)")
            if not self.connected:
                self._check()
        self.unheard.last = seq
        js = self.js
        # The first sends since a write, as a paced producer's are even in a burst; an
        # unthrottled producer's others are queued (with its share of a turn a queued send
        # costs less than a publish driven by hand).
        if js is None and self.unwritten < BY_HAND_FIRST and not self.queued and \
                self.nc.pending_data_size + len(payload) <= PENDING_SIZE // 2:
            # Published now: nats-py's publish, driven to its end on this thread without
            # entering the loop. With room in its buffer it only appends the command and wakes
            # its flusher, so the loop's next pass writes it: a paced send then costs one pass
            # of the loop, not a task's turn (contrib/bench/loop_turn.py). A publish that waits
            # after all is continued by the loop's next turn. Inline, not a method: a paced
            # send runs it with the caches cold.
            self.unwritten += 1  # _sent(None, seq): below BY_HAND_FIRST, never a write_every
            if self.loop_thread != threading.get_ident() or self.shares_thread:
                # The futures nats-py makes outside the loop belong to the current event loop
                # (one of many clients of a thread: whichever client's last set it).
                asyncio.set_event_loop(self.loop)
                self.loop_thread = threading.get_ident()
            publish = self.nc.publish(destination.name, payload, reply, headers)
            try:
                waiting = publish.send(None)
            except StopIteration:
                return
            except nats.errors.Error as exc:
                self._failed((seq,), exc)
                return
            self.resuming.append((publish, waiting, seq))
            return
        if js is not None and self.send_stream is None:
            self.declare(destination)  # again after a reconnect
        # A send time only for JetStream, whose acknowledgement is timed from it.
        self.queued.append((destination.name, payload, reply, headers, seq,
                            0 if js is None else now_ns()))
        if js is not None and len(self.pending) + len(self.queued) >= self.o.inflight:
            # Down to half the window, not by one: a turn of the loop per send would cost
            # more than the publish.
            self._await_acks(self.o.inflight // 2)
        else:
            self._sent(None, seq)

    def _await_acks(self, most: int) -> None:
        """Publish, then turn the loop until at most `most` publishes await acknowledgement."""
        self.unwritten = 0
        self._turn(0)
        self.room_at = most
        try:
            while len(self.pending) + len(self.queued) > most:
                self._expire_acks()
                self._turn(0.005)
        finally:
            self.room_at = -1

    def _write_out(self) -> None:
        self._turn(0)
        if self.pending:
            self._expire_acks()

    def flush(self) -> None:
        self.unwritten = 0
        if not self.connected:
            return
        if self.gauge is not None:  # a consumer held by --backlog flushes, and receives not
            self.gauge.tick()
        if self.queued or self.pending or self.to_ack or self.pull is not None or \
                self.resuming:
            self._write_out()
        else:  # _write_out()'s common case, inline: a paced send runs it with the caches cold
            self.loop.turn(once=True)

    def _subscribe(self, destination: Destination) -> None:
        s, o = self.settings, self.o
        subject = destination.name
        queue = QUEUE_GROUP if s.competes else ""
        limit = {"pending_msgs_limit": o.pending_limit} if o.pending_limit else {}
        if self.js is None:
            measure_only = s.measures_only
            cb = self._on_measured if measure_only else self._on_message
            self.sub = self._run(self.nc.subscribe(subject, queue=queue, cb=cb, **limit),
                                 f"subscribe to {subject}")
            return
        stream = self._ensure_stream(subject)
        if s.competes and s.measures_only:
            durable = s.durable_name or f"{QUEUE_GROUP}-{stream}"
        elif s.durable_name:
            durable = f"{s.durable_name}{s.process}-{s.thread}".replace(".", "_")
        else:
            durable = None
        self.acks_on_arrival = o.ack == "auto"
        config = api.ConsumerConfig(
            ack_policy=api.AckPolicy.EXPLICIT, max_ack_pending=o.prefetch or None,
            ack_wait=o.ack_wait or None,
            deliver_policy=api.DeliverPolicy.ALL if durable else api.DeliverPolicy.NEW)
        if durable:
            self._check_durable(stream, durable)
        if o.pull_batch:
            self.pull = self._run(self.js.pull_subscribe(
                subject, durable=durable, stream=stream, config=config, **limit),
                f"pull consumer on {stream}")
        else:
            # nats-py names a queue subscription's durable consumer after its deliver group.
            group = durable if queue else None
            self.sub = self._run(self.js.subscribe(
                subject, queue=group, durable=durable, stream=stream, cb=self._on_message,
                manual_ack=True, config=config, **limit), f"consumer on {stream}")
        self.info_asks = 0
        self.gauge_with(self._ask_pending)

    def _ask_pending(self) -> None:
        """The consumer's info, asked by a task of the loop: its num_pending is how many
        messages of the stream it has not been delivered. One at a time."""
        consumer = self.pull or self.sub
        if self.info_asks or not self.connected or consumer is None:
            return
        self.info_asks += 1
        self.loop.create_task(consumer.consumer_info()).add_done_callback(self._pending)

    def _pending(self, task: asyncio.Task[Any]) -> None:
        self.info_asks -= 1
        if task.done() and not task.cancelled() and task.exception() is None:
            info = task.result()
            self.feedback.waiting(f"{info.stream_name} {info.name}", info.num_pending or 0)

    def _check_durable(self, stream: str, durable: str) -> None:
        """A durable consumer that exists already is used as it is (nats-py does not change
        it): one whose configuration differs from what this run asks is refused, not
        silently used with another's --prefetch or --ack-wait."""
        js, o = self.js, self.o
        assert js is not None

        async def existing() -> Any:
            try:
                return await js.consumer_info(stream, durable)
            except nats.js.errors.NotFoundError:
                return None

        info = self._run(existing(), f"look up consumer {durable} on {stream}")
        if info is None:
            return
        have = info.config
        for flag, asked, kept in (("--prefetch", o.prefetch, have.max_ack_pending),
                                  ("--ack-wait", o.ack_wait, have.ack_wait)):
            if asked and (kept is None or abs(float(kept) - asked) > 1e-6):
                raise TransportError(
                    f"{flag} {asked:g}: the durable consumer {durable} on stream {stream} "
                    f"exists with {kept:g} (an earlier run's): remove it first (nats consumer "
                    f"rm {stream} {durable})")

    async def _on_message(self, raw: Any) -> None:
        frames = self.frames
        if frames is not None:  # a JetStream consumer that only measures
            if not raw.reply.startswith(self.first_delivery):
                self._delivered_before(raw.reply)
            frames(raw.data)
            if not self.acks_on_arrival:
                self.to_ack.append(raw)
        else:
            self.dispatching = True
            try:
                self.arrived(raw)
            finally:
                self.dispatching = False
        if self.acks_on_arrival:
            # Here rather than queued for _pump: a list and a call fewer a message.
            try:  # noqa: SIM105
                await raw.ack()
            except nats.errors.Error:
                pass  # a lost connection: the server delivers the message again
        if self.queued or self.to_ack:
            await self._pump()
        if self.sink is None:
            self._wake_receive()

    async def _on_measured(self, raw: Any) -> None:
        """A core subscription's message where nothing is sent back (no reply, no ack)."""
        frames = self.frames
        if frames is not None:
            frames(raw.data)
            return
        self.arrived(raw)
        if self.sink is None:
            self._wake_receive()

    def _wake_receive(self) -> None:
        """A message went into the inbox (none is measured on the loop): receive() waits."""
        if len(self.inbox):
            self._end_wait()

    async def _fetch(self, timeout: float) -> None:
        try:
            batch = await self.pull.fetch(self.o.pull_batch, timeout=max(timeout, 0.001))
        except (nats.errors.TimeoutError, TimeoutError):
            return
        except nats.errors.Error:
            return  # a lost connection: nats-py reconnects, the next fetch asks again
        for raw in batch:
            await self._on_message(raw)

    def message(self, raw: Any) -> Message:
        data = raw.data
        # A status comes without a body; a harness message never does (its prefix).
        if not data and raw.headers and raw.headers.get("Status") == NO_RESPONDERS:
            raise TransportError("no responders: nothing subscribes to "
                                 f"{self.settings.destination}", kind="no responders",
                                 answered=True)
        message = unframe(data, "queue", raw)
        reply = raw.reply
        if self.js is None:
            if reply:
                message.reply_to = Destination("queue", reply)
        elif not reply.startswith(self.first_delivery):
            self._delivered_before(reply)
        return message

    def _delivered_before(self, reply: str) -> None:
        """Count a JetStream message the server delivered before (another consumer gave up on
        it), from its ack subject: $JS.ACK.<stream>.<consumer>.<deliveries>.<...> or, with a
        domain, $JS.ACK.<domain>.<hash>.<stream>.<consumer>.<deliveries>.<...>. Called where
        the subject does not begin as first_delivery, which it then becomes for this
        consumer: one startswith a message, not a split of the subject (nats-py's
        Msg.metadata parses every field)."""
        tokens = reply.split(".")
        at = 4 if len(tokens) == 9 else 6
        self.first_delivery = ".".join(tokens[:at]) + ".1."
        if tokens[at] != "1":
            self.feedback.redelivery()

    def acknowledges(self) -> bool:
        return self.js is not None and self.o.ack != "auto"

    def ack(self, message: Message) -> None:
        if self.js is not None and self.o.ack != "auto" and message.handle is not None:
            self.to_ack.append(message.handle)

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
