"""Sends nothing acknowledges (a core NATS publish, a STOMP frame without a receipt, an MQTT
QoS 0 publish), and how far the server has shown it was there: a connection found dead may
have taken the later ones or not, so they are in doubt, never quietly sent."""

from __future__ import annotations

from harness.modules.interface.feedback import Feedback


class Unheard:
    """The transport sets `last` to each such send's number as it writes it, and calls
    mark() and proved() where a proof is asked for and given (NATS: a PING written, its PONG;
    MQTT: a PINGREQ, its PINGRESP), or beat() at each unasked proof of life (STOMP: a server
    heart-beat, which proves the link, so the sends of the beat before are taken as there)."""

    def __init__(self) -> None:
        self.last = self.beaten = self.heard = -1

    def proved(self) -> None:
        """The server answered for every send up to the last mark()."""
        self.heard = self.beaten

    def mark(self) -> None:
        """A proof asked for (a PING written): it will answer for the sends so far."""
        self.beaten = self.last

    def beat(self) -> None:
        """A proof that answers for the sends before the previous one."""
        self.proved()
        self.mark()

    def lost(self, feedback: Feedback, reason: str) -> None:
        """The connection was found dead: the sends since the last proof are in doubt."""
        if self.last > self.heard:
            feedback.doubt.extend((seq, reason) for seq in range(self.heard + 1, self.last + 1))
        self.heard = self.beaten = self.last
