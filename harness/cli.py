"""The `harness` command line."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

try:  # typer >= 0.26 carries its own copy of click
    from typer._click import exceptions as click_errors
    from typer._click.core import ParameterSource
except ImportError:  # pragma: no cover - older typer on the real click
    import click.exceptions as click_errors  # type: ignore[no-redef]
    from click.core import ParameterSource  # type: ignore[no-redef,assignment]

from harness.config import GroupSpec, RunSpec, parse_fault, parse_property, validate_run
from harness.errors import BadInput, StartFailure
from harness.profile import ProfileError
from harness.units import parse_size

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Load generator for message brokers: paced workers, HDR latency, "
                       "interval statistics.")
# Where output is not a terminal (pipes, CI, log files) lines must not wrap at 80 columns.
console = Console(highlight=False, soft_wrap=not sys.stdout.isatty(),
                  width=None if sys.stdout.isatty() else 200)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)

GROUP_PANEL = "Worker group (also inside each --group)"
CONNECTION_PANEL = "Connection (per group, also inside each --group)"
RUN_PANEL = "Run"
PASSWORD_ENV = "HARNESS_PASSWORD"

# run() parameters whose name differs from the GroupSpec field they set
_RENAMED = {"group_name": "name", "thread_interval": "thread_interval_ms", "prop": "properties",
            "heartbeat": "heartbeat_ms"}


def _group_params() -> set[str]:
    command = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    return {p.name for p in command.params
            if getattr(p, "rich_help_panel", None) in (GROUP_PANEL, CONNECTION_PANEL)}


def _password(params: dict[str, Any]) -> str | None:
    """The broker password from --password, --password-env, --password-file or
    $HARNESS_PASSWORD, in that order."""
    if params["password"]:
        return params["password"]
    if params["password_env"]:
        value = os.environ.get(params["password_env"])
        if value is None:
            raise BadInput("--password-env", f"environment variable {params['password_env']} "
                           "is not set")
        return value
    if params["password_file"]:
        try:
            with open(params["password_file"], encoding="utf-8") as f:
                return f.read().strip()
        except OSError as exc:
            raise BadInput("--password-file", f"cannot read {params['password_file']!r}: "
                           f"{exc.strerror}") from None
    return os.environ.get(PASSWORD_ENV)


def _group_spec(params: dict[str, Any]) -> GroupSpec:
    try:
        size = parse_size(params["size"])
    except ValueError as exc:
        raise BadInput("-ms", str(exc)) from None
    fields = {f.name for f in dataclasses.fields(GroupSpec)}
    values = {_RENAMED.get(k, k): v for k, v in params.items() if _RENAMED.get(k, k) in fields}
    values.update(size=size, name=params["group_name"] or "", password=_password(params),
                  properties=dict(parse_property(p) for p in params["prop"] or []))
    return GroupSpec(**values)


def run_spec(params: dict[str, Any], groups: list[GroupSpec]) -> RunSpec:
    """The run from the run-wide options (command line or profile) and its groups."""
    spec = RunSpec(groups=groups, name=params["name"], duration=params["duration"],
                   warmup=params["warmup"], interval=params["interval"], drain=params["drain"],
                   output=params["output"], broker_pid=params["broker_pid"],
                   switch_interval=params["switch_interval"],
                   reorder_window=params["reorder_window"],
                   faults=[parse_fault(f) for f in params["inject"] or []],
                   loopback_capacity=params["loopback_capacity"],
                   loopback_delay=params["loopback_delay"], run_id=params["run_id"])
    if params["node"]:
        spec.node = params["node"]
    return spec


def run_command() -> Any:
    return typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]


def options_by_key() -> dict[str, tuple[Any, str]]:
    """Every `run` option a profile may set, by its long flag without dashes
    ("thread-rate"), with the help panel that says where it belongs."""
    out = {}
    for param in run_command().params:
        panel = getattr(param, "rich_help_panel", None)
        longs = [o for o in param.opts if o.startswith("--")]
        if panel and longs and param.name not in ("group", "ui", "set_"):
            out[longs[0][2:]] = (param, panel)
    return out


def flag_keys() -> dict[str, str]:
    """Every spelling of a `run` flag (-rt, --thread-rate, --no-clean) -> its profile key."""
    out = {}
    for key, (param, _) in options_by_key().items():
        for opt in (*param.opts, *param.secondary_opts):
            out[opt] = key
    return out


def params_from(args: list[str]) -> dict[str, Any]:
    """Options parsed by the `run` command's own definitions; raises click's UsageError."""
    # click consumes the list it is given
    return run_command().make_context("profile", list(args), resilient_parsing=False).params


def group_from_params(params: dict[str, Any]) -> GroupSpec:
    return _group_spec(params)


def _parse_group_option(text: str) -> GroupSpec:
    """A --group value holds group flags, parsed by the very same option definitions."""
    try:
        args = shlex.split(text)
    except ValueError as exc:
        raise BadInput("--group", f"{text!r}: {exc}") from None
    try:
        ctx = run_command().make_context("--group", args, resilient_parsing=False)
    except click_errors.UsageError as exc:
        raise BadInput("--group", f"{text!r}: {exc.format_message()}") from None
    group_params = _group_params()
    for name in ctx.params:
        if name not in group_params and \
                ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE:
            raise BadInput("--group", f"{text!r}: run-wide options belong outside --group")
    if not ctx.params["module"]:
        raise BadInput("--group", f"{text!r}: needs -m MODULE")
    return _group_spec(ctx.params)


@app.command(no_args_is_help=False)
def run(
    ctx: typer.Context,
    profile: Annotated[Path | None, typer.Argument(
        help="A YAML profile (see `harness profiles list`): runs its sweep or search. With a "
        "profile, change its fields with --set, not with the other flags.",
        show_default=False)] = None,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="With a profile: FIELD=VALUE overrides a field, e.g. "
        "groups.sender.thread-rate=500 or run.run-length=30 (repeatable).",
        rich_help_panel=RUN_PANEL)] = None,
    module: Annotated[str | None, typer.Option(
        "-m", "--module", help="Module <transport>.<Role>, e.g. loopback.Sender "
        "(see `harness modules`).", rich_help_panel=GROUP_PANEL)] = None,
    destination: Annotated[str | None, typer.Option(
        "-d", "--destination", help="Queue or topic name (for Requestor/Responder: the "
        "request queue).", rich_help_panel=GROUP_PANEL)] = None,
    destination_base: Annotated[int | None, typer.Option(
        "-db", "--destination-base", help="With -dx: the first destination number (default 1).",
        rich_help_panel=GROUP_PANEL, show_default=False)] = None,
    destination_max: Annotated[int | None, typer.Option(
        "-dx", "--destination-max", help="Numbered destinations: threads use <-d><N> for N "
        "from -db to -dx in turn (PerfHarness's multi-destination mode).",
        rich_help_panel=GROUP_PANEL, show_default=False)] = None,
    group_name: Annotated[str | None, typer.Option(
        "-gn", "--group-name", help="Name of the group in output (default: the role, "
        "lower-cased).", rich_help_panel=GROUP_PANEL)] = None,
    threads: Annotated[int, typer.Option(
        "-nt", "--threads", help="Worker threads per process.",
        rich_help_panel=GROUP_PANEL)] = 1,
    processes: Annotated[int, typer.Option(
        "--processes", help="Processes for the group, each with -nt threads.",
        rich_help_panel=GROUP_PANEL)] = 1,
    thread_interval: Annotated[int, typer.Option(
        "-wi", "--thread-interval", help="Milliseconds between thread starts.",
        rich_help_panel=GROUP_PANEL)] = 0,
    thread_rate: Annotated[float, typer.Option(
        "-rt", "--thread-rate", help="Messages/s per thread; 0 = as fast as possible.",
        rich_help_panel=GROUP_PANEL)] = 0.0,
    rate: Annotated[float, typer.Option(
        "--rate", help="Messages/s for the whole group, split over its threads and "
        "processes; 0 = use -rt.", rich_help_panel=GROUP_PANEL)] = 0.0,
    poisson: Annotated[bool, typer.Option(
        "--poisson", help="Poisson arrivals (exponential gaps) instead of a fixed schedule.",
        rich_help_panel=GROUP_PANEL)] = False,
    ramp: Annotated[float, typer.Option(
        "-rp", "--ramp", help="Seconds to ramp the rate up linearly from 0.",
        rich_help_panel=GROUP_PANEL)] = 0.0,
    messages: Annotated[int, typer.Option(
        "-mg", "--messages", help="Messages per thread, then the thread stops; 0 = no limit.",
        rich_help_panel=GROUP_PANEL)] = 0,
    size: Annotated[str, typer.Option(
        "-ms", "--size", help="Message body size: 256, 4k, 1m.",
        rich_help_panel=GROUP_PANEL)] = "256",
    body_type: Annotated[str, typer.Option(
        "--type", help="Body: bytes (random), text (printable; STOMP sends a text frame, "
        "which JMS brokers deliver as a TextMessage) or xml (text shaped as an XML "
        "document).", rich_help_panel=GROUP_PANEL)] = "bytes",
    body_file: Annotated[str | None, typer.Option(
        "-mf", "--body-file", help="Send this file's bytes as the body (overrides -ms).",
        rich_help_panel=GROUP_PANEL)] = None,
    prop: Annotated[list[str] | None, typer.Option(
        "--property", help="Message property key=value (repeatable).",
        rich_help_panel=GROUP_PANEL)] = None,
    correlation_id: Annotated[str | None, typer.Option(
        "-co", "--correlation-id", help="Correlation id prefix; each thread sends "
        "<prefix><thread number>.", rich_help_panel=GROUP_PANEL)] = None,
    persistent: Annotated[bool, typer.Option(
        "-pp", "--persistent", help="Persistent messages.",
        rich_help_panel=GROUP_PANEL)] = False,
    transacted: Annotated[bool, typer.Option(
        "-tx", "--transacted", help="Transacted sessions (commit every -cc messages).",
        rich_help_panel=GROUP_PANEL)] = False,
    commit_count: Annotated[int, typer.Option(
        "-cc", "--commit-count", help="Messages per transaction with -tx.",
        rich_help_panel=GROUP_PANEL)] = 1,
    crc: Annotated[float, typer.Option(
        "--crc", help="Fraction of received messages whose body CRC32 is checked (0 to 1).",
        rich_help_panel=GROUP_PANEL)] = 0.0,
    reply_timeout: Annotated[float, typer.Option(
        "--reply-timeout", help="Seconds a Requestor waits for a reply.",
        rich_help_panel=GROUP_PANEL)] = 5.0,
    host: Annotated[str, typer.Option(
        "--host", help="Broker host.", rich_help_panel=CONNECTION_PANEL)] = "127.0.0.1",
    port: Annotated[int, typer.Option(
        "--port", help="Broker port; 0 = the protocol's default (STOMP 61613, MQTT 1883).",
        rich_help_panel=CONNECTION_PANEL)] = 0,
    flavour: Annotated[str, typer.Option(
        "--flavour", help="Broker dialect: STOMP activemq (default), rabbitmq, artemis, "
        "generic; MQTT mosquitto (default), activemq, rabbitmq, generic.",
        rich_help_panel=CONNECTION_PANEL)] = "",
    protocol: Annotated[str, typer.Option(
        "--protocol", help="Protocol version: STOMP 1.1 or 1.2 (default); MQTT 3.1.1 or 5 "
        "(default where the flavour has it).", rich_help_panel=CONNECTION_PANEL)] = "",
    vhost: Annotated[str | None, typer.Option(
        "--vhost", help="Virtual host (STOMP host header; RabbitMQ wants /).",
        rich_help_panel=CONNECTION_PANEL)] = None,
    user: Annotated[str | None, typer.Option(
        "--user", help="Login user name.", rich_help_panel=CONNECTION_PANEL)] = None,
    password: Annotated[str | None, typer.Option(
        "--password", help="Login password (never printed or written; prefer "
        "--password-env or --password-file).", rich_help_panel=CONNECTION_PANEL)] = None,
    password_env: Annotated[str | None, typer.Option(
        "--password-env", help="Read the password from this environment variable "
        f"(default: ${PASSWORD_ENV} if set).", rich_help_panel=CONNECTION_PANEL)] = None,
    password_file: Annotated[str | None, typer.Option(
        "--password-file", help="Read the password from this file.",
        rich_help_panel=CONNECTION_PANEL)] = None,
    heartbeat: Annotated[int, typer.Option(
        "--heartbeat", help="STOMP heart-beat in milliseconds, both ways; 0 = none.",
        rich_help_panel=CONNECTION_PANEL)] = 0,
    keepalive: Annotated[int, typer.Option(
        "--keepalive", help="MQTT keep-alive in seconds.",
        rich_help_panel=CONNECTION_PANEL)] = 60,
    tls: Annotated[bool, typer.Option(
        "--tls", help="Connect with TLS.", rich_help_panel=CONNECTION_PANEL)] = False,
    ca: Annotated[str | None, typer.Option(
        "--ca", help="CA certificate file to verify the broker with (--tls).",
        rich_help_panel=CONNECTION_PANEL)] = None,
    cert: Annotated[str | None, typer.Option(
        "--cert", help="Client certificate file (--tls).",
        rich_help_panel=CONNECTION_PANEL)] = None,
    key: Annotated[str | None, typer.Option(
        "--key", help="Client key file (--tls).", rich_help_panel=CONNECTION_PANEL)] = None,
    client_id: Annotated[str | None, typer.Option(
        "--client-id", help="Client id prefix; each thread appends its number "
        "(durable subscriptions and MQTT sessions are keyed by it).",
        rich_help_panel=CONNECTION_PANEL)] = None,
    ack: Annotated[str, typer.Option(
        "--ack", help="Acknowledgement: auto, client or client-individual (STOMP).",
        rich_help_panel=CONNECTION_PANEL)] = "auto",
    prefetch: Annotated[int, typer.Option(
        "--prefetch", help="Messages the broker may send ahead of acks; 0 = broker default.",
        rich_help_panel=CONNECTION_PANEL)] = 0,
    selector: Annotated[str | None, typer.Option(
        "--selector", help="JMS message selector on the subscription (ActiveMQ).",
        rich_help_panel=CONNECTION_PANEL)] = None,
    durable_name: Annotated[str | None, typer.Option(
        "--durable-name", help="Durable subscription name prefix (each thread appends its "
        "number).", rich_help_panel=CONNECTION_PANEL)] = None,
    qos: Annotated[int, typer.Option(
        "--qos", help="MQTT QoS 0, 1 or 2.", rich_help_panel=CONNECTION_PANEL)] = 0,
    retain: Annotated[bool, typer.Option(
        "--retain", help="MQTT retained messages.", rich_help_panel=CONNECTION_PANEL)] = False,
    clean: Annotated[bool, typer.Option(
        "--clean/--no-clean", help="MQTT clean start; --no-clean keeps a persistent session.",
        rich_help_panel=CONNECTION_PANEL)] = True,
    session_expiry: Annotated[int, typer.Option(
        "--session-expiry", help="MQTT 5 session expiry in seconds (with --no-clean).",
        rich_help_panel=CONNECTION_PANEL)] = 0,
    inflight: Annotated[int, typer.Option(
        "--inflight", help="MQTT in-flight window (QoS 1 and 2 messages awaiting acks).",
        rich_help_panel=CONNECTION_PANEL)] = 20,
    reply_queue: Annotated[str | None, typer.Option(
        "--reply-queue", help="Requestor: fixed reply queue prefix (one queue per thread, "
        "<prefix>.<process>.<thread>) instead of temporary queues.",
        rich_help_panel=CONNECTION_PANEL)] = None,
    connect_retry: Annotated[int, typer.Option(
        "--connect-retry", help="Connection attempts to retry at start, with back-off.",
        rich_help_panel=CONNECTION_PANEL)] = 0,
    group: Annotated[list[str] | None, typer.Option(
        "-g", "--group", help="Another worker group, as a quoted string of the group flags, "
        "e.g. \"-m loopback.Receiver -d Q1 -nt 2\" (repeatable).",
        rich_help_panel=RUN_PANEL)] = None,
    duration: Annotated[float, typer.Option(
        "-rl", "--run-length", help="Seconds to run; 0 = until -mg is reached or Ctrl-C.",
        rich_help_panel=RUN_PANEL)] = 0.0,
    warmup: Annotated[float, typer.Option(
        "-sw", "--warmup", help="Seconds of warm-up: written, marked, left out of the "
        "summary.", rich_help_panel=RUN_PANEL)] = 0.0,
    interval: Annotated[float, typer.Option(
        "-ss", "--interval", help="Seconds per statistics interval.",
        rich_help_panel=RUN_PANEL)] = 5.0,
    drain: Annotated[float, typer.Option(
        "--drain", help="Seconds consumers may keep receiving after producers stop.",
        rich_help_panel=RUN_PANEL)] = 5.0,
    name: Annotated[str, typer.Option(
        "-n", "--name", help="Run name, part of the run directory name.",
        rich_help_panel=RUN_PANEL)] = "run",
    output: Annotated[str, typer.Option(
        "-o", "--output", help="Directory that receives the run directory.",
        rich_help_panel=RUN_PANEL)] = "runs",
    node: Annotated[str | None, typer.Option(
        "--node", help="Node name in output files (default: host name).",
        rich_help_panel=RUN_PANEL)] = None,
    broker_pid: Annotated[int | None, typer.Option(
        "--broker-pid", help="PID of a local broker: its CPU% and CPU ms/msg are reported.",
        rich_help_panel=RUN_PANEL)] = None,
    switch_interval: Annotated[float | None, typer.Option(
        "--switch-interval", help="sys.setswitchinterval() seconds in worker processes "
        "(default: the interpreter's).", rich_help_panel=RUN_PANEL)] = None,
    reorder_window: Annotated[float, typer.Option(
        "--reorder-window", help="Seconds a missing message may arrive late and count as "
        "reordered before it counts as lost.", rich_help_panel=RUN_PANEL)] = 1.0,
    ui: Annotated[bool | None, typer.Option(
        "--ui/--no-ui", help="The live screen; default: on when stdout is a terminal.",
        rich_help_panel=RUN_PANEL)] = None,
    run_id: Annotated[str | None, typer.Option(
        "--run-id", help="Run id; give every node of a multi-node run the same one, so that "
        "`harness merge` knows their files belong together (default: a new random id).",
        rich_help_panel=RUN_PANEL)] = None,
    loopback_capacity: Annotated[float, typer.Option(
        "--loopback-capacity", help="Simulate a broker that serves this many msg/s in all "
        "(one FIFO server, messages queue behind it); 0 = as fast as the hand-off.",
        rich_help_panel=RUN_PANEL)] = 0.0,
    loopback_delay: Annotated[float, typer.Option(
        "--loopback-delay", help="Milliseconds the simulated broker adds to every message "
        "(a fixed service or network time).", rich_help_panel=RUN_PANEL)] = 0.0,
    inject: Annotated[list[str] | None, typer.Option(
        "--inject", help="Loopback fault ACTION:DESTINATION:N, ACTION one of drop, "
        "duplicate, reorder, corrupt, N the n-th message sent there (repeatable; for tests).",
        rich_help_panel=RUN_PANEL)] = None,
) -> None:
    """Run worker groups against a broker and measure every message, or run a profile."""
    params = dict(locals())
    if ui is None:
        ui = _on_terminal()
    if profile is not None:
        given = [p for p in run_command().params if p.name not in ("profile", "set_", "ui")
                 and ctx.get_parameter_source(p.name) == ParameterSource.COMMANDLINE]
        if given:
            raise BadInput(given[0].opts[-1], "with a profile, set this in the file or with "
                           "--set (groups.<name>.<flag>=..., run.<flag>=...)")
        raise typer.Exit(_run_profile(profile, set_ or [], ui))
    if set_:
        raise BadInput("--set", "overrides a profile's fields; give a profile file first")
    groups = [_group_spec(params)] if module else []
    if not module:
        for flag, value in (("-d", destination), ("-gn", group_name)):
            if value:
                raise BadInput("-m", f"{flag} was given without a module")
    groups += [_parse_group_option(text) for text in group or []]
    spec = run_spec(params, groups)
    validate_run(spec)
    result = execute(spec, ui)
    raise typer.Exit(result.exit_code)


def execute(spec: RunSpec, ui: bool) -> Any:
    """One run, with the screen or with interval lines, and its summary printed."""
    from harness.console import interval_lines, print_summary
    from harness.runner import Controller

    metrics: dict[str, list[str]] = {}

    def on_interval(view: Any) -> None:
        for line in interval_lines(view, metrics):
            console.print(line, markup=False)

    def on_log(message: str) -> None:
        err_console.print(f"harness: {message}", markup=False, style="yellow")

    controller = Controller(spec, on_interval, on_log, isolate=ui)
    metrics.update({g.name: controller.metrics[i] for i, g in enumerate(spec.groups)})
    console.print(f"run {controller.run_id} -> {controller.run_dir}", markup=False)
    for g in spec.groups:
        pace = f"{g.per_thread_rate:g}/s per thread" if g.per_thread_rate else "unthrottled"
        console.print(f"  {g.name}: {g.module} -d {g.destination} x{g.threads} threads"
                      f" x{g.processes} processes, {g.size} B, {pace}", markup=False)
    if ui:
        result = _run_with_screen(controller)
    else:
        console.print("Ctrl-C stops gracefully; twice stops at once.", markup=False)
        result = controller.execute()
    print_summary(console, result.summary, str(result.run_dir))
    return result


def _run_profile(path: Path, overrides: list[str], ui: bool) -> int:
    from harness.experiment import Experiment
    from harness.profile import load

    profile = load(path, overrides)
    if profile.points[0].scenario is not None:
        from harness.scenarios.experiment import run_profile
        return run_profile(profile, lambda spec: execute(spec, ui), console)
    if len(profile.points) == 1 and profile.search is None:
        return execute(profile.points[0].run, ui).exit_code
    what = f"a search over {profile.search.field}" if profile.search else \
        f"{len(profile.points)} runs"
    console.print(f"profile {profile.name}: {what}", markup=False)
    return Experiment(profile, lambda spec: execute(spec, ui), console).execute_all()


def _run_with_screen(controller: Any) -> Any:
    """The run under the live screen; the controller's log is printed again afterwards, so
    that nothing shown only on the screen is lost when it closes."""
    from harness.live import LiveFeed
    from harness.runner import Signals
    from harness.ui import RunApp

    feed = LiveFeed(controller)
    controller.prepare()  # a broker that cannot be reached fails here, before the screen
    feed.start()
    with Signals(controller.request_stop):
        RunApp(feed).run()
        if feed.thread.is_alive():
            err_console.print("harness: the screen closed; stopping the run", markup=False)
            controller.request_stop()
        result = feed.outcome()
    for message in feed.messages:
        err_console.print(f"harness: {message}", markup=False, style="yellow")
    return result


@app.command("view")
def view(
    run_dir: Annotated[Path, typer.Argument(
        help="A run directory written by `harness run` (manifest.json, intervals.jsonl).",
        show_default=False)],
    ui: Annotated[bool | None, typer.Option(
        "--ui/--no-ui", help="The screen; default: on when stdout is a terminal. Without it "
        "the interval lines and the summary are printed.")] = None,
) -> None:
    """Replay a finished run in the live screen, stepping through its intervals: space
    plays and pauses, left and right step, home and end jump."""
    from harness.replay import ReplayFeed, load

    recorded = load(run_dir)
    if not recorded.views:
        raise BadInput("RUN_DIR", f"{run_dir} holds no intervals")
    if ui is None:
        ui = _on_terminal()
    if ui:
        from harness.ui import RunApp

        RunApp(ReplayFeed(run_dir, recorded)).run()
        return
    from harness.console import interval_lines, print_summary

    metrics = {g.name: recorded.metrics[i] for i, g in enumerate(recorded.run.groups)}
    for interval in recorded.views:
        for line in interval_lines(interval, metrics):
            console.print(line, markup=False)
    for _, text in recorded.events:
        console.print(text, markup=False)
    path = run_dir / "summary.json"
    summary = json.loads(path.read_text()) if path.is_file() else None
    if summary is None or "groups" not in summary:
        if summary is None:
            err_console.print(f"harness: {run_dir} has no summary.json (the run did not "
                              "finish): the summary below is recomputed from the intervals",
                              markup=False, style="yellow")
        summary = recorded.summary  # a merge's output: the merged intervals' summary
    print_summary(console, summary, str(run_dir))


def _on_terminal() -> bool:
    # The screen draws on stderr and reads keys from stdin: all three must be a terminal.
    return all(stream.isatty() for stream in (sys.stdin, sys.stdout, sys.stderr))


profiles_app = typer.Typer(help="List, show and check YAML profiles.", no_args_is_help=True)
app.add_typer(profiles_app, name="profiles")
PROFILES_DIR = Path(__file__).resolve().parent.parent / "profiles"


@profiles_app.command("list")
def profiles_list(
    directory: Annotated[Path, typer.Argument(help="Where to look.")] = PROFILES_DIR,
) -> None:
    """Each profile with the first line of its header comment."""
    from harness.profile import listing

    if not directory.is_dir():
        raise BadInput("DIRECTORY", f"{directory} is not a directory")
    for file, first in listing(directory):
        console.print(f"{file.name:<28} {first}", markup=False)


@profiles_app.command("show")
def profiles_show(
    profile: Annotated[Path, typer.Argument(help="A profile file.", show_default=False)],
    set_: Annotated[list[str] | None, typer.Option("--set", help="FIELD=VALUE override "
                                                    "(repeatable).")] = None,
) -> None:
    """The profile resolved: its header, and each run it makes with its groups."""
    import yaml

    from harness.profile import load

    loaded = load(profile, set_ or [])
    console.print(loaded.header, markup=False, style="dim")
    what = f"capacity search over {loaded.search.field}" if loaded.search else "runs"
    console.print(f"{loaded.name}: {len(loaded.points)} point(s), {what}", markup=False)
    for point in loaded.points:
        labels = ", ".join(f"{k}={v}" for k, v in point.labels.items()) or "the only point"
        console.print(f"-- point {point.index + 1}: {labels}", markup=False, style="bold")
        shown = {k: v for k, v in point.data.items() if k in ("groups", "run", "connections")}
        console.print(yaml.safe_dump(shown, sort_keys=False).rstrip(), markup=False)


@profiles_app.command("validate")
def profiles_validate(
    profiles: Annotated[list[Path], typer.Argument(help="Profile files.", show_default=False)],
    set_: Annotated[list[str] | None, typer.Option("--set", help="FIELD=VALUE override "
                                                    "(repeatable).")] = None,
) -> None:
    """Check profiles without running them: every problem, with its path and line."""
    from harness.profile import ProfileError, load

    failed = False
    for path in profiles:
        try:
            loaded = load(path, set_ or [])
        except ProfileError as exc:
            failed = True
            for problem in exc.problems:
                err_console.print(f"harness: error: {problem.render(exc.file)}", markup=False)
            continue
        console.print(f"{path}: ok, {len(loaded.points)} run(s)"
                      + (f", search over {loaded.search.field}" if loaded.search else ""),
                      markup=False)
    if failed:
        raise typer.Exit(2)


@app.command("merge")
def merge_command(
    run_dirs: Annotated[list[str], typer.Argument(
        help="Run directories of the nodes of one run (or of a sweep's runs with --sweep); "
        "any path Spark reads: local, hdfs://, s3a://.", show_default=False)],
    output: Annotated[str, typer.Option("-o", "--output", help="Output directory.")] =
        "merged",
    sweep: Annotated[bool, typer.Option(
        "--sweep", help="The inputs are several runs (a sweep): merge each on its own.")] =
        False,
    master: Annotated[str, typer.Option(
        "--master", help="Spark master; the default is an embedded Spark on every core.")] =
        "local[*]",
    skew_warn_ms: Annotated[float, typer.Option(
        "--skew-warn-ms", help="Warn when a node's clock offset exceeds this.")] = 1.0,
) -> None:
    """Merge the interval files of many nodes exactly (histograms added) on Spark, and write
    merged_intervals (parquet, CSV), summary.json, merged.hlog and report.html."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise BadInput("merge", "needs PySpark: pip install 'harness[spark]'") from None
    from harness.merge import MergeError, merge, session

    console.print(f"starting Spark ({master})", markup=False)
    spark = session(master)
    try:
        merged = merge(spark, run_dirs, output, sweep, skew_warn_ms / 1000,
                       lambda line: console.print(line, markup=False))
    except MergeError as exc:
        for problem in exc.problems:
            err_console.print(f"harness: error: {problem}", markup=False)
        raise typer.Exit(2) from None
    finally:
        spark.stop()
    for warning in merged.warnings:
        err_console.print(f"harness: warning: {warning}", markup=False, style="yellow")
    console.print(f"wrote {output}/: merged_intervals.parquet, merged_intervals.csv, "
                  "summary.json, merged.hlog, report.html", markup=False)


@app.command("report")
def report_command(
    run_dir: Annotated[Path, typer.Argument(help="A run directory.", show_default=False)],
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="Where to write it (default: RUN_DIR/report.html).")] = None,
) -> None:
    """report.html for a single-node run, without Spark: the merge's report, offline."""
    from harness.merged import from_run_dirs
    from harness.report import render

    merged = from_run_dirs([run_dir])
    target = output or run_dir / "report.html"
    target.write_text(render(merged.report, f"harness report: {run_dir.name}"))
    for warning in merged.warnings:
        err_console.print(f"harness: warning: {warning}", markup=False, style="yellow")
    console.print(f"wrote {target}", markup=False)


analyze_app = typer.Typer(help="Analyses of finished runs.", no_args_is_help=True)
app.add_typer(analyze_app, name="analyze")


@analyze_app.command("model")
def analyze_model(
    run_dir: Annotated[Path, typer.Argument(
        help="A profile's run tree (e.g. from profiles/activemq-filters-model.yaml) or "
        "run directories under one directory.", show_default=False)],
) -> None:
    """Fit the ActiveMQ paper's model B = t_rcv + n_fltr*t_fltr + r*t_tx to a sweep."""
    from rich.table import Table

    from harness.model import PAPER, fit, observations

    result = fit(observations(run_dir))
    table = Table(title=f"{len(result.observations)} runs: received rate against the model")
    for column in ("run", "filters", "r", "received/s", "B measured us", "B model us",
                   "error"):
        table.add_column(column, justify="left" if column == "run" else "right")
    for o in result.observations:
        measured, model = 1e6 / o.received, result.predicted_b(o) * 1e6
        table.add_row(o.run, str(o.n_fltr), f"{o.r:.2f}", f"{o.received:,.1f}",
                      f"{measured:.2f}", f"{model:.2f}", f"{(model - measured) / measured:+.1%}")
    console.print(table)
    params = Table(title=f"B = t_rcv + n_fltr * t_fltr + r * t_tx, least squares, "
                         f"R^2 = {result.r_squared:.4f}")
    for column in ("parameter", "fitted (s)", "paper, ActiveMQ 4.0 (s)"):
        params.add_column(column, justify="right")
    for name in ("t_rcv", "t_fltr", "t_tx"):
        params.add_row(name, f"{getattr(result, name):.3e}", f"{PAPER[name]:.1e}")
    console.print(params)
    bound = [o.run for o in result.observations if o.client_bound]
    if bound:
        console.print(f"warning: in {len(bound)} of {len(result.observations)} runs a client "
                      "process was above 75% CPU: there the clients, not the server, set the "
                      "rate, and the model (a saturated server) does not hold",
                      markup=False, style="bold red")
    if min(result.t_rcv, result.t_fltr, result.t_tx) < 0:
        console.print("warning: a fitted time is negative: the runs do not follow the model "
                      "(too few, too noisy, or not server-bound)", markup=False,
                      style="bold red")


@app.command("modules")
def list_modules() -> None:
    """List every module (transport x role)."""
    from harness.roles import ROLES
    from modules import TRANSPORTS, transport_class

    for transport_name in TRANSPORTS:
        transport = transport_class(transport_name)
        for role_name, role in ROLES.items():
            if all(cap & transport.capabilities for cap in role.needs):
                console.print(f"{transport_name}.{role_name:<11} {role.summary}", markup=False)
        features = ", ".join(c.name.lower().replace("_", " ") for c in type(
            transport.capabilities) if c in transport.capabilities)
        console.print(f"  ({transport_name}: {transport.description}; {features})",
                      markup=False, style="dim")


def main() -> None:
    try:
        result = app(standalone_mode=False)
    except BadInput as exc:
        err_console.print(f"harness: error: {exc}", markup=False)
        sys.exit(2)
    except StartFailure as exc:
        err_console.print(f"harness: error: {exc}", markup=False)
        sys.exit(1)
    except ProfileError as exc:
        for problem in exc.problems:
            err_console.print(f"harness: error: {problem.render(exc.file)}", markup=False)
        sys.exit(2)
    except click_errors.NoArgsIsHelpError as exc:
        exc.show()
        sys.exit(0)
    except click_errors.UsageError as exc:
        err_console.print(f"harness: error: {exc.format_message()}", markup=False)
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        sys.exit(130)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        # stdout closed early (`| head`): the run directory is complete; say nothing more.
        sys.stderr.close()
        sys.exit(0)
    sys.exit(result if isinstance(result, int) else 0)


if __name__ == "__main__":
    main()
