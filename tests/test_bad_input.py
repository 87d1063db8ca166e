"""Bad input: one line naming the flag, exit code 2, no traceback, nothing written."""

import pytest

S = ["-m", "loopback.Sender", "-d", "Q"]
CASES = [
    ("unknown transport", ["-m", "nope.Sender", "-d", "Q"], "-m", "unknown module"),
    ("unknown role", ["-m", "loopback.Sendr", "-d", "Q"], "-m",
     "unknown module 'loopback.Sendr': did you mean loopback.Sender?"),
    ("a module in the wrong case", ["-m", "mqtt.publisher", "-d", "Q"], "-m",
     "did you mean mqtt.Publisher?"),
    ("module without a dot", ["-m", "loopback", "-d", "Q"], "-m",
     "unknown module 'loopback': a module is TRANSPORT.Role"),
    ("bad size", [*S, "-ms", "12q"], "-ms", "not a size"),
    ("negative rate", [*S, "-rt", "-5"], "-rt", "must be >= 0"),
    ("negative total rate", [*S, "--rate", "-1"], "--rate", "must be >= 0"),
    ("missing destination", ["-m", "loopback.Sender"], "-d", "needs a destination"),
    ("zero threads", [*S, "-nt", "0"], "-nt", "must be >= 1"),
    ("threads not a number", [*S, "-nt", "many"], "-nt", "valid integer"),
    ("both rates", [*S, "-rt", "5", "--rate", "10"], "--rate", "not both"),
    ("zero interval", [*S, "-ss", "0"], "-ss", "must be > 0"),
    ("warm-up longer than run", [*S, "-rl", "5", "-sw", "5"], "-sw", "shorter than"),
    ("crc fraction above one", [*S, "--crc", "2"], "--crc", "fraction"),
    ("destination base without max", [*S, "-db", "2"], "-db", "only with -dx"),
    ("destination max below base", [*S, "-db", "5", "-dx", "3"], "-dx", "must be >= -db"),
    ("unknown body type", [*S, "--type", "map"], "--type", "bytes, text or xml"),
    ("property without =", [*S, "--property", "colour"], "--property", "key=value"),
    ("unreadable body file", [*S, "-mf", "/nonexistent/body"], "-mf", "cannot read"),
    ("bad fault", [*S, "--inject", "explode:Q:1"], "--inject", "ACTION:DESTINATION:N"),
    ("a protocol version where there is one", ["-m", "nats.Sender", "-d", "Q", "--protocol",
                                               "2"], "--protocol", "speaks one protocol"),
    ("the loopback broker's option without it", ["-m", "stomp.Sender", "-d", "Q",
                                                 "--loopback-delay", "5"], "--loopback-delay",
     "is for loopback; no group uses it"),
    ("persistent on loopback", [*S, "-pp"], "-pp", "does not support persistent"),
    ("poisson without a rate", [*S, "--poisson"], "--poisson", "needs a rate"),
    ("ramp without a rate", [*S, "-rp", "5"], "-rp", "needs a rate"),
    ("pacing a consumer", ["-m", "loopback.Receiver", "-d", "Q", "-rt", "5"], "-rt",
     "does not send on a schedule"),
    ("run option inside a group", [*S, "-g", "-m loopback.Receiver -d Q -rl 5"], "--group",
     "run-wide options"),
    ("group without module", [*S, "-g", "-d Q"], "--group", "needs -m"),
    ("a property mqtt does not carry", ["-m", "mqtt.Publisher", "-d", "t", "--property",
                                        "a=1"], "--property", "does not support properties"),
    ("unbalanced quote in group", [*S, "-g", "-m 'loopback.Receiver"], "--group",
     "quotation"),
    ("a misspelt option in a group", [*S, "-g", "-m loopback.Receiver -d Q --prefetc 5"],
     "--group", "no such option: --prefetc; did you mean --prefetch?"),
    ("a misspelt option", [*S, "--rat", "5"], "--rat", "Possible options: --ramp, --rate"),
    ("unknown option in group", [*S, "-g", "-m loopback.Receiver --bogus"], "--group",
     "--bogus"),
    ("loopback groups with different processes",
     [*S, "--processes", "2", "-g", "-m loopback.Receiver -d Q"], "--processes",
     "same --processes"),
    ("broker pid that does not exist", [*S, "--broker-pid", "999999999"], "--broker-pid",
     "no process"),
    ("unknown option", [*S, "--bogus"], "--bogus", "No such option"),
    ("zero commit count", [*S, "-tx", "-cc", "0"], "-cc", "must be >= 1"),
    ("duplicate group names", [*S, "-gn", "a", "-g", "-m loopback.Receiver -d Q -gn a"],
     "--group-name", "two groups"),
    ("no module at all", ["-rl", "5"], "-m", "at least one module"),
    ("destination without module", ["-d", "Q"], "-m", "without a module"),
    ("bad run name", [*S, "-n", "a/b"], "--name", "must be a letter"),
    ("zero reply timeout", ["-m", "loopback.Requestor", "-d", "Q", "--reply-timeout", "0"],
     "--reply-timeout", "must be > 0"),
    # what a broker flavour lacks is refused before the run, never silently ignored
    ("selector on RabbitMQ STOMP", ["-m", "stomp.Receiver", "-d", "Q", "--flavour", "rabbitmq",
                                    "--selector", "a = 1"], "--selector", "not support selectors"),
    ("durable on generic STOMP", ["-m", "stomp.Subscriber", "-d", "T", "--flavour", "generic",
                                  "--durable-name", "x"], "--durable-name", "not support durable"),
    ("temp queues on generic STOMP", ["-m", "stomp.Requestor", "-d", "Q", "--flavour",
                                      "generic"], "-m stomp.Requestor", "not support temp queues"),
    ("QoS on STOMP", ["-m", "stomp.Sender", "-d", "Q", "--qos", "1"], "--qos", "only mqtt"),
    ("unknown STOMP ack mode", ["-m", "stomp.Receiver", "-d", "Q", "--ack", "sometimes"],
     "--ack", "acknowledgement"),
    ("unknown STOMP flavour", ["-m", "stomp.Sender", "-d", "Q", "--flavour", "hornetq"],
     "--flavour", "flavours are"),
    ("a flavour for a transport that has none", ["-m", "http.Requestor", "-d",
     "http://127.0.0.1:8090/", "--flavour", "nginx"], "--flavour", "has no flavours"),
    ("STOMP 1.0", ["-m", "stomp.Sender", "-d", "Q", "--protocol", "1.0"], "--protocol",
     "1.1 and 1.2"),
    ("selector on a producer", ["-m", "stomp.Sender", "-d", "Q", "--selector", "a = 1"],
     "--selector", "does not consume"),
    ("MQTT queue without shared subscriptions", ["-m", "mqtt.Sender", "-d", "Q", "--flavour",
                                                 "activemq"], "-m mqtt.Sender",
     "not support queues"),
    ("QoS 2 on RabbitMQ MQTT", ["-m", "mqtt.Publisher", "-d", "T", "--flavour", "rabbitmq",
                                "--qos", "2"], "--qos", "0 to 1"),
    ("MQTT 5 on RabbitMQ 3.10", ["-m", "mqtt.Publisher", "-d", "T", "--flavour", "rabbitmq",
                                 "--protocol", "5"], "--protocol", "3.1.1"),
    ("persistent on MQTT", ["-m", "mqtt.Publisher", "-d", "T", "-pp"], "-pp",
     "not support persistent"),
    ("transactions on MQTT", ["-m", "mqtt.Publisher", "-d", "T", "-tx"], "-tx",
     "not support transactions"),
    ("selector on MQTT", ["-m", "mqtt.Subscriber", "-d", "T", "--selector", "a = 1"],
     "--selector", "not support selectors"),
    ("durable name on MQTT", ["-m", "mqtt.Subscriber", "-d", "T", "--durable-name", "d"],
     "--durable-name", "not support durable"),
    ("two MQTT responders without shared subscriptions",
     ["-m", "mqtt.Responder", "-d", "R", "--flavour", "activemq", "-nt", "2"], "-nt",
     "no shared subscriptions"),
    ("session expiry with a clean session", ["-m", "mqtt.Subscriber", "-d", "T",
                                             "--session-expiry", "60"], "--session-expiry",
     "--no-clean"),
    ("ack mode on MQTT", ["-m", "mqtt.Subscriber", "-d", "T", "--ack", "client"], "--ack",
     "only stomp"),
    ("QoS 3", ["-m", "mqtt.Publisher", "-d", "T", "--qos", "3"], "--qos", "0 to 2"),
    ("MQTT wildcard published to", ["-m", "mqtt.Publisher", "-d", "a/#"], "-d",
     "'a/#': Publisher publishes; wildcards (+ and #) are for subscribing"),
    ("MQTT '#' not the last level", ["-m", "mqtt.Subscriber", "-d", "a/#/b"], "-d",
     "'+' is a whole level and '#' the whole last level"),
    ("MQTT '+' inside a level", ["-m", "mqtt.Subscriber", "-d", "a/b+"], "-d",
     "'+' is a whole level"),
    # Options that would do nothing without another
    ("--slo-interval without --slo", ["-m", "loopback.Sender", "-d", "Q", "--slo-interval"],
     "--slo-interval", "without --slo"),
    ("--slo-abort without --slo", ["-m", "loopback.Sender", "-d", "Q", "--slo-abort", "2"],
     "--slo-abort", "without --slo"),
    ("--push-intervals without a gateway", ["-m", "loopback.Sender", "-d", "Q",
                                            "--push-intervals"], "--push-intervals",
     "without --pushgateway"),
    ("--metrics-host without a port", ["-m", "loopback.Sender", "-d", "Q", "--metrics-host",
                                       "0.0.0.0"], "--metrics-host", "without --metrics-port"),
    ("--random-ratio without a pool", ["-m", "loopback.Sender", "-d", "Q", "--random-ratio",
                                       "0.5"], "--random-ratio", "give --payload-pool"),
]


@pytest.mark.parametrize(("case", "args", "flag", "words"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_naming_the_flag(harness, case, args, flag, words):
    result = harness("run", *args, "-rl", "1") if "-rl" not in args else harness("run", *args)
    assert result.code == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert lines[0].startswith("harness: error: ")
    assert flag in lines[0] and words in lines[0], lines[0]
    assert result.run_dir is None, "nothing is written for bad input"


def test_unwritable_output_directory(harness, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = harness("run", *S, "-rl", "1", "-o", str(blocker / "runs"), output=False)
    assert result.code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "-o" in lines[0] and "cannot write" in lines[0], result.stderr


def test_there_are_at_least_fifteen_cases():
    assert len(CASES) + 1 >= 15


# -- every subcommand on each kind of bad file -------------------------------------------------

BAD_FILES = {
    "missing": None,
    "empty": b"",
    "binary": bytes(range(256)) * 2,
    "latin-1": "groups: [{module: loopback.Sender, destination: caf\xe9}]\n".encode("latin-1"),
    "deep": b"a: " + b"[" * 200 + b"]" * 200 + b"\n",
    "directory": "dir",
    "huge": "sparse",
}


def bad_file(folder, kind):
    """A file of the kind (or a path where there is none)."""
    path = folder / f"bad-{kind}"
    made = BAD_FILES[kind]
    if made == "dir":
        path.mkdir()
    elif made == "sparse":
        with path.open("wb") as f:
            f.truncate(3 * 2**30)
    elif made is not None:
        path.write_bytes(made)
    return path


def run_dir_of(folder, kind):
    """A run directory whose manifest and intervals are the bad file."""
    run = folder / f"run-{kind}"
    run.mkdir()
    source = bad_file(folder, kind)
    for name in ("manifest.json", "intervals.jsonl"):
        if source.is_file():
            (run / name).write_bytes(source.read_bytes()[:4096])
    return run


# subcommand, how the bad file is given, the flag or argument the error names
COMMANDS = [
    ("run profile", lambda p: ["run", str(p), "--check"], "PROFILE"),
    ("profiles check", lambda p: ["profiles", "check", str(p)], ""),
    ("run --omb", lambda p: ["run", "--omb", str(p), "-m", "kafka", "--check"], "omb"),
    ("sizes file", lambda p: ["run", *S, "--sizes", f"@{p}", "-rl", "1", "--check"],
     "--sizes"),
    ("password file", lambda p: ["run", "-m", "mqtt.Publisher", "-d", "t", "--user", "u",
                                 "--password-file", str(p), "-rl", "1", "--check"],
     "--password-file"),
    ("body file", lambda p: ["run", *S, "-mf", str(p), "-rl", "1", "--check"], "-mf"),
]
RUN_DIR_COMMANDS = [
    ("view", lambda d: ["view", str(d)]),
    ("report", lambda d: ["report", str(d)]),
    ("export", lambda d: ["export", str(d), "-f", "csv"]),
    ("compare", lambda d: ["compare", str(d), str(d)]),
]


def one_line_refusal(result, *names):
    assert result.code == 2, (result.code, result.stdout[-500:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("harness: "), lines[0]
    assert any(name in lines[0] for name in names), (names, lines[0])


# A body is bytes, any bytes, and a password any text: those files are bad only when they
# cannot be read at all (or are too large to be what they say).
UNREADABLE = ("missing", "directory", "huge")


@pytest.mark.parametrize(("command", "make", "names", "kind"), [
    pytest.param(*c, kind, id=f"{c[0]}-{kind}") for c in COMMANDS for kind in sorted(BAD_FILES)
    if c[0] not in ("body file", "password file") or kind in UNREADABLE])
def test_every_command_refuses_a_bad_file_in_one_line(harness, tmp_path, command, make, names,
                                                      kind):
    folder = tmp_path / "input"
    folder.mkdir()
    path = bad_file(folder, kind)
    before = sorted(p.name for p in folder.iterdir())
    result = harness(*make(path), output=False)  # --check: nothing is written anyway
    if command == "run --omb" and kind == "empty":
        names = "omb"
    one_line_refusal(result, names, str(path))  # the flag, or the file by its name
    # Nothing written beside the input, and no run.
    assert sorted(p.name for p in folder.iterdir()) == before
    assert result.run_dir is None


@pytest.mark.parametrize("kind", ["empty", "binary", "latin-1", "deep"])
@pytest.mark.parametrize(("command", "make"), RUN_DIR_COMMANDS,
                         ids=[c[0] for c in RUN_DIR_COMMANDS])
def test_every_reader_of_runs_refuses_a_bad_run_directory_in_one_line(harness, tmp_path, command,
                                                                       make, kind):
    folder = tmp_path / "input"
    folder.mkdir()
    run = run_dir_of(folder, kind)
    before = sorted(p.name for p in run.iterdir())
    result = harness(*make(run))
    one_line_refusal(result, "RUN")
    assert sorted(p.name for p in run.iterdir()) == before
