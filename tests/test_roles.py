"""Every role on the loopback transport, run through the CLI."""

import pytest

from harness.stats.histogram import decode


def test_request_reply_round_trips_are_recorded(harness):
    result = harness("run", "-m", "loopback.Requestor", "-nt", "4", "-rt", "200", "-d", "REQ",
                     "-rl", "2", "-ss", "1", "-g", "-m loopback.Responder -d REQ -nt 2")
    assert result.code == 0, result.stderr
    requestor = result.summary["groups"]["requestor"]
    responder = result.summary["groups"]["responder"]
    # 1,600 were due; one due just before the stop that a thread woke too late to send is
    # unsent, not sent (a rate is what was sent).
    sent = requestor["sent"]
    assert sent + requestor["unsent"] == 1600 and requestor["unsent"] <= 4
    assert sent == requestor["received"]
    assert requestor["timeouts"] == 0 and requestor["errors"] == 0
    assert responder["received"] == responder["sent"] == sent
    # Bytes are the bodies a group sent and received: requests and replies, 256 B each.
    assert requestor["bytes"] == responder["bytes"] == 2 * sent * 256
    # Requests and replies both pass through the broker: 2 x 800 messages a second each way.
    # A reply still in flight when the measured span ends (at most one per requestor
    # thread, 4 in the 2 s) counts in the drain, not in the rate.
    throughput = result.summary["throughput"]
    for figure in ("received_by_broker", "dispatched"):
        assert sent - 4 / 2 <= throughput[figure] <= sent, throughput
    assert throughput["replication_grade"] == pytest.approx(1.0, abs=0.0025)
    latency = decode(requestor["histograms"]["latency"])
    assert latency.get_total_count() == sent + requestor["unsent"]  # unsent: their wait
    assert requestor["latency"]["p50"] <= requestor["latency"]["max"]


def test_requests_without_a_responder_time_out(harness):
    result = harness("run", "-m", "loopback.Requestor", "-mg", "2", "-d", "REQ",
                     "--reply-timeout", "0.2", "-ss", "1")
    assert result.code == 0, result.stderr
    requestor = result.summary["groups"]["requestor"]
    assert requestor["timeouts"] == 2 and requestor["received"] == 0


def test_publish_subscribe_fans_out_to_every_subscriber(harness):
    result = harness("run", "-m", "loopback.Publisher", "-rt", "500", "-d", "T", "-rl", "2",
                     "-ss", "1", "-g", "-m loopback.Subscriber -d T -nt 3")
    assert result.code == 0, result.stderr
    summary = result.summary
    publisher = summary["groups"]["publisher"]
    assert publisher["sent"] + publisher["unsent"] == 1000 and publisher["unsent"] <= 1
    assert summary["groups"]["subscriber"]["received"] == 3 * publisher["sent"]
    # Over every send of the run, each received by the three subscribers: the copies of
    # the last messages that reach a subscriber in the drain count too.
    assert summary["throughput"]["replication_grade"] == 3.0
    assert summary["delivery"][0]["missing"] == 0


def test_transacted_groups_commit_every_cc_messages(harness):
    result = harness("run", "-m", "loopback.Sender", "-tx", "-cc", "10", "-mg", "95", "-d", "Q",
                     "-ss", "1", "-g", "-m loopback.Receiver -d Q -tx -cc 5")
    assert result.code == 0, result.stderr
    sender = result.summary["groups"]["sender"]
    receiver = result.summary["groups"]["receiver"]
    assert sender["commits"] == 10  # 9 full transactions and the last 5 messages
    assert receiver["received"] == 95 and receiver["commits"] == 19
    assert receiver["lost"] == 0


def test_message_count_ends_the_run_without_waiting_out_the_interval(harness):
    result = harness("run", "-m", "loopback.Sender", "-mg", "250", "-nt", "2", "-d", "Q",
                     "-ss", "30", "-g", "-m loopback.Receiver -d Q")
    assert result.code == 0, result.stderr
    assert result.manifest["stopped_by"] == "message count"
    assert result.summary["groups"]["receiver"]["received"] == 500
    assert result.manifest["end"] - result.manifest["start"] < 15


def test_properties_body_file_and_correlation_id_are_accepted(harness, tmp_path):
    body = tmp_path / "body.xml"
    body.write_bytes(b"<order id='1'/>" * 10)
    result = harness("run", "-m", "loopback.Sender", "-mg", "10", "-d", "Q", "-mf", str(body),
                     "--property", "region=eu", "-co", "c", "-ss", "1",
                     "-g", "-m loopback.Receiver -d Q --crc 1")
    assert result.code == 0, result.stderr
    receiver = result.summary["groups"]["receiver"]
    assert receiver["bytes"] == 10 * len(body.read_bytes())
    assert receiver["corrupt"] == 0


def test_ramp_and_poisson_pacing_run(harness):
    result = harness("run", "-m", "loopback.Sender", "-rt", "400", "-rp", "2", "--poisson",
                     "-d", "Q", "-rl", "4", "-ss", "1", "-g", "-m loopback.Receiver -d Q")
    assert result.code == 0, result.stderr
    sent = [r["sent"] for r in result.records("counters") if r["group"] == "sender"]
    # Ramp: the first second sends about a quarter of the second one's rate ramp share.
    assert sent[0] < sent[2] * 0.5
    assert 0.8 * 1200 <= sum(sent[:4]) <= 1.2 * 1200


def test_the_manuals_worked_example_of_a_role_runs(tmp_path):
    """The extending page's SlowReceiver, taken from the page as it stands and registered as
    the page says: a new row and a new class, nothing else, and the run counts it as a
    consumer (every message received, the wait in its latency)."""
    import json

    from tests.conftest import run_manual_example

    done = run_manual_example(
        "SlowReceiver", "slow_receiver", "import slow_receiver as ex; "
        "from harness.modules.interface.roles import ROLES; ROLES['SlowReceiver'] = ex.ROW; "
        "from harness.engine.roles import WORKERS; WORKERS['SlowReceiver'] = ex.SlowReceiver",
        ["run", "-m", "loopback.Sender", "-d", "Q", "-rt", "1000", "-mg", "1000", "-ss", "1",
         "--drain", "10", "-o", str(tmp_path / "runs"), "-g", "-m loopback.SlowReceiver -d Q"],
        tmp_path)
    assert done.returncode == 0, done.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    slow = summary["groups"]["slowreceiver"]
    assert slow["received"] == 1000 and slow["lost"] == 0
    # 2 ms a message behind 1 ms sends: the last waits about a second; a Receiver, a few ms
    assert decode(slow["histograms"]["latency"]).get_max_value() > 500_000
    # the delivery check counted it as the destination's consumer
    (check,) = summary["delivery"]
    assert check["missing"] == 0 and check["expected"] == 1000
