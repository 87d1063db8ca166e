"""A scenario's event handlers: consumers that carry out the next steps of an interaction.
The scenario (harness.experiments.scenarios) writes each handler group's plan; a handler
interprets it for every message it receives, so nothing here knows one scenario from
another."""

from __future__ import annotations

import random

from harness.clock import EPOCH_OFFSET_NS, now_ns
from harness.engine.roles import HANDLED, Consumer
from harness.modules.interface.base import TransportError
from harness.modules.interface.message import Destination, Message


class Handler(Consumer):
    """A scenario's event handler: consumes one destination and, for each message, sends
    what its plan says (the interaction's next steps) to destinations named from the routing
    fields the message carries in its correlation id ("sm=3,dc=1")."""

    def prepare(self) -> None:
        super().prepare()
        self.location = self.group.thread_number(self.setup.copy, self.setup.thread_index)
        self.sequences: dict[str, int] = {}
        self.seen_calls: set[str] = set()
        rng = random.Random(self.stream_name)  # seeded the same in every run
        self.random = rng
        self.bodies = {}
        for action in self.group.plan or ():
            for size, _ in action["sizes"]:
                if size not in self.bodies:
                    self.bodies[size] = _text_body(action["type"], size, rng)

    def push_safe(self) -> bool:
        # A persistent send waits for the broker's receipt, which arrives on the network thread.
        return not any(a["persistent"] for a in self.group.plan or ())

    def handle(self, message: Message) -> str:
        """Acknowledged even when a step failed (counted as an error): delivered again, the
        message would repeat the steps that went out."""
        routing = dict(field.split("=", 1) for field in (message.correlation_id or "").split(",")
                       if "=" in field)
        routing["self"] = str(self.location)
        routing["msg"] = f"{message.producer}:{message.seq}"
        rec = self.rec
        for action in self.group.plan or ():
            once = action.get("once_per")
            if once:
                key = routing.get(once, "")
                if key in self.seen_calls:
                    continue
                self.seen_calls.add(key)
            fan = int(routing.get(action["fanout"], 1)) if action.get("fanout") else 1
            for copy in range(fan):
                fields = {**routing, "copy": str(copy + 1), **{
                    k: v.format(**routing, copy=copy + 1) for k, v in
                    action.get("set", {}).items()}}
                name = action["to"].format(**fields)
                destination = Destination(action["kind"], name)
                sizes = action["sizes"]
                size = sizes[0][0] if len(sizes) == 1 else \
                    self.random.choices([z for z, _ in sizes], [w for _, w in sizes])[0]
                producer = f"{self.producer_id}>{name}"
                seq = self.sequences.get(name, 0)
                self.sequences[name] = seq + 1
                now = now_ns() + EPOCH_OFFSET_NS
                keep = action.get("carry", ())
                correlation = ",".join(f"{k}={fields[k]}" for k in keep if k in fields)
                reply = Message(self.bodies[size], producer, seq, message.ts, now, None, None,
                                correlation, None, action["persistent"])
                try:
                    self.transport.send(destination, reply)
                except TransportError as exc:
                    rec.error("send", exc)
                    continue
                rec.sent += 1
                rec.bytes += size
        return HANDLED


class TopicHandler(Handler):
    """A scenario's event handler subscribed to a topic."""


def _text_body(kind: str, size: int, rng: random.Random) -> bytes:
    """A printable body of the given size, an XML document for the supplier messages."""
    head, tail = f"<{kind}><items>".encode(), f"</items></{kind}>".encode()
    filler = bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz0123456789")
                   for _ in range(max(size - len(head) - len(tail), 0)))
    return (head + filler + tail)[:size] if size >= len(head) + len(tail) else filler[:size]


HANDLERS = {"Handler": Handler, "TopicHandler": TopicHandler}
