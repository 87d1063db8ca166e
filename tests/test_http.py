"""The http transport (urllib3's Requestor) against a real nginx from Debian's packages,
started by the broker script on 127.0.0.1:8090 with a fixed answer, a failing path and a
slow one (20 requests a second)."""

import getpass
import subprocess

import pytest

from tests.conftest import free_port, make_certificates, wait_for_port

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


@pytest.mark.parametrize("scheme", ["http", "HTTP"])
def test_a_server_that_is_down_at_the_start_is_one_line_and_exit_1(harness, scheme):
    # The URL's own host and port (a path on --port: tests/test_restart.py); a scheme is
    # the same in capitals, as RFC 3986 has it.
    port = free_port()
    result = harness("run", "-m", "http.Requestor", "-d", f"{scheme}://127.0.0.1:{port}/x",
                     "-rl", "1")
    assert result.code == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"cannot connect to 127.0.0.1:{port}" in lines[0], \
        result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["-m", "http.Sender", "-d", NGINX], "-m: the http transport has only a Requestor"),
    (["-m", "http.Requestor", "-d", NGINX, "--method", "DELETE"], "--method: methods are"),
    (["-m", "http.Requestor", "-d", NGINX, "-pp"], "-pp: means nothing to an HTTP request"),
    (["-m", "http.Requestor", "-d", NGINX, "--ca", __file__], "--ca: needs --tls (or an "
     "https:// destination)"),
    (["-m", "http.Requestor", "-d", "ftp://127.0.0.1/x"], "-d: 'ftp://127.0.0.1/x': a URL "
     "must be http:// or https://"),
    (["-m", "http.Requestor", "-d", "http://127.0.0.1:70000/"], "-d: 'http://127.0.0.1:70000/'"
     ": Port out of range"),
    (["-m", "http.Requestor", "-d", "http://[::1/"], "-d: 'http://[::1/': Invalid IPv6 URL"),
    (["-m", "http.Requestor", "-d", "http:///x"], "-d: 'http:///x': no host"),
])
def test_what_http_cannot_do_is_refused_before_the_run(harness, args, message):
    done = harness("run", *args, "-rl", "1")
    assert done.code == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr


# -- nginx of the test's own: TLS with a certificate the test makes, basic authentication

def own_nginx(tmp_path, listen: str, server: str):
    """Start nginx on a free port with one server block; yields the port. Its workers run
    as the test's user, who can read the test's own files (nginx started by root would
    otherwise hand them to nobody)."""
    port = free_port()
    for folder in ("logs", "temp"):
        (tmp_path / folder).mkdir()
    conf = tmp_path / "nginx.conf"
    conf.write_text(f"""
daemon off;
user {getpass.getuser()};
worker_processes 1;
pid {tmp_path}/nginx.pid;
error_log {tmp_path}/logs/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {tmp_path}/temp;
    server {{
        listen 127.0.0.1:{port}{listen};
        default_type text/plain;
        {server}
    }}
}}
""")
    proc = subprocess.Popen(["nginx", "-p", str(tmp_path), "-e", str(tmp_path / "logs/error.log"),
                             "-c", str(conf)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    wait_for_port(port)
    yield port
    proc.terminate()
    proc.wait(10)


@pytest.fixture
def tls_nginx(tmp_path):
    make_certificates(tmp_path)
    for port in own_nginx(tmp_path, " ssl", f"""
        ssl_certificate {tmp_path}/server.pem;
        ssl_certificate_key {tmp_path}/server.key;
        location / {{ return 200 "secure\\n"; }}"""):
        yield f"https://127.0.0.1:{port}/", tmp_path / "ca.pem"


SECRET = "not-a-real-secret"  # what tests/conftest.py's env() puts in MQTT_SECRET


@pytest.fixture
def auth_nginx(tmp_path):
    (tmp_path / "users").write_text(f"bob:{{PLAIN}}{SECRET}\n")
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "ok.txt").write_text("welcome\n")
    # A file, not `return 200`: a return answers before nginx checks the credentials.
    for port in own_nginx(tmp_path, "", f"""
        auth_basic "harness";
        auth_basic_user_file {tmp_path}/users;
        location / {{ root {tmp_path}/www; try_files /ok.txt =404; }}"""):
        yield f"http://127.0.0.1:{port}/"


def test_basic_authentication_from_user_and_password(harness, brokers, auth_nginx):
    done = harness("run", "-m", "http.Requestor", "-d", auth_nginx, "--method", "GET",
                   "--user", "bob", "--password-env", "MQTT_SECRET", "-mg", "50", "-rt", "100",
                   "-ss", "1")
    assert done.code == 0, done.stderr
    group = done.summary["groups"]["requestor"]
    assert group["sent"] == group["received"] == 50 and group["errors"] == 0
    for path in done.run_dir.iterdir():
        assert SECRET not in path.read_text(errors="replace"), path
    assert SECRET not in done.stdout + done.stderr


def test_a_bearer_token_given_as_a_header_stays_out_of_run_files(harness, brokers):
    done = harness("run", "-m", "http.Requestor", "-d", f"{NGINX}/", "--method", "GET",
                   "--property", f"Authorization=Bearer {SECRET}", "--property", "X-Region=eu",
                   "-mg", "5", "-rt", "100", "-ss", "1")
    assert done.code == 0, done.stderr
    assert done.summary["groups"]["requestor"]["received"] == 5
    properties = done.manifest["options"]["groups"][0]["properties"]
    assert properties == {"Authorization": "***", "X-Region": "eu"}
    for path in done.run_dir.iterdir():
        assert SECRET not in path.read_text(errors="replace"), path
    assert SECRET not in done.stdout + done.stderr


def test_a_request_the_server_does_not_authorise_is_an_error_by_code(harness, brokers,
                                                                      auth_nginx):
    done = harness("run", "-m", "http.Requestor", "-d", auth_nginx, "--method", "GET",
                   "--user", "bob", "-mg", "5", "-rt", "100", "-ss", "1")
    group = done.summary["groups"]["requestor"]
    assert group["received"] == 0 and group["errors"] == 5
    assert "HTTP 401" in done.stdout + done.stderr


def test_credentials_in_the_url_are_refused_unshown(harness):
    done = harness("run", "-m", "http.Requestor", "-d", f"http://bob:{SECRET}@127.0.0.1/",
                   "-rl", "1")
    assert done.code == 2
    assert "-d: credentials go in --user and --password" in done.stderr
    assert SECRET not in done.stdout + done.stderr
    assert done.run_dir is None


def test_https_round_trips_verified_with_the_ca_given(harness, brokers, tls_nginx):
    url, ca = tls_nginx
    done = harness("run", "-m", "http.Requestor", "-d", url, "--ca", str(ca), "-mg", "100",
                   "-rt", "200", "-ss", "1")
    assert done.code == 0, done.stderr
    group = done.summary["groups"]["requestor"]
    assert group["sent"] == group["received"] == 100 and group["errors"] == 0


def test_https_refuses_a_server_it_cannot_verify(harness, brokers, tls_nginx):
    url, _ = tls_nginx
    done = harness("run", "-m", "http.Requestor", "-d", url, "-mg", "5", "-rt", "10",
                   "-ss", "1")
    group = done.summary["groups"]["requestor"]
    assert group["received"] == 0 and group["errors"] == 5
    assert "CERTIFICATE_VERIFY_FAILED" in done.stderr, done.stderr


def test_a_path_whose_query_holds_a_url_is_a_path_on_the_port(harness, brokers):
    done = harness("run", "-m", "http.Requestor", "-d", "/x?next=http://elsewhere/",
                   "--port", "8090", "-mg", "5", "-rt", "50", "-ss", "1")
    assert done.code == 0, done.stderr
    group = done.summary["groups"]["requestor"]
    assert group["received"] == 5 and group["errors"] == 0


@pytest.fixture
def dribbling_nginx(tmp_path):
    """A server whose every read comes in time and whose whole response does not: 3,000
    bytes sent at 2,000 bytes a second."""
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "slow.txt").write_text("x" * 3000)
    for port in own_nginx(tmp_path, "", f"""
        location / {{ root {tmp_path}/www; limit_rate 2000; try_files /slow.txt =404; }}"""):
        yield f"http://127.0.0.1:{port}/"


def test_a_response_later_than_the_reply_timeout_as_a_whole_is_a_sent_request_timed_out(
        harness, brokers, dribbling_nginx):
    done = harness("run", "-m", "http.Requestor", "-d", dribbling_nginx, "--method", "GET",
                   "--reply-timeout", "1", "-rt", "2", "-rl", "4", "-ss", "1")
    assert done.code == 0, done.stderr
    group = done.summary["groups"]["requestor"]
    # Every request went out, none was answered in time: each is sent and a timeout,
    # counted once as an error, its latency at least the timeout.
    assert group["received"] == 0
    assert group["sent"] >= 2 and group["timeouts"] == group["sent"] == group["errors"]
    assert group["latency"]["p50"] >= 1_000_000
    assert "no response within 1 s" in done.stdout + done.stderr
