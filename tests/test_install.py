"""What users install: the wheel, built from this checkout and installed into a fresh virtual
environment outside it, runs every command with every shipped profile and scenario."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin/ directory of a fresh virtual environment holding the built wheel."""
    work = tmp_path_factory.mktemp("install")
    source = work / "source"
    # Build from a copy, so that the build leaves nothing in the checkout.
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "runs", "build", "*.egg-info", "__pycache__", ".*_cache"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--no-build-isolation", "--wheel-dir", str(work / "dist"), str(source)],
                   check=True, timeout=300)
    (wheel,) = (work / "dist").glob("*.whl")
    venv = work / "venv"
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", str(venv)],
                   check=True, timeout=120)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                    "--disable-pip-version-check", f"{wheel}[spark]"], check=True, timeout=900)
    return venv / "bin"


def run(bin_dir: Path, cwd: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run([str(bin_dir / "harness"), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env={**env, "COLUMNS": "200"})


def test_the_wheel_holds_every_package_profile_and_no_top_level_modules(
        installed: Path) -> None:
    (wheel,) = (installed.parent.parent / "dist").glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"harness"}
    shipped = sorted(p.name for p in (ROOT / "profiles").glob("*.yaml"))
    assert sorted(n.split("/")[-1] for n in names
                  if n.startswith("harness/profiles/") and n.endswith(".yaml")) == shipped
    assert "harness/screen/app.tcss" in names  # the screen's style, package data
    for package in ("modules", "modules/interface", "modules/kit", "experiments/scenarios",
                    "cli", "engine", "screen"):
        assert f"harness/{package}/__init__.py" in names, package
    python = installed / "python"
    probe = subprocess.run([str(python), "-c", "import modules"], capture_output=True,
                           cwd=installed)
    assert probe.returncode != 0, "a top-level package `modules` was installed"


def test_profiles_list_and_the_quickstart_by_name(installed: Path, tmp_path: Path) -> None:
    listed = run(installed, tmp_path, "profiles", "list")
    assert listed.returncode == 0, listed.stderr
    # By the names `harness run` takes.
    names = {line.split()[0] for line in listed.stdout.splitlines() if line.strip()}
    assert {"quickstart", "supplychain-horizontal"} <= names and "quickstart.yaml" not in names
    done = run(installed, tmp_path, "run", "quickstart", "--set", "run.run-length=3",
               "--set", "run.warmup=1", "--set", "run.interval=1", "--set", "run.output=out")
    assert done.returncode == 0, done.stderr
    (run_dir,) = (tmp_path / "out").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["groups"]["receiver"]["received"] > 0
    assert summary["groups"]["receiver"]["lost"] == 0


def test_the_supply_chain_on_loopback(installed: Path, tmp_path: Path) -> None:
    done = run(installed, tmp_path, "run", "supplychain-horizontal", "--set",
               "scenario.connection=local", "--set", "run.run-length=4", "--set",
               "run.warmup=1", "--set", "run.interval=1", "--set", "run.drain=2", "--set",
               "run.output=out")
    assert done.returncode == 0, done.stderr
    assert "PASSED" in done.stdout or "FAILED" in done.stdout, done.stdout


def test_merge_of_two_tiny_runs(installed: Path, tmp_path: Path) -> None:
    runs = []
    for node in ("a", "b"):
        done = run(installed, tmp_path, "run", "-m", "loopback.Sender", "-d", "Q", "-rt", "100",
                   "-rl", "2", "-ss", "1", "-g", "-m loopback.Receiver -d Q", "--run-id",
                   "tiny", "--node", node, "-o", f"runs-{node}")
        assert done.returncode == 0, done.stderr
        (run_dir,) = (tmp_path / f"runs-{node}").iterdir()
        runs.append(str(run_dir))
    merged = run(installed, tmp_path, "merge", *runs, "-o", "merged", "--master", "local[1]",
                 timeout=600)
    assert merged.returncode == 0, merged.stderr
    summary = json.loads((tmp_path / "merged" / "summary.json").read_text())
    assert summary["runs"]["tiny"]["groups"]["receiver"]["received"] == 2 * 200
    assert (tmp_path / "merged" / "report.html").is_file()


def test_an_extra_not_installed_is_named_not_a_traceback(installed: Path, tmp_path: Path) -> None:
    # The wheel is installed without extras: pika, Proton, nats-py, redis-py and urllib3 are
    # missing.
    listed = run(installed, tmp_path, "modules")
    assert listed.returncode == 0, listed.stderr
    assert "stomp.Sender" in listed.stdout
    for extra in ("amqp", "amqp10", "nats", "redis", "http"):
        assert f"pip install 'broker-harness[{extra}]'" in listed.stdout
    done = run(installed, tmp_path, "run", "-m", "amqp.Sender", "-d", "q", "-rl", "1")
    assert done.returncode == 2
    assert done.stderr.strip() == ("harness: error: -m: the amqp transport needs the Python "
                                   "package pika: pip install 'broker-harness[amqp]'")


def test_a_transport_plug_in_built_from_the_manual_installs_and_runs(installed: Path,
                                                                      tmp_path: Path) -> None:
    """The manual's example transport as a package of its own (its two blocks: the module and
    the pyproject.toml with the entry point), installed beside the wheel: listed as a plug-in,
    run end to end, and its registration leaves the built-in transports as they were."""
    from tests.conftest import manual_block, memory_example_ran

    package = tmp_path / "harness-memory"
    package.mkdir()
    (package / "harness_memory.py").write_text(manual_block("class MemoryTransport"))
    (package / "pyproject.toml").write_text(manual_block("harness.transports", "toml"))
    python = str(installed / "python")
    pip = [python, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    subprocess.run([*pip, "install", "--no-build-isolation", str(package)], check=True,
                   timeout=300, cwd=tmp_path)
    try:
        listed = run(installed, tmp_path, "modules")
        assert listed.returncode == 0, listed.stderr
        assert "memory.Sender" in listed.stdout and "memory.Receiver" in listed.stdout
        assert "plug-in harness-memory" in listed.stdout
        assert "memory.Requestor" not in listed.stdout  # its capabilities: queues only
        assert "loopback.Sender" in listed.stdout and "kafka" in listed.stdout
        done = run(installed, tmp_path, "run", "-m", "memory.Sender", "-d", "Q", "-rt", "200",
                   "-rl", "2", "-ss", "1", "--no-ui", "-o", str(tmp_path / "runs"),
                   "-g", "-m memory.Receiver -d Q")
        assert done.returncode == 0, done.stderr
        memory_example_ran(tmp_path / "runs")
        # A module of a transport nobody registered is refused: a slip of the keys is told the
        # plug-in's module it meant, a name like none is told every registered transport.
        slip = run(installed, tmp_path, "run", "-m", "memroy.Sender", "-d", "Q", "-rl", "1")
        assert slip.returncode == 2, slip.stderr
        assert "did you mean memory.Sender?" in slip.stderr, slip.stderr
        wrong = run(installed, tmp_path, "run", "-m", "zzz.Sender", "-d", "Q", "-rl", "1")
        assert wrong.returncode == 2, wrong.stderr
        transports = wrong.stderr.split("a transport of ", 1)[1].split(" and a role", 1)[0]
        assert "memory" in transports.split(", ") and "kafka" in transports.split(", "), \
            wrong.stderr
    finally:
        subprocess.run([*pip, "uninstall", "--yes", "harness-memory"], check=True,
                       timeout=120)

