"""`harness analyze`: analyses of finished runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.app import app, console

analyze_app = typer.Typer(help="Analyses of finished runs.", no_args_is_help=True)
app.add_typer(analyze_app, name="analyze")


@analyze_app.command("model")
def analyze_model(
    run_dir: Annotated[Path, typer.Argument(
        help="A profile's run tree (e.g. from profiles/activemq-filters-model.yaml) or "
        "run directories under one directory.", show_default=False)],
) -> None:
    """Fit the ActiveMQ paper's model B = t_rcv + n_fltr*t_fltr + r*t_tx to a sweep."""
    from rich.table import Table

    from harness.experiments.model import PAPER, fit, observations

    result = fit(observations(run_dir))
    table = Table(title=f"{len(result.observations)} runs: received rate against the model")
    for column in ("run", "filters", "r", "received/s", "B measured us", "B model us",
                   "error"):
        table.add_column(column, justify="left" if column == "run" else "right")
    for o in result.observations:
        measured, model = 1e6 / o.received, result.predicted_b(o) * 1e6
        table.add_row(o.run, str(o.n_fltr), f"{o.r:.2f}", f"{o.received:,.1f}",
                      f"{measured:.2f}", f"{model:.2f}", f"{(model - measured) / measured:+.1%}")
    console.print(table)
    params = Table(title=f"B = t_rcv + n_fltr * t_fltr + r * t_tx, least squares, "
                         f"R^2 = {result.r_squared:.4f}")
    for column in ("parameter", "fitted (s)", "paper, ActiveMQ 4.0 (s)"):
        params.add_column(column, justify="right")
    for name in ("t_rcv", "t_fltr", "t_tx"):
        params.add_row(name, f"{getattr(result, name):.3e}", f"{PAPER[name]:.1e}")
    console.print(params)
    bound = [o.run for o in result.observations if o.client_bound]
    if bound:
        console.print(f"warning: in {len(bound)} of {len(result.observations)} runs a client "
                      "process was above 75% CPU: there the clients, not the server, set the "
                      "rate, and the model (a saturated server) does not hold",
                      markup=False, style="bold red")
    if min(result.t_rcv, result.t_fltr, result.t_tx) < 0:
        console.print("warning: a fitted time is negative: the runs do not follow the model "
                      "(too few, too noisy, or not server-bound)", markup=False,
                      style="bold red")


