import itertools
import json
import math
from collections import deque

import pytest
from harness.modules.loopback import LoopbackTransport, reset_broker

from harness.clock import now_ns, offset_ns
from harness.engine.pacing import Schedule
from harness.engine.roles import Sender
from harness.engine.worker import Control, WorkerSetup
from harness.plan.group import group_spec
from harness.plan.run import RunSpec, assign_group_names
from harness.stats.timeline import Timeline

NS = 1_000_000_000


def test_the_epoch_offset_comes_from_the_closest_readings_not_a_preempted_one():
    """The offset behind every cross-process timestamp: a thread preempted for 40 ms between
    its clock readings must not shift the process's latencies by 40 ms (simulated clocks:
    each read advances true time by the given nanoseconds)."""
    true_offset = 1_764_000_000_000_000_000
    elapsed = iter([0, 40_000_000, 100] + [1_000, 50, 50] * 8)  # before, wall, after
    now = [0]

    def monotonic() -> int:
        now[0] += next(elapsed)
        return now[0]

    def wall() -> int:
        return true_offset + monotonic()

    assert offset_ns(monotonic, wall, tries=9) == true_offset


def test_fixed_schedule_is_computed_from_the_start_so_it_never_drifts():
    schedule = Schedule(start_ns=5, rate=3.0)
    times = [schedule.next_ns() for _ in range(3 * 3600 + 1)]
    # The 10,800th message of an hour at 3/s is due exactly one hour after the start,
    # although 1/3 s is not a whole number of nanoseconds.
    assert times[-1] == 5 + 3600 * NS
    assert times[1] - times[0] in (333_333_333, 333_333_334)


def test_ramp_rises_linearly_then_holds_the_rate():
    rate, ramp = 1000.0, 2.0
    schedule = Schedule(start_ns=0, rate=rate, ramp=ramp)
    times = [schedule.next_ns() for _ in range(5000)]
    sent_in_first_second = sum(1 for t in times if t < 1 * NS)
    sent_in_ramp = sum(1 for t in times if t < 2 * NS)
    # Linear ramp: N(t) = rate t^2 / (2 ramp): 250 by 1 s, 1000 by 2 s, then 1000 a second.
    assert abs(sent_in_first_second - 250) <= 1
    assert abs(sent_in_ramp - 1000) <= 1
    assert sum(1 for t in times if 2 * NS <= t < 3 * NS) == 1000


def test_poisson_arrivals_have_the_mean_rate_and_exponential_gaps():
    schedule = Schedule(start_ns=0, rate=2000.0, poisson=True, seed=7)
    times = [schedule.next_ns() for _ in range(40_001)]
    assert times[-1] / NS == pytest.approx(20.0, rel=0.02)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    mean = sum(gaps) / len(gaps)
    # Exponential: the standard deviation equals the mean, unlike a fixed schedule's zero.
    std = math.sqrt(sum((g - mean) ** 2 for g in gaps) / len(gaps))
    assert std == pytest.approx(mean, rel=0.05)


def test_retarget_continues_at_the_new_rate_without_a_burst():
    schedule = Schedule(start_ns=0, rate=100.0)
    for _ in range(10):
        schedule.next_ns()
    schedule.retarget(now_ns=NS, rate=10.0)
    assert [schedule.next_ns() for _ in range(3)] == [NS, NS + NS // 10, NS + 2 * NS // 10]


def test_a_1000_per_second_run_holds_the_rate_every_second_and_does_not_drift(harness):
    result = harness("run", "-m", "loopback.Sender", "-rt", "1000", "-d", "Q", "-rl", "15",
                     "-ss", "1", "-g", "-m loopback.Receiver -d Q", timeout=120)
    assert result.code == 0, result.stderr
    sent = {r["interval"]: r["sent"] for r in result.records("counters")
            if r["group"] == "sender" and r["phase"] == "measure"}
    assert sorted(sent) == list(range(15))
    for index, count in sent.items():
        assert 980 <= count <= 1020, (index, count)
    # No drift: over 15 s the schedule delivers 15,000 messages, not one more or less
    # than the first message at t=0 and the last one before t=15 s allow (a schedule that
    # drifted by a thousandth would be 15 off).
    assert sum(sent.values()) == 15_000
    assert result.summary["groups"]["receiver"]["received"] == 15_000


def test_a_schedule_whose_start_moves_sends_from_the_new_start():
    """The cell moves each schedule's start to the run's once the run's clock is known; the
    times drawn ahead of time must follow it."""
    schedule = Schedule(start_ns=0, rate=1000.0)
    schedule.start = 7 * NS
    assert schedule.next_ns() == 7 * NS
    assert schedule.next_ns() == 7 * NS + NS // 1000
    schedule.start = 9 * NS  # moved again mid-way: the count goes on from the new start
    assert schedule.next_ns() == 9 * NS + 2 * NS // 1000


def test_the_threads_of_a_group_are_spread_over_the_schedule():
    """Thread k of N runs k/N of a gap behind the first: together they send evenly."""
    n, rate = 20, 50.0
    schedules = [Schedule(start_ns=0, rate=rate, phase=k / n) for k in range(n)]
    times = sorted(s.next_ns() for s in schedules for _ in range(10))
    gaps = {b - a for a, b in itertools.pairwise(times)}
    gap = 1e9 / (n * rate)
    assert all(abs(g - gap) <= 1 for g in gaps), sorted(gaps)[:3]


def test_poisson_arrivals_repeat_with_the_same_seed():
    def draw(seed: str) -> list[int]:
        schedule = Schedule(start_ns=0, rate=1000.0, poisson=True, seed=seed)
        return [schedule.next_ns() for _ in range(50)]

    assert draw("0:node:sender:0:0") == draw("0:node:sender:0:0")
    assert draw("0:node:sender:0:0") != draw("1:node:sender:0:0")


def test_twenty_threads_at_50_per_second_measure_as_one_at_1000(harness, tmp_path):
    """Threads in lock-step would send in bursts of 20 and queue behind each other."""
    p50 = {}
    for threads, rate in ((1, 1000), (20, 50)):
        out = tmp_path / f"runs{threads}"
        done = harness("run", "-m", "loopback.Sender", "-d", "Q", "-nt", str(threads), "-rt",
                       str(rate), "-rl", "4", "-sw", "1", "-ss", "1",
                       "-g", "-m loopback.Receiver -d Q", "-o", str(out), output=False)
        assert done.code == 0, done.stderr
        (run_dir,) = out.iterdir()
        summary = json.loads((run_dir / "summary.json").read_text())
        p50[threads] = summary["groups"]["receiver"]["latency"]["p50"]
    # In lock-step the median waits behind ten others: about 7 times the single thread's here.
    # The margin leaves room for a busy machine's scheduling noise (90 against 130 us seen).
    assert p50[20] <= 2 * p50[1] + 100, p50


def test_one_thread_holds_100000_per_second_every_second_without_drift(harness):
    """At 100,000 msg/s the gap (10 us) is shorter than a sleep: the messages due at each
    wake-up go out back to back, each timed from its own intended time."""
    result = harness("run", "-m", "loopback.Sender", "-rt", "100000", "-d", "Q", "-rl", "4",
                     "-ss", "1", timeout=120)
    assert result.code == 0, result.stderr
    sent = {r["interval"]: r["sent"] for r in result.records("counters")
            if r["group"] == "sender" and r["phase"] == "measure"}
    assert sorted(sent) == list(range(4))
    # A stall of the shared 2-core machine moves a few thousand messages from one interval
    # into the next (they go out late, back to back, timed from when they were due); a
    # harness that cannot hold the rate falls short in every interval and in the total.
    for index, count in sent.items():
        assert 97_000 <= count <= 103_000, (index, count)
    assert sum(sent.values()) >= 398_000, sent
    # No drift: every message the schedule had due before the stop was sent (a few just
    # after it, in the drain's counts) or, still owed at the stop instant, counted unsent.
    sender = result.summary["groups"]["sender"]
    assert sender["sent"] + sender["unsent"] == 400_000
    # Owed at the stop: a handful on a quiet machine; what fell due during a stall of the
    # machine right at the stop (1,575 seen under the full suite, a 16 ms stall).
    assert sender["unsent"] <= 3_000 and sender["errors"] == 0


def test_a_send_woken_past_a_boundary_belongs_to_the_interval_of_its_intended_time():
    """A producer that sleeps until a send due just before an interval's end and wakes after
    it records that send in the interval it was due in: were it moved to the next one (the
    drain, after the last measured interval), the measured rate would miss it although the
    summary counts it as sent."""
    reset_broker()
    group = group_spec({"module": "loopback.Sender", "destination": "Q", "rate": 1000})
    assign_group_names([group])
    run = RunSpec(groups=[group], interval=1.0)
    start = now_ns() - NS + 2_000_000  # the first interval ends 2 ms from now
    control = Control(Timeline.of(run, start), NS)
    setup = WorkerSetup(group, 0, 0, 0, run.node, control, deque(),
                        LoopbackTransport(group.settings(run.node, 0, 0, 0)), bytes(16), True,
                        NS, run_id="test")
    worker = Sender(setup)
    worker.prepare()
    worker.move_to(start)
    boundary = worker.next_boundary
    intended = boundary - 1_000_000  # due 1 ms before the boundary
    while now_ns() < boundary + 1_000_000:  # and only now, 1 ms past it, awake
        pass
    assert worker.pace(intended, intended - 1) is not None
    assert worker.interval_index == 0 and worker.next_boundary == boundary
    assert not setup.outbox  # the interval is still open for the send
    worker.transport.close()
