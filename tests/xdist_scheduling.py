"""How the broker suites spread over pytest-xdist workers (``-n N --dist loadgroup``, ci/test.sh).

Each worker is a pytest session of its own, with its own session broker. A test goes to whichever
worker is free, but for two kinds of module: the tests of a module in :data:`WHOLE_MODULES` run on
one worker, in order, so that what its module-scoped fixture starts (a broker, a Spark session, a
TLS set-up) starts once; and the modules that use the three-node Apache Kafka (``kafka_three``, a
session fixture) all run on the same worker, so that a run starts one such cluster, not one per
worker; and the modules that start Spark (:data:`SPARK_MODULES`) run on one worker too, one after
the other. Those units, the largest first, go out before the single tests, which fill in around them.

pytest-xdist's own ``loadgroup`` groups by an ``xdist_group`` mark through a suffix it writes into
the node id, which pytest 9.2's structured node ids no longer take (pytest-dev/pytest-xdist#1386):
the grouping is done here instead, from the node id the controller sees. Which modules share a
group is said below; :func:`check_groups` fails the collection when a test uses a shared fixture
from a module not listed, so the list cannot fall behind the tests.
"""

from __future__ import annotations

from typing import Any

import pytest
from xdist.scheduler import LoadGroupScheduling

# Modules whose tests share a module-scoped fixture that starts something costly: a broker of their
# own (persistent_tansu and the like), a TLS or SASL set-up. A module left out still passes, but
# each worker that runs one of its tests starts its own. (The Spark modules are one unit together:
# SPARK_MODULES.)
WHOLE_MODULES = frozenset(
    {
        "test_chaos.py",
        "test_consumer_fail_fast.py",
        "test_follower_fetch_kafka.py",
        "test_kafka_security.py",
        "test_oauth_kafka.py",
        "test_protocol_capture.py",
        "test_sasl.py",
        "test_stall_bounds.py",
        "test_telemetry_kafka.py",
        "test_tls.py",
    }
)
# A session fixture that must be one for the whole run -> the modules whose tests use it.
SHARED_FIXTURES: dict[str, frozenset[str]] = {
    "kafka_three": frozenset(
        {
            "test_admin_replicas_kafka.py",
            "test_chaos_kafka.py",
            "test_consumer_truncation.py",
            "test_devbroker_failover_kafka.py",
            "test_leader_moves_kafka.py",
            "test_reassignment_cancel_kafka.py",
            "test_rebootstrap_kafka.py",
            "test_wide_leaders_kafka.py",
        }
    ),
}
# The modules whose tests start Spark (a local session, a standalone cluster, Spark Connect, the main
# job): one at a time. Three Spark sessions at once on two cores (each local[2], with its Python
# workers) starved a new Python worker past the 10 s Spark gives it to connect back, fixed in
# PythonWorkerFactory.createSimpleWorker (stop 47's red: a streaming source's runner, at the end of
# a 1,600 s stage). Serially they take about 710 s on a quiet machine, under half the stage.
SPARK_MODULES = frozenset(
    {
        "test_main_job.py",
        "test_spark_cluster.py",
        "test_spark_connect.py",
        "test_spark_data_loss.py",
        "test_spark_group_commit.py",
        "test_spark_launcher.py",
        "test_spark_pushdown.py",
        "test_spark_read_reuse.py",
        "test_spark_registry.py",
        "test_spark_source.py",
        "test_spark_transactional.py",
        "test_spark_worker_python.py",
    }
)
_GROUP_OF_MODULE = {module: fixture for fixture, modules in SHARED_FIXTURES.items() for module in modules}
_GROUP_OF_MODULE.update({module: "spark" for module in SPARK_MODULES})


class ModuleGroupScheduling(LoadGroupScheduling):
    """xdist's scope scheduling with a test as the unit of work, but a module of
    :data:`WHOLE_MODULES` as one unit, and the modules that share a session fixture
    (:data:`SHARED_FIXTURES`) or start Spark (:data:`SPARK_MODULES`) as one unit together."""

    def _split_scope(self, nodeid: str) -> str:
        if nodeid.rfind("@") > nodeid.rfind("]"):  # an xdist_group suffix, where xdist can write it
            return super()._split_scope(nodeid)
        path = nodeid.split("::", 1)[0]
        module = path.rsplit("/", 1)[-1]
        if module in _GROUP_OF_MODULE:
            return _GROUP_OF_MODULE[module]
        return path if module in WHOLE_MODULES else nodeid


def make_scheduler(config: pytest.Config, log: Any) -> ModuleGroupScheduling | None:
    """The scheduler for ``--dist loadgroup``; None (xdist's choice) for any other mode."""
    if config.getvalue("dist") != "loadgroup":
        return None
    return ModuleGroupScheduling(config, log)


def check_groups(items: list[pytest.Item]) -> None:
    """Fail the collection when a test uses a shared fixture from a module not in its group, or a
    broker suite's module named for Spark is not in :data:`SPARK_MODULES`."""
    strays = sorted(
        f"{item.nodeid} uses {fixture}"
        for item in items
        for fixture, modules in SHARED_FIXTURES.items()
        if fixture in getattr(item, "fixturenames", ()) and item.path.name not in modules
    )
    if strays:
        raise pytest.UsageError(
            "tests/xdist_scheduling.py: add these tests' modules to SHARED_FIXTURES, so that "
            "every test of a shared cluster runs on one xdist worker:\n  " + "\n  ".join(strays)
        )
    spark_strays = sorted(
        {
            item.path.name
            for item in items
            if item.path.name.startswith("test_spark")
            and item.path.parent.name in {"integration", "interop"}
            and item.path.name not in SPARK_MODULES
        }
    )
    if spark_strays:
        raise pytest.UsageError(
            "tests/xdist_scheduling.py: add these modules to SPARK_MODULES, so that no two Spark "
            "sessions run at once: " + ", ".join(spark_strays)
        )
