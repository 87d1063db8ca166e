"""The roles as facts: what each sends and receives, the kind of destination it uses, the
broker features it needs and the metrics it records. The threads that play them are in
harness.engine.roles; everything that plans, validates or reports a run reads this table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.transports.base import Capability

if TYPE_CHECKING:
    from harness.spec.group import GroupSpec


@dataclass(frozen=True)
class Role:
    summary: str
    produces: bool
    consumes: bool
    needs: tuple[Capability, ...]
    kind: str = "queue"  # the kind of destination it sends to or receives from
    scenario: bool = False  # runs only inside a scenario profile


ROLES: dict[str, Role] = {
    "Sender": Role("sends to a queue, paced or as fast as possible", True, False,
                   (Capability.QUEUES,)),
    "Receiver": Role("receives from a queue; checks sequence, loss, CRC", False, True,
                     (Capability.QUEUES,)),
    "Publisher": Role("publishes to a topic, paced or as fast as possible", True, False,
                      (Capability.TOPICS,), kind="topic"),
    "Subscriber": Role("subscribes to a topic; checks sequence, loss, CRC", False, True,
                       (Capability.TOPICS,), kind="topic"),
    "Requestor": Role("sends requests and times each reply (round trip)", True, True,
                      (Capability.REQUEST_REPLY, Capability.TEMP_QUEUES)),
    "Responder": Role("answers requests from a queue to their reply-to", False, True,
                      (Capability.REQUEST_REPLY,)),
    "Handler": Role("a scenario's event handler: receives and sends the next steps of an "
                    "interaction (harness.experiments.scenarios)", False, True,
                    (Capability.QUEUES,), scenario=True),
    "TopicHandler": Role("a scenario's event handler on a topic", False, True,
                         (Capability.TOPICS,), kind="topic", scenario=True),
}


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
    return names
