"""Lazy access to the generated message modules (kafka_core/protocol/messages/).

All message definitions together cost about 100 MB of RSS to import; a client uses a dozen APIs.
The generated package ``__init__`` therefore maps names to submodules and imports a submodule the
first time one of its classes is asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from kafka_core.protocol._base import Struct

K = TypeVar("K")


def lazy_exports(
    package: str, namespace: dict[str, Any], where: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module ``__getattr__`` and ``__dir__`` that import ``package.where[name]`` on first use.

    The resolved class is stored in ``namespace`` so that later lookups never reach ``__getattr__``.
    """

    def __getattr__(name: str) -> Any:
        mod = where.get(name)
        if mod is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{mod}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *where})

    return __getattr__, __dir__


class ClassTable(Mapping[K, "type[Struct]"]):
    """A read-only mapping (API key or name -> message class) that imports a class on lookup.

    Iterating over keys is free; ``values()``/``items()`` import every module they reach.
    """

    __slots__ = ("_names", "_resolve", "_resolved")

    def __init__(self, resolve: Callable[[str], Any], names: dict[K, str]) -> None:
        self._resolve = resolve
        self._names = names
        self._resolved: dict[K, type[Struct]] = {}

    def __getitem__(self, key: K) -> type[Struct]:
        cls = self._resolved.get(key)
        if cls is None:
            cls = self._resolve(self._names[key])
            self._resolved[key] = cls
        return cls

    def get(self, key: K, default: Any = None) -> Any:
        # the hot path (one call per frame): a hit costs one dict lookup
        cls = self._resolved.get(key)
        if cls is not None:
            return cls
        return self[key] if key in self._names else default

    def __contains__(self, key: object) -> bool:
        return key in self._names

    def __iter__(self) -> Iterator[K]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def names(self) -> Mapping[K, str]:
        """Key -> class name, without importing anything."""
        return self._names

    def __repr__(self) -> str:
        return f"ClassTable({self._names!r})"
