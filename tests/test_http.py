"""The http transport (urllib3's Requestor) against a real nginx from Debian's packages,
started by the broker script on 127.0.0.1:8090 with a fixed answer, a failing path and a
slow one (20 requests a second)."""

import pytest

NGINX = "http://127.0.0.1:8090"


def test_round_trips_against_nginx_each_timed_from_its_intended_send(harness, brokers):
    done = harness("run", "-m", "http.Requestor", "-d", f"{NGINX}/", "-mg", "400", "-rt", "400",
                   "-ss", "1", "--property", "x-test=1",
                   "-g", f"-m http.Requestor -gn get -d {NGINX}/ --method GET -mg 100 -rt 100")
    assert done.code == 0, done.stderr
    for name, count in (("requestor", 400), ("get", 100)):
        group = done.summary["groups"][name]
        assert group["sent"] == count and group["received"] == count, name
        assert group["errors"] == 0 and group["timeouts"] == 0, name


def test_an_error_status_is_counted_by_its_code(harness, brokers):
    done = harness("run", "-m", "http.Requestor", "-d", f"{NGINX}/status/500", "-mg", "50",
                   "-rt", "100", "-ss", "1")
    assert done.code == 0, done.stderr
    group = done.summary["groups"]["requestor"]
    assert group["errors"] == 50 and group["received"] == 0
    assert "HTTP 500 error: 500 Internal Server Error" in done.stderr


def test_a_slow_endpoint_shows_in_latency_not_in_a_slower_schedule(harness, brokers):
    # 40 requests a second asked of an endpoint that answers 20: each waits for the one
    # before, so from its intended send time it waits longer and longer (wrk2's rule), while
    # the time from its actual send stays about 50 ms.
    done = harness("run", "-m", "http.Requestor", "-d", f"{NGINX}/slow", "-rt", "40", "-rl", "3",
                   "-ss", "1")
    assert done.code == 0, done.stderr
    group = done.summary["groups"]["requestor"]
    assert 40 <= group["received"] <= 75
    assert group["service"]["p50"] < 120_000
    assert group["latency"]["p99"] > 900_000
    assert group["unsent"] > 0  # due before the stop, never sent: counted, their wait recorded


def test_requests_left_unsent_at_the_stop_never_exceed_the_message_count(harness, brokers):
    # 60 requests asked at 40 a second of an endpoint that answers 20: about 40 are answered
    # in the 2 s, so 20 of the 60 were due and never sent; the 40 more the schedule would
    # have drawn before the stop were never asked for (-mg 60).
    done = harness("run", "-m", "http.Requestor", "-d", f"{NGINX}/slow", "-rt", "40", "-rl", "2",
                   "-mg", "60", "-ss", "1")
    assert done.code == 0, done.stderr
    group = done.summary["groups"]["requestor"]
    assert group["unsent"] > 0
    assert group["sent"] + group["unsent"] == 60


@pytest.mark.parametrize(("args", "message"), [
    (["-m", "http.Sender", "-d", NGINX], "-m: the http transport has only a Requestor"),
    (["-m", "http.Requestor", "-d", NGINX, "--method", "DELETE"], "--method: methods are"),
    (["-m", "http.Requestor", "-d", NGINX, "-pp"], "-pp: means nothing to an HTTP request"),
])
def test_what_http_cannot_do_is_refused_before_the_run(harness, args, message):
    done = harness("run", *args, "-rl", "1")
    assert done.code == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr
