"""The manual's commands, run: every `harness ...` line of a shell block in README.md and
contrib/docs/docs/*.md. A `harness run` is run with --check (everything checked, nothing
connected or written), from a folder holding the files the commands name, and those on the
loopback broker run for real too, for a second; `harness merge` merges node runs made as
the manual makes them and `harness view` reads what it wrote; `harness serve` answers a
request; the other commands run as they are, against a run the test makes, or are listed
here with why not. Every --slo expression in the manual is parsed too."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, env

PAGES = [ROOT / "README.md", *sorted((ROOT / "contrib" / "docs" / "docs").glob("*.md"))]
# Commands shown with a placeholder (`...`, a master of the reader's own) that --check
# cannot take as they are: why, by a part of the command.
NOT_CHECKED = {
    "harness run ...": "a fragment: the flags to add to a run of the reader's own (the node "
                       "runs of the merge test stand in for it)",
    "spark://master:7077": "a cluster of the reader's own (the standalone cluster's command "
                           "beside it is checked)",
    "mosquitto-many.pid": "a broker started by the broker script's mosquitto-many, whose "
                          "pid file --broker-pid reads (tests/test_clients.py runs it)",
    "harness runs --ui": "a screen, until q: tests/test_watching.py drives the list",
}


def commands() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        text = page.read_text()
        for block in re.findall(r"```(?:sh|bash|console|shell)?\n(.*?)```", text, re.S):
            for line in re.sub(r"\\\n\s*", " ", block).splitlines():
                match = re.match(r"^\s*(?:[A-Z_]+=\S+\s+)*(harness\s.*)$", line)
                if match:
                    command = re.split(r"\s+#\s", match[1])[0].strip()
                    # A run sent to the background beside a command that reads it.
                    found.append((page.name, command.removesuffix("&").strip()))
    return found


def fixtures(where: Path) -> None:
    """What the manual's commands name: a workload, a certificate, payloads."""
    workload = ("name: manual\ntopics: 1\npartitionsPerTopic: 16\nmessageSize: 1024\n"
                "payloadFile: payload/payload-1Kb.data\nsubscriptionsPerTopic: 1\n"
                "consumerPerSubscription: 1\nproducersPerTopic: 1\nproducerRate: 1000\n"
                "consumerBacklogSizeGB: 0\ntestDurationMinutes: 1\n")
    (where / "payload").mkdir()
    (where / "payload" / "payload-1Kb.data").write_bytes(bytes(1024))
    (where / "workloads").mkdir()
    for name in ("1-topic-16-partitions-1kb.yaml", "workloads/1-topic-16-partitions-1kb.yaml"):
        (where / name).write_text(workload)
    (where / "kafka-throughput.yaml").write_text(
        "name: Kafka\ndriverClass: io.openmessaging.benchmark.driver.kafka."
        "KafkaBenchmarkDriver\nreplicationFactor: 3\nreset: true\ntopicConfig: |\n"
        "  min.insync.replicas=2\ncommonConfig: |\n  bootstrap.servers=localhost:9092\n"
        "  default.api.timeout.ms=600000\nproducerConfig: |\n  acks=all\n  linger.ms=1\n"
        "  batch.size=1048576\nconsumerConfig: |\n  auto.offset.reset=earliest\n"
        "  enable.auto.commit=false\n  max.partition.fetch.bytes=10485760\n")
    (where / "my-workload.yaml").write_text(workload.replace("partitionsPerTopic: 16",
                                                             "partitionsPerTopic: 1"))
    (where / "ca.pem").write_text("")
    # NATS credentials: a file of each kind, as far as the check reads it (their markers)
    (where / "bench.creds").write_text("-----BEGIN NATS USER JWT-----\neyJ0\n------END NATS "
                                       "USER JWT------\n-----BEGIN USER NKEY SEED-----\nSUA"
                                       "\n------END USER NKEY SEED------\n")
    (where / "user.nk").write_text("SUA\n")
    (where / "nats-token").write_text("not-a-real-secret\n")
    # Connecting to secured brokers: a password, a token, a client certificate and key, a
    # Kafka client's properties
    for name in ("secret.txt", "token.jwt", "client.pem", "client.key"):
        (where / name).write_text("not-a-real-secret\n")
    (where / "client.properties").write_text("security.protocol=SASL_SSL\n"
                                             "sasl.mechanism=SCRAM-SHA-512\n")
    shutil.copytree(ROOT / "profiles", where / "profiles")


CASES = commands()


def is_run(command: str) -> bool:
    return re.match(r"harness run(\s|$)", command) is not None


RUNS = [c for c in CASES if is_run(c[1])]


def test_the_manual_has_commands_to_check():
    assert len(RUNS) >= 40


@pytest.mark.parametrize(("page", "command"), RUNS, ids=[f"{p}:{c[12:60]}" for p, c in RUNS])
def test_each_run_in_the_manual_checks(page, command, tmp_path):
    skipped = [why for part, why in NOT_CHECKED.items() if part in command]
    if skipped:
        return  # listed in NOT_CHECKED with the reason
    fixtures(tmp_path)
    line = command if "--check" in command or "--help" in command else f"{command} --check"
    bin_dir = Path(sys.executable).parent
    done = subprocess.run(
        ["bash", "-c", f"harness() {{ {sys.executable} -m harness \"$@\"; }}; {line}"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**env(), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
             "HARNESS_PASSWORD": "not-a-real-secret"}, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"{page}: {command}\n{done.stderr}"
    assert "--help" in line or "checked: nothing was connected" in done.stdout, done.stdout
    assert not (tmp_path / "runs").exists()
    # Bounded, so that a reader who copies it gets a run that ends.
    assert "until stopped" not in done.stdout, \
        f"{page}: {command}: runs until stopped: give it -rl or -mg"


@pytest.fixture(scope="module")
def a_run(tmp_path_factory) -> Path:
    """A short loopback run, standing for the runs the manual's commands name."""
    out = tmp_path_factory.mktemp("made")
    subprocess.run([sys.executable, "-m", "harness", "run", "-m", "loopback.Sender", "-d", "Q",
                    "-rt", "200", "-rl", "2", "-ss", "1", "--no-ui", "-o", str(out), "-g",
                    "-m loopback.Receiver -d Q"], check=True, capture_output=True, env=env(),
                   timeout=120)
    (run,) = out.iterdir()
    return run


MERGES = [c for c in CASES if c[1].startswith("harness merge")]
SERVES = [c for c in CASES if c[1].startswith("harness serve")]
MERGED_VIEWS = [c for c in CASES if c[1].startswith("harness view merged")]
OTHERS = [c for c in CASES if not is_run(c[1]) and c not in MERGES + SERVES + MERGED_VIEWS]
LOOPBACK = [c for c in RUNS if re.search(r"-m\s+loopback\.", c[1]) and "..." not in c[1]]


def test_the_manual_has_commands_of_each_kind_to_run():
    assert len(MERGES) >= 2 and len(SERVES) >= 2 and len(LOOPBACK) >= 8
    # Every merged run the manual views is one a merge on the same page wrote.
    assert {p for p, _ in MERGED_VIEWS} <= {p for p, _ in MERGES}


def shell(command: str, where: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """A manual's line as the reader's shell runs it, `harness` this checkout's."""
    return subprocess.run(
        ["bash", "-c", f"harness() {{ {sys.executable} -m harness \"$@\"; }}; {command}"],
        capture_output=True, text=True, timeout=timeout, cwd=where, env=env(),
        stdin=subprocess.DEVNULL)


def shortened(command: str, port: int) -> str:
    """A loopback run of the manual, cut to a second measured after no warm-up, its page
    (if it serves one) on a free port, its files under runs/."""
    line = re.sub(r"(-rl|--run-length)\s+\d+", r"\1 1", command)
    line = re.sub(r"(-sw|--warmup)\s+\d+", r"\1 0", line)
    line = re.sub(r"--serve\s+\d+", f"--serve {port}", line)
    for flag, given in (("--no-ui", "--no-ui"), ("-o runs", " -o ")):
        if given not in line:
            line += f" {flag}"
    return line


@pytest.mark.parametrize(("page", "command"), LOOPBACK,
                         ids=[f"{p}:{c[12:60]}" for p, c in LOOPBACK])
def test_each_loopback_run_in_the_manual_runs(page, command, tmp_path):
    """Shortened to a second, on the loopback broker, which needs no server: it runs to its
    end, and writes a run whose producers counted what they sent and whose consumers
    received it all."""
    from tests.conftest import free_port

    line = shortened(command, free_port())
    done = shell(line, tmp_path, 120)
    assert done.returncode == 0, f"{page}: {line}\n{done.stderr}"
    (run,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run / "summary.json").read_text())
    groups = summary["groups"]
    assert all(g["count"] > 0 for g in groups.values()), (line, groups)
    assert all(g["lost"] == 0 for g in groups.values()), (line, groups)


def made_nodes(flags: str, names: list[str], where: Path) -> None:
    """The node runs a merge of the manual names (`client1/*-run`), made as the manual makes
    them: its `harness run ... --run-id ID --node NODE --nodes N` with a loopback load for
    the `...`, each node its own name, moved to the path named."""
    for named in names:
        node = named.split("/")[0]
        out = where / f"made-{node}"
        mine = re.sub(r"--node\s+\S+", f"--node {node}", flags)
        done = shell(f"harness run -m loopback.Sender -d Q -rt 200 -rl 1 -sw 0 -ss 1 --no-ui "
                     f"-o {out} -g '-m loopback.Receiver -d Q' {mine}", where, 120)
        assert done.returncode == 0, done.stderr
        (run,) = out.iterdir()
        target = where / named.replace("*", "20261122T101500Z")
        target.parent.mkdir(parents=True, exist_ok=True)
        run.rename(target)


@pytest.mark.parametrize(("page", "command"), MERGES, ids=[p for p, _ in MERGES])
def test_each_merge_in_the_manual_merges_node_runs_and_is_viewed(page, command, tmp_path):
    """The page's node runs made, its merge run as written (on an embedded Spark), and the
    page's `harness view merged` of what the merge wrote: the merged summary counts every
    node's messages."""
    (fragment,) = {c for p, c in CASES if p == page and c.startswith("harness run ...")
                   and "--run-id" in c}
    flags = fragment.removeprefix("harness run ...")
    names = command.split(" -o ")[0].split()[2:]
    made_nodes(flags, names, tmp_path)
    done = shell(command, tmp_path)
    assert done.returncode == 0, f"{page}: {command}\n{done.stderr}"
    output = tmp_path / command.split(" -o ")[1].split()[0]
    (merged,) = json.loads((output / "summary.json").read_text())["runs"].values()
    nodes = [json.loads((tmp_path / n.replace("*", "20261122T101500Z") / "summary.json")
                        .read_text()) for n in names]
    assert merged["groups"]["sender"]["count"] == \
        sum(n["groups"]["sender"]["count"] for n in nodes), merged["groups"]
    views = [c for p, c in MERGED_VIEWS if p == page]
    assert views
    for view in views:
        seen = shell(view, tmp_path, 120)
        assert seen.returncode == 0, f"{page}: {view}\n{seen.stderr}"
        assert "sender" in seen.stdout and "receiver" in seen.stdout, seen.stdout


@pytest.mark.parametrize(("page", "command"), SERVES, ids=[p for p, _ in SERVES])
def test_each_serve_in_the_manual_answers_a_request(page, command, a_run, tmp_path):
    """Run as written but for its port (a free one), beside a runs/ holding a run: the page
    it serves answers, titled with the directory it lists, and Ctrl-C stops it."""
    import signal
    import time
    import urllib.request

    from tests.conftest import free_port

    shutil.copytree(a_run, tmp_path / "runs" / a_run.name)
    port = free_port()
    argv = [sys.executable, "-m", "harness", *re.sub(r"--port\s+\d+", f"--port {port}",
                                                     command).split()[1:]]
    server = subprocess.Popen(argv, cwd=tmp_path, env=env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        deadline, page_text = time.monotonic() + 60, ""
        while not page_text:
            assert server.poll() is None, server.communicate()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as answer:
                    assert answer.status == 200
                    page_text = answer.read().decode()
            except OSError:
                assert time.monotonic() < deadline, f"{page}: {command}: nothing served"
                time.sleep(0.2)
        assert "harness: runs" in page_text, page_text[:500]
    finally:
        server.send_signal(signal.SIGINT)
        out, err = server.communicate(timeout=30)
    assert server.returncode == 0 and "Traceback" not in err, (out, err)


@pytest.mark.parametrize(("page", "command"), OTHERS, ids=[f"{p}:{c[8:50]}" for p, c in OTHERS])
def test_each_other_command_in_the_manual_runs(page, command, a_run, tmp_path):
    if any(part in command for part in NOT_CHECKED):
        return  # listed in NOT_CHECKED with the reason
    for named in re.findall(r"\bruns/\S+", command):  # the runs it names, made
        shutil.copytree(a_run, tmp_path / named.replace("*", "20261128T122054Z"))
    if command.startswith(("harness runs", "harness compare --last", "harness view --follow")):
        # The runs it lists under runs/, two of them, bearing the labels it asks for.
        labels = re.findall(r"--label\s+(\S+)", command)
        for copy in ("1", "2"):
            shutil.copytree(a_run, tmp_path / "runs" / f"{a_run.name}-{copy}")
            manifest = tmp_path / "runs" / f"{a_run.name}-{copy}" / "manifest.json"
            recorded = json.loads(manifest.read_text())
            recorded["options"]["label"] = labels
            manifest.write_text(json.dumps(recorded))
    done = shell(command, tmp_path)
    assert done.returncode == 0, f"{page}: {command}\n{done.stderr}"


def test_every_threshold_in_the_manual_parses():
    """Each --slo "..." the manual writes, in a command or in its prose, against groups of
    the names the manual uses."""
    from harness.stats.slo import parse

    names = ("sender", "receiver", "publisher", "subscriber", "producer", "consumer",
             "requestor", "responder", "dc", "sm", "hq")
    groups = {name: ["latency", "service", "delay", "confirm"] for name in names}
    found = {m for page in PAGES for m in re.findall(r'--slo\s+"([^"]+)"', page.read_text())}
    assert len(found) >= 5
    for text in sorted(found):
        parse(text, groups, dict.fromkeys(names, 1000.0))
