"""The package's layers: every module imports only from its own layer or the ones below, and
module-level imports form no circle."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Lowest first. A module may import from its own layer and every layer before it.
LAYERS = [
    ("harness", "harness.errors", "harness.clock", "harness.units", "harness.textfiles"),
    # modules/: the interface a transport implements, the kit it may use, the drivers
    ("harness.modules.interface",),
    ("harness.modules.kit",),
    ("harness.modules",),
    ("harness.plan",),
    ("harness.stats",),
    ("harness.rundir",),
    ("harness.engine",),
    ("harness.merge",),
    ("harness.distributed",),
    ("harness.screen",),
    ("harness.experiments",),
    ("harness.cli", "harness.__main__"),
]


def layer_of(module: str) -> int:
    best, rank = -1, -1
    for index, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > best:
                best, rank = len(name), index
    return rank


def sources() -> dict[str, Path]:
    """Every module of the installed package by its import name (modules/ installs as
    harness.modules, as pyproject.toml's package-dir says)."""
    out = {}
    for top, package in (("harness", "harness"), ("modules", "harness.modules")):
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = path.relative_to(ROOT / top).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join((package, *parts))] = path
    return out


def _type_only(tree: ast.Module) -> set[int]:
    """The ids of the nodes under `if TYPE_CHECKING:` (never imported when the code runs)."""
    return {id(inner) for node in ast.walk(tree) if isinstance(node, ast.If)
            and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
            for inner in ast.walk(node)}


def imports(path: Path, module_level_only: bool) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text())
    skip = _type_only(tree)
    nodes = tree.body if module_level_only else [n for n in ast.walk(tree) if id(n) not in skip]
    found = []
    for node in nodes:
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, node.lineno))
            # `from harness.cli import run` imports the module harness.cli.run
            found += [(f"{node.module}.{alias.name}", node.lineno) for alias in node.names]
    return [(name, line) for name, line in found if name.split(".")[0] in ("harness", "modules")]


def test_every_module_belongs_to_a_layer() -> None:
    assert all(layer_of(module) >= 0 for module in sources())


def test_no_module_imports_from_a_layer_above_its_own() -> None:
    known = sources()
    upward = []
    for module, path in known.items():
        for target, line in imports(path, module_level_only=False):
            if target not in known:
                continue
            if layer_of(target) > layer_of(module):
                upward.append(f"{path.relative_to(ROOT)}:{line}: {module} imports {target}")
    assert upward == []


def test_nothing_imports_the_repository_folder_modules() -> None:
    bad = [f"{path.relative_to(ROOT)}:{line}" for module, path in sources().items()
           for target, line in imports(path, module_level_only=False)
           if target.split(".")[0] == "modules"]
    assert bad == []


def test_modules_is_an_interface_a_kit_and_drivers_side_by_side() -> None:
    """A driver is one file of modules/, or one package of files each with one part of it,
    that imports the interface and the kit, never another driver: each can be read, and
    removed, alone."""
    known = sources()
    modules = ROOT / "modules"

    def driver_of(path: Path) -> str | None:
        top = path.relative_to(modules).parts[0]
        if top in ("interface", "kit", "__init__.py"):
            return None
        return "harness.modules." + top.removesuffix(".py")

    drivers = {m: d for m, p in known.items()
               if p.is_relative_to(modules) and (d := driver_of(p)) is not None}
    from harness.modules import TRANSPORTS

    assert set(drivers.values()) == {entry.path.partition(":")[0]
                                     for entry in TRANSPORTS.values()}
    crossing = [f"{module} imports {target}" for module in sorted(drivers)
                for target, _ in imports(known[module], module_level_only=False)
                if target in drivers and drivers[target] != drivers[module]]
    assert crossing == []


def test_imports_form_no_circle_even_those_made_late() -> None:
    """Imports made inside a function count too: a late import that closes a circle only
    hides it."""
    known = sources()
    graph = {m: {t for t, _ in imports(p, module_level_only=False) if t in known and t != m}
             for m, p in known.items()}
    state: dict[str, int] = {}
    path: list[str] = []
    circles = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                circles.append(" -> ".join([*path[path.index(target):], target]))
            elif target not in state:
                visit(target)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    # A package's __init__ importing its own submodules is not a circle of concepts.
    circles = [c for c in circles if not all(
        part.startswith(c.split(" -> ")[0]) for part in c.split(" -> "))]
    assert circles == []


def test_the_layer_test_sees_an_upward_import() -> None:
    """The check itself works: the engine importing the screen would be caught."""
    assert layer_of("harness.engine.runner") < layer_of("harness.screen.app")
    assert layer_of("harness.modules.stomp") < layer_of("harness.plan.options")
    assert layer_of("harness.modules.interface.base") < layer_of("harness.modules.kit.driven") \
        < layer_of("harness.modules.stomp")


def test_no_transport_names_a_role_it_asks_the_role_table_instead() -> None:
    """A transport asks what a role does (Settings.sends_only, .consumes, .on_topic, .asks,
    .replies, ...), so that a new role is a row of harness.modules.interface.roles, not an edit of
    every driver. A role's name may appear in prose (an error message), never as a string
    compared or listed."""
    from harness.modules.interface.roles import ROLES

    named = []
    for path in sorted((ROOT / "modules").rglob("*.py")):
        if path.relative_to(ROOT / "modules") == Path("interface", "roles.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in ROLES:
                named.append(f"{path.name}:{node.lineno}: {node.value!r}")
    assert not named, named


def test_every_package_of_the_source_is_in_the_distribution() -> None:
    """pyproject.toml names the packages the wheel holds: a folder of code added without
    its name there would be left out of every install but the editable one."""
    import tomllib

    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = set()
    for name, folder in setup["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            if parts and f"{name}.{parts[0]}" in setup["package-dir"]:
                continue  # another folder's, mapped there
            found.add(".".join((name, *parts)))
    assert "harness.modules.nats" in found and "harness.plan" in found
    assert found <= set(setup["packages"]), sorted(found - set(setup["packages"]))
