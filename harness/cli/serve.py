"""`harness serve`: the runs of a directory tree as a web page, each opened on the run screen
(followed while it runs, its keys steering a run started with --control), for a run without
a terminal of its own and for colleagues' browsers."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from harness.cli.app import app, console
from harness.errors import BadInput


@app.command("serve")
def serve(
    runs_dir: Annotated[Path, typer.Argument(
        help="The runs to list (a directory tree of run directories), or one run directory "
        "to show.")] = Path("runs"),
    port: Annotated[int, typer.Option("--port", help="The port to serve on.")] = 8089,
    host: Annotated[str, typer.Option(
        "--host", help="The address to serve on; another than the loopback needs a token "
        "(0.0.0.0: every interface).")] = "127.0.0.1",
    token_env: Annotated[str | None, typer.Option(
        "--token-env", help="The page's token, from this environment variable: the page is "
        "opened as http://HOST:PORT/?token=TOKEN.", show_default=False)] = None,
    token_file: Annotated[Path | None, typer.Option(
        "--token-file", help="The page's token, from this file.", show_default=False)] = None,
) -> None:
    """Serve the run screen in a browser: a page lists the runs, newest first, and opens one
    live or finished; with a run started with --control, the rate keys, pause and stop steer
    it from the page. Each page opened runs the screen afresh on this machine."""
    from harness.screen.web import check_address, page_server, run_command
    from harness.textfiles import read_text

    if not 0 < port < 65536:
        raise BadInput("--port", f"{port}: give a port from 1 to 65535")
    if not runs_dir.is_dir():
        raise BadInput("RUNS_DIR", f"{runs_dir} is not a directory")
    if token_env is not None and token_file is not None:
        raise BadInput("--token-env", "give the token one way: --token-env or --token-file")
    token = None
    if token_env is not None:
        token = os.environ.get(token_env)
        if not token:
            raise BadInput("--token-env", f"environment variable {token_env} is not set")
    elif token_file is not None:
        token = read_text(token_file, "--token-file").strip()
        if not token:
            raise BadInput("--token-file", f"{token_file} is empty")
    check_address(host, token, "--host")
    server = page_server(run_command(runs_dir.resolve()), host, port, token,
                         f"harness: {runs_dir}")
    shown = f"[{host}]" if ":" in host else host
    console.print(f"serving {runs_dir} on http://{shown}:{port}/"
                  f"{'?token=... (the token given)' if token else ''}; Ctrl-C stops",
                  markup=False)
    try:
        server.serve()
    except OSError as exc:
        raise BadInput("--port", f"cannot serve on {host}:{port}: {exc.strerror or exc}"
                       ) from None
