"""The screen in a browser (`harness serve`, `harness run --serve`): the Textual authors'
textual-serve runs the screen's command afresh for each page opened and carries its terminal
over a WebSocket, so the page shows the one screen the terminal shows, keys and all.

On another address than the loopback a token is asked of every request: the page is opened as
`/?token=...` once, which leaves it in a cookie for the page's own requests (its WebSocket
and static files); without it the answer is 403."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import shlex
import sys
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from harness.errors import BadInput

COOKIE = "harness-token"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def screen_command(*args: str) -> str:
    """The shell command textual-serve starts for each page: this harness, this Python."""
    return " ".join(shlex.quote(a) for a in (sys.executable, "-m", "harness", *args))


def run_command(path: Path) -> str:
    """What a page shows of a path: one run followed, or the runs under a tree."""
    if (path / "manifest.json").is_file():
        return screen_command("view", "--follow", "--ui", str(path))
    return screen_command("runs", "--ui", str(path))


def page_server(command: str, host: str, port: int, token: str | None, title: str) -> Any:
    """A textual-serve Server for command, asking for the token when one is given."""
    try:
        from aiohttp import web
        from textual_serve.server import Server
    except ImportError as exc:
        raise BadInput("--serve", f"needs textual-serve ({exc.name} is not installed): pip "
                       "install 'broker-harness[serve]'") from None

    class PageServer(Server):  # type: ignore[misc]
        async def _make_app(self) -> web.Application:
            app = await super()._make_app()
            if token is not None:
                app.middlewares.append(self.check_token)
            return app

        @web.middleware
        async def check_token(self, request: web.Request,
                              handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                              ) -> web.StreamResponse:
            assert token is not None
            given = request.query.get("token") or request.cookies.get(COOKIE) or ""
            if not hmac.compare_digest(given.encode(), token.encode()):
                raise web.HTTPForbidden(text="harness serve: this page needs its token: open "
                                        "it as /?token=...\n")
            response = await handler(request)
            if "token" in request.query and not response.prepared:
                response.set_cookie(COOKIE, token, httponly=True, samesite="Strict")
            return response

        async def handle_index(self, request: web.Request) -> web.StreamResponse:
            # The page's own address, as the browser reached it: the WebSocket and static
            # files are asked of it (a server bound to 0.0.0.0 has no address to give).
            self.public_url = f"{request.scheme}://{request.host}"
            return await super().handle_index(request)

        async def on_startup(self, app: web.Application) -> None:
            pass  # textual-serve's banner; `harness serve` says where it serves itself

        def initialize_logging(self) -> None:
            pass  # the page's requests are not the run's log

    return PageServer(command, host=host, port=port, title=title)


def check_address(host: str, token: str | None, flag: str) -> None:
    if host not in LOOPBACK and token is None:
        raise BadInput(flag, f"{host}: another address than the loopback needs a token "
                       "(--token-env or --token-file), which the page must present")


class Background:
    """A page server on a thread of its own, for `harness run --serve`: it answers while the
    run goes and stops with it."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.loop = asyncio.new_event_loop()
        self.runner: Any = None
        self.started = threading.Event()
        self.error: BaseException | None = None
        threading.Thread(target=self._serve, name="page", daemon=True).start()
        self.started.wait(30)
        if self.error is not None:
            raise BadInput("--serve", f"port {server.port}: {self.error}")

    def _serve(self) -> None:
        from aiohttp import web

        asyncio.set_event_loop(self.loop)

        async def start() -> None:
            self.runner = web.AppRunner(await self.server._make_app())
            await self.runner.setup()
            await web.TCPSite(self.runner, self.server.host, self.server.port).start()

        try:
            self.loop.run_until_complete(start())
        except OSError as exc:
            self.error = exc
            self.started.set()
            return
        self.started.set()
        self.loop.run_forever()

    def close(self) -> None:
        if self.runner is not None:
            future = asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop)
            # The pages' processes are told to quit; the run is over whatever they answer.
            with contextlib.suppress(Exception):
                future.result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.end_screens()

    def end_screens(self) -> None:
        """The screens the pages started (a process each, of this one's): their run is over,
        and nothing ends them once this process has gone (a screen does not end when its
        input closes)."""
        import psutil

        shown = shlex.split(self.server.command)[-1]  # the run directory the screens show
        screens = []
        for child in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if "--follow" in " ".join(child.cmdline()) and \
                        any(shown in arg for arg in child.cmdline()):
                    screens.append(child)
                    child.terminate()
        _, alive = psutil.wait_procs(screens, timeout=5)
        for child in alive:
            with contextlib.suppress(psutil.Error):
                child.kill()
