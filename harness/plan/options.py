"""The one option table: every option of a run and of its worker groups, declared once.

`harness run`'s flags, a profile's keys and --set paths, `--group "..."` strings and the
manual's flag tables are all made from this table; each transport adds the options only it
takes (its `options`, in its own file), and a group that sets another transport's option is
refused before the run.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable
from dataclasses import replace
from functools import cache
from typing import Any

from harness.errors import BadInput
from harness.modules import TRANSPORTS, transport_class
from harness.modules.interface.options import Option
from harness.textfiles import read_text
from harness.units import parse_size

PASSWORD_ENV = "HARNESS_PASSWORD"


def parse_property(text: str) -> tuple[str, str]:
    key, eq, value = text.partition("=")
    if not eq or not key.strip():
        raise ValueError(f"{text!r} is not key=value")
    return key.strip(), value


G, C, R = "group", "connection", "run"
COMMON: tuple[Option, ...] = (
    # -- the worker group
    Option("module", str, None, "Module <transport>.<Role>, e.g. loopback.Sender (see "
           "`harness modules`).", short="-m"),
    Option("destination", str, None, "Queue or topic name (for Requestor/Responder: the "
           "request queue).", short="-d"),
    Option("destination-base", int, None, "With -dx: the first destination number (default "
           "1).", short="-db"),
    Option("destination-max", int, None, "Numbered destinations: threads use <-d><N> for N "
           "from -db to -dx in turn (PerfHarness's multi-destination mode).", short="-dx"),
    Option("group-name", str, None, "Name of the group in output (default: the role, "
           "lower-cased).", short="-gn", field="name"),
    Option("threads", int, 1, "Worker threads per process.", short="-nt", low=1),
    Option("processes", int, 1, "Processes for the group, each with -nt threads.", low=1),
    Option("clients", int, 0, "Clients per process, each with a connection, identity and "
           "schedule of its own, driven by the group's -nt threads in turn (thousands a "
           "thread); 0 = one per thread. --rate is then split over the clients, and -rt is "
           "each client's rate.", low=0),
    Option("connect-rate", float, 0.0, "With --clients: clients each process connects a "
           "second from the start of the run (each sends once connected), every connection "
           "timed in the connect histogram; 0 = as fast as they connect. A thread has up "
           "to 32 attempts under way at once while connections are slow.", low=0),
    Option("reconnect-every", float, 0.0, "With --clients: churn. Each client closes its "
           "connection and opens a new one every this many seconds (the first after one to "
           "two periods, spread over the clients), timed in the connect histogram; with "
           "--no-clean, MQTT resumes its session.", low=0),
    Option("reconnect-after", int, 0, "With --clients: churn. Each client reconnects after "
           "every this many messages it sent.", low=0),
    Option("source-addresses", str, None, "Local addresses the group's connections are "
           "made from, in turn (client k from the k-th): a range 127.0.0.2-127.0.0.50 or a "
           "comma list; past one address's ports to one broker port (about 28,000)."),
    Option("idle", bool, False, "With --clients: the clients connect and hold their "
           "connections, keep-alives only, sending nothing (how many a broker holds, and the "
           "memory each takes: see --broker-pid)."),
    Option("thread-interval", int, 0, "Milliseconds between thread starts.", short="-wi",
           field="thread_interval_ms", low=0),
    Option("thread-rate", float, 0.0, "Messages/s per thread; 0 = as fast as possible. The "
           "group's threads are spread over the schedule (thread k of N runs k/N of a gap "
           "behind the first), so the group's total rate is smooth.", short="-rt", low=0),
    Option("rate", float, 0.0, "Messages/s for the whole group, split over its threads and "
           "processes; 0 = use -rt.", low=0),
    Option("rate-steps", str, None, "The group's rate in steps within the run, each "
           "RATE:LENGTH or RATE:LENGTH:RAMP (msg/s for the whole group, as --rate; a linear "
           "ramp from the step before over its first RAMP), e.g. 1000:30s,5000:30s:5s,"
           "10000:60s: the warm-up runs at the first rate, the steps follow it, and the "
           "summary gives each step its rate and percentiles (-rl defaults to their sum)."),
    Option("burst", str, None, "Besides the rate, N messages at once every EVERY (the group's, "
           "split over its threads, which burst together), e.g. 500@10s; the first one "
           "period after the start. Each is timed from its instant, as a paced send is."),
    Option("consumer-rate", float, 0.0, "Messages/s each consumer thread takes at most, on a "
           "schedule as a producer's (a slow consumer: the broker holds the rest); 0 = as "
           "fast as they come.", low=0),
    Option("consumer-latency", str, None, "A consumer's processing time for each message, "
           "spent after it is measured and before it is acknowledged: 5ms, a uniform range "
           "1ms..10ms, exp:5ms (exponential, that mean), or 1ms:0.9,50ms:0.1 (weighted); "
           "timed in the process histogram."),
    Option("poisson", bool, False, "Poisson arrivals (exponential gaps) instead of a fixed "
           "schedule."),
    Option("ramp", float, 0.0, "Seconds to ramp the rate up linearly from 0.", short="-rp", low=0),
    Option("messages", int, 0, "Messages per thread, then the thread stops; 0 = no limit.",
           short="-mg", low=0),
    Option("size", str, "256", "Message body size: 256, 4k, 1m.", short="-ms",
           convert=parse_size),
    Option("size-mix", str, None, "Sizes that vary, each message its own: by weight "
           "256:0.8,4k:0.15,64k:0.05, uniform over a range 100..10k, or @FILE with a size a "
           "line (sent in the file's order); instead of -ms.", field="sizes"),
    Option("payload-dir", str, None, "Send the files of this directory as bodies (by name, "
           "in turn), each message the size of its file."),
    Option("payload-split", str, None, "With -mf: split the file into bodies at this "
           "delimiter (\\n for lines) and send them in turn."),
    Option("payload-pool", int, 0, "Bodies made for the run, each message drawing one of them "
           "at random, as OpenMessaging Benchmark's randomized payloads are: this many of -ms "
           "bytes, of which the first --random-ratio share is random and the rest zero bytes "
           "(compressing brokers and clients see what they would of such data).", low=0),
    Option("random-ratio", float, None, "With --payload-pool: the share of each body's bytes "
           "that are random, 0 to 1 (default 1).", low=0, high=1),
    Option("type", str, "bytes", "Body: bytes (random), text (printable; sent as a text "
           "message where the protocol has them, which JMS brokers deliver as a TextMessage) "
           "or xml (text shaped as an XML document).", field="body_type"),
    Option("body-file", str, None, "Send this file's bytes as the body (overrides -ms).",
           short="-mf"),
    Option("property", str, None, "Message property key=value (repeatable).",
           field="properties", multiple=True,
           convert=lambda items: dict(parse_property(p) for p in items or [])),
    Option("correlation-id", str, None, "Correlation id prefix; each thread sends "
           "<prefix><thread number> (a Requestor sets its own, to match replies).",
           short="-co"),
    Option("persistent", bool, False, "Persistent messages.", short="-pp"),
    Option("ttl", float, 0.0, "Each message's time to live at the broker, in seconds (one "
           "not consumed by then is dropped, and counted lost); 0 = for ever. Where the "
           "transport has it (amqp, amqp10, stomp, mqtt 5).", low=0),
    Option("priority", int, None, "Each message's priority, 0 (lowest) to 9, where the "
           "transport has it (amqp, amqp10, stomp).", low=0, high=9),
    Option("transacted", bool, False, "Transacted sessions (commit every -cc messages).",
           short="-tx"),
    Option("commit-count", int, 1, "Messages per transaction with -tx.", short="-cc", low=1),
    Option("crc", float, 0.0, "Fraction of received messages whose body CRC32 is checked "
           "(0 to 1)."),
    Option("reply-timeout", float, 5.0, "Seconds a Requestor waits for a reply."),
    Option("selector", str, None, "Message selector on the subscription, where the broker "
           "filters (JMS syntax)."),
    Option("durable-name", str, None, "Durable subscription name prefix (each thread "
           "appends its number)."),
    # -- the connection (per group)
    Option("host", str, "127.0.0.1", "Broker host.", scope=C),
    # Their help lists each transport's own defaults: see _per_transport_help().
    Option("port", int, 0, "Broker port.", scope=C, low=0, high=65535),
    Option("flavour", str, "", "Broker dialect.", scope=C),
    Option("protocol", str, "", "Protocol version.", scope=C),
    Option("user", str, None, "Login user name.", scope=C),
    Option("password", str, None, "Login password (never printed or written; prefer "
           "--password-env or --password-file).", scope=C),
    Option("password-env", str, None, "Read the password from this environment variable "
           f"(default: ${PASSWORD_ENV} if set).", scope=C),
    Option("password-file", str, None, "Read the password from this file.", scope=C),
    Option("tls", bool, False, "Connect with TLS.", scope=C),
    Option("ca", str, None, "CA certificate file to verify the broker with (--tls).",
           scope=C),
    Option("cert", str, None, "Client certificate file (--tls).", scope=C),
    Option("key", str, None, "Client key file (--tls).", scope=C),
    Option("client-id", str, None, "Client id prefix; each thread appends its number "
           "(durable subscriptions and persistent sessions are keyed by it).", scope=C),
    Option("connect-retry", int, 0, "Attempts to retry at start, with back-off: the connection, "
           "declarations and subscription together.",
           scope=C, low=0),
    # -- the run
    Option("backlog", str, None, "Backlog, then drain: the consumers (Receiver, Subscriber) "
           "are held while the producers fill their destinations to this many messages "
           "(100000) or bytes (64MB), then released to drain them while the producers keep "
           "their rate; the summary gives the fill and drain times and the drain rate.",
           scope=R),
    Option("run-length", float, 0.0, "Seconds to run; 0 = until -mg is reached or Ctrl-C.",
           short="-rl", field="duration", scope=R, low=0),
    Option("warmup", float, 0.0, "Seconds of warm-up: written, marked, left out of the "
           "summary.", short="-sw", scope=R, low=0),
    Option("interval", float, 5.0, "Seconds per statistics interval.", short="-ss", scope=R),
    Option("drain", float, 5.0, "Seconds consumers may keep receiving after producers stop.",
           scope=R, low=0),
    Option("name", str, "run", "Run name, part of the run directory name.", short="-n",
           scope=R),
    Option("output", str, "runs", "Directory that receives the run directory.", short="-o",
           scope=R),
    Option("node", str, None, "Node name in output files (default: host name).", scope=R),
    Option("broker-pid", int, None, "PID of a local broker: its CPU% and CPU ms per "
           "message received are reported.", scope=R),
    Option("seed", int, 0, "Seed of the Poisson arrivals: the same seed gives the same "
           "schedule in every run.", scope=R),
    Option("switch-interval", float, None, "sys.setswitchinterval() seconds in worker "
           "processes (default: the interpreter's).", scope=R),
    Option("reorder-window", float, 1.0, "Seconds a missing message may arrive late and "
           "count as reordered before it counts as lost.", scope=R, low=0),
    Option("slo", str, None, "A threshold the run must meet, e.g. 'receiver.latency.p99 < "
           "5ms', 'sender.rate >= 0.99 * target', 'lost == 0' (repeatable); a run that misses "
           "one exits 99.", scope=R, multiple=True),
    Option("slo-interval", bool, False, "Judge the thresholds on every measured interval "
           "too, not only on the measured span.", scope=R),
    Option("slo-abort", int, 0, "Stop the run after this many measured intervals in a row "
           "that missed a threshold (0: never); implies --slo-interval.", scope=R, low=0),
    Option("junit", str, None, "Write the thresholds' verdicts to this file as JUnit XML, "
           "one test case each.", scope=R),
    Option("metrics-port", int, None, "Serve the run's figures for Prometheus on this port "
           "(OpenMetrics at /metrics) while it runs.", scope=R, low=0, high=65535),
    Option("metrics-host", str, "127.0.0.1", "The address --metrics-port listens on "
           "(0.0.0.0: every interface).", scope=R),
    Option("control", bool, False, "Take the live keys (rate, pause, thread, stop) from "
           "another process as well: harness view --follow, a page of harness serve (through "
           "a socket only this user can open).", scope=R),
    Option("serve", int, None, "Serve the run's screen as a web page on 127.0.0.1:PORT while "
           "it runs, its keys steering the run (implies --control; harness serve for another "
           "address).", scope=R, low=1, high=65535),
    Option("pushgateway", str, None, "Push the run's final figures to this Prometheus "
           "Pushgateway (http://host:9091), for runs shorter than a scrape.", scope=R),
    Option("push-intervals", bool, False, "With --pushgateway: push every interval's "
           "figures too, not only the final ones.", scope=R),
    Option("label", str, None, "A label KEY=VALUE recorded in the run's manifest, to find the "
           "run by with `harness runs --label` (repeatable).", scope=R, multiple=True),
    Option("run-id", str, None, "Run id; give every node of a multi-node run the same one, so "
           "that `harness merge` knows their files belong together (default: a new random "
           "id).", scope=R),
)
# Options that are read to find the password, then dropped: the group keeps only the secret.
CREDENTIALS = ("password-env", "password-file")


@cache
def table() -> dict[str, Option]:
    """Every option by key: the common ones, then each transport's own in turn, an option
    that several transports declare listed once with all of them."""
    out = {o.key: o for o in COMMON}
    for name in TRANSPORTS:
        try:
            declared = transport_class(name).options
        except BadInput:
            continue  # its client library is missing: using it says which extra to install
        for option in declared:
            known = out.get(option.key)
            if known is None:
                out[option.key] = _with(option, transports=(name,))
            elif known.transports and (known.type, known.default) == (option.type,
                                                                        option.default):
                out[option.key] = _with(known, transports=(*known.transports, name))
            else:
                raise TypeError(f"transport {name} declares --{option.key} unlike "
                                f"{', '.join(known.transports) or 'the common options'}")
    return _per_transport_help(out)


def _per_transport_help(out: dict[str, Option]) -> dict[str, Option]:
    """The help of --port, --flavour and --protocol, from what each transport says of
    itself."""
    ports, flavours, protocols = [], [], []
    for name in TRANSPORTS:
        try:
            transport = transport_class(name)
        except BadInput:
            continue
        if transport.default_port:
            tls = f" ({transport.tls_port} with --tls)" if transport.tls_port else ""
            ports.append(f"{name} {transport.default_port}{tls}")
        for named, listed in ((transport.flavours, flavours),
                              (transport.protocols, protocols)):
            if named:
                first, *rest = named
                listed.append(f"{name} {', '.join([f'{first} (default)', *rest])}")
    out["port"] = _with(out["port"], help="Broker port; 0 = the transport's default ("
                        f"{', '.join(ports)}).")
    out["flavour"] = _with(out["flavour"], help=f"Broker dialect: {'; '.join(flavours)}.")
    out["protocol"] = _with(out["protocol"], help="Protocol version: "
                            f"{'; '.join(protocols)}.")
    return out


def _with(option: Option, **changes: Any) -> Option:
    return replace(option, **changes)


def in_scope(*scopes: str) -> list[Option]:
    return [o for o in table().values() if o.scope in scopes]


@cache
def by_flag() -> dict[str, Option]:
    """Every spelling (-rt, --thread-rate, --no-clean) -> its option."""
    out = {}
    for option in table().values():
        for flag in option.flags:
            out[flag] = option
        if option.negative:
            out[f"--no-{option.key}"] = option
    return out


def parse_args(args: Iterable[str], where: str) -> dict[str, Any]:
    """Options given as command-line words (a --group string), by key, each value checked
    against its type; BadInput names `where` and what is wrong."""
    values: dict[str, Any] = {}
    words = list(args)
    flags = by_flag()
    i = 0
    while i < len(words):
        word = words[i]
        flag, eq, inline = word.partition("=")
        option = flags.get(flag)
        if option is None:
            import difflib
            near = difflib.get_close_matches(flag, list(flags), n=1, cutoff=0.6)
            hint = f"; did you mean {near[0]}?" if near else ""
            raise BadInput(where, f"no such option: {flag}{hint}")
        if option.type is bool and not eq:
            values[option.key] = not flag.startswith("--no-")
            i += 1
            continue
        if not eq:
            if i + 1 >= len(words):
                raise BadInput(where, f"{flag} needs a value")
            inline, i = words[i + 1], i + 1
        i += 1
        try:
            value = option.value(inline)
        except ValueError as exc:
            raise BadInput(option.flag, str(exc)) from None
        if option.multiple:
            values.setdefault(option.key, []).extend(value)
        else:
            values[option.key] = value
    return values


def split(text: str, where: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise BadInput(where, f"{text!r}: {exc}") from None


def field_values(given: dict[str, Any], scopes: tuple[str, ...]) -> dict[str, Any]:
    """The spec fields of these scopes from options given by key (the rest at their
    defaults), each converted (sizes into bytes, properties into a dict)."""
    out = {}
    for option in in_scope(*scopes):
        if option.key in CREDENTIALS:
            continue
        value = given.get(option.key, option.default)
        if option.multiple and value is None:
            value = []
        if option.convert is not None and value is not None:
            try:
                value = option.convert(value)
            except ValueError as exc:
                raise BadInput(option.flag, str(exc)) from None
        out[option.name] = value
    return out


def set_values(spec: Any, scopes: tuple[str, ...]) -> dict[str, Any]:
    """The options of a group or run that differ from their defaults, by key: what a
    profile resolved to, as --set paths name it. The password is never shown."""
    defaults = field_values({}, scopes)
    out = {}
    for option in in_scope(*scopes):
        if option.key in CREDENTIALS or option.key == "password":
            continue
        if option.transports:
            if option.name not in spec.options:
                continue
            value = spec.options[option.name]
        else:
            value = getattr(spec, option.name)
        if value != defaults[option.name]:
            out[option.key] = value
    return out


def password(given: dict[str, Any]) -> str | None:
    """The broker password from --password, --password-env, --password-file or
    $HARNESS_PASSWORD, in that order."""
    if given.get("password"):
        return given["password"]
    if given.get("password-env"):
        value = os.environ.get(given["password-env"])
        if value is None:
            raise BadInput("--password-env", f"environment variable {given['password-env']} "
                           "is not set")
        return value
    if given.get("password-file"):
        return read_text(given["password-file"], "--password-file").strip()
    return os.environ.get(PASSWORD_ENV)


SCOPE_TITLES = {"group": "Worker group (each `-g` too)", "connection": "Connection (per group)",
                "run": "Run"}


def markdown_tables(transport: str | None = None) -> str:
    """The manual's flag tables (contrib/docs/docs/running.md), made from this table (a
    test keeps the page in step); with a transport, the one table of its own options (its
    page of the manual)."""
    if transport is not None:
        out = ["| flag | meaning | default |", "| --- | --- | --- |"]
        out += [_row(option, takes=False) for option in table().values()
                if transport in option.transports]
        return "\n".join(out) + "\n"
    out = []
    for scope, title in SCOPE_TITLES.items():
        out += [f"{title}:", "", "| flag | meaning | default | transports |",
                "| --- | --- | --- | --- |"]
        out += [_row(option) for option in in_scope(scope)]
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def _row(option: Option, takes: bool = True) -> str:
    """An option as a row of the manual's tables: flags, meaning, default and (takes) the
    transports that take it."""
    flags = " ".join(f"`{f}`" for f in option.flags)
    if option.negative:
        flags += f" `--no-{option.key}`"
    default = "" if option.default is None or option.default == "" else \
        ("on" if option.default else "off") if option.type is bool else f"`{option.default}`"
    meaning = option.help.replace("|", "/").replace("<", "&lt;").replace(">", "&gt;")
    row = f"| {flags} | {meaning} | {default} |"
    return f"{row} {', '.join(option.transports) or 'all'} |" if takes else row
