"""The runs of a directory tree on a screen (`harness runs --ui`, the page `harness serve`
opens): newest first with their figures, read again every few seconds; Enter opens one on
the run screen, followed while it runs, replayed once it has ended, and q on it comes back
here."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Footer, Static

from harness.errors import BadInput
from harness.rundir.index import Filters, RunEntry, index
from harness.units import format_us

REREAD_S = 3.0
COLUMNS = ("start", "name", "modules", "status", "rate/s", "p99", "lost", "slo", "path")


def cells(entry: RunEntry, root: Path) -> tuple[str, ...]:
    row = entry.row()
    try:
        where = str(Path(entry.path).relative_to(root))
    except ValueError:
        where = entry.path
    slo = "-" if entry.slo is None else ("met" if entry.slo else "missed")
    return (row["start"], entry.name, ", ".join(entry.modules), entry.status,
            "-" if entry.rate is None else f"{entry.rate:,.1f}",
            "-" if entry.p99_us is None else format_us(entry.p99_us),
            "-" if entry.lost is None else f"{entry.lost:,}", slo, where)


class RunsApp(App[None]):
    TITLE = "harness"
    CSS_PATH = "app.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("enter", "open", "Open the run", show=True),
    ]

    def __init__(self, root: Path, filters: Filters, last: int | None) -> None:
        super().__init__()
        self.root, self.filters, self.last = root, filters, last
        self.entries: dict[str, RunEntry] = {}

    def compose(self) -> ComposeResult:
        yield Static(id="runs-top")
        yield DataTable(id="runs", cursor_type="row", zebra_stripes=True)
        yield Static(id="runs-note")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#runs", DataTable)
        for column in COLUMNS:
            table.add_column(column, key=column)
        table.focus()
        self.reread()
        self.set_interval(REREAD_S, self.reread)

    @work(thread=True, exclusive=True)
    def reread(self) -> None:
        """The tree read on a thread: thousands of runs never hold up the keys."""
        found = index(self.root, self.filters, self.last)
        self.call_from_thread(self.show, found)

    def show(self, found: list[RunEntry]) -> None:
        table = self.query_one("#runs", DataTable)
        chosen = self._chosen()
        self.entries = {e.path: e for e in found}
        table.clear()
        for entry in found:
            table.add_row(*cells(entry, self.root), key=entry.path)
        if chosen in self.entries:
            table.move_cursor(row=table.get_row_index(chosen))
        going = sum(e.status == "running" for e in found)
        self.query_one("#runs-top", Static).update(
            f"{len(found)} run(s) under {self.root}, newest first ({going} running); "
            f"read again every {REREAD_S:g} s. Enter opens one.")

    def _chosen(self) -> str | None:
        table = self.query_one("#runs", DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        return str(key.value) if key.value is not None else None

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()

    def action_open(self) -> None:
        from harness.rundir.reader import load
        from harness.screen.app import RunScreen
        from harness.screen.follow import open_feed

        chosen = self._chosen()
        if chosen is None:
            return
        entry = self.entries[chosen]
        run_dir = Path(entry.path)
        note = self.query_one("#runs-note", Static)
        try:
            recorded = load(run_dir)
            feed = open_feed(run_dir, recorded, follow=entry.status == "running")
        except BadInput as exc:
            note.update(f"{run_dir}: {exc}")
            return
        note.update("")
        self.push_screen(RunScreen(feed, close_when_done=False))
