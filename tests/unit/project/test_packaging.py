"""What a user downloads: the sdist and the wheel built from it (slow: one full build, ~40 s).

The sdist must carry what a build needs (the .pyx, the generated C, the .pxd and headers) and
the licence; the wheel built from that sdist must carry every extension module stripped of debug
information, their .pyi stubs, py.typed and the licence files, and its codec must load.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
# module path in the wheel (without the ABI suffix) for every _codec/*.pyx: read from the sources,
# so that a new extension is checked without anyone remembering to list it here
_PACKAGE_OF = {"accel": "kafka_core/producer/_cython"}
EXTENSIONS = {
    pyx.stem: f"{_PACKAGE_OF.get(pyx.stem, 'kafka_core/codec/_cython')}/{pyx.stem}"
    for pyx in sorted((REPO / "_codec").glob("*.pyx"))
}

pytestmark = pytest.mark.skipif(
    os.environ.get("KAFKA_CORE_PURE_PYTHON", "") not in ("", "0"),
    reason="the packaging build is checked once, in the Cython run of the unit suite",
)


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(sdist, wheel): `python -m build` makes the sdist, then the wheel from the unpacked sdist."""
    import build  # noqa: F401  (a test dependency: missing, this fails rather than skips)

    # One build for the run: under pytest-xdist the module's tests may land on several workers,
    # and two builds at once in the checkout trip over each other's sdist staging folder. The
    # first worker builds into the run's shared folder, under a lock; the others wait and reuse it.
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    out = shared / "dist"
    with (shared / "dist.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "built").exists():
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
            env = {k: v for k, v in os.environ.items() if k != "KAFKA_CORE_PURE_PYTHON"}
            env["KAFKA_CORE_REQUIRE_EXTENSION"] = "1"  # a failed compile fails here, not a pure wheel
            # what the sdist and wheel carry does not depend on the optimisation: -O0 compiles the
            # codec in a quarter of the CPU (the same sources and flags build with -O3 in the set-up)
            env["KAFKA_CORE_UNOPTIMISED_BUILD"] = "1"
            result = subprocess.run(
                [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(REPO)],
                env=env,
                capture_output=True,
                text=True,
                timeout=280,  # a hang guard, inside pytest's 300 s: the compile took over 110 s on 2 loaded cores
            )
            assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
            (out / "built").touch()
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    return sdist, wheel


def _elf_sections(data: bytes) -> set[str]:
    """Section names of a 64-bit little-endian ELF file."""
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, "not a 64-bit LE ELF file"
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    str_off = struct.unpack_from("<Q", data, shoff + shstrndx * shentsize + 0x18)[0]
    names = set()
    for i in range(shnum):
        name_at = struct.unpack_from("<I", data, shoff + i * shentsize)[0]
        end = data.index(b"\0", str_off + name_at)
        names.add(data[str_off + name_at : end].decode())
    return names


def test_every_extension_is_checked() -> None:
    """The list above comes from a glob: an empty or partial one would check nothing."""
    assert {"batch", "columnar", "primitives", "records", "accel", "avro", "avro_enc"} <= set(EXTENSIONS)


def test_sdist_carries_the_sources_the_generated_c_and_the_licence(dist: tuple[Path, Path]) -> None:
    sdist, _ = dist
    with tarfile.open(sdist) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    for stem in EXTENSIONS:
        assert f"_codec/{stem}.pyx" in names
        assert f"_codec/{stem}.c" in names, "the sdist must build with a C compiler alone"
    for needed in ("LICENSE", "NOTICE", "_codec/reader.pxd", "_codec/overlap.h", "_codec/writer.pxi"):
        assert needed in names
    assert "kafka_core/codec/_cython/primitives.pxd" in names
    assert "kafka_core/codec/_cython/batch.pxd" in names


def test_wheel_has_every_extension_stripped_with_stubs_and_licence(dist: tuple[Path, Path]) -> None:
    _, wheel = dist
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        for stem, module in EXTENSIONS.items():
            compiled = [n for n in names if n.startswith(module + ".") and n.endswith((".so", ".pyd"))]
            assert len(compiled) == 1, f"{stem}: {compiled}"
            assert module + ".pyi" in names, f"no stub for {module}"
            if sys.platform.startswith("linux"):
                sections = _elf_sections(zf.read(compiled[0]))
                assert not {s for s in sections if s.startswith(".debug")}, f"{stem} has debug info"
                assert ".symtab" not in sections, f"{stem} is not stripped"
        assert "kafka_core/py.typed" in names
        assert "kafka_core/protocol/messages/_fetch.py" in names
        # the dev brokers build and fetch from package data, never from a checkout
        for data in ("seaweedfs_gateway/main.go", "seaweedfs_gateway/go.mod", "seaweedfs_gateway/go.sum"):
            assert f"kafka_core/devtools/brokers/{data}" in names
        assert "kafka_core/devtools/brokers/kafka-server.pom.xml" in names
        assert "kafka_core/devtools/brokers/spark-connector.pom.xml" in names
        assert "kafka_core/devtools/brokers/TelemetryFileReporter.java" in names
        # the tests' schema table lives in tools/protocol_gen, not in the package
        assert not [n for n in names if n.endswith(("/_schema.py", "/schema_table.py"))]
        dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        assert f"{dist_info}/licenses/LICENSE" in names
        assert f"{dist_info}/licenses/NOTICE" in names
        metadata = zf.read(f"{dist_info}/METADATA").decode()
        assert "License-Expression: Apache-2.0" in metadata
        assert b"Apache License" in zf.read(f"{dist_info}/licenses/LICENSE")


def test_wheel_codec_loads_and_round_trips(dist: tuple[Path, Path], tmp_path: Path) -> None:
    _, wheel = dist
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(tmp_path / "site")
    code = (
        "import kafka_core, kafka_core.codec as c, kafka_core.producer._cython.accel as a;"
        "print(kafka_core.__file__); print(c.IMPLEMENTATION);"
        "print(c.decode_record_batches(c.encode_record_batch([(b'k', b'v')]))[0].value);"
        "print(a.murmur2(b'k'))"
    )
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_CORE_PURE_PYTHON"}
    env["KAFKA_CORE_REQUIRE_EXTENSION"] = "1"
    env["PYTHONPATH"] = str(tmp_path / "site")
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    where, implementation, value, _ = result.stdout.splitlines()
    assert where.startswith(str(tmp_path / "site"))  # the wheel's copy, not the checkout's
    assert implementation == "cython"
    assert value == "b'v'"
