"""A client library imported at its first use, not when its transport is: every command
reads every transport's declarations (the option table), and importing nats-py (with aiohttp)
and redis-py took a third of the harness's start.

`nats = library("nats", "errors", "js.errors")` binds a stand-in whose first attribute asked
imports the library and those submodules; each attribute it then gives is kept on the
stand-in, so that later lookups are plain ones. A library that is not installed fails at the
transport's import, as an `import` would (ModuleNotFoundError, which names the extra to
install)."""

from __future__ import annotations

import importlib
import importlib.util
import types
from typing import Any


class Library(types.ModuleType):
    def __init__(self, name: str, submodules: tuple[str, ...]) -> None:
        super().__init__(name)
        self._submodules = submodules

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):  # asked of any object (copy, pickle, inspect): not ours
            raise AttributeError(attr)
        module = importlib.import_module(self.__name__)
        for sub in self._submodules:
            importlib.import_module(f"{self.__name__}.{sub}")
        try:
            value = getattr(module, attr)
        except AttributeError:  # a submodule its package does not import itself
            value = importlib.import_module(f"{self.__name__}.{attr}")
        setattr(self, attr, value)
        return value


def library(name: str, *submodules: str) -> Any:
    """The module `name` (dotted or not), imported when first used; its submodules (relative
    names) imported with it."""
    top = name.partition(".")[0]
    if importlib.util.find_spec(top) is None:  # looks, imports nothing
        raise ModuleNotFoundError(f"No module named {top!r}", name=top)
    return Library(name, submodules)
