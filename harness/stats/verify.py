"""Delivery verification: per producer, messages lost, duplicated, reordered and late.

Every message carries its producer id (which holds the run id) and a sequence number from 0.
A consumer that sees a producer's whole stream (a topic subscriber, or the only consumer of a
queue) expects consecutive numbers from 0, so that loss at the head of a stream is seen too. A
gap is held as missing for a reorder window: a missing message that arrives within it counts
as reordered; one still missing after it counts as lost, and if it arrives later still, it
counts once, as late (and no longer lost). A number seen before counts as duplicated.

Competing consumers of one queue each see only part of a stream: each keeps a bit per
number it received (SeenSet), and the run's delivery check unions them, so that a message
delivered twice to two consumers does not cancel one that none received.
"""

from __future__ import annotations

import base64
import zlib
from collections.abc import Callable, Iterable

from harness.stats.recorder import Recorder

# A gap larger than this is counted lost at once instead of remembered message by message.
MAX_REMEMBERED_GAP = 1_000_000
# Lost numbers remembered (to recognise a late arrival), per consumer thread.
MAX_REMEMBERED_LOST = 1_000_000


class SequenceTracker:
    """A consumer's view of each producer's stream. Where the broker orders per partition
    (Kafka), `partition_of` says the partition of the message being checked, and a message
    is reordered only when a later one of its producer came before it on the same partition:
    one that arrives after later messages of other partitions is not (the broker promises
    nothing across partitions). A producer with a gap open is then checked message by
    message, off the consumer's fast path (`expected` holds -1 for it meanwhile)."""

    __slots__ = ("expected", "missing", "lost", "remembered", "window_ns", "rec",
                 "partition_of", "next", "highest")

    def __init__(self, recorder: Recorder, window_ns: int,
                 partition_of: Callable[[], int] | None = None) -> None:
        self.expected: dict[str, int] = {}
        self.missing: dict[str, dict[int, int]] = {}
        self.lost: dict[str, set[int]] = {}
        self.remembered = 0
        self.window_ns = window_ns
        self.rec = recorder
        self.partition_of = partition_of
        # By partition: the next number of a producer with a gap open, and
        # the highest number of a producer seen on a partition while it had a gap open
        self.next: dict[str, int] = {}
        self.highest: dict[tuple[str, int], int] = {}

    def check(self, producer: str, seq: int, now: int) -> None:
        if self.partition_of is not None:
            self._check_by_partition(producer, seq, now, self.partition_of())
            return
        # Every stream of this run starts at 0 (consumers subscribe before any producer
        # starts): a first message above 0 means the ones before it are missing.
        expected = self.expected.get(producer, 0)
        if expected == seq:
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
                return
            self._again(producer, seq)

    def _check_by_partition(self, producer: str, seq: int, now: int, partition: int) -> None:
        # The fast path moves `expected` on; while a gap is open it holds -1, and `next` does.
        expected = self.expected.get(producer, 0)
        if expected < 0:
            expected = self.next[producer]
        key = (producer, partition)
        if seq >= expected:
            self.next[producer] = seq + 1
            if seq - expected > MAX_REMEMBERED_GAP:
                self.rec.lost += seq - expected
            elif seq > expected:
                gaps = self.missing.setdefault(producer, {})
                for missing in range(expected, seq):
                    gaps[missing] = now
            if self.missing.get(producer):
                self.expected[producer] = -1  # every message checked here until it closes
                self.highest[key] = seq
            else:
                self.expected[producer] = seq + 1
            return
        gaps = self.missing.get(producer)
        if gaps is not None and gaps.pop(seq, None) is not None:
            highest = self.highest.get(key, -1)
            if highest > seq:
                self.rec.reordered += 1  # a later one of its partition came first
            else:
                self.highest[key] = seq
            if not gaps:
                self._closed(producer)
            return
        self._again(producer, seq)

    def _closed(self, producer: str) -> None:
        """No gap left open: the producer's stream is back on the fast path."""
        if self.partition_of is not None:
            self.expected[producer] = self.next.get(producer, 0)
            for key in [k for k in self.highest if k[0] == producer]:
                del self.highest[key]

    def _again(self, producer: str, seq: int) -> None:
        """A number not missing: a late arrival of one counted lost, or a duplicate."""
        lost = self.lost.get(producer)
        if lost is not None and seq in lost:
            lost.discard(seq)
            self.rec.lost -= 1
            self.rec.late += 1
        else:
            self.rec.duplicated += 1

    def _lose(self, producer: str, seqs: list[int]) -> None:
        self.rec.lost += len(seqs)
        room = MAX_REMEMBERED_LOST - self.remembered
        if room > 0:
            self.lost.setdefault(producer, set()).update(seqs[:room])
            self.remembered += min(room, len(seqs))

    def expire(self, now: int) -> None:
        """Count as lost what has been missing for longer than the reorder window."""
        cutoff = now - self.window_ns
        for producer, gaps in self.missing.items():
            late = [seq for seq, since in gaps.items() if since <= cutoff]
            for seq in late:
                del gaps[seq]
            if late:
                self._lose(producer, late)
                if not gaps:
                    self._closed(producer)

    def finish(self) -> None:
        """At the end of the run everything still missing is lost."""
        for producer, gaps in self.missing.items():
            if gaps:
                self._lose(producer, list(gaps))
            gaps.clear()
            if self.expected.get(producer, 0) < 0:
                self._closed(producer)  # its position read at the end, not a gap's -1


class SeenSet:
    """The numbers one consumer received from each producer, a bit each (1.25 MB for ten
    million messages); a number seen twice by the same consumer counts as duplicated."""

    __slots__ = ("bits", "rec")

    def __init__(self, recorder: Recorder) -> None:
        self.bits: dict[str, bytearray] = {}
        self.rec = recorder

    def add(self, producer: str, seq: int) -> None:
        bits = self.bits.get(producer)
        byte = seq >> 3
        if bits is None:
            bits = self.bits[producer] = bytearray(max(1024, byte + 1))
        elif byte >= len(bits):
            bits.extend(bytes(max(byte + 1 - len(bits), len(bits))))
        mask = 1 << (seq & 7)
        if bits[byte] & mask:
            self.rec.duplicated += 1
        else:
            bits[byte] |= mask


def union_of(bitmaps: list[bytes]) -> int:
    """The numbers any of the bitmaps holds, as one integer's bits."""
    union = 0
    for bits in bitmaps:
        union |= int.from_bytes(bits, "little")
    return union


def union_count(bitmaps: list[bytes]) -> int:
    """How many numbers any of the bitmaps holds."""
    return union_of(bitmaps).bit_count()


def pack_bits(union: int) -> str:
    """A union as text for a run file: compressed (a stream's bits run in long blocks)."""
    raw = union.to_bytes((union.bit_length() + 7) // 8, "little")
    return base64.b64encode(zlib.compress(raw)).decode("ascii")


def unpack_bits(text: str) -> int:
    return int.from_bytes(zlib.decompress(base64.b64decode(text)), "little")


def count_in(numbers: Iterable[int], low: int, high: int | None = None) -> int:
    return sum(1 for n in numbers if n >= low and (high is None or n < high))
