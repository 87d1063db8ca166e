"""The roles as facts (the table is harness.modules.interface.roles, beside the transport interface)
and the metrics each records. The threads that play them are in harness.engine.roles;
everything that plans, validates or reports a run reads the table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.modules.interface.roles import ROLES, Role

if TYPE_CHECKING:
    from harness.spec.group import GroupSpec


__all__ = ["ROLES", "Role", "metrics_for"]


def metrics_for(group: GroupSpec) -> list[str]:
    """The latency metrics a group records, in the order every output lists them."""
    role = ROLES[group.role]
    names = ["latency"] if role.consumes else []
    names.append("service")
    if role.produces and group.per_thread_rate:
        names.append("delay")
    if group.confirmed:
        # From the send to the broker's confirmation, as RabbitMQ PerfTest reports it.
        names.append("confirm")
    if group.clients:
        # From a client's connect to the broker's answer (MQTT's CONNACK), and a consumer's
        # subscribe to its answer (SUBACK).
        names.append("connect")
        if role.consumes:
            names.append("subscribe")
    if role.consumes and group.consumer_latency:
        # A slow consumer's processing time for each message (--consumer-latency).
        names.append("process")
    return names
