"""An asyncio event loop that the worker thread enters for a turn at a time.

The nats transport's worker thread leaves nats-py's loop between sends and enters it again to
write each paced send (a pass of the loop) or to wait for its next one. run_forever() sets the
loop up and tears it down around every entry (the running loop, the thread, the async
generator hooks, the coroutine origin tracking): paced at 4,000 sends a second, with the caches
cold after each sleep, a send written through run_forever() cost 5 to 6 us more than one
written by the same pass of the loop entered without them, which costs what a bare coroutine's
`await asyncio.sleep(0)` does (contrib/bench/loop_turn.py, ways `by_hand` and `turned`).

turn() runs the loop as run_forever() does, until stop(), setting only what a pass needs: the
running loop (futures and tasks ask for it) and the loop's thread (is_running()). It skips the
async generator hooks, which only register async generators first run in the loop, and nats-py
has none, and the coroutine origin tracking of debug mode. Where the interpreter's event loop
lacks the internals this relies on (asyncio's _run_once, _stopping and _thread_id), turn() is
run_forever().
"""

from __future__ import annotations

import asyncio
import selectors
import threading

_set_running_loop = asyncio.events._set_running_loop
_get_running_loop = asyncio.events._get_running_loop


class TurnedLoop(asyncio.SelectorEventLoop):
    def __init__(self, selector: selectors.BaseSelector | None = None) -> None:
        super().__init__(selector)
        self.lean = all(hasattr(self, name) for name in ("_run_once", "_stopping",
                                                           "_thread_id", "_check_closed"))

    def turn(self, once: bool = False) -> None:
        """run_forever(), entered and left at the cost of a pass. once: a single pass that
        does not wait, what `call_soon(stop)` then run_forever() runs, without the stop's
        handle (it runs the callbacks ready as it starts, and what the socket holds)."""
        if not self.lean:
            if once:
                self.call_soon(self.stop)
            self.run_forever()
            return
        if self.is_running() or _get_running_loop() is not None:
            self.run_forever()  # raises as run_forever() would
            return
        self._check_closed()
        self._thread_id = threading.get_ident()
        _set_running_loop(self)
        if once:
            self._stopping = True  # the pass waits for nothing and is the last
        try:
            while True:
                self._run_once()
                if self._stopping:
                    break
        finally:
            self._stopping = False
            self._thread_id = None
            _set_running_loop(None)
