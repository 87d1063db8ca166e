"""The supermarket supply chain after SPECjms2007: headquarters (HQ), distribution centres
(DC), supermarkets (SM) and suppliers (SP) exchanging the messages of its seven
interactions, through the destinations of its Table I.

The scenario becomes ordinary worker groups: drivers (Sender / Publisher groups, one thread
per location) start interactions at their rates, and one event-handler group per
destination (Handler / TopicHandler, one thread per location, each on its own numbered
destination) carries out the next steps. Routing fields (sm, dc, sp, call) travel in the
correlation id. A message's latency is measured from its interaction's start, its service
time from its own send: at the last step of an interaction the latency is the whole
interaction's.

Delivered messages are what the mix counts: a point-to-point message once, a publication
once for each subscriber that receives it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from harness.plan.group import GroupSpec
from harness.plan.options import CREDENTIALS, in_scope
from harness.plan.run import RunSpec
from harness.stats.views import IntervalView

# Message size classes (bytes) and the distributions of Table II's ranges, as (size, weight).
SIZE_CLASSES = {"small": 1024, "medium": 4096, "large": 16384, "very-large": 65536}
RANGES = {
    "small": (("small", 1.0),),
    "small-medium": (("small", 0.7), ("medium", 0.3)),
    "small-large": (("small", 0.6), ("medium", 0.3), ("large", 0.1)),
    "small-very-large": (("small", 0.5), ("medium", 0.3), ("large", 0.15),
                         ("very-large", 0.05)),
}


@dataclass(frozen=True)
class MessageType:
    name: str
    interaction: int
    sizes: str  # a key of RANGES
    persistent: bool
    transacted: bool


# Table II.
TYPES = {t.name: t for t in (
    MessageType("order", 1, "small-medium", True, True),
    MessageType("orderConf", 1, "small-medium", True, True),
    MessageType("shipDep", 1, "small-large", True, True),
    MessageType("shipInfo", 1, "small-large", True, True),
    MessageType("shipConf", 1, "small-medium", True, True),
    MessageType("statInfoOrderDC", 1, "small", False, False),
    MessageType("callForOffers", 2, "small-medium", True, True),
    MessageType("offer", 2, "small-medium", True, True),
    MessageType("pOrder", 2, "small-medium", True, True),
    MessageType("pOrderConf", 2, "small-medium", True, True),
    MessageType("pShipInfo", 2, "small-large", True, True),
    MessageType("pShipConf", 2, "small-medium", True, True),
    MessageType("invoice", 2, "small-medium", True, True),
    MessageType("statInfoShipDC", 2, "small", False, False),
    MessageType("priceUpdate", 3, "small", True, True),
    MessageType("inventoryInfo", 4, "small-large", True, True),
    MessageType("statInfoSM", 5, "small-very-large", False, False),
    MessageType("productAnnouncement", 6, "small-large", False, False),
    MessageType("creditCardHL", 7, "small-large", False, False),
)}

# Inter-company messages: XML documents (Table II).
SUPPLIER = {"callForOffers", "offer", "pOrder", "pOrderConf", "pShipInfo", "pShipConf",
            "invoice"}

# The business model's rates (interactions started a second, per starting location) at
# BASE 1, chosen so that the delivered mix meets the SPECjms2007 paper's targets (see mix_targets).
RATES = {"order": 1.0, "inventory": 1.0, "sales-stats": 6.2, "call-for-offers": 1.0,
         "price-update": 3.3, "announcement": 5.55, "hot-list": 5.55}
HORIZONTAL = {"dc": 1, "sm": 5, "sp": 4, "families": 2}  # per BASE
VERTICAL = {"dc": 2, "sm": 10, "sp": 8, "families": 4}  # fixed; BASE scales the rates
# Vertical: P2P is about 80% of the traffic; pub/sub persistent stays a quarter of pub/sub.
VERTICAL_HQ_SHARE = 0.2
TARGETS = {"horizontal": {"p2p": 0.5, "p2p_persistent": 0.5, "pubsub_persistent": 0.25},
           "vertical": {"p2p": 0.8}}
VALID_P90_S = 5.0


@dataclass
class Scenario:
    topology: str  # horizontal, vertical, freeform
    base: float
    locations: dict[str, int]
    rates: dict[str, float]  # per starting location
    interactions: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7)
    sizes: dict[str, int] = field(default_factory=lambda: dict(SIZE_CLASSES))


def scenario(topology: str, base: float, locations: dict[str, int] | None = None,
             rates: dict[str, float] | None = None,
             interactions: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7),
             sizes: dict[str, int] | None = None) -> Scenario:
    """The locations and rates of a topology at a BASE."""
    if topology == "horizontal":
        where = {k: max(round(v * base), 1) for k, v in HORIZONTAL.items()}
        how = dict(RATES)
    elif topology == "vertical":
        where = dict(VERTICAL)
        how = {k: v * base for k, v in vertical_rates().items()}
    elif topology == "freeform":
        where = {**HORIZONTAL, **(locations or {})}
        how = dict(RATES)
    else:
        raise ValueError(f"topology is horizontal, vertical or freeform, got {topology!r}")
    how.update(rates or {})
    return Scenario(topology, base, where, how, tuple(interactions),
                    {**SIZE_CLASSES, **(sizes or {})})


def vertical_rates() -> dict[str, float]:
    """Per-location rates at vertical BASE 1: the horizontal ones for the SMs and DCs, and HQ
    rates lowered so that publications are a fifth of the delivered messages."""
    v = VERTICAL
    rates = dict(RATES)
    p2p = expected_mix(Scenario("vertical", 1, v, rates))["p2p_messages"]
    pubsub = p2p * VERTICAL_HQ_SHARE / (1 - VERTICAL_HQ_SHARE)
    per_family = v["sp"] / v["families"]
    calls = v["dc"] * rates["call-for-offers"] * per_family
    # Keep pub/sub persistent (price updates and calls for offers) a quarter of pub/sub.
    rates["price-update"] = max(pubsub * 0.25 - calls, 0.0) / v["sm"]
    rates["announcement"] = rates["hot-list"] = pubsub * 0.75 / 2 / v["sm"]
    return rates


def expected_mix(s: Scenario) -> dict[str, float]:
    """Delivered messages a second, by kind, that the rates should give."""
    sm, dc, sp, families = (s.locations[k] for k in ("sm", "dc", "sp", "families"))
    r = s.rates
    per_family = sp / families
    on = set(s.interactions)
    p2p_p = (5 * sm * r["order"] if 1 in on else 0) + \
        ((per_family + 5) * dc * r["call-for-offers"] if 2 in on else 0) + \
        (sm * r["inventory"] if 4 in on else 0)
    p2p_n = (sm * r["order"] if 1 in on else 0) + (dc * r["call-for-offers"] if 2 in on else 0) \
        + (sm * r["sales-stats"] if 5 in on else 0)
    pub_p = (per_family * dc * r["call-for-offers"] if 2 in on else 0) + \
        (sm * r["price-update"] if 3 in on else 0)
    pub_n = (sm * r["announcement"] if 6 in on else 0) + (sm * r["hot-list"] if 7 in on else 0)
    return {"p2p_messages": p2p_p + p2p_n, "p2p_persistent": p2p_p, "pubsub_persistent": pub_p,
            "pubsub_messages": pub_p + pub_n}


# -- the worker groups -----------------------------------------------------------------------
def _action(to: str, kind: str, message: str, carry: tuple[str, ...], sizes: dict[str, int],
            **extra: Any) -> dict[str, Any]:
    t = TYPES[message]
    return {"to": to, "kind": kind, "type": message, "persistent": t.persistent,
            "sizes": [(sizes[c], w) for c, w in RANGES[t.sizes]], "carry": list(carry),
            **extra}


@dataclass
class Step:
    """One group of the scenario, with what the report needs to know about it."""
    spec: GroupSpec
    message: str  # the message type it sends (drivers) or receives (handlers)
    kind: str  # queue or topic
    feeders: list[tuple[str, str, float]] = field(default_factory=list)
    # (group, "sent" or "received", messages this group gets for each of those)
    ends: int | None = None  # the interaction this group completes, if it does


def steps(s: Scenario, persistent_ok: bool = True, transactions_ok: bool = True,
          durable_ok: bool = True) -> list[Step]:
    """The scenario's groups. On a transport without persistence (the loopback broker), the
    persistent flags are dropped; the mix still counts each message by its type."""
    sm, dc, sp, families = (s.locations[k] for k in ("sm", "dc", "sp", "families"))
    z, r, on = s.sizes, s.rates, set(s.interactions)
    per_family = sp / families
    out: list[Step] = []

    def add(name: str, module: str, destination: str, threads: int, message: str, kind: str,
            rate: float = 0.0, correlation: str | None = None, plan: list[dict[str, Any]]
            | None = None, feeders: list[tuple[str, str, float]] | None = None,
            ends: int | None = None, durable: bool = False) -> None:
        t = TYPES[message]
        role = module
        spec = GroupSpec(
            module=role, destination=destination, name=name, threads=threads,
            thread_rate=rate, correlation_id=correlation,
            persistent=t.persistent and persistent_ok and role in ("Sender", "Publisher"),
            transacted=t.transacted and transactions_ok, plan=plan,
            size=max(z[c] for c, _ in RANGES[t.sizes]),
            body_type="xml" if message in SUPPLIER else "text",
            size_mix=[(z[c], w) for c, w in RANGES[t.sizes]],
            durable_name=f"{name}-" if durable and durable_ok else None,
            client_id=f"{name}-" if durable and durable_ok else None)
        if plan is not None and persistent_ok:
            for action in plan:
                action["persistent"] = TYPES[action["type"]].persistent
        elif plan is not None:
            for action in plan:
                action["persistent"] = False
        out.append(Step(spec, message, kind, feeders or [], ends))

    dc_of_sm = f"{{{{ (n - 1) % {dc} + 1 }}}}"
    family_of_sp = f"{{{{ (n - 1) % {families} + 1 }}}}"
    if 1 in on:
        add("sm-order", "Sender", f"DC_OrderQ{dc_of_sm}", sm, "order", "queue",
            r["order"], f"sm={{{{n}}}},dc={dc_of_sm}")
        add("DC_OrderEH", "Handler", "DC_OrderQ{{n}}", dc, "order", "queue", plan=[
            _action("SM_OrderConfQ{sm}", "queue", "orderConf", ("sm", "dc"), z),
            _action("DC_ShipDepQ{dc}", "queue", "shipDep", ("sm", "dc"), z),
            _action("HQ_OrderDCStatsQ", "queue", "statInfoOrderDC", ("sm", "dc"), z)],
            feeders=[("sm-order", "sent", 1)])
        add("SM_OrderConfEH", "Handler", "SM_OrderConfQ{{n}}", sm, "orderConf", "queue",
            plan=[], feeders=[("DC_OrderEH", "received", 1)])
        add("HQ_OrderDCStatsEH", "Handler", "HQ_OrderDCStatsQ", 1, "statInfoOrderDC", "queue",
            plan=[], feeders=[("DC_OrderEH", "received", 1)])
        add("DC_ShipDepEH", "Handler", "DC_ShipDepQ{{n}}", dc, "shipDep", "queue", plan=[
            _action("SM_ShipArrQ{sm}", "queue", "shipInfo", ("sm", "dc"), z)],
            feeders=[("DC_OrderEH", "received", 1)])
        add("SM_ShipArrEH", "Handler", "SM_ShipArrQ{{n}}", sm, "shipInfo", "queue", plan=[
            _action("DC_ShipConfQ{dc}", "queue", "shipConf", ("sm", "dc"), z)],
            feeders=[("DC_ShipDepEH", "received", 1)])
        add("DC_ShipConfEH", "Handler", "DC_ShipConfQ{{n}}", dc, "shipConf", "queue",
            plan=[], feeders=[("SM_ShipArrEH", "received", 1)], ends=1)
    if 2 in on:
        add("dc-call", "Publisher", f"HQ_ProductFamily{{{{ (n - 1) % {families} + 1 }}}}T", dc,
            "callForOffers", "topic", r["call-for-offers"], "dc={{n}}")
        add("SP_CallForOffersEH", "TopicHandler", f"HQ_ProductFamily{family_of_sp}T", sp,
            "callForOffers", "topic", plan=[
                _action("DC_IncomingOffersQ{dc}", "queue", "offer", ("dc", "sp", "call"), z,
                        set={"sp": "{self}", "call": "{msg}"})],
            feeders=[("dc-call", "sent", per_family)], durable=True)
        add("DC_IncomingOffersEH", "Handler", "DC_IncomingOffersQ{{n}}", dc, "offer", "queue",
            plan=[_action("SP_POrderQ{sp}", "queue", "pOrder", ("dc", "sp"), z,
                          once_per="call")],
            feeders=[("SP_CallForOffersEH", "received", 1)])
        add("SP_POrderEH", "Handler", "SP_POrderQ{{n}}", sp, "pOrder", "queue", plan=[
            _action("DC_POrderConfQ{dc}", "queue", "pOrderConf", ("dc", "sp"), z),
            _action("HQ_InvoiceQ", "queue", "invoice", ("dc", "sp"), z),
            _action("DC_PShipArrQ{dc}", "queue", "pShipInfo", ("dc", "sp"), z)],
            feeders=[("DC_IncomingOffersEH", "received", 1 / per_family)])
        add("DC_POrderConfEH", "Handler", "DC_POrderConfQ{{n}}", dc, "pOrderConf", "queue",
            plan=[], feeders=[("SP_POrderEH", "received", 1)])
        add("HQ_InvoiceEH", "Handler", "HQ_InvoiceQ", 1, "invoice", "queue", plan=[],
            feeders=[("SP_POrderEH", "received", 1)])
        add("DC_PShipArrEH", "Handler", "DC_PShipArrQ{{n}}", dc, "pShipInfo", "queue", plan=[
            _action("SP_PShipConfQ{sp}", "queue", "pShipConf", ("dc", "sp"), z),
            _action("HQ_ShipDCStatsQ", "queue", "statInfoShipDC", ("dc", "sp"), z)],
            feeders=[("SP_POrderEH", "received", 1)])
        add("SP_PShipConfEH", "Handler", "SP_PShipConfQ{{n}}", sp, "pShipConf", "queue",
            plan=[], feeders=[("DC_PShipArrEH", "received", 1)], ends=2)
        add("HQ_ShipDCStatsEH", "Handler", "HQ_ShipDCStatsQ", 1, "statInfoShipDC", "queue",
            plan=[], feeders=[("DC_PShipArrEH", "received", 1)])
    for number, driver, destination, message, rate, durable in (
            (3, "hq-price", "HQ_PriceUpdateT", "priceUpdate", "price-update", True),
            (6, "hq-announce", "HQ_ProductAnnouncementT", "productAnnouncement",
             "announcement", False),
            (7, "hq-hotlist", "HQ_CreditCardHLT", "creditCardHL", "hot-list", False)):
        if number in on:
            add(driver, "Publisher", destination, 1, message, "topic", r[rate])
            handler = destination.replace("HQ_", "SM_").removesuffix("T") + "EH"
            add(handler, "TopicHandler", destination, sm, message, "topic", plan=[],
                feeders=[(driver, "sent", sm)], ends=number, durable=durable)
    if 4 in on:
        add("sm-inventory", "Sender", "SM_InvMovementQ{{n}}", sm, "inventoryInfo", "queue",
            r["inventory"])
        add("SM_InvMovementEH", "Handler", "SM_InvMovementQ{{n}}", sm, "inventoryInfo", "queue",
            plan=[], feeders=[("sm-inventory", "sent", 1)], ends=4)
    if 5 in on:
        add("sm-stats", "Sender", "HQ_SMStatsQ", sm, "statInfoSM", "queue", r["sales-stats"])
        add("HQ_SMStatsEH", "Handler", "HQ_SMStatsQ", 1, "statInfoSM", "queue", plan=[],
            feeders=[("sm-stats", "sent", 1)], ends=5)
    return out


def run_spec(s: Scenario, base: RunSpec, template: GroupSpec) -> tuple[RunSpec, list[Step]]:
    """The RunSpec of a scenario: its groups on the template group's transport and
    connection."""
    from harness.modules import transport_class
    from harness.modules.interface.base import Capability
    caps = transport_class(template.transport).capabilities_for(
        template.settings(base.node, 0, 0))
    plan = steps(s, persistent_ok=bool(caps & Capability.PERSISTENT),
                 transactions_ok=bool(caps & Capability.TRANSACTIONS),
                 durable_ok=bool(caps & Capability.DURABLE))
    # Every scenario group connects as the template group does, with its transport's options.
    connection = {o.name: getattr(template, o.name) for o in in_scope("connection")
                  if not o.transports and o.key not in CREDENTIALS}
    for step in plan:
        step.spec = replace(step.spec, module=f"{template.transport}.{step.spec.module}",
                            options=dict(template.options), **connection)
    return replace(base, groups=[step.spec for step in plan]), plan


# -- the report ------------------------------------------------------------------------------
def report(s: Scenario, plan: list[Step], summary: dict[str, Any],
           views: Iterable[IntervalView]) -> dict[str, Any]:
    """Mix achieved against target, per-interaction and per-message figures, queue trends,
    and validity (all queues stable, every message type's p90 delivery time <= 5 s)."""
    from harness.experiments.results import GROWING_SHARE

    groups = summary["groups"]
    delivered = {"p2p": 0, "p2p_persistent": 0, "pubsub": 0, "pubsub_persistent": 0}
    messages = {}
    for step in plan:
        if step.spec.role not in ("Handler", "TopicHandler"):
            continue
        g = groups[step.spec.name]
        kind = "p2p" if step.kind == "queue" else "pubsub"
        delivered[kind] += g["received"]
        if TYPES[step.message].persistent:
            delivered[f"{kind}_persistent"] += g["received"]
        service = g.get("service") or {}
        messages[step.message] = {"group": step.spec.name, "received": g["received"],
                                  "rate": g["rate"], "delivery p90 us": service.get("p90"),
                                  "delivery p99 us": service.get("p99")}
        if step.ends:
            latency = g.get("latency") or {}
            messages[step.message]["interaction"] = step.ends
            messages[step.message]["interaction p90 us"] = latency.get("p90")
    total = delivered["p2p"] + delivered["pubsub"]
    mix = {"p2p": delivered["p2p"] / total if total else 0.0,
           "p2p_persistent": delivered["p2p_persistent"] / delivered["p2p"]
           if delivered["p2p"] else 0.0,
           "pubsub_persistent": delivered["pubsub_persistent"] / delivered["pubsub"]
           if delivered["pubsub"] else 0.0}
    targets = TARGETS.get(s.topology, {})
    queues = _queue_trends(plan, views)
    reasons = []
    for name, trend in queues.items():
        if not trend["stable"]:
            reasons.append(f"{name} is growing ({trend['slope']:+.1f} msgs/s)")
    for message, m in messages.items():
        p90 = m["delivery p90 us"]
        if p90 is not None and p90 > VALID_P90_S * 1e6:
            reasons.append(f"{message}: p90 delivery time {p90 / 1e6:.2f} s > "
                           f"{VALID_P90_S:g} s")
        if m["received"] == 0:
            reasons.append(f"{message}: nothing delivered")
    return {"topology": s.topology, "base": s.base, "locations": s.locations,
            "rates": s.rates, "delivered": delivered, "mix": mix, "targets": targets,
            "messages": messages, "queues": queues, "valid": not reasons, "reasons": reasons,
            "growing_share": GROWING_SHARE}


def _queue_trends(plan: list[Step], views: Iterable[IntervalView]) -> dict[str, dict[str, Any]]:
    """For each handler group: what its feeders delivered to it, minus what it received,
    interval by interval over the measured phase, and the slope (aggregated over its
    locations' destinations). One pass over the views, which may be read as they come."""
    from harness.experiments.results import GROWING_SHARE, slope

    steps = [step for step in plan if step.feeders]
    backlog = [0.0] * len(steps)
    received = [0] * len(steps)
    points: list[list[tuple[float, float]]] = [[] for _ in steps]
    seconds = 0.0
    for view in views:
        measured = view.phase == "measure"
        seconds += view.length if measured else 0.0
        for k, step in enumerate(steps):
            for feeder, counter, factor in step.feeders:
                if feeder in view.groups:
                    backlog[k] += view.groups[feeder].counters[counter] * factor
            if step.spec.name in view.groups:
                got = view.groups[step.spec.name].counters["received"]
                backlog[k] -= got
                if measured:
                    received[k] += got
            if measured:
                points[k].append((view.start + view.length, backlog[k]))
    out = {}
    for k, step in enumerate(steps):
        trend = slope(points[k])
        limit = max(GROWING_SHARE * received[k] / (seconds or 1.0), 1.0)
        # DC_OrderQ<n>: one destination per location, aggregated
        name = re.sub(r"\{\{.*?\}\}", "<n>", step.spec.destination or step.spec.name)
        out[name] = {
            "handler": step.spec.name, "slope": trend, "backlog": backlog[k],
            "stable": trend <= limit}
    return out
