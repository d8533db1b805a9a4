"""Builds the Cython codec extensions from ``_codec/``.

A failed build (no compiler, no Cython) is not fatal: the package installs with the pure-Python
codec and warns, unless KAFKA_CORE_REQUIRE_EXTENSION=1 is set (CI sets it). The sdist ships the
Cython-generated C next to the .pyx, so building from it needs only a C compiler when Cython is
absent. Extensions are built without debug information (and stripped on Linux) so that wheels
are a fraction of the size; KAFKA_CORE_DEBUG_SYMBOLS=1 keeps them for a debugger or profiler.
KAFKA_CORE_UNOPTIMISED_BUILD=1 compiles without optimisation (-O0: 20 s of CPU for the codec, not
84): for builds that check packaging, not speed (tests/unit/project/test_packaging.py).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).parent


def env_flag(name: str) -> bool:
    """As kafka_core._env.env_flag (not imported: the package is not importable at build time)."""
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


REQUIRE = env_flag("KAFKA_CORE_REQUIRE_EXTENSION")
PURE = env_flag("KAFKA_CORE_PURE_PYTHON")
DEBUG_SYMBOLS = env_flag("KAFKA_CORE_DEBUG_SYMBOLS")
UNOPTIMISED = env_flag("KAFKA_CORE_UNOPTIMISED_BUILD")


# Every Cython source lives in _codec/ and builds into the module of the same name in a ``_cython``
# package: the codec's (kafka_core.codec._cython) unless named here. Beside each built module sit
# its .pyi stub (for mypy) and, for a module that others cimport, its .pxd
# (kafka_core/codec/_cython/primitives.pxd), so every cimport uses the module's one real name; the
# .pxd files in _codec/ (reader, arrow) are inline-only C helpers, not modules. Each built module
# has a pure-Python twin of the same name in the sibling ``_python`` package.
PACKAGE_FOR_SOURCE = {"accel": "kafka_core.producer._cython"}


def build_flags() -> tuple[list[str], list[str]]:
    """Compile and link flags: optimised, and without debug info unless asked for (-g0 comes
    after Python's own -g, so it wins; -s strips the symbol table at link time on Linux)."""
    if sys.platform == "win32":
        return ["/O2"], []
    level = "-O0" if UNOPTIMISED else "-O3"
    if DEBUG_SYMBOLS:
        return [level], []
    return [level, "-g0"], (["-s"] if sys.platform.startswith("linux") else [])


def extensions() -> list[Extension]:
    if PURE:
        return []
    sources = sorted((HERE / "_codec").glob("*.pyx"))
    compile_args, link_args = build_flags()

    def extension(pyx: Path, suffix: str) -> Extension:
        return Extension(
            f"{PACKAGE_FOR_SOURCE.get(pyx.stem, 'kafka_core.codec._cython')}.{pyx.stem}",
            [str(pyx.relative_to(HERE).with_suffix(suffix))],
            include_dirs=["_codec"],
            extra_compile_args=compile_args,
            extra_link_args=link_args,
        )

    try:
        from Cython.Build import cythonize
    except ImportError:
        if all(pyx.with_suffix(".c").exists() for pyx in sources):  # an sdist: its generated C
            return [extension(pyx, ".c") for pyx in sources]
        if REQUIRE:
            raise
        print("WARNING: Cython is not installed; kafka_core will use its pure-Python codec", file=sys.stderr)
        return []
    return cythonize(
        [extension(pyx, ".pyx") for pyx in sources],
        compiler_directives={
            "language_level": "3",
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "embedsignature": True,
        },
        include_path=[str(HERE), str(HERE / "_codec")],
        quiet=True,
    )


class OptionalBuildExt(build_ext):
    """Falls back to the pure-Python codec when compiling fails, with a loud warning."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:
            self._fail(exc)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:
            self._fail(exc)

    def _fail(self, exc: Exception) -> None:
        if REQUIRE:
            raise exc
        print(
            f"WARNING: building the Cython codec failed ({exc}); kafka_core will use its pure-Python codec",
            file=sys.stderr,
        )


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
