"""A module from a file of the repository that is not in a package on sys.path (a tool under
tools/, an example under examples/), loaded once per test process under its own name."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_file_module(name: str, path: Path) -> ModuleType:
    """``path`` run as module ``name`` (registered first, so its dataclasses and pickles resolve);
    the module already loaded under that name when there is one."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
