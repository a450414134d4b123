"""Names a package exports but imports on first use (a module `__getattr__`, PEP 562), so that
`import sessiontree` or `sessiontree.storage` does not load every backend before the first screen."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_names(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """A `__getattr__` for `package`: name -> the submodule (relative to `package`) defining it.
    A name, once loaded, is stored in the package, so the lookup runs once per name."""
    namespace = import_module(package).__dict__

    def load(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(f".{module}", package), name)
        namespace[name] = value
        return value

    return load
