"""The transport interface: a required core of five methods, everything else an optional part
a driver subclasses, and the README saying the same."""

from __future__ import annotations

import re
from pathlib import Path

from harness.modules import TRANSPORTS, transport_class
from harness.modules.interface.base import Transport
from harness.modules.interface.capability import Capability
from harness.modules.interface.optional import PARTS, TemporaryQueues, Transactions
from harness.modules.interface.roles import ROLES

from tests.conftest import memory_example_ran, run_manual_example

ROOT = Path(__file__).resolve().parent.parent


def part_methods(part: type) -> set[str]:
    return {name for name, value in vars(part).items()
            if (callable(value) or isinstance(value, classmethod)) and not name.startswith("_")}


def test_the_required_core_is_five_methods_and_the_readme_names_them() -> None:
    core = set(Transport.__abstractmethods__)
    assert core == {"open", "send", "subscribe", "receive", "close"}
    readme = (ROOT / "README.md").read_text()
    said = re.search(r"implements the required core:\n(.*)\.\n", readme)
    assert said, "the README's transport section lost its required core"
    assert set(re.findall(r"`(\w+)`", said.group(1))) == core
    parts = re.search(r"detects once when a worker starts.*?:\n(.*?)\. The worker", readme,
                      re.DOTALL)
    assert parts, "the README's transport section lost its optional parts"
    assert re.findall(r"`(\w+)`", parts.group(1)) == [p.__name__ for p in PARTS]


def test_the_parts_share_no_method_with_the_core_or_each_other() -> None:
    seen = set(Transport.__abstractmethods__)
    for part in PARTS:
        methods = part_methods(part)
        assert methods and not methods & seen, part.__name__
        seen |= methods


def test_a_driver_defines_a_parts_methods_only_where_it_has_the_part() -> None:
    """A method of a part defined in a driver without the part would never be called: the
    engine asks isinstance, not whether the method is there."""
    wrong = []
    for name, entry in TRANSPORTS.items():
        cls = transport_class(name)
        # The driver's own classes: its transport and the parts it is composed of, in its
        # module or its package's.
        module = entry.path.partition(":")[0]
        defined = {attr for klass in cls.__mro__
                   if klass.__module__ == module or klass.__module__.startswith(module + ".")
                   for attr, value in vars(klass).items() if callable(value)}
        for part in PARTS:
            stray = defined & part_methods(part)
            if stray and not issubclass(cls, part):
                wrong.append(f"{name} defines {sorted(stray)} without {part.__name__}")
    assert not wrong, wrong


def test_a_capability_a_driver_declares_has_the_part_that_does_it() -> None:
    for name in TRANSPORTS:
        cls = transport_class(name)
        # what it can do with any flavour, for any role
        every = cls.capabilities
        for flavour in cls.flavours or ("",):
            for role in ROLES:
                every |= cls.capabilities_for(_settings(name, role, flavour))
        if Capability.TRANSACTIONS in every:
            assert issubclass(cls, Transactions), name
        if Capability.REQUEST_REPLY in every:
            assert issubclass(cls, TemporaryQueues), name
        # and no part a transport could never use
        if issubclass(cls, Transactions):
            assert Capability.TRANSACTIONS in every, name


def _settings(name: str, role: str, flavour: str):  # type: ignore[no-untyped-def]
    from dataclasses import replace

    from harness.plan.group import group_spec
    settings = group_spec({"module": f"{name}.{role}", "destination": "q"}).settings("n", 0, 0)
    return replace(settings, flavour=flavour)


def test_the_manuals_worked_example_runs_as_a_transport(tmp_path: Path) -> None:
    """The smallest whole transport of the manual's extending page, taken from the page as it
    stands: registered beside the others, a Sender and a Receiver run on it and every message
    arrives, measured."""

    done = run_manual_example(
        "MemoryTransport", "memory", "from harness.modules import TRANSPORTS, Entry; "
        "TRANSPORTS['memory'] = Entry('memory:MemoryTransport', '')",
        ["run", "-m", "memory.Sender", "-d", "Q", "-rt", "200", "-rl", "2", "-ss", "1", "-o",
         str(tmp_path / "runs"), "-g", "-m memory.Receiver -d Q"], tmp_path)
    assert done.returncode == 0, done.stderr
    memory_example_ran(tmp_path / "runs")


def test_the_built_in_transports_are_registered_as_plug_ins_are() -> None:
    """pyproject.toml's harness.transports entry points are the built-in table, entry for
    entry: the installed metadata says what the code knows."""
    import tomllib

    from harness.modules import BUILT_IN

    project = Path(__file__).resolve().parent.parent / "pyproject.toml"
    declared = tomllib.loads(project.read_text())["project"]["entry-points"][
        "harness.transports"]
    assert declared == {name: entry.path for name, entry in BUILT_IN.items()}
