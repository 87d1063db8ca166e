"""The transport contract: every registered transport (the built-in ones and any plug-in
installed beside them, found as `harness modules` finds them: the `harness.transports` entry
points) and each of its roles, held to the same checks, so that a transport gets them by
registering.

- It declares itself: its name is its registry key, it says what it is, each option it adds
  has a flag, a help text and a default of its type, and each flag is one the option table
  knows.
- Every role plans at its defaults or is refused in one line naming a flag (a role its broker
  cannot play: an HTTP Publisher), never another exception.
- A bound it declares is held: a value below its `low` is refused naming the option's flag.
- Against the server at its defaults (the suite's brokers; AGAINST where the suite's differ;
  the embedded broker for loopback), each pair of roles its capabilities allow (queue,
  topic, request/reply) connects, sends, receives and closes, every message counted once
  (ELSEWHERE: a transport whose pairs another module runs, and why); a port where nothing
  listens is one line, exit 1."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

import pytest
from harness.modules import TRANSPORTS, transport_class
from harness.modules.interface.capability import Capability
from harness.modules.interface.roles import ROLES

from harness.errors import BadInput
from tests.conftest import free_port, unique

NAMES = sorted(TRANSPORTS)
# The suite's servers where they are not at a transport's defaults: flags a run adds.
AGAINST: dict[str, list[str]] = {
    "amqp10": ["--flavour", "rabbitmq"],
    "http": ["--port", "8090"],
}
# Role pairs run elsewhere, and why.
ELSEWHERE = {"kafka": "a consumer group forms in seconds on Tansu, slower beside other "
                      "tests' load: tests/test_kafka.py runs each role pair alone"}
PAIRS = {Capability.QUEUES: ("Sender", "Receiver"), Capability.TOPICS: ("Publisher", "Subscriber"),
         Capability.REQUEST_REPLY: ("Requestor", "Responder")}


def loaded(name: str) -> type[Any]:
    try:
        return transport_class(name)
    except BadInput as exc:  # its client library is not installed: the suite installs all
        pytest.fail(f"{name}: {exc}")


@pytest.mark.parametrize("name", NAMES)
def test_a_transport_declares_itself(name: str) -> None:
    from harness.plan.options import table

    cls = loaded(name)
    assert cls.name == name and cls.description.strip(), cls
    known = table()
    for option in cls.options:
        # As the table has it: an option several transports declare is said once.
        assert option.key in known and known[option.key].flag == option.flag, (name, option)
        assert known[option.key].help.strip(), (name, option.key)
    if cls.Options is not None:
        # The annotations resolved (the options modules postpone them: a string each).
        hints = typing.get_type_hints(cls.Options)
        for f in dataclasses.fields(cls.Options):
            default = f.default if f.default_factory is dataclasses.MISSING else \
                f.default_factory()
            assert fits(default, hints[f.name]), (name, f.name, default, hints[f.name])


def fits(value: Any, hint: Any) -> bool:
    """Whether a value is of an annotation's type (an int is a float, a bool is not)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(fits(value, arm) for arm in typing.get_args(hint))
    if origin is typing.Literal:
        return value in typing.get_args(hint)
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, origin or hint)


def test_an_option_default_not_of_its_type_fails_the_contract() -> None:
    """The check above can fail: the mutations a mistyped default makes."""
    assert not fits("3", int) and not fits(True, int) and not fits(None, int)
    assert not fits(0.5, int | None) and not fits("a", list[str]) and not fits(2, bool)
    assert fits(0, float) and fits(None, str | None) and fits(["a"], list[str])


def _plan(module: str, **given: Any) -> None:
    """A run of one group of module planned and checked as `harness run --check` does;
    given: options by key, the group's or the run's."""
    from harness.plan.group import group_spec
    from harness.plan.options import table
    from harness.plan.run import run_spec, validate_run

    role = ROLES[module.rsplit(".", 1)[1]]
    pace = {"thread-rate": 10} if role.produces else {}
    of_run = {k: v for k, v in given.items() if table()[k].scope == "run"}
    group = group_spec({"module": module, "destination": unique("contract"), **pace,
                        **{k: v for k, v in given.items() if k not in of_run}})
    validate_run(run_spec({"run-length": 1.0, **of_run}, [group]))


@pytest.mark.parametrize(("name", "role"), [(n, r) for n in NAMES for r in ROLES])
def test_every_role_plans_at_its_defaults_or_is_refused_in_one_line(name: str,
                                                                    role: str) -> None:
    loaded(name)
    try:
        _plan(f"{name}.{role}")
    except BadInput as exc:
        text = str(exc)
        assert "\n" not in text and exc.where.startswith(("-", "module", "destination")), \
            (name, role, exc.where, text)


@pytest.mark.parametrize("name", NAMES)
def test_a_declared_lower_bound_is_held_naming_the_flag(name: str) -> None:
    cls = loaded(name)
    bounded = [o for o in cls.options if o.low is not None and o.type in (int, float)]
    for option in bounded:
        with pytest.raises(BadInput) as refused:
            _plan(f"{name}.Sender" if Capability.QUEUES & cls.capabilities else
                  f"{name}.Publisher", **{option.key: option.low - 1})
        assert refused.value.where == option.flag, (name, option.key, refused.value)


def _pairs() -> list[tuple[str, str, str]]:
    out = []
    for name in NAMES:
        if name in ELSEWHERE:
            continue
        try:
            capabilities = transport_class(name).capabilities
        except BadInput:
            continue
        out += [(name, *pair) for capability, pair in PAIRS.items()
                if capability & capabilities and not (name == "http" and pair[1] != "Responder")]
    return out


@pytest.mark.parametrize(("name", "producer", "consumer"), _pairs())
def test_each_role_pair_delivers_through_the_server(harness, brokers, name: str, producer: str,
                                                    consumer: str) -> None:
    against = " ".join(AGAINST.get(name, []))
    destination = "/echo" if name == "http" else unique("contract")
    consumer_group = [] if name == "http" else \
        ["-g", f"-m {name}.{consumer} -d {destination} {against}".strip()]
    done = harness("run", "-m", f"{name}.{producer}", "-d", destination,
                   *AGAINST.get(name, []), "-rt", "50", "-ss", "1", "-rl", "3",
                   *consumer_group)
    assert done.code == 0, done.stderr[-2000:]
    groups = done.summary["groups"]
    assert all(g["errors"] == 0 and g["lost"] == 0 and g["duplicated"] == 0
               for g in groups.values()), groups
    if producer == "Requestor":
        assert groups["requestor"]["received"] >= 100, groups
    else:
        [check] = done.summary["delivery"]
        assert check["expected"] == check["received"] >= 100 and check["missing"] == 0, check


@pytest.mark.parametrize("name", [n for n in NAMES if n != "loopback"])
def test_a_port_where_nothing_listens_is_one_line(harness, name: str) -> None:
    cls = loaded(name)
    role = "Sender" if Capability.QUEUES & cls.capabilities else "Publisher"
    if name == "http":
        role = "Requestor"
    quick = ["--heartbeat", "1"] if any(o.key == "heartbeat" for o in cls.options) else []
    done = harness("run", "-m", f"{name}.{role}", "-d", "/" if name == "http" else "q",
                   *[a for a in AGAINST.get(name, []) if a not in ("--port", "8090")],
                   "--port", str(free_port()), "-rl", "1", *quick, output=False)
    assert done.code == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("harness: error")]
    assert len(lines) == 1, done.stderr
