"""The Textual screen for a run, live or replayed: a header, one row per worker group (and
for a distributed run one per node), the selected group's percentiles, rate sparkline and
percentile distribution, CPU, and a log.

The screen reads its feed on a timer at most four times a second; it never touches the
workers' message path.
"""

from __future__ import annotations

import time
from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.reactive import reactive
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Footer, RichLog, Static

from harness.screen.board import GroupBoard, partition_text
from harness.screen.feed import Feed, describe_target
from harness.screen.plot import bars, render
from harness.stats.figures import CLIENT_CPU_LIMIT
from harness.stats.nines import distribution
from harness.units import format_us

REFRESH_S = 0.25  # at most four snapshots a second
PHASES = {"warmup": "warm-up", "measure": "measuring", "drain": "draining"}
COLUMNS = (("group", "group"), ("module", "module"), ("threads", "threads"),
           ("now", "rate now/s"), ("avg", "rate avg/s"), ("total", "total"),
           ("errors", "errors"), ("lost", "lost"), ("dup", "dup"), ("reord", "reord"),
           ("cpu", "cpu"), ("cost", "cpu us/msg"))
LIVE_ONLY = {"pause", "rate", "add_thread"}
REPLAY_ONLY = {"play", "step", "seek"}


def _clock(seconds: float) -> str:
    seconds = max(int(seconds), 0)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class NinesPlot(Widget):
    """Latency against percentile on a nines axis, for the selected group."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.points: list[tuple[float, int]] = []
        self.caption = ""

    def show(self, points: list[tuple[float, int]], caption: str) -> None:
        self.points, self.caption = points, caption
        self.refresh()

    def render(self) -> Text:
        lines = render(self.points, self.size.width, max(self.size.height - 1, 0))
        return Text("\n".join([self.caption, *lines]))


class RunScreen(Screen[None]):
    """The run screen; `feed` decides whether it is live, followed or a replay. Closing it
    ends the app (RunApp), or goes back to the list of runs it was opened from."""

    selected: reactive[str] = reactive("", init=False)  # the group whose detail is shown
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "stop", "Stop / quit"),
        Binding("ctrl+c", "stop", "Stop", show=False, priority=True),
        Binding("p", "pause", "Pause"),
        Binding("plus,equals_sign", "rate(1.1)", "Rate +10%", key_display="+"),
        Binding("minus", "rate(0.9)", "Rate -10%", key_display="-"),
        Binding("t", "add_thread", "Add thread"),
        Binding("r", "reset", "Reset"),
        Binding("s", "screenshot", "Screenshot"),
        Binding("space", "play", "Play/pause"),
        Binding("left", "step(-1)", "Back", priority=True),
        Binding("right", "step(1)", "Forward", priority=True),
        Binding("home", "seek(0)", "Start", priority=True),
        Binding("end", "seek(1)", "End", priority=True),
    ]

    def __init__(self, feed: Feed, close_when_done: bool = True) -> None:
        super().__init__()
        self.feed = feed
        self.close_when_done = close_when_done
        self.set_reactive(RunScreen.selected, next(iter(feed.board.groups)))
        self.stops = 0
        self.screenshots: list[str] = []
        self.log_lines: list[str] = []

    # -- layout
    def compose(self) -> ComposeResult:
        yield Static(id="top")
        yield DataTable(id="groups", cursor_type="row", zebra_stripes=True)
        yield DataTable(id="nodes", cursor_type="none", zebra_stripes=True)
        with Horizontal(id="detail"):
            with Vertical(id="left"):
                yield Static(id="percentiles")
                yield Static(id="spark-label")
                yield Static(id="spark")
            yield NinesPlot(id="plot")
        yield Static(id="partitions")
        yield Static(id="cpu")
        yield RichLog(id="log", max_lines=2000, wrap=True)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#groups", DataTable)
        for key, label in COLUMNS:
            table.add_column(label, key=key)
        for name in self.feed.board.groups:
            table.add_row(*([""] * len(COLUMNS)), key=name)
        nodes = self.query_one("#nodes", DataTable)
        nodes.add_column("node", key="node")
        for name in self.feed.board.groups:
            nodes.add_column(f"{name} now/s", key=name)
        nodes.add_column("errors", key="errors")
        nodes.add_column("cpu", key="cpu")
        table.focus()
        self.refresh_view()
        self.set_interval(REFRESH_S, self.refresh_view)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in LIVE_ONLY:
            return self.feed.live
        if action in REPLAY_ONLY:
            return not self.feed.live
        return True

    # -- drawing
    def log_line(self, line: str) -> None:
        self.log_lines.append(line)
        self.query_one("#log", RichLog).write(Text(line))

    def refresh_view(self) -> None:
        try:
            top = self.query_one("#top", Static)
        except NoMatches:
            return  # the interval timer's tick after the app began to close: no widgets
        feed = self.feed
        for line in feed.poll():
            self.log_line(line)
        status = feed.status()
        board = feed.board
        run = feed.run
        phase = "finished" if status.finished else PHASES.get(status.phase, status.phase)
        if status.paused:
            phase += ", producers paused"
        remaining = "" if status.remaining is None else \
            f"  remaining {_clock(status.remaining)}"
        mode = status.position or "live"
        top.update(Text.assemble(
            (f"{run.name}", "bold"), f"  {describe_target(run)}  ",
            (f"[{phase}]", "bold yellow" if status.paused else "bold"),
            f"\nelapsed {_clock(status.elapsed)}{remaining}  ({mode}; "
            f"intervals of {run.interval:g} s; {feed.run_dir})"))
        table = self.query_one("#groups", DataTable)
        for name, g in board.groups.items():
            c = g.counters
            cpu = Text(f"{g.cpu:.0f}%", style="bold red" if g.cpu > CLIENT_CPU_LIMIT else "")
            # With --clients, the clients connected: what a run of many clients watches.
            up = f"{g.clients_up:,}/{g.clients:,} clients" if g.clients else \
                f"{g.threads_up}/{g.threads}"
            if c.get("connect_failed"):
                up += f", {c['connect_failed']:,} failed"
            values = (name, g.module, up, f"{g.rate_now:,.1f}",
                      f"{g.rate_avg:,.1f}", f"{g.total:,}", str(c["errors"]), str(c["lost"]),
                      str(c["duplicated"]), str(c["reordered"]), cpu,
                      "-" if g.us_per_message is None else f"{g.us_per_message:.1f}")
            for (key, _), value in zip(COLUMNS, values, strict=True):
                table.update_cell(name, key, value, update_width=True)
        self._draw_nodes()
        self._draw_detail(board.groups[self.selected])
        cpu_text = Text("client CPU ")
        cpu_text.append(f"{board.cpu:.0f}%", style="bold red" if board.cpu > CLIENT_CPU_LIMIT
                        else "bold")
        cpu_text.append(" of a core (busiest process)")
        if board.broker_cpu is not None:
            cpu_text.append(f"   broker CPU {board.broker_cpu:.0f}%")
        self.query_one("#cpu", Static).update(cpu_text)
        if status.finished and self.close_when_done and feed.live:
            self.leave()

    def _draw_nodes(self) -> None:
        """A distributed run's nodes, a row each, as they report."""
        nodes = self.feed.board.nodes
        if not nodes:
            return
        table = self.query_one("#nodes", DataTable)
        table.display = True
        for name, node in nodes.items():
            cpu = Text(f"{node.cpu:.0f}%", style="bold red" if node.cpu > CLIENT_CPU_LIMIT
                       else "")
            values = {"node": name, **{group: f"{node.rates.get(group, 0.0):,.1f}"
                                       for group in self.feed.board.groups},
                      "errors": str(node.errors), "cpu": cpu}
            if name not in table.rows:
                table.add_row(*values.values(), key=name)
                continue
            for key, value in values.items():
                table.update_cell(name, key, value, update_width=True)

    def _draw_detail(self, g: GroupBoard) -> None:
        table = Table(box=None, padding=(0, 1), title=f"{g.name}: {g.label(g.headline)} "
                      f"({g.destination or '-'})", title_justify="left")
        table.add_column("")
        for column in ("p50", "p90", "p99", "p99.9", "max"):
            table.add_column(column, justify="right")
        # the send delay of paced producers; publisher confirms (AMQP) where turned on
        metrics = [g.headline] + [m for m in ("delay", "confirm") if m in g.metrics]
        for metric in metrics:
            for cumulative in (False, True):
                p = g.percentiles(metric, cumulative)
                label = f"{g.label(metric)} {'cumul.' if cumulative else 'last'}"
                if metric == "delay":
                    label = f"send delay {'cumul.' if cumulative else 'last'}"
                table.add_row(label, *[format_us(p[k]) if p else "-"
                                       for k in ("p50", "p90", "p99", "p99.9", "max")])
        self.query_one("#percentiles", Static).update(table)
        partitions = self.query_one("#partitions", Static)
        partitions.display = bool(g.partitions)
        if g.partitions:  # Kafka's per-partition figures; the broker's waiting counts
            partitions.update(Text("at the broker (per partition: msg/s at the client's last "
                                   "report, lag; per destination: messages waiting):\n"
                                   + partition_text(g.partitions)))
        rates = list(g.rates)
        self.query_one("#spark-label", Static).update(
            f"rate per interval from 0/s, last {len(rates)}: max {max(rates, default=0):,.0f}/s")
        spark = self.query_one("#spark", Static)
        spark.update(Text("\n".join(bars(rates, max(spark.size.width, 1), 3)),
                          style="dodger_blue2"))
        histogram = g.cumulative.get(g.headline)
        count = histogram.get_total_count() if histogram is not None else 0
        self.query_one("#plot", NinesPlot).show(
            distribution(histogram) if histogram is not None and count else [],
            f"{g.label(g.headline)} by percentile, cumulative ({count:,} samples)")

    def leave(self) -> None:
        self.feed.close()
        if len(self.app.screen_stack) > 1:  # opened over a list of runs (RunsApp)
            self.dismiss()
        else:
            self.app.exit()

    # -- keys
    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "groups" and event.row_key.value is not None:
            self.selected = event.row_key.value

    def watch_selected(self, selected: str) -> None:
        self._draw_detail(self.feed.board.groups[selected])

    def action_stop(self) -> None:
        feed = self.feed
        if not feed.live or feed.status().finished:
            self.leave()
            return
        self.stops += 1
        feed.stop()
        self.log_line("stopping: producers stop, consumers drain, files are completed"
                      if self.stops == 1 else "stopping at once")

    def action_pause(self) -> None:
        self.log_line(self.feed.toggle_pause())

    def action_rate(self, factor: float) -> None:
        self.log_line(self.feed.change_rate(self.selected, factor))

    def action_add_thread(self) -> None:
        self.log_line(self.feed.add_thread(self.selected))

    def action_reset(self) -> None:
        # What had arrived before the key was pressed is folded in first, and reset with the
        # rest: only intervals that close afterwards count again.
        self.refresh_view()
        self.feed.board.reset()
        self.log_line("cumulative figures reset on screen (the files and the summary keep "
                      "everything)")
        self.refresh_view()

    def action_screenshot(self) -> None:
        name = f"screen-{time.strftime('%H%M%S')}-{len(self.screenshots) + 1}.svg"
        path = self.app.save_screenshot(name, str(self.feed.run_dir))
        self.screenshots.append(path)
        self.log_line(f"screenshot: {path}")

    def action_play(self) -> None:
        self.feed.toggle_play()

    def action_step(self, steps: int) -> None:
        self.feed.step(steps)
        self.refresh_view()

    def action_seek(self, where: int) -> None:
        self.feed.seek(where)
        self.refresh_view()


class RunApp(App[None]):
    """The run screen as an app of its own (harness run, harness view)."""

    TITLE = "harness"
    CSS_PATH = "app.tcss"

    def __init__(self, feed: Feed, close_when_done: bool = True) -> None:
        super().__init__()
        self.run_screen = RunScreen(feed, close_when_done)

    def get_default_screen(self) -> Screen[None]:
        return self.run_screen

    # what the tests and the callers read of the screen
    @property
    def feed(self) -> Feed:
        return self.run_screen.feed

    @property
    def selected(self) -> str:
        return self.run_screen.selected

    @property
    def log_lines(self) -> list[str]:
        return self.run_screen.log_lines

    @property
    def screenshots(self) -> list[str]:
        return self.run_screen.screenshots

    def refresh_view(self) -> None:
        self.run_screen.refresh_view()
