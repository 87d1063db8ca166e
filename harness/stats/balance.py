"""The end-of-run balance of a run's statistics (harness.stats.intervals.RunStats): what only
the streams' ends show (losses at a stream's tail, numbers counted lost whose send failed or
was in doubt, competing receivers' distinct messages), and the delivery check per
destination, every message sent against what its consumers received. A part of RunStats."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.plan.topology import endpoints, exclusive_consumers, is_consumer, is_producer
from harness.stats.figures import kept
from harness.stats.reports import StreamEnd
from harness.stats.verify import count_in, pack_bits, union_of, unpack_bits

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
    # By sequence number, per destination: [missing, in doubt that arrived, failed that
    # arrived] (Outcomes); and the consumer groups whose streams were reconciled
    by_sequence: dict[str, list[int]]
    reconciled: set[str]

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
        arrived: dict[str, tuple[int, int]] = {}  # per group: in doubt, failed
        # A competing consumer that received nothing (a Kafka group member given no
        # partition) has no bits either: whether it competes is the run's, not its own.
        exclusive = exclusive_consumers(self.run, range(len(self.run.groups)))
        for seen in streams:
            spec = self.run.groups[seen.group]
            if not is_consumer(spec.role) or spec.messages or spec.filtered \
                    or spec.destination_max is not None or seen.seen \
                    or not exclusive.get(seen.group, True):
                continue
            tail = doubt_arrived = failed_arrived = 0
            for source in produced:
                producer = self.run.groups[source.group]
                if producer.endpoint != spec.endpoint or \
                        (spec.embedded and source.process != seen.process):
                    continue
                for producer_id, count in source.positions.items():
                    position = seen.positions.get(producer_id, 0)
                    doubted = doubt.get(producer_id, set())
                    never = failed.get(producer_id, set())
                    tail += max(count - position, 0) - count_in(never | doubted, position, count)
                    # Below its position a consumer received every number it did not count
                    # lost.
                    lost = set(seen.lost.get(producer_id, ()))
                    doubt_arrived += count_in(doubted, 0, position) - len(doubted & lost)
                    failed_arrived += count_in(never, 0, position) - len(never & lost)
            before_arrived = arrived.get(spec.name, (0, 0))
            arrived[spec.name] = (before_arrived[0] + doubt_arrived,
                                  before_arrived[1] + failed_arrived)
            not_failed = sum(len(set(numbers) & failed.get(producer_id, set()))
                             for producer_id, numbers in seen.lost.items())
            not_doubt = sum(len(set(numbers) & doubt.get(producer_id, set()))
                            for producer_id, numbers in seen.lost.items())
            before = adjust.get(spec.name, (0, 0, 0))
            adjust[spec.name] = (before[0] + tail, before[1] + not_failed,
                                 before[2] + not_doubt)
        for group, (tail, not_failed, not_doubt) in adjust.items():
            records.append({"type": "reconciliation", "group": group, "lost_at_tail": tail,
                            "failed_sends": not_failed, "in_doubt": not_doubt,
                            "in_doubt_arrived": arrived[group][0],
                            "failed_arrived": arrived[group][1]})
        bitmaps: dict[tuple[str, str, str], dict[str, list[bytes]]] = {}
        for stream in streams:
            for producer_id, bits in stream.seen.items():
                endpoint = self.run.groups[stream.group].endpoint
                bitmaps.setdefault(endpoint, {}).setdefault(producer_id, []).append(bits)
        for endpoint, producers in bitmaps.items():
            unions = {producer: union_of(b) for producer, b in producers.items()}
            # This node's sends to the queue, by producer: how many, and the numbers failed
            # and in doubt, so that the check by sequence sees every node's (the merge's).
            sends = {producer_id: [count, sorted(failed.get(producer_id, ())),
                                   sorted(doubt.get(producer_id, ()))]
                     for source in produced
                     if self.run.groups[source.group].endpoint == endpoint
                     for producer_id, count in source.positions.items()}
            # The bits themselves, not only their count: other nodes' receivers may compete
            # for the queue too, and the merge takes the union of every node's, so that a
            # message two nodes received counts once.
            records.append({
                "type": "union", "destination": ":".join(endpoint),
                "received_once": sum(u.bit_count() for u in unions.values()), "sends": sends,
                "seen": {producer: pack_bits(u) for producer, u in unions.items()}})
        self.add_reconciliation(records)
        return records

    def add_reconciliation(self, records: list[dict[str, Any]]) -> None:
        """Apply the reconciliation's records (computed now, or read back from the run)."""
        unions: dict[str, dict[str, int]] = {}
        sends: dict[str, dict[str, list[Any]]] = {}
        for record in records:
            if record["type"] == "union":
                destination = record["destination"]
                if "sends" in record:  # written before the check by sequence: none
                    sends.setdefault(destination, {}).update(record["sends"])
                seen = record.get("seen")
                if seen is None:  # a single node's, written before its bits were kept
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
                    if "in_doubt_arrived" in record:
                        self.reconciled.add(name)
                        outcome = self.by_sequence.setdefault(
                            ":".join(totals.spec.endpoint), [0, 0, 0])
                        outcome[1] += record["in_doubt_arrived"]
                        outcome[2] += record["failed_arrived"]
        for destination, bits in unions.items():
            self.received_once[destination] = self.received_once.get(destination, 0) + \
                sum(union.bit_count() for union in bits.values())
        for destination, by_producer in sends.items():
            if destination in unions:
                self.by_sequence[destination] = by_sequence(unions[destination], by_producer)

    def delivery(self) -> list[dict[str, Any]]:
        """Per destination: every message a producer sent against what consumers received.

        Catches what per-producer sequence checks cannot see: losses at the tail of a stream
        and losses on queues with competing consumers. By sequence number where the run
        knows each consumer's numbers (Outcomes): nothing nets against anything, a send in
        doubt that arrived never stands in for a definite one that did not.
        """
        out = []
        for point in endpoints(self.run).values():
            embedded = all(self.run.groups[i].embedded for i in point.groups)
            if not point.checked or not (self.every_node or embedded):
                continue
            # A send the broker did not keep is not expected at any consumer; one in doubt
            # may be there or not.
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
            check = {"destination": destination, "expected": expected, "in_doubt": in_doubt,
                     "received": received, "duplicated": duplicated}
            outcomes = self._outcomes(point.consumers, destination)
            if outcomes is None:
                # Numbers not known (another node's consumers, a run written before): by
                # count, which a send in doubt that arrived can hide a loss behind.
                check.update(missing=max(expected - in_doubt - delivered, 0),
                             unexpected=max(delivered - expected, 0), by_sequence=False)
            else:
                check.update(missing=outcomes.missing, unexpected=outcomes.failed_arrived,
                             in_doubt_arrived=outcomes.doubt_arrived,
                             in_doubt_not_arrived=in_doubt - outcomes.doubt_arrived,
                             by_sequence=True)
            out.append(check)
        return out

    def unchecked(self) -> list[dict[str, str]]:
        """Per destination that producers send to and consumers read, but whose delivery
        cannot be balanced: why (said beside the checks, never left out silently)."""
        out = []
        for point in endpoints(self.run).values():
            if not (point.producers and point.consumers and point.filtered):
                continue
            groups = [self.run.groups[i] for i in point.groups]
            if any(g.selector for g in groups):
                how = "select with --selector"
            elif any(g.destination_max is not None for g in groups):
                how = "read numbered topics (--destination-max)"
            else:
                how = "are routed by more than the destination's name"
            out.append({"destination": str(point),
                        "why": f"its consumers {how}: what each should receive is not "
                               "known; each consumer's own sequence checks count its losses"})
        return out

    def _outcomes(self, consumers: list[int], destination: str) -> Outcomes | None:
        """A destination's outcomes by sequence number: its competing receivers' union
        against its senders' numbers, or the sum of its sequence-checked consumers' own
        (their losses exact: the gaps, the tails, less the sends that failed or were in
        doubt); None where a consumer's numbers are not known."""
        if destination in self.received_once:
            found = self.by_sequence.get(destination)
            return None if found is None else Outcomes(*found)
        # A node reconciles its consumers against its own producers only: with other nodes,
        # a stream of theirs that ends early has no tail a node can see.
        if self.run.nodes > 1 or \
                not all(self.run.groups[i].name in self.reconciled for i in consumers):
            return None
        _, doubt_arrived, failed_arrived = self.by_sequence.get(destination, (0, 0, 0))
        missing = sum(self.groups[i].everything["lost"] for i in consumers)
        return Outcomes(missing, doubt_arrived, failed_arrived)


@dataclass(frozen=True)
class Outcomes:
    """Where a destination's sends ended, by sequence number: definite sends (neither failed
    nor in doubt) that no consumer received; sends in doubt that arrived; sends counted
    failed (never sent) that arrived all the same."""

    missing: int
    doubt_arrived: int
    failed_arrived: int


def by_sequence(union: dict[str, int], sends: dict[str, list[Any]]) -> list[int]:
    """A queue's Outcomes (as a list) from its receivers' union (by producer, a bit each
    number received) and its sends (by producer: [messages, failed numbers, numbers in
    doubt])."""
    missing = doubt_arrived = failed_arrived = 0
    for producer, (count, failed, doubt) in sends.items():
        got = union.get(producer, 0)
        excused = bytearray((count + 7) // 8)
        for n in (*failed, *doubt):
            if n < count:
                excused[n >> 3] |= 1 << (n & 7)
        definite = ((1 << count) - 1) & ~int.from_bytes(excused, "little")
        missing += (definite & ~got).bit_count()
        doubt_arrived += sum(got >> n & 1 for n in doubt)
        failed_arrived += sum(got >> n & 1 for n in failed)
    return [missing, doubt_arrived, failed_arrived]
