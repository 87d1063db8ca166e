"""Which groups meet at which destination, and what each destination's consumers should
receive: the one place the delivery check, the drain and the reconciliation learn it."""

from __future__ import annotations

from dataclasses import dataclass

from harness.spec.run import RunSpec

PRODUCERS = ("Sender", "Publisher")
CONSUMERS = ("Receiver", "Subscriber")


@dataclass
class Endpoint:
    transport: str
    kind: str  # queue or topic
    name: str
    producers: list[int]  # group indexes
    consumers: list[int]
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
            point = out[key] = Endpoint(*key, [], [], False, 0)
        if group.selector or (group.destination_max is not None and key[1] == "topic"):
            point.filtered = True
        if group.role in PRODUCERS:
            point.producers.append(i)
        elif group.role in CONSUMERS:
            point.consumers.append(i)
            if key[1] == "topic":
                point.copies += group.threads * group.processes
    for point in out.values():
        if point.kind != "topic":
            point.copies = 1
        elif any(run.groups[i].embedded for i in point.consumers):
            # Each process has its own embedded broker: a subscriber sees only the
            # publishers of its own process.
            point.copies //= max(run.groups[i].processes for i in point.consumers)
    return out
