"""The bench children's bytecode: kafka_core runs from the source tree, the peers compiled."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent

BYTECODE_CACHE = Path(tempfile.gettempdir()) / "kafka_core-bench-pycache"


def child_env() -> dict[str, str]:
    """The environment of a bench child: the repository on the path, and bytecode cached.

    The peers are installed with their bytecode compiled; kafka_core runs from the source tree,
    and under PYTHONDONTWRITEBYTECODE (set on these machines) every child compiled it afresh,
    partly inside the timed span (the loop thread imports protocol messages lazily). A cache
    of our own (PYTHONPYCACHEPREFIX, outside the repository), filled once by warm_bytecode
    before the first child, takes that out of every run.
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_DIR), env.get("PYTHONPATH", "")]))
    if env.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
        env.setdefault("PYTHONPYCACHEPREFIX", str(BYTECODE_CACHE))
    return env


WARM_IMPORTS = (
    "asyncio, concurrent.futures, json, random, selectors, ssl, bench.common, bench.e2e_producer, "
    "bench.e2e_consumer, bench.bench_transactions, confluent_kafka, aiokafka, kafka, pyarrow, "
    "pyarrow.compute"
)


@functools.cache
def warm_bytecode() -> None:
    """Fill the children's bytecode cache once per process, so that no client's first run pays
    for it: with PYTHONPYCACHEPREFIX every module (the standard library's and the peers' too)
    is cached there. Compiles kafka_core whole (it imports much lazily) and imports the rest."""
    env = child_env()
    if "PYTHONPYCACHEPREFIX" not in env:
        return
    for cmd in (
        [sys.executable, "-m", "compileall", "-q", str(REPO_DIR / "kafka_core"), str(BENCH_DIR)],
        [sys.executable, "-c", f"import {WARM_IMPORTS}"],
    ):
        subprocess.run(cmd, env=env, cwd=REPO_DIR, capture_output=True, check=False, timeout=300)
