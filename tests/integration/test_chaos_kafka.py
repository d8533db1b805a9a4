"""The chaos harness's Apache Kafka set in short mode, on the session's three-node cluster.

Each capability runs through the same code as ``python -m kafka_core.devtools.chaos run --broker
kafka --mode short`` and leaves its JSON artifact in ``$CHAOS_ARTIFACTS`` (else a temporary directory). Kafka is the
reference broker: every acknowledged record must be delivered once and stored once, and the
clients must resume after every fault by themselves: poll raising while two nodes answer is a
failure too (issue 21).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kafka_core.devbroker import KafkaCluster
from kafka_core.devtools.chaos.artifacts import PASS, write_artifact
from kafka_core.devtools.chaos.cli import main
from kafka_core.devtools.chaos.kafka_scenarios import CAPABILITIES
from kafka_core.devtools.chaos.scenarios import run_on

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    configured = os.environ.get("CHAOS_ARTIFACTS", "").strip()
    return Path(configured) if configured else tmp_path_factory.mktemp("chaos-kafka")


@pytest.mark.parametrize("capability", [pytest.param(c, id=c) for c in CAPABILITIES])
def test_short_mode_loses_and_duplicates_nothing(
    kafka_three: KafkaCluster, capability: str, artifacts: Path
) -> None:
    outcome = run_on(kafka_three, capability, "short")
    doc = json.loads(write_artifact(outcome, artifacts).read_text())
    assert doc["verdict"] == PASS, doc["reason"]
    assert doc["cycles_run"] >= 1 and doc["pass_count"] == doc["cycles_run"]
    assert doc["acknowledged"] > 0
    assert doc["lost"] == 0 and doc["duplicated"] == 0 and doc["corrupt_delivered"] == 0
    # Kafka owns nothing here: no record may be put down to the broker.
    assert doc["broker_lost"] == 0 and doc["broker_duplicated"] == 0 and doc["unread"] == 0
    assert doc["delivered"] == doc["acknowledged"]
    assert doc["details"]["independent_log_read"] is True
    for cycle in doc["cycles"]:  # every fault was followed by acks and deliveries on what it touched
        assert cycle["recovery_ack_s"] is not None and cycle["recovery_delivery_s"] is not None
    # A failover is no outage: while two nodes answer, poll never raised (it raised "consumer cut
    # off" when a SIGKILLed leader took longer than request_timeout_ms to be replaced). Only the
    # whole cluster stopped may be reported by poll, as the outage it is.
    raised = [e for e in doc["details"]["consumer_errors"] if e["where"] == "poll"]
    if capability != "kafka-cluster-restart":
        assert raised == [], f"poll raised while the cluster answered: {raised[0]}"
    # The cluster is left whole for the next capability.
    assert kafka_three.running


def test_the_cli_offers_the_kafka_set(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--broker", "nope"])
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = capsys.readouterr().out
    assert "--broker" in text and "kafka-leader-kill" in text
