"""The live screen and the replay, driven by Textual's pilot against real loopback runs."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from harness.engine.runner import Controller
from harness.plan.group import GroupSpec
from harness.plan.run import RunSpec, validate_run
from harness.rundir.reader import load
from harness.screen.app import COLUMNS, RunApp
from harness.screen.live import LiveFeed
from harness.screen.replay import ReplayFeed
from harness.units import format_us
from tests.conftest import near, read_jsonl

SIZE = (160, 48)


def spec(tmp_path: Path, *groups: GroupSpec, duration: float = 0.0) -> RunSpec:
    run = RunSpec(groups=list(groups), duration=duration, interval=1.0, drain=1.0,
                  output=str(tmp_path / "runs"), name="ui")
    validate_run(run)
    return run


def sender(rate: float, threads: int = 1) -> GroupSpec:
    return GroupSpec("loopback.Sender", "Q", thread_rate=rate, threads=threads)


def receiver(threads: int = 1) -> GroupSpec:
    return GroupSpec("loopback.Receiver", "Q", threads=threads)


Scenario = Callable[[Pilot[None], RunApp, LiveFeed], Awaitable[None]]


def live(run: RunSpec, scenario: Scenario) -> tuple[LiveFeed, Any, RunApp]:
    """Run `run` under the screen, play the scenario, then wait for the run to end."""
    controller = Controller(run, lambda view: None, lambda line: None, isolate=True)
    feed = LiveFeed(controller)
    controller.prepare()
    feed.start()
    app = RunApp(feed)

    async def main() -> None:
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause(1.0)
            await scenario(pilot, app, feed)
            deadline = time.monotonic() + 30
            while app.return_code is None and time.monotonic() < deadline:
                await pilot.pause(0.2)

    asyncio.run(main())
    return feed, feed.outcome(), app


async def wait_intervals(pilot: Pilot[None], feed: LiveFeed, count: int) -> None:
    """Until `count` more merged intervals have reached the screen."""
    target = feed.board.intervals + count
    deadline = time.monotonic() + count * 3 + 5
    while feed.board.intervals < target and time.monotonic() < deadline:
        await pilot.pause(0.1)
    assert feed.board.intervals >= target, "the screen stopped receiving intervals"


def sent_per_interval(run_dir: Path, group: str) -> list[int]:
    return [r["sent"] for r in read_jsonl(run_dir / "intervals.jsonl")
            if r["type"] == "counters" and r["group"] == group and r["length"] == 1.0]


def log_text(app: RunApp) -> str:
    return "\n".join(app.log_lines)


def test_rate_keys_and_added_threads_reach_the_workers(tmp_path: Path) -> None:
    marks: dict[str, int] = {}

    async def scenario(pilot: Pilot[None], app: RunApp, feed: LiveFeed) -> None:
        await wait_intervals(pilot, feed, 2)
        marks["rate"] = feed.board.intervals
        await pilot.press("plus", "plus")  # 200 -> 220 -> 242 msg/s
        await wait_intervals(pilot, feed, 4)
        marks["thread"] = feed.board.intervals
        await pilot.press("t")  # a second sender thread at the new rate
        await wait_intervals(pilot, feed, 5)
        await pilot.press("q")

    feed, result, _ = live(spec(tmp_path, sender(200), receiver()), scenario)
    sent = sent_per_interval(result.run_dir, "sender")
    # Two intervals of slack after each key, counted from before it is pressed: the screen
    # counts an interval when its report has come in, so the key may land in the interval
    # after the count, and the change mid-interval. Judged over
    # each span, to 2% (the two rates asked are 10% apart): a paced sender held a moment by
    # a busy machine sends what was due in the next interval, one interval short, one over.
    after_rate = sent[marks["rate"] + 2:marks["thread"]]
    after_thread = sent[marks["thread"] + 2:-1]
    assert len(after_rate) >= 2 and near(after_rate, 242, 0.02), (sent, marks)
    assert len(after_thread) >= 2 and near(after_thread, 484, 0.02), (sent, marks)
    events = result.run_dir.joinpath("manifest.json").read_text()
    assert '"set_rate"' in events and '"add_thread"' in events
    manifest = json.loads(events)
    assert [round(e["rate_per_thread"]) for e in manifest["events"] if "rate_per_thread" in e] \
        == [220, 242]
    assert feed.board.groups["sender"].threads == 2
    assert result.summary["groups"]["receiver"]["lost"] == 0


def test_pause_holds_the_producers_and_resumes_without_a_burst(tmp_path: Path) -> None:
    marks: dict[str, int] = {}

    async def scenario(pilot: Pilot[None], app: RunApp, feed: LiveFeed) -> None:
        await wait_intervals(pilot, feed, 2)
        await pilot.press("p")
        marks["paused"] = feed.board.intervals
        await wait_intervals(pilot, feed, 3)
        assert "paused" in str(app.query_one("#top", Static).render())
        await pilot.press("p")
        marks["resumed"] = feed.board.intervals
        await wait_intervals(pilot, feed, 5)
        await pilot.press("q")

    _, result, app = live(spec(tmp_path, sender(300), receiver()), scenario)
    sent = sent_per_interval(result.run_dir, "sender")
    # Two intervals of slack after each key: the screen counts an interval when its report
    # has come in, so beside load the interval the key lands in may be the one after the
    # count.
    held = sent[marks["paused"] + 2:marks["resumed"]]
    resumed = sent[marks["resumed"] + 2:-1]
    assert held and all(n == 0 for n in held), (sent, marks)
    # The schedule restarts from the resume: no catch-up burst of the messages not sent (900
    # of them, three intervals' worth), the span at 300 a second to 2%, no interval a third
    # over it.
    assert len(resumed) >= 2 and near(resumed, 300, 0.02), (sent, marks)
    assert max(resumed) < 400, (sent, marks)
    assert "producers paused" in log_text(app) and "producers resumed" in log_text(app)


def test_stop_screenshot_reset_and_selection(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    async def scenario(pilot: Pilot[None], app: RunApp, feed: LiveFeed) -> None:
        await wait_intervals(pilot, feed, 2)
        await pilot.press("down")
        seen["selected"] = app.selected
        seen["title"] = app.query_one("#percentiles", Static).content.title
        await pilot.press("r")
        seen["after_reset"] = feed.board.groups["sender"].total
        await wait_intervals(pilot, feed, 1)
        seen["one_interval"] = feed.board.groups["sender"].total
        await pilot.press("t")  # refused: the only receiver checks sequences
        await pilot.press("s")
        await pilot.pause(0.2)
        seen["screenshots"] = list(app.screenshots)
        await pilot.press("q")

    _, result, app = live(spec(tmp_path, sender(100, threads=2), receiver()), scenario)
    assert seen["selected"] == "receiver" and "receiver: latency" in seen["title"]
    assert seen["after_reset"] == 0 and 150 <= seen["one_interval"] <= 250
    assert "only receiver" in log_text(app)
    assert app.return_code == 0  # the screen closed by itself once the run had stopped
    assert result.stopped_by == "interrupt" and result.exit_code == 0
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    read_jsonl(result.run_dir / "intervals.jsonl")  # every line whole
    [shot] = seen["screenshots"]
    assert Path(shot).parent == result.run_dir
    assert Path(shot).read_text().startswith("<svg") and "receiver" in Path(shot).read_text()


def test_screen_shows_the_numbers_the_statistics_engine_produced(harness: Any,
                                                                  tmp_path: Path) -> None:
    done = harness("run", "-m", "loopback.Sender", "-d", "Q", "-rt", "500", "-nt", "2",
                   "-rl", "4", "-sw", "1", "-ss", "1", "-g", "-m loopback.Receiver -d Q")
    assert done.code == 0, done.stderr
    summary = done.summary
    recorded = load(done.run_dir)
    feed = ReplayFeed(done.run_dir, recorded)
    rows: dict[str, list[str]] = {}
    steps: list[float] = []
    shown: dict[str, Any] = {}
    app = RunApp(feed)

    async def main() -> None:
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("end")
            await pilot.pause(0.3)
            table = app.query_one("#groups", DataTable)
            for name in ("sender", "receiver"):
                rows[name] = [str(cell) for cell in table.get_row(name)]
                board = feed.board.groups[name]
                shown[name] = board.percentiles(board.headline, cumulative=True)
            # The selected group's percentile panel: the row of cumulative figures.
            panel = app.query_one("#percentiles", Static).content
            columns = [list(column.cells) for column in panel.columns]
            shown["panel"] = {columns[0][1]: [c[1] for c in columns[1:]]}
            # Stepping through time: home, three intervals forward, one back.
            await pilot.press("home")
            steps.append(feed.board.intervals)
            await pilot.press("right", "right", "right")
            steps.append(feed.board.intervals)
            await pilot.press("left")
            steps.append(feed.board.intervals)
            steps.append(feed.board.groups["sender"].rate_now)

    asyncio.run(main())
    assert steps[:3] == [0, 3, 2]
    second = list(recorded.replay().views())[1]
    assert steps[3] == second.groups["sender"].count / second.length
    columns = [key for key, _ in COLUMNS]
    for name, row in rows.items():
        cells = dict(zip(columns, row, strict=True))
        expected = summary["groups"][name]
        total = expected["received"] or expected["sent"]
        assert cells["avg"] == f"{expected['rate']:,.1f}"
        assert cells["total"] == f"{total:,}"
        assert cells["lost"] == str(expected["lost"])
        assert shown[name] == expected[expected["headline"]]
    sender = summary["groups"]["sender"]["service"]
    assert shown["panel"] == {"service cumul.": [format_us(sender[k]) for k in
                                                 ("p50", "p90", "p99", "p99.9", "max")]}


def test_view_prints_the_recorded_intervals_without_a_terminal(harness: Any,
                                                               loopback_run: Any) -> None:
    done = loopback_run
    shown = harness("view", str(done.run_dir))
    assert shown.code == 0, shown.stderr
    # The same interval lines the run printed, from the files alone.
    run_lines = [line for line in done.stdout.splitlines() if " sent " in line or
                 " recv " in line]
    view_lines = [line for line in shown.stdout.splitlines() if " sent " in line or
                  " recv " in line]
    assert view_lines == run_lines


def test_view_warns_of_a_line_cut_off_mid_write(harness: Any, loopback_run: Any) -> None:
    """A run killed while writing leaves a partial last line: the replay leaves it out and
    says so, with or without the screen."""
    path = loopback_run.run_dir / "intervals.jsonl"
    path.write_text(path.read_text() + '{"type":"counters","v":1,"gro')
    shown = harness("view", str(loopback_run.run_dir))
    assert shown.code == 0, shown.stderr
    assert "harness: warning: 1 lines of intervals.jsonl did not parse" in shown.stderr
    assert " sent " in shown.stdout


def test_view_refuses_what_is_not_a_run_directory(harness: Any, tmp_path: Path) -> None:
    shown = harness("view", str(tmp_path))
    assert shown.code == 2
    assert shown.stderr.strip().splitlines() == [
        f"harness: error: RUN_DIR: {tmp_path}/manifest.json does not exist: not a run "
        "directory"]


def test_a_refresh_tick_after_the_screen_closed_draws_nothing_and_raises_nothing(
        loopback_run: Any) -> None:
    """The refresh timer may fire while the app tears its widgets down (seen under load):
    that tick must not fail the app's exit."""
    app = RunApp(ReplayFeed(loopback_run.run_dir, load(loopback_run.run_dir)))

    async def main() -> None:
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause(0.1)

    asyncio.run(main())
    app.refresh_view()  # the widgets are gone
