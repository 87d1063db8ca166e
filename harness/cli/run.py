"""`harness run`: worker groups from flags, or a profile. Its flags are made from the option
table (harness.plan.options), so the command line, --group strings and profiles accept
exactly the same options."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from harness.cli.app import app, console, err_console, on_terminal, warn
from harness.errors import BadInput
from harness.experiments.profile import find_profile
from harness.modules.interface.options import Option
from harness.plan.group import GroupSpec, group_spec
from harness.plan.options import in_scope, parse_args, split, table
from harness.plan.run import RunSpec, run_spec, validate_run
from harness.rundir.writer import is_uri
from harness.stats.slo import thresholds

PANELS = {"group": "Worker group (also inside each --group)",
          "connection": "Connection (per group, also inside each --group)",
          "run": "Run",
          "cluster": "Distributed run (on a Spark cluster)"}


def identifier(option: Option) -> str:
    return option.key.replace("-", "_")


def _parameter(option: Option) -> inspect.Parameter:
    kind: Any = list[option.type] if option.multiple else option.type  # type: ignore[name-defined]
    if option.default is None or option.multiple:
        kind = kind | None
    decls = [f"--{option.key}/--no-{option.key}"] if option.negative else list(option.flags)
    takes = f" ({' and '.join(option.transports)} only)" if option.transports else ""
    info = typer.Option(*decls, help=option.help + takes, rich_help_panel=PANELS[option.scope],
                        show_default=option.default is not None and not option.multiple)
    return inspect.Parameter(identifier(option), inspect.Parameter.KEYWORD_ONLY,
                             default=None if option.multiple else option.default,
                             annotation=Annotated[kind, info])


def run(
    profile: Annotated[Path | None, typer.Argument(
        help="A YAML profile, by path or by the name of a shipped one (see `harness profiles "
        "list`): runs its sweep or search. With a profile, change its fields with --set, not "
        "with the other flags.", show_default=False)] = None,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="With a profile: FIELD=VALUE overrides a field, e.g. "
        "groups.sender.thread-rate=500 or run.run-length=30 (repeatable).",
        rich_help_panel=PANELS["run"])] = None,
    group: Annotated[list[str] | None, typer.Option(
        "-g", "--group", help="Another worker group, as a quoted string of the group flags, "
        "e.g. \"-m loopback.Receiver -d Q1 -nt 2\" (repeatable).",
        rich_help_panel=PANELS["run"])] = None,
    ui: Annotated[bool | None, typer.Option(
        "--ui/--no-ui", help="The live screen; default: on when stdout is a terminal.",
        rich_help_panel=PANELS["run"])] = None,
    cluster: Annotated[str | None, typer.Option(
        "--cluster", help="Run on a Spark cluster: its master, e.g. local-cluster[2,1,1024], "
        "spark://host:7077, yarn, k8s://https://host:443. Every node runs every group.",
        rich_help_panel=PANELS["cluster"], show_default=False)] = None,
    nodes: Annotated[int | None, typer.Option(
        "--nodes", help="With --cluster: client nodes (tasks of one barrier stage). --rate is "
        "divided across them; -rt and -mg hold on every node's threads.  [default: 2]  "
        "Without --cluster, beside --run-id: how many machines run this run by hand, so "
        "that receivers competing for a queue across them are counted as one (harness "
        "merge takes the union of what they received).",
        rich_help_panel=PANELS["cluster"], show_default=False)] = None,
    driver_host: Annotated[str | None, typer.Option(
        "--driver-host", help="With --cluster: the address executors reach this machine at, "
        "HOST or HOST:PORT where a NAT or a port forward gives another port (default: "
        "Spark's spark.driver.host; 127.0.0.1 for local masters).",
        rich_help_panel=PANELS["cluster"], show_default=False)] = None,
    driver_port: Annotated[int | None, typer.Option(
        "--driver-port", help="With --cluster: the port this machine listens on for the "
        "nodes' links, to open in a firewall (default: any free one).",
        rich_help_panel=PANELS["cluster"], show_default=False)] = None,
    spark_conf: Annotated[list[str] | None, typer.Option(
        "--spark-conf", help="With --cluster: a Spark setting KEY=VALUE, e.g. "
        "spark.executor.memory=2g (repeatable).", rich_help_panel=PANELS["cluster"])] = None,
    cluster_wait: Annotated[float | None, typer.Option(
        "--cluster-wait", help="With --cluster: seconds to wait for the executors' task slots."
        "  [default: 60]", rich_help_panel=PANELS["cluster"], show_default=False)] = None,
    omb: Annotated[Path | None, typer.Option(
        "--omb", help="Run an OpenMessaging Benchmark workload file as it is, on the "
        "transport -m names (-m kafka): its topics, producers, subscriptions, rate and "
        "durations become the groups 'producer' and 'consumer'; change them with --set "
        "groups.producer.rate=..., add the transport's options as flags.",
        rich_help_panel=PANELS["run"], show_default=False)] = None,
    omb_driver: Annotated[Path | None, typer.Option(
        "--omb-driver", help="With --omb: an OpenMessaging Benchmark driver file as it is "
        "(driver-kafka/*.yaml): its producerConfig, consumerConfig and commonConfig go to the "
        "producers and consumers, those a flag sets as that flag; its topicConfig, "
        "replicationFactor and bootstrap.servers where no flag gives them.",
        rich_help_panel=PANELS["run"], show_default=False)] = None,
    ship: Annotated[bool, typer.Option(
        "--ship/--no-ship", help="With --cluster: send this harness to the executors as a zip "
        "(their Python must have its dependencies).", rich_help_panel=PANELS["cluster"])] = True,
    check: Annotated[bool, typer.Option(
        "--check", help="Check everything a run would and print its plan (groups, threads, "
        "clients, rates, destinations, what it would send, its files), connecting to "
        "nothing: exit 0, or 2 with the first problem.",
        rich_help_panel=PANELS["run"])] = False,
    **flags: Any,
) -> None:
    """Run worker groups against a broker and measure every message, or run a profile.

    Exit codes: 0 the run went well (and met its --slo thresholds); 1 the run failed (a
    broker that could not be reached, a node lost); 2 bad input; 99 the run went well but
    missed a threshold (or a supply-chain run its validity checks); 130 stopped at once by
    a second Ctrl-C."""
    given = {option.key: flags[identifier(option)] for option in table().values()
             if flags[identifier(option)] is not None}
    if ui is None:
        ui = on_terminal()
    on_cluster = None
    if cluster is not None:
        from harness.distributed.cluster import ClusterSpec, parse_conf, validate_cluster
        # Flags left out keep ClusterSpec's defaults (the ones --help gives).
        sizes = {k: v for k, v in (("nodes", nodes), ("wait", cluster_wait),
                                   ("driver_port", driver_port)) if v is not None}
        on_cluster = ClusterSpec(cluster, driver_host=driver_host,
                                 conf=parse_conf(spark_conf or []), ship=ship, **sizes)
        validate_cluster(on_cluster)
    else:
        for flag, value in (("--driver-host", driver_host), ("--driver-port", driver_port),
                            ("--spark-conf", spark_conf),
                            ("--cluster-wait", cluster_wait)):
            if value is not None:
                raise BadInput(flag, "only with --cluster MASTER (a profile's cluster: block "
                               "takes --set cluster.<key>=VALUE)")
        if nodes is not None and (profile is not None or not given.get("run-id")):
            raise BadInput("--nodes", "with --cluster MASTER, or beside --run-id for a run "
                           "started by hand on several machines")
        if nodes is not None and nodes < 1:
            raise BadInput("--nodes", f"must be at least 1, got {nodes}")
    if omb_driver is not None and omb is None:
        raise BadInput("--omb-driver", "only with --omb (a profile names a driver file with "
                       "its omb-driver: key)")
    if omb is not None:
        if profile is not None or group:
            raise BadInput("--omb", "the workload makes the groups: give no profile or -g "
                           "beside it (a profile names a workload with its omb: key)")
        raise typer.Exit(run_profile(omb, set_ or [], ui, on_cluster,
                                     {**omb_given(given), "driver": omb_driver}, check))
    if profile is not None:
        for option in table().values():
            if option.key in given and given[option.key] != option.default:
                raise BadInput(option.flag, "with a profile, set this in the file or with "
                               "--set (groups.<name>.<flag>=..., run.<flag>=...)")
        raise typer.Exit(run_profile(find_profile(profile), set_ or [], ui, on_cluster,
                                     check=check))
    if set_:
        raise BadInput("--set", "overrides a profile's fields; give a profile file first")
    groups = []
    if given.get("module"):
        groups.append(group_spec(given))
    else:
        for key, flag in (("destination", "-d"), ("group-name", "-gn")):
            if given.get(key):
                raise BadInput("-m", f"{flag} was given without a module")
    groups += [group_option(text) for text in group or []]
    spec = run_spec(given, groups)
    if on_cluster is None and nodes is not None:
        spec.nodes = nodes
    validate_run(spec)
    if spec.backlog and on_cluster is not None:
        raise BadInput("--backlog", "one node's controller releases its consumers: not with "
                       "--cluster")
    thresholds(spec)
    if check:
        print_plan(spec, on_cluster)
        raise typer.Exit(0)
    raise typer.Exit(execute(spec, ui, on_cluster).exit_code)


def print_plan(spec: RunSpec, cluster: Any = None) -> None:
    from harness.plan.preview import plan_lines

    for line in plan_lines(spec, cluster.nodes if cluster is not None else spec.nodes):
        console.print(line, markup=False)
    if spec.slo:
        console.print(f"thresholds: {'; '.join(spec.slo)}", markup=False)
    console.print("checked: nothing was connected to or written", markup=False)


# The flags of every option in the table follow the fixed parameters above.
_fixed = inspect.signature(run, eval_str=True)
_profile, *_run_only, _ = _fixed.parameters.values()
run.__signature__ = _fixed.replace(parameters=[  # type: ignore[attr-defined]
    _profile, *(_parameter(option) for option in table().values()),
    *(p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in _run_only)])
run.__annotations__ = {}
app.command(no_args_is_help=False)(run)


# Group options an OMB workload sets itself: change them with --set groups.producer.<key>.
OMB_SETS = ("destination", "destination-base", "destination-max", "group-name", "threads",
            "thread-rate", "rate", "size", "body-file", "partitions", "keys")
# Common group options for one side only (the transports' own say theirs).
OMB_SIDES = {"type": "producer", "property": "producer", "correlation-id": "producer",
             "persistent": "producer", "poisson": "producer", "ramp": "producer",
             "crc": "consumer"}


def omb_given(given: dict[str, Any]) -> dict[str, Any]:
    """What `harness run --omb FILE` adds to the workload from its flags, as a profile's
    connection, run and group keys: {"transport", "connection", "run", "producer",
    "consumer", "both"}."""
    changed = {key: value for key, value in given.items() if value != table()[key].default}
    transport = changed.pop("module", None)
    if not transport or "." in transport:
        raise BadInput("-m", "with --omb: the transport to run the workload on, e.g. -m "
                       "kafka (the workload chooses the roles)")
    out: dict[str, Any] = {"transport": transport, "connection": {}, "run": {},
                           "producer": {}, "consumer": {}, "both": {}}
    for key, value in changed.items():
        option = table()[key]
        if option.scope in ("connection", "run"):
            out[option.scope][key] = value
        elif key in OMB_SETS:
            raise BadInput(option.flag, "the workload sets this: change it in the file, or "
                           f"with --set groups.producer.{key}=...")
        else:
            side = {"send": "producer", "receive": "consumer"}.get(option.side, "both")
            out[OMB_SIDES.get(key, side)][key] = value
    return out


def group_option(text: str) -> GroupSpec:
    """A --group value: group flags, parsed by the same option table."""
    given = parse_args(split(text, "--group"), "--group")
    run_keys = {o.key for o in in_scope("run")}
    if any(key in run_keys for key in given):
        raise BadInput("--group", f"{text!r}: run-wide options belong outside --group")
    if not given.get("module"):
        raise BadInput("--group", f"{text!r}: needs -m MODULE")
    return group_spec(given)


def execute(spec: RunSpec, ui: bool, cluster: Any = None) -> Any:
    """One run, with the screen or with interval lines, and its summary printed; on the
    nodes of a Spark cluster if one is given (harness.distributed.cluster.ClusterSpec)."""
    from harness.engine.runner import Controller
    from harness.screen.console import interval_lines, print_summary
    from harness.stats.figures import labels

    metrics: dict[str, list[str]] = {}
    names: dict[str, dict[str, str]] = {}

    def on_interval(view: Any) -> None:
        lines = interval_lines(view, metrics, names)
        # Plain text, written as it is: rich's print of a line, even without markup and
        # highlighting, cost most of what the controller did in an interval.
        console.file.write("".join(f"{line}\n" for line in lines))
        console.file.flush()

    controller: Any
    if cluster is None and is_uri(spec.output):
        raise BadInput("-o", f"{spec.output!r}: a file system URI needs --cluster (a "
                       "distributed run copies its directory there); give a local directory")
    if cluster is not None:
        from harness.distributed.driver import DistributedRun
        from harness.distributed.split import given_lines
        controller = DistributedRun(spec, cluster, on_interval, warn,
                                    lambda line: console.print(line, markup=False))
    else:
        controller = Controller(spec, on_interval, warn, isolate=ui)
    controller.sinks += outputs(spec, controller, cluster.nodes if cluster is not None else 1)
    metrics.update({g.name: controller.metrics[i] for i, g in enumerate(spec.groups)})
    names.update(labels(spec, controller.metrics))
    console.print(f"run {controller.run_id} -> {controller.run_dir}", markup=False)
    for g in spec.groups:
        each = "client" if g.clients else "thread"
        pace = f"{g.per_thread_rate:g}/s per {each}" if g.per_thread_rate else "unthrottled"
        if g.rate_steps:
            pace = f"rate steps {g.rate_steps} (the group's msg/s)"
        clients = f" x{g.clients} clients" if g.clients else ""
        console.print(f"  {g.name}: {g.module} -d {g.destination} x{g.threads} threads"
                      f"{clients} x{g.processes} processes, {g.size} B, {pace}", markup=False)
    if cluster is not None:
        console.print(f"on {cluster.nodes} nodes of {cluster.master}:", markup=False)
        for line in given_lines(spec, cluster.nodes):
            console.print(line, markup=False)
    steering = _steering(spec, controller)
    try:
        if ui:
            result = _run_with_screen(controller)
        else:
            console.print("Ctrl-C stops gracefully; twice stops at once.", markup=False)
            result = controller.execute()
    finally:
        for part in reversed(steering):
            part.close()
    print_summary(console, result.summary,
                  controller.location if cluster is not None else str(result.run_dir))
    if spec.junit:
        from harness.rundir.junit import write_junit
        write_junit(Path(spec.junit), result.summary, controller.run_id)
        console.print(f"thresholds as JUnit XML: {spec.junit}", markup=False)
    return result


def _steering(spec: RunSpec, controller: Any) -> list[Any]:
    """--control's socket and --serve's page, each with a close() for the run's end."""
    parts: list[Any] = []
    if spec.serve is not None:
        from harness.screen.web import Background, page_server, screen_command

        command = screen_command("view", "--follow", "--ui", str(controller.run_dir))
        parts.append(Background(page_server(command, "127.0.0.1", spec.serve, None,
                                            f"harness: {spec.name}")))
        console.print(f"the run's page: http://127.0.0.1:{spec.serve}/", markup=False)
    if spec.control or spec.serve is not None:
        from harness.engine.control import ControlServer

        server = ControlServer(controller)
        try:
            server.start()
        except OSError as exc:
            for part in parts:
                part.close()
            raise BadInput("--control", f"cannot listen for the keys: {exc}") from None
        parts.append(server)
        console.print(f"the run's keys: harness view --follow {controller.run_dir} (its "
                      f"control socket {server.path}, this user's only)", markup=False)
    return parts


def outputs(spec: RunSpec, controller: Any, nodes: int) -> list[Any]:
    """The sinks a run's flags ask for besides the run directory and the lines."""
    out: list[Any] = []
    if spec.slo:
        from harness.rundir.judge import Judge
        # Said through the controller's log, which the live screen takes over when it runs.
        out.append(Judge(spec, controller.request_stop, lambda line: controller.on_log(line),
                         nodes))
    if spec.metrics_port is not None or spec.pushgateway:
        from harness.rundir.metrics import Metrics
        out.append(Metrics(spec, controller.run_id, controller.metrics,
                           lambda line: controller.on_log(line)))
    return out


def run_profile(path: Path, overrides: list[str], ui: bool, cluster: Any = None,
                omb: dict[str, Any] | None = None, check: bool = False) -> int:
    """A profile's runs; with a cluster (--cluster, else the profile's cluster: block), each
    run (a point of a sweep, a probe of a search) is one distributed run. With omb (from
    omb_given), path is an OpenMessaging Benchmark workload file run as a profile."""
    from harness.experiments.experiment import Experiment
    from harness.experiments.profile import load, load_data

    if omb is None:
        profile = load(path, overrides)
    else:
        data = {"connections": {"broker": {"transport": omb["transport"],
                                           **omb["connection"]}},
                "omb": str(path.resolve()), "run": omb["run"]}
        if omb.get("driver") is not None:
            data["omb-driver"] = str(omb["driver"].resolve())
        if omb["both"]:
            data["defaults"] = omb["both"]
        sided = [f"groups.{g}.{k}={json.dumps(v)}" for g in ("producer", "consumer")
                 for k, v in omb[g].items()]
        profile = load_data(path, "", data, {}, [*sided, *overrides])
    cluster = cluster or profile.cluster
    for note in profile.notes:
        warn(note)
    if check:
        what = f"a search over {profile.search.field} from {profile.search.start:g}" \
            if profile.search else f"{len(profile.points)} run{'s' * (len(profile.points) != 1)}"
        console.print(f"profile {profile.name}: {what}{profile_time(profile)}", markup=False)
        for number, point in enumerate(profile.points, 1):
            if len(profile.points) > 1:
                console.print(f"run {number} of {len(profile.points)}:", markup=False)
            print_plan(point.run, cluster)
        return 0
    if profile.points[0].scenario is not None:
        from harness.experiments.scenarios.experiment import run_profile as run_scenario
        return run_scenario(profile, lambda spec: execute(spec, ui, cluster), console)
    if len(profile.points) == 1 and profile.search is None:
        return execute(profile.points[0].run, ui, cluster).exit_code
    if is_uri(profile.points[0].run.output):
        raise BadInput("output", f"{profile.points[0].run.output!r}: a profile's runs and "
                       "results table are written under a local directory; copy it to a "
                       "Hadoop file system afterwards")
    what = f"a search over {profile.search.field}" if profile.search else \
        f"{len(profile.points)} runs"
    console.print(f"profile {profile.name}: {what}{profile_time(profile)}", markup=False)
    return Experiment(profile, lambda spec: execute(spec, ui, cluster), console).execute_all()


def profile_time(profile: Any) -> str:
    """How long a profile's runs take, said before it starts: each run's length and its
    drain's bound, and the settle wait between runs; empty for a search (its probes are
    not known in advance) or a run that ends by message count."""
    runs = [point.run for point in profile.points]
    if profile.search is not None or not all(run.duration for run in runs):
        return ""
    seconds = sum(run.duration + run.drain for run in runs) + \
        profile.settle.wait * (len(runs) - 1)
    return f", at most {format_seconds(seconds)} (each run's length and its drain's bound, " \
        f"and {profile.settle.wait:g} s between runs)"


def format_seconds(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if hours else \
        f"{minutes} min {rest} s" if minutes else f"{rest} s"


def _run_with_screen(controller: Any) -> Any:
    """The run under the live screen; the controller's log is printed again afterwards, so
    that nothing shown only on the screen is lost when it closes."""
    from harness.engine.runner import Signals
    from harness.screen.app import RunApp
    from harness.screen.live import LiveFeed

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
        warn(message)
    return result
