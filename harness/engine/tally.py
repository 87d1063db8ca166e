"""What a worker counts of its transport's failures and word: a failed call once an outage,
the outages and the broker's later word on sends (feedback) at each interval, a send that
raised, the sends of a transaction not committed. A part of Worker
(harness.engine.worker)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.clock import now_ns
from harness.modules.interface.base import COMMIT_IN_DOUBT, Transport, TransportError

if TYPE_CHECKING:
    from harness.engine.outgoing import Outgoing
    from harness.engine.pacing import Schedule
    from harness.modules.interface.optional import Transactions
    from harness.stats.recorder import Recorder


class Tally:
    """The counting half of a Worker: what it reads of the worker is declared below."""

    transport: Transport
    transactions: Transactions | None
    rec: Recorder
    out: Outgoing
    schedule: Schedule | None
    outage_counted: int
    redelivered_taken: int

    def receive_failed(self, exc: TransportError) -> None:
        self.call_failed("receive", exc)

    def call_failed(self, kind: str, exc: TransportError) -> None:
        """Count a call on the transport that raised as an error, but once per outage: while
        the connection is down every poll, flush and wait fails, as many times as the loop
        turns, and the outage has counters of its own (reconnects, outage_ms). What the
        failure did to sends already made is the transport's to report (its feedback)."""
        outages = self.transport.outages
        if outages.down_since is not None:
            if outages.outages == self.outage_counted:
                return
            self.outage_counted = outages.outages
        self.rec.error(kind, exc)

    def take_outage(self) -> None:
        """What the transport noted since the last interval: outages, and what the broker
        said of earlier sends (confirmation times, sends it refused after all)."""
        rec, transport = self.rec, self.transport
        reconnects, outage_ns = transport.outages.take()
        rec.reconnects += reconnects
        rec.outage_ms += outage_ns // 1_000_000
        feedback = transport.feedback
        if feedback.confirm_us or feedback.failed or feedback.doubt or feedback.errors:
            confirm_us, failed, doubt, errors = feedback.take()
            rec.confirm.extend(confirm_us)
            out = self.out
            for seq, kind, reason in failed:
                rec.error(kind, reason)
                rec.refused += 1
                out.failed.append(seq)
            # Not errors: the fault that hid their outcome is (an outage, counted once).
            rec.in_doubt += len(doubt)
            out.doubt.extend(seq for seq, _ in doubt)
            self.untaken([seq for seq, _, _ in failed] + [seq for seq, _ in doubt])
            if doubt and "in doubt" not in rec.reasons:
                rec.reasons["in doubt"] = f"{len(doubt)} sends: {doubt[0][1]}"
            for kind, (count, reason) in errors.items():
                rec.error(kind, reason)
                rec.errors += count - 1
        if feedback.rebalances:
            rec.rebalances += len(feedback.rebalances)
            rec.notes += feedback.rebalances
            feedback.rebalances = []
        if feedback.partitions:
            rec.partitions = feedback.partitions
        redelivered = feedback.redelivered
        if redelivered != self.redelivered_taken:
            rec.redelivered += redelivered - self.redelivered_taken
            self.redelivered_taken = redelivered

    def send_failed(self, seq: int, size: int, intended: int, exc: TransportError) -> None:
        """Count send number seq, of size bytes, that raised."""
        rec = self.rec
        if exc.reported:
            # Its outcome is in the transport's feedback, with the sends it had queued: sent,
            # as they were; the fault counted once an outage.
            rec.sent += 1
            rec.bytes += size
            self.call_failed(exc.kind or "send", exc)
        else:
            # The number is not used again (the broker may have taken the message): the
            # reconciliation takes it out of consumers' losses.
            rec.error(exc.kind or "send", exc)
            rec.failed += 1
            self.out.failed.append(seq)
        if self.schedule is not None:  # never sent: delayed at least until it failed
            rec.delay.append((now_ns() - intended) // 1000)

    def uncommitted(self, sent: list[int], exc: TransportError) -> None:
        """A producer's sends in a transaction that was not committed: refused (the broker
        kept none of them), or in doubt where a fault hid the commit's outcome."""
        rec = self.rec
        if exc.kind == COMMIT_IN_DOUBT:
            rec.in_doubt += len(sent)
            self.out.doubt.extend(sent)
            rec.reasons.setdefault("in doubt", f"{len(sent)} sends: {exc}")
        else:
            rec.refused += len(sent)
            self.out.failed.extend(sent)
        self.untaken(sent)

    def untaken(self, seqs: list[int]) -> None:
        """Sends counted sent that the broker's later word (refused) or a fault (in doubt)
        showed it did not take: those made in the measured span come off the span's count,
        in whichever interval the word came (harness.stats.figures.taken)."""
        spanned = self.out.spanned
        self.rec.untaken += sum(1 for seq in seqs if spanned(seq))

    def commit(self, sent: list[int] | None = None) -> None:
        """Commit and begin the next transaction; a failure (the connection lost, and the
        transaction with it) is counted once an outage, and the thread goes on. sent: a
        producer's numbers sent in the transaction, which a failed commit did not keep."""
        transactions = self.transactions
        assert transactions is not None  # -tx is refused where there are none
        try:
            transactions.commit()
            self.rec.commits += 1
        except TransportError as exc:
            self.call_failed("commit", exc)
            if sent and not exc.reported:
                self.uncommitted(sent, exc)
        self.begin()

    def begin(self) -> None:
        """Begin a transaction; a failure is counted as commit's is, and the thread goes on
        (the transport begins one again before its next send)."""
        assert self.transactions is not None
        try:
            self.transactions.begin()
        except TransportError as exc:
            self.call_failed("begin", exc)
