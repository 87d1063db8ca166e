"""The ActiveMQ paper's processing-time model, fitted to a sweep's runs.

Per received message the server spends B = t_rcv + n_fltr * t_fltr + r * t_tx: a fixed
cost, a cost per installed filter, and a cost per copy it dispatches (r, the replication
grade). The received rate is 1 / B when the server is the bottleneck, so each run of a
sweep over r and n_fltr gives one equation, and least squares gives the three times.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.errors import BadInput
from harness.modules.interface.roles import ROLES
from harness.rundir.reader import run_from_manifest

# ActiveMQ 4.0 in the paper (seconds), fitted over r in {1, 2, 5, 10}.
PAPER = {"t_rcv": 4.9e-5, "t_fltr": 1.6e-7, "t_tx": 1.5e-5}


@dataclass
class Observation:
    run: str
    n_fltr: int  # filters installed: consumer threads with a selector
    r: float  # replication grade measured: dispatched / received
    received: float  # msgs/s the server received
    client_bound: bool = False  # a client process was above 75% CPU: the server may not be


@dataclass
class Fit:
    t_rcv: float
    t_fltr: float
    t_tx: float
    r_squared: float
    observations: list[Observation]

    def predicted_b(self, o: Observation) -> float:
        return self.t_rcv + o.n_fltr * self.t_fltr + o.r * self.t_tx


def observations(root: Path) -> list[Observation]:
    """One observation per run directory under root (a profile's run tree), or root itself."""
    if not root.is_dir():
        raise BadInput("RUN_DIR", f"{root} is not a directory")
    dirs = [root] if (root / "summary.json").is_file() else \
        sorted(d for d in root.iterdir() if (d / "summary.json").is_file())
    out = []
    for d in dirs:
        try:
            summary = json.loads((d / "summary.json").read_text())
            run = run_from_manifest(json.loads((d / "manifest.json").read_text()))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise BadInput("RUN_DIR", f"{d}: not a complete run ({exc})") from None
        throughput = summary["throughput"]
        filters = sum(g.threads * g.processes for g in run.groups
                      if ROLES[g.role].consumes and g.selector)
        if throughput["received_by_broker"] > 0 and throughput["replication_grade"]:
            out.append(Observation(d.name, filters, throughput["replication_grade"],
                                   throughput["received_by_broker"],
                                   bool(summary["client_cpu"]["bottleneck"])))
    return out


def fit(obs: list[Observation]) -> Fit:
    if len(obs) < 3:
        raise BadInput("RUN_DIR", f"{len(obs)} usable runs: the model has three parameters, "
                       "so it needs at least three runs")
    x = np.array([[1.0, o.n_fltr, o.r] for o in obs])
    if np.linalg.matrix_rank(x) < 3:
        raise BadInput("RUN_DIR", "the runs must vary both the replication grade and the "
                       "number of filters (as activemq-filters-model.yaml does)")
    b = np.array([1.0 / o.received for o in obs])
    (t_rcv, t_fltr, t_tx), *_ = np.linalg.lstsq(x, b, rcond=None)
    residual = b - x @ np.array([t_rcv, t_fltr, t_tx])
    total = float(((b - b.mean()) ** 2).sum())
    r_squared = 1.0 - float((residual ** 2).sum()) / total if total else 1.0
    return Fit(float(t_rcv), float(t_fltr), float(t_tx), r_squared, obs)
