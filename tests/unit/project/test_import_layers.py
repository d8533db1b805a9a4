"""The import graph: no import cycle among kafka_core's modules, and the layers pyproject.toml
states in ``[tool.importlinter]`` (codec -> protocol -> network -> client -> producer, consumer,
share, admin -> transport, spark, cli; the dev tools apart: the library never imports them).

Both checks read grimp's graph, the one ``lint-imports`` checks the contracts on: every import
statement of the package, including those inside functions (a lazy import only postpones the
cycle to the first call) and those under TYPE_CHECKING (a module that names another in its
annotations depends on it; a layer may not even name a higher one). Imports made by name at run
time (``importlib.import_module``, the facades' lazy tables) are not seen; the facades
``kafka_core`` and ``kafka_core.aio`` sit above every layer. ``test_the_checks_fail_on_a_toy_package``
shows both checks fail where they should.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

REPO = Path(__file__).resolve().parents[3]


def import_cycles(package: str) -> list[list[str]]:
    """The sets of the package's modules that import one another in a circle (the strongly
    connected components of its import graph with more than one module), each sorted."""
    graph = grimp.build_graph(package, cache_dir=None)
    inside = sorted(m for m in graph.modules if m == package or m.startswith(package + "."))
    edges = {
        m: sorted(w for w in graph.find_modules_directly_imported_by(m) if w in graph.modules) for m in inside
    }
    # Tarjan's algorithm, iterative (the graph is deep enough to matter for recursion)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in inside:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            targets = edges.get(node, [])
            if i < len(targets):
                work.append((node, i + 1))
                nxt = targets[i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if work:  # back in the caller: pass the low link up
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return sorted(cycles)


def describe(package: str, cycle: list[str]) -> str:
    """A cycle with the import lines inside it, for the failure message."""
    graph = grimp.build_graph(package, cache_dir=None)
    lines = [" <-> ".join(cycle)]
    for importer in cycle:
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            if imported in cycle:
                details = graph.get_import_details(importer=importer, imported=imported)
                lines += [f"    {importer}:{d['line_number']}: {d['line_contents']}" for d in details]
    return "\n".join(lines)


def lint_imports(config: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on a config file, from ``cwd`` (its root package must be importable there)."""
    script = Path(sys.executable).with_name("lint-imports")
    command = str(script) if script.exists() else shutil.which("lint-imports")
    assert command, "lint-imports is not installed (the test extra has import-linter)"
    return subprocess.run(
        [command, "--no-cache", str(config)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_kafka_core_has_no_import_cycle() -> None:
    cycles = import_cycles("kafka_core")
    assert not cycles, "import cycles:\n" + "\n".join(describe("kafka_core", c) for c in cycles)


def test_the_layers_and_the_dev_tools_contracts_hold() -> None:
    run = lint_imports(REPO / "pyproject.toml", REPO)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "BROKEN" not in run.stdout and " KEPT" in run.stdout


def test_the_checks_fail_on_a_toy_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # low imports high inside a function, high imports low at the top: a cycle, and a lower
    # layer importing a higher one; a second pair does it under TYPE_CHECKING
    pkg = tmp_path / "kc_toy_layers"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "low.py").write_text("def later():\n    from kc_toy_layers import high\n\n    return high\n")
    (pkg / "high.py").write_text("from kc_toy_layers import low\n")
    (pkg / "typed.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from kc_toy_layers import user\n"
    )
    (pkg / "user.py").write_text("from kc_toy_layers import typed\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_cycles("kc_toy_layers") == [
        ["kc_toy_layers.high", "kc_toy_layers.low"],
        ["kc_toy_layers.typed", "kc_toy_layers.user"],
    ]
    assert "kc_toy_layers.low:2:" in describe("kc_toy_layers", ["kc_toy_layers.high", "kc_toy_layers.low"])

    config = tmp_path / "toy.toml"
    config.write_text(
        '[tool.importlinter]\nroot_package = "kc_toy_layers"\n\n'
        "[[tool.importlinter.contracts]]\n"
        'name = "toy layers"\ntype = "layers"\nlayers = ["kc_toy_layers.high", "kc_toy_layers.low"]\n'
    )
    run = lint_imports(config, tmp_path)
    assert run.returncode != 0
    assert "kc_toy_layers.low is not allowed to import kc_toy_layers.high" in run.stdout, run.stdout
    (pkg / "low.py").write_text("def later():\n    return None\n")
    assert lint_imports(config, tmp_path).returncode == 0  # and it passes once the import goes
