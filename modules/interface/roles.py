"""The roles as facts: what each sends and receives, the kind of destination it uses, the
broker features it needs. Here, with the transport interface, so that a transport asks what a
role does (Settings.sends, .consumes, ...) instead of matching its name; the threads that
play them are in harness.engine.roles."""

from __future__ import annotations

from dataclasses import dataclass

from harness.modules.interface.capability import Capability


@dataclass(frozen=True)
class Role:
    summary: str
    produces: bool
    consumes: bool
    needs: tuple[Capability, ...]
    kind: str = "queue"  # the kind of destination it sends to or receives from
    scenario: bool = False  # runs only inside a scenario profile
    asks: bool = False  # sends requests and waits for their replies
    replies: bool = False  # sends a reply to each request it receives

    @property
    def sends_only(self) -> bool:
        """A producer that receives nothing (Sender, Publisher)."""
        return self.produces and not self.consumes

    @property
    def measures_only(self) -> bool:
        """A consumer that sends nothing back (Receiver, Subscriber)."""
        return self.consumes and not (self.produces or self.replies or self.scenario)


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
                      (Capability.REQUEST_REPLY, Capability.TEMP_QUEUES), asks=True),
    "Responder": Role("answers requests from a queue to their reply-to", False, True,
                      (Capability.REQUEST_REPLY,), replies=True),
    "Handler": Role("a scenario's event handler: receives and sends the next steps of an "
                    "interaction (harness.experiments.scenarios)", False, True,
                    (Capability.QUEUES,), scenario=True),
    "TopicHandler": Role("a scenario's event handler on a topic", False, True,
                         (Capability.TOPICS,), kind="topic", scenario=True),
}
