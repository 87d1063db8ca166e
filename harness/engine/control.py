"""`--control`: the live screen's keys from another process (`harness view --follow`, a page of
`harness serve`) reach a run through a Unix socket that only the run's user can open.

The socket lies in a directory of the user's own (mode 0700, under $XDG_RUNTIME_DIR or the
temporary directory: a run directory's path may be longer than a socket's 107 bytes); the run
directory's `control.json` says where, and is removed with the socket when the run ends. A
request is one line of JSON, `{"do": "rate", "group": "sender", "factor": 1.1}` (or "pause",
"stop", "thread"); the answer one line, `{"said": "..."}`, what the screen's log shows. The
commands are the LiveControls the terminal's keys call: a distributed run's driver passes
them to its nodes as it does for its own screen."""

from __future__ import annotations

import json
import math
import os
import socket
import tempfile
import threading
from pathlib import Path
from typing import Any

from harness.engine.runner import LiveControls

FILE = "control.json"
MAX_LINE = 4096
FACTORS = (0.1, 10.0)  # one request changes a rate at most tenfold


def socket_dir() -> Path:
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    path = Path(base) / f"harness-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    if path.stat().st_uid != os.getuid() or path.stat().st_mode & 0o077:
        raise OSError(f"{path} is not the user's own directory (mode 0700)")
    return path


def answer(controls: LiveControls, request: Any) -> str:
    """What a request does, said as the screen says it."""
    if not isinstance(request, dict):
        return "a request is a JSON object"
    names = [g.name for g in controls.run.groups]
    action = request.get("do")
    if action == "stop":
        controls.request_stop("control")
        return "stopping: producers stop, consumers drain, files are completed"
    if action == "pause":
        return controls.toggle_pause()
    if action in ("rate", "thread"):
        group = request.get("group")
        if group not in names:
            return f"{action}: no group {group!r} (the run's: {', '.join(names)})"
        g = names.index(group)
        if action == "thread":
            return controls.add_thread(g)
        factor = request.get("factor")
        if not isinstance(factor, int | float) or not math.isfinite(factor) or \
                not FACTORS[0] <= factor <= FACTORS[1]:
            return f"rate: factor {factor!r}: give a number from {FACTORS[0]:g} to " \
                   f"{FACTORS[1]:g}"
        return controls.change_rate(g, float(factor))
    return f"{action!r}: the commands are rate, pause, thread and stop"


class ControlServer:
    """The run's end of the control socket, on a thread of its own."""

    def __init__(self, controls: LiveControls) -> None:
        self.controls = controls
        self.path = socket_dir() / f"{controls.run_id}-{os.getpid()}.sock"
        self.pointer = Path(controls.run_dir) / FILE
        self.lock = threading.Lock()  # one command at a time, as from one keyboard
        self.server: socket.socket | None = None

    def start(self) -> None:
        self.path.unlink(missing_ok=True)
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(self.path))
        os.chmod(self.path, 0o600)
        server.listen(8)
        self.server = server
        self.pointer.parent.mkdir(parents=True, exist_ok=True)
        self.pointer.write_text(json.dumps({"socket": str(self.path), "pid": os.getpid()}))
        threading.Thread(target=self._accept, name="control", daemon=True).start()

    def _accept(self) -> None:
        assert self.server is not None
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return  # closed at the run's end
            threading.Thread(target=self._serve, args=(conn,), name="control-client",
                             daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as lines:
            for line in lines:
                if len(line) > MAX_LINE:
                    return
                try:
                    request = json.loads(line)
                except ValueError:
                    said = "a request is one line of JSON"
                else:
                    with self.lock:
                        said = answer(self.controls, request)
                try:
                    conn.sendall(json.dumps({"said": said}).encode() + b"\n")
                except OSError:
                    return

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
        self.pointer.unlink(missing_ok=True)
        self.path.unlink(missing_ok=True)


class ControlClient:
    """The other end: `harness view --follow` and the page's screen send the keys here."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.conn: socket.socket | None = None
        self.replies: Any = None

    def available(self) -> bool:
        """The run listens (started with --control and still going)."""
        if self.conn is not None:
            return True
        try:
            where = json.loads((self.run_dir / FILE).read_text())["socket"]
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.settimeout(5.0)
            conn.connect(where)
        except (OSError, ValueError, KeyError, TypeError):
            return False
        self.conn, self.replies = conn, conn.makefile("rb")
        return True

    def send(self, **request: Any) -> str:
        if not self.available():
            return "the run takes no commands (started without --control, or ended)"
        assert self.conn is not None
        try:
            self.conn.sendall(json.dumps(request).encode() + b"\n")
            line = self.replies.readline()
        except OSError as exc:
            self.close()
            return f"the run did not answer: {exc}"
        if not line:
            self.close()
            return "the run has ended"
        return str(json.loads(line)["said"])

    def close(self) -> None:
        if self.conn is not None:
            self.replies.close()
            self.conn.close()
            self.conn = None
