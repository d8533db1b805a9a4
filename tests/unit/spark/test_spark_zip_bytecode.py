"""The zip bytecode cache that kafka_core.spark.daemon installs: modules from a zip compile once,
a changed source is never served stale code, a bad cache file only costs a compile, and
PYTHONDONTWRITEBYTECODE is honoured. Each case runs in a fresh interpreter (imports are global)."""

from __future__ import annotations

import json
import marshal
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

PROBE = """
import json, sys
from pathlib import Path
sys.path.insert(0, {zip!r})
from kafka_core.spark.zip_bytecode import install, loaded_through_cache
install(packages=("zbpkg",), directory=Path({cache!r}))
import zbpkg.mod
try:
    zbpkg.mod.fail()
except ZeroDivisionError as exc:
    import traceback
    where = traceback.format_exception(exc)[-2]
print(json.dumps({{"value": zbpkg.mod.VALUE, "cached": loaded_through_cache(zbpkg.mod),
                  "file": zbpkg.mod.__file__, "where": where,
                  "data": zbpkg.__loader__.get_data({zip!r} + "/zbpkg/data.txt").decode()}}))
"""


def _zip(path: Path, value: int) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("zbpkg/__init__.py", "")
        z.writestr("zbpkg/mod.py", f"VALUE = {value}\n\n\ndef fail():\n    return 1 / 0\n")
        z.writestr("zbpkg/data.txt", "resource")
    return path


def _run(zip_path: Path, cache: Path, script: str = PROBE, **env: str) -> dict:
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    environ["PYTHONPATH"] = str(REPO)
    environ.update(env)
    out = subprocess.run(
        [sys.executable, "-c", script.format(zip=str(zip_path), cache=str(cache))],
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(out.stdout)


def _entries(cache: Path) -> list[Path]:
    return sorted(p for p in cache.glob("zbpkg.mod.*.bin"))


def test_a_module_from_a_zip_compiles_once_and_is_served_from_the_cache(tmp_path: Path) -> None:
    zip_path, cache = _zip(tmp_path / "lib.zip", 1), tmp_path / "cache"
    first = _run(zip_path, cache)
    assert first["value"] == 1 and first["cached"]
    assert first["file"] == str(zip_path / "zbpkg" / "mod.py")
    # tracebacks name the zip's file and show its line, as the zip importer's do
    assert str(zip_path / "zbpkg" / "mod.py") in first["where"] and "return 1 / 0" in first["where"]
    assert first["data"] == "resource"
    (entry,) = _entries(cache)
    # a second process runs what the cache holds: a doctored entry proves it was read
    entry.write_bytes(marshal.dumps(compile("VALUE = 42\ndef fail():\n    return 1 / 0\n", "x", "exec")))
    assert _run(zip_path, cache)["value"] == 42


def test_a_changed_source_is_compiled_again_never_served_stale(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    assert _run(_zip(tmp_path / "lib.zip", 1), cache)["value"] == 1
    assert _run(_zip(tmp_path / "lib.zip", 2), cache)["value"] == 2
    assert len(_entries(cache)) == 2


@pytest.mark.parametrize("garbage", [b"", b"\x00not marshal", marshal.dumps([1, 2, 3])])
def test_a_bad_cache_entry_only_costs_a_compile(tmp_path: Path, garbage: bytes) -> None:
    zip_path, cache = _zip(tmp_path / "lib.zip", 7), tmp_path / "cache"
    _run(zip_path, cache)
    (entry,) = _entries(cache)
    entry.write_bytes(garbage)
    assert _run(zip_path, cache)["value"] == 7
    # and the entry was rewritten whole
    assert marshal.loads(entry.read_bytes()).co_filename == str(zip_path / "zbpkg" / "mod.py")


def test_dont_write_bytecode_reads_the_cache_but_writes_nothing(tmp_path: Path) -> None:
    zip_path, cache = _zip(tmp_path / "lib.zip", 3), tmp_path / "cache"
    assert _run(zip_path, cache, PYTHONDONTWRITEBYTECODE="1")["value"] == 3
    assert _entries(cache) == []
    _run(zip_path, cache)
    assert len(_entries(cache)) == 1


def test_an_unwritable_cache_still_imports(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert _run(_zip(tmp_path / "lib.zip", 5), blocker / "cache")["value"] == 5


def test_the_cache_lives_under_pycache_prefix_when_one_is_set(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", "from kafka_core.spark.zip_bytecode import cache_dir; print(cache_dir())"],
        env={**os.environ, "PYTHONPATH": str(REPO), "PYTHONPYCACHEPREFIX": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.strip() == str(tmp_path / "kafka_core-zip")


CHANGED = """
import importlib, json, sys, time, zipfile
from pathlib import Path
sys.path.insert(0, {zip!r})
from kafka_core.spark.zip_bytecode import install
install(packages=("zbpkg",), directory=Path({cache!r}))
import zbpkg.mod
importlib.invalidate_caches()  # as PySpark's worker does: nothing changed, nothing to re-read
import zbpkg.mod as again
time.sleep(0.01)
with zipfile.ZipFile({zip!r}, "a") as z:
    z.writestr("zbpkg/added.py", "ADDED = True\\n")
importlib.invalidate_caches()  # the archive changed: its new module is found
import zbpkg.added
print(json.dumps({{"again": again.VALUE, "added": zbpkg.added.ADDED}}))
"""


def test_a_changed_archive_is_read_again_after_invalidate_caches(tmp_path: Path) -> None:
    assert _run(_zip(tmp_path / "lib.zip", 4), tmp_path / "cache", CHANGED) == {"again": 4, "added": True}


def test_compiling_an_archive_ahead_fills_what_the_workers_read(tmp_path: Path) -> None:
    """compile_archives is compileall for the zips: asked for, it writes even where the workers
    may not (PYTHONDONTWRITEBYTECODE), and a worker then runs the entries it wrote."""
    from kafka_core.spark.zip_bytecode import compile_archives

    zip_path, cache = _zip(tmp_path / "lib.zip", 1), tmp_path / "cache"
    with zipfile.ZipFile(zip_path, "a") as z:
        z.writestr("zbpkg/tests/test_x.py", "raise SystemExit('tests are not compiled')\n")
        z.writestr("zbpkg/broken.py", "def (:\n")  # left for its import to report
    assert compile_archives([str(zip_path), str(tmp_path / "missing.zip")], cache) == 2  # __init__ and mod
    assert compile_archives([str(zip_path)], cache) == 0  # there already
    (entry,) = _entries(cache)
    entry.write_bytes(marshal.dumps(compile("VALUE = 42\ndef fail():\n    return 1 / 0\n", "x", "exec")))
    served = _run(zip_path, cache, PYTHONDONTWRITEBYTECODE="1")
    assert served["value"] == 42 and served["cached"]
    assert _entries(cache) == [entry]


def test_the_spark_archives_are_pysparks_own(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from kafka_core.spark.zip_bytecode import spark_archives

    lib = tmp_path / "python" / "lib"
    lib.mkdir(parents=True)
    for name in ("pyspark.zip", "py4j-0.10.9.9-src.zip", "other.zip"):
        (lib / name).write_bytes(b"")
    monkeypatch.setenv("SPARK_HOME", str(tmp_path))
    assert spark_archives() == [str(lib / "pyspark.zip"), str(lib / "py4j-0.10.9.9-src.zip")]
