"""A bytecode cache for modules imported from zip files (``pyspark.zip`` above all).

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on its Python workers' path, even for a
pip-installed PySpark whose compiled copy sits in site-packages, and the zip holds sources only:
every Python process Spark starts compiles each PySpark module it imports afresh, about 0.5 s of
CPU per process on the first job. :func:`install` puts a finder before the zip importer that
keeps the compiled code on disk, keyed by a hash of the module's source and the interpreter's
bytecode tag, so a changed zip (another Spark, a patched build) never gets stale code; a cache
that cannot be written only costs the compile it would have saved.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import marshal
import os
import pkgutil
import sys
import tempfile
import zipimport
from collections.abc import Sequence
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any

__all__ = [
    "ZipBytecodeFinder",
    "cache_dir",
    "compile_archives",
    "install",
    "loaded_through_cache",
    "spark_archives",
]


def cache_dir() -> Path:
    """Where the compiled modules go: under ``PYTHONPYCACHEPREFIX`` when one is set (the user
    chose where bytecode lives), else the user's cache directory."""
    if sys.pycache_prefix:
        return Path(sys.pycache_prefix) / "kafka_core-zip"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kafka_core" / "zip-bytecode"


class _CachingZipLoader(importlib.abc.Loader):
    """The zip importer's loader with ``get_code`` served from the cache; everything else (data,
    resources, sources for tracebacks) is the zip importer's own."""

    def __init__(self, zipped: zipimport.zipimporter, origin: str, directory: Path, write: bool) -> None:
        self._zipped = zipped
        self._origin = origin
        self._directory = directory
        self._write = write

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        exec(self.get_code(module.__name__), module.__dict__)  # the module's own code, as a loader runs it

    def get_code(self, fullname: str) -> CodeType:
        source = self._zipped.get_source(fullname)
        if source is None:  # a compiled-only entry: the zip importer knows how to load it
            code = self._zipped.get_code(fullname)
            assert code is not None
            return code
        raw = source.encode("utf-8")
        path = _entry(self._directory, fullname, self._origin, raw)
        with contextlib.suppress(OSError, ValueError, EOFError, TypeError):
            code = marshal.loads(path.read_bytes())
            if isinstance(code, CodeType):
                return code
        code = compile(raw, self._origin, "exec", dont_inherit=True)
        if self._write:
            _store(path, marshal.dumps(code))
        return code

    def get_filename(self, fullname: str) -> str:
        # the zip importer's own compiles the module to learn its file name
        return self._origin

    def __getattr__(self, name: str) -> Any:
        return getattr(self._zipped, name)


def _entry(directory: Path, fullname: str, origin: str, raw: bytes) -> Path:
    """The cache file of a module's code: named by its source, where it came from and the
    interpreter's bytecode tag."""
    key = hashlib.blake2b(
        b"\0".join((raw, origin.encode(), (sys.implementation.cache_tag or "").encode())),
        digest_size=16,
    ).hexdigest()
    return directory / f"{fullname}.{key}.bin"


def _store(path: Path, data: bytes) -> None:
    """Atomically, so that workers starting together never read half a file; failures ignored."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


class ZipBytecodeFinder(importlib.abc.MetaPathFinder):
    """Finds modules as the path finder does; those that come from a zip file get the caching
    loader. Only ``packages`` (top-level names) are looked at, everything else is left alone."""

    def __init__(self, packages: Sequence[str], directory: Path, write: bool) -> None:
        self._packages = frozenset(packages)
        self._directory = directory
        self._write = write

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.partition(".")[0] not in self._packages:
            return None
        # The path in order, as the path finder walks it; the zip importer's own find_spec is
        # not used: it compiles the module just to learn its file name.
        for entry in sys.path if path is None else path:
            importer = pkgutil.get_importer(entry)
            if importer is None:
                continue
            if not isinstance(importer, zipimport.zipimporter):
                if importer.find_spec(fullname) is not None:
                    return None  # found outside a zip first: the path finder's business
                continue
            try:
                package = importer.is_package(fullname)
            except zipimport.ZipImportError:
                continue
            name = fullname.rpartition(".")[2]
            where = os.path.join(importer.archive, importer.prefix, name)
            origin = os.path.join(where, "__init__.py") if package else where + ".py"
            loader = _CachingZipLoader(importer, origin, self._directory, self._write)
            return importlib.util.spec_from_file_location(
                fullname, origin, loader=loader, submodule_search_locations=[where] if package else None
            )
        return None


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


class _StableZipImporter(zipimport.zipimporter):
    """A zip importer whose ``invalidate_caches`` re-reads the archive only when the file changed.

    PySpark's worker calls ``importlib.invalidate_caches()`` as it starts, and the zip importer
    re-reads the whole directory of its archive, in pure Python, once per importer: one per
    package directory of ``pyspark.zip`` imported from, 0.26 s of a task worker's start."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self._stamp = _stamp(self.archive)

    def invalidate_caches(self) -> None:
        stamp = _stamp(self.archive)
        if stamp != self._stamp:
            self._stamp = stamp
            super().invalidate_caches()


def _stable_zips(archives: Sequence[str]) -> None:
    """Serve ``archives`` (and the directories in them) through :class:`_StableZipImporter`."""
    if not archives:
        return

    def hook(path: str) -> _StableZipImporter:
        if any(path == a or path.startswith(a + os.sep) for a in archives):
            return _StableZipImporter(path)
        raise ImportError("not an archive kafka_core keeps")

    sys.path_hooks.insert(0, hook)
    for cached in list(sys.path_importer_cache):
        if any(cached == a or cached.startswith(a + os.sep) for a in archives):
            del sys.path_importer_cache[cached]


def install(
    packages: Sequence[str] = ("pyspark", "py4j"), directory: Path | None = None
) -> ZipBytecodeFinder:
    """Put the finder first in ``sys.meta_path`` (once), and keep the zip files on ``sys.path``
    from being re-read when nothing changed; modules already imported stay as they are. Writes
    to the cache unless ``PYTHONDONTWRITEBYTECODE`` is set (reads it either way)."""
    for finder in sys.meta_path:
        if isinstance(finder, ZipBytecodeFinder):
            return finder
    finder = ZipBytecodeFinder(packages, directory or cache_dir(), write=not sys.dont_write_bytecode)
    sys.meta_path.insert(0, finder)
    # pyspark.zip, py4j's zip and spark-core's jar (PythonUtils.sparkPythonPath puts all three there)
    archives = [os.path.abspath(p) for p in sys.path if p.endswith((".zip", ".jar")) and os.path.isfile(p)]
    _stable_zips(archives)
    return finder


def loaded_through_cache(module: ModuleType) -> bool:
    """Whether a module came through the caching loader (for diagnostics and tests)."""
    return isinstance(getattr(module, "__loader__", None), _CachingZipLoader)


def spark_archives() -> list[str]:
    """The zips Spark puts first on its Python workers' path (``PythonUtils.sparkPythonPath``):
    ``pyspark.zip`` and py4j's, under ``$SPARK_HOME/python/lib`` (a pip install's own when unset)."""
    import glob

    home = os.environ.get("SPARK_HOME")
    if not home:
        spec = importlib.util.find_spec("pyspark")
        if spec is None or spec.origin is None:
            return []
        home = os.path.dirname(spec.origin)
    lib = os.path.join(home, "python", "lib")
    return sorted(glob.glob(os.path.join(lib, "pyspark.zip"))) + sorted(
        glob.glob(os.path.join(lib, "py4j-*.zip"))
    )


def compile_archives(archives: Sequence[str] | None = None, directory: Path | None = None) -> int:
    """Compile every module of ``archives`` (default: :func:`spark_archives`) into the cache, as
    ``compileall`` does for installed packages: asked for, so ``PYTHONDONTWRITEBYTECODE`` (which
    keeps the workers from writing) does not stop it. Tests are left out; a module whose entry is
    there already is not compiled again. Returns how many were compiled."""
    import zipfile

    directory = directory or cache_dir()
    compiled = 0
    for archive in spark_archives() if archives is None else archives:
        try:
            with zipfile.ZipFile(archive) as zipped:
                for name in zipped.namelist():
                    if not name.endswith(".py") or "/tests/" in name:
                        continue
                    fullname = name[: -len(".py")].removesuffix("/__init__").replace("/", ".")
                    with contextlib.suppress(UnicodeDecodeError, SyntaxError, ValueError):
                        # as the zip importer's get_source gives it to the loader
                        raw = zipped.read(name).decode().encode("utf-8")
                        origin = os.path.join(archive, name)
                        path = _entry(directory, fullname, origin, raw)
                        if path.exists():
                            continue
                        _store(path, marshal.dumps(compile(raw, origin, "exec", dont_inherit=True)))
                        compiled += 1
        except (OSError, zipfile.BadZipFile):
            continue
    return compiled


if __name__ == "__main__":  # python -m kafka_core.spark.zip_bytecode [archive ...]
    count = compile_archives(sys.argv[1:] or None)
    print(f"kafka_core: {count} modules compiled into {cache_dir()}")
