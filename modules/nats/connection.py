"""The connection: opened once per attempt, authenticated one way, watched by the
liveness check, its outages counted through nats-py's callbacks."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from typing import Any

from harness.modules.interface.base import TransportError
from harness.modules.interface.settings import Settings
from harness.modules.kit.selector import MicrosecondSelector
from harness.modules.kit.turned import TurnedLoop
from harness.modules.nats.common import (
    CONNECT_TIMEOUT_S,
    DEFAULT_PORT,
    PENDING_SIZE,
    RECONNECT_WAIT_S,
    _reason,
    _require_tls,
    nats,
)
from harness.modules.nats.options import NatsOptions, client_settings


class Connection:
    """The connection part: opened once an attempt (nats-py allowed to reconnect for ever
    after), authenticated one way, watched by the liveness check, its outages counted through
    nats-py's callbacks. The state it uses is made in NatsTransport.__init__."""

    settings: Settings[NatsOptions]
    o: NatsOptions
    loop: TurnedLoop

    # -- connection
    def open(self) -> None:
        s, o = self.settings, self.o
        host, port = s.address(DEFAULT_PORT)
        if self.loop.is_closed():  # opened again after close() (--connect-retry)
            self.loop = TurnedLoop(MicrosecondSelector() if self.exact_waits else None)
        tls = None
        if s.tls:
            _require_tls(host, port)
            tls = ssl.create_default_context(cafile=s.ca)
            if s.cert:
                tls.load_cert_chain(s.cert, s.key)
        scheme = "tls" if s.tls else "nats"
        try:
            self.nc = self.loop.run_until_complete(self._first_connect(
                f"{scheme}://{host}:{port}", name=self.settings.connection_id(stable=False),
                **self._credentials(), tls=tls, connect_timeout=CONNECT_TIMEOUT_S,
                pending_size=PENDING_SIZE,
                allow_reconnect=True, max_reconnect_attempts=-1,
                reconnect_time_wait=RECONNECT_WAIT_S, error_cb=self._error,
                disconnected_cb=self._disconnected, reconnected_cb=self._reconnected,
                closed_cb=self._closed, **client_settings(o.client_config)))
        except (nats.errors.Error, OSError, TimeoutError) as exc:
            raise TransportError(f"cannot connect to {host}:{port}: {_reason(exc)}") from None
        self.connected = True
        if o.heartbeat:
            if self.watcher is not None:
                self.watcher.cancel()
            self.heard = None
            self.watcher = self.loop.call_later(o.heartbeat, self._watch)
        if o.jetstream:
            self.js = self.nc.jetstream(publish_async_max_pending=o.inflight + 1)

    def _credentials(self) -> dict[str, Any]:
        """nats-py's arguments for the one way the run authenticates (_auth_problems)."""
        s, o = self.settings, self.o
        # nats-py asks a callable at each of its reconnections: a rotated file is read then.
        secret = s.secret if s.password_file is not None else s.secret()
        if o.token:
            return {"token": secret}
        if o.creds:
            return {"user_credentials": o.creds}
        if o.nkey:
            return {"nkeys_seed": o.nkey}
        return {"user": s.user, "password": secret}

    def _watch(self) -> None:
        """The liveness check (--heartbeat): a PING every heartbeat, the connection stale when
        nothing came back for two. Written straight to the socket: nats-py's own pings go
        through its flusher, which a partition blocks for ever once the socket's buffer is
        full (a producer's), and its ping task with it."""
        nc, heartbeat = self.nc, self.o.heartbeat
        if nc is None or self.closing or self.loop.is_closed():
            return
        self.watcher = self.loop.call_later(heartbeat, self._watch)
        if not nc.is_connected or nc._transport is None:
            self.heard = None  # reconnecting: nats-py times its attempts
            return
        now = time.monotonic()
        progress = nc._pongs_received + nc.stats["in_msgs"]
        if self.heard is None or progress != self.progress:
            self.progress, self.heard = progress, now
            self.unheard.proved()
        elif now - self.heard > 2 * heartbeat:
            self.heard = None
            self._unheard()
            # Aborted, not closed: nats-py's reconnection first waits for the socket to close,
            # which a close does only once what is buffered is written, never in a partition.
            writer = getattr(nc._transport, "_io_writer", None)
            if writer is not None:
                writer.transport.abort()
            self.loop.create_task(nc._process_op_err(nats.errors.StaleConnectionError()))
            return
        self.unheard.mark()
        nc._pongs.append(self.loop.create_future())
        nc._transport.write(b"PING\r\n")

    def _unheard(self) -> None:
        """A core publisher's sends written since the server last proved it had read
        them: a connection found dead may have taken them or not, so they are in doubt,
        never quietly sent (nothing acknowledges a core publish)."""
        if self.js is None and self.settings.sends_only:
            self.unheard.lost(self.feedback, "written to a connection then found dead (no "
                              "PONG): read or not")

    async def _first_connect(self, url: str, **options: Any) -> Any:
        """One connection attempt, as every transport makes (--connect-retry makes more):
        nats-py, allowed to reconnect for ever as a run needs, would also retry a first
        connection for ever, and a server that is down or a certificate that does not verify
        would hang the start."""
        failed = self.connect_failed = self.loop.create_future()
        attempt = asyncio.ensure_future(nats.connect(url, **options))
        try:
            await asyncio.wait((attempt, failed), return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.connect_failed = None
        if attempt.done():
            return attempt.result()
        attempt.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await attempt
        raise failed.result()

    async def _error(self, exc: Exception) -> None:
        """nats-py's reports; a lost connection counts through the disconnect callbacks."""
        failed = self.connect_failed
        if failed is not None and not failed.done():
            failed.set_result(exc)  # the first connection attempt failed
            return
        if isinstance(exc, nats.errors.SlowConsumerError):
            # The message itself shows as lost in the sequence numbers.
            self.feedback.error("slow consumer", "nats-py dropped a message: the "
                                "subscription held --pending-limit messages")

    async def _disconnected(self) -> None:
        if not self.closing and self.outages.down_since is None:
            # One error for the outage, beside its time and reconnects.
            self.feedback.error("disconnected", "the connection was lost (a server restart, "
                                "or the server cut off a consumer that read too slowly: its "
                                "log says which)")
            self.outages.went_down()
        if not self.closing:
            self.down = True
            if self.o.heartbeat:
                self._unheard()
        # A publish whose acknowledgement was due on the lost connection never gets it: in
        # doubt (the server may have stored it), a failed send now rather than at the timeout.
        for future, _, _ in self.pending:
            future.cancel()

    async def _reconnected(self) -> None:
        self.down = False
        self.outages.came_up()

    async def _closed(self) -> None:
        if not self.closing:
            self.connected = False  # nats-py gave up: the next call connects again

    def _reopen(self) -> None:
        self.down = False
        self.nc = self.js = self.sub = self.pull = None
        self.streams.clear()
        self.send_stream = None
        self.open()

