"""Exchanges, queues and bindings: declared as the run asks, built-in exchanges used as they
are."""

from __future__ import annotations

from harness.modules.amqp.options import AmqpOptions
from harness.modules.interface.message import Destination
from harness.modules.interface.settings import Settings


class Topology:
    """The topology part: exchanges, queues and bindings. The state it uses is made in
    AmqpTransport.__init__."""

    settings: Settings[AmqpOptions]
    o: AmqpOptions

    # -- topology
    def _exchange(self, kind: str) -> str:
        o = self.o
        name = o.exchange or ("amq.topic" if kind == "topic" else "")
        if name and not name.startswith("amq.") and ("exchange", name) not in self.declared:
            exchange_type = o.exchange_type or ("topic" if kind == "topic" else "direct")
            self._rpc(lambda cb: self.channel.exchange_declare(
                name, exchange_type, durable=o.durable, callback=cb),
                f"declare exchange {name}")
            self.declared.add(("exchange", name))
        return name

    def _queue(self, name: str, durable: bool, exclusive: bool, auto_delete: bool) -> str:
        if ("queue", name) in self.declared:
            return name
        frame = self._rpc(lambda cb: self.channel.queue_declare(
            name, durable=durable, exclusive=exclusive, auto_delete=auto_delete,
            arguments=self.queue_args or None, callback=cb), f"declare queue {name or '(new)'}")
        name = frame.method.queue
        self.declared.add(("queue", name))
        return name

    def _named_queue(self, name: str) -> str:
        o = self.o
        return self._queue(name, o.durable, o.exclusive, o.auto_delete)

    def _route(self, destination: Destination) -> tuple[str, str]:
        """(exchange, routing key) a send to destination goes by, declaring what it needs."""
        if self.replying:
            return "", destination.name
        o = self.o
        exchange = self._exchange(destination.kind)
        if not exchange and destination.kind == "queue":
            # Through the default exchange a message for a queue nobody declared yet would
            # be dropped: the sender declares it, as a consumer would.
            self._named_queue(destination.name)
        key = o.routing_key if o.routing_key is not None else destination.name
        self.routes[destination] = route = (exchange, key)
        return route

    def declare(self, destination: Destination) -> None:
        if destination not in self.routes:
            self._route(destination)

