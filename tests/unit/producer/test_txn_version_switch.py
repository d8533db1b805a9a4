"""The transaction protocol (KIP-890 part 2) follows the cluster's finalized ``transaction.version``
between transactions, never inside one, through the in-memory broker (tests/fakes/txn_v2_broker.py):
raised to 2 by an operator, the next transaction is v2 after an epoch bump (as the Java client);
lowered to 1, the next transaction is v1 again; the coordinator is re-asked at most once per
``FEATURE_REFRESH_S`` and an answer of an older features epoch is ignored."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest
from fakes.txn_producer import call_names, run_txn
from fakes.txn_v2_broker import TxnV2Broker

from kafka_core.errors import KafkaConnectionError
from kafka_core.producer import AsyncKafkaProducer
from kafka_core.producer.transactions import version as txn_version
from kafka_core.protocol import ApiKey


class FeatureBroker(TxnV2Broker):
    """TxnV2Broker counting its ApiVersions answers, each with a finalized-features ``epoch``."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.api_versions_asked = 0
        self.epoch = 10
        self.api_versions_down = False  # ApiVersions answers are lost

    async def send(self, node: int, body: Any, version: int | None = None, **kw: Any) -> Any:
        if body.API_KEY == ApiKey.API_VERSIONS:
            self.api_versions_asked += 1
            if self.api_versions_down:
                raise KafkaConnectionError("injected: ApiVersions answer lost")
            features = [SimpleNamespace(name=k, max_version_level=v) for k, v in self.finalized.items()]
            return SimpleNamespace(
                error_code=0, finalized_features=features, finalized_features_epoch=self.epoch
            )
        return await super().send(node, body, version, **kw)

    def set_level(self, level: int) -> None:
        """An operator's kafka-features.sh: a new level under a newer features epoch."""
        self.finalized["transaction.version"] = level
        self.epoch += 1


@pytest.fixture
def refresh_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(txn_version, "FEATURE_REFRESH_S", 0.0, raising=False)


def _versions(broker: FeatureBroker, since: int) -> list[tuple[str, int]]:
    return [(n, v) for n, v in broker.versions_used[since:] if n in ("PRODUCE", "END_TXN")]


async def _send(p: AsyncKafkaProducer, value: bytes) -> None:
    f = await p.send("t", value, partition=0)
    await p.flush(5)
    assert f.exception() is None


async def _level_set_inside_a_transaction(
    p: AsyncKafkaProducer, broker: FeatureBroker, level: int, *, commit: bool
) -> dict[str, Any]:
    """init; a transaction during which an operator sets transaction.version ``level`` (it keeps
    the protocol it began with), committed or aborted; then one more transaction. What each
    used: ``v0``/``id0`` after init, ``v_mid`` inside the first, ``calls1``/``versions1``/``v1``/
    ``id1`` of the first and after it, ``calls2``/``versions2``/``id2`` of the second."""
    await p.init_transactions()
    seen: dict[str, Any] = {"v0": p.transaction_version, "id0": p.producer_id_and_epoch}
    mark = (len(broker.versions_used), len(broker.calls))
    p.begin_transaction()
    await _send(p, b"a")
    broker.set_level(level)
    await _send(p, b"b")
    seen["v_mid"] = p.transaction_version
    await (p.commit_transaction() if commit else p.abort_transaction())
    seen |= {"calls1": call_names(broker, mark[1]), "versions1": _versions(broker, mark[0])}
    seen |= {"v1": p.transaction_version, "id1": p.producer_id_and_epoch}
    mark = (len(broker.versions_used), len(broker.calls))
    p.begin_transaction()
    await _send(p, b"c")
    await p.commit_transaction()
    seen |= {"calls2": call_names(broker, mark[1]), "versions2": _versions(broker, mark[0])}
    seen["id2"] = p.producer_id_and_epoch
    return seen


@pytest.mark.usefixtures("refresh_every_time")
def test_an_upgrade_to_v2_takes_effect_at_the_next_transaction_after_an_epoch_bump(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broker = FeatureBroker()
    broker.set_level(1)

    with caplog.at_level(logging.INFO, logger="kafka_core.producer"):
        seen = run_txn(broker, lambda p: _level_set_inside_a_transaction(p, broker, 2, commit=True))
    assert (seen["v0"], seen["v_mid"]) == (1, 1)  # raised while the transaction is open: it stays v1
    assert "AddPartitionsToTxn" in seen["calls1"]  # the first transaction was v1
    assert seen["versions1"] == [("PRODUCE", 11), ("PRODUCE", 11), ("END_TXN", 4)]  # ended as it began
    assert seen["v1"] == 2  # the next transaction is v2 ...
    id0, id1 = seen["id0"], seen["id1"]
    assert seen["calls1"][-1] == "InitProducerId" and broker.init_calls[-1] == id0  # ... after a bump
    assert id1 == (id0[0], id0[1] + 1)
    assert "AddPartitionsToTxn" not in seen["calls2"]  # v2: the Produce adds the partition
    assert seen["versions2"] == [("PRODUCE", 12), ("END_TXN", 5)]
    assert seen["id2"] == (id1[0], id1[1] + 1)  # EndTxn v5 bumped it
    assert broker.logs[0] == [b"a", b"b", b"c"]
    assert any("transactions v2 from the next transaction" in r.getMessage() for r in caplog.records)


@pytest.mark.usefixtures("refresh_every_time")
def test_a_downgrade_to_v1_takes_effect_at_the_next_transaction_not_inside_one() -> None:
    broker = FeatureBroker()

    seen = run_txn(broker, lambda p: _level_set_inside_a_transaction(p, broker, 1, commit=False))
    assert (seen["v0"], seen["v_mid"]) == (2, 2)  # lowered while the transaction is open: it stays v2
    assert "AddPartitionsToTxn" not in seen["calls1"]
    assert seen["versions1"] == [("PRODUCE", 12), ("PRODUCE", 12), ("END_TXN", 5)]
    assert seen["v1"] == 1
    assert "InitProducerId" not in seen["calls1"]  # no bump is needed to go down
    assert "AddPartitionsToTxn" in seen["calls2"]  # v1 again
    assert seen["versions2"] == [("PRODUCE", 11), ("END_TXN", 4)]
    assert seen["id2"] == seen["id1"]  # a v1 EndTxn keeps the epoch
    assert broker.logs[0] == [b"a", b"b", b"c"]  # the log keeps the aborted records too


def test_the_cluster_is_re_asked_at_most_once_per_refresh_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    broker = FeatureBroker()
    monkeypatch.setattr(txn_version, "FEATURE_REFRESH_S", 3600.0, raising=False)

    async def body(p: AsyncKafkaProducer) -> tuple[int, int, int]:
        await p.init_transactions()
        asked = broker.api_versions_asked
        broker.set_level(1)
        for i in range(3):
            p.begin_transaction()
            await _send(p, b"%d" % i)
            await p.commit_transaction()
        return asked, broker.api_versions_asked, p.transaction_version

    asked_at_init, asked_after, version = run_txn(broker, body)
    assert asked_at_init == 1
    assert asked_after == asked_at_init  # no round trip per transaction
    assert version == 2  # not seen yet: within the interval


@pytest.mark.usefixtures("refresh_every_time")
def test_an_answer_of_an_older_features_epoch_is_ignored() -> None:
    broker = FeatureBroker()

    async def body(p: AsyncKafkaProducer) -> list[int]:
        await p.init_transactions()
        seen = [p.transaction_version]
        broker.finalized["transaction.version"] = 1
        broker.epoch -= 1  # a broker behind on the cluster's metadata
        p.begin_transaction()
        await _send(p, b"a")
        await p.commit_transaction()
        seen.append(p.transaction_version)
        broker.epoch += 2  # caught up, and the level really is 1 now
        p.begin_transaction()
        await _send(p, b"b")
        await p.commit_transaction()
        seen.append(p.transaction_version)
        return seen

    assert run_txn(broker, body) == [2, 2, 1]


@pytest.mark.usefixtures("refresh_every_time")
def test_a_failed_re_read_keeps_the_version_and_the_commit_succeeds() -> None:
    broker = FeatureBroker()

    async def body(p: AsyncKafkaProducer) -> list[Any]:
        await p.init_transactions()
        broker.api_versions_down = True
        broker.set_level(1)
        p.begin_transaction()
        await _send(p, b"a")
        await p.commit_transaction()
        seen: list[Any] = [p.transaction_version, p.transaction_state.value]
        broker.api_versions_down = False
        p.begin_transaction()
        await _send(p, b"b")
        await p.commit_transaction()
        seen.append(p.transaction_version)
        return seen

    assert run_txn(broker, body) == [2, "ready", 1]
