"""A broker restarted during a run: workers reconnect and resubscribe, the outage is counted,
and persistent messages on an ActiveMQ queue are not lost."""

import json
import subprocess
import time

from harness.stats.histogram import decode
from tests.conftest import ROOT, env, harness_command, only_run_dir, unique


def test_activemq_restart_mid_run_loses_no_persistent_message(tmp_path, brokers):
    d = unique("restart")
    amq = ["--port", "61613", "--flavour", "activemq"]
    out = tmp_path / "runs"
    proc = subprocess.Popen(
        harness_command("run", "-m", "stomp.Sender", "-d", d, "-pp", "-rt", "100", "-rl", "25",
                        "-ss", "1", "--drain", "20", *amq, "-o", str(out), "-g",
                        f"-m stomp.Receiver -d {d} --ack client-individual {' '.join(amq)}"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(), cwd=tmp_path)
    time.sleep(8)
    subprocess.run(["bash", str(ROOT / "contrib" / "brokers" / "brokers.sh"), "restart",
                    "activemq"], check=True, timeout=180)
    stdout, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 0, stderr
    summary = json.loads((only_run_dir(out) / "summary.json").read_text())
    sender, receiver = summary["groups"]["sender"], summary["groups"]["receiver"]
    # The outage happened and is counted on both sides.
    for group in (sender, receiver):
        assert group["reconnects"] >= 1
        assert group["outage_ms"] > 1000
    assert sender["errors"] > 0
    # Every message the broker confirmed was delivered: nothing lost.
    assert receiver["lost"] == 0
    (delivery,) = summary["delivery"]
    assert delivery["missing"] == 0
    assert receiver["received"] - receiver["duplicated"] == sender["sent"] > 1000
    assert "reconnects=" in stdout and "outage sender" in stdout
    # The sends that failed are in the delay histogram too (at least until they failed), and
    # the first failure of each interval is logged with its reason.
    delay = decode(sender["histograms"]["delay"])
    assert delay.get_total_count() > sender["sent"]
    assert delay.get_max_value() > 1_000_000
    assert "sender: send error:" in stdout + stderr
