"""A TCP proxy that cuts connections without the server dying: the harness connects to the
proxy, the proxy to a broker; `cut()` resets every connection it carries and refuses new ones
for a while; `hold()` silences one connection (where the kernel cannot partition: a Spark
executor's link to the driver). The broker behind it never notices more than clients that
went away, so fault cases can use the shared brokers without disturbing anything else on
them. (A partition of a server, which closes nothing, is made by the kernel instead:
tests/network.py.)"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from pathlib import Path


class Cutter:
    """Listens on 127.0.0.1:`port` (a free one) and forwards to `target`. With `record`, keeps
    what passes in `log`, in the order the proxy read it: (connection, from the client, bytes).
    With `delay`, holds the server's first answer on each connection that many seconds (a
    broker slow to answer, or far away)."""

    def __init__(self, target: tuple[str, int], record: bool = False,
                 delay: float = 0.0) -> None:
        self.target = target
        self.delay = delay
        self.log: list[tuple[int, bool, bytes]] | None = [] if record else None
        self.peers: list[tuple[str, int]] = []  # each connection's client address
        self._connections = 0
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._listener = self._below_ephemeral()
        self.port: int = self._listener.getsockname()[1]
        self.cuts = 0
        self.held: set[int] = set()  # connections whose bytes go nowhere (hold())
        self.muted: set[int] = set()  # connections whose server's bytes go nowhere (mute())
        self._up = threading.Event()
        self._up.set()
        self._closed = False
        threading.Thread(target=self._serve, daemon=True, name="cutter").start()

    @staticmethod
    def _listen(port: int) -> socket.socket:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            s.close()
            raise
        s.listen(128)
        return s

    @classmethod
    def _below_ephemeral(cls) -> socket.socket:
        """A listener on a free port below the kernel's ephemeral range: while a cut has
        it closed, no client's connection can take the port as its own source port (which
        the proxy's reopening then found in use: 1 run of 3 of the cut matrix)."""
        import random

        low = 32768
        with contextlib.suppress(OSError, ValueError):
            low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
        for port in random.sample(range(max(low - 12000, 1024), low), 200):
            with contextlib.suppress(OSError):
                return cls._listen(port)
        return cls._listen(0)

    def cut(self, down_s: float) -> None:
        """Reset every connection now and refuse new ones for `down_s` seconds (connect
        gets ECONNREFUSED: nothing listens on the port meanwhile)."""
        with self._lock:
            self.cuts += 1
            self._up.clear()
            listener, self._listener = self._listener, None
            doomed, self._open = self._open, set()
        _close(listener)
        for s in doomed:
            _reset(s)
        time.sleep(down_s)
        with self._lock:
            self._listener = self._listen(self.port)
            self._up.set()

    def hold(self, number: int) -> None:
        """Stop moving connection `number`'s bytes either way and close nothing: to both
        ends, the other is silent, as across a partition (the kernel's buffers fill, then
        sends block)."""
        self.held.add(number)

    def mute(self, number: int) -> None:
        """Stop moving connection `number`'s bytes from the server to the client only: what
        the client sends still reaches the server, whose answers (confirms, settlements,
        receipts) never come back."""
        self.muted.add(number)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            listener, self._listener = self._listener, None
            doomed, self._open = self._open, set()
        _close(listener)
        for s in doomed:
            _reset(s)

    def _serve(self) -> None:
        while not self._closed:
            self._up.wait(0.5)
            listener = self._listener
            if listener is None:
                continue
            try:
                client, peer = listener.accept()
            except OSError:  # closed by cut() or close()
                continue
            self.peers.append(peer)
            self._connect(listener, client)

    def _connect(self, listener: socket.socket, client: socket.socket) -> None:
        try:
            server = socket.create_connection(self.target, timeout=5)
            server.settimeout(None)
        except OSError:
            _reset(client)
            return
        with self._lock:
            if self._listener is not listener:  # cut while connecting
                _reset(client)
                _reset(server)
                return
            self._open |= {client, server}
            self._connections += 1
            number = self._connections
        for a, b, upstream in ((client, server, True), (server, client, False)):
            threading.Thread(target=self._pump, args=(a, b, number, upstream),
                             daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, number: int, upstream: bool) -> None:
        try:
            if not upstream and self.delay:
                first = src.recv(65536)
                time.sleep(self.delay)
                if first:
                    dst.sendall(first)
                else:
                    raise OSError
            while data := src.recv(65536):
                if self.log is not None:
                    with self._lock:
                        self.log.append((number, upstream, data))
                while (number in self.held or (not upstream and number in self.muted)) \
                        and not self._closed:
                    time.sleep(0.05)  # what was read waits; nothing more is read
                dst.sendall(data)
        except OSError:
            pass
        # One side closed in order: pass the close on (a cut has reset both already).
        with self._lock:
            ours = src in self._open
            self._open -= {src, dst}
        if ours:
            _close(src)
            _close(dst)


def _reset(s: socket.socket) -> None:
    """Close with RST, not FIN: what a peer sees when a link or a host dies."""
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.shutdown(socket.SHUT_RD)  # wakes the pump blocked on it, sends nothing
    except OSError:
        pass
    s.close()


def _close(s: socket.socket | None) -> None:
    if s is None:
        return
    with contextlib.suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)
    s.close()
