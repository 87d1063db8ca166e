"""Which groups meet at which destination, and what each destination's consumers should
receive: the one place the delivery check, the sequence checks, the drain and the
reconciliation learn it."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from harness.modules.interface.roles import ROLES
from harness.plan.run import RunSpec


def is_producer(role: str) -> bool:
    """A role whose sends a destination's delivery check expects (Sender, Publisher)."""
    return ROLES[role].sends_only


def is_consumer(role: str) -> bool:
    """A role whose receipts a destination's delivery check counts (Receiver, Subscriber)."""
    return ROLES[role].measures_only


@dataclass
class Endpoint:
    transport: str
    kind: str  # queue or topic
    name: str
    groups: list[int]  # the indexes of every group that meets here
    producers: list[int]  # of them, the Senders and Publishers
    consumers: list[int]  # the Receivers and Subscribers
    filtered: bool  # a selector or numbered topics: what each consumer gets is not known
    copies: int  # deliveries of each message sent: subscribers on a topic, 1 on a queue

    @property
    def checked(self) -> bool:
        """Whether the run can balance what was sent here against what was received."""
        return bool(self.producers and self.consumers and not self.filtered)

    def __str__(self) -> str:
        return f"{self.transport}:{self.kind}:{self.name}"


def endpoints(run: RunSpec) -> dict[tuple[str, str, str], Endpoint]:
    out: dict[tuple[str, str, str], Endpoint] = {}
    for i, group in enumerate(run.groups):
        key = group.endpoint
        point = out.get(key)
        if point is None:
            point = out[key] = Endpoint(*key, [], [], [], False, 0)
        if group.filtered or (group.destination_max is not None and key[1] == "topic"):
            point.filtered = True
        point.groups.append(i)
        if is_producer(group.role):
            point.producers.append(i)
        elif is_consumer(group.role):
            point.consumers.append(i)
            if key[1] == "topic":
                point.copies += group.streams * group.processes * \
                    (1 if group.embedded else run.nodes)
    for point in out.values():
        if point.kind != "topic":
            point.copies = 1
        elif any(run.groups[i].embedded for i in point.consumers):
            # Each process has its own embedded broker: a subscriber sees only the
            # publishers of its own process.
            point.copies //= max(run.groups[i].processes for i in point.consumers)
    return out


def exclusive_consumers(run: RunSpec, cell: Collection[int]) -> dict[int, bool]:
    """Which consuming groups of a cell (its group indexes) see whole producer streams, so
    that sequence checks apply: not behind a filter, and alone on their queue."""
    def pure_consumer(i: int) -> bool:
        role = ROLES[run.groups[i].role]
        return role.consumes and not role.produces

    out = {}
    for point in endpoints(run).values():
        consumers = [i for i in point.groups if pure_consumer(i)]
        # The embedded broker is per process: only this cell's consumers compete there. On
        # a real broker, every node's copies of the group compete.
        competing = sum(run.groups[i].streams * (1 if run.groups[i].embedded
                                                 else run.groups[i].processes * run.nodes)
                        for i in consumers if i in cell or not run.groups[i].embedded)
        for i in consumers:
            group = run.groups[i]
            if i not in cell:
                continue
            if group.filtered or group.destination_max is not None:
                # A filter sees part of each stream; with numbered destinations, threads of
                # one group may share one: gaps are not loss.
                out[i] = False
            else:
                out[i] = point.kind == "topic" or competing == 1
    return out
