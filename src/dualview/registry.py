"""Named registries: the one pattern behind every kind of thing a config names.

A `Registry` maps names (``followir``, ``infonce``, ``local``) to entries: an object, or a
``"module:attribute"`` path imported on first use (how an entry whose module needs an
optional dependency is registered without importing it). Every registry has:

- ``register(name, entry)`` (or ``@registry.register("name")`` on a class or function): a
  second registration of a name is an error unless ``replace=True``;
- ``get(name)``: the entry, or one `UnknownNameError` that names the config field and lists
  the known names;
- ``names()``: the registered names, sorted.

Code outside the package extends a registry in one of two ways: call ``register`` on it
(``from dualview.eval.benchmarks import BENCHMARKS; BENCHMARKS.register("mine", MyBench)``),
or declare an entry point in the registry's group (``dualview.benchmarks``, ...), which is
read the first time the registry is looked at::

    [project.entry-points."dualview.benchmarks"]
    mine = "my_package.bench:MyBench"

The groups are listed in ``docs/architecture.md`` ("Extending dualview").
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from importlib.metadata import entry_points
from typing import Generic, TypeVar, overload

from dualview.errors import ConfigError

T = TypeVar("T")


class UnknownNameError(ConfigError):
    """A name that no registration made: says which field, which name, and the known ones."""


class Registry(Generic[T]):
    """Entries of one kind by name (see the module docstring).

    ``what`` names the kind in messages ("benchmark"), ``field`` the config field or option
    that takes the name ("loss.objective"), ``group`` the entry-point group plugins use,
    ``entries`` the built-in registrations.
    """

    def __init__(
        self,
        what: str,
        *,
        field: str,
        group: str | None = None,
        entries: Mapping[str, T | str] | None = None,
    ) -> None:
        self.what = what
        self.field = field
        self.group = group
        self._entries: dict[str, T | str] = {}
        self._plugins_read = group is None
        for name, entry in (entries or {}).items():
            self.register(name, entry)

    @overload
    def register(self, name: str, entry: T | str, *, replace: bool = False) -> T | str: ...

    @overload
    def register(self, name: str, *, replace: bool = False) -> Callable[[T], T]: ...

    def register(self, name: str, entry: T | str | None = None, *, replace: bool = False):
        """Make ``name`` mean ``entry``; without ``entry``, a decorator that registers what it
        decorates. A name registered twice is an error unless ``replace``."""
        if entry is None:

            def decorate(obj: T) -> T:
                self.register(name, obj, replace=replace)
                return obj

            return decorate
        if not name or name != name.strip():
            raise ValueError(f"{self.what} name {name!r}: empty or with surrounding spaces")
        if name in self._entries and not replace:
            raise ValueError(f"{self.what} {name!r} is already registered (replace=True to swap)")
        self._entries[name] = entry
        return entry

    def remove(self, name: str) -> None:
        """Forget ``name`` (a plugin's test that registered something cleans up with this)."""
        self._entries.pop(name, None)

    def get(self, name: str, *, where: str | None = None) -> T:
        """The entry registered as ``name`` (a ``module:attribute`` path is imported now).

        ``where`` replaces ``field`` in the error (e.g. ``"run.yaml: loss.objective"``)."""
        self._read_plugins()
        if name not in self._entries:
            raise UnknownNameError(self.unknown_message(name, where=where))
        entry = self._entries[name]
        if isinstance(entry, str):
            entry = self._entries[name] = _import_path(entry, f"{self.what} {name!r}")
        return entry

    def unknown_message(self, name: object, *, where: str | None = None) -> str:
        """The one message for a name nobody registered, located at ``where`` (default
        ``field``); ``where=""`` leaves the location out (a validator whose caller adds it)."""
        known = ", ".join(self.names()) or "(none)"
        text = f"unknown {self.what} {name!r}; known: {known}"
        location = self.field if where is None else where
        return f"{location}: {text}" if location else text

    def names(self) -> list[str]:
        """The registered names, sorted."""
        self._read_plugins()
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        self._read_plugins()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def items(self) -> list[tuple[str, T]]:
        """(name, entry) pairs, sorted by name; lazy entries are imported."""
        return [(name, self.get(name)) for name in self.names()]

    def _read_plugins(self) -> None:
        if self._plugins_read:
            return
        self._plugins_read = True
        for point in entry_points(group=self.group):
            if point.name not in self._entries:
                self._entries[point.name] = point.value


def _import_path(path: str, what: str) -> object:
    """``"package.module:attribute"`` -> the attribute; a bad path is a `ConfigError`."""
    module_name, sep, attribute = path.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigError(f"{what}: {path!r} is not a 'module:attribute' path")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"{what}: cannot import {module_name!r} ({exc})") from exc
    obj: object = module
    for part in attribute.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"{what}: {module_name!r} has no attribute {attribute!r}")
        obj = getattr(obj, part)
    return obj
