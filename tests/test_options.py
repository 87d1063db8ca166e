"""The one option table: the run command, --group strings, profiles and the manual all take
their options from it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from harness.modules import TRANSPORTS, transport_class
from harness.modules.interface.roles import ROLES

from harness.errors import BadInput
from harness.plan.group import SIDES, GroupSpec, group_spec
from harness.plan.options import CREDENTIALS, markdown_tables, parse_args, table
from harness.plan.run import RunSpec, validate_run

ROOT = Path(__file__).resolve().parent.parent


def test_the_manuals_flag_tables_are_the_option_table() -> None:
    text = (ROOT / "contrib" / "docs" / "docs" / "running.md").read_text()
    section = text.split("<!-- flags -->\n", 1)[1].split("<!-- /flags -->", 1)[0]
    assert section == markdown_tables(), "run `python contrib/docs/flags.py`"
    for name in TRANSPORTS:  # and each transport's page, its own options
        page = (ROOT / "contrib" / "docs" / "docs" / f"{name}.md").read_text()
        own = page.split("<!-- options -->\n", 1)[1].split("<!-- /options -->", 1)[0]
        assert own == markdown_tables(name), f"{name}.md: run `python contrib/docs/flags.py`"


def test_every_option_sets_a_field_and_every_field_has_an_option() -> None:
    group_fields = {f.name for f in dataclasses.fields(GroupSpec)}
    run_fields = {f.name for f in dataclasses.fields(RunSpec)}
    set_by_options = set()
    for option in table().values():
        if option.key in CREDENTIALS:
            continue
        if option.transports:
            assert option.name not in group_fields, option.key  # the transport's, in options
            continue
        fields = run_fields if option.scope == "run" else group_fields
        assert option.name in fields, option.key
        set_by_options.add(option.name)
    # fields no flag sets: the transport's options, what scenarios fill in, and the file
    # --password-file named (a credential's flag), kept to be read again at each connection
    assert group_fields - set_by_options == {"options", "plan", "size_mix", "traits",
                                             "password_file"}
    # ... the nodes of a distributed run, which --cluster / --nodes set, and the transports'
    # run-wide options (the loopback broker's), which their own options fill
    assert run_fields - set_by_options == {"groups", "nodes", "options"}


def test_each_transport_declares_its_own_options_in_its_file() -> None:
    owners = {o.key: o.transports for o in table().values() if o.transports}
    assert owners["qos"] == ("mqtt",) and owners["exchange"] == ("amqp",)
    # declared alike by several transports: one flag for all of them
    assert owners["heartbeat"] == ("stomp", "mqtt", "amqp", "amqp10", "nats", "redis", "kafka")
    assert owners["prefetch"] == ("stomp", "amqp", "amqp10", "nats", "redis")
    assert owners["inflight"] == ("mqtt", "nats")
    assert owners["requeue"] == ("amqp", "amqp10")
    for name in TRANSPORTS:
        for option in transport_class(name).options:
            assert name in table()[option.key].transports


def test_a_group_string_is_parsed_by_the_same_table() -> None:
    given = parse_args(["-m", "mqtt.Publisher", "-d", "T", "-nt", "3", "--qos=1", "--no-clean",
                        "--property", "a=1", "--property", "b=2", "-ms", "4k"], "--group")
    group = group_spec(given)
    assert (group.module, group.destination, group.threads, group.size) == \
        ("mqtt.Publisher", "T", 3, 4096)
    assert group.properties == {"a": "1", "b": "2"}
    assert group.options["qos"] == 1 and group.options["clean"] is False
    assert group.options["heartbeat"] == 3.0  # the transports' common default
    assert "prefetch" not in group.options  # another transport's option, not given


def test_a_transport_whose_client_library_is_missing_names_its_extra(tmp_path, monkeypatch):
    import sys

    from harness.modules import TRANSPORTS, Entry, transport_class

    from harness.errors import BadInput

    (tmp_path / "needs_missing.py").write_text("import harness_no_such_client_library\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(TRANSPORTS, "absent", Entry("needs_missing:Transport", "absent"))
    try:
        transport_class("absent")
    except BadInput as exc:
        assert exc.where == "-m"
        assert "harness_no_such_client_library" in exc.problem
        assert "pip install 'broker-harness[absent]'" in exc.problem
    else:
        raise AssertionError("no error for a missing client library")
    finally:
        sys.modules.pop("needs_missing", None)


def test_the_flavour_help_names_each_transports_flavours_default_first() -> None:
    text = table()["flavour"].help
    for name in TRANSPORTS:
        flavours = transport_class(name).flavours
        if flavours:
            listed = f"{flavours[0]} (default), {', '.join(flavours[1:])}"
            assert listed in text, (name, listed)


# -- the audit: what each transport and role accepts --------------------------------------------

ROLE_NAMES = ("Sender", "Receiver", "Publisher", "Subscriber", "Requestor", "Responder")
# A value other than the default for each common option a transport could ignore.
PROBES = {"type": "text", "property": ["a=1"], "correlation-id": "c", "persistent": True,
          "transacted": True, "selector": "a = 1", "durable-name": "d", "client-id": "c",
          "user": "u", "tls": True, "reply-timeout": 2.0, "crc": 0.5, "ttl": 5.0,
          "priority": 3}
SENDS = ("type", "property", "correlation-id")
# What each transport takes of the probes, for the roles that send and for those that only
# receive; every other probe is refused before the run. Written from what each transport does
# with the option (its file says how): an option that starts being accepted without a use,
# or refused where it had one, fails here.
TAKES = {
    "amqp": "persistent ttl priority transacted client-id user tls",
    "amqp10": "persistent ttl priority client-id user tls",
    "http": "user tls",
    "kafka": "transacted client-id user tls",  # a transactional producer's sends
    "loopback": "transacted",
    "mqtt": "client-id user tls",
    "nats": "client-id user tls",
    "redis": "transacted client-id user tls",  # MULTI/EXEC around a producer's sends
    "stomp": "persistent ttl priority transacted client-id user tls",
}
HAS_PROPERTIES = {"amqp", "amqp10", "http", "loopback", "nats", "stomp"}
# Where the broker filters or keeps a subscription: (transport, role) -> probes.
SUBSCRIPTIONS = {("stomp", "Receiver"): "selector", ("stomp", "Subscriber"): "selector "
                 "durable-name", ("stomp", "Requestor"): "selector", ("stomp", "Responder"):
                 "selector", ("amqp", "Subscriber"): "durable-name"}
NOT_IN_A_TRANSACTION = {(t, r) for t in ("redis", "kafka") for r in (
    "Receiver", "Subscriber", "Requestor", "Responder")}


def playing(transport: str) -> list[str]:
    return [r for r in ROLE_NAMES if transport_class(transport).plays(ROLES[r])]


def accepted(module: str, key: str, value: object) -> bool:
    try:
        validate_run(RunSpec(groups=[group_spec({"module": module, "destination": "q",
                                                  key: value})]))
    except BadInput:
        return False
    return True


def test_every_transport_and_role_accepts_only_the_options_it_uses() -> None:
    wrong = []
    for name in TRANSPORTS:
        for role in playing(name):
            sends, receives = role in SIDES["send"], role in SIDES["receive"]
            expected = set(TAKES[name].split())
            if not sends:
                expected -= {"persistent", "ttl", "priority"}
            if (name, role) in NOT_IN_A_TRANSACTION:
                expected.discard("transacted")
            if sends and role != "Responder":  # a Responder sends the request's own body
                expected |= {key for key in SENDS
                             if key != "property" or name in HAS_PROPERTIES}
            if role == "Requestor":  # its requests carry correlation ids of its own
                expected.discard("correlation-id")
            if receives:
                expected.add("crc")
            if role == "Requestor":
                expected.add("reply-timeout")
            expected |= set(SUBSCRIPTIONS.get((name, role), "").split())
            got = {key for key, value in PROBES.items()
                   if accepted(f"{name}.{role}", key, value)}
            if got != expected:
                wrong.append(f"{name}.{role}: accepts {sorted(got - expected)}, refuses "
                             f"{sorted(expected - got)}")
    assert not wrong, "\n".join(wrong)


def test_a_transports_send_options_are_refused_where_nothing_is_sent_and_receive_ones_too(
        ) -> None:
    checked = 0
    for option in table().values():
        if not option.side:
            continue
        value = {bool: not option.default, int: 2, float: 1.0}.get(option.type)
        if value is None:
            continue
        for name in option.transports:
            for role in playing(name):
                if role not in SIDES[option.side]:
                    assert not accepted(f"{name}.{role}", option.key, value), \
                        f"{name}.{role} accepts --{option.key}"
                    checked += 1
    assert checked > 30
