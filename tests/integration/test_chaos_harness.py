"""The chaos harness in short mode: every capability against a real Tansu, verdict and artifact.

Each capability runs once (a few cycles) through the same code as ``python -m kafka_core.devtools.chaos run --mode
short`` and leaves its JSON artifact in ``$CHAOS_ARTIFACTS`` (else a temporary directory). The
books' rules are unit-tested first, without a broker: a test that can only pass proves nothing.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from prerequisites import unavailable

from kafka_core.devtools.chaos.accounting import Ledger, unread_by_both
from kafka_core.devtools.chaos.artifacts import BLOCKED, FAIL, PASS, Outcome, write_artifact
from kafka_core.devtools.chaos.capture import ProduceWrite
from kafka_core.devtools.chaos.cli import main
from kafka_core.devtools.chaos.evidence import batch_at, judge_duplicates
from kafka_core.devtools.chaos.scenarios import CAPABILITIES, Settings, run_capability
from kafka_core.devtools.chaos.values import parse_value, record_value
from kafka_core.devtools.chaos.workload import SENTINEL, Workload, read_log_report

FIELDS = {
    "capability",
    "verdict",
    "parameters",
    "pass_count",
    "cycles_run",
    "produced",
    "acknowledged",
    "delivered",
    "lost",
    "broker_lost",
    "broker_lost_evidence",
    "duplicated",
    "corrupt_delivered",
    "recovery_times_s",
    "timestamp",
    "broker",
    "kafka_core_version",
    "codec",
    "seed",
    "mode",
}


# --- the books (no broker) ---


def test_record_bodies_are_checked_byte_for_byte() -> None:
    assert parse_value(record_value(12345)) == 12345
    body = bytearray(record_value(7))
    body[60] ^= 1
    assert parse_value(bytes(body)) is None
    assert parse_value(None) is None


def test_an_acknowledged_record_never_delivered_is_the_clients_loss() -> None:
    ledger = Ledger("t")
    ledger.sent(3)
    for seq in range(3):
        ledger.ack(seq, 0, seq)
    ledger.deliver(0, 0, record_value(0))
    ledger.deliver(0, 2, record_value(2))
    t = ledger.tally({0: [(0, 0), (1, 1), (2, 2)]})  # in the log: the consumer skipped it
    assert (t.lost, t.broker_lost, t.lost_examples) == (1, 0, [1])


def test_tansus_duplicate_sequence_signature_is_the_brokers_loss_with_evidence() -> None:
    ledger = Ledger("t")
    ledger.sent(4)
    ledger.ack(0, 1, 0)
    ledger.ack(1, 1, -1)  # answered DUPLICATE_SEQUENCE_NUMBER ...
    ledger.ack(2, 1, -1)
    ledger.ack(3, 1, 3)
    for seq, offset in ((0, 0), (3, 3)):
        ledger.deliver(1, offset, record_value(seq))
    t = ledger.tally({1: [(0, 0), (3, 3)]})  # ... and the log has a hole where they were
    assert (t.lost, t.broker_lost) == (0, 2)
    (ev,) = t.evidence
    assert ev["partition"] == 1 and ev["log_hole"] == [1, 2] and ev["records"] == [1, 2]
    assert "DUPLICATE_SEQUENCE_NUMBER" in ev["answer"]


def test_a_hole_elsewhere_or_of_another_size_does_not_excuse_a_loss() -> None:
    ledger = Ledger("t")
    ledger.sent(6)
    for seq, offset in ((0, 0), (1, -1), (2, 1), (3, -1), (4, -1), (5, 5)):
        ledger.ack(seq, 0, offset)
    log = {0: [(0, 0), (1, 2), (4, 5)]}  # one hole, [2, 3]: where records 3 and 4 were
    for offset, seq in log[0]:
        ledger.deliver(0, offset, record_value(seq))
    t = ledger.tally(log)
    assert (t.lost, t.broker_lost, t.lost_examples) == (1, 2, [1])  # record 1 left no hole
    assert t.lost_detail[0]["note"].startswith("DUPLICATE_SEQUENCE_NUMBER but no hole")


def _dup_without_hole() -> Ledger:
    """Records 0-3 acked; 1 and 2 answered DUPLICATE_SEQUENCE_NUMBER, absent, and no hole."""
    ledger = Ledger("t")
    ledger.sent(4)
    for seq, offset in ((0, 0), (1, -1), (2, -1), (3, 1)):
        ledger.ack(seq, 0, offset)
    ledger.deliver(0, 0, record_value(0))
    ledger.deliver(0, 1, record_value(3))
    return ledger


def _capture(*sent: tuple[list[int], int, int | None]) -> list[ProduceWrite]:
    """Produce writes on t[0] (record numbers, base sequence, error or None), producer 7 epoch 0."""
    out = []
    for order, (numbers, sequence, error) in enumerate(sent):
        w = ProduceWrite(order, 1, order, 0.0, "t", 0, 7, 0, sequence, len(numbers), f"{numbers}", numbers)
        w.error, w.base_offset = error, (-1 if error else 0) if error is not None else None
        out.append(w)
    return out


def test_without_a_hole_the_wire_capture_decides_whose_loss_it_is() -> None:
    log = {0: [(0, 0), (1, 3)]}  # no hole: 1 and 2 took no offsets
    # The same records, same sequence, sent before the restart and never answered: Tansu's.
    broker = _dup_without_hole().tally(log, _capture(([0], 0, 0), ([1, 2], 1, None), ([1, 2], 1, 46)))
    assert (broker.lost, broker.broker_lost) == (0, 2)
    (ev,) = broker.evidence
    assert ev["log_hole"] is None and ev["wire"]["verdict"] == "broker"
    assert "DUPLICATE_SEQUENCE_NUMBER" in ev["answer"]
    # Sequence 1 first carried other records (9, 8): the producer reused it, the client's loss.
    client = _dup_without_hole().tally(log, _capture(([0], 0, 0), ([9, 8], 1, None), ([1, 2], 1, 46)))
    assert (client.lost, client.broker_lost) == (2, 0)
    assert client.lost_detail[0]["wire"]["verdict"] == "client"
    # No capture at all: no excuse.
    assert _dup_without_hole().tally(log).lost == 2


def test_without_a_hole_or_an_independent_read_a_loss_stays_the_clients() -> None:
    ledger = Ledger("t")
    ledger.sent(2)
    ledger.ack(0, 0, 0)
    ledger.ack(1, 0, -1)
    ledger.deliver(0, 0, record_value(0))
    assert ledger.tally({0: [(0, 0)]}).lost == 1  # no hole in the log
    assert ledger.tally(None).lost == 1  # nothing read independently: no excuse


def test_duplicates_and_corrupt_deliveries_are_counted() -> None:
    ledger = Ledger("t")
    ledger.sent(2)
    ledger.ack(0, 0, 0)
    ledger.ack(1, 0, 1)
    ledger.deliver(0, 0, record_value(0))
    ledger.deliver(0, 1, record_value(1))
    ledger.deliver(0, 2, record_value(1))  # stored twice
    ledger.deliver(0, 0, record_value(0))  # the same offset again: a replay, not a duplicate
    ledger.deliver(0, 3, b"garbage")
    t = ledger.tally(None)
    assert (t.duplicated, t.redelivered, t.corrupt_delivered, t.lost) == (1, 1, 1, 0)
    assert not t.clean


def test_partition_progress_shows_where_the_consumer_fell_behind() -> None:
    ledger = Ledger("t")
    for seq in range(6):
        ledger.ack(seq, seq % 2, seq // 2)
    for seq in (0, 2, 4, 1):  # partition 1 stalled after its first record
        ledger.deliver(seq % 2, seq // 2, record_value(seq))
    progress = ledger.partition_progress()
    assert progress[0] == {"acked": 3, "acked_max_offset": 2, "delivered": 3, "delivered_max_offset": 2}
    assert progress[1] == {"acked": 3, "acked_max_offset": 2, "delivered": 1, "delivered_max_offset": 0}


def test_records_beyond_both_readers_are_unread_not_lost() -> None:
    # Partition 0: our consumer stalled at offset 4, the independent read at 2 -> records at
    # offsets 5.. (and one placed nowhere, offset -1) are unread. Partition 1: the independent
    # read finished it, so what our consumer missed there stays lost. Partition 2: drained.
    undelivered = [(10, 0, 5), (11, 0, 6), (12, 0, -1), (13, 0, 3), (20, 1, 9), (30, 2, 1)]
    ours = {0: {"delivered_max_offset": 4}, 1: {"delivered_max_offset": 2}, 2: {}}
    independent = {
        0: {"sentinel": False, "last_offset": 2},
        1: {"sentinel": True, "last_offset": 10},
        2: {"sentinel": False, "last_offset": None},
    }
    seqs, reach = unread_by_both(undelivered, ours, independent, drained={2})
    assert seqs == [10, 11, 12]  # 13 at offset 3 was within reach: lost, not unread
    assert reach == {0: 4}


def test_unread_alone_blocks_and_never_passes() -> None:
    outcome = Outcome("broker-restart-sigkill", "full", 1, {})
    outcome.cycles.append({"cycle": 0, "passed": True})
    outcome.tally.unread = 5
    outcome.judge([])
    assert outcome.verdict == BLOCKED and "unread" in outcome.reason
    failing = Outcome("broker-restart-sigkill", "full", 1, {})
    failing.tally.unread, failing.tally.lost, failing.tally.lost_examples = 5, 1, [7]
    failing.judge([])
    assert failing.verdict == FAIL


@pytest.mark.broker
@pytest.mark.timeout(120)
def test_independent_read_reports_each_partitions_progress(bootstrap_servers: str, new_topic: Any) -> None:
    # A partition whose sentinel never comes: the read gives no log (no loss can be excused),
    # and its progress says how far it got while the others say they reached their sentinel.
    from confluent_kafka import Producer

    topic = new_topic(partitions=2)
    producer = Producer({"bootstrap.servers": bootstrap_servers})
    for seq in range(5):
        producer.produce(topic, record_value(seq), partition=0)
    producer.produce(topic, SENTINEL, partition=0)
    for seq in range(5, 8):
        producer.produce(topic, record_value(seq), partition=1)
    assert producer.flush(30) == 0
    read = read_log_report(bootstrap_servers, topic, 2, timeout=6)
    assert read.log is None
    assert read.progress[0]["sentinel"] and read.progress[0]["read"] == 5
    assert not read.progress[1]["sentinel"]
    assert read.progress[1]["read"] == 3 and read.progress[1]["last_offset"] == 2
    assert read.progress[1]["idle_s"] > 0


@pytest.mark.timeout(120)
def test_a_retry_appended_twice_is_the_brokers_duplicate_and_new_data_the_clients(mock_cluster: Any) -> None:
    # The mock cluster checks idempotent sequences only for transactional producers, so it
    # appends a retried batch (same producer id, epoch, base sequence) a second time; Kafka
    # would answer DUPLICATE_SEQUENCE_NUMBER. Both copies' headers, read back from the log, show
    # it; a copy sent as new data (another sequence) stays the client's duplicate.
    from kafka_core import KafkaClient, KafkaProducer
    from kafka_core.codec import encode_record_batch
    from kafka_core.protocol.messages import ProduceRequest

    topic = mock_cluster.create_topic("dups", partitions=1)
    with KafkaProducer(bootstrap_servers=mock_cluster.bootstrap, idempotent=True, acks="all") as producer:
        producer.send(topic, record_value(0), partition=0).result()
        producer.send(topic, record_value(1), partition=0).result()
    with KafkaClient(mock_cluster.bootstrap) as client:
        first = batch_at(client, topic, 0, 0)
        assert first is not None and first.producer_id >= 0 and first.base_sequence == 0

        def append(value: bytes, sequence: int) -> None:
            batch = encode_record_batch(
                [(None, value)],
                producer_id=first.producer_id,
                producer_epoch=first.producer_epoch,
                base_sequence=sequence,
            )
            request = ProduceRequest(
                transactional_id=None,
                acks=-1,
                timeout_ms=5_000,
                topic_data=[
                    ProduceRequest.TopicProduceData(
                        name=topic,
                        partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)],
                    )
                ],
            )
            response = client.send_to_leader(topic, 0, request)
            assert response.responses[0].partition_responses[0].error_code == 0

        append(record_value(0), 0)  # record 0's batch again, as a retry carries it: offset 2
        append(record_value(1), 7)  # record 1 again under a sequence of its own: offset 3
    ledger = Ledger(topic)
    for seq, offset in ((0, 0), (1, 1), (0, 2), (1, 3)):
        ledger.deliver(0, offset, record_value(seq))
    duplicates = ledger.duplicates(None)
    assert duplicates == {0: [(0, 0), (0, 2)], 1: [(0, 1), (0, 3)]}
    broker, evidence = judge_duplicates(mock_cluster.bootstrap, topic, duplicates)
    assert broker == [0]
    verdicts = {e["seq"]: e["verdict"] for e in evidence}
    assert verdicts == {0: "broker", 1: "client"}
    copies = next(e for e in evidence if e["seq"] == 0)["copies"]
    assert copies[0]["batch"]["base_sequence"] == copies[1]["batch"]["base_sequence"] == 0


def test_batch_headers_are_read_back_from_tansu(bootstrap_servers: str, new_topic: Any) -> None:
    """The evidence reader gets the batch holding an offset on the test broker too (it asked
    with max_wait_ms=0, which Tansu answers with no partitions at all, so it found nothing)."""
    from kafka_core import KafkaClient, KafkaProducer

    topic = new_topic(1)
    with KafkaProducer(bootstrap_servers=bootstrap_servers, idempotent=True, acks="all") as producer:
        for i in range(3):
            producer.send(topic, record_value(i), partition=0)
        producer.flush(30)
    with KafkaClient(bootstrap_servers) as client:
        batch = batch_at(client, topic, 0, 1)
    assert batch is not None and batch.base_offset <= 1 <= batch.last_offset
    assert batch.producer_id >= 0 and batch.base_sequence == batch.base_offset


def test_recovery_is_timed_to_the_first_acknowledgement_not_the_last() -> None:
    # A producer that resumed at once while the consumer never did was booked as resuming at
    # the end of the wait (the latest acknowledgement): "the producer resumed only after ~60 s".
    wl = Workload("127.0.0.1:9", "t", 1)  # nothing started: only its books are used
    since = time.monotonic()

    def acks() -> None:
        for seq in range(40):
            wl.ledger.ack(seq, 0, seq)
            time.sleep(0.05)

    feeder = threading.Thread(target=acks)
    feeder.start()
    ack, got = wl.wait_progress(since, 1.5)
    feeder.join()
    assert got is None  # nothing was delivered
    assert ack is not None and ack < 0.5, ack


def test_a_missing_broker_binary_is_blocked_not_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TANSU_BIN", str(tmp_path / "no-tansu-here"))
    outcome = run_capability("cold-start", Settings("short", 1))
    assert outcome.verdict == BLOCKED
    assert "no Tansu binary" in outcome.reason and "no-tansu-here" in outcome.reason
    doc = json.loads(write_artifact(outcome, tmp_path).read_text())
    assert doc["verdict"] == BLOCKED and doc["pass_count"] == 0
    assert main(["run", "--scenario", "cold-start", "--out", str(tmp_path)]) == 2


def test_an_unloadable_librdkafka_blocks_the_mock_capabilities(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kafka_core.devtools.chaos import mock_scenarios
    from kafka_core.devtools.mockcluster import MockClusterError

    def broken() -> str:
        raise MockClusterError("cannot load /x/librdkafka.so.1: no such file")

    monkeypatch.setattr(mock_scenarios, "librdkafka_version", broken)
    outcome = run_capability("mock-leader-change", Settings("short", 1))
    assert outcome.verdict == BLOCKED and outcome.pass_count == 0
    assert "librdkafka's mock cluster cannot be loaded" in outcome.reason
    assert "/x/librdkafka.so.1: no such file" in outcome.reason


# --- every capability, short mode, real broker ---


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    configured = os.environ.get("CHAOS_ARTIFACTS")
    return Path(configured) if configured else tmp_path_factory.mktemp("chaos-artifacts")


@pytest.mark.broker
@pytest.mark.timeout(240)
@pytest.mark.parametrize("capability", [pytest.param(c, id=c) for c in CAPABILITIES])
def test_capability_short_run(capability: str, artifacts: Path) -> None:
    outcome = run_capability(capability, Settings("short", 13))
    doc = json.loads(write_artifact(outcome, artifacts).read_text())
    assert doc.keys() >= FIELDS, FIELDS - doc.keys()
    assert doc["capability"] == capability and doc["mode"] == "short"
    if outcome.verdict == BLOCKED:  # a prerequisite is missing: never a pass, never silent
        unavailable(f"what the {capability} capability runs on", f"BLOCKED: {outcome.reason}")
    if capability.startswith("mock-"):  # librdkafka's mock cluster, never Tansu
        assert doc["broker"]["name"] == "librdkafka-mock" and doc["broker"]["version"], doc["broker"]
        assert doc["cycles_run"] == len([c for c in doc["cycles"] if "fault" in c]) >= 2
    else:
        assert doc["broker"]["name"] == "tansu" and doc["broker"]["version"].startswith("tansu")
    assert doc["lost"] == 0, outcome.reason
    assert doc["duplicated"] == 0, outcome.reason
    assert doc["corrupt_delivered"] == 0, outcome.reason
    for ev in doc["broker_lost_evidence"]:  # Tansu's loss, told apart only with its evidence
        assert "DUPLICATE_SEQUENCE_NUMBER" in ev["answer"]
        assert ev["log_hole"] or ev["wire"]["verdict"] == "broker", ev
    assert doc["acknowledged"] > 0 and doc["delivered"] > 0
    assert doc["cycles_run"] >= 1 and doc["recovery_times_s"]
    assert outcome.verdict == PASS, outcome.reason
    assert doc["pass_count"] == doc["cycles_run"]
    assert outcome.verdict != FAIL
