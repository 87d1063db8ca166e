"""A scenario profile run: one run and its report (mix against target, interactions, queue
trends, PASSED or FAILED and why), or a BASE search: runs at increasing BASE, then
bisecting, until a run fails; the highest passing BASE is the result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from harness.experiments.experiment import Execute, Experiment
from harness.experiments.profile import Point, Profile, with_value
from harness.experiments.scenarios.supplychain import report
from harness.experiments.search import Probe, capacity
from harness.rundir.reader import load as load_run
from harness.stats.slo import EXIT_SLO
from harness.units import format_us


def run_point(point: Point, execute: Execute, output: Path | None = None) -> dict[str, Any]:
    run = point.run if output is None else \
        type(point.run)(**{**point.run.__dict__, "output": str(output)})
    result = execute(run)
    made, plan = point.scenario
    outcome = report(made, plan, result.summary,
                     load_run(result.run_dir).replay(histograms=False).views())
    outcome["run_dir"] = str(result.run_dir)
    outcome["exit_code"] = result.exit_code
    (result.run_dir / "scenario.json").write_text(json.dumps(outcome, indent=1, default=str))
    return outcome


def show(console: Console, outcome: dict[str, Any]) -> None:
    mix = Table(title=f"Message mix, {outcome['topology']} topology, BASE {outcome['base']:g} "
                      "(delivered messages)")
    for column in ("", "achieved", "target", "difference"):
        mix.add_column(column, justify="right")
    labels = {"p2p": "point-to-point of all", "p2p_persistent": "persistent of P2P",
              "pubsub_persistent": "persistent of pub/sub"}
    for key, label in labels.items():
        achieved = outcome["mix"][key]
        target = outcome["targets"].get(key)
        mix.add_row(label, f"{achieved:.1%}", f"{target:.0%}" if target is not None else "-",
                    f"{(achieved - target) * 100:+.1f} pp" if target is not None else "-")
    console.print(mix)
    messages = Table(title="Per message type (delivery: send to receipt; interaction: start "
                           "to its last step)")
    for column in ("message", "interaction ends", "delivered", "rate/s", "delivery p90",
                   "delivery p99", "interaction p90"):
        messages.add_column(column, justify="left" if column == "message" else "right")
    for name, m in outcome["messages"].items():
        messages.add_row(name, str(m.get("interaction", "")), f"{m['received']:,}",
                         f"{m['rate']:,.1f}", format_us(m["delivery p90 us"]),
                         format_us(m["delivery p99 us"]),
                         format_us(m.get("interaction p90 us")) if "interaction" in m else "")
    console.print(messages)
    growing = [q for q, t in outcome["queues"].items() if not t["stable"]]
    console.print(f"queues: {len(outcome['queues']) - len(growing)} stable, {len(growing)} "
                  f"growing{': ' + ', '.join(growing) if growing else ''}", markup=False,
                  highlight=False)
    if outcome["valid"]:
        console.print("PASSED: all queues stable, every message type's p90 delivery time "
                      "within 5 s", style="bold green", markup=False)
    else:
        console.print("FAILED: " + "; ".join(outcome["reasons"]), style="bold red",
                      markup=False)


def run_profile(profile: Profile, execute: Execute, console: Console) -> int:
    point = profile.points[0]
    if profile.base_search is None:
        outcome = run_point(point, execute)
        show(console, outcome)
        # A run that went well but failed its validity checks exits as a missed threshold.
        code = outcome["exit_code"]
        return EXIT_SLO if code == 0 and not outcome["valid"] else code
    search = profile.base_search
    topology = point.scenario[0].topology
    experiment = Experiment(profile, execute, console)  # for its run tree and settling
    experiment.root.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []

    def probe(base: float) -> Probe:
        probed = with_value(point, "scenario.base", base, profile.path)
        if rows:
            experiment.settle(probed.run)
        outcome = run_point(probed, execute, experiment.root)
        show(console, outcome)
        rows.append({"BASE": base, "valid": outcome["valid"],
                     "reasons": "; ".join(outcome["reasons"]), "run": outcome["run_dir"]})
        console.print(f"probe {len(rows)}: BASE {base:g}: "
                      f"{'PASSED' if outcome['valid'] else 'FAILED'}", markup=False,
                      style="green" if outcome["valid"] else "red")
        return Probe(base, outcome["valid"], outcome["reasons"])

    outcome = capacity(search.get("start", 1.0), search.get("factor", 2.0),
                       search.get("max", 1024.0), search.get("precision", 0.1),
                       topology == "horizontal", probe)
    table = Table(title=f"BASE search, {topology} topology")
    for column in ("probe", "BASE", "result", "why"):
        table.add_column(column)
    for i, row in enumerate(rows, 1):
        table.add_row(str(i), f"{row['BASE']:g}", "PASSED" if row["valid"] else "FAILED",
                      row["reasons"])
    console.print(table)
    (experiment.root / "base-search.json").write_text(json.dumps(
        {"topology": topology, "answer": outcome.answer, "probes": rows}, indent=1))
    if outcome.answer is None:
        console.print(f"no passing BASE: the first probe ({search.get('start', 1.0):g}) "
                      "failed", style="bold red", markup=False)
    else:
        console.print(f"SPECjms2007-style {topology} result: BASE {outcome.answer:g} (the "
                      "highest passing BASE; on this harness and broker, not a SPEC result)",
                      style="bold", markup=False)
    return 0
