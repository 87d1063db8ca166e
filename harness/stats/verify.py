"""Delivery verification: per producer, messages lost, duplicated and out of order.

Every message carries its producer id and a sequence number. A consumer that sees a producer's
whole stream (a topic subscriber, or the only consumer of a queue) expects consecutive numbers.
A gap is held as missing for a reorder window: a missing message that arrives within it counts
as reordered; one still missing after it counts as lost. A number seen before counts as
duplicated. Competing consumers of one queue each see only part of a stream, so there the
run's delivery check (sent against received per destination) stands in for per-message checks.
"""

from __future__ import annotations

from harness.stats.recorder import Recorder

# A gap larger than this is counted lost at once instead of remembered message by message.
MAX_REMEMBERED_GAP = 1_000_000


class SequenceTracker:
    __slots__ = ("expected", "missing", "window_ns", "rec")

    def __init__(self, recorder: Recorder, window_ns: int) -> None:
        self.expected: dict[str, int] = {}
        self.missing: dict[str, dict[int, int]] = {}
        self.window_ns = window_ns
        self.rec = recorder

    def check(self, producer: str, seq: int, now: int) -> None:
        expected = self.expected.get(producer)
        if expected == seq:
            self.expected[producer] = seq + 1
        elif expected is None:
            # The first message seen from a producer sets the baseline: a subscriber that
            # joined late has not lost what was sent before it subscribed.
            self.expected[producer] = seq + 1
        elif seq > expected:
            self.expected[producer] = seq + 1
            if seq - expected > MAX_REMEMBERED_GAP:
                self.rec.lost += seq - expected
                return
            gaps = self.missing.setdefault(producer, {})
            for missing in range(expected, seq):
                gaps[missing] = now
        else:
            gaps = self.missing.get(producer)
            if gaps is not None and gaps.pop(seq, None) is not None:
                self.rec.reordered += 1
            else:
                self.rec.duplicated += 1

    def expire(self, now: int) -> None:
        """Count as lost what has been missing for longer than the reorder window."""
        cutoff = now - self.window_ns
        for gaps in self.missing.values():
            late = [seq for seq, since in gaps.items() if since <= cutoff]
            for seq in late:
                del gaps[seq]
            self.rec.lost += len(late)

    def finish(self) -> None:
        """At the end of the run everything still missing is lost."""
        for gaps in self.missing.values():
            self.rec.lost += len(gaps)
            gaps.clear()
