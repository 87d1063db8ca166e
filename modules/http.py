"""HTTP request/reply through urllib3: the Requestor only (an HTTP server is the responder),
as Performance Harness's HTTP Requestor drove a message broker's HTTPInput / HTTPReply flows.

Each worker thread keeps one connection alive (a urllib3 pool of one) and sends each request
when it falls due, on the same schedule as every producer: its latency runs from the
intended send time to the end of the response (wrk2's rule), so a server that stalls shows
up in latency instead of slowing the schedule down. `-d` is the URL (or a path, with --host
and --port); POST sends the `-ms` body (GET sends none), `--property` values are request
headers. A status other than 2xx is an error counted by its code (`HTTP 500`); a request with
no response within --reply-timeout is a timeout.

urllib3 because a request costs it less client CPU than httpx or requests (both add their
own layers over the same kind of connection), and it is what requests itself is built on.
"""

from __future__ import annotations

import contextlib
import socket
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from harness.modules.interface.base import Capability, Transport, TransportError
from harness.modules.interface.message import Destination, Message
from harness.modules.interface.optional import TemporaryQueues
from harness.modules.interface.options import option
from harness.modules.interface.roles import ROLES, Role
from harness.modules.interface.settings import Settings
from harness.modules.kit.library import library
from harness.modules.kit.reconnect import Reconnecting

from harness.clock import now_ns

# urllib3, imported at its first use (harness.modules.kit.library)
urllib3 = library("urllib3", "exceptions")

METHODS = ("POST", "GET", "PUT")
CONNECT_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class HttpOptions:
    method: str = option("POST", "HTTP method: POST or PUT (with the -ms body) or GET.")


def is_url(destination: str) -> bool:
    """A URL, not a path on --host / --port (whose query may hold one)."""
    return "://" in destination and not destination.startswith("/")


def target(settings: Settings[Any], destination: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, path) of a destination: a URL, or a path on --host / --port."""
    if is_url(destination):  # problems() has refused any but an http(s) URL
        url = urlsplit(destination)
        scheme = url.scheme
        port = url.port or (443 if scheme == "https" else 80)
        path = url.path or "/"
        if url.query:
            path += "?" + url.query
        return scheme, url.hostname or "127.0.0.1", port, path
    scheme = "https" if settings.tls else "http"
    host, port = settings.address(443 if settings.tls else 80)
    return scheme, host, port, destination if destination.startswith("/") else "/" + \
        destination


def _url_problems(destination: str) -> list[str]:
    try:
        url = urlsplit(destination)
    except ValueError as exc:
        return [f"{destination!r}: {exc}"]
    if "@" in url.netloc:  # checked before the URL is ever printed
        return ["credentials go in --user and --password (or --password-env), not in the "
                "URL, where every output would show them"]
    if url.scheme not in ("http", "https"):
        return [f"{destination!r}: a URL must be http:// or https:// (or give a path on "
                "--host / --port)"]
    try:
        url.port  # noqa: B018 (it parses on reading)
    except ValueError as exc:
        return [f"{destination!r}: {exc}"]
    return [] if url.hostname else [f"{destination!r}: no host"]


class HttpTransport(Reconnecting, Transport, TemporaryQueues):
    name = "http"
    default_port, tls_port = 80, 443
    description = "HTTP request/reply via urllib3 (Requestor only; the server answers)"
    # Properties are the request's headers.
    capabilities = Capability.QUEUES | Capability.REQUEST_REPLY | Capability.TEMP_QUEUES | \
        Capability.PROPERTIES
    Options = HttpOptions
    settings: Settings[HttpOptions]

    @classmethod
    def plays(cls, role: Role) -> bool:
        return role.asks  # the server answers

    @classmethod
    def problems(cls, settings: Settings[HttpOptions]) -> list[tuple[str, str]]:
        out = []
        if not cls.plays(ROLES[settings.role]):
            out.append(("-m", "the http transport has only a Requestor: the HTTP server "
                        "answers"))
        if is_url(settings.destination):
            out.extend(("-d", problem) for problem in _url_problems(settings.destination))
        if settings.options.method.upper() not in METHODS:
            out.append(("--method", f"methods are {', '.join(METHODS)}"))
        for flag, given in (("-pp", settings.persistent), ("-tx", settings.transacted),
                            ("--client-id", settings.client_id),
                            ("--selector", settings.selector),
                            ("--durable-name", settings.durable_name)):
            if given:
                out.append((flag, "means nothing to an HTTP request"))
        return out

    def __init__(self, settings: Settings[HttpOptions]) -> None:
        super().__init__(settings)
        self.method = settings.options.method.upper()
        self.pool: Any = None
        self.pool_key: tuple[str, str, int] | None = None
        self.reply: Message | None = None
        self.reply_timeout = settings.reply_timeout
        self.reply_timeout_ns = int(settings.reply_timeout * 1e9)
        self.late = False  # the last request's response did not come in time
        self.targets: dict[str, tuple[str, str, int, str]] = {}
        self.auth: dict[str, str] = {}

    def open(self) -> None:
        """Reach the destination's server once, so that one that is down fails the start as
        every broker does; the connection the requests keep alive opens with the first."""
        s = self.settings
        _, host, port, _ = target(s, s.destination)
        try:
            socket.create_connection((host, port), CONNECT_TIMEOUT_S).close()
        except OSError as exc:
            raise TransportError(f"cannot connect to {host}:{port}: "
                                 f"{exc.strerror or exc}") from None
        # Basic authentication, the one every server takes, with the password as it stands
        # at this connection; it is never shown.
        self.auth = urllib3.make_headers(basic_auth=f"{s.user}:{s.secret() or ''}") \
            if s.user else {}
        self.connected = True

    def _pool(self, scheme: str, host: str, port: int) -> Any:
        if self.pool_key != (scheme, host, port):
            if self.pool is not None:
                self.pool.close()
            s = self.settings
            timeout = urllib3.Timeout(connect=CONNECT_TIMEOUT_S, read=self.reply_timeout)
            common = dict(maxsize=1, block=True, timeout=timeout, retries=False)
            if scheme == "https":
                self.pool = urllib3.HTTPSConnectionPool(
                    host, port, ca_certs=s.ca, cert_file=s.cert, key_file=s.key, **common)
            else:
                self.pool = urllib3.HTTPConnectionPool(host, port, **common)
            self.pool_key = (scheme, host, port)
        return self.pool

    def send(self, destination: Destination, message: Message) -> None:
        if not self.connected:
            self._check()
        name = destination.name
        where = self.targets.get(name)
        if where is None:  # parsed once: a URL's port and host cost a microsecond a request
            where = self.targets[name] = target(self.settings, name)
        scheme, host, port, path = where
        pool = self._pool(scheme, host, port)
        body = None if self.method == "GET" else message.body
        headers = message.properties
        if self.auth:
            headers = {**self.auth, **headers} if headers else self.auth
        started = now_ns()
        try:
            response = pool.urlopen(self.method, path, body=body,
                                    headers=headers, retries=False,
                                    preload_content=True, assert_same_host=False)
        except urllib3.exceptions.NewConnectionError as exc:
            # Before TimeoutError: urllib3 2 derives a refused connection from its connect
            # timeout, and a server that is down must not read as one that is slow.
            reason = str(exc.args[0] if exc.args else exc).rpartition(": ")[2]
            self._lost()
            raise TransportError(f"cannot connect to {host}:{port}: {reason}",
                                 kind="connect") from None
        except urllib3.exceptions.ConnectTimeoutError:
            self._lost()
            raise TransportError(f"no connection within {CONNECT_TIMEOUT_S:g} s",
                                 kind="timeout") from None
        except urllib3.exceptions.TimeoutError:
            # The request went out and no response came: sent, and a timeout (receive()
            # says so), as a broker's request that is never answered.
            self.reply, self.late = None, True
            return
        except urllib3.exceptions.HTTPError as exc:
            raise TransportError(f"{scheme}://{host}:{port}{path}: {_reason(exc)}") from None
        status = response.status
        if not 200 <= status < 300:
            raise TransportError(f"{status} {response.reason or ''}".strip(),
                                 kind=f"HTTP {status}", answered=True)
        if now_ns() - started > self.reply_timeout_ns:
            # Each socket read is bounded by the timeout, not the whole response: one that
            # came in pieces, each in time, may still be late as a whole.
            self.reply, self.late = None, True
            return
        # The reply is the request completed: the round trip is what is measured.
        self.reply = Message(response.data, message.producer, message.seq, message.ts,
                             message.sent)

    def _lost(self) -> None:
        """A connection that failed: an outage until a connection opens again (at most
        every RECONNECT_EVERY_S; requests meanwhile fail at once, unsent)."""
        if self.connected:
            self.connected = False
            self.last_attempt = time.monotonic()
            self.outages.went_down()

    def _reopen(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool, self.pool_key = None, None
        self.open()

    def _subscribe(self, destination: Destination) -> None:
        """Responses come back on the request's own connection."""

    def subscribe(self, destination: Destination) -> None:
        """Responses come back on the request's own connection."""

    def receive(self, timeout: float) -> Message | None:
        if self.late:
            self.late = False
            raise TransportError(f"no response within {self.reply_timeout:g} s",
                                 kind="timeout", answered=True)
        reply, self.reply = self.reply, None
        return reply

    def temporary_queue(self) -> Destination:
        return Destination("queue", "response")

    def close(self) -> None:
        if self.pool is not None:
            with contextlib.suppress(Exception):
                self.pool.close()
            self.pool = None


def _reason(exc: BaseException) -> str:
    inner = getattr(exc, "reason", None)
    return str(inner or exc) or type(exc).__name__
