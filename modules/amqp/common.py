"""What the AMQP 0-9-1 transport's parts share: pika's logging and its heartbeat checker set as
the harness needs them, the timeouts, the arguments' typing, and pika's I/O loop waiting to
the microsecond."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from functools import cache
from typing import Any

from harness.modules.kit.library import library
from harness.modules.kit.selector import MicrosecondEpoll

# Imported at its first use (the transport's import is every command's: the option table).
pika = library("pika", "exceptions", "heartbeat", "credentials", "spec",
               "adapters.select_connection", "adapters.utils.connection_workflow")

# pika logs every failed connection attempt and channel error itself; the harness reports
# each failure once, in its own words.
logging.getLogger("pika").setLevel(logging.CRITICAL)



DEFAULT_PORT = 5672
ACCESS_REFUSED = 403  # AMQP 0-9-1's reply code for what the user's permissions forbid
RPC_TIMEOUT_S = 10.0
CLOSE_TIMEOUT_S = 10.0
# How long a consumer closing waits for the queue's depth, for the run's last interval.
DEPTH_AT_CLOSE_S = 2.0
DIRECT_REPLY_TO = "amq.rabbitmq.reply-to"


def typed(value: str) -> Any:
    """An argument's value as RabbitMQ wants it: x-max-length=10 is a number, not text."""
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    with contextlib.suppress(ValueError):
        return int(value)
    return value


def pairs(items: list[str] | None) -> dict[str, Any]:
    out = {}
    for item in items or ():
        key, _, value = item.partition("=")
        out[key.strip()] = typed(value)
    return out


def _noop() -> None:
    pass


def _poller_fd(conn: Any) -> int:
    """The descriptor of the epoll a pika connection's IOLoop waits on; -1 without one.
    pika has no public way to it: its IOLoop keeps the poller, and the poller its epoll."""
    poll = getattr(getattr(conn.ioloop, "_poller", None), "_poll", None)
    return poll.fileno() if poll is not None else -1


@cache
def pika_made_ours() -> type:
    """pika made ours, once, before the first connection: its heartbeat checker as the
    specification has it, and the class of its IOLoop waiting to the microsecond."""
    loops = pika.adapters.select_connection

    class PromptHeartbeat(pika.heartbeat.HeartbeatChecker):
        """The broker's silence checked every heartbeat timeout, as the AMQP 0-9-1
        specification has it (two of the broker's heartbeats missed), not every timeout + 5 s
        as pika does, which at --heartbeat 3 finds a partition only 8 to 16 s after it."""

        def _start_check_timer(self) -> None:
            self._check_interval = self._timeout
            super()._start_check_timer()

    # pika makes its checker through the module's attribute, at each connection.
    pika.heartbeat.HeartbeatChecker = PromptHeartbeat

    class Poller(loops.EPollPoller):
        @staticmethod
        def _create_poller() -> MicrosecondEpoll:
            return MicrosecondEpoll()

    class ExactIOLoop(loops.IOLoop):
        """pika's IOLoop waiting to the microsecond (harness.modules.kit.selector), for a
        producer with confirms. pika has no public way to give its poller; these two hooks
        are the ones its own pollers use."""

        @staticmethod
        def _get_poller(get_wait_seconds: Callable[[], float | None],
                        process_timeouts: Callable[[], None]) -> Any:
            return Poller(get_wait_seconds, process_timeouts)

    return ExactIOLoop


BROKER_EXCHANGES = {"amq.direct": "direct", "amq.topic": "topic", "amq.fanout": "fanout",
                    "amq.headers": "headers", "amq.match": "headers"}


def _reason(exc: Any) -> str:
    """What went wrong, in the broker's words where it gave some."""
    if exc is None:
        return "no answer"
    if isinstance(exc, pika.exceptions.ChannelClosedByBroker | pika.exceptions.
                  ConnectionClosedByBroker):
        return f"{exc.reply_code} {exc.reply_text}"
    # pika's connection workflow wraps the cause (a refused socket, a certificate that does
    # not verify) in an exception per attempt, each wrapping the phase's own.
    workflow = pika.adapters.utils.connection_workflow
    if isinstance(exc, workflow.AMQPConnectionWorkflowFailed) and exc.exceptions:
        return _reason(exc.exceptions[-1])
    if isinstance(exc, workflow.AMQPConnectorPhaseErrorBase) and exc.exception is not None:
        return _reason(exc.exception)
    if isinstance(exc, pika.exceptions.AMQPConnectionError) and exc.args:
        inner = exc.args[0]
        if isinstance(inner, BaseException) and inner is not exc:
            return _reason(inner)
    if isinstance(exc, OSError):
        return exc.strerror or str(exc) or type(exc).__name__
    return str(exc) or type(exc).__name__

