"""How an option is declared: once, with its flags, type, default and help. The common options
(harness.plan.options) and each transport's own (its `options`) are declared this way, and the
run command's flags, profile keys, --set paths and the manual's flag tables are all made from
these declarations."""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

SCOPES = ("group", "connection", "run")


@dataclass(frozen=True)
class Option:
    key: str  # the long flag without dashes, and the key in a profile: "thread-rate"
    type: type  # str, int, float or bool: what the command line and a profile accept
    default: Any
    help: str
    short: str | None = None  # PerfHarness's short flag: "-rt"
    field: str = ""  # the GroupSpec / RunSpec field it sets; "": the key with underscores
    scope: str = "group"  # group, connection (both per group) or run
    multiple: bool = False  # repeatable: a list of values
    negative: bool = False  # a bool that also has --no-<key>
    # Turns what was given into the field's value (a size into bytes), raising ValueError
    # with the reason; None: the value as typed.
    convert: Callable[[Any], Any] | None = None
    low: float | None = None  # the smallest value accepted
    high: float | None = None  # the largest value accepted
    transports: tuple[str, ...] = ()  # who takes it; (): every transport
    # Which groups it is for: "send" (Sender, Publisher, Requestor, and a Responder's
    # replies), "receive" (Receiver, Subscriber, Responder, and a Requestor's replies); "":
    # all. A group that cannot use it refuses it.
    side: str = ""

    @property
    def name(self) -> str:
        return self.field or self.key.replace("-", "_")

    @property
    def flags(self) -> tuple[str, ...]:
        long = f"--{self.key}"
        return (self.short, long) if self.short else (long,)

    @property
    def flag(self) -> str:
        """How errors name it: the short flag where there is one, as PerfHarness users type."""
        return self.short or f"--{self.key}"

    def out_of_bounds(self, value: Any) -> str | None:
        """What is wrong with a value outside low..high, else None."""
        if value is None or isinstance(value, bool) or not isinstance(value, int | float):
            return None
        if (self.low is not None and value < self.low) or \
                (self.high is not None and value > self.high):
            bound = f">= {self.low:g}" if self.high is None else \
                f"from {self.low:g} to {self.high:g}"
            return f"must be {bound}, got {value:g}"
        return None

    def value(self, given: Any) -> Any:
        """A value from a profile or from the text of a flag, checked against the type;
        ValueError says what is wrong."""
        if self.multiple:
            if isinstance(given, dict):
                given = [f"{k}={v}" for k, v in given.items()]
            items = given if isinstance(given, list) else [given]
            return [_scalar(self.type, item) for item in items]
        return _scalar(self.type, given)


def _scalar(kind: type, given: Any) -> Any:
    if isinstance(given, dict | list):
        raise ValueError(f"must be a single value, got {type(given).__name__}")
    if kind is bool:
        if isinstance(given, bool):
            return given
        if isinstance(given, str) and given.lower() in ("true", "false"):
            return given.lower() == "true"
        raise ValueError(f"must be true or false, got {given!r}")
    if kind is int:
        if isinstance(given, int) and not isinstance(given, bool):
            return given
        try:
            return int(str(given).strip())
        except ValueError:
            raise ValueError(f"{given!r}: Input should be a valid integer, unable to parse "
                             "string as an integer") from None
    if kind is float:
        if isinstance(given, bool):
            raise ValueError(f"{given!r}: Input should be a valid number")
        try:
            value = float(given if isinstance(given, int | float) else str(given).strip())
        except ValueError:
            raise ValueError(f"{given!r}: Input should be a valid number, unable to parse "
                             "string as a number") from None
        if not math.isfinite(value):  # NaN passes every bound: no comparison with it holds
            raise ValueError(f"{given!r}: Input should be a finite number")
        return value
    if isinstance(given, bool):
        return "true" if given else "false"
    return str(given)


# The liveness check every transport whose protocol has one runs by default (--heartbeat):
# a partition, which closes nothing, is found in a few seconds of a run, not minutes.
HEARTBEAT_S = 3.0
HEARTBEAT_HELP = ("Liveness check in seconds: STOMP heart-beats, AMQP 0-9-1 heartbeats, AMQP 1.0 "
                  "idle timeout (twice this), MQTT keep-alive, NATS pings, Redis PINGs after "
                  "this long idle, Kafka requests (socket.timeout.ms twice this). A peer "
                  "silent for about two of them (a partition: packets dropped, nothing "
                  "closed) is a lost connection, counted and reconnected as any outage; "
                  "0: off (AMQP 0-9-1 and MQTT round up to whole seconds).")


CERT_LOGIN_HELP = ("Log in as the TLS client certificate (--cert) names, with SASL EXTERNAL "
                   "(RabbitMQ: rabbitmq_auth_mechanism_ssl, the user its ssl_cert_login_from "
                   "takes from the certificate); no user or password is sent. STOMP and MQTT "
                   "on RabbitMQ do so where no --user is given (its ssl_cert_login).")


def cert_login_problems(cert_login: bool, tls: bool, cert: str | None, user: str | None
                        ) -> list[tuple[str, str]]:
    """--cert-login: a certificate to log in with, and no other login beside it."""
    if not cert_login:
        return []
    if not tls or not cert:
        return [("--cert-login", "needs --tls and --cert: the client certificate is the login")]
    if user is not None:
        return [("--cert-login", "the certificate names the user: give no --user")]
    return []


WEBSOCKET_HELP = ("Connect over WebSockets, to this path (RabbitMQ's web_mqtt and web_stomp "
                  "plugins: /ws, on 15675 and 15674); with --tls over wss://.")


def websocket_problems(path: str | None) -> list[tuple[str, str]]:
    """--websocket PATH: an absolute path, as a URL's."""
    if path is not None and (not path.startswith("/") or any(c.isspace() for c in path)):
        return [("--websocket", f"{path!r}: give the path the broker serves WebSockets on, "
                 "starting with / (RabbitMQ's: /ws)")]
    return []


def connect_timeout(heartbeat: float, most: float = 10.0) -> float:
    """How long a connection attempt may wait: two heartbeats (at least two seconds), at
    most `most`; with the liveness check off, `most`."""
    return min(most, max(2 * heartbeat, 2.0)) if heartbeat else most


def option(default: Any, help: str, *, key: str = "", scope: str = "group", low: float | None =
           None, high: float | None = None, negative: bool = False,
           multiple: bool = False, side: str = "",
           convert: Callable[[Any], Any] | None = None) -> Any:
    """A field of a transport's options dataclass, declared once: its default and what the
    command line, profiles and the manual say of it (see declared())."""
    return dataclasses.field(default=default, metadata={"option": dict(
        help=help, key=key, scope=scope, low=low, high=high, negative=negative,
        multiple=multiple, side=side, convert=convert)})


def declared(options: type) -> tuple[Option, ...]:
    """The Option of every field of a transport's options dataclass; the flag is the field
    name with dashes unless the field names another key."""
    hints = typing.get_type_hints(options)
    out = []
    for f in dataclasses.fields(options):
        meta = dict(f.metadata["option"])
        # A repeatable option (a list of values) takes text, as its flag does.
        kind = str if meta["multiple"] else next(
            t for t in typing.get_args(hints[f.name]) or (hints[f.name],)
            if t is not type(None))
        key = meta.pop("key") or f.name.replace("_", "-")
        out.append(Option(key, kind, f.default, field=f.name, **meta))
    return tuple(out)
