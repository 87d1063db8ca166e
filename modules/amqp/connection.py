"""The connection and its channel: parameters (TLS, heartbeat, credentials), opened once an
attempt, closes counted as outages."""

from __future__ import annotations

import contextlib
import math
import ssl
import time
from typing import Any

from harness.modules.amqp.common import ACCESS_REFUSED, DEFAULT_PORT, _reason, pika, pika_made_ours
from harness.modules.amqp.options import AmqpOptions, client_settings
from harness.modules.interface.base import TransportError
from harness.modules.interface.options import connect_timeout
from harness.modules.interface.settings import Settings
from harness.modules.kit.selector import MicrosecondEpoll


class Connection:
    """The connection part: the connection and its channel, opened and lost. The state it
    uses is made in AmqpTransport.__init__."""

    settings: Settings[AmqpOptions]
    o: AmqpOptions

    # -- connection
    def _parameters(self) -> pika.ConnectionParameters:
        s, o = self.settings, self.o
        host, port = s.address(DEFAULT_PORT)
        credentials = pika.credentials.ExternalCredentials() if o.cert_login else \
            pika.PlainCredentials(s.user, s.secret() or "") if s.user is not None \
            else pika.ConnectionParameters.DEFAULT_CREDENTIALS
        ssl_options = None
        if s.tls:
            context = ssl.create_default_context(cafile=s.ca)
            if s.cert:
                context.load_cert_chain(s.cert, s.key)
            ssl_options = pika.SSLOptions(context, host)
        client = self.settings.connection_id(stable=False)
        return pika.ConnectionParameters(
            host, port, o.vhost or "/", credentials, ssl_options=ssl_options,
            heartbeat=math.ceil(o.heartbeat), connection_attempts=1,
            # A connection attempt into a partition waits no longer than the liveness check
            # would: a worker reconnecting when the run stops is not held past it.
            socket_timeout=connect_timeout(o.heartbeat),
            stack_timeout=connect_timeout(o.heartbeat),
            client_properties={"connection_name": client} if client else None,
            **client_settings(o.client_config))

    def open(self) -> None:
        s = self.settings
        host, port = s.address(DEFAULT_PORT)
        result: dict[str, Any] = {}
        self.close_reason = None
        ioloop = pika_made_ours()  # before its first connection: the IOLoop class to give
        conn = pika.adapters.select_connection.SelectConnection(
            self._parameters(),
            on_open_callback=lambda c: result.setdefault("open", c),
            on_open_error_callback=lambda c, exc: result.setdefault("error", exc),
            on_close_callback=self._connection_closed,
            custom_ioloop=ioloop() if self.exact_waits and MicrosecondEpoll else None)
        conn.ioloop.activate_poller()
        self.conn = conn
        deadline = time.monotonic() + connect_timeout(self.settings.options.heartbeat)
        while not result and time.monotonic() < deadline:
            self._turn(0.05)
        if "open" not in result:
            self._abandon()
            exc = result.get("error")
            raise TransportError(f"cannot connect to {host}:{port}: {_reason(exc)}")
        self.connected = True
        try:
            self._open_channel()
        except TransportError as exc:
            self.close()
            raise TransportError(f"cannot open a channel on {host}:{port}: {exc}") from None

    def _open_channel(self) -> None:
        o = self.o
        channel = self._rpc(lambda cb: self.conn.channel(on_open_callback=cb), "channel")
        channel.add_on_close_callback(self._channel_closed)
        channel.add_on_return_callback(self._returned)
        self.channel = channel
        self.generation += 1
        self.declared.clear()  # what a new channel must declare again
        self.routes.clear()
        self.next_tag = 0  # confirmation tags are the channel's own too
        self.channel_first = -1
        self.confirmed_early.clear()
        self.last_tag = None
        self.unacked = 0
        if o.prefetch:
            self._rpc(lambda cb: channel.basic_qos(prefetch_count=o.prefetch, callback=cb),
                      "basic.qos")
        if self.confirm_window:
            self._rpc(lambda cb: channel.confirm_delivery(self._confirmed, callback=cb),
                      "confirm.select")
        if self.settings.transacted:
            self._rpc(lambda cb: channel.tx_select(callback=cb), "tx.select")

    def _connection_closed(self, conn: Any, reason: Exception) -> None:
        if conn is not self.conn:
            return
        was = self.connected
        self.connected = False
        self.close_reason = _reason(reason)
        if was and not self.closing:
            self.outages.went_down()
        self._lose_pending("connection lost before the broker confirmed the send")

    def _channel_closed(self, channel: Any, reason: Exception) -> None:
        if channel is not self.channel:
            return
        self.close_reason = _reason(reason)
        refused = isinstance(reason, pika.exceptions.ChannelClosedByBroker) and \
            reason.reply_code == ACCESS_REFUSED
        if refused and not self.closing and self.connected:
            # The user's permissions, not an outage: nothing was down. The next call opens
            # a channel on the same connection (_check).
            self._refuse_channel(f"the broker refused access: {self.close_reason}")
            self.connected = False
            self.channel_refused = True
            return
        if not self.closing and self.connected:
            # A channel error (a declaration the broker refused, an unknown delivery tag):
            # the connection goes with it, and the next call reconnects.
            self.connected = False
            self.outages.went_down()
            with contextlib.suppress(Exception):
                self.conn.close()
        self._lose_pending("channel closed before the broker confirmed the send")

    def _check(self) -> None:
        """After a channel closed refusing access, a new channel on the same connection
        (and its subscription again); otherwise as every transport reconnects."""
        if self.channel_refused and self.conn is not None and self.conn.is_open:
            self.channel_refused, self.close_reason, self.connected = False, None, True
            self._open_channel()
            if self.subscription is not None:
                self._subscribe(self.subscription)
            return
        self.channel_refused = False
        super()._check()  # type: ignore[misc]

    def _refuse_channel(self, reason: str) -> None:
        """The broker closed the channel refusing access (a publish where the user may not
        write): it refused one of the sends the channel carried that it had not confirmed
        (with confirms, the pending; without, every one since the channel opened), took
        those before it and ignored those after it until the channel closed. Which one it
        refused the close does not say; the last is either that one or one it ignored after
        it: refused. The others are in doubt (taken, or ignored), never counted refused
        whole: one a consumer then receives is no "unexpected" arrival."""
        if self.confirm_window:
            seqs = [seq for _, seq, _ in self.pending]
            self.pending.clear()
        elif self.channel_first >= 0:
            seqs = list(range(self.channel_first, self.channel_last + 1))
        else:
            seqs = []
        self.channel_first = -1
        if not seqs:
            return
        *unknown, last = seqs
        self.feedback.failed.append((last, "refused", reason))
        if unknown:
            why = f"sent on a channel the broker then closed refusing one of its sends " \
                  f"({reason})"
            self.feedback.doubt.extend((seq, why) for seq in unknown)

    def _abandon(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.ioloop.close()

    def _reopen(self) -> None:
        self._abandon()
        self.open()

