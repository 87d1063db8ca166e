"""--client-config on every transport whose client library takes settings: refused before
anything connects when the library does not take the key or the value, or when a flag of the
harness sets it; taken from .properties and YAML files. What each key does on the wire is
tests/test_wire.py's."""

from __future__ import annotations

import json

import pytest

from tests.conftest import settings_for, unique

REFUSED = [
    ("amqp.Sender", ["chanel_max=5"], "not a setting pika's ConnectionParameters takes (did "
                                      "you mean channel_max?)"),
    ("amqp.Sender", ["heartbeat=5"], "heartbeat is set with --heartbeat"),
    ("amqp.Sender", ["frame_max=12"], "pika's ConnectionParameters refuses frame_max: Min "
                                      "AMQP 0.9.1 Frame Size is 4096"),
    ("amqp.Sender", ["connection_attempts=3"], "the harness sets connection_attempts itself"),
    ("nats.Sender", ["pedantic=maybe"], "pedantic: 'maybe' is not true or false"),
    ("nats.Sender", ["name=x"], "name is set with --client-id"),
    ("redis.Sender", ["client_name=x"], "client_name is set with --client-id"),
    ("redis.Sender", ["socket_keepalive_options=1"], "socket_keepalive_options: redis-py's "
                                                     "Redis() takes typing.Union[typing.Mapping"),
    ("stomp.Sender", ["bind_host_port=4000"], "bind_host_port: give HOST:PORT"),
    ("stomp.Sender", ["vhost=/"], "vhost is set with --vhost"),
    ("mqtt.Sender", ["properties.ReceiveMaximum=5"], "properties.NAME are MQTT 5's: add "
                                                     "--protocol 5"),
    ("mqtt.Sender", ["properties.ReceiveMaximum=0", "--protocol", "5"],
     "ReceiveMaximum property value must be in the range 1-65535"),
    ("mqtt.Sender", ["properties.ContentType=x", "--protocol", "5"], "not a setting paho's "
                                                                     "connect() takes"),
    ("kafka.Sender", ["no.such.thing=1"], 'No such configuration property: "no.such.thing"'),
    ("stomp.Sender", ["frame"], "give KEY=VALUE"),
]


@pytest.mark.parametrize(("module", "given", "words"), REFUSED,
                         ids=[f"{m}-{g[0]}" for m, g, _ in REFUSED])
def test_a_setting_the_library_would_not_take_is_refused(module, given, words):
    """Each transport's own refusal, as the run's check asks it before anything connects."""
    from harness.modules import transport_class

    item, *rest = given
    extra = {"protocol": rest[1]} if rest else {}
    settings = settings_for(module, client_config=[item], **extra)
    problems = transport_class(module.split(".")[0]).problems(settings)
    assert [flag for flag, _ in problems] == ["--client-config"], problems
    assert words in problems[0][1], problems


@pytest.mark.parametrize(("module", "item", "words"), [
    ("amqp.Sender", "chanel_max=5", "did you mean channel_max?"),
    ("kafka.Sender", "no.such.thing=1", 'No such configuration property: "no.such.thing"'),
])
def test_a_refused_setting_is_one_line_and_exit_2_from_the_command(harness, module, item,
                                                                   words):
    refused = harness("run", "-m", module, "-d", "Q", "-rl", "1", "--client-config", item,
                      "--no-ui")
    assert refused.code == 2, refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("harness: error: --client-config: "), lines
    assert words in lines[0], lines[0]
    assert refused.run_dir is None  # nothing written


@pytest.mark.parametrize("module", ["loopback.Sender", "http.Requestor"])
def test_a_transport_whose_client_takes_no_settings_refuses_the_flag(harness, module):
    refused = harness("run", "-m", module, "-d", "/" if module.startswith("http") else "Q",
                      "-rl", "1", "--client-config", "a=1", "--no-ui")
    assert refused.code == 2, refused.stderr
    assert refused.stderr.startswith("harness: error: --client-config: "), refused.stderr
    assert f"take this option, not {module.split('.')[0]}" in refused.stderr, refused.stderr


def test_a_secret_is_taken_from_a_file_only_and_never_echoed(harness, tmp_path):
    refused = harness("run", "-m", "redis.Sender", "-d", "Q", "-rl", "1", "--client-config",
                      "ssl_password=cmdline-secret-4711", "--no-ui")
    assert refused.code == 2 and "ssl_password: a secret is given in a @FILE" in \
        refused.stderr, refused.stderr
    assert "cmdline-secret-4711" not in refused.stderr + refused.stdout
    yaml_file = tmp_path / "client.yaml"
    yaml_file.write_text("ssl_password: cmdline-secret-4711\nsocket_keepalive: maybe\n")
    refused = harness("run", "-m", "redis.Sender", "-d", "Q", "-rl", "1", "--client-config",
                      f"@{yaml_file}", "--no-ui")
    assert refused.code == 2 and "socket_keepalive: 'maybe' is not true or false" in \
        refused.stderr, refused.stderr
    assert "cmdline-secret-4711" not in refused.stderr + refused.stdout


def test_settings_from_properties_and_yaml_files_run_and_the_manifest_names_only_the_files(
        harness, brokers, tmp_path):
    """pika takes frame_max from a YAML file and locale from a .properties file (the
    broker's answer to the first is tests/test_wire.py's); the run's manifest records the
    items as given, so a secret in a file stays in the file."""
    yaml_file = tmp_path / "pika.yaml"
    yaml_file.write_text("# pika's ConnectionParameters\nframe_max: 65536\n")
    properties = tmp_path / "pika.properties"
    properties.write_text("! as a Java client's file\nlocale = en_US\n")
    queue = unique("clientconfig")
    done = harness("run", "-m", "amqp.Sender", "-d", queue, "-mg", "20", "--client-config",
                   f"@{yaml_file}", "--client-config", f"@{properties}", "-g",
                   f"-m amqp.Receiver -d {queue}", "-rl", "3", "--no-ui")
    assert done.code == 0, done.stderr
    groups = done.summary["groups"]
    assert groups["sender"]["sent"] == 20 and groups["receiver"]["received"] == 20
    manifest = json.loads((done.run_dir / "manifest.json").read_text())
    text = json.dumps(manifest)
    assert f"@{yaml_file}" in text and f"@{properties}" in text and "65536" not in text
