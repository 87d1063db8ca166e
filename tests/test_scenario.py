"""The supply-chain scenario: mix against target, every interaction's chain, validity on
ActiveMQ, an overloaded run failing for the right reason, and the BASE search."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.stats.slo import EXIT_SLO
from tests.conftest import ROOT

PROFILES = ROOT / "profiles"
SHORT = ["--set", "run.run-length=8", "--set", "run.warmup=2", "--set", "run.interval=1",
         "--set", "run.drain=3"]


def scenario_run(harness: Any, tmp_path: Path, profile: str, *extra: str,
                 code: int = 0) -> dict[str, Any]:
    done = harness("run", str(PROFILES / profile), "--no-ui", *SHORT, "--set",
                   f"run.output={tmp_path / 'runs'}", *extra, output=False, timeout=300)
    assert done.code == code, done.stderr
    [outcome] = [json.loads(p.read_text()) for p in (tmp_path / "runs").rglob("scenario.json")]
    outcome["stdout"] = done.stdout
    return outcome


def received(outcome: dict[str, Any], message: str) -> int:
    return outcome["messages"][message]["received"]


def test_a_loopback_run_meets_the_horizontal_mix_and_completes_every_chain(
        harness: Any, tmp_path: Path) -> None:
    outcome = scenario_run(harness, tmp_path, "supplychain-horizontal.yaml",
                           "--set", "scenario.connection=local")
    for key, target in outcome["targets"].items():
        assert abs(outcome["mix"][key] - target) <= 0.05, (key, outcome["mix"])
    # Interaction 1: each order gets its confirmation, shipment and statistics message.
    orders = received(outcome, "order")
    assert orders > 0
    for message in ("orderConf", "shipDep", "statInfoOrderDC", "shipInfo", "shipConf"):
        assert received(outcome, message) == orders, message
    # Interaction 2: each call for offers reaches the family's 2 suppliers, each offer
    # arrives, one purchase order per call, and every later step once per order.
    calls = received(outcome, "callForOffers") // 2
    assert received(outcome, "offer") == 2 * calls and received(outcome, "pOrder") == calls
    for message in ("pOrderConf", "invoice", "pShipInfo", "pShipConf", "statInfoShipDC"):
        assert received(outcome, message) == calls, message
    # Interactions 3, 6 and 7 reach all 5 supermarkets.
    for message in ("priceUpdate", "productAnnouncement", "creditCardHL"):
        assert received(outcome, message) % 5 == 0 and received(outcome, message) > 0
    assert outcome["valid"] and "PASSED" in outcome["stdout"]
    # Sizes are drawn per message from the type's range: orders small to medium (1K / 4K,
    # 70 / 30), so their mean lies between the two and at neither.
    summary = json.loads((Path(outcome["run_dir"]) / "summary.json").read_text())
    order = summary["groups"]["sm-order"]
    assert 1024 < order["bytes"] / order["sent"] < 4096


def test_the_vertical_topology_is_mostly_point_to_point(harness: Any, tmp_path: Path) -> None:
    outcome = scenario_run(harness, tmp_path, "supplychain-vertical.yaml",
                           "--set", "scenario.connection=local")
    assert abs(outcome["mix"]["p2p"] - 0.8) <= 0.05
    assert outcome["locations"] == {"dc": 2, "sm": 10, "sp": 8, "families": 4}


def test_freeform_runs_only_the_interactions_asked_for(harness: Any, tmp_path: Path) -> None:
    outcome = scenario_run(harness, tmp_path, "supplychain-freeform.yaml",
                           "--set", "scenario.connection=local",
                           "--set", "scenario.locations.sm=6")
    assert set(outcome["messages"]) == {"productAnnouncement", "creditCardHL"}
    # 20 announcements a second to each of 6 supermarkets
    assert abs(outcome["messages"]["productAnnouncement"]["rate"] - 120) < 6


def test_an_overloaded_run_fails_because_its_queues_grow(harness: Any, tmp_path: Path) -> None:
    # A run that fails its validity checks exits as one that missed a threshold does.
    outcome = scenario_run(harness, tmp_path, "supplychain-horizontal.yaml",
                           "--set", "scenario.connection=local",
                           "--set", "run.loopback-capacity=60", code=EXIT_SLO)
    assert not outcome["valid"]
    assert any("growing" in reason for reason in outcome["reasons"]), outcome["reasons"]
    assert "FAILED:" in outcome["stdout"]


def test_a_short_horizontal_run_on_activemq_passes(harness: Any, brokers: Any,
                                                  tmp_path: Path) -> None:
    outcome = scenario_run(harness, tmp_path, "supplychain-horizontal.yaml")
    assert outcome["valid"], outcome["reasons"]
    orders = received(outcome, "order")
    assert orders > 0 and received(outcome, "shipConf") == orders
    for key, target in outcome["targets"].items():
        assert abs(outcome["mix"][key] - target) <= 0.05


def test_the_base_search_finds_the_highest_passing_base(harness: Any, tmp_path: Path) -> None:
    done = harness("run", str(PROFILES / "supplychain-horizontal.yaml"), "--no-ui",
                   "--set", "scenario.connection=local", "--set", "run.run-length=5",
                   "--set", "run.warmup=1", "--set", "run.interval=0.5", "--set",
                   "run.drain=2", "--set", "run.loopback-capacity=500",
                   "--set", "scenario.search.start=1", "--set", "scenario.search.max=16",
                   "--set", f"run.output={tmp_path / 'runs'}", output=False, timeout=600)
    assert done.code == 0, done.stderr
    [result] = [json.loads(p.read_text()) for p in (tmp_path / "runs").rglob(
        "base-search.json")]
    answer = result["answer"]
    assert answer is not None and answer >= 1
    passed = [p["BASE"] for p in result["probes"] if p["valid"]]
    failed = [p["BASE"] for p in result["probes"] if not p["valid"]]
    assert max(passed) == answer and failed and min(failed) == answer + 1
    assert f"result: BASE {answer:g}" in done.stdout
