"""Runs the harness's command line as on a machine where no broker client library is
installed: `python tests/without_clients.py ARGS...` is `harness ARGS...` with every
transport's client (and its C parts) refusing to import, as a missing package does."""

from __future__ import annotations

import importlib.abc
import sys

CLIENTS = ("paho", "stomp", "pika", "proton", "nats", "redis", "hiredis", "urllib3",
           "confluent_kafka", "cproton")


class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: object, target: object = None) -> None:
        if name.split(".")[0] in CLIENTS:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


if __name__ == "__main__":
    sys.meta_path.insert(0, Missing())
    from harness.cli import main

    sys.argv = ["harness", *sys.argv[1:]]
    main()
