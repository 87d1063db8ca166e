"""A worker group: a module (transport x role) run by threads in processes, with its
options; built from options given by key (harness.plan.options) and validated before
anything starts. Every check names the flag at fault, so the CLI can print one line and
exit 2."""

from __future__ import annotations

import difflib
import ipaddress
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from harness.errors import BadInput
from harness.modules import TRANSPORTS, transport_class
from harness.modules.interface.base import Capability, Transport
from harness.modules.interface.optional import EmbeddedBroker, Multiplexed
from harness.modules.interface.roles import ROLES
from harness.modules.interface.settings import GROUP_FIELDS, Settings
from harness.plan.options import field_values, password, table
from harness.plan.payloads import MOST_BYTES, read_payloads
from harness.plan.sizes import parse_sizes
from harness.plan.steps import RateStep, parse_burst, parse_steps
from harness.plan.template import TemplateError, check, expand
from harness.plan.worktime import parse_work_time


@dataclass
class GroupSpec:
    """One worker group: a module (transport x role) run by `threads` threads in each of
    `processes` processes."""

    module: str
    destination: str | None = None
    # PerfHarness's -db / -dx: threads use destination<N>, N from base to max, in turn.
    destination_base: int | None = None
    destination_max: int | None = None
    name: str = ""
    threads: int = 1
    processes: int = 1
    # Connections per process, each its own client and producer stream, driven by the
    # group's threads in turn; 0: one per thread.
    clients: int = 0
    connect_rate: float = 0.0  # clients a second each process connects; 0: at once
    idle: bool = False  # the clients connect and keep their connections alive, sending nothing
    # Churn: each client closes its connection and opens a new one every so many seconds,
    # or after so many messages.
    reconnect_every: float = 0.0
    reconnect_after: int = 0
    # Local addresses the group's connections are made from, in turn: "a.b.c.d-a.b.c.e" or a
    # comma list.
    source_addresses: str | None = None
    thread_interval_ms: int = 0
    thread_rate: float = 0.0
    rate: float = 0.0
    poisson: bool = False
    ramp: float = 0.0
    # The group's rate in steps (harness.plan.steps' text), instead of -rt or --rate.
    rate_steps: str | None = None
    burst: str | None = None  # N@EVERY: the group's bursts besides its rate
    # A slow consumer: messages a second each consumer thread takes at most, and the time it
    # spends on each (harness.plan.worktime's text) before acknowledging it.
    consumer_rate: float = 0.0
    consumer_latency: str | None = None
    messages: int = 0
    size: int = 256
    body_type: str = "bytes"  # bytes, text (printable; a STOMP text frame) or xml
    body_file: str | None = None
    # Sizes that vary (harness.plan.sizes' text); bodies from files (harness.plan.payloads).
    sizes: str | None = None
    payload_dir: str | None = None
    payload_split: str | None = None
    payload_pool: int = 0  # bodies drawn at random per message (harness.plan.payloads.pool)
    random_ratio: float | None = None
    properties: dict[str, str] = field(default_factory=dict)
    correlation_id: str | None = None
    persistent: bool = False
    ttl: float = 0.0  # seconds each message lives at the broker; 0: for ever
    priority: int | None = None
    transacted: bool = False
    commit_count: int = 1
    crc: float = 0.0
    reply_timeout: float = 5.0
    selector: str | None = None
    durable_name: str | None = None
    # The connection, per group (a transport reads what it needs).
    host: str = "127.0.0.1"
    port: int = 0  # 0: the protocol's default port
    flavour: str = ""  # broker dialect; "": the transport's default
    protocol: str = ""  # protocol version; "": the transport's default
    user: str | None = None
    password: str | None = None  # a secret: never printed, scrubbed from the manifest
    # Where it came from when --password-file gave it: read again at each connection.
    password_file: str | None = None
    tls: bool = False
    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    client_id: str | None = None
    connect_retry: int = 0
    # The options only the group's transport takes (its `options`), by field name.
    options: dict[str, Any] = field(default_factory=dict)
    # Scenario event handlers (harness.experiments.scenarios): what to send on for each
    # message received.
    plan: list[dict[str, Any]] | None = None
    # Scenario drivers: body sizes drawn by weight, [(bytes, weight)]; size is the largest.
    size_mix: list[tuple[int, float]] | None = None
    # What the group's transport says of it (filtered, confirmed, embedded), asked once
    # when the run is made and kept in its manifest, so that whatever reads the run later
    # (a merge on a cluster, view, report, export) needs no client library; None: ask
    # (harness.engine.runner.recorded_options records them).
    traits: dict[str, bool] | None = None

    @property
    def transport(self) -> str:
        return self.module.partition(".")[0]

    @property
    def role(self) -> str:
        return self.module.partition(".")[2]

    @property
    def streams(self) -> int:
        """The clients of each process: one per thread, unless --clients."""
        return self.clients or self.threads

    @property
    def per_thread_rate(self) -> float:
        """Messages a second for each client (each thread, unless --clients); 0 means as
        fast as possible. With --rate-steps, the first step's that sends."""
        if self.rate_steps:
            first = next(s.rate for s in parse_steps(self.rate_steps) if s.rate)
            return first / (self.streams * self.processes)
        if self.rate:
            return self.rate / (self.streams * self.processes)
        return self.thread_rate

    def thread_steps(self, warmup: float) -> list[RateStep] | None:
        """Each client's (each thread's) steps from the start of the run, the warm-up in the
        first; None without --rate-steps."""
        if not self.rate_steps:
            return None
        share = 1.0 / (self.streams * self.processes)
        steps = parse_steps(self.rate_steps)
        return [RateStep(s.rate * share, s.seconds + (warmup if i == 0 else 0.0), s.ramp)
                for i, s in enumerate(steps)]

    @property
    def destination_kind(self) -> str:
        """queue or topic: what the group's role uses."""
        return ROLES[self.role].kind

    @property
    def endpoint(self) -> tuple[str, str, str]:
        """(transport, queue or topic, destination): the groups that meet at one endpoint
        send and receive the same messages."""
        return self.transport, self.destination_kind, self.destination or ""

    @property
    def filtered(self) -> bool:
        """Its consumers may receive only part of what is sent to its destination: a
        selector, or routing by more than the destination's name (an AMQP binding's key or
        arguments), so gaps in a stream are not loss."""
        return bool(self.selector) or self.traits_asked()["filtered"]

    @property
    def confirmed(self) -> bool:
        """Its broker confirms each send (harness.modules.interface.base.Transport.confirms)."""
        return ROLES[self.role].produces and self.traits_asked()["confirmed"]

    @property
    def embedded(self) -> bool:
        """Its broker lives inside each process: every process runs its own copy of the
        group, and a consumer sees only the producers of its own process."""
        return self.traits_asked()["embedded"]

    def traits_asked(self) -> dict[str, bool]:
        """The traits as recorded, else asked of the transport (which imports its client;
        never kept here, since a sweep's point may change what they depend on)."""
        if self.traits is not None:
            return self.traits
        transport = transport_class(self.transport)
        settings = self.settings("", 0, 0)
        return {"filtered": bool(transport.filters(settings)),
                "confirmed": bool(transport.confirms(settings)),
                "embedded": issubclass(transport, EmbeddedBroker)}

    def thread_number(self, copy: int, thread: int) -> int:
        """A thread's number in its group, from 1, across the group's processes (copy: which
        of them) ({{n}} in templates); with --clients, a client's."""
        return copy * self.streams + thread + 1

    @property
    def destination_count(self) -> int:
        """How many destinations the group's threads use: 1, or -db to -dx."""
        if self.destination_max is None:
            return 1
        base = 1 if self.destination_base is None else self.destination_base
        return self.destination_max - base + 1

    def destination_for(self, copy: int, thread: int) -> str:
        """The destination of one thread: destination itself, or with -dx the numbered one
        whose turn the thread is (PerfHarness's multi-destination mode)."""
        if self.destination_max is None:
            if self.destination and "{{" in self.destination:
                return expand(self.destination, self.thread_number(copy, thread),
                              self.streams * self.processes)
            return self.destination or ""
        base = 1 if self.destination_base is None else self.destination_base
        n = self.thread_number(copy, thread)
        return f"{self.destination}{base + (n - 1) % self.destination_count}"

    def settings(self, node: str, process: int, thread: int, copy: int = 0) -> Settings[Any]:
        """What a transport instance is given: the group's fields, its transport's options
        and where it runs, with per-thread templates ({{ ... }}) evaluated for this thread."""
        out = {name: getattr(self, name) for name in GROUP_FIELDS}
        n, total = self.thread_number(copy, thread), self.streams * self.processes
        for key in TEMPLATED:
            if out[key]:
                out[key] = expand(out[key], n, total)
        options = transport_class(self.transport).Options
        own = {k: v for k, v in self.options.items() if k in options.__dataclass_fields__}
        source = None
        if self.source_addresses:
            addresses = address_list(self.source_addresses)
            source = addresses[(n - 1) % len(addresses)]
        return Settings(options(**own), **out, node=node, process=process, thread=thread,
                        destination=self.destination_for(copy, thread), source_address=source)


@cache
def address_list(text: str) -> list[str]:
    """--source-addresses: "127.0.0.2-127.0.0.50" (a range, both ends in) or a comma list of
    addresses; raises ValueError saying what is wrong."""
    out: list[str] = []
    for item in text.split(","):
        first, dash, last = item.strip().partition("-")
        low = ipaddress.ip_address(first.strip())
        high = ipaddress.ip_address(last.strip()) if dash else low
        if high.version != low.version or int(high) < int(low):
            raise ValueError(f"{item.strip()!r} is not a range from a lower address to a "
                             "higher one")
        if int(high) - int(low) + len(out) >= MAX_SOURCES:
            raise ValueError(f"more than {MAX_SOURCES:,} addresses")
        out += [str(ipaddress.ip_address(a)) for a in range(int(low), int(high) + 1)]
    return out


MAX_SOURCES = 65_536


# What a transport reads that may differ per thread through {{ ... }}
# (harness.plan.template); the worker expands the correlation id itself.
TEMPLATED = ("selector", "durable_name", "client_id")


def group_spec(given: dict[str, Any]) -> GroupSpec:
    """A group from the options given by key (a command line, a --group string, a
    profile's group); what is not given takes its default. The options of the group's own
    transport are kept in `options`; another transport's option, given a value of its own,
    is kept too, for validate_group to refuse by name."""
    values = field_values(given, ("group", "connection"))
    transport = str(given.get("module") or "").partition(".")[0]
    options = {}
    for option in table().values():
        if option.transports and option.scope != "run":
            value = values.pop(option.name)
            unset = value == option.default or (option.multiple and not value)
            if transport in option.transports or not unset:
                options[option.name] = value
    values["password"] = password(given)
    if given.get("password-file") and not given.get("password") and \
            not given.get("password-env"):
        values["password_file"] = str(Path(given["password-file"]).expanduser().resolve())
    return GroupSpec(**values, options=options)


# The roles that send (a Responder its replies) and that receive (a Requestor its replies).
SIDES = {"send": tuple(n for n, r in ROLES.items() if (r.produces or r.replies)
                       and not r.scenario),
         "receive": tuple(n for n, r in ROLES.items() if r.consumes and not r.scenario)}
NOT_ON = {"send": "sends nothing", "receive": "receives nothing"}


def _check_options(group: GroupSpec, transport: str, role: str) -> None:
    """Every option within its bounds, none of another transport's, and none that the
    group's role has no use for."""
    options = table()
    for option in options.values():
        if option.scope == "run":
            continue
        if option.transports:
            if option.name not in group.options:
                continue
            value = group.options[option.name]
            if transport not in option.transports:
                *others, last = option.transports
                takers = f"{', '.join(others)} and {last} take" if others else f"{last} takes"
                raise BadInput(option.flag, f"only {takers} this option, not {transport} "
                               "(see `harness modules`)")
            if option.side and value != option.default and role not in SIDES[option.side]:
                raise BadInput(option.flag, f"a {role} {NOT_ON[option.side]}: this is for "
                               f"{', '.join(SIDES[option.side])}")
        else:
            value = getattr(group, option.name, None)
        problem = option.out_of_bounds(value)
        if problem:
            raise BadInput(option.flag, problem)


def parse_module(text: str) -> tuple[str, str]:
    transport, dot, role = text.partition(".")
    if not dot or transport not in TRANSPORTS or role not in ROLES:
        raise BadInput("-m", f"unknown module {text!r}: {module_hint(text)}")
    return transport, role


def module_hint(text: str) -> str:
    """What the user may have meant by an unknown module: the module it names in another
    case or with a slip of the keys, else how a module is named."""
    modules = [f"{t}.{r}" for t in TRANSPORTS for r in ROLES]
    same = [m for m in modules if m.lower() == text.lower()]
    near = same or difflib.get_close_matches(text, modules, n=1, cutoff=0.75)
    if near:
        return f"did you mean {near[0]}? (`harness modules` lists them)"
    return f"a module is TRANSPORT.Role, a transport of {', '.join(TRANSPORTS)} and a role " \
           f"of {', '.join(ROLES)} (`harness modules` lists them)"


def _check_role_options(group: GroupSpec, role_name: str) -> None:
    """Options the group's role has no use for, refused rather than ignored."""
    role = ROLES[role_name]
    if role.consumes and not role.produces and not role.scenario:
        # A consumer sends nothing; a Responder sends the request's own body back.
        what = "answers with each request's own body" if role.replies else "sends nothing"
        for flag, given in (("--type", group.body_type != "bytes"), ("-mf", group.body_file),
                            ("--property", group.properties), ("-co", group.correlation_id),
                            ("-pp", group.persistent and not role.replies)):
            if given:
                raise BadInput(flag, f"a {role_name} {what}: this is for the groups that "
                               "send (Sender, Publisher, Requestor)")
    if role.asks and group.correlation_id:
        raise BadInput("-co", f"a {role_name} gives each request a correlation id of its own, "
                       "to match its reply to it")
    if role.produces and not role.consumes and group.crc:
        raise BadInput("--crc", f"a {role_name} receives nothing: this is for the groups that "
                       f"receive ({', '.join(SIDES['receive'])})")
    if not (role.asks or role.scenario) and group.reply_timeout != GroupSpec.reply_timeout:
        raise BadInput("--reply-timeout", f"only a Requestor waits for replies, not a "
                       f"{role_name}")


def _multiplexed(name: str) -> bool:
    try:
        return issubclass(transport_class(name), Multiplexed)
    except BadInput:  # its client library is not installed
        return False


def _check_clients(group: GroupSpec, transport: type[Any], role_name: str) -> None:
    """--clients where the role and the transport can have many clients a thread."""
    if not group.clients:
        flag = next(f for f, given in (("--idle", group.idle),
                                       ("--reconnect-every", group.reconnect_every),
                                       ("--reconnect-after", group.reconnect_after),
                                       ("--connect-rate", True)) if given)
        raise BadInput(flag, "is for the clients of --clients: give --clients")
    if group.reconnect_after and group.idle:
        raise BadInput("--reconnect-after", "idle clients send nothing: give "
                       "--reconnect-every")
    if group.idle and not ROLES[role_name].produces:
        raise BadInput("--idle", f"a {role_name} only receives: idle clients are producers "
                       "that send nothing")
    if group.idle and (group.rate or group.thread_rate):
        raise BadInput("--idle", "idle clients send nothing: give no -rt or --rate")
    if group.clients < group.threads:
        raise BadInput("--clients", f"at least one a thread (-nt {group.threads}), got "
                       f"{group.clients}")
    if not issubclass(transport, Multiplexed):
        able = ", ".join(n for n in TRANSPORTS if _multiplexed(n))
        raise BadInput("--clients", f"the {transport.name} transport has a connection a "
                       f"thread (-nt); many clients a thread: {able}")
    if not transport.multiplexes(group.settings("", 0, 0)):
        raise BadInput("--clients", f"a {transport.name} {role_name} has a connection a "
                       f"thread (-nt); many clients a thread are for "
                       f"{transport.multiplexed_roles()}")
    for flag, given in (("-mg", group.messages), ("-tx", group.transacted),
                        ("-wi", group.thread_interval_ms)):
        if given:
            raise BadInput(flag, "not with --clients: each client sends on its schedule "
                           "from when it connects to the end of the run")


def parsed(flag: str, parse: Callable[[str], Any], text: str) -> Any:
    """parse(text), or BadInput naming flag with what parse said is wrong (a ValueError)."""
    try:
        return parse(text)
    except ValueError as exc:
        raise BadInput(flag, str(exc)) from None


def _check_bodies(group: GroupSpec, role: Any) -> None:
    """--size-mix, --payload-dir and --payload-split: one way to vary the bodies, for a
    producer."""
    if group.random_ratio is not None and not group.payload_pool:
        raise BadInput("--random-ratio", "is the random share of --payload-pool's bodies: "
                       "give --payload-pool")
    given = [flag for flag, value in (("--size-mix", group.sizes),
                                      ("--payload-dir", group.payload_dir),
                                      ("--payload-split", group.payload_split),
                                      ("--payload-pool", group.payload_pool)) if value]
    if not given:
        return
    if len(given) > 1:
        raise BadInput(given[1], f"one of --size-mix, --payload-dir, --payload-split and "
                       f"--payload-pool, not with {given[0]}")
    if not role.produces:
        raise BadInput(given[0], "is for the producers' bodies")
    if group.payload_pool:
        if group.body_file:
            raise BadInput("--payload-pool", "-mf sends its file's bytes: give one or the "
                           "other")
        if group.payload_pool * group.size > MOST_BYTES:
            raise BadInput("--payload-pool", f"{group.payload_pool:,} bodies of "
                           f"{group.size:,} bytes are more than the {MOST_BYTES:,} bytes "
                           "each process may keep")
        return
    if group.sizes:
        if group.body_file:
            raise BadInput("--size-mix", "-mf sends its file's bytes: give one or the other")
        parsed("--size-mix", parse_sizes, group.sizes)
        return
    if group.payload_split and not group.body_file:
        raise BadInput("--payload-split", "splits the body file: give -mf")
    if group.payload_dir and group.body_file:
        raise BadInput("--payload-dir", "-mf sends one file: give one or the other")
    try:
        read_payloads(group.payload_dir, group.body_file, group.payload_split)
    except ValueError as exc:
        raise BadInput(given[0], str(exc)) from None


def _check_slow_consumer(group: GroupSpec, role_name: str) -> None:
    """--consumer-rate and --consumer-latency: for consumers, a thread each."""
    for flag, given in (("--consumer-rate", group.consumer_rate),
                        ("--consumer-latency", group.consumer_latency)):
        if not given:
            continue
        if not ROLES[role_name].consumes or ROLES[role_name].produces:
            raise BadInput(flag, f"a {role_name} does not consume: a slow consumer is a "
                           "Receiver, Subscriber or Responder")
        if group.clients:
            raise BadInput(flag, "not with --clients: a slow consumer takes each message on "
                           "a thread of its own")
    if group.consumer_latency:
        parsed("--consumer-latency", parse_work_time, group.consumer_latency)


def validate_group(group: GroupSpec, index: int) -> None:
    transport_name, role_name = parse_module(group.module)
    role = ROLES[role_name]
    if not group.destination:
        raise BadInput("-d", f"group {group.name or index} ({group.module}) needs a destination")
    if role.scenario and group.plan is None:
        raise BadInput("-m", f"{role_name} is a scenario's event handler: it runs inside a "
                       "scenario profile (see profiles/supplychain-*.yaml), not on its own")
    transport = transport_class(transport_name)
    _check_options(group, transport_name, role_name)
    if group.reply_timeout <= 0:
        raise BadInput("--reply-timeout", f"must be > 0, got {group.reply_timeout:g}")
    if group.rate and group.thread_rate:
        raise BadInput("--rate", "give either -rt (per thread) or --rate (in total), not both")
    if not 0.0 <= group.crc <= 1.0:
        raise BadInput("--crc", f"is a fraction of messages from 0 to 1, got {group.crc:g}")
    _check_pacing(group, role_name)
    _check_texts(group)
    _check_destinations(group)
    _check_bodies(group, role)
    for flag, given in (("--ttl", group.ttl), ("--priority", group.priority is not None)):
        if given and role.measures_only:
            raise BadInput(flag, f"a {role_name} sends nothing: a message's {flag[2:]} is "
                           "its producer's")
    _check_role_options(group, role_name)
    _check_slow_consumer(group, role_name)
    _check_connection(group, transport, transport_name, role_name)
    _check_capabilities(group, transport, transport_name, role_name)


def _check_pacing(group: GroupSpec, role_name: str) -> None:
    """The rate options: only for roles that send on a schedule, one way to give a rate,
    and what needs a rate beside it."""
    role = ROLES[role_name]
    if not role.produces:
        for flag, value in (("-rt", group.thread_rate), ("--rate", group.rate),
                            ("-rp", group.ramp), ("--poisson", group.poisson),
                            ("--rate-steps", group.rate_steps), ("--burst", group.burst)):
            if value:
                raise BadInput(flag, f"{role_name} does not send on a schedule; pacing "
                               "applies to Sender, Publisher and Requestor")
    if group.rate_steps:
        parsed("--rate-steps", parse_steps, group.rate_steps)
        for flag, given in (("-rt", group.thread_rate), ("--rate", group.rate),
                            ("-rp", group.ramp)):
            if given:
                raise BadInput("--rate-steps", f"the steps are the group's rate: give no "
                               f"{flag} beside them (a step's ramp is RATE:LENGTH:RAMP)")
    if group.burst:
        parsed("--burst", parse_burst, group.burst)
        if not group.per_thread_rate:
            raise BadInput("--burst", "needs a rate (-rt, --rate or --rate-steps) to burst "
                           "beside")
    if (group.ramp or group.poisson) and not group.per_thread_rate:
        flag = "-rp" if group.ramp else "--poisson"
        raise BadInput(flag, "needs a rate (-rt or --rate)")


def _check_texts(group: GroupSpec) -> None:
    """The templates a group's texts may hold ({thread}, ...) parse; the body type is
    known."""
    for flag, text in [("--selector", group.selector), ("-co", group.correlation_id),
                       ("--durable-name", group.durable_name), ("--client-id", group.client_id),
                       *(("--property", v) for v in group.properties.values())]:
        if text:
            try:
                check(text)
            except TemplateError as exc:
                raise BadInput(flag, str(exc)) from None
    if group.body_type not in ("bytes", "text", "xml"):
        raise BadInput("--type", f"is bytes, text or xml, got {group.body_type!r}")


def _check_destinations(group: GroupSpec) -> None:
    """Numbered destinations (-db, -dx) and the body file."""
    if group.destination_base is not None and group.destination_max is None:
        raise BadInput("-db", "numbers destinations only with -dx (the highest number)")
    if group.destination_max is not None:
        base = 1 if group.destination_base is None else group.destination_base
        if base < 0 or group.destination_max < base:
            raise BadInput("-dx", f"must be >= -db ({base}) and -db >= 0, got -db {base} -dx "
                           f"{group.destination_max}")
    if group.body_file is not None:
        path = Path(group.body_file)
        if not path.is_file() or not os.access(path, os.R_OK):
            raise BadInput("-mf", f"cannot read message body file {group.body_file!r}")
        if path.stat().st_size > MOST_BYTES:
            raise BadInput("-mf", f"{group.body_file!r} holds {path.stat().st_size:,} bytes; "
                           f"at most {MOST_BYTES:,}, which every process keeps in memory")


def _check_connection(group: GroupSpec, transport: type[Transport], transport_name: str,
                      role_name: str) -> None:
    """How the group connects: source addresses, many clients, TLS files, the flavour and
    the protocol version."""
    if group.source_addresses:
        parsed("--source-addresses", address_list, group.source_addresses)
        if not transport.binds:
            raise BadInput("--source-addresses", f"the {transport_name} transport connects "
                           "from the address the system picks")
    if group.clients or group.connect_rate or group.idle or group.reconnect_every or \
            group.reconnect_after:
        _check_clients(group, transport, role_name)
    # A destination given as an https:// URL (the http transport's) is TLS by its scheme.
    tls = group.tls or (group.destination or "").lower().startswith("https://")
    for flag, path in (("--ca", group.ca), ("--cert", group.cert), ("--key", group.key)):
        if path is not None and not os.access(path, os.R_OK):
            raise BadInput(flag, f"cannot read {path!r}")
        if path is not None and not tls:
            raise BadInput(flag, "needs --tls (or an https:// destination)")
    if group.flavour and group.flavour not in transport.flavours:
        raise BadInput("--flavour", f"{transport_name} flavours are "
                       f"{', '.join(transport.flavours)}" if transport.flavours else
                       f"the {transport_name} transport has no flavours")
    if group.protocol and not transport.protocols:
        raise BadInput("--protocol", f"the {transport_name} transport speaks one protocol "
                       "version: there is none to choose")


def _check_capabilities(group: GroupSpec, transport: type[Transport], transport_name: str,
                        role_name: str) -> None:
    """What the transport refuses for these settings, and each capability the role and
    the options need."""
    role = ROLES[role_name]
    settings = group.settings("", 0, 0)
    for flag, problem in transport.problems(settings):
        raise BadInput(flag, problem)
    capabilities = transport.capabilities_for(settings)
    needed = [(f"-m {group.module}", cap) for cap in role.needs]
    for flag, wanted, cap in (("-pp", group.persistent, Capability.PERSISTENT),
                              ("--ttl", group.ttl, Capability.TTL),
                              ("--priority", group.priority is not None, Capability.PRIORITY),
                              ("-tx", group.transacted, Capability.TRANSACTIONS),
                              ("--selector", group.selector, Capability.SELECTORS),
                              ("--durable-name", group.durable_name, Capability.DURABLE),
                              ("--property", group.properties, Capability.PROPERTIES)):
        if wanted:
            needed.append((flag, cap))
    flavour = f" ({group.flavour})" if group.flavour else ""
    for flag, cap in needed:
        if not cap & capabilities:
            raise BadInput(flag, f"transport {transport_name}{flavour} does not support "
                           f"{cap.name.lower().replace('_', ' ')}")
    if group.selector and not role.consumes:
        raise BadInput("--selector", f"{role_name} does not consume; selectors filter what "
                       "Receiver, Subscriber and Responder receive")
    if group.durable_name and (role.kind != "topic" or role.produces):
        raise BadInput("--durable-name", "durable subscriptions are for Subscriber")


def metrics_for(group: GroupSpec) -> list[str]:
    """The latency metrics a group records, in the order every output lists them."""
    role = ROLES[group.role]
    names = ["latency"] if role.consumes else []
    names.append("service")
    if role.produces and group.per_thread_rate:
        names.append("delay")
    if group.confirmed:
        # From the send to the broker's confirmation, as RabbitMQ PerfTest reports it.
        names.append("confirm")
    if group.clients:
        # From a client's connect to the broker's answer (MQTT's CONNACK), and a consumer's
        # subscribe to its answer (SUBACK).
        names.append("connect")
        if role.consumes:
            names.append("subscribe")
    if role.consumes and group.consumer_latency:
        # A slow consumer's processing time for each message (--consumer-latency).
        names.append("process")
    return names
