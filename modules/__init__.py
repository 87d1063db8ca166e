"""Transport modules. A module name reads `<transport>.<Role>`, like `loopback.Sender`."""

from __future__ import annotations

import importlib

from modules.base import Transport

# Imported lazily so that a missing client library only matters when its transport is used.
TRANSPORTS: dict[str, str] = {
    "loopback": "modules.loopback:LoopbackTransport",
    "stomp": "modules.stomp:StompTransport",
    "mqtt": "modules.mqtt:MqttTransport",
}


def transport_class(name: str) -> type[Transport]:
    path = TRANSPORTS[name]
    module_name, _, class_name = path.partition(":")
    return getattr(importlib.import_module(module_name), class_name)
