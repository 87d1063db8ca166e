"""JetStream's topology: the run's stream made or used as found, and a durable
consumer used only as the run asks for it."""

from __future__ import annotations

import contextlib
from typing import Any

from harness.modules.interface.base import TransportError
from harness.modules.interface.message import Destination
from harness.modules.interface.settings import Settings
from harness.modules.kit.turned import TurnedLoop
from harness.modules.nats.common import api, nats
from harness.modules.nats.options import NatsOptions, stream_name


class Streams:
    """The JetStream topology part: the run's stream made or used as found, a durable consumer
    used only as the run asks for it. The state it uses is made in NatsTransport.__init__."""

    settings: Settings[NatsOptions]
    o: NatsOptions
    loop: TurnedLoop

    # -- JetStream topology
    def _ensure_stream(self, subject: str) -> str:
        o = self.o
        name = o.stream or stream_name(subject)
        if name in self.streams:
            return name

        async def ensure() -> None:
            try:
                await self.js.stream_info(name)
                return
            except nats.js.errors.NotFoundError:
                pass
            try:
                await self.js.add_stream(name=name, subjects=[subject],
                                         storage=api.StorageType(o.storage),
                                         retention=api.RetentionPolicy(o.retention))
            except nats.js.errors.BadRequestError:
                # Another client made it since stream_info (the server has answered such a
                # race "subjects overlap with an existing stream"): used as it is, as a stream
                # found there is; with none there, the refusal stands.
                with contextlib.suppress(nats.js.errors.NotFoundError):
                    await self.js.stream_info(name)
                    return
                raise

        self._run(ensure(), f"stream {name}")
        self.streams.add(name)
        return name

    def declare(self, destination: Destination) -> None:
        if self.js is not None and self.send_stream is None:
            self.send_stream = self._ensure_stream(destination.name)

    def _check_durable(self, stream: str, durable: str) -> None:
        """A durable consumer that exists already is used as it is (nats-py does not change
        it): one whose configuration differs from what this run asks is refused, not
        silently used with another's --prefetch or --ack-wait."""
        js, o = self.js, self.o
        assert js is not None

        async def existing() -> Any:
            try:
                return await js.consumer_info(stream, durable)
            except nats.js.errors.NotFoundError:
                return None

        info = self._run(existing(), f"look up consumer {durable} on {stream}")
        if info is None:
            return
        have = info.config
        for flag, asked, kept in (("--prefetch", o.prefetch, have.max_ack_pending),
                                  ("--ack-wait", o.ack_wait, have.ack_wait)):
            if asked and (kept is None or abs(float(kept) - asked) > 1e-6):
                raise TransportError(
                    f"{flag} {asked:g}: the durable consumer {durable} on stream {stream} "
                    f"exists with {kept:g} (an earlier run's): remove it first (nats consumer "
                    f"rm {stream} {durable})")

