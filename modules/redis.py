"""Redis through redis-py (with hiredis parsing replies): pub/sub channels and Streams.

- Publisher / Subscriber: PUBLISH to a channel; a Subscriber SUBSCRIBEs (PSUBSCRIBEs when the
  destination is a pattern: * ? or [). Redis keeps nothing for a subscriber: one that falls
  behind past the server's client-output-buffer-limit (pubsub class) is disconnected, and what
  was published meanwhile is gone. The harness reports the disconnect (an outage and an error
  `disconnected`), subscribes again, and the sequence numbers count the loss exactly.
  With --streams they go through a stream instead: XADD, each Subscriber reading on its own
  (XREAD from the stream's end when it subscribed).
- Sender / Receiver: XADD to a stream, and a consumer group (XREADGROUP ... COUNT --prefetch,
  the group `harness` or --durable-name) whose consumers compete; acknowledgements (XACK) go
  in one round trip with the next read. A Receiver claims (XAUTOCLAIM) the messages another
  consumer of its group left unacknowledged for --claim-idle seconds (a consumer that died):
  delivered again, they count as `redelivered`.
- Requestor / Responder: requests on a stream read by the Responders' consumer group, each
  Requestor's replies on a stream of its own (deleted when it closes).

Producers pipeline: a send queues its command, and the queue goes out in one round trip every
WRITE_EVERY sends and before the producer sleeps, each message timed from its own intended
time. One XADD per round trip measured about 9,700 msg/s here, 500 a round trip 224,000.
With -tx the pipeline is a MULTI/EXEC transaction, executed at each commit: nothing is visible
before it, and it is all or nothing (Redis has no rollback: an abort discards what is queued).
Persistence is the server's configuration (appendonly yes with appendfsync always), never a
message's: -pp is refused.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections import deque
from dataclasses import dataclass
from functools import cache
from typing import Any

from harness.modules.interface.base import Capability, Transport, TransportError
from harness.modules.interface.message import Destination, Message, frame, unframe
from harness.modules.interface.optional import (
    Acknowledgements,
    ClientLoop,
    Declarations,
    FramedSends,
    TemporaryQueues,
    Transactions,
)
from harness.modules.interface.options import HEARTBEAT_S, option
from harness.modules.interface.settings import Settings
from harness.modules.kit.client_config import (
    client_config_option,
    config_problems,
    library_settings,
    parameters,
)
from harness.modules.kit.gauge import Gauge
from harness.modules.kit.inline import InlineFrames
from harness.modules.kit.library import library
from harness.modules.kit.reconnect import Reconnecting

# redis-py, imported at its first use (harness.modules.kit.library)
redis = library("redis", "exceptions", "backoff", "credentials", "retry")

DEFAULT_PORT = 6379
WRITE_EVERY = 64
FIELD = b"m"  # the stream entry's one field: the framed message
GROUP = "harness"
DEFAULT_COUNT = 100  # XREADGROUP COUNT without --prefetch
CLAIM_EVERY_S = 1.0
REPLY_MAXLEN = 10_000
SOCKET_TIMEOUT_S = 10.0
ANSWERS = frozenset((bytes, int, str))  # what XADD and PUBLISH answer; an error is neither

CAPABILITIES = Capability.QUEUES | Capability.TOPICS | Capability.DURABLE | \
    Capability.REQUEST_REPLY | Capability.TEMP_QUEUES


@dataclass(frozen=True)
class RedisOptions:
    streams: bool = option(False, "Redis: Publisher and Subscriber over a stream (XADD, each "
                           "subscriber reading on its own) instead of pub/sub channels.")
    maxlen: int = option(0, "Redis: trim streams to about N entries at each XADD (MAXLEN ~); "
                         "0 = never.", low=0, side="send")
    claim_idle: float = option(5.0, "Redis: a Receiver claims the messages another consumer "
                               "of its group left unacknowledged this many seconds "
                               "(XAUTOCLAIM); 0 = never.", low=0, side="receive")
    database: int = option(0, "Redis database number.", scope="connection", low=0)
    prefetch: int = option(0, "", scope="connection", low=0, side="receive")
    heartbeat: float = option(HEARTBEAT_S, "", scope="connection", low=0)
    client_config: tuple[str, ...] = client_config_option()


# redis-py's Redis() arguments that a flag gives (--client-config refuses them, naming it) or
# that the harness owns: bytes as sent, RESP2 replies, one connection a worker, its own
# reconnection.
CLIENT_FLAGGED = {"host": "--host", "port": "--port", "db": "--database", "username": "--user",
                  "password": "--password", "ssl": "--tls", "ssl_ca_certs": "--ca",
                  "ssl_certfile": "--cert", "ssl_keyfile": "--key", "client_name": "--client-id",
                  "health_check_interval": "--heartbeat", "socket_timeout": "--heartbeat",
                  "socket_connect_timeout": "--heartbeat"}
CLIENT_OWNED = ("retry", "retry_on_timeout", "retry_on_error", "connection_pool",
                "decode_responses", "encoding", "encoding_errors", "unix_socket_path",
                "single_connection_client", "redis_connect_func", "credential_provider",
                "event_dispatcher", "protocol")


@cache
def client_settings(items: tuple[str, ...]) -> dict[str, Any]:
    """--client-config as redis.Redis's keyword arguments."""
    return library_settings(items, parameters(redis.Redis.__init__), "redis-py's Redis()",
                            CLIENT_FLAGGED, CLIENT_OWNED,
                            check=lambda values: redis.Redis(**values).close())


@cache
def errors() -> tuple[type[BaseException], ...]:
    """What a lost or silent connection raises (an except clause's, evaluated only when
    something is raised)."""
    return (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)


def file_login(settings: Settings[Any]) -> Any:
    """--password-file's content as it stands at each connection redis-py makes: a
    credential provider of redis-py's (a class of its own, made at the first login)."""
    return _file_login()(settings)


@cache
def _file_login() -> type:
    class FileLogin(redis.credentials.CredentialProvider):  # type: ignore[misc]
        def __init__(self, settings: Settings[Any]) -> None:
            self.settings = settings

        def get_credentials(self) -> tuple[str] | tuple[str, str]:
            secret = self.settings.secret() or ""
            user = self.settings.user
            return (user, secret) if user is not None else (secret,)

    return FileLogin


def is_pattern(name: str) -> bool:
    return any(c in name for c in "*?[")


class RedisTransport(Reconnecting, Transport, Declarations, FramedSends, InlineFrames,
                     ClientLoop, Acknowledgements, Transactions, TemporaryQueues):
    name = "redis"
    default_port = DEFAULT_PORT
    description = "Redis via redis-py: pub/sub channels and Streams (consumer groups)"
    capabilities = CAPABILITIES
    # MULTI/EXEC batches a producer's sends; a consumer's read cannot wait inside one.
    producer_capabilities = Capability.TRANSACTIONS
    Options = RedisOptions
    settings: Settings[RedisOptions]

    @classmethod
    def endpoint(cls, settings: Settings[Any]) -> str:
        return f"{super().endpoint(settings)}/{settings.options.database}"

    @classmethod
    def problems(cls, settings: Settings[RedisOptions]) -> list[tuple[str, str]]:
        o = settings.options
        out = []
        out.extend(config_problems(o.client_config, client_settings))
        if settings.selector:
            out.append(("--selector", "Redis has no selectors; subscribe to a pattern "
                        "(* ? [...]) instead"))
        if settings.persistent:
            out.append(("-pp", "Redis persists by its server configuration (appendonly yes, "
                        "appendfsync always), not per message: drop -pp"))
        if settings.transacted and not settings.sends_only:
            out.append(("-tx", "Redis transactions (MULTI/EXEC) batch a producer's sends; a "
                        "read cannot wait inside one"))
        pubsub = settings.on_topic and not o.streams
        if pubsub and settings.durable_name:
            out.append(("--durable-name", "pub/sub keeps nothing for a subscriber: add "
                        "--streams"))
        if pubsub and o.maxlen:
            out.append(("--maxlen", "trims streams: add --streams"))
        return out

    def __init__(self, settings: Settings[RedisOptions]) -> None:
        super().__init__(settings)
        o = self.o = settings.options
        self.client: Any = None
        self.pubsub_mode = settings.on_topic and not o.streams
        self.grouped = settings.competes  # reads through a consumer group
        self.transacted = settings.transacted
        self.pipe: Any = None
        self.queued: list[int] = []  # sequence numbers of the sends in the pipeline
        self.pubsub: Any = None
        self.group = settings.durable_name or GROUP
        self.consumer: str = self.settings.connection_id(stable=True)  # type: ignore[assignment]
        self.count = o.prefetch or DEFAULT_COUNT
        self.buffer: deque[tuple[bytes, bytes]] = deque()  # (entry id, payload) read ahead
        self.to_ack: list[bytes] = []
        self.last_id = b"0-0"  # an independent reader's (Subscriber, Requestor) position
        # ... and its count of what it read since the stream had had added_before entries
        self.entries_read = self.added_before = 0
        # Asks the server what waits for this consumer (harness.modules.kit.gauge).
        self.gauge: Gauge | None = None
        self.last_claim = time.monotonic()
        self.reply_key: str | None = None
        # The liveness check (--heartbeat): an answer not come in two heartbeats is a lost
        # connection; a subscription's PINGs (redis-py's health checks) unanswered since
        self.timeout = max(2 * o.heartbeat, 2.0) if o.heartbeat else SOCKET_TIMEOUT_S
        self.pinged_since: float | None = None
        # A Responder's replies go to reply streams nobody trims otherwise.
        maxlen = REPLY_MAXLEN if self.settings.replies else o.maxlen
        self.trim = (b"MAXLEN", b"~", maxlen) if maxlen else ()  # XADD's arguments

    # -- connection
    def open(self) -> None:
        s = self.settings
        host, port = s.address(DEFAULT_PORT)
        # A password from a file is asked for at each of redis-py's own connections too.
        login: dict[str, Any] = {"credential_provider": file_login(s)} \
            if s.password_file is not None else {"username": s.user, "password": s.password}
        client = redis.Redis(
            host=host, port=port, db=self.o.database, **login,
            ssl=s.tls, ssl_ca_certs=s.ca, ssl_certfile=s.cert, ssl_keyfile=s.key,
            socket_timeout=self.timeout, socket_connect_timeout=self.timeout,
            health_check_interval=self.o.heartbeat,
            # The harness reconnects itself, so that each outage is seen and counted.
            retry=redis.retry.Retry(redis.backoff.NoBackoff(), 0),
            client_name=self.settings.connection_id(stable=False),
            **client_settings(self.o.client_config))
        try:
            client.ping()
        except (redis.exceptions.RedisError, OSError) as exc:
            client.close()
            raise TransportError(f"cannot connect to {host}:{port}: {_reason(exc)}") from None
        self.client = client
        self.connected = True
        self.pipe = None

    def _lost(self, exc: BaseException) -> TransportError:
        """Note a lost connection; the next call reconnects."""
        if self.connected:
            self.connected = False
            self.outages.went_down()
        return TransportError(f"connection lost: {_reason(exc)}")

    def _reopen(self) -> None:
        self._drop()
        self.open()

    def _drop(self) -> None:
        for closing in (self.pubsub, self.client):
            if closing is not None:
                with contextlib.suppress(Exception):
                    closing.close()
        self.pubsub = self.client = self.pipe = None

    # -- producing
    def declare(self, destination: Destination) -> None:
        if self.pubsub_mode:
            return  # a channel is no key
        name = destination.name
        try:
            kind = self.client.type(name)
        except errors() as exc:
            raise self._lost(exc) from None
        except redis.exceptions.RedisError as exc:
            raise TransportError(f"{name}: {_reason(exc)}") from None
        kind = kind.decode() if isinstance(kind, bytes) else kind
        if kind not in ("none", "stream"):  # XADD would answer WRONGTYPE to every send
            raise TransportError(f"{name} holds a {kind}, not a stream")

    def send(self, destination: Destination, message: Message) -> None:
        reply = message.reply_to.name if message.reply_to is not None else ""
        self.send_frame(destination, frame(message, reply, message.correlation_id or ""),
                        message.seq)

    def send_frame(self, destination: Destination, payload: bytes, seq: int) -> None:
        if not self.connected:
            self._check()
        if self.pipe is None:
            self.pipe = self.client.pipeline(transaction=self.transacted)
        # The command queued as publish() and xadd() queue it, without their two and three
        # calls more (xadd's checks of its arguments cost more than the rest of a send).
        if self.pubsub_mode:
            self.pipe.pipeline_execute_command("PUBLISH", destination.name, payload)
        else:
            self.pipe.pipeline_execute_command("XADD", destination.name, *self.trim, "*",
                                               FIELD, payload)
        self.queued.append(seq)
        if len(self.queued) >= WRITE_EVERY and not self.transacted:
            self.flush()

    def flush(self) -> None:
        if self.queued and not self.transacted:
            self._execute()
        if self.gauge is not None and self.connected:  # a consumer held by --backlog
            self.gauge.tick()

    def _execute(self) -> None:
        """Send the pipeline in one round trip; a send that failed becomes a failed send."""
        pipe, queued = self.pipe, self.queued
        self.queued = []
        try:
            results = pipe.execute(raise_on_error=False)
        except errors() as exc:
            # Written or not, answered or not: each in doubt (the one being sent too).
            reason = f"connection lost: {_reason(exc)}"
            self.feedback.doubt.extend((seq, reason) for seq in queued)
            lost = self._lost(exc)
            lost.reported = True
            raise lost from None
        except redis.exceptions.RedisError as exc:  # a refused MULTI/EXEC: none of it
            self.feedback.failed.extend((seq, "send", _reason(exc)) for seq in queued)
            return
        if ANSWERS.issuperset(map(type, results)):
            return  # every command answered (a check in C, not a loop in Python)
        for seq, result in zip(queued, results, strict=False):
            if isinstance(result, Exception):
                self.feedback.failed.append((seq, "send", _reason(result)))

    # -- consuming
    def _subscribe(self, destination: Destination) -> None:
        name = destination.name
        try:
            if self.pubsub_mode:
                self.pubsub = self.client.pubsub(ignore_subscribe_messages=True)
                if is_pattern(name):
                    self.pubsub.psubscribe(name)
                else:
                    self.pubsub.subscribe(name)
                # The subscription counts once the server confirms it, as on every broker.
                while self.pubsub.get_message(timeout=self.timeout) is not None:
                    pass
            elif self.settings.competes:
                try:
                    self.client.xgroup_create(name, self.group, id="$", mkstream=True)
                except redis.exceptions.ResponseError as exc:
                    if "BUSYGROUP" not in str(exc):  # not just made by another receiver
                        raise
            elif self.settings.on_topic and self.last_id == b"0-0":
                # From the stream's end when it first subscribed (a reconnect goes on from
                # where it was), and how many entries the stream had had then (its lag).
                try:
                    info = self.client.xinfo_stream(name)
                    self.last_id, self.added_before = info["last-generated-id"], \
                        info["entries-added"]
                except redis.exceptions.ResponseError:  # no stream yet
                    self.added_before = 0
        except errors() as exc:
            raise self._lost(exc) from None
        except redis.exceptions.RedisError as exc:
            raise TransportError(f"subscribe to {name}: {_reason(exc)}") from None
        if not self.pubsub_mode and not self.settings.asks:
            self.gauge = Gauge(self._ask_lag)

    def _ask_lag(self) -> None:
        """How many entries of the stream this consumer has not been delivered: its consumer
        group's lag (XINFO GROUPS), or for a reader of its own the entries added since it
        subscribed less those it read (XINFO STREAM; at most the stream's length: what was
        trimmed away unread is not waiting)."""
        name = self.subscription.name  # type: ignore[union-attr]
        try:
            if self.grouped:
                group = self.group.encode()
                for info in self.client.xinfo_groups(name):
                    if info["name"] == group and info.get("lag") is not None:
                        self.feedback.waiting(f"{name} {self.group}", info["lag"])
            else:
                info = self.client.xinfo_stream(name)
                left = info["entries-added"] - self.added_before - self.entries_read
                self.feedback.waiting(f"{name} {self.consumer}",
                                      max(min(left, info["length"]), 0))
        except errors() as exc:
            raise self._lost(exc) from None
        except redis.exceptions.RedisError:
            pass  # no stream yet, or a server before 7.0: nothing to say

    def receive(self, timeout: float) -> Message | None:
        self._ready(timeout)
        if self.gauge is not None:
            self.gauge.tick()
        if self.queued:
            self._execute()  # a Responder's replies go before it waits
        if not self.buffer:
            if self.pubsub_mode:
                return self._pubsub_message(timeout)
            self._read(timeout)
            if not self.buffer:
                return None
        buffer, frames = self.buffer, self.frames
        if frames is not None:
            acks = self.to_ack if self.grouped else None
            while buffer:
                entry_id, payload = buffer.popleft()
                frames(payload)
                if acks is not None:
                    acks.append(entry_id)
            return None
        entry_id, payload = buffer.popleft()
        return unframe(payload, "queue", entry_id)

    def _pubsub_message(self, timeout: float) -> Message | None:
        try:
            raw = self.pubsub.get_message(timeout=timeout)
            if self.frames is not None and raw is not None:
                # One a receive, as a Message would be: a read that finds nothing more would
                # cost a poll of the socket.
                self.frames(raw["data"])
                return None
        except errors() as exc:
            # The server closed the subscription: a subscriber that fell behind past its
            # client-output-buffer-limit; what was published meanwhile is lost.
            self.feedback.error("disconnected", f"the server closed the subscription "
                                f"({_reason(exc)}); messages published meanwhile are lost")
            raise self._lost(exc) from None
        if raw is None:
            if self.o.heartbeat:
                self._answering()
            return None
        return unframe(raw["data"])

    def _answering(self) -> None:
        """A subscription hears nothing of a partition: redis-py's health check PINGs it
        after each heartbeat of silence, and one unanswered for two is a lost connection."""
        if not self.pubsub.health_check_response_counter:
            self.pinged_since = None
            return
        now = time.monotonic()
        if self.pinged_since is None:
            self.pinged_since = now
        elif now - self.pinged_since > 2 * self.o.heartbeat:
            self.pinged_since = None
            raise self._lost(TimeoutError(f"no answer to a PING in {2 * self.o.heartbeat:g} s"))

    def _read(self, timeout: float) -> None:
        name = self.subscription.name if self.subscription is not None else ""
        block = max(int(timeout * 1000), 1) if timeout > 0 else None
        try:
            if self.grouped:
                if self.o.claim_idle and time.monotonic() - self.last_claim >= CLAIM_EVERY_S:
                    self._claim(name)
                    if self.buffer:
                        return
                pipe = self.client.pipeline(transaction=False)
                if self.to_ack:
                    pipe.xack(name, self.group, *self.to_ack)
                pipe.xreadgroup(self.group, self.consumer, {name: ">"}, count=self.count,
                                block=block)
                answers = pipe.execute()
                self.to_ack = []
                streams = answers[-1]
            else:
                streams = self.client.xread({name: self.last_id}, count=self.count,
                                            block=block)
        except errors() as exc:
            raise self._lost(exc) from None
        except redis.exceptions.ResponseError as exc:
            if "NOGROUP" in str(exc):  # the stream was deleted: make the group again
                self._subscribe(self.subscription)  # type: ignore[arg-type]
                return
            raise TransportError(f"read {name}: {_reason(exc)}") from None
        for _, entries in streams or ():
            for entry_id, fields in entries:
                self.buffer.append((entry_id, fields.get(FIELD, b"")))
            if entries:
                self.last_id = entries[-1][0]
                self.entries_read += len(entries)

    def _claim(self, name: str) -> None:
        self.last_claim = time.monotonic()
        _, entries, *_ = self.client.xautoclaim(
            name, self.group, self.consumer, int(self.o.claim_idle * 1000), "0-0",
            count=self.count)
        for entry_id, fields in entries:
            if fields is None:
                continue  # trimmed away since it was delivered
            self.buffer.append((entry_id, fields.get(FIELD, b"")))
            self.feedback.redelivery()

    def acknowledges(self) -> bool:
        return self.grouped

    def ack(self, message: Message) -> None:
        if message.handle is not None and self.grouped:
            self.to_ack.append(message.handle)

    def temporary_queue(self) -> Destination:
        self.reply_key = f"harness.reply.{uuid.uuid4().hex[:16]}"
        return Destination("queue", self.reply_key)

    # -- transactions: MULTI/EXEC around a producer's sends
    def commit(self) -> None:
        self._ready_to_commit()
        if self.queued:
            self._execute()
            self.pipe = None

    def abort(self) -> None:
        if self.pipe is not None:
            self.pipe.reset()
        self.queued = []

    def close(self) -> None:
        if self.client is None:
            return
        try:
            if self.connected:
                with contextlib.suppress(TransportError):
                    if self.queued and not self.transacted:
                        self._execute()
                    if self.to_ack and self.subscription is not None:
                        self.client.xack(self.subscription.name, self.group, *self.to_ack)
                    if self.gauge is not None:  # what was left, for the run's last interval
                        self._ask_lag()
                    if self.reply_key is not None:
                        self.client.delete(self.reply_key)
        except errors():
            pass
        finally:
            self.connected = False
            self._drop()


def _reason(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
