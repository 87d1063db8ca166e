"""A producer's own state: what it sends (its bodies, the property sets it cycles through, its
correlation id) and where its stream stands (sends made, and the numbers whose send failed or
whose outcome a fault hid), which the end-of-run balance reads."""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harness.plan.payloads import drawn
from harness.plan.sizes import DECK, parse_sizes
from harness.plan.template import cycle, expand

if TYPE_CHECKING:
    from harness.plan.group import GroupSpec


@dataclass
class Outgoing:
    body: bytes
    crc: int
    # With sizes that vary, a deck of bodies drawn for this thread, dealt in turn: (body, crc);
    # with bodies from files, those; empty: every message carries `body`.
    deck: list[tuple[bytes, int]] = field(default_factory=list)
    # The property sets sent in turn (one unless a value cycles: {1..10}).
    property_sets: list[dict[str, str] | None] = field(default_factory=lambda: [None])
    correlation: str | None = None
    position: int = 0  # sends made so far: their numbers are 0 to position - 1
    failed: list[int] = field(default_factory=list)  # numbers whose send failed
    doubt: list[int] = field(default_factory=list)  # and whose outcome a fault hid
    # The numbers sent in the measured span: from measured_from (the position when the thread
    # moved into the span's first interval) to before measured_to (when it moved out of the
    # last); -1: not there yet, or not left yet.
    measured_from: int = -1
    measured_to: int = -1

    def mark_span(self, phase: str) -> None:
        """The thread moves into an interval of `phase`: where the measured span begins or
        ends in this stream's numbers."""
        if phase == "measure":
            if self.measured_from < 0:
                self.measured_from = self.position
        elif self.measured_from >= 0 and self.measured_to < 0:
            self.measured_to = self.position

    def spanned(self, seq: int) -> bool:
        """Whether send number seq was made in the measured span."""
        return 0 <= self.measured_from <= seq and (self.measured_to < 0 or seq < self.measured_to)

    def kept(self) -> int:
        """Sends so far that did not fail."""
        return self.position - len(self.failed)

    def stream_end(self, producer_id: str) -> dict[str, object]:
        """Where the stream stood at the end (harness.stats.reports.StreamEnd's fields)."""
        return {"positions": {producer_id: self.position},
                "failed": {producer_id: self.failed} if self.failed else {},
                "doubt": {producer_id: self.doubt} if self.doubt else {}}


def outgoing_for(group: GroupSpec, body: bytes, payloads: list[tuple[bytes, int]],
                 stream_name: str, number: int, total: int, thread_index: int) -> Outgoing:
    """Thread `number` of the group's `total` (from 1), named stream_name (random draws are
    seeded from it, so every run of the same plan sends the same bodies)."""
    out = Outgoing(body, zlib.crc32(body), list(payloads))
    if group.payload_pool:
        out.deck = drawn(out.deck, stream_name, max(DECK, 4 * len(out.deck)))
    sizes: list[int] = []
    if group.size_mix:  # a scenario's
        draw = random.Random(stream_name)
        sizes = draw.choices([z for z, _ in group.size_mix], [w for _, w in group.size_mix],
                             k=DECK)
    elif group.sizes:
        sizes = parse_sizes(group.sizes).deck(stream_name)
    if sizes:
        cut = {z: body[:z] for z in set(sizes)}
        crcs = {z: zlib.crc32(b) for z, b in cut.items()}
        out.deck = [(cut[z], crcs[z]) for z in sizes]
    if group.properties:
        out.property_sets = list(cycle(group.properties, number, total))
    correlation = group.correlation_id
    if correlation and "{{" in correlation:
        out.correlation = expand(correlation, number, total)
    elif correlation:
        out.correlation = f"{correlation}{thread_index}"
    return out
