"""What a Spark cluster's executors need of this harness: the package as a zip for their
Python path (`--py-files`, or `addPyFile` by a distributed run's driver) and, for executors
whose Python has PySpark only, the third-party packages the harness imports, as a directory
and a `.tar.gz` for `--archives`.

The packages are copied from this Python's own installed distributions, file by file as
each one's RECORD lists them (pip's `--target` layout, no registry reached): what the
executors run is exactly what the driver runs. Their compiled parts (numpy, orjson, psutil,
HdrHistogram's C part, some clients) only load on the same Python version and platform,
which the archive names in PACKAGED.
"""

from __future__ import annotations

import importlib.metadata as metadata
import platform
import re
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from harness.errors import BadInput

DISTRIBUTION = "broker-harness"
# The executors have these already: they are what runs them.
SPARK_OWN = {"pyspark", "py4j"}
DEPS = "harness-deps"  # the archive's name, and the directory Spark unpacks it as
PACKAGED = "PACKAGED.txt"


@dataclass
class SparkPackage:
    zip: Path
    deps: Path  # the packages as a directory (the driver's PYTHONPATH under spark-submit)
    archive: Path  # the same as .tar.gz (--archives ARCHIVE#harness-deps)
    distributions: list[str]

    def conf(self) -> dict[str, str]:
        """The Spark settings that put the archive on the executors' Python path."""
        return {"spark.archives": f"{self.archive}#{DEPS}",
                "spark.executorEnv.PYTHONPATH": DEPS}


def harness_zip(target: Path) -> Path:
    """This harness as a zip for the executors' Python path: the package with its
    transports (harness.modules) and profiles (harness.profiles), which an editable install
    keeps in folders of their own, every data file inside."""
    import harness
    import harness.modules
    import harness.profiles

    files: dict[str, Path] = {}
    for package in (harness, harness.modules, harness.profiles):
        root = Path(package.__path__[0])
        prefix = package.__name__.replace(".", "/")
        for path in sorted(root.rglob("*")):
            relative = path.relative_to(root)
            if path.is_dir() or "__pycache__" in relative.parts or path.suffix == ".pyc":
                continue
            files.setdefault(f"{prefix}/{relative.as_posix()}", path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, path in sorted(files.items()):
            archive.write(path, name)
    return target


def _name(requirement: str) -> str:
    return re.split(r"[\s;<>=!~\[(]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def needed(extras: list[str], plugins: tuple[str, ...] = ()) -> list[metadata.Distribution]:
    """The installed distributions the harness imports with these extras (its transports'
    clients) and these transport plug-ins, and theirs, less Spark's own."""
    # (name, must be installed)
    wanted: list[tuple[str, bool]] = [(DISTRIBUTION, True), *((p, True) for p in plugins)]
    seen: set[str] = set()
    found: list[metadata.Distribution] = []
    while wanted:
        name, must = wanted.pop()
        if name in seen or name in SPARK_OWN:
            continue
        seen.add(name)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            if not must:
                continue
            raise BadInput("--transport", f"{name} is not installed in {sys.executable}: "
                           "install the harness with the extras to package") from None
        if name != DISTRIBUTION:
            found.append(dist)
        for requirement in dist.requires or []:
            marker = requirement.partition(";")[2]
            extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)", marker)
            if extra and not (name == DISTRIBUTION and extra[1] in extras):
                continue
            # A requirement for other platforms or Pythons (colorama on Windows) is not
            # installed here: taken where it is, passed over where it is not.
            wanted.append((_name(requirement), not marker.strip() or bool(extra)))
    return sorted(found, key=lambda d: d.metadata["Name"].lower())


def extras_of(transports: list[str]) -> list[str]:
    from harness.modules import TRANSPORTS

    extras = []
    for name in transports:
        if name not in TRANSPORTS:
            raise BadInput("--transport", f"{name!r}: not a transport (one of "
                           f"{', '.join(TRANSPORTS)})")
        if TRANSPORTS[name].extra:
            extras.append(TRANSPORTS[name].extra)
    return extras


def plugins_of(transports: list[str]) -> tuple[str, ...]:
    """The distributions of the transport plug-ins among these (extras_of checked them)."""
    from harness.modules import TRANSPORTS

    return tuple(TRANSPORTS[name].plugin for name in transports if TRANSPORTS[name].plugin)


def _copy_distribution(dist: metadata.Distribution, into: Path) -> int:
    """A distribution's installed files (its RECORD) into a pip --target layout; bytes."""
    written = 0
    for file in dist.files or []:
        parts = Path(file).parts
        if not parts or parts[0] == ".." or "__pycache__" in parts or file.suffix == ".pyc":
            continue  # scripts installed outside site-packages, caches
        source = Path(str(dist.locate_file(file)))
        if not source.is_file():
            continue
        target = into / file
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.read_bytes())
        written += source.stat().st_size
    return written


def spark_package(directory: Path, transports: list[str]) -> SparkPackage:
    """harness.zip, harness-deps/ and harness-deps.tar.gz in directory."""
    directory.mkdir(parents=True, exist_ok=True)
    zipped = harness_zip(directory / "harness.zip")
    deps = directory / DEPS
    if deps.exists():
        import shutil

        shutil.rmtree(deps)
    deps.mkdir()
    names = []
    for dist in needed(extras_of(transports), plugins_of(transports)):
        _copy_distribution(dist, deps)
        names.append(f"{dist.metadata['Name']} {dist.version}")
    (deps / PACKAGED).write_text(
        f"python {platform.python_version()} ({sys.implementation.cache_tag}), "
        f"{platform.system()} {platform.machine()}\n" + "\n".join(names) + "\n")
    archive = directory / f"{DEPS}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(deps.rglob("*")):
            if path.is_file():
                tar.add(path, path.relative_to(deps).as_posix())
    return SparkPackage(zipped, deps, archive, names)


def executor_lacks(transports: list[str], _: object = None) -> list[str]:
    """Run in an executor: the modules a node (and a merge) imports, with the transports'
    clients, that its Python lacks; empty where it has them all."""
    import importlib

    from harness.errors import BadInput as Missing

    missing = []
    for name in ("harness.merge.core", "harness.distributed.node"):
        try:
            importlib.import_module(name)
        except ImportError as exc:
            missing.append(exc.name or str(exc))
    if missing:
        return missing
    from harness.modules import transport_class

    for transport in transports:
        try:
            transport_class(transport)
        except Missing as exc:  # names the client's package
            missing.append(exc.problem.split("the Python package ")[-1].split(":")[0])
        except ImportError as exc:
            missing.append(exc.name or str(exc))
    return missing
