"""What a run is: its worker groups and run-wide settings, validated before anything starts.

Every check names the flag at fault, so the CLI can print one line and exit 2.
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import BadInput
from harness.roles import ROLES
from harness.template import TemplateError, check, expand
from modules import TRANSPORTS, transport_class
from modules.base import Capability
from modules.loopback import FAULT_ACTIONS

_GROUP_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")


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
    thread_interval_ms: int = 0
    thread_rate: float = 0.0
    rate: float = 0.0
    poisson: bool = False
    ramp: float = 0.0
    messages: int = 0
    size: int = 256
    body_type: str = "bytes"  # bytes, text (printable; a STOMP text frame) or xml
    body_file: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    correlation_id: str | None = None
    persistent: bool = False
    transacted: bool = False
    commit_count: int = 1
    crc: float = 0.0
    reply_timeout: float = 5.0
    # The connection: each transport reads what it needs (see `harness modules`).
    host: str = "127.0.0.1"
    port: int = 0  # 0: the protocol's default port
    flavour: str = ""  # broker dialect; "": the transport's default
    protocol: str = ""  # protocol version; "": the transport's default
    vhost: str | None = None
    user: str | None = None
    password: str | None = None  # a secret: never printed, scrubbed from the manifest
    heartbeat_ms: int = 0
    keepalive: int = 60
    tls: bool = False
    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    client_id: str | None = None
    ack: str = "auto"
    prefetch: int = 0
    selector: str | None = None
    durable_name: str | None = None
    qos: int = 0
    retain: bool = False
    clean: bool = True
    session_expiry: int = 0
    inflight: int = 20
    reply_queue: str | None = None
    connect_retry: int = 0
    # Scenario event handlers (harness.scenarios): what to send on for each message received.
    plan: list[dict[str, Any]] | None = None
    # Scenario drivers: body sizes drawn by weight, [(bytes, weight)]; size is the largest.
    size_mix: list[tuple[int, float]] | None = None

    @property
    def transport(self) -> str:
        return self.module.partition(".")[0]

    @property
    def role(self) -> str:
        return self.module.partition(".")[2]

    @property
    def per_thread_rate(self) -> float:
        """Messages a second for each thread; 0 means as fast as possible."""
        if self.rate:
            return self.rate / (self.threads * self.processes)
        return self.thread_rate

    @property
    def producer(self) -> bool:
        return ROLES[self.role].produces

    def thread_number(self, copy: int, thread: int) -> int:
        """A thread's number in its group, from 1, across the group's processes (copy: which
        of them) ({{n}} in templates)."""
        return copy * self.threads + thread + 1

    def destination_for(self, copy: int, thread: int) -> str:
        """The destination of one thread: destination itself, or with -dx the numbered one
        whose turn the thread is (PerfHarness's multi-destination mode)."""
        if self.destination_max is None:
            if self.destination and "{{" in self.destination:
                return expand(self.destination, self.thread_number(copy, thread),
                              self.threads * self.processes)
            return self.destination or ""
        base = 1 if self.destination_base is None else self.destination_base
        n = self.thread_number(copy, thread)
        return f"{self.destination}{base + (n - 1) % (self.destination_max - base + 1)}"

    def settings(self, node: str, process: int, thread: int, copy: int = 0) -> dict[str, Any]:
        """What a transport instance is given: the group's options and where it runs, with
        per-thread templates ({{ ... }}) evaluated for this thread."""
        out = {**asdict(self), "node": node, "process": process, "thread": thread}
        n, total = self.thread_number(copy, thread), self.threads * self.processes
        for key in TEMPLATED:
            if out[key]:
                out[key] = expand(out[key], n, total)
        return out


# Options whose value may differ per thread through {{ ... }} (harness.template).
TEMPLATED = ("selector", "correlation_id", "durable_name", "client_id")


@dataclass
class RunSpec:
    groups: list[GroupSpec]
    name: str = "run"
    duration: float = 0.0
    warmup: float = 0.0
    interval: float = 5.0
    drain: float = 5.0
    output: str = "runs"
    node: str = field(default_factory=lambda: os.uname().nodename)
    broker_pid: int | None = None
    switch_interval: float | None = None
    faults: list[tuple[str, str, int]] = field(default_factory=list)
    reorder_window: float = 1.0
    loopback_capacity: float = 0.0  # msg/s the simulated broker serves; 0 = unlimited
    loopback_delay: float = 0.0  # ms added to every message by the simulated broker
    run_id: str | None = None  # shared by the nodes of one multi-node run; None: a new one

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)



def parse_module(text: str) -> tuple[str, str]:
    transport, dot, role = text.partition(".")
    if not dot or transport not in TRANSPORTS or role not in ROLES:
        known = ", ".join(f"{t}.<{'|'.join(ROLES)}>" for t in TRANSPORTS)
        raise BadInput("-m", f"unknown module {text!r} (known: {known}; see `harness modules`)")
    return transport, role


def parse_property(text: str) -> tuple[str, str]:
    key, eq, value = text.partition("=")
    if not eq or not key.strip():
        raise BadInput("--property", f"{text!r} is not key=value")
    return key.strip(), value


def parse_fault(text: str) -> tuple[str, str, int]:
    parts = text.split(":")
    if len(parts) != 3 or parts[0] not in FAULT_ACTIONS or not parts[2].isdigit() \
            or int(parts[2]) < 1:
        raise BadInput("--inject", f"{text!r} is not ACTION:DESTINATION:N with ACTION one of "
                       f"{', '.join(FAULT_ACTIONS)} and N >= 1")
    return parts[0], parts[1], int(parts[2])


def _positive(flag: str, value: float, allow_zero: bool = True) -> None:
    if value < 0 or (not allow_zero and value == 0):
        raise BadInput(flag, f"must be {'>= 0' if allow_zero else '> 0'}, got {value:g}")


def validate_group(group: GroupSpec, index: int) -> None:
    transport_name, role_name = parse_module(group.module)
    role = ROLES[role_name]
    if not group.destination:
        raise BadInput("-d", f"group {group.name or index} ({group.module}) needs a destination")
    if role_name in ("Handler", "TopicHandler") and group.plan is None:
        raise BadInput("-m", f"{role_name} is a scenario's event handler: it runs inside a "
                       "scenario profile (see profiles/supplychain-*.yaml), not on its own")
    if group.threads < 1:
        raise BadInput("-nt", f"must be >= 1, got {group.threads}")
    if group.processes < 1:
        raise BadInput("--processes", f"must be >= 1, got {group.processes}")
    _positive("-wi", group.thread_interval_ms)
    _positive("-rt", group.thread_rate)
    _positive("--rate", group.rate)
    _positive("-rp", group.ramp)
    _positive("-mg", group.messages)
    _positive("-ms", group.size)
    _positive("--reply-timeout", group.reply_timeout, allow_zero=False)
    if group.rate and group.thread_rate:
        raise BadInput("--rate", "give either -rt (per thread) or --rate (in total), not both")
    if not 0.0 <= group.crc <= 1.0:
        raise BadInput("--crc", f"is a fraction of messages from 0 to 1, got {group.crc:g}")
    if (group.ramp or group.poisson) and not group.per_thread_rate:
        flag = "-rp" if group.ramp else "--poisson"
        raise BadInput(flag, "needs a rate (-rt or --rate)")
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
    if not role.produces:
        for flag, value in (("-rt", group.thread_rate), ("--rate", group.rate),
                            ("-rp", group.ramp), ("--poisson", group.poisson)):
            if value:
                raise BadInput(flag, f"{role_name} does not send on a schedule; pacing "
                               "applies to Sender, Publisher and Requestor")
    for flag, value, low, high in (("-cc", group.commit_count, 1, None),
                                   ("--port", group.port, 0, 65535),
                                   ("--heartbeat", group.heartbeat_ms, 0, None),
                                   ("--keepalive", group.keepalive, 0, 65535),
                                   ("--prefetch", group.prefetch, 0, None),
                                   ("--session-expiry", group.session_expiry, 0, None),
                                   ("--inflight", group.inflight, 1, 65535),
                                   ("--connect-retry", group.connect_retry, 0, None)):
        if value < low or (high is not None and value > high):
            bound = f">= {low}" if high is None else f"from {low} to {high}"
            raise BadInput(flag, f"must be {bound}, got {value}")
    for flag, path in (("--ca", group.ca), ("--cert", group.cert), ("--key", group.key)):
        if path is not None and not os.access(path, os.R_OK):
            raise BadInput(flag, f"cannot read {path!r}")
        if path is not None and not group.tls:
            raise BadInput(flag, "needs --tls")
    transport = transport_class(transport_name)
    settings = group.settings("", 0, 0)
    for flag, problem in transport.problems(settings):
        raise BadInput(flag, problem)
    capabilities = transport.capabilities_for(settings)
    needed = [(f"-m {group.module}", cap) for cap in role.needs]
    for flag, wanted, cap in (("-pp", group.persistent, Capability.PERSISTENT),
                              ("-tx", group.transacted, Capability.TRANSACTIONS),
                              ("--selector", group.selector, Capability.SELECTORS),
                              ("--durable-name", group.durable_name, Capability.DURABLE),
                              ("--qos", group.qos, Capability.QOS)):
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
    if group.durable_name and role_name not in ("Subscriber", "TopicHandler"):
        raise BadInput("--durable-name", "durable subscriptions are for Subscriber")


def assign_group_names(groups: list[GroupSpec]) -> None:
    seen: set[str] = set()
    for group in groups:
        if group.name:
            if not _GROUP_NAME.match(group.name):
                raise BadInput("--group-name", f"{group.name!r} must be a letter followed by "
                               "letters, digits, - or _")
            if group.name in seen:
                raise BadInput("--group-name", f"two groups are named {group.name!r}")
            seen.add(group.name)
    for group in groups:
        if not group.name:
            base = group.role.lower() if group.role in ROLES else "group"
            name, n = base, 2
            while name in seen:
                name, n = f"{base}{n}", n + 1
            group.name = name
            seen.add(name)


def validate_run(run: RunSpec) -> None:
    if not run.groups:
        raise BadInput("-m", "a run needs at least one module")
    for index, group in enumerate(run.groups):
        validate_group(group, index)
    assign_group_names(run.groups)
    _positive("-rl", run.duration)
    _positive("-sw", run.warmup)
    _positive("-ss", run.interval, allow_zero=False)
    _positive("--drain", run.drain)
    _positive("--reorder-window", run.reorder_window)
    if run.duration and run.warmup >= run.duration:
        raise BadInput("-sw", f"warm-up ({run.warmup:g} s) must be shorter than the run "
                       f"length -rl ({run.duration:g} s)")
    if run.switch_interval is not None:
        _positive("--switch-interval", run.switch_interval, allow_zero=False)
    if run.broker_pid is not None:
        import psutil
        if not psutil.pid_exists(run.broker_pid):
            raise BadInput("--broker-pid", f"no process with pid {run.broker_pid}")
    loopback = {g.processes for g in run.groups if g.transport == "loopback"}
    if len(loopback) > 1:
        raise BadInput("--processes", "all loopback groups need the same --processes: the "
                       "embedded broker lives inside one process, so each process runs its "
                       "own copy of every loopback group")
    _positive("--loopback-capacity", run.loopback_capacity)
    _positive("--loopback-delay", run.loopback_delay)
    if (run.loopback_capacity or run.loopback_delay) and not loopback:
        flag = "--loopback-capacity" if run.loopback_capacity else "--loopback-delay"
        raise BadInput(flag, "simulates the loopback broker; no group uses it")
    if run.faults and not loopback:
        raise BadInput("--inject", "faults can be injected only into the loopback broker")
    if run.run_id is not None and not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", run.run_id):
        raise BadInput("--run-id", f"{run.run_id!r}: use up to 64 letters, digits, '.', '_' "
                       "or '-'")
    if not _GROUP_NAME.match(run.name):
        raise BadInput("--name", f"{run.name!r} must be a letter followed by letters, digits, "
                       "- or _")
