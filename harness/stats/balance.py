"""The end-of-run balance of a run's statistics (harness.stats.intervals.RunStats): what only
the streams' ends show (losses at a stream's tail, numbers counted lost whose send failed or
was in doubt, competing receivers' distinct messages), and the delivery check per
destination, every message sent against what its consumers received. A part of RunStats."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.plan.topology import endpoints, exclusive_consumers, is_consumer, is_producer
from harness.stats.figures import kept
from harness.stats.reports import StreamEnd
from harness.stats.verify import count_in, pack_bits, union_count, union_of, unpack_bits

if TYPE_CHECKING:
    from harness.plan.run import RunSpec
    from harness.stats.intervals import GroupTotals


class Balance:
    """The balancing half of RunStats: what it reads of the run's totals is declared
    below."""

    run: RunSpec
    groups: list[GroupTotals]
    # Per destination with competing receivers, the distinct messages they received
    received_once: dict[str, int]
    tails: dict[str, int]  # per consumer group, the messages lost at a stream's tail
    every_node: bool

    def reconcile(self, streams: list[StreamEnd]) -> list[dict[str, Any]]:
        """What only the end of the run shows, as records for the run directory:

        - per consumer group, the messages after the last one it saw from each producer
          (no later gap reveals them: `lost_at_tail`), and the numbers it counted lost whose
          send had failed (never sent, so not lost: `failed_sends`) or was in doubt (a fault
          hid whether the broker kept it: not lost either, `in_doubt`). Only for consumers that
          see whole streams (sequence-checked) and run to the end (no -mg); a consumer
          expects every producer sending to its destination (in its own process on the
          loopback broker, whose broker is per process);
        - per queue with competing receivers, how many distinct messages they received
          between them (`received_once`), for the delivery check.
        """
        produced = [s for s in streams if is_producer(self.run.groups[s.group].role)]
        failed = {p: set(numbers) for s in produced for p, numbers in s.failed.items()}
        doubt = {p: set(numbers) - failed.get(p, set()) for s in produced
                 for p, numbers in s.doubt.items()}
        records: list[dict[str, Any]] = []
        adjust: dict[str, tuple[int, int, int]] = {}
        # A competing consumer that received nothing (a Kafka group member given no
        # partition) has no bits either: whether it competes is the run's, not its own.
        exclusive = exclusive_consumers(self.run, range(len(self.run.groups)))
        for seen in streams:
            spec = self.run.groups[seen.group]
            if not is_consumer(spec.role) or spec.messages or spec.filtered \
                    or spec.destination_max is not None or seen.seen \
                    or not exclusive.get(seen.group, True):
                continue
            tail = 0
            for source in produced:
                producer = self.run.groups[source.group]
                if producer.endpoint != spec.endpoint or \
                        (spec.embedded and source.process != seen.process):
                    continue
                for producer_id, count in source.positions.items():
                    position = seen.positions.get(producer_id, 0)
                    excused = failed.get(producer_id, set()) | doubt.get(producer_id, set())
                    tail += max(count - position, 0) - count_in(excused, position, count)
            not_failed = sum(len(set(numbers) & failed.get(producer_id, set()))
                             for producer_id, numbers in seen.lost.items())
            not_doubt = sum(len(set(numbers) & doubt.get(producer_id, set()))
                            for producer_id, numbers in seen.lost.items())
            before = adjust.get(spec.name, (0, 0, 0))
            adjust[spec.name] = (before[0] + tail, before[1] + not_failed,
                                 before[2] + not_doubt)
        for group, (tail, not_failed, not_doubt) in adjust.items():
            records.append({"type": "reconciliation", "group": group, "lost_at_tail": tail,
                            "failed_sends": not_failed, "in_doubt": not_doubt})
        bitmaps: dict[tuple[str, str, str], dict[str, list[bytes]]] = {}
        for stream in streams:
            for producer_id, bits in stream.seen.items():
                endpoint = self.run.groups[stream.group].endpoint
                bitmaps.setdefault(endpoint, {}).setdefault(producer_id, []).append(bits)
        for endpoint, producers in bitmaps.items():
            record: dict[str, Any] = {
                "type": "union", "destination": ":".join(endpoint),
                "received_once": sum(union_count(b) for b in producers.values())}
            if self.run.nodes > 1:
                # Other nodes' receivers compete for the queue too: the merge takes the union
                # of every node's bits, so that a message two nodes received counts once.
                record["seen"] = {producer: pack_bits(union_of(b))
                                  for producer, b in producers.items()}
            records.append(record)
        self.add_reconciliation(records)
        return records

    def add_reconciliation(self, records: list[dict[str, Any]]) -> None:
        """Apply the reconciliation's records (computed now, or read back from the run)."""
        unions: dict[str, dict[str, int]] = {}
        for record in records:
            if record["type"] == "union":
                destination = record["destination"]
                seen = record.get("seen")
                if seen is None:  # one node's receivers alone on the queue
                    self.received_once[destination] = \
                        self.received_once.get(destination, 0) + record["received_once"]
                    continue
                bits = unions.setdefault(destination, {})
                for producer, packed in seen.items():
                    bits[producer] = bits.get(producer, 0) | unpack_bits(packed)
                continue
            name = record["group"]
            tail = record.get("lost_at_tail", 0)
            change = tail - record.get("failed_sends", 0) - record.get("in_doubt", 0)
            self.tails[name] = self.tails.get(name, 0) + tail
            for totals in self.groups:
                if totals.spec.name == name:
                    totals.counters["lost"] += change
                    totals.everything["lost"] += change
        for destination, bits in unions.items():
            self.received_once[destination] = self.received_once.get(destination, 0) + \
                sum(union.bit_count() for union in bits.values())

    def delivery(self) -> list[dict[str, Any]]:
        """Per destination: every message a producer sent against what consumers received.

        Catches what per-producer sequence checks cannot see: losses at the tail of a stream
        and losses on queues with competing consumers.
        """
        out = []
        for point in endpoints(self.run).values():
            embedded = all(self.run.groups[i].embedded for i in point.groups)
            if not point.checked or not (self.every_node or embedded):
                continue
            # A send the broker did not keep is not expected at any consumer; one in doubt
            # may be there or not, and is neither missing nor unexpected.
            sent = sum(kept(self.groups[i].everything) for i in point.producers)
            in_doubt = sum(self.groups[i].everything["in_doubt"]
                           for i in point.producers) * point.copies
            received = sum(self.groups[i].everything["received"] for i in point.consumers)
            expected = sent * point.copies
            destination = str(point)
            if destination in self.received_once:
                # Competing receivers: a message two of them received counts once, so that
                # a duplicate on one cannot cancel a loss on another.
                delivered = self.received_once[destination]
                duplicated = received - delivered
            else:
                duplicated = sum(self.groups[i].everything["duplicated"]
                                 for i in point.consumers)
                delivered = received - duplicated
            out.append({"destination": destination, "expected": expected,
                        "in_doubt": in_doubt, "received": received, "duplicated": duplicated,
                        "missing": max(expected - in_doubt - delivered, 0),
                        "unexpected": max(delivered - expected, 0)})
        return out
